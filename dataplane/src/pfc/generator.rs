//! XOFF generation for the PGs of one ingress port: when to send XOFF, refresh it before the
//! peer's timer runs out, and when XON is due. Owned by the ingress side.

use crate::wire::pfc::quanta_to_ns;
use controlplane::{PfcConfig, NUM_TC};

/// XOFF generation for the PGs of one ingress port.
#[derive(Debug, Clone)]
pub struct PfcGenerator {
    pause_quanta: u16,
    /// Re-send XOFF this long after the last one while still congested, so the peer's timer
    /// never runs out.
    refresh_ns: u64,
    xoff: u8,
    next_refresh: [u64; NUM_TC],
}

impl PfcGenerator {
    /// A generator with no PG in XOFF; the refresh comes at `refresh_fraction` of the pause time at
    /// `speed_bps`.
    pub fn new(cfg: &PfcConfig, speed_bps: u64) -> Self {
        let pause_ns = quanta_to_ns(cfg.pause_quanta, speed_bps);
        let refresh_ns = ((pause_ns as f64 * cfg.refresh_fraction) as u64).max(1);
        PfcGenerator {
            pause_quanta: cfg.pause_quanta,
            refresh_ns,
            xoff: 0,
            next_refresh: [0; NUM_TC],
        }
    }

    /// New pause time and refresh interval; XOFF state and pending refreshes are kept.
    pub fn reconfigure(&mut self, cfg: &PfcConfig, speed_bps: u64) {
        let fresh = PfcGenerator::new(cfg, speed_bps);
        self.pause_quanta = fresh.pause_quanta;
        self.refresh_ns = fresh.refresh_ns;
    }

    /// Pause time each XOFF carries, in 512-bit-time quanta.
    pub fn pause_quanta(&self) -> u16 {
        self.pause_quanta
    }

    /// Whether any PG is in XOFF (refresh has something to do).
    pub fn any_xoff(&self) -> bool {
        self.xoff != 0
    }

    /// Whether PG `pg` (0..8) is in XOFF.
    pub fn is_xoff(&self, pg: usize) -> bool {
        self.xoff & (1 << pg) != 0
    }

    /// Enters XOFF; false if already there (no new frame needed).
    pub fn start_xoff(&mut self, pg: usize, now: u64) -> bool {
        if self.is_xoff(pg) {
            return false;
        }
        self.xoff |= 1 << pg;
        self.next_refresh[pg] = now + self.refresh_ns;
        true
    }

    /// Leaves XOFF (the caller sends the XON); its refresh is dropped.
    pub fn stop_xoff(&mut self, pg: usize) {
        self.xoff &= !(1 << pg);
    }

    /// Whether PG `pg` is in XOFF and its refresh is due at `now` (ns).
    pub fn refresh_due(&self, pg: usize, now: u64) -> bool {
        self.is_xoff(pg) && now >= self.next_refresh[pg]
    }

    /// A refresh XOFF for `pg` was sent at `now`: the next is due one refresh interval later.
    pub fn refreshed(&mut self, pg: usize, now: u64) {
        self.next_refresh[pg] = now + self.refresh_ns;
    }

    /// The earliest refresh due over the PGs in XOFF (ns), for the caller's timer; `None` when none
    /// is.
    pub fn next_refresh(&self) -> Option<u64> {
        (0..NUM_TC)
            .filter(|&pg| self.is_xoff(pg))
            .map(|pg| self.next_refresh[pg])
            .min()
    }
}

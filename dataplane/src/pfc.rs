//! PFC state machines (802.1Qbb): what the switch sends (XOFF, refresh, XON per ingress PG),
//! what it obeys (pause timers per egress priority) and the watchdog that catches a queue
//! paused for too long (SONiC pfcwd). Frame encoding lives in `packet::pfc`; here is only time.

use crate::packet::pfc::quanta_to_ns;
use controlplane::{PfcConfig, WatchdogAction, WatchdogConfig, NUM_TC};

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

    pub fn pause_quanta(&self) -> u16 {
        self.pause_quanta
    }

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

    pub fn stop_xoff(&mut self, pg: usize) {
        self.xoff &= !(1 << pg);
    }

    pub fn refresh_due(&self, pg: usize, now: u64) -> bool {
        self.is_xoff(pg) && now >= self.next_refresh[pg]
    }

    pub fn refreshed(&mut self, pg: usize, now: u64) {
        self.next_refresh[pg] = now + self.refresh_ns;
    }

    pub fn next_refresh(&self) -> Option<u64> {
        (0..NUM_TC)
            .filter(|&pg| self.is_xoff(pg))
            .map(|pg| self.next_refresh[pg])
            .min()
    }
}

/// Pause timers of one egress port, per priority, from received PFC/PAUSE frames.
#[derive(Debug, Clone, Default)]
pub struct PauseState {
    until: [u64; NUM_TC],
    since: [u64; NUM_TC],
}

impl PauseState {
    /// Applies a received pause of `dur_ns` (0 = XON) for `prio` at `now`, adding finished
    /// pause intervals to `paused_ns`.
    pub fn apply(&mut self, prio: usize, now: u64, dur_ns: u64, paused_ns: &mut [u64; NUM_TC]) {
        let active = self.until[prio] > now;
        if active {
            // Close the interval at `now`; a new one starts below if this is another XOFF.
            paused_ns[prio] += now - self.since[prio];
        } else if self.until[prio] > self.since[prio] {
            paused_ns[prio] += self.until[prio] - self.since[prio];
        }
        self.since[prio] = now;
        self.until[prio] = now + dur_ns;
    }

    /// Priorities paused at `now`, and the time until which that answer holds (the earliest
    /// expiry still ahead): lets the transmit loop test pauses once per burst, not per frame.
    #[inline]
    pub fn paused_prios(&self, now: u64) -> (u8, u64) {
        let mut mask = 0u8;
        let mut valid_until = u64::MAX;
        for p in 0..NUM_TC {
            if self.until[p] > now {
                mask |= 1 << p;
                valid_until = valid_until.min(self.until[p]);
            }
        }
        (mask, valid_until)
    }

    #[inline]
    pub fn any_paused(&self, prios: u8, now: u64) -> bool {
        prios != 0 && (0..NUM_TC).any(|p| prios & (1 << p) != 0 && self.until[p] > now)
    }

    /// When every priority in `prios` will have expired, from `now`.
    pub fn resume_time(&self, prios: u8, now: u64) -> u64 {
        (0..NUM_TC)
            .filter(|p| prios & (1 << p) != 0)
            .map(|p| self.until[p])
            .max()
            .unwrap_or(now)
            .max(now)
    }

    /// Paused time per priority including the interval still running at `now`.
    pub fn total_paused(&self, now: u64, closed: &[u64; NUM_TC]) -> [u64; NUM_TC] {
        std::array::from_fn(|p| {
            let open = if self.until[p] > self.since[p] {
                self.until[p].min(now).saturating_sub(self.since[p])
            } else {
                0
            };
            closed[p] + open
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchdogEvent {
    Storm,
    Restored,
}

/// The PFC watchdog of one egress port.
#[derive(Debug, Clone)]
pub struct Watchdog {
    cfg: WatchdogConfig,
    /// Queues that carry PFC priorities: the only ones a storm can hit.
    watched: u8,
    stalled_since: [Option<u64>; NUM_TC],
    storm: u8,
    last_pfc: [u64; NUM_TC],
}

impl Watchdog {
    pub fn new(cfg: WatchdogConfig, watched: u8) -> Self {
        Watchdog {
            cfg,
            watched,
            stalled_since: [None; NUM_TC],
            storm: 0,
            last_pfc: [0; NUM_TC],
        }
    }

    /// New times, action and watched queues; storms in progress stay until restored.
    pub fn reconfigure(&mut self, cfg: WatchdogConfig, watched: u8) {
        self.cfg = cfg;
        self.watched = watched;
    }

    fn in_storm(&self, q: usize) -> bool {
        self.storm & (1 << q) != 0
    }

    /// The drop action is in force on `q`: its frames are dropped instead of queued.
    #[inline]
    pub fn drops(&self, q: usize) -> bool {
        self.in_storm(q) && self.cfg.action == WatchdogAction::Drop
    }

    /// Queues that transmit as if not paused (drop and forward actions), as a mask.
    #[inline]
    pub fn pause_override(&self) -> u8 {
        if self.cfg.action == WatchdogAction::Alert {
            0
        } else {
            self.storm
        }
    }

    /// The queue transmits as if not paused (drop and forward actions).
    #[inline]
    pub fn ignores_pause(&self, q: usize) -> bool {
        self.in_storm(q) && self.cfg.action != WatchdogAction::Alert
    }

    pub fn pfc_received(&mut self, prio: usize, now: u64) {
        self.last_pfc[prio] = now;
    }

    fn last_pfc_for(&self, prios: u8) -> u64 {
        (0..NUM_TC)
            .filter(|p| prios & (1 << p) != 0)
            .map(|p| self.last_pfc[p])
            .max()
            .unwrap_or(0)
    }

    /// Advances queue `q`'s state: `stalled` = it holds frames and is paused right now.
    pub fn poll(&mut self, q: usize, stalled: bool, prios: u8, now: u64) -> Option<WatchdogEvent> {
        if self.watched & (1 << q) == 0 {
            return None;
        }
        if self.in_storm(q) {
            if now.saturating_sub(self.last_pfc_for(prios)) >= self.cfg.restoration_ns {
                self.storm &= !(1 << q);
                self.stalled_since[q] = None;
                return Some(WatchdogEvent::Restored);
            }
            return None;
        }
        if !stalled {
            self.stalled_since[q] = None;
            return None;
        }
        let since = *self.stalled_since[q].get_or_insert(now);
        if now - since >= self.cfg.detection_ns {
            self.storm |= 1 << q;
            return Some(WatchdogEvent::Storm);
        }
        None
    }

    /// When `q` would be declared stormed if it stays stalled.
    pub fn deadline(&self, q: usize) -> Option<u64> {
        if self.in_storm(q) {
            return None;
        }
        self.stalled_since[q].map(|s| s + self.cfg.detection_ns)
    }

    /// When a stormed `q` would be restored if no PFC arrives. Needs the queue's priorities,
    /// so it is approximated by the newest PFC on any priority (never later than the truth).
    pub fn restore_deadline(&self, q: usize) -> Option<u64> {
        self.in_storm(q)
            .then(|| self.last_pfc.iter().copied().max().unwrap_or(0) + self.cfg.restoration_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_accounting_closes_intervals() {
        let mut s = PauseState::default();
        let mut closed = [0u64; NUM_TC];
        s.apply(3, 100, 1000, &mut closed);
        assert!(s.any_paused(1 << 3, 500));
        assert!(!s.any_paused(1 << 2, 500));
        // XON at 400: paused 300 ns.
        s.apply(3, 400, 0, &mut closed);
        assert!(!s.any_paused(1 << 3, 400));
        assert_eq!(s.total_paused(10_000, &closed)[3], 300);
        // XOFF that simply expires: 50 ns more.
        s.apply(3, 1_000, 50, &mut closed);
        assert_eq!(s.total_paused(10_000, &closed)[3], 350);
        assert_eq!(s.resume_time(1 << 3, 1_010), 1_050);
    }

    #[test]
    fn watchdog_detects_and_restores() {
        let cfg = WatchdogConfig {
            detection_ns: 100,
            restoration_ns: 200,
            action: WatchdogAction::Drop,
        };
        let mut w = Watchdog::new(cfg, 1 << 3);
        assert_eq!(w.poll(3, true, 1 << 3, 0), None);
        assert_eq!(w.deadline(3), Some(100));
        assert_eq!(w.poll(3, true, 1 << 3, 99), None);
        w.pfc_received(3, 99);
        assert_eq!(w.poll(3, true, 1 << 3, 100), Some(WatchdogEvent::Storm));
        assert!(w.drops(3) && w.ignores_pause(3));
        assert_eq!(w.poll(3, true, 1 << 3, 250), None, "PFC 151 ns ago");
        assert_eq!(w.poll(3, true, 1 << 3, 299), Some(WatchdogEvent::Restored));
        // Unwatched queues never storm.
        assert_eq!(w.poll(0, true, 1, 10_000), None);
    }
}

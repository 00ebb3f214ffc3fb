//! Received PFC and 802.3x PAUSE at a NIC: which priorities are paused until when, and for how
//! long in total. Time is the caller's (`now`), so the same state serves rocegen's real-time
//! hosts and the fabric's virtual-time ones.

use crate::wire::pfc::quanta_to_ns;
use crate::wire::MacControl;

/// Received PFC/PAUSE: which priorities are paused until when, and for how long in total.
#[derive(Debug, Clone, Default)]
pub struct PauseRx {
    until: [u64; 8],
    since: [Option<u64>; 8],
    /// Time paused per priority (closed intervals, plus the open one at `finish`).
    pub paused_ns: [u64; 8],
    pub pfc_frames: u64,
    pub pause_frames: u64,
    /// PFC XOFF (non-zero time) per priority.
    pub xoff: [u64; 8],
    /// PFC XON (zero time) per priority.
    pub xon: [u64; 8],
}

impl PauseRx {
    /// A decoded MAC control frame arrived at `now`; quanta are 512 bit times at `link_bps`.
    pub fn on_mac_control(&mut self, mc: MacControl, now: u64, link_bps: u64) {
        match mc {
            MacControl::Pfc { enable, times } => {
                self.pfc_frames += 1;
                for (p, &t) in times.iter().enumerate() {
                    if enable & (1 << p) != 0 {
                        if t == 0 {
                            self.xon[p] += 1;
                        } else {
                            self.xoff[p] += 1;
                        }
                        self.set(p, t, now, link_bps);
                    }
                }
            }
            MacControl::Pause { time } => {
                self.pause_frames += 1;
                for p in 0..8 {
                    self.set(p, time, now, link_bps);
                }
            }
            MacControl::Other { .. } => {}
        }
    }

    fn set(&mut self, p: usize, quanta: u16, now: u64, link_bps: u64) {
        self.settle(p, now);
        if quanta == 0 {
            if let Some(s) = self.since[p].take() {
                self.paused_ns[p] += now.saturating_sub(s);
            }
            self.until[p] = 0;
        } else {
            if self.since[p].is_none() {
                self.since[p] = Some(now);
            }
            self.until[p] = now + quanta_to_ns(quanta, link_bps);
        }
    }

    /// Closes an expired pause.
    fn settle(&mut self, p: usize, now: u64) {
        if let Some(s) = self.since[p] {
            if now >= self.until[p] {
                self.paused_ns[p] += self.until[p].saturating_sub(s);
                self.since[p] = None;
            }
        }
    }

    /// Whether priority `p` is paused at `now`.
    #[inline]
    pub fn is_paused(&mut self, p: u8, now: u64) -> bool {
        let p = usize::from(p & 7);
        self.settle(p, now);
        self.since[p].is_some()
    }

    /// When priority `p`'s pause expires (0 if not paused).
    pub fn until(&self, p: u8) -> u64 {
        self.until[usize::from(p & 7)]
    }

    /// Closes every pause still open at `now` (end of run).
    pub fn finish(&mut self, now: u64) {
        for p in 0..8 {
            self.settle(p, now);
            if let Some(s) = self.since[p].take() {
                self.paused_ns[p] += now.saturating_sub(s);
            }
        }
    }
}

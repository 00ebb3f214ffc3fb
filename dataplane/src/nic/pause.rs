//! Received PFC and 802.3x PAUSE at a NIC: which priorities are paused until when, and for how
//! long in total. Time is the caller's (`now`), so the same state serves rocegen's real-time
//! hosts and the fabric's virtual-time ones.

use crate::pfc::PauseState;
use crate::wire::pfc::quanta_to_ns;
use crate::wire::MacControl;

/// Received PFC/PAUSE: which priorities are paused until when (the switch's own timers,
/// [`PauseState`]), and for how long in total.
#[derive(Debug, Clone, Default)]
pub struct PauseRx {
    timers: PauseState,
    /// Time paused per priority (closed intervals, plus the open one at `finish`).
    pub paused_ns: [u64; 8],
    /// PFC frames received (802.1Qbb, per-priority).
    pub pfc_frames: u64,
    /// 802.3x PAUSE frames received (every priority).
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
        self.timers
            .apply(p, now, quanta_to_ns(quanta, link_bps), &mut self.paused_ns);
    }

    /// Whether priority `p` is paused at `now`.
    #[inline]
    pub fn is_paused(&self, p: u8, now: u64) -> bool {
        self.timers.is_paused(usize::from(p & 7), now)
    }

    /// When priority `p`'s pause expires (at or before now if it is not paused).
    pub fn until(&self, p: u8) -> u64 {
        self.timers.until(usize::from(p & 7))
    }

    /// Time paused per priority up to `now`, the pauses still running included.
    pub fn total_paused(&self, now: u64) -> [u64; 8] {
        self.timers.total_paused(now, &self.paused_ns)
    }

    /// Adds the pauses still open at `now` to `paused_ns` (end of run).
    pub fn finish(&mut self, now: u64) {
        self.timers.close(now, &mut self.paused_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pfc(prio: usize, quanta: u16) -> MacControl {
        let mut times = [0u16; 8];
        times[prio] = quanta;
        MacControl::Pfc {
            enable: 1 << prio,
            times,
        }
    }

    /// At 1 Gb/s a quantum is 512 ns. The figures pin the accounting across a refresh, an
    /// XON, a pause that expires on its own, an 802.3x PAUSE and one still open at the end.
    #[test]
    fn paused_time_over_refresh_xon_expiry_and_finish() {
        const G: u64 = 1_000_000_000;
        let mut rx = PauseRx::default();
        rx.on_mac_control(pfc(3, 10), 1_000, G); // until 6_120
        assert!(rx.is_paused(3, 6_119) && !rx.is_paused(2, 2_000));
        rx.on_mac_control(pfc(3, 10), 4_000, G); // refresh: until 9_120
        assert_eq!(rx.until(3), 9_120);
        rx.on_mac_control(pfc(3, 0), 7_000, G); // XON: 6_000 paused
        assert!(!rx.is_paused(3, 7_000));
        rx.on_mac_control(pfc(3, 1), 10_000, G); // expires at 10_512: 512 more
        assert!(!rx.is_paused(3, 10_512));
        rx.on_mac_control(MacControl::Pause { time: 2 }, 20_000, G); // all, until 21_024
        rx.on_mac_control(pfc(5, 100), 30_000, G); // open at the end
        rx.finish(40_000);
        rx.finish(40_000);
        assert_eq!(rx.paused_ns[3], 6_000 + 512 + 1_024);
        assert_eq!(rx.paused_ns[0], 1_024);
        assert_eq!(rx.paused_ns[5], 1_024 + 10_000);
        assert_eq!((rx.pfc_frames, rx.pause_frames), (5, 1));
        assert_eq!((rx.xoff[3], rx.xon[3], rx.xoff[5]), (3, 1, 1));
    }
}

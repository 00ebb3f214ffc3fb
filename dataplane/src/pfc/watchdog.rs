//! The PFC watchdog of one egress port (SONiC pfcwd): a queue paused continuously for too long
//! while holding frames is a storm; drop, forward or alert, then restore once PFC stops.

use controlplane::{WatchdogAction, WatchdogConfig, NUM_TC};

/// What [`Watchdog::poll`] reports for a queue, for the counters and the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchdogEvent {
    /// Paused while holding frames for the detection time: the action now applies.
    Storm,
    /// No PFC for its priorities for the restoration time: normal again.
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
    /// A watchdog with no storm; `watched` is the mask of queues that carry PFC priorities.
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

    /// No storm, and no queue being timed as stalled: polling changes nothing unless some
    /// priority is paused (what the per-round timers skip on).
    pub fn at_rest(&self) -> bool {
        self.storm == 0 && self.stalled_since.iter().all(Option::is_none)
    }

    /// Queues in a storm now (detected, not yet restored), as a mask.
    pub fn storms(&self) -> u8 {
        self.storm
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

    /// Notes a PFC frame for priority `prio` at `now`: a storm is restored only after none for the
    /// restoration time.
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

//! Pause timers per priority from received PFC/PAUSE frames, and how long each priority was
//! held: the one timer type of the project. The switch's egress ports obey them
//! (`egress::port`), the NIC model's hosts do (`nic::pause::PauseRx`), and so does the emulated
//! peer of a software link (`nic::peer`).

use controlplane::NUM_TC;

/// Pause timers, per priority, from received PFC/PAUSE frames. A priority is paused while its
/// timer is ahead of `now`; the time paused is added, interval by interval, to a caller's
/// `[u64; NUM_TC]` (for the switch, its port counters).
#[derive(Debug, Clone, Default)]
pub struct PauseState {
    until: [u64; NUM_TC],
    since: [u64; NUM_TC],
    /// The latest of `until`: from then on nothing is paused, which the transmit loop asks
    /// at least once a burst and finds true almost always, in one comparison instead of a
    /// pass over the eight timers.
    latest: u64,
}

impl PauseState {
    /// Applies a received pause of `dur_ns` (0 = XON) for `prio` at `now`, adding finished
    /// pause intervals to `paused_ns`.
    pub fn apply(&mut self, prio: usize, now: u64, dur_ns: u64, paused_ns: &mut [u64; NUM_TC]) {
        let active = self.until[prio] > now;
        if active {
            // Close the interval at `now`; a new one starts below if this is another XOFF.
            paused_ns[prio] += now.saturating_sub(self.since[prio]);
        } else if self.until[prio] > self.since[prio] {
            paused_ns[prio] += self.until[prio] - self.since[prio];
        }
        self.set(prio, now, dur_ns);
    }

    /// Pauses `prio` for `dur_ns` from `now` (0 = XON) without counting the time paused: for a
    /// user that only needs the timer.
    #[inline]
    pub fn set(&mut self, prio: usize, now: u64, dur_ns: u64) {
        self.since[prio] = now;
        self.until[prio] = now.saturating_add(dur_ns);
        // An XON can bring the latest expiry forward: taken again over all eight (per PFC
        // frame received, not per frame sent).
        self.latest = self.until.iter().copied().max().unwrap_or(0);
    }

    /// When `prio`'s pause runs out (at or before `now` if it is not paused).
    #[inline]
    pub fn until(&self, prio: usize) -> u64 {
        self.until[prio]
    }

    /// Whether `prio` is paused at `now`.
    #[inline]
    pub fn is_paused(&self, prio: usize, now: u64) -> bool {
        self.until[prio] > now
    }

    /// Adds the time paused up to `now` to `paused_ns` (the end of a run); a pause still
    /// running goes on, and is counted from `now` on by the next call. Calling it twice at the
    /// same `now` adds nothing the second time.
    pub fn close(&mut self, now: u64, paused_ns: &mut [u64; NUM_TC]) {
        for ((until, since), paused) in self.until.iter().zip(&mut self.since).zip(paused_ns) {
            let end = (*until).min(now);
            if end > *since {
                *paused += end - *since;
                *since = end;
            }
        }
    }

    /// Priorities paused at `now`, and the time until which that answer holds (the earliest
    /// expiry still ahead): lets the transmit loop test pauses once per burst, not per frame.
    #[inline]
    pub fn paused_prios(&self, now: u64) -> (u8, u64) {
        if self.latest <= now {
            return (0, u64::MAX);
        }
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

    /// Whether any priority in the mask `prios` is paused at `now` (ns).
    #[inline]
    pub fn any_paused(&self, prios: u8, now: u64) -> bool {
        prios != 0 && self.latest > now && (0..NUM_TC).any(|p| prios & (1 << p) != 0 && self.until[p] > now)
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
        // One still running is counted up to `close`, once, and goes on.
        s.apply(3, 2_000, 1_000, &mut closed);
        s.close(2_400, &mut closed);
        s.close(2_400, &mut closed);
        assert_eq!(closed[3], 350 + 400);
        assert!(s.is_paused(3, 2_999) && !s.is_paused(3, 3_000));
        assert_eq!(s.until(3), 3_000);
        assert_eq!(s.total_paused(10_000, &closed)[3], 350 + 1_000);
    }

    proptest::proptest! {
        /// The shortcut through `latest` never changes an answer: after any sequence of
        /// pauses and XONs (which bring the latest expiry forward), every question agrees with
        /// a pass over the eight timers.
        #[test]
        fn the_latest_expiry_shortcut_agrees_with_every_timer(
            steps in proptest::collection::vec((0usize..NUM_TC, 0u64..2_000, proptest::prop_oneof![proptest::strategy::Just(0u64), 1u64..3_000]), 1..40),
            asks in proptest::collection::vec((0u64..6_000, 0u8..=255), 1..20),
        ) {
            let mut s = PauseState::default();
            let mut now = 0;
            for (prio, dt, dur) in steps {
                now += dt;
                s.set(prio, now, dur);
                for &(later, prios) in &asks {
                    let t = now + later;
                    // The timers one by one, as `is_paused` reads them.
                    let paused: Vec<usize> = (0..NUM_TC).filter(|&p| s.is_paused(p, t)).collect();
                    let mask = paused.iter().fold(0u8, |m, &p| m | 1 << p);
                    let valid_until = paused.iter().map(|&p| s.until(p)).min().unwrap_or(u64::MAX);
                    proptest::prop_assert_eq!(s.paused_prios(t), (mask, valid_until));
                    proptest::prop_assert_eq!(s.any_paused(prios, t), prios & mask != 0);
                }
            }
        }
    }
}

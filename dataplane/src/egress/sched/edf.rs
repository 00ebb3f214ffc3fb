//! Earliest deadline first for the regulated queues (issue 11; Martínez, Apostolopoulos,
//! Alfaro, Sánchez and Duato, "Efficient Deadline-Based QoS Algorithms for High-Performance
//! Networks", IEEE Trans. Computers 57(7), 2008, and IPDPS 2007).
//!
//! ## Classes
//!
//! A port's queues fall in three bands, served in this order (the paper's experiment has a
//! control class, latency-bound classes and best effort):
//!
//! 1. **control**: queues with `sched = "strict"` and no delay budget, by strict priority
//!    (highest index first), as in `sp_wdrr`: small, urgent traffic (CNPs, control);
//! 2. **regulated**: queues with a delay budget (`edf.budget`), whatever their `sched`: among
//!    the eligible ones, the head with the earliest deadline sends;
//! 3. **best effort**: the other queues, by WDRR weights.
//!
//! PFC and shapers act before any of this: a paused or shaped-out queue is not eligible, so a
//! paused regulated queue's frames wait (all of them, whichever of its lists they are in) while
//! the other regulated queues go on.
//!
//! ## A regulated queue's frames: [`EdfQueues`]
//!
//! Each frame gets a deadline when it is queued (arrival time plus its budget, or its
//! time-to-destination tag: `Egress::enqueue`). How a regulated queue keeps them in deadline
//! order is the `mode`:
//!
//! * `ideal`: a heap (a pairing heap linked through the packet slots, `DescStore::heap_push`):
//!   exact EDF within the queue, the comparison point the paper calls ideal.
//! * `fifo2`: the paper's simple proposal: one FIFO per regulated queue (the paper keeps the
//!   regulated traffic in one virtual channel and best effort in the other, "two VCs, FIFO
//!   queues"), and EDF applied to the heads only. A frame that arrives behind one with a later
//!   deadline waits for it: an *order error*.
//! * `take-over`: the paper's improvement: two lists per regulated queue, an *ordered* list
//!   and a *take-over* list. A frame whose deadline is earlier than that of the ordered
//!   list's last frame joins the take-over list; any other joins the ordered list, which is
//!   therefore always sorted. The queue's head is the earlier of the two lists' heads. The
//!   take-over list costs one more [`DescQueue`] (12 bytes) per queue, no ring.
//!
//! Ties between equal deadlines go to the frame that arrived first (an arrival number per
//! queue, kept per slot), in every mode. That is what keeps a flow in order: a flow's frames
//! get non-decreasing deadlines (one budget, rising arrival times; a sender's tags do the
//! same), so the frame of the flow that arrived first always has the earlier key, and a queue
//! only ever sends the frame with the earliest key among its lists' heads. For `ideal` and
//! `fifo2` that settles it (a heap's minimum; one FIFO). For `take-over`, if F1 and F2 share a
//! list, FIFO keeps them in order; if F1 is in the ordered list (sorted by key), its head is
//! never later than F1, so F2 cannot win against it; the remaining case, F1 in the take-over
//! list behind a frame later than F2 while F2 heads the ordered list, needs the ordered list
//! to have emptied since F1 arrived (its last frame only grows while it holds frames, and was
//! later than F1), which the earlier frames waiting in the take-over list prevent. That last
//! step is argued, not proved here: `tests::no_flow_is_reordered_in_any_mode` checks the
//! property over random interleavings of arrivals and departures, and the EDF experiment
//! (bench) counts reordered frames (none).
//!
//! ## Counters (per queue, `QueueCounters`)
//!
//! * `edf_order_errors`: frames queued behind a frame of later deadline in the same FIFO list
//!   (compared with that list's last frame at arrival), that is, frames that will leave after
//!   a frame of later deadline queued ahead of them. `fifo2` counts against its one list;
//!   `take-over` only against the take-over list (the ordered list is sorted, so only a frame
//!   that is earlier than both lists' last frames is one); `ideal` never counts one. This is
//!   the immediate predecessor only: a frame behind [10, 5] with deadline 7 is blocked by 10
//!   but not counted (a lower bound, cheap to keep exact; the EDF experiment in bench counts
//!   the full definition from departure times too).
//! * `edf_deadline_misses`: regulated frames that started to leave after their deadline.

use super::sp_wdrr::SpWdrr;
use crate::counters::QueueCounters;
use crate::egress::port::Desc;
use crate::egress::queues::{earlier, DescQueue, DescStore};
use controlplane::{EdfConfig, EdfMode, SchedMode, NUM_TC};

/// The EDF scheduler kind: strict control queues, then the regulated queues' earliest head,
/// then WDRR (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edf {
    regulated: u8,
    /// Strict priority and WDRR for the queues that are not regulated (its strict queues form
    /// the control band).
    rest: SpWdrr,
    /// The band [`Edf::select`] last picked from, what [`Edf::select_again`] needs.
    last_band: Band,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Band {
    Control,
    Regulated,
    BestEffort,
}

impl Edf {
    /// A scheduler regulating the queues in the mask `regulated`; the others run as `SpWdrr` with
    /// `modes` and `base_quantum`.
    pub fn new(modes: &[SchedMode; NUM_TC], base_quantum: u32, regulated: u8) -> Self {
        Edf {
            regulated,
            rest: SpWdrr::new(modes, base_quantum),
            last_band: Band::BestEffort,
        }
    }

    /// New settings: the WDRR round goes on where the modes allow (`SpWdrr::retune`).
    pub fn retune(&mut self, modes: &[SchedMode; NUM_TC], base_quantum: u32, regulated: u8) {
        self.rest.retune(modes, base_quantum);
        self.regulated = regulated;
    }

    /// The queues this port regulates.
    pub fn regulated(&self) -> u8 {
        self.regulated
    }

    /// The queue to send from among `eligible` (a bit mask): control first, then the regulated head
    /// with the earliest deadline, then WDRR; `None` if nothing is eligible.
    #[inline]
    pub fn select(&mut self, eligible: u8, head: impl Fn(usize) -> super::Head) -> Option<usize> {
        let control = eligible & !self.regulated & self.rest.strict_mask();
        if control != 0 {
            self.last_band = Band::Control;
            return self.rest.select(control, |q| head(q).len);
        }
        let mut regulated = eligible & self.regulated;
        if regulated != 0 {
            self.last_band = Band::Regulated;
            // Earliest deadline; a tie goes to the higher queue (its arrival numbers are not
            // comparable with another queue's).
            let mut best = 7 - regulated.leading_zeros() as usize;
            let mut best_deadline = head(best).deadline;
            regulated &= !(1 << best);
            while regulated != 0 {
                let q = 7 - regulated.leading_zeros() as usize;
                regulated &= !(1 << q);
                let d = head(q).deadline;
                if d < best_deadline {
                    best = q;
                    best_deadline = d;
                }
            }
            return Some(best);
        }
        self.last_band = Band::BestEffort;
        self.rest.select(eligible & !self.regulated, |q| head(q).len)
    }

    /// A regulated pick is never kept without a full selection (the other regulated heads'
    /// deadlines are not known here, and a regulated queue's head may come from either list);
    /// control and best-effort picks go on as `SpWdrr` would, since no regulated or (for best
    /// effort) control queue became eligible meanwhile (the caller's promise).
    #[inline]
    pub fn select_again(&mut self, q: usize, head: super::Head) -> bool {
        match self.last_band {
            Band::Regulated => false,
            Band::Control | Band::BestEffort => self.rest.select_again(q, head.len),
        }
    }
}

/// How one port keeps its regulated queues' frames (see the module docs); the other queues
/// are plain lists. Lives in the `EgressPort`, beside the queues it extends.
#[derive(Debug, Clone)]
pub(crate) struct EdfQueues {
    pub mode: EdfMode,
    pub regulated: u8,
    /// Each regulated queue's take-over list (`take-over` mode); the ordered list, or the heap,
    /// is the port's own `queues[q]`.
    pub takeover: [DescQueue; NUM_TC],
    /// Each queue's next arrival number.
    seq: [u32; NUM_TC],
    /// Budgets in ns (0 = none): per queue, per DSCP (validation caps them at 1 s).
    pub queue_budget: [u32; NUM_TC],
    pub dscp_budget: [u32; 64],
    /// The flow-label tag's unit in ns, 0 = tags off.
    pub tag_unit: u32,
}

impl EdfQueues {
    pub fn new(c: &EdfConfig) -> Self {
        let mut e = EdfQueues {
            mode: c.mode,
            regulated: c.regulated(),
            takeover: Default::default(),
            seq: [0; NUM_TC],
            queue_budget: [0; NUM_TC],
            dscp_budget: [0; 64],
            tag_unit: 0,
        };
        e.set_budgets(c);
        e
    }

    /// Budgets and tags change in place: they apply to frames queued from now on.
    pub fn set_budgets(&mut self, c: &EdfConfig) {
        // Validation caps budgets at 1 s, well inside u32 nanoseconds.
        let ns = |b: Option<u64>| b.map_or(0, |b| b.min(u32::MAX as u64) as u32);
        self.queue_budget = c.queue_budget_ns.map(ns);
        self.dscp_budget = c.dscp_budget_ns.map(ns);
        self.tag_unit = ns(c.tag_unit_ns);
    }

    #[inline]
    pub fn is_regulated(&self, q: usize) -> bool {
        self.regulated & (1 << q) != 0
    }

    /// Queues `d` on regulated queue `q` (`ordered` is the port's list or heap for it).
    #[inline]
    pub fn push(&mut self, descs: &mut DescStore, ordered: &mut DescQueue, q: usize, d: Desc, c: &mut QueueCounters) {
        let seq = self.seq[q];
        self.seq[q] = seq.wrapping_add(1);
        let later_than =
            |descs: &DescStore, list: &DescQueue| descs.back(list).is_some_and(|t| d.deadline < t.deadline);
        match self.mode {
            EdfMode::Ideal => descs.heap_push(ordered, d, seq),
            EdfMode::Fifo2 => {
                if later_than(descs, ordered) {
                    c.edf_order_errors += 1;
                }
                descs.push_seq(ordered, d, seq);
            }
            EdfMode::TakeOver => {
                let to = &mut self.takeover[q];
                if later_than(descs, ordered) {
                    if later_than(descs, to) {
                        c.edf_order_errors += 1;
                    }
                    descs.push_seq(to, d, seq);
                } else {
                    descs.push_seq(ordered, d, seq);
                }
            }
        }
    }

    /// Whether the take-over list's head goes before the ordered list's.
    #[inline]
    fn takeover_first(&self, descs: &DescStore, ordered: &DescQueue, q: usize) -> bool {
        match (descs.front(ordered), descs.front(&self.takeover[q])) {
            (Some(o), Some(t)) => earlier(descs.key(t), descs.key(o)),
            (None, Some(_)) => true,
            _ => false,
        }
    }

    /// The frame regulated queue `q` sends next.
    #[inline]
    pub fn front<'a>(&self, descs: &'a DescStore, ordered: &DescQueue, q: usize) -> Option<&'a Desc> {
        if self.mode == EdfMode::TakeOver && self.takeover_first(descs, ordered, q) {
            descs.front(&self.takeover[q])
        } else {
            descs.front(ordered)
        }
    }

    #[inline]
    pub fn pop(&mut self, descs: &mut DescStore, ordered: &mut DescQueue, q: usize) -> Option<Desc> {
        match self.mode {
            EdfMode::Ideal => descs.heap_pop(ordered),
            EdfMode::Fifo2 => descs.pop(ordered),
            EdfMode::TakeOver => {
                if self.takeover_first(descs, ordered, q) {
                    descs.pop(&mut self.takeover[q])
                } else {
                    descs.pop(ordered)
                }
            }
        }
    }

    /// Frames regulated queue `q` holds beyond its ordered list.
    #[inline]
    pub fn extra_len(&self, q: usize) -> usize {
        self.takeover[q].len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn config(mode: EdfMode, regulated: &[usize]) -> EdfConfig {
        let mut queue_budget_ns = [None; NUM_TC];
        for &q in regulated {
            queue_budget_ns[q] = Some(10_000);
        }
        EdfConfig {
            mode,
            queue_budget_ns,
            dscp_budget_ns: [None; 64],
            tag_unit_ns: None,
        }
    }

    /// One regulated queue (3) of one port: its lists, the store, the counters.
    struct Q {
        e: EdfQueues,
        descs: DescStore,
        ordered: DescQueue,
        c: QueueCounters,
    }

    impl Q {
        fn new(mode: EdfMode, slots: usize) -> Q {
            Q {
                e: EdfQueues::new(&config(mode, &[3])),
                descs: DescStore::new(slots),
                ordered: DescQueue::default(),
                c: QueueCounters::default(),
            }
        }
        fn push(&mut self, slot: u32, deadline: u64) {
            let d = Desc {
                slot,
                deadline,
                ..Desc::default()
            };
            self.e.push(&mut self.descs, &mut self.ordered, 3, d, &mut self.c);
        }
        fn pop(&mut self) -> Option<(u32, u64)> {
            let front = self.e.front(&self.descs, &self.ordered, 3).map(|d| d.slot);
            let d = self.e.pop(&mut self.descs, &mut self.ordered, 3)?;
            assert_eq!(front, Some(d.slot), "front names the frame pop takes");
            Some((d.slot, d.deadline))
        }
        fn drain(&mut self) -> Vec<u64> {
            std::iter::from_fn(|| self.pop()).map(|(_, d)| d).collect()
        }
    }

    /// The paper's situation: a frame with a late deadline queued first holds back the urgent
    /// ones behind it in one FIFO; the take-over list lets them pass; the heap is exact.
    #[test]
    fn take_over_lets_urgent_frames_pass_a_late_one() {
        let arrivals = [100, 20, 30, 110, 25, 40];
        let run = |mode| {
            let mut q = Q::new(mode, 8);
            for (slot, &d) in arrivals.iter().enumerate() {
                q.push(slot as u32, d);
            }
            (q.drain(), q.c.edf_order_errors)
        };
        assert_eq!(
            run(EdfMode::Fifo2),
            (vec![100, 20, 30, 110, 25, 40], 2),
            "20 behind 100, 25 behind 110"
        );
        // Ordered list: 100, 110; take-over list: 20, 30, 25, 40 (25 behind 30: an error).
        assert_eq!(run(EdfMode::TakeOver), (vec![20, 30, 25, 40, 100, 110], 1));
        assert_eq!(run(EdfMode::Ideal), (vec![20, 25, 30, 40, 100, 110], 0));
    }

    /// Deadlines are whole nanoseconds: frames more than 2^31 or 2^32 ns apart (a frame that
    /// waited seconds behind a pause) compare as they are, in every mode. With deadlines
    /// modulo 2^32 (before), 1 ms sorted after 2.2 s and after 5 s (5 s ≡ 0.7 s).
    #[test]
    fn deadlines_far_apart_compare_as_they_are() {
        let (a, b, c) = (1_000_000, 2_200_000_000, 5_000_000_000u64);
        for mode in [EdfMode::Ideal, EdfMode::TakeOver, EdfMode::Fifo2] {
            let mut q = Q::new(mode, 4);
            q.push(0, a);
            q.push(1, b);
            q.push(2, c);
            assert_eq!(q.drain(), [a, b, c], "{mode:?}");
            assert_eq!(q.c.edf_order_errors, 0, "{mode:?}");
        }
        let mut q = Q::new(EdfMode::Ideal, 4);
        q.push(0, c);
        q.push(1, b);
        q.push(2, a);
        assert_eq!(q.drain(), [a, b, c]);
    }

    /// A regulated queue's frames, with random deadlines and departures interleaved with
    /// arrivals.
    fn ops() -> impl Strategy<Value = Vec<(bool, u8, u64)>> {
        // (arrive?, flow, budget): flows 0..4, each with its own budget range.
        proptest::collection::vec((prop::bool::weighted(0.6), 0u8..4, 0u64..4000), 1..400)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Frames of one flow get non-decreasing deadlines (arrival time plus the flow's
        /// budget, or any non-decreasing sequence); no mode ever sends them out of order, and
        /// every frame comes out once.
        #[test]
        fn no_flow_is_reordered_in_any_mode(ops in ops(), budgets in proptest::collection::vec(0u64..5000, 4), jitter in any::<bool>()) {
            for mode in [EdfMode::Ideal, EdfMode::Fifo2, EdfMode::TakeOver] {
                let mut q = Q::new(mode, 512);
                let mut free: Vec<u32> = (0..512).rev().collect();
                let mut flow_of = [0u8; 512];
                let mut seq_of = [0u32; 512];
                let mut last_deadline = [0u64; 4];
                let mut sent_seq = [None::<u32>; 4];
                let mut now = 0u64;
                let (mut pushed, mut popped) = (0, 0);
                for (i, &(arrive, flow, extra)) in ops.iter().enumerate() {
                    now += 37;
                    if arrive {
                        let Some(slot) = free.pop() else { continue };
                        // Non-decreasing per flow: the flow's budget from now, never before
                        // its previous deadline (a tag may also add slack: `jitter`).
                        let base = now + budgets[flow as usize] + if jitter { extra } else { 0 };
                        let d = base.max(last_deadline[flow as usize]);
                        last_deadline[flow as usize] = d;
                        flow_of[slot as usize] = flow;
                        seq_of[slot as usize] = i as u32;
                        q.push(slot, d);
                        pushed += 1;
                    } else if let Some((slot, _)) = q.pop() {
                        let f = flow_of[slot as usize] as usize;
                        let s = seq_of[slot as usize];
                        prop_assert!(sent_seq[f].is_none_or(|p| p < s), "{mode:?}: flow {f} reordered");
                        sent_seq[f] = Some(s);
                        free.push(slot);
                        popped += 1;
                    }
                }
                while let Some((slot, _)) = q.pop() {
                    let f = flow_of[slot as usize] as usize;
                    let s = seq_of[slot as usize];
                    prop_assert!(sent_seq[f].is_none_or(|p| p < s), "{mode:?}: flow {f} reordered at the end");
                    sent_seq[f] = Some(s);
                    popped += 1;
                }
                prop_assert_eq!(pushed, popped);
                if mode == EdfMode::Ideal {
                    prop_assert_eq!(q.c.edf_order_errors, 0);
                }
            }
        }

        /// `ideal` sends in exact (deadline, arrival) order whatever the interleaving; the
        /// take-over mode's ordered list stays sorted; fifo2 sends in arrival order.
        #[test]
        fn each_mode_sends_in_its_order(ops in proptest::collection::vec((prop::bool::weighted(0.6), 0u64..1000), 1..300)) {
            for mode in [EdfMode::Ideal, EdfMode::Fifo2, EdfMode::TakeOver] {
                let mut q = Q::new(mode, 256);
                let mut free: Vec<u32> = (0..256).rev().collect();
                let mut model = std::collections::BTreeSet::new(); // (deadline, arrival)
                let mut arrival = [0usize; 256];
                let mut fifo = std::collections::VecDeque::new();
                for (i, &(arrive, d)) in ops.iter().enumerate() {
                    if arrive {
                        let Some(slot) = free.pop() else { continue };
                        q.push(slot, d);
                        arrival[slot as usize] = i;
                        model.insert((d, i));
                        fifo.push_back(i);
                    } else if let Some((slot, d)) = q.pop() {
                        free.push(slot);
                        let i = arrival[slot as usize];
                        match mode {
                            EdfMode::Ideal => prop_assert_eq!(model.pop_first(), Some((d, i))),
                            EdfMode::Fifo2 => prop_assert_eq!(fifo.pop_front(), Some(i)),
                            EdfMode::TakeOver => {}
                        }
                        model.remove(&(d, i));
                    }
                    if mode == EdfMode::TakeOver {
                        let list = q.descs.list(&q.ordered);
                        prop_assert!(list.windows(2).all(|w| w[0].deadline <= w[1].deadline), "the ordered list is sorted");
                    }
                }
            }
        }
    }
}

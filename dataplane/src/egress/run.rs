//! A run: frames of one receive burst, one after another, from the burst's ingress port and
//! one PG to one egress queue of a port without EDF or WRED at enqueue. The receive path
//! stores each such frame and asks the CNP policer and the watchdog as it arrives, as
//! always, and holds it here; the run is admitted when the burst moves on
//! ([`super::Egress::admit_run`]): in one step when the MMU can show that is what admitting
//! its frames one by one would do (`mmu::group`), else one by one, exactly as
//! [`super::Egress::enqueue`] does. Anything else in the burst that reads or moves the
//! buffer accounts or the packet slots (a frame for another queue, a flood, a MAC control
//! frame, a frame that crosses to another shard, a store that finds no slot, the burst's
//! end) admits the run first, so every admission sees the accounts it would have seen frame
//! by frame.
//!
//! Why: admission, peaks included, was the largest single block of the receive path's
//! instructions (about 126 a frame of 853, `bench/instructions.sh`), and frames of one burst
//! to one queue are the common case.

use crate::mmu::GroupTotals;
use arrayvec::ArrayVec;

/// Frames a run holds at most: a receive burst.
pub(crate) const RUN_MAX: usize = 32;

/// One held frame: what its descriptor needs beyond the run's key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunFrame {
    pub slot: u32,
    pub len: u16,
    pub cells: u16,
    /// [`super::port::Desc::ECT`] and [`super::port::Desc::CNP`].
    pub flags: u8,
}

/// Frames waiting for admission to one (egress port, queue) from one PG of the burst's port.
#[derive(Debug)]
pub(crate) struct Run {
    /// `out`, `queue` and `pg` in one word ([`Run::key`]): one comparison a frame.
    key: u64,
    frames: ArrayVec<RunFrame, RUN_MAX>,
    /// What `frames` add up to.
    totals: GroupTotals,
}

impl Run {
    /// No frame held.
    pub(crate) fn new() -> Self {
        Run {
            // No frame's key (`out` < 2^48): the first frame starts a run.
            key: u64::MAX,
            frames: ArrayVec::new(),
            totals: GroupTotals::EMPTY,
        }
    }

    #[inline(always)]
    fn key(out: usize, queue: usize, pg: usize) -> u64 {
        (out as u64) << 16 | ((queue & 7) as u64) << 8 | (pg & 7) as u64
    }

    /// The egress port, queue and PG of the run's frames.
    #[inline(always)]
    pub(crate) fn target(&self) -> (usize, usize, usize) {
        (
            (self.key >> 16) as usize,
            (self.key >> 8) as usize & 7,
            self.key as usize & 7,
        )
    }

    /// Whether a frame for `out`, `queue` from `pg` joins this run (same key, room left): when
    /// not, the run must be admitted and a new one started ([`Run::restart`]).
    #[inline(always)]
    pub(crate) fn takes(&self, out: usize, queue: usize, pg: usize) -> bool {
        self.key == Self::key(out, queue, pg) && self.frames.len() < RUN_MAX
    }

    /// Starts an empty run for `out`, `queue` from `pg` (the last one admitted).
    #[inline(always)]
    pub(crate) fn restart(&mut self, out: usize, queue: usize, pg: usize) {
        debug_assert!(self.frames.is_empty(), "a run restarted before it was admitted");
        self.key = Self::key(out, queue, pg);
    }

    /// The frames held, in arrival order.
    #[inline(always)]
    pub(crate) fn frames(&self) -> &[RunFrame] {
        &self.frames
    }

    /// What the frames held add up to.
    #[inline(always)]
    pub(crate) fn totals(&self) -> &GroupTotals {
        &self.totals
    }

    /// Adds a stored frame at the run's end.
    #[inline(always)]
    pub(crate) fn push(&mut self, f: RunFrame) {
        self.totals.add(f.cells as u32, f.len as u32);
        self.frames.push(f); // `takes` said there is room
    }

    /// Forgets the frames (once admitted).
    #[inline(always)]
    pub(crate) fn clear(&mut self) {
        self.frames.clear();
        self.totals = GroupTotals::EMPTY;
    }
}

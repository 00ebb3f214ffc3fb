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
//!
//! Frames that cross between shards (`crate::shard`) run too, each side its half: a burst's
//! frames for a queue of another shard's port ([`Run::restart_crossing`]) are charged to
//! their PG together and sent across (`Switch::send_run_across`); a batch's frames from one
//! ingress port and PG to one queue ([`Run::restart_from`]) are admitted to it together
//! ([`super::Egress::admit_crossed_run`]). The crossing code took about 630 instructions a
//! frame one by one, about 350 in runs (bench/README.md, "eleventh round").

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

impl RunFrame {
    /// Its descriptor, admitted at `now` from PG `pg` of `in_port`: what
    /// `Egress::queue_admitted` writes for a queue that takes runs.
    #[inline(always)]
    pub(crate) fn desc(&self, in_port: usize, pg: usize, now: u64) -> super::port::Desc {
        super::port::Desc {
            slot: self.slot,
            deadline: now,
            len: self.len,
            in_port: in_port as u16,
            pg: pg as u8,
            cells: self.cells,
            flags: self.flags,
        }
    }
}

/// Frames waiting for admission to one (egress port, queue) from one PG of the burst's port.
#[derive(Debug)]
pub(crate) struct Run {
    /// `out`, `queue` and `pg` in one word ([`Run::key`]): one comparison a frame.
    key: u64,
    frames: ArrayVec<RunFrame, RUN_MAX>,
    /// What `frames` add up to.
    totals: GroupTotals,
    /// The run is to another shard's port ([`Run::restart_crossing`]): its frames get their PG
    /// charged here and cross with their parse results and classes, which wait beside the
    /// run in the shard's `ShardLink::staged` (here they would make every run, and every move
    /// of one, a few KiB larger).
    crosses: bool,
}

impl Run {
    /// No frame held.
    pub(crate) fn new() -> Self {
        Run {
            // No frame's key (ports < 2^16): the first frame starts a run.
            key: u64::MAX,
            frames: ArrayVec::new(),
            totals: GroupTotals::EMPTY,
            crosses: false,
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
            (self.key >> 16) as usize & 0xffff,
            (self.key >> 8) as usize & 7,
            self.key as usize & 7,
        )
    }

    /// A run of frames that crossed from another shard (`crate::shard`), whose ingress ports
    /// vary within a batch: the key holds `in_port` too. Whether a frame from `in_port` for
    /// `out`, `queue`, from `pg` joins it.
    #[inline(always)]
    pub(crate) fn takes_from(&self, in_port: usize, out: usize, queue: usize, pg: usize) -> bool {
        self.key == Self::key_from(in_port, out, queue, pg) && self.frames.len() < RUN_MAX
    }

    /// [`Run::restart`] for a run of crossed frames from `in_port`.
    #[inline(always)]
    pub(crate) fn restart_from(&mut self, in_port: usize, out: usize, queue: usize, pg: usize) {
        debug_assert!(self.frames.is_empty(), "a run restarted before it was admitted");
        self.key = Self::key_from(in_port, out, queue, pg);
        self.crosses = false;
    }

    /// The ingress port of a run of crossed frames ([`Run::restart_from`]).
    #[inline(always)]
    pub(crate) fn source(&self) -> usize {
        (self.key >> 32) as usize & 0xffff
    }

    #[inline(always)]
    fn key_from(in_port: usize, out: usize, queue: usize, pg: usize) -> u64 {
        ((in_port & 0xffff) as u64) << 32 | Self::key(out, queue, pg)
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
        self.crosses = false;
    }

    /// Starts an empty run for `out`, another shard's port, `queue` from `pg`.
    #[inline(always)]
    pub(crate) fn restart_crossing(&mut self, out: usize, queue: usize, pg: usize) {
        self.restart(out, queue, pg);
        self.crosses = true;
    }

    /// Whether the run is to another shard's port ([`Run::restart_crossing`]).
    #[inline(always)]
    pub(crate) fn crosses(&self) -> bool {
        self.crosses
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

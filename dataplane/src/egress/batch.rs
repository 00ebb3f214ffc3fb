//! Transmit by batch (issue 47 item 2): once the scheduler has picked a queue, the frames it
//! would keep picking go out in one tight loop over the port's fields, borrowed once, with the
//! per-batch work done once: the time and frame limits folded into one bound before the loop,
//! the port's and queue's transmit counters added once after it, the queue's non-empty bit
//! settled once.
//!
//! What a frame does in the loop is what [`super::Egress::send_head`] does, in the same order
//! (WRED at dequeue with the same random draws, the release added to what waits, the frame to
//! the sink at its own start time), so every decision, mark and timestamp is the frame-by-frame
//! one. A frame whose release does not join what waits stops the loop, unsent and still
//! queued, for the caller's frame-by-frame path: a frame from another PG than the frames before
//! it (so the first of every call), a flooded copy, one from another shard or from a PG in XOFF
//! (their releases may answer with an XON or a message). Queues that
//! [`serves`] turns away (EDF-regulated, shaped) never enter it.
//!
//! Why: the frame-by-frame path indexed the port again after every call on the switch, checked
//! four limits and the scheduler per frame and wrote four counters per frame (bench/README.md,
//! "Issue 47 item 2").

use super::port::{Desc, EgressPort};
use super::queues::DescStore;
use super::wred::Verdict;
use super::{sched, Peers, TxSink, Waiting, PS_PER_NS};
use crate::buffers::pool::Taken;
use crate::counters::DropReason;
use crate::wire::{self, ecn};

/// Where a batch may go, fixed before it starts.
#[derive(Debug, Clone, Copy)]
pub(super) struct BatchBound {
    /// Frames it may send at most (what the call's budget has left).
    pub frames: usize,
    /// A frame may start while the link's time (picoseconds after the call's base) is at most
    /// this: the call's `now`, and before the pause state next changes.
    pub last_start_ps: u64,
}

impl BatchBound {
    /// The bound of a call at base `base_ns` that runs to `now_ps` and whose pause state holds
    /// until `paused_valid_until` (ns; `u64::MAX`: for ever), with `frames` left to send.
    #[inline(always)]
    pub fn new(frames: usize, now_ps: u64, base_ns: u64, paused_valid_until: u64) -> Self {
        // The frame-by-frame loop stops once `base_ns + t_ps / PS_PER_NS >= paused_valid_until`,
        // that is once `t_ps >= (paused_valid_until - base_ns) * PS_PER_NS`. The pause state is
        // read again whenever the link's time reaches that, so it is always ahead of the base.
        debug_assert!(
            paused_valid_until > base_ns,
            "a pause state that expired before the call"
        );
        let pause_ps = paused_valid_until.saturating_sub(base_ns).saturating_mul(PS_PER_NS);
        BatchBound {
            frames,
            last_start_ps: now_ps.min(pause_ps.saturating_sub(1)),
        }
    }
}

/// How a batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BatchEnd {
    /// A bound, the scheduler or an empty queue ended it: the queue has done for this turn.
    Done,
    /// The queue's head, already charged by the scheduler, needs the frame-by-frame path.
    Head,
}

/// What a batch sent.
#[derive(Debug, Clone, Copy)]
pub(super) struct BatchSent {
    /// Frames on the wire (WRED's drops are not counted).
    pub frames: usize,
    pub end: BatchEnd,
}

/// Whether queue `q` of `p` is one a batch may serve: not regulated by EDF (whose order and
/// deadlines are frame by frame) and without a shaper.
#[inline(always)]
pub(super) fn serves(p: &EgressPort, q: usize) -> bool {
    let regulated = match p.edf.as_ref() {
        Some(e) => e.is_regulated(q),
        None => false,
    };
    p.shaped & (1 << q) == 0 && !regulated
}

/// Sends queue `q` of port `p` (index `port`) from link time `*t_ps` (picoseconds after
/// `base_ns`), the queue's head charged by the scheduler already, while the scheduler would
/// pick `q` again, within `bound`, and while each frame's release joins `waiting`. Advances
/// `*t_ps` by what went on the wire. Only for a queue the batch [`serves`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn send_batch(
    p: &mut EgressPort,
    descs: &mut DescStore,
    peers: &mut Peers<'_>,
    port: usize,
    q: usize,
    base_ns: u64,
    t_ps: &mut u64,
    bound: BatchBound,
    sink: &mut impl TxSink,
    waiting: &mut Waiting,
) -> BatchSent {
    let q = q & 7;
    let EgressPort {
        queues,
        wred,
        rng,
        sched,
        counters,
        queue_counters,
        buffers,
        rate,
        nonempty,
        ..
    } = p;
    let queue_counters = &mut queue_counters[q];
    // WRED reads the queue's depth less what this call sent already (`send_head`'s reading);
    // the queue's account does not move while the batch runs, so the depth never exceeds
    // this. Below Kmin without averaging every frame passes with no random draw: then WRED
    // is left out of the batch, which decides exactly as asking it every frame would.
    let queued_bytes = buffers.queue(q).bytes;
    let mut wred = wred[q].as_mut().filter(|w| !w.passes_all_below(queued_bytes));
    let (mut frames, mut bytes) = (0usize, 0u64);
    let mut t = *t_ps;
    // The head, charged: the scheduler picked it (first) or picked it again (below). A copy,
    // read once a frame: for `waiting`, then as the frame popped.
    let Some(&first) = descs.front(&queues[q]) else {
        return BatchSent {
            frames: 0,
            end: BatchEnd::Done,
        };
    };
    let mut d = first;
    let end = loop {
        if !waiting.takes(&d) {
            break BatchEnd::Head;
        }
        descs.pop_front(&mut queues[q]);
        let len = d.len as usize;
        let mut dropped = false;
        if !d.has(Desc::WRED_DONE) && !d.has(Desc::CNP) {
            if let Some(w) = wred.as_deref_mut() {
                let depth = queued_bytes.saturating_sub(waiting.queue.bytes);
                match w.decide(depth, d.has(Desc::ECT), rng) {
                    Verdict::Pass => {}
                    Verdict::Mark => {
                        let frame = peers.packets.get_mut(d.slot, len);
                        if let Ok(info) = wire::parse(frame, usize::MAX) {
                            if ecn::mark_ce(frame, &info) == ecn::MarkOutcome::Marked {
                                counters.ecn_marked += 1;
                                queue_counters.ecn_marked += 1;
                            }
                        }
                    }
                    Verdict::Drop => dropped = true,
                }
            }
        }
        waiting.add(&d, dropped);
        if dropped {
            peers.packets.free(d.slot);
            counters.drops[DropReason::Wred as usize] += 1;
            queue_counters.dropped_packets += 1;
            queue_counters.dropped_bytes += len as u64;
        } else {
            let t_ns = base_ns + t / PS_PER_NS;
            // A frame in its backend's buffer leaves in it (zero copy); a copy leaves its slot.
            match peers.packets.take(d.slot, len) {
                Taken::Arena(frame) => sink.transmit(port, frame, t_ns),
                Taken::Foreign(f) => sink.transmit_owned(port, f, t_ns),
            }
            t += rate.ser_ps(len);
            frames += 1;
            bytes += len as u64;
        }
        if frames >= bound.frames || t > bound.last_start_ps {
            break BatchEnd::Done;
        }
        let Some(&next) = descs.front(&queues[q]) else {
            break BatchEnd::Done;
        };
        d = next;
        let head = sched::Head {
            len: d.len as u32,
            deadline: d.deadline,
        };
        if !sched.select_again(q, head) {
            break BatchEnd::Done;
        }
    };
    if queues[q].is_empty() {
        *nonempty &= !(1 << q);
    }
    counters.tx_packets += frames as u64;
    counters.tx_bytes += bytes;
    queue_counters.tx_packets += frames as u64;
    queue_counters.tx_bytes += bytes;
    *t_ps = t;
    BatchSent { frames, end }
}

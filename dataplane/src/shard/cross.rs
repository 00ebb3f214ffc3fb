//! The switch's side of crossing: what a shard does with a frame for another shard's port, and
//! with what arrives from the others (`crate::shard`'s module doc says why it is split this way).

use super::{Batch, CrossFrame, Crossing, Learnt, Link, PoolShare, Release};
use crate::buffers::foreign::{ForeignFrame, ForeignKind};
use crate::egress::port::Desc;
use crate::egress::run::{Run, RunFrame};
use crate::ingress::classify::Class;
use crate::ingress::flood::NO_GROUP;
use crate::mmu;
use crate::switch::Switch;
use crate::wire::FrameInfo;
use std::ffi::c_void;
use std::ptr::NonNull;

/// The kind of a [`ForeignFrame`] that is another shard's packet slot: no backend sends it as
/// its own, so it leaves as a copy, and releasing it does nothing (its slot goes home with the
/// frame's release message).
const BORROWED_SLOT: u32 = u32::from_be_bytes(*b"slot");

/// Releasing a borrowed slot is the release message's job.
unsafe fn keep_home_slot(_: NonNull<c_void>) {}

/// Another shard's slot, borrowed: released by nothing here, sent by no backend as its own.
static HOME_SLOT: ForeignKind = ForeignKind {
    release: keep_home_slot,
    owner: BORROWED_SLOT,
};

impl Switch {
    /// The frames of a run to another shard's port (`egress::run`, [`Run::restart_crossing`]),
    /// in order: each frame's PG charged here (all at once when `mmu::charge_group_to_pg` shows
    /// that is what one by one would do, else one by one with `Switch::charge_pg`, which sends
    /// XOFF), then sent across; and the run emptied. Out of line: inlined, it made the local
    /// path's `admit_run` too large to inline into the receive loop.
    #[inline(never)]
    pub(crate) fn send_run_across(&mut self, port: usize, run: &mut Run, now: u64) {
        let (out, _, pg) = run.target();
        let grouped = run.frames().len() > 1
            && mmu::charge_group_to_pg(&mut self.ingress.ports[port].buffers, pg, &mut self.pool, run.totals());
        debug_assert_eq!(run.frames().len(), self.shard.staged.len());
        for (i, f) in run.frames().iter().enumerate() {
            let (slot, len) = (f.slot, f.len as usize);
            if grouped || self.charge_pg(port, pg, u32::from(f.cells), now) {
                let (info, class) = self.shard.staged[i];
                self.send_across(port, out, slot, len, &info, &class, NO_GROUP);
            } else {
                self.packets.free(slot);
            }
        }
        self.shard.staged.clear();
        run.clear();
    }

    /// Sends a frame whose PG is charged (or a flooded copy, whose group is) to the shard
    /// owning `out`: its buffer as it is (an mbuf) or borrowed from this shard's slot.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_across(
        &mut self,
        port: usize,
        out: usize,
        slot: u32,
        len: usize,
        info: &FrameInfo,
        class: &Class,
        group: u32,
    ) {
        let frame = match self.packets.take_foreign(slot, len) {
            Some(f) => CrossFrame::Owned(f),
            None => CrossFrame::Borrowed {
                ptr: NonNull::new(self.packets.get_mut(slot, len).as_mut_ptr()).expect("a slot's bytes"),
                home: slot,
            },
        };
        self.ingress.ports[port].counters.crossed_out += 1;
        self.shard.outbox_for(out).push_frame(Crossing {
            frame,
            len: len as u16,
            in_port: port as u16,
            out: out as u16,
            class: *class,
            info: *info,
            group,
        });
    }

    /// Whether every outbox can take one more receive burst: a shard receives only then, so a
    /// frame it receives always has a place to wait for the ring (back-pressure, not loss).
    #[inline]
    pub fn can_receive(&self) -> bool {
        self.shard.has_room()
    }

    /// Every learn that arrived on `link` into the FDB replica: called before the link's
    /// batches are taken, so a station is known here as soon as the news arrives, however many
    /// frames wait ahead of it. Returns how many.
    pub fn take_learns(&mut self, link: &Link) -> usize {
        let mut n = 0;
        while let Some(l) = link.receive_learn() {
            self.ingress.fdb.install(l.mac, l.port_id, l.now);
            n += 1;
        }
        n
    }

    /// What arrived from another shard in a batch, handled in one go: releases to the PGs (and
    /// slots) they came from, frames to their egress queues.
    pub fn take_batch(&mut self, batch: &mut Batch, now: u64) {
        for r in batch.releases.drain(..) {
            self.take_release(r);
        }
        // Consecutive frames from one ingress port and PG to one queue are admitted together,
        // as a receive burst's are (`egress::run`): nothing else in the batch moves the
        // accounts they are admitted against, except the frames that break the run, which
        // admit it first.
        let mut run = Run::new();
        for c in batch.frames.drain(..) {
            self.cross_in(c, now, &mut run);
        }
        self.admit_crossed_run(&mut run, now);
    }

    /// Admits the crossed frames `run` holds (`Egress::admit_crossed_run`).
    #[inline]
    fn admit_crossed_run(&mut self, run: &mut Run, now: u64) {
        if !run.frames().is_empty() {
            let (egress, mut peers) = self.sides();
            egress.admit_crossed_run(&mut peers, run, now);
        }
    }

    fn take_release(&mut self, r: Release) {
        // A flooded copy's release gives its group's charge back with the group's last copy.
        let charge = if r.group == NO_GROUP {
            Some((r.in_port as usize, r.pg as usize & 7, u32::from(r.cells), r.dropped))
        } else {
            self.ingress
                .floods
                .release(r.group)
                .map(|end| (end.in_port, end.pg, end.cells, false))
        };
        if let Some((port, pg, cells, dropped)) = charge {
            let (egress, mut peers) = self.sides();
            egress.release_pg(&mut peers, port, pg, cells, dropped);
        }
        if r.home != Release::NO_HOME {
            self.packets.free(r.home);
        }
    }

    /// A frame from another shard: into a packet slot of this one (the same buffer: an mbuf it
    /// now owns, or the other shard's slot, borrowed), then the egress half of admission: held
    /// in `run` when its queue takes runs (`Egress::runs_on`) and it is no flooded copy, else
    /// at once, after the run.
    #[inline]
    fn cross_in(&mut self, c: Crossing, now: u64, run: &mut Run) {
        let len = c.len as usize;
        let (frame, home) = match c.frame {
            CrossFrame::Owned(f) => (f, Release::NO_HOME),
            // SAFETY: the other shard's slot holds `len` bytes at `ptr` and is touched by nobody
            // else until the release naming `home` reaches it; releasing this frame does
            // nothing (`keep_home_slot`), so the slot is freed exactly once, there.
            CrossFrame::Borrowed { ptr, home } => unsafe {
                (
                    ForeignFrame::new(ptr, len as u32, NonNull::dangling(), &HOME_SLOT),
                    home,
                )
            },
        };
        // Frames the run holds may yet be refused and give their slots back, as they would
        // have one by one by now: admit them before a frame finds no slot.
        let slot = match self.packets.alloc_foreign(frame).or_else(|frame| {
            self.admit_crossed_run(run, now);
            self.packets.alloc_foreign(frame)
        }) {
            Ok(slot) => slot,
            Err(_frame) => {
                // No slot free (cannot happen while slots cover the buffer): the frame is lost,
                // counted, and its PG and home slot are given back.
                self.egress
                    .count_drop_crossed(c.out as usize, c.class.queue as usize & 7, len);
                self.shard.outbox_for(c.in_port as usize).push_release(Release {
                    in_port: c.in_port,
                    pg: c.class.pg,
                    dropped: true,
                    cells: self.pool.cells_for(len) as u16,
                    home,
                    group: c.group,
                });
                return;
            }
        };
        self.shard.homes[slot as usize] = home;
        let (in_port, out) = (c.in_port as usize, c.out as usize);
        let (queue, pg) = (c.class.queue as usize & 7, c.class.pg as usize & 7);
        if c.group == NO_GROUP && self.egress.runs_on(out, queue) {
            if !run.takes_from(in_port, out, queue, pg) {
                self.admit_crossed_run(run, now);
                run.restart_from(in_port, out, queue, pg);
            }
            let (egress, mut peers) = self.sides();
            if egress.crossed_refusal(&mut peers, in_port, out, slot, len, &c.class, now) {
                run.push(RunFrame {
                    slot,
                    len: c.len,
                    cells: self.pool.cells_for(len) as u16,
                    flags: if c.info.is_ect() { Desc::ECT } else { 0 } | if c.class.cnp { Desc::CNP } else { 0 },
                });
            }
            return;
        }
        self.admit_crossed_run(run, now);
        let (egress, mut peers) = self.sides();
        egress.enqueue_charged(
            &mut peers,
            c.in_port as usize,
            c.out as usize,
            slot,
            len,
            &c.info,
            &c.class,
            now,
            c.group,
        );
    }

    /// Once a round: publishes this shard's shared-pool use and takes the others'
    /// ([`PoolShare`]); moves what the FDB learnt into every outbox.
    pub fn exchange(&mut self, share: &PoolShare) {
        let me = self.shard.me as usize;
        let others = share.exchange(me, &self.pool.figures(), self.pool.slots_in_use());
        self.pool.set_others(others);
        self.announce();
    }

    /// Moves what the FDB learnt since the last call into every outbox: at the end of a
    /// round ([`Switch::exchange`]), and between the steps of a long one
    /// ([`Switch::trade_learns`]).
    pub fn announce(&mut self) {
        let me = self.shard.me as usize;
        let Switch { ingress, shard, .. } = self;
        ingress.fdb.announce(|mac, port_id, now| {
            let mut missed = 0;
            for (s, o) in shard.outboxes.iter_mut().enumerate() {
                if s != me && !o.push_learn(Learnt { mac, port_id, now }) {
                    missed += 1;
                }
            }
            missed
        });
    }

    /// Sends what waits for shard `to` over `link`, as far as free batches (and the queue of
    /// learns) allow. A learn that must wait for a later flush is counted on its port
    /// (`learn_late`): that shard floods the station's frames meanwhile.
    #[inline]
    pub fn flush_to(&mut self, to: usize, link: &Link) -> usize {
        let sent = self.shard.outboxes[to].flush(link);
        self.count_late_learns(to);
        sent
    }

    /// Learns, both ways, in the middle of a round: what this shard learnt since the last
    /// call goes onto `outgoing[s]` (the link to shard s; this shard's own entry unused), and
    /// what `incoming` brought is installed. A round that plays a late gap of the emulated
    /// wires through runs many steps (milliseconds on a busy machine); learns exchanged only
    /// between rounds left a station unknown to the other worker that long, and its frames
    /// flooded there (issue 41: 6.7 ms, 1,756 frames).
    pub fn trade_learns<'a>(
        &mut self,
        outgoing: impl Iterator<Item = &'a Link>,
        incoming: impl Iterator<Item = &'a Link>,
    ) {
        let me = self.shard.me as usize;
        self.announce();
        for (to, link) in outgoing.enumerate() {
            if to != me {
                self.shard.outboxes[to].flush_learns(link);
                self.count_late_learns(to);
            }
        }
        for link in incoming {
            self.take_learns(link);
        }
    }

    /// Counts the learns for shard `to` that the last flush left waiting (`learn_late`).
    #[cold]
    fn count_late_learns(&mut self, to: usize) {
        let Switch { ingress, shard, .. } = self;
        let outbox = &mut shard.outboxes[to];
        for l in outbox.late_learns() {
            ingress.fdb.count_late(l.port_id);
        }
        outbox.learns_counted();
    }

    /// Whether frames (not just releases) still wait to cross from here.
    pub fn frames_waiting(&self) -> bool {
        self.shard.outboxes.iter().any(|o| o.has_frames())
    }

    /// Whether anything at all waits to go to another shard.
    pub fn outboxes_empty(&self) -> bool {
        self.shard.outboxes.iter().all(|o| o.is_empty())
    }

    /// This shard's index.
    pub fn shard_index(&self) -> usize {
        self.shard.me as usize
    }

    /// Whether port index `port` is this shard's.
    pub fn owns(&self, port: usize) -> bool {
        !self.shard.is_remote(port)
    }

    /// After every worker stopped: what is still waiting here for other shards, to be handed
    /// to them directly (`runtime`'s last pass).
    pub fn take_outbox(&mut self, to: usize) -> Batch {
        let (frames, releases) = self.shard.outboxes[to].take_all();
        Batch { frames, releases }
    }
}

//! The switch's side of crossing: what a shard does with a frame for another shard's port, and
//! with what arrives from the others (`crate::shard`'s module doc says why it is split this way).

use super::{Batch, CrossFrame, Crossing, Learnt, Link, PoolShare, Release};
use crate::buffers::foreign::{ForeignFrame, ForeignKind, RxFrame};
use crate::counters::DropReason;
use crate::ingress::classify::Class;
use crate::ingress::flood::NO_GROUP;
use crate::switch::{store, Switch};
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
    /// A frame received on `port` (this shard's) for `out` (another shard's): stored here like
    /// any frame, then sent across.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cross_out(
        &mut self,
        port: usize,
        out: usize,
        frame: &[u8],
        held: Option<&mut RxFrame<'_>>,
        info: &FrameInfo,
        class: &Class,
        now: u64,
    ) {
        let Some(slot) = store(&mut self.packets, frame, held) else {
            self.ingress.drop_frame(port, class.pg, DropReason::NoBuffer);
            return;
        };
        self.rewrite(slot, frame.len(), info, class);
        self.cross_out_slot(port, out, slot, frame.len(), info, class, now);
    }

    /// The ingress half of admission for a frame in this shard's packet slot `slot`, then the
    /// frame goes to the shard owning `out`: its PG is charged here (XOFF decided here, exactly),
    /// the egress queue there.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cross_out_slot(
        &mut self,
        port: usize,
        out: usize,
        slot: u32,
        len: usize,
        info: &FrameInfo,
        class: &Class,
        now: u64,
    ) {
        if !self.charge_pg(port, class.pg as usize & 7, self.pool.cells_for(len), now) {
            self.packets.free(slot);
            return;
        }
        self.send_across(port, out, slot, len, info, class, NO_GROUP);
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
        self.shard.outbox_for(out).push_frame(Crossing {
            frame,
            len: len as u16,
            in_port: port as u8,
            out: out as u8,
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

    /// What arrived from another shard, handled in one go: learnt MACs into the FDB replica,
    /// releases to the PGs (and slots) they came from, frames to their egress queues.
    pub fn take_batch(&mut self, batch: &mut Batch, now: u64) {
        for l in batch.learns.drain(..) {
            self.ingress.fdb.install(l.mac, l.port_id, l.now);
        }
        for r in batch.releases.drain(..) {
            self.take_release(r);
        }
        for c in batch.frames.drain(..) {
            self.cross_in(c, now);
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
    /// now owns, or the other shard's slot, borrowed), then the egress half of admission.
    #[inline]
    fn cross_in(&mut self, c: Crossing, now: u64) {
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
        let slot = match self.packets.alloc_foreign(frame) {
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
        let (i, e) = share.exchange(me, self.pool.ingress.shared, self.pool.egress.shared);
        self.pool.set_others(i, e);
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

    /// Sends what waits for shard `to` over `link`, as far as free batches allow.
    #[inline]
    pub fn flush_to(&mut self, to: usize, link: &Link) -> usize {
        self.shard.outboxes[to].flush(link)
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
        Batch {
            frames,
            releases,
            learns: Vec::new(),
        }
    }
}

//! Shards: one [`crate::switch::Switch`] per worker, each owning some ports, and what crosses
//! between them.
//!
//! A shard does everything for the ports it owns: the ingress side of every frame they receive
//! (parse, FDB, classify, the PG's admission and XOFF) and the egress side of every frame they
//! send (queue admission, WRED, scheduling, pause reception, the watchdog). A frame received on
//! one shard for a port of another *crosses*: the ingress shard has charged its PG and sends the
//! frame (its buffer, never a copy of it: an mbuf itself, or a pointer to the ingress shard's
//! packet slot) with its class and parse result; the egress shard admits it to the queue. When
//! the frame leaves, or is refused or dropped there, a *release* goes back and the ingress shard
//! returns its PG's cells (and may send XON), and frees the slot the frame was copied into.
//! Learnt MAC addresses go to every other shard as *learns*, so each keeps a replica of the FDB.
//!
//! Frames and releases travel in [`Batch`]es over one [`Link`] per ordered pair of shards: a
//! full ring and a free ring of boxed batches, so a burst of frames costs one push and one pop
//! on lines both cores touch, not one per frame. Learns travel beside them on a queue of their
//! own, which the other shard empties first every round: in the batches, a learn waited
//! behind every batch of frames ahead of it (up to [`LINK_BATCHES`]), and under a flood that
//! crosses, the other shard flooded a station's frames for as long (issue 41: 7-446 frames of
//! a conversation flooded, against 1 on one worker). What a shard has to send waits in its [`Outbox`] (allocated
//! at start-up for the most it can hold) until a free batch takes it, so a full ring is
//! back-pressure (the shard stops receiving until it drains), never a loss.
//!
//! Replay and every single-worker run are one shard that owns every port: nothing crosses, and
//! the packet path pays one comparison per frame for the possibility.

mod cross;
pub mod pool;

use crate::buffers::foreign::ForeignFrame;
use crate::ingress::classify::Class;
use crate::wire::FrameInfo;
use crossbeam_queue::ArrayQueue;
use std::collections::VecDeque;
use std::ptr::NonNull;

pub use pool::PoolShare;

/// Frames a batch carries at most (a receive burst is 32).
pub const BATCH_FRAMES: usize = 64;
/// Releases a batch carries at most.
pub const BATCH_RELEASES: usize = 256;
/// Learns an outbox holds while the queue of learns to their shard is full; one more is not
/// announced there (`learn_unannounced`).
pub const OUTBOX_LEARNS: usize = 128;
/// Learns waiting on a link's queue at most: the other shard empties it every round.
pub const LINK_LEARNS: usize = 512;
/// Batches a shard lets wait on a link before it stops receiving: the other shard is behind.
/// A crossing frame holds its ingress PG's cells until its release comes back, so what waits
/// between shards must stay well under a PG's limit (4 batches of up to 64 frames of 1 KiB are
/// 1024 cells of 256 B; the default lossless PG's dynamic limit is about 1500): past it, a
/// sender that ignores PFC would overflow the headroom with frames the switch only received
/// to drop; with it, they wait in the port's ring (or the NIC counts them missed).
pub const MAX_BATCHES_IN_FLIGHT: usize = 4;
/// Frames an outbox holds at least.
const OUTBOX_FRAMES: usize = 8192;
/// Batches circulating on each ordered pair of shards: up to 4096 frames in flight one way.
pub const LINK_BATCHES: usize = 64;

/// The buffer of a frame that crosses.
pub enum CrossFrame {
    /// A backend's buffer (an mbuf): the egress shard owns it now and sends it as it is.
    Owned(ForeignFrame),
    /// A copy in the ingress shard's packet slot `home`, at `ptr`: the egress shard reads and
    /// marks it there, and the slot goes back to its shard with the frame's release.
    Borrowed {
        /// The frame's first byte in that slot.
        ptr: NonNull<u8>,
        /// The slot's index in the ingress shard's pool.
        home: u32,
    },
}

// SAFETY: a borrowed slot is touched only by the shard the frame is queued on until its release
// travels back (the rings' release/acquire order the hand-over); an owned buffer may be used and
// released from any thread (ForeignFrame's contract).
unsafe impl Send for CrossFrame {}

/// A frame crossing to the shard that owns its egress port, its ingress side done.
pub struct Crossing {
    /// The frame's bytes, handed over or lent.
    pub frame: CrossFrame,
    /// Frame length, bytes.
    pub len: u16,
    /// Ingress port index (its shard gets the release).
    pub in_port: u16,
    /// Egress port index, owned by the receiving shard.
    pub out: u16,
    /// Priority, PG and queue as the ingress shard classified it.
    pub class: Class,
    /// The parse result, so the egress shard does not parse again.
    pub info: FrameInfo,
    /// A flooded copy's group at the ingress shard (`ingress::flood::NO_GROUP` otherwise):
    /// its PG was charged once for every copy.
    pub group: u32,
}

/// A frame that came from another shard's port left this shard (sent, or dropped after or at
/// admission: `dropped`): its ingress PG gets its cells back (a flooded copy's: its `group`
/// loses a hold, and the PG gets the frame's cells back with the last), and `home` (if not
/// [`Release::NO_HOME`]) is the slot of the ingress shard that held its bytes.
#[derive(Clone, Copy, Debug)]
pub struct Release {
    /// Ingress port index of the frame.
    pub in_port: u16,
    /// The PG that was charged for it.
    pub pg: u8,
    /// Whether it was dropped rather than sent (the PG counts the drop).
    pub dropped: bool,
    /// Cells the PG gets back.
    pub cells: u16,
    /// The ingress shard's slot that held its bytes, or [`Self::NO_HOME`].
    pub home: u32,
    /// A flooded copy's group at the ingress shard (`ingress::flood::NO_GROUP` otherwise).
    pub group: u32,
}

impl Release {
    /// No slot to free: the frame crossed in a buffer of its own.
    pub const NO_HOME: u32 = u32::MAX;

    /// Whether it only gives cells back ([`Outbox::push_release`] adds such releases up).
    #[inline(always)]
    fn mergeable(&self) -> bool {
        !self.dropped && self.home == Self::NO_HOME && self.group == crate::ingress::flood::NO_GROUP
    }
}

/// A MAC address learnt (or learnt again) on a port of the sending shard.
#[derive(Clone, Copy, Debug)]
pub struct Learnt {
    /// The MAC as the FDB keys it (48 bits in a `u64`).
    pub mac: u64,
    /// Id of the port it was learnt on.
    pub port_id: u16,
    /// When it was learnt, ns: the entry's age starts there.
    pub now: u64,
}

/// What one ring transfer carries.
pub struct Batch {
    /// Frames crossing, in the order they were received.
    pub frames: Vec<Crossing>,
    /// Releases of frames that crossed the other way.
    pub releases: Vec<Release>,
}

impl Batch {
    fn new() -> Box<Batch> {
        Box::new(Batch {
            frames: Vec::with_capacity(BATCH_FRAMES),
            releases: Vec::with_capacity(BATCH_RELEASES),
        })
    }

    fn is_empty(&self) -> bool {
        self.frames.is_empty() && self.releases.is_empty()
    }
}

/// One direction between two shards: batches in flight, the empty ones going back, and the
/// learns, which overtake the batches.
pub struct Link {
    full: ArrayQueue<Box<Batch>>,
    free: ArrayQueue<Box<Batch>>,
    learns: ArrayQueue<Learnt>,
}

impl Link {
    /// A link with all its batches free.
    pub fn new() -> Self {
        let (full, free) = (ArrayQueue::new(LINK_BATCHES), ArrayQueue::new(LINK_BATCHES));
        for _ in 0..LINK_BATCHES {
            let _ = free.push(Batch::new());
        }
        Link {
            full,
            free,
            learns: ArrayQueue::new(LINK_LEARNS),
        }
    }

    /// The next batch that arrived, if any.
    #[inline]
    pub fn receive(&self) -> Option<Box<Batch>> {
        self.full.pop()
    }

    /// The next learn that arrived, if any: taken before any batch, whatever waits there.
    #[inline]
    pub fn receive_learn(&self) -> Option<Learnt> {
        self.learns.pop()
    }

    /// Gives an emptied batch back to the sender.
    #[inline]
    pub fn recycle(&self, mut b: Box<Batch>) {
        b.frames.clear();
        b.releases.clear();
        let _ = self.free.push(b);
    }

    /// True when nothing is in flight on this link.
    pub fn is_empty(&self) -> bool {
        self.full.is_empty() && self.learns.is_empty()
    }

    /// Batches sent and not yet taken by the other shard.
    #[inline]
    pub fn in_flight(&self) -> usize {
        self.full.len()
    }
}

impl Default for Link {
    fn default() -> Self {
        Link::new()
    }
}

/// What one shard has to send to one other, waiting for a free batch (frames, releases) or for
/// room on the link's queue of learns.
pub struct Outbox {
    frames: VecDeque<Crossing>,
    releases: Vec<Release>,
    /// Learns not yet on the link, oldest first.
    learns: VecDeque<Learnt>,
    /// How many of `learns` (the newest) were queued since the last flush: those a flush
    /// leaves behind are late ([`Outbox::late_learns`]).
    fresh_learns: usize,
    /// Frames one receive burst can send this way at most: a burst to every port of the
    /// destination (a flood crosses once per port).
    burst_need: usize,
}

impl Outbox {
    /// `burst_need`: the most frames one receive burst sends this way; `releases`: the most
    /// releases (one per frame the sending shard can hold). Holds two bursts' worth of frames.
    pub fn new(burst_need: usize, releases: usize) -> Self {
        Outbox {
            // Room for an emulated link's catch-up too, which plays several steps of its wire
            // in one round (`runtime::emulated::play_through`).
            frames: VecDeque::with_capacity((2 * burst_need).max(if releases == 0 { 0 } else { OUTBOX_FRAMES })),
            releases: Vec::with_capacity(if releases == 0 {
                0
            } else {
                releases + LINK_BATCHES * BATCH_FRAMES
            }),
            learns: VecDeque::with_capacity(OUTBOX_LEARNS),
            fresh_learns: 0,
            burst_need,
        }
    }

    /// Whether one more receive burst fits (checked before each port's burst).
    #[inline]
    pub fn has_room(&self) -> bool {
        self.frames.len() + self.burst_need <= self.frames.capacity()
    }

    /// Queues a crossing frame; [`Self::has_room`] must have said yes for the burst.
    #[inline]
    pub fn push_frame(&mut self, c: Crossing) {
        debug_assert!(
            self.frames.len() < self.frames.capacity(),
            "receive checked the room first"
        );
        self.frames.push_back(c);
    }

    /// A release never waits for room: it is what returns a PG's cells. The outbox holds one
    /// per frame the shard can hold and a round's arrivals besides, so it does not grow.
    ///
    /// A frame sent from its own buffer, released right after another of the same ingress PG,
    /// adds its cells to that release instead (the frames a queue sends back to back): the PG
    /// gives back the sum as it would frame by frame (headroom, then shared, then min), and
    /// its XON test only turns true as cells come back, so asked once after the sum it says
    /// what it would have said after the last of them. Drops (counted per frame), flooded
    /// copies (released per group) and frames in a borrowed slot (freed per slot) stay single.
    #[inline]
    pub fn push_release(&mut self, r: Release) {
        if let Some(last) = self.releases.last_mut() {
            if r.mergeable()
                && last.mergeable()
                && last.in_port == r.in_port
                && last.pg == r.pg
                && u32::from(last.cells) + u32::from(r.cells) <= u32::from(u16::MAX)
            {
                last.cells += r.cells;
                return;
            }
        }
        self.releases.push(r);
    }

    /// Queues a learn; false when the outbox is full and the learn was not queued (the
    /// FDB counts it: `Fdb::announce`).
    #[inline]
    #[must_use]
    pub fn push_learn(&mut self, l: Learnt) -> bool {
        let room = self.learns.len() < OUTBOX_LEARNS;
        if room {
            self.learns.push_back(l);
            self.fresh_learns += 1;
        }
        room
    }

    /// The learns queued since the last flush that it could not put on the link (its queue
    /// of learns full: the other shard is behind), for the FDB to count as late. Each learn
    /// is late once: the next flush starts a new count.
    pub fn late_learns(&self) -> impl Iterator<Item = &Learnt> {
        let late = self.fresh_learns.min(self.learns.len());
        self.learns.iter().skip(self.learns.len() - late)
    }

    /// Whether nothing waits to be sent.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty() && self.releases.is_empty() && self.learns.is_empty()
    }

    /// Whether frames wait to be sent.
    pub fn has_frames(&self) -> bool {
        !self.frames.is_empty()
    }

    /// Moves the learns that wait onto `link`'s queue of learns, oldest first, as far as it
    /// has room; then what else waits into free batches of `link`, in order, as far as there
    /// are any. Returns the messages sent. Call [`Outbox::late_learns`] after it, before the
    /// next learn is queued.
    pub fn flush(&mut self, link: &Link) -> usize {
        let mut sent = self.flush_learns(link);
        while !self.frames.is_empty() || !self.releases.is_empty() {
            let Some(mut b) = link.free.pop() else { break };
            let n = self.frames.len().min(BATCH_FRAMES);
            b.frames.extend(self.frames.drain(..n));
            let n = self.releases.len().min(BATCH_RELEASES);
            let from = self.releases.len() - n;
            b.releases.extend(self.releases.drain(from..));
            sent += b.frames.len() + b.releases.len();
            debug_assert!(!b.is_empty());
            if let Err(b) = link.full.push(b) {
                // Unreachable: as many places as batches. Put the messages back.
                let mut b = b;
                for c in b.frames.drain(..).rev() {
                    self.frames.push_front(c);
                }
                self.releases.append(&mut b.releases);
                let _ = link.free.push(b);
                break;
            }
        }
        sent
    }

    /// Moves the learns that wait onto `link`'s queue of learns, oldest first, as far as it
    /// has room (the learns of [`Outbox::flush`] alone). Returns how many.
    pub fn flush_learns(&mut self, link: &Link) -> usize {
        let mut sent = 0;
        while let Some(&l) = self.learns.front() {
            if link.learns.push(l).is_err() {
                break;
            }
            self.learns.pop_front();
            sent += 1;
        }
        sent
    }

    /// Starts a new count of late learns ([`Outbox::late_learns`]).
    pub fn learns_counted(&mut self) {
        self.fresh_learns = 0;
    }

    /// Everything still waiting, for the last pass after the workers stop.
    pub fn take_all(&mut self) -> (Vec<Crossing>, Vec<Release>) {
        (self.frames.drain(..).collect(), self.releases.drain(..).collect())
    }
}

/// Which shard owns each port, seen from one shard, and its outboxes. Replay and single-worker
/// runs have one shard and no outboxes.
pub struct ShardLink {
    /// This shard's index.
    pub me: u8,
    /// Per port index: the shard that owns it (ports beyond 256 cannot be named by a
    /// descriptor and are refused by validation).
    pub owner: [u8; 256],
    /// Number of shards.
    pub shards: u8,
    /// Per destination shard (`me`'s own entry unused).
    pub outboxes: Vec<Outbox>,
    /// Per packet slot: for a frame that crossed in, the slot of its ingress shard that holds
    /// its bytes ([`Release::NO_HOME`] for a frame in its own buffer). Empty with one shard.
    pub homes: Box<[u32]>,
    /// Whether learnt MACs are announced to the other shards.
    pub announce: bool,
    /// The parse results and classes of the frames a run to another shard's port holds
    /// (`egress::run`), in the run's order, until the run is sent across.
    pub(crate) staged: Vec<(FrameInfo, Class)>,
}

impl ShardLink {
    /// One shard owning every port: replay, tests, one worker.
    pub fn single() -> Self {
        ShardLink {
            me: 0,
            owner: [0; 256],
            shards: 1,
            outboxes: Vec::new(),
            homes: Box::new([]),
            announce: false,
            staged: Vec::new(),
        }
    }

    /// Shard `me` of `shards`, with `owner[i]` the shard of port index i, for a switch of
    /// `slots` packet slots and `ports` ports.
    pub fn sharded(me: u8, shards: u8, owners: &[u8], slots: usize, ports: usize) -> Self {
        let mut owner = [0u8; 256];
        owner[..owners.len()].copy_from_slice(owners);
        ShardLink {
            me,
            owner,
            shards,
            outboxes: (0..shards)
                .map(|s| {
                    if s == me {
                        Outbox::new(0, 0)
                    } else {
                        let theirs = owners[..ports].iter().filter(|&&o| o == s).count().max(1);
                        Outbox::new(crate::runtime::worker::BURST * theirs, slots)
                    }
                })
                .collect(),
            homes: vec![Release::NO_HOME; slots].into_boxed_slice(),
            announce: true,
            staged: Vec::with_capacity(crate::egress::run::RUN_MAX),
        }
    }

    /// Whether port index `port` belongs to another shard.
    #[inline(always)]
    pub fn is_remote(&self, port: usize) -> bool {
        self.owner[port & 255] != self.me
    }

    /// The outbox towards the owner of port index `port`.
    #[inline]
    pub fn outbox_for(&mut self, port: usize) -> &mut Outbox {
        let s = self.owner[port & 255] as usize;
        &mut self.outboxes[s]
    }

    /// Whether every outbox can take one more receive burst.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.outboxes.iter().all(Outbox::has_room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingress::flood::NO_GROUP;

    fn release(in_port: u16, pg: u8, cells: u16) -> Release {
        Release {
            in_port,
            pg,
            dropped: false,
            cells,
            home: Release::NO_HOME,
            group: NO_GROUP,
        }
    }

    /// Frames sent from their own buffers, one after another from one PG, go back as one
    /// release of their cells; anything counted or freed per frame, another PG, or a sum past
    /// a release's 16 bits, starts a new one.
    #[test]
    fn releases_of_one_pg_add_up_and_nothing_else_does() {
        let mut o = Outbox::new(32, 64);
        o.push_release(release(0, 3, 4));
        o.push_release(release(0, 3, 4));
        o.push_release(release(1, 3, 4)); // another port
        o.push_release(release(1, 0, 4)); // another PG
        o.push_release(Release {
            dropped: true,
            ..release(1, 0, 4)
        });
        o.push_release(release(1, 0, 4)); // after a drop: its own
        o.push_release(Release {
            home: 7,
            ..release(1, 0, 4)
        });
        o.push_release(Release {
            group: 2,
            ..release(1, 0, 4)
        });
        o.push_release(release(2, 3, u16::MAX - 1));
        o.push_release(release(2, 3, 2)); // the sum would not fit
        o.push_release(release(2, 3, 1));
        let (_, releases) = o.take_all();
        let seen: Vec<_> = releases.iter().map(|r| (r.in_port, r.pg, r.cells, r.dropped)).collect();
        assert_eq!(
            seen,
            [
                (0, 3, 8, false),
                (1, 3, 4, false),
                (1, 0, 4, false),
                (1, 0, 4, true),
                (1, 0, 4, false),
                (1, 0, 4, false),
                (1, 0, 4, false),
                (2, 3, u16::MAX - 1, false),
                (2, 3, 3, false),
            ]
        );
        assert_eq!(releases[5].home, 7);
        assert_eq!(releases[6].group, 2);
    }
}

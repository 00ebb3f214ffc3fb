//! The egress queues: FIFO lists linked through the packet slots, in one store of descriptors
//! for the whole switch.
//!
//! Why not a ring per queue: a queue with a dynamic or no limit may hold every frame the buffer
//! can hold, so each of a port's eight queues would need a ring that long, and the rings would
//! grow with ports × queues × buffer cells (gigabytes for a 64 MiB buffer of 64 B cells over a
//! few dozen ports). But a queued frame owns exactly one packet slot (a flood gives each copy
//! its own slot, `Switch::flood`), so no more frames can be queued, over all queues together,
//! than there are slots. One [`Desc`] and one link per slot therefore hold every queue at once,
//! and memory grows with the buffer only (`controlplane::memory`: slots × (20 + 4) bytes).
//!
//! A queue is then three numbers ([`DescQueue`]: head, tail, length), kept by its port; the
//! [`DescStore`] is kept by `Egress`, one per switch. Pushing writes the frame's own entry and
//! its predecessor's link; popping reads the head's entry. Nothing allocates, locks or calls
//! the system after start-up, and nothing can be full: a frame that got a slot has its entry.

use super::port::Desc;

/// The link after a queue's last entry.
const END: u32 = u32::MAX;
/// The link of an entry in no queue. Kept up to date in debug builds only, where `push` checks
/// that a slot is not queued twice (two frames in one slot would corrupt both lists).
const NOT_QUEUED: u32 = u32::MAX - 1;

/// One packet slot's place in the queues: the descriptor of the frame it holds and the slot
/// queued after it.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Entry {
    desc: Desc,
    next: u32,
}

// The control plane's memory estimate counts a descriptor and a 4-byte link per slot.
const _: () =
    assert!(std::mem::size_of::<Entry>() as u64 <= controlplane::memory::DESC_BYTES + controlplane::memory::LINK_BYTES);

/// What EDF's queues keep per slot besides the entry: the arrival number that breaks ties
/// between equal deadlines (so a flow's frames, whose deadlines never decrease, leave in
/// order), and the first child of a heap node (`ideal` mode; a node's siblings go through
/// `Entry::next`).
#[derive(Debug, Clone, Copy)]
struct EdfLink {
    seq: u32,
    child: u32,
}

const _: () = assert!(std::mem::size_of::<EdfLink>() as u64 <= controlplane::memory::EDF_LINK_BYTES);

/// Whether deadline key `a` (deadline, arrival number) comes before `b`. Deadlines are whole
/// nanoseconds of the switch clock (u64: no wrap in 584 years); arrival numbers are per queue,
/// modulo 2^32, compared by their wrapping difference, right for frames fewer than 2^31
/// arrivals apart: they only break ties between equal deadlines, that is between frames that
/// arrived at most a budget (1 s) apart, and no port takes 2^31 frames a second.
#[inline]
pub(crate) fn earlier(a: (u64, u32), b: (u64, u32)) -> bool {
    a.0 < b.0 || (a.0 == b.0 && (a.1.wrapping_sub(b.1) as i32) < 0)
}

/// Every queued frame's descriptor, one entry per packet slot, indexed by the slot number: the
/// storage all egress queues of the switch share.
#[derive(Debug)]
pub(crate) struct DescStore {
    entries: Box<[Entry]>,
    edf: Box<[EdfLink]>,
}

/// One egress queue: a FIFO list through the [`DescStore`], oldest frame at `head`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DescQueue {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for DescQueue {
    fn default() -> Self {
        DescQueue {
            head: END,
            tail: END,
            len: 0,
        }
    }
}

impl DescQueue {
    /// Frames queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl DescStore {
    /// A store for `slots` packet slots (the packet pool's capacity).
    pub fn new(slots: usize) -> Self {
        let unused = Entry {
            desc: Desc::default(),
            next: NOT_QUEUED,
        };
        let mut entries = vec![unused; slots.max(1)];
        // Touch every page now (the allocator hands out lazily mapped zero pages): a page fault
        // on the packet path costs more than a burst.
        std::hint::black_box(&mut entries);
        entries.fill(unused);
        let mut edf = vec![EdfLink { seq: 0, child: END }; slots.max(1)];
        std::hint::black_box(&mut edf);
        edf.fill(EdfLink { seq: 0, child: END });
        DescStore {
            entries: entries.into_boxed_slice(),
            edf: edf.into_boxed_slice(),
        }
    }

    /// Appends `d` to `queue`, in the entry of its packet slot `d.slot`.
    #[inline]
    pub fn push(&mut self, queue: &mut DescQueue, d: Desc) {
        let slot = d.slot;
        let entry = &mut self.entries[slot as usize];
        debug_assert_eq!(entry.next, NOT_QUEUED, "slot {slot} is already queued");
        entry.desc = d;
        entry.next = END;
        if queue.len == 0 {
            queue.head = slot;
        } else {
            self.entries[queue.tail as usize].next = slot;
        }
        queue.tail = slot;
        queue.len += 1;
    }

    /// Removes and returns `queue`'s oldest descriptor.
    #[inline]
    pub fn pop(&mut self, queue: &mut DescQueue) -> Option<Desc> {
        let d = *self.front(queue)?;
        self.pop_front(queue);
        Some(d)
    }

    /// Removes `queue`'s oldest descriptor, which the caller has read already
    /// ([`DescStore::front`]): the batch's pop (`egress/batch.rs`), without copying it again.
    #[inline]
    pub fn pop_front(&mut self, queue: &mut DescQueue) {
        debug_assert!(queue.len > 0, "pop_front on an empty queue");
        let entry = &mut self.entries[queue.head as usize];
        queue.head = entry.next;
        if cfg!(debug_assertions) {
            entry.next = NOT_QUEUED;
        }
        queue.len -= 1;
    }

    /// `queue`'s oldest descriptor, left queued (what the scheduler and the shapers look at);
    /// for a heap, its earliest deadline.
    #[inline]
    pub fn front(&self, queue: &DescQueue) -> Option<&Desc> {
        (queue.len > 0).then(|| &self.entries[queue.head as usize].desc)
    }

    /// `queue`'s newest descriptor (a list's, not a heap's).
    #[inline]
    pub fn back(&self, queue: &DescQueue) -> Option<&Desc> {
        (queue.len > 0).then(|| &self.entries[queue.tail as usize].desc)
    }

    /// As [`DescStore::push`], recording the frame's arrival number `seq` for [`DescStore::key`].
    #[inline]
    pub fn push_seq(&mut self, queue: &mut DescQueue, d: Desc, seq: u32) {
        self.edf[d.slot as usize].seq = seq;
        self.push(queue, d);
    }

    /// The EDF order of a queued frame: its deadline, then its arrival number.
    #[inline]
    pub fn key(&self, d: &Desc) -> (u64, u32) {
        (d.deadline, self.edf[d.slot as usize].seq)
    }

    /// Adds `d` (arrival number `seq`) to the heap `heap` (EDF's `ideal` mode): a pairing heap
    /// through the slots, so it needs no storage of its own and never fills. `heap.head` is
    /// its root, the earliest key; `heap.tail` is unused.
    #[inline]
    pub fn heap_push(&mut self, heap: &mut DescQueue, d: Desc, seq: u32) {
        let slot = d.slot;
        let entry = &mut self.entries[slot as usize];
        debug_assert_eq!(entry.next, NOT_QUEUED, "slot {slot} is already queued");
        entry.desc = d;
        entry.next = END;
        self.edf[slot as usize] = EdfLink { seq, child: END };
        heap.head = if heap.len == 0 {
            slot
        } else {
            self.meld(heap.head, slot)
        };
        heap.len += 1;
    }

    /// Removes and returns the heap's earliest descriptor (two-pass pairing: amortised
    /// O(log n), no recursion, no storage).
    #[inline]
    pub fn heap_pop(&mut self, heap: &mut DescQueue) -> Option<Desc> {
        if heap.len == 0 {
            return None;
        }
        let root = heap.head as usize;
        let d = self.entries[root].desc;
        // Pass 1: meld the root's children in pairs, left to right, stacking each pair's root
        // (through `next`). Pass 2: meld the stack, from the last pair back to the first.
        let mut pairs = END;
        let mut cur = self.edf[root].child;
        while cur != END {
            let a = cur;
            let b = self.entries[a as usize].next;
            if b == END {
                self.entries[a as usize].next = pairs;
                pairs = a;
                break;
            }
            cur = self.entries[b as usize].next;
            let m = self.meld(a, b);
            self.entries[m as usize].next = pairs;
            pairs = m;
        }
        let mut top = END;
        while pairs != END {
            let p = pairs;
            pairs = self.entries[p as usize].next;
            top = if top == END { p } else { self.meld(top, p) };
        }
        if top != END {
            self.entries[top as usize].next = END;
        }
        if cfg!(debug_assertions) {
            self.entries[root].next = NOT_QUEUED;
        }
        heap.head = top;
        heap.len -= 1;
        Some(d)
    }

    /// A list's descriptors, oldest first, left queued (tests).
    #[cfg(test)]
    pub fn list(&self, queue: &DescQueue) -> Vec<Desc> {
        let mut out = Vec::new();
        let mut at = queue.head;
        for _ in 0..queue.len {
            out.push(self.entries[at as usize].desc);
            at = self.entries[at as usize].next;
        }
        out
    }

    /// Joins two heap roots: the later becomes the earlier's first child. Returns the root.
    #[inline]
    fn meld(&mut self, a: u32, b: u32) -> u32 {
        let ka = self.key(&self.entries[a as usize].desc);
        let kb = self.key(&self.entries[b as usize].desc);
        let (parent, child) = if earlier(kb, ka) { (b, a) } else { (a, b) };
        self.entries[child as usize].next = self.edf[parent as usize].child;
        self.edf[parent as usize].child = child;
        parent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn desc(slot: u32) -> Desc {
        Desc {
            slot,
            len: 64 + slot as u16,
            ..Desc::default()
        }
    }

    fn slots(store: &mut DescStore, q: &mut DescQueue) -> Vec<u32> {
        std::iter::from_fn(|| store.pop(q)).map(|d| d.slot).collect()
    }

    #[test]
    fn a_queue_is_first_in_first_out() {
        let mut store = DescStore::new(8);
        let mut q = DescQueue::default();
        assert!(q.is_empty() && store.front(&q).is_none() && store.pop(&mut q).is_none());
        for s in [5, 0, 7, 2] {
            store.push(&mut q, desc(s));
        }
        assert_eq!(q.len(), 4);
        assert_eq!(store.front(&q).map(|d| (d.slot, d.len)), Some((5, 69)), "the oldest");
        assert_eq!(
            store.pop(&mut q).map(|d| d.len),
            Some(69),
            "the whole descriptor comes back"
        );
        assert_eq!(slots(&mut store, &mut q), [0, 7, 2]);
        assert!(q.is_empty() && store.front(&q).is_none());
        // Emptied, then reused: the stale tail must not matter.
        store.push(&mut q, desc(3));
        store.push(&mut q, desc(5));
        assert_eq!(slots(&mut store, &mut q), [3, 5]);
    }

    #[test]
    fn interleaved_queues_share_one_store() {
        // Every slot of the store in use at once, alternating over three queues.
        let mut store = DescStore::new(9);
        let mut qs = [DescQueue::default(); 3];
        for s in 0..9 {
            store.push(&mut qs[s as usize % 3], desc(8 - s));
        }
        assert_eq!(qs.map(|q| q.len()), [3, 3, 3]);
        // Pop one from the middle queue, push it back at the end of the first.
        let d = store.pop(&mut qs[1]).unwrap();
        assert_eq!(d.slot, 7);
        store.push(&mut qs[0], d);
        assert_eq!(qs.map(|q| q.len()), [4, 2, 3]);
        assert_eq!(slots(&mut store, &mut qs[0]), [8, 5, 2, 7]);
        assert_eq!(slots(&mut store, &mut qs[1]), [4, 1]);
        assert_eq!(slots(&mut store, &mut qs[2]), [6, 3, 0]);
    }

    #[test]
    fn draining_a_queue_leaves_the_others_and_frees_its_slots() {
        let mut store = DescStore::new(6);
        let (mut a, mut b) = (DescQueue::default(), DescQueue::default());
        for s in 0..3 {
            store.push(&mut a, desc(2 * s));
            store.push(&mut b, desc(2 * s + 1));
        }
        assert_eq!(slots(&mut store, &mut a), [0, 2, 4]);
        assert!(a.is_empty() && store.pop(&mut a).is_none());
        assert_eq!(b.len(), 3);
        // The drained slots carry other frames now, in another queue.
        for s in [4, 0, 2] {
            store.push(&mut b, desc(s));
        }
        assert_eq!(slots(&mut store, &mut b), [1, 3, 5, 4, 0, 2]);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "slot 3 is already queued")]
    fn a_slot_queued_twice_is_caught_in_debug_builds() {
        let mut store = DescStore::new(4);
        let (mut a, mut b) = (DescQueue::default(), DescQueue::default());
        store.push(&mut a, desc(3));
        store.push(&mut b, desc(3));
    }

    proptest! {
        /// Any sequence of pushes (of free slots) and pops over four queues behaves like four
        /// `VecDeque`s.
        #[test]
        fn behaves_like_one_vecdeque_per_queue(ops in proptest::collection::vec((0usize..4, any::<bool>()), 0..300)) {
            const SLOTS: u32 = 16;
            let mut store = DescStore::new(SLOTS as usize);
            let mut qs = [DescQueue::default(); 4];
            let mut model: [VecDeque<u32>; 4] = Default::default();
            let mut free: Vec<u32> = (0..SLOTS).rev().collect();
            for (q, push) in ops {
                match (push, free.pop()) {
                    (true, Some(slot)) => {
                        store.push(&mut qs[q], desc(slot));
                        model[q].push_back(slot);
                    }
                    (true, None) => {}
                    (false, spare) => {
                        free.extend(spare);
                        let got = store.pop(&mut qs[q]).map(|d| d.slot);
                        prop_assert_eq!(got, model[q].pop_front());
                        free.extend(got);
                    }
                }
                for (q, m) in qs.iter().zip(&model) {
                    prop_assert_eq!(q.len(), m.len());
                    prop_assert_eq!(store.front(q).map(|d| d.slot), m.front().copied());
                }
            }
        }
    }
}

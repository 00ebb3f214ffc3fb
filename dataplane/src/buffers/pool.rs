//! Packet buffers, stored by what a frame takes, in one arena every frame size shares.
//!
//! The arena is an array of *units* of one cell each (rounded up to 16 B,
//! `controlplane::memory::head_bytes`). A frame of L bytes takes ⌈L / unit⌉ consecutive units,
//! and its slot number is the index of the first: every frame, short or long, is at
//! `slot × unit` in one allocation, so the pipeline reads and writes it as one slice from its
//! slot number alone, as in a DPDK mempool, and only a small descriptor moves through the
//! queues. Frames are kept in *size classes*, one per unit count; class 0 (one unit: every
//! frame up to a cell) is a stack of free units, exactly as the slots were before any frame was
//! longer than a cell, and each longer class a list of free buffers linked through a per-unit
//! array. A class takes a *chunk* of units (`controlplane::memory::chunk_units`) off the arena's
//! free list when it has no free buffer: a pop, never an allocation. When the arena has none
//! left, the chunks whose buffers are all free go back to it (`reclaim`, off the common path:
//! it runs only when the arena is empty) and the class takes one of those. The MMU charges a
//! frame at least as many cells as it takes units, so the frames the buffer holds never take
//! more units than it has cells; the arena has a quarter more and room for each class's
//! partly used chunk (`controlplane::memory::arena_units`). A frame for which there is still no
//! room is refused as when no slot was free (`no_buffer`).
//!
//! Why an arena of units and not an ASIC's chain of cells, or size classes each grown on its
//! own: a chained frame is not contiguous, and everything after the pool reads and writes a
//! frame as one slice (parsing, ECN and tag rewrites in place, a crossing frame lent to another
//! shard by its address, a backend's transmit); classes that each keep what they grew must each
//! be grown, in real time, to all the frames of their size the buffer could hold, 24× the
//! buffer's bytes for an SN5600 (docs/design-history.md, "Packet storage").
//!
//! The arena is allocated as lazily mapped pages and its chunks handed out lowest first: in
//! virtual time memory follows the peak that was buffered. `rocesw run` faults it in at
//! start-up ([`PacketPool::prefault`]), so no page fault waits on the packet path.
//!
//! A slot may also hold a frame in a buffer its port backend owns (a DPDK mbuf, received
//! without a copy: [`super::foreign`]). Such a slot is a one-unit slot whose record refers to
//! that buffer instead; `get`, `get_mut` and `clone_slot` read and write it the same way,
//! `free` releases it, and `take_foreign` hands it to the transmitting backend. The pipeline
//! never knows where a slot's frame is.

use super::foreign::{self, Foreign, ForeignFrame};

/// A frame leaving its slot ([`PacketPool::take`]).
pub enum Taken<'a> {
    /// A copy in the pool: send these bytes.
    Arena(&'a [u8]),
    /// A backend's buffer, now the caller's.
    Foreign(ForeignFrame),
}

// The control plane's memory estimate counts a unit's free-list entry, link, class and foreign
// record, and a chunk's free-list entry, class and count, at exactly these sizes: a record that
// shrinks or grows fails here, not in a wrong estimate.
const _: () = assert!(
    (2 * std::mem::size_of::<u32>() + std::mem::size_of::<u8>() + std::mem::size_of::<Option<Foreign>>()) as u64
        == controlplane::memory::SLOT_BOOKKEEPING_BYTES
);
const _: () = assert!(
    (2 * std::mem::size_of::<u32>() + std::mem::size_of::<u8>()) as u64
        == controlplane::memory::CHUNK_BOOKKEEPING_BYTES
);

/// The end of a class's free list.
const NIL: u32 = u32::MAX;
/// A chunk on the arena's free list, carved for no class.
const NO_CLASS: u8 = u8::MAX;
/// Frame lengths `class_of` covers, in 16 B steps: any longer one is looked up as this long,
/// so the packet path bounds the look-up with a `min` and no branch.
const LOOKUP_LEN: usize = 1 << 16;

/// A size class of more than one unit (its free list's first buffer is in
/// [`PacketPool::heads`], apart, so the packet path indexes a plain array of `u32`).
#[derive(Debug, Clone, Copy)]
struct Class {
    /// Units a buffer of the class takes.
    units: u32,
    /// Buffers carved for the class (free or holding a frame).
    carved: usize,
}

/// The packet slots of one switch (or shard): the arena of units every frame is stored in, its
/// size classes, and the records of frames kept in a backend's buffers instead.
#[derive(Debug)]
pub struct PacketPool {
    arena: Box<[u8]>,
    /// Bytes of a unit (a one-unit frame's head).
    head_size: usize,
    /// The longest frame taken (a multiple of 64).
    max_frame: usize,
    /// Units in the arena.
    units: usize,
    /// Class 0's free units, the lowest on top: the one-cell frames' stack. Its capacity is
    /// every unit, so a push never reallocates.
    free: Vec<u32>,
    /// Units carved for class 0 (free or holding a frame).
    carved0: usize,
    /// Classes by number; a class of `c` has `c + 1` units (class 0's entry is unused: its
    /// list is `free`).
    classes: Box<[Class]>,
    /// By class: the first free buffer (its first unit), or [`NIL`]; the rest are linked
    /// through `next`. One entry more than the classes: the too-long frames' (always NIL).
    heads: Box<[u32]>,
    /// By a frame's length in 16 B units (rounded up, up to [`LOOKUP_LEN`]): its class, or
    /// for a frame longer than `max_frame` a class past the last, whose list is always empty
    /// and which never grows.
    class_of: Box<[u8]>,
    /// Per unit: the class of the buffer starting there.
    class_at: Box<[u8]>,
    /// Per unit: the next free buffer of its class after the one starting there.
    next: Box<[u32]>,
    /// log2 of a chunk's units.
    chunk_shift: u32,
    /// The arena's free chunks, the lowest on top.
    chunks_free: Vec<u32>,
    /// Per chunk: the class it is carved for, or [`NO_CLASS`].
    chunk_class: Box<[u8]>,
    /// Per chunk: free buffers counted by [`Self::reclaim`].
    tally: Box<[u32]>,
    /// Per slot: the backend's buffer its frame is in instead of the arena, if any.
    elsewhere: Box<[Option<Foreign>]>,
    /// Slots holding a frame in a backend's buffer: while none does, no look at `elsewhere`.
    foreign_held: usize,
}

impl PacketPool {
    /// `slots` slots of at least `slot_size` bytes (rounded up to 64, a cache line), all free:
    /// every frame fits in one unit (tests, benches).
    pub fn new(slots: usize, slot_size: usize) -> Self {
        let size = slot_size.max(1).next_multiple_of(64);
        Self::with_heads(slots, size, size)
    }

    /// An arena of `units` units of `head_size` bytes (rounded up to 16), taking frames up to
    /// `max_frame` bytes (rounded up to 64); a frame longer than a unit takes as many
    /// consecutive units as it needs. The arena is mapped, not yet touched: see
    /// [`Self::prefault`].
    pub fn with_heads(units: usize, head_size: usize, max_frame: usize) -> Self {
        let head_size = head_size.max(1).next_multiple_of(16);
        let max_frame = max_frame.max(1).next_multiple_of(64).max(head_size);
        let classes = controlplane::memory::max_units(head_size as u64, max_frame as u64) as usize;
        assert!(classes < usize::from(NO_CLASS), "size classes fit a byte");
        assert!(max_frame < LOOKUP_LEN, "the class look-up covers every frame taken");
        assert!(units < NIL as usize, "slot numbers fit 32 bits");
        let chunk = controlplane::memory::chunk_units(classes as u64) as usize;
        let chunks = units.div_ceil(chunk);
        let class_of: Box<[u8]> = (0..=LOOKUP_LEN / 16)
            .map(|u16s| match u16s * 16 {
                len if len > max_frame => classes as u8,
                len => (len.div_ceil(head_size).max(1) - 1) as u8,
            })
            .collect();
        PacketPool {
            // Zeroed: lazily mapped pages, which cost memory only once written.
            arena: vec![0u8; units * head_size].into_boxed_slice(),
            head_size,
            max_frame,
            units,
            free: Vec::with_capacity(units),
            carved0: 0,
            classes: (0..classes)
                .map(|c| Class {
                    units: c as u32 + 1,
                    carved: 0,
                })
                .collect(),
            heads: vec![NIL; classes + 1].into_boxed_slice(),
            class_of,
            class_at: vec![0u8; units].into_boxed_slice(),
            next: vec![0u32; units].into_boxed_slice(),
            chunk_shift: chunk.trailing_zeros(),
            // Popped from the end: hand out low chunks first, which keeps memory warm and, in
            // virtual time, as small as the peak held.
            chunks_free: (0..chunks as u32).rev().collect(),
            chunk_class: vec![NO_CLASS; chunks].into_boxed_slice(),
            tally: vec![0u32; chunks].into_boxed_slice(),
            elsewhere: vec![None; units].into_boxed_slice(),
            foreign_held: 0,
        }
    }

    /// Faults the whole arena and its bookkeeping in now, like a DPDK mempool on hugepages,
    /// not on the packet path (`rocesw run`).
    pub fn prefault(&mut self) {
        std::hint::black_box(&mut self.arena);
        self.arena.fill(0);
        std::hint::black_box(&mut self.next);
        self.next.fill(0);
        std::hint::black_box(&mut self.class_at);
        self.class_at.fill(0);
        for e in self.free.spare_capacity_mut() {
            e.write(0);
        }
        std::hint::black_box(&mut self.free);
    }

    /// The longest frame a slot takes (a multiple of 64).
    pub fn slot_size(&self) -> usize {
        self.max_frame
    }

    /// Bytes of a unit: frames up to this long take one.
    pub fn head_size(&self) -> usize {
        self.head_size
    }

    /// Units not holding a frame (free in a class, in the arena's free chunks, or the unused
    /// end of a chunk). Walks the free lists (tests and reports: the packet path keeps no
    /// count).
    pub fn available(&self) -> usize {
        let held0 = self.carved0 - self.free.len();
        let held: usize = (1..self.classes.len())
            .map(|c| (self.classes[c].carved - self.list_len(c)) * self.classes[c].units as usize)
            .sum();
        self.units - held0 - held
    }

    /// Free buffers on class `c`'s list.
    fn list_len(&self, c: usize) -> usize {
        let (mut n, mut u) = (0, self.heads[c]);
        while u != NIL {
            n += 1;
            u = self.next[u as usize];
        }
        n
    }

    /// Units in all: the most one-unit frames the pool can hold at once.
    pub fn capacity(&self) -> usize {
        self.units
    }

    /// Slots holding a frame in a backend's buffer (zero copy) rather than a copy.
    pub fn foreign_held(&self) -> usize {
        self.foreign_held
    }

    /// Bytes the classes of more than one unit have carved (holding frames or free in them).
    pub fn class_bytes(&self) -> usize {
        let units: usize = self.classes[1..].iter().map(|c| c.carved * c.units as usize).sum();
        units * self.head_size
    }

    /// Bytes of the arena's chunks carved for any class: what frames have touched.
    pub fn carved_bytes(&self) -> usize {
        ((self.chunk_class.len() - self.chunks_free.len()) << self.chunk_shift) * self.head_size
    }

    /// A free one-unit slot: off class 0's stack, or a chunk carved for it.
    #[inline(always)]
    fn pop_short(&mut self) -> Option<u32> {
        match self.free.pop() {
            Some(slot) => Some(slot),
            None => self.grow_short(),
        }
    }

    /// Copies `frame` into a free slot. None when the arena has no room or the frame does not
    /// fit. Always inlined: the receive path's one allocation a frame.
    #[inline(always)]
    pub fn alloc_copy(&mut self, frame: &[u8]) -> Option<u32> {
        if frame.len() > self.head_size {
            return self.alloc_long(frame.as_ptr(), frame.len());
        }
        let slot = self.pop_short()?;
        let start = slot as usize * self.head_size;
        self.arena[start..start + frame.len()].copy_from_slice(frame);
        Some(slot)
    }

    /// A frame longer than a unit: a buffer of its class (as many units as it takes), `len`
    /// bytes copied from `src` into it. Inlined, as the short path is: the class comes from a
    /// lookup table and its buffer off its free list, without a bounds check; only growing is
    /// out of line.
    #[inline(always)]
    fn alloc_long(&mut self, src: *const u8, len: usize) -> Option<u32> {
        // SAFETY: `class_of` has `LOOKUP_LEN / 16 + 1` entries. A frame longer than
        // `max_frame` finds the class past the last, whose list is empty: `grow_long` refuses it.
        let c = usize::from(unsafe { *self.class_of.get_unchecked(len.min(LOOKUP_LEN).div_ceil(16)) });
        // SAFETY: every entry of `class_of` is an index into `heads` (built together).
        let head = unsafe { self.heads.get_unchecked_mut(c) };
        let slot = if *head != NIL {
            let slot = *head;
            // SAFETY: a free buffer's first unit is below `units`, the length of `next`.
            *head = unsafe { *self.next.get_unchecked(slot as usize) };
            slot
        } else {
            self.grow_long(c)?
        };
        let start = slot as usize * self.head_size;
        debug_assert!(start + len <= self.arena.len());
        // SAFETY: `src` holds `len` bytes (the caller's frame, or another slot's, never this
        // free buffer); the buffer's units hold at least `len` bytes within the arena.
        unsafe { std::ptr::copy_nonoverlapping(src, self.arena.as_mut_ptr().add(start), len) };
        Some(slot)
    }

    /// Units `start..end` of chunk `chunk` (the last may be short).
    fn chunk_range(&self, chunk: u32) -> (usize, usize) {
        let start = (chunk as usize) << self.chunk_shift;
        (start, (start + (1 << self.chunk_shift)).min(self.units))
    }

    /// A chunk for a class that has no free buffer: off the arena's free list, or given back
    /// by the classes (`reclaim`) when that is empty.
    fn take_chunk(&mut self, class: u8) -> Option<u32> {
        let chunk = match self.chunks_free.pop() {
            Some(c) => c,
            None => self.reclaim()?,
        };
        self.chunk_class[chunk as usize] = class;
        Some(chunk)
    }

    /// Class 0's stack is empty: a chunk's units onto it (the lowest on top), and the lowest
    /// handed out. No allocation: the stack's capacity is every unit.
    #[cold]
    #[inline(never)]
    fn grow_short(&mut self) -> Option<u32> {
        let chunk = self.take_chunk(0)?;
        let (start, end) = self.chunk_range(chunk);
        self.class_at[start..end].fill(0);
        self.free.extend((start as u32 + 1..end as u32).rev());
        self.carved0 += end - start;
        Some(start as u32)
    }

    /// Class `c` has no free buffer: a chunk carved into its buffers, linked lowest first, and
    /// the lowest handed out. None when the arena has no room even after `reclaim`.
    #[cold]
    #[inline(never)]
    fn grow_long(&mut self, c: usize) -> Option<u32> {
        // Longer than the longest frame taken.
        let n = self.classes.get(c)?.units as usize;
        loop {
            let chunk = self.take_chunk(c as u8)?;
            let (start, end) = self.chunk_range(chunk);
            let buffers = (end - start) / n;
            if buffers == 0 {
                // The arena's short last chunk holds none of these: leave it to class 0.
                self.chunk_class[chunk as usize] = NO_CLASS;
                let rest = self.chunks_free.len();
                self.chunks_free.insert(0, chunk);
                if rest == 0 {
                    return None;
                }
                continue;
            }
            let mut head = self.heads[c];
            for i in (0..buffers).rev() {
                let b = start + i * n;
                self.class_at[b] = c as u8;
                self.next[b] = head;
                head = b as u32;
            }
            self.heads[c] = self.next[start];
            self.classes[c].carved += buffers;
            return Some(start as u32);
        }
    }

    /// The arena is empty: every chunk whose buffers are all free leaves its class's free list
    /// and goes back to the arena, and one of them is returned. One pass over the free lists,
    /// no allocation; it runs only when a class must grow and the arena has nothing left, i.e.
    /// after the traffic changed the sizes it holds. None when no chunk is wholly free.
    #[cold]
    #[inline(never)]
    fn reclaim(&mut self) -> Option<u32> {
        let shift = self.chunk_shift;
        self.tally.fill(0);
        for &u in &self.free {
            self.tally[(u >> shift) as usize] += 1;
        }
        for &head in &self.heads[1..] {
            let mut u = head;
            while u != NIL {
                self.tally[(u >> shift) as usize] += 1;
                u = self.next[u as usize];
            }
        }
        // A wholly free chunk's count becomes NIL, marking it.
        let mut found = false;
        for chunk in 0..self.tally.len() {
            let c = self.chunk_class[chunk];
            if c == NO_CLASS {
                continue;
            }
            let (start, end) = self.chunk_range(chunk as u32);
            let buffers = (end - start) / (usize::from(c) + 1);
            if buffers > 0 && self.tally[chunk] as usize == buffers {
                self.tally[chunk] = NIL;
                found = true;
            }
        }
        if !found {
            return None;
        }
        let tally = &self.tally;
        let before = self.free.len();
        self.free.retain(|&u| tally[(u >> shift) as usize] != NIL);
        self.carved0 -= before - self.free.len();
        for (class, head) in self.classes[1..].iter_mut().zip(&mut self.heads[1..]) {
            let mut kept = NIL;
            let mut last = NIL;
            let mut u = *head;
            while u != NIL {
                let after = self.next[u as usize];
                if tally[(u >> shift) as usize] == NIL {
                    class.carved -= 1;
                } else {
                    if last == NIL {
                        kept = u;
                    } else {
                        self.next[last as usize] = u;
                    }
                    last = u;
                }
                u = after;
            }
            if last != NIL {
                self.next[last as usize] = NIL;
            }
            *head = kept;
        }
        // Back to the arena, the lowest on top.
        for chunk in (0..self.tally.len()).rev() {
            if self.tally[chunk] == NIL {
                self.chunk_class[chunk] = NO_CLASS;
                self.chunks_free.push(chunk as u32);
            }
        }
        self.chunks_free.pop()
    }

    /// Keeps `frame` in a free slot without copying it: the slot holds the backend's buffer
    /// until it is freed or taken. Gives the frame back when the pool has no room or the
    /// frame is longer than a slot takes (the switch never holds a frame it could not have
    /// copied). Always inlined: once a frame on the zero-copy path, where an out-of-line call
    /// moved the whole `ForeignFrame` through the stack.
    #[inline(always)]
    pub fn alloc_foreign(&mut self, frame: ForeignFrame) -> Result<u32, ForeignFrame> {
        if frame.len() > self.max_frame {
            return Err(frame);
        }
        let Some(slot) = self.pop_short() else {
            return Err(frame);
        };
        let (buf, _) = frame.into_slot();
        self.elsewhere[slot as usize] = Some(buf);
        self.foreign_held += 1;
        Ok(slot)
    }

    /// Copies the first `len` bytes of slot `src` into a new slot (flooding): a flood copy
    /// always gets its own copy in the pool, whatever buffer the original is in.
    #[inline]
    pub fn clone_slot(&mut self, src: u32, len: usize) -> Option<u32> {
        let from = self.get(src, len).as_ptr();
        if len > self.head_size {
            return self.alloc_long(from, len);
        }
        let slot = self.pop_short()?;
        let d = slot as usize * self.head_size;
        let to = self.arena[d..d + len].as_mut_ptr();
        // SAFETY: `from` holds `len` bytes of slot `src`, which is held, so not this free
        // slot's unit: the ranges do not overlap, and growing a class moves no byte.
        unsafe { std::ptr::copy_nonoverlapping(from, to, len) };
        Some(slot)
    }

    /// The backend's buffer slot `slot`'s frame is in, if any. Pools that hold none (every
    /// backend but DPDK's zero copy, and shards lending no frame) answer from one field,
    /// without reading the per-slot table.
    #[inline(always)]
    fn elsewhere_of(&self, slot: u32) -> Option<Foreign> {
        if self.foreign_held == 0 {
            return None;
        }
        self.elsewhere[slot as usize]
    }

    /// The first `len` bytes of the frame in `slot`, wherever it is kept; `len` must be the length
    /// it was queued with.
    #[inline]
    pub fn get(&self, slot: u32, len: usize) -> &[u8] {
        if let Some(f) = self.elsewhere_of(slot) {
            // SAFETY: the slot owns the buffer; `len` is the frame's length as queued.
            return unsafe { f.bytes(len) };
        }
        let start = slot as usize * self.head_size;
        &self.arena[start..start + len]
    }

    /// As [`Self::get`], writable: ECN marks, DSCP and tag rewrites happen in place.
    #[inline]
    pub fn get_mut(&mut self, slot: u32, len: usize) -> &mut [u8] {
        if let Some(f) = self.elsewhere_of(slot) {
            // SAFETY: as in `get`, and `&mut self` makes the access exclusive.
            return unsafe { f.bytes_mut(len) };
        }
        let start = slot as usize * self.head_size;
        &mut self.arena[start..start + len]
    }

    /// Puts a slot's buffer back on its class's free list. `long`: whether it is longer than a
    /// unit (the frame was, or its class says so).
    #[inline(always)]
    fn release(&mut self, slot: u32, long: bool) {
        if !long {
            debug_assert_eq!(self.class_at[slot as usize], 0, "slot {slot}");
            // Never reallocates: the capacity is every unit.
            self.free.push(slot);
            return;
        }
        // SAFETY: a held slot is below `units`, the length of `class_at` and `next`; its class
        // is an index into `heads`, written when its chunk was carved.
        unsafe {
            let c = usize::from(*self.class_at.get_unchecked(slot as usize));
            let head = self.heads.get_unchecked_mut(c);
            *self.next.get_unchecked_mut(slot as usize) = *head;
            *head = slot;
        }
    }

    /// Forgets the backend's buffer slot `slot` held.
    #[inline(always)]
    fn forget(&mut self, slot: u32) {
        self.elsewhere[slot as usize] = None;
        self.foreign_held -= 1;
    }

    /// Frees a slot; a backend's buffer it held is released.
    #[inline]
    pub fn free(&mut self, slot: u32) {
        if let Some(f) = self.elsewhere_of(slot) {
            self.forget(slot);
            // SAFETY: the slot owned the buffer and no longer refers to it.
            unsafe { foreign::release(f) };
        }
        // SAFETY: a held slot is below `units`.
        let long = unsafe { *self.class_at.get_unchecked(slot as usize) } != 0;
        self.release(slot, long);
    }

    /// If slot `slot` holds a backend's buffer (a frame of `len` bytes), frees the slot and
    /// hands the buffer over instead of releasing it; a frame in the pool is left as it is.
    #[inline]
    pub fn take_foreign(&mut self, slot: u32, len: usize) -> Option<ForeignFrame> {
        self.elsewhere_of(slot)?;
        match self.take(slot, len) {
            Taken::Foreign(f) => Some(f),
            Taken::Arena(_) => None,
        }
    }

    /// Frees a slot whose frame (of `len` bytes) is leaving: its bytes, valid until the next
    /// allocation, or the backend's buffer it held, handed over (one look at the slot for
    /// both: the transmit path). Always inlined: once a frame, and out of line it cost a call
    /// and a return of `Taken` through memory on every transmit.
    #[inline(always)]
    pub fn take(&mut self, slot: u32, len: usize) -> Taken<'_> {
        if let Some(f) = self.elsewhere_of(slot) {
            self.forget(slot);
            self.release(slot, false);
            // SAFETY: taken out of its slot, so owned here; `len` is the frame's queued length.
            return Taken::Foreign(unsafe { ForeignFrame::from_slot(f, len) });
        }
        // A frame in the arena is longer than a unit exactly when it took more than one: its
        // length as queued is its length as stored.
        self.release(slot, len > self.head_size);
        let start = slot as usize * self.head_size;
        // The buffer is free but untouched until the next allocation, which needs `&mut self`,
        // which this borrow holds (a free list's links are outside the arena).
        Taken::Arena(&self.arena[start..start + len])
    }
}

impl Drop for PacketPool {
    /// Frames still held when the switch goes (a drain that timed out) give their backends'
    /// buffers back.
    fn drop(&mut self) {
        if self.foreign_held == 0 {
            return;
        }
        for f in self.elsewhere.iter_mut().filter_map(Option::take) {
            // SAFETY: owned by the slot, which is going away.
            unsafe { foreign::release(f) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_copy_free_roundtrip() {
        let mut p = PacketPool::new(2, 100);
        assert_eq!(p.slot_size(), 128);
        let a = p.alloc_copy(&[1, 2, 3]).unwrap();
        let b = p.clone_slot(a, 3).unwrap();
        assert_eq!(p.get(b, 3), &[1, 2, 3]);
        assert!(p.alloc_copy(&[0]).is_none(), "exhausted");
        p.free(a);
        assert!(p.alloc_copy(&[0; 129]).is_none(), "too large");
        assert!(p.alloc_copy(&[9; 128]).is_some());
        p.free(b);
        assert_eq!(p.available(), 1);
    }

    /// Frames longer than a unit take as many consecutive units as they need, and come back
    /// out of them whole; freed buffers are reused, not carved again.
    #[test]
    fn long_frames_take_consecutive_units_and_their_buffers_are_reused() {
        let mut p = PacketPool::with_heads(4096, 192, 9118);
        assert_eq!((p.head_size(), p.slot_size(), p.class_bytes()), (192, 9152, 0));
        let short: Vec<u8> = (0..192u32).map(|i| i as u8).collect();
        let long: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let jumbo = vec![0xab; 9118];
        let a = p.alloc_copy(&short).unwrap();
        assert_eq!(p.class_bytes(), 0, "a one-cell frame takes one unit");
        let b = p.alloc_copy(&long).unwrap();
        let c = p.alloc_copy(&jumbo).unwrap();
        let grown = p.class_bytes();
        assert!(grown >= 1152 + 9216, "{grown}");
        assert_eq!(p.available(), 4096 - 1 - 6 - 48, "1 + 6 + 48 units held");
        assert_eq!(p.get(a, 192), &short[..]);
        assert_eq!(p.get(b, 1000), &long[..]);
        assert_eq!(p.get(c, 9118), &jumbo[..]);
        p.get_mut(b, 1000)[999] = 1;
        // A flood copy of a long frame is a long frame of its own.
        let d = p.clone_slot(b, 1000).unwrap();
        assert_eq!(p.get(d, 1000)[999], 1);
        assert_eq!(p.get(d, 1000)[..999], long[..999]);
        // Not a backend's buffer: take_foreign leaves it; take hands the bytes out.
        assert!(p.take_foreign(b, 1000).is_none());
        match p.take(b, 1000) {
            Taken::Arena(f) => assert_eq!(f[..999], long[..999]),
            Taken::Foreign(_) => panic!("an arena buffer is no backend's"),
        }
        p.free(c);
        p.free(d);
        p.free(a);
        assert_eq!(p.available(), 4096);
        // The same frames again take the buffers freed: nothing is carved again.
        for _ in 0..3 {
            let s = [
                p.alloc_copy(&long).unwrap(),
                p.alloc_copy(&long).unwrap(),
                p.alloc_copy(&jumbo).unwrap(),
            ];
            s.into_iter().for_each(|s| p.free(s));
        }
        assert_eq!(p.class_bytes(), grown);
        // Longer than the largest frame: refused, nothing taken.
        assert!(p.alloc_copy(&[0; 9153]).is_none());
        assert!(
            p.alloc_copy(&vec![0; 70_000]).is_none(),
            "longer than the class look-up"
        );
        assert_eq!(p.available(), 4096);
    }

    /// The arena is shared by every size: filled with frames of one size, emptied, then filled
    /// with frames of another, it holds as many units of the second as of the first (the
    /// first's chunks go back to the arena), and every frame reads back as written. When the
    /// units held leave no chunk wholly free, a frame finds no room and is refused, nothing
    /// else disturbed.
    #[test]
    fn every_size_shares_the_arena_and_wholly_free_chunks_go_back_to_it() {
        // 64 B units, frames up to 1024 B: 16 classes, chunks of 256 units; 4 chunks.
        let mut p = PacketPool::with_heads(1024, 64, 1024);
        let frame = |len: usize, seed: usize| -> Vec<u8> { (0..len).map(|i| (i * 31 + seed) as u8).collect() };
        for (len, fits) in [(64, 1024), (1000, 64), (200, 256), (64, 1024), (700, 92)] {
            let held: Vec<(u32, Vec<u8>)> = (0..)
                .map_while(|i| {
                    let f = frame(len, i);
                    p.alloc_copy(&f).map(|s| (s, f))
                })
                .collect();
            assert_eq!(held.len(), fits, "{len} B frames fit");
            for (s, f) in &held {
                assert_eq!(p.get(*s, len), &f[..], "{len} B");
            }
            for (s, _) in held {
                p.free(s);
            }
            assert_eq!(p.available(), 1024);
        }
        // Every other one-unit frame kept: no chunk is wholly free, so a long frame finds no
        // room; once they go, it does.
        let short: Vec<u32> = (0..1024).map(|_| p.alloc_copy(&[1; 64]).unwrap()).collect();
        for s in short.iter().step_by(2) {
            p.free(*s);
        }
        assert!(
            p.alloc_copy(&[2; 1000]).is_none(),
            "512 units free, none in a free chunk"
        );
        assert_eq!(p.available(), 512);
        for s in short.iter().skip(1).step_by(2) {
            p.free(*s);
        }
        let long = p.alloc_copy(&[3; 1000]).expect("room once a chunk is free");
        assert_eq!(p.get(long, 1000), &[3; 1000][..]);
    }

    /// The arena is lazily mapped: a pool sized for a large buffer costs nothing resident until
    /// frames arrive (virtual time), and `prefault` touches it all (real time). Counted by
    /// mincore(2) over the arena itself, whatever other tests allocate meanwhile.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_arena_costs_memory_only_once_written_unless_prefaulted() {
        fn resident(b: &[u8]) -> usize {
            let page = 4096;
            let start = b.as_ptr() as usize / page * page;
            let len = b.as_ptr() as usize + b.len() - start;
            let mut v = vec![0u8; len.div_ceil(page)];
            // SAFETY: the range covers `b`'s pages, mapped while `b` lives; `v` has a byte a page.
            let r = unsafe { libc::mincore(start as *mut libc::c_void, len, v.as_mut_ptr()) };
            assert_eq!(r, 0, "mincore");
            v.iter().filter(|&&x| x & 1 == 1).count() * page
        }
        // 1.5 Mi units of 192 B: an SN5600's buffer, 281 MiB.
        let mut p = PacketPool::with_heads(1_536_000, 192, 9118);
        let a = p.alloc_copy(&[7; 100]).unwrap();
        let b = p.alloc_copy(&[8; 9000]).unwrap();
        assert_eq!(p.get(a, 100), &[7; 100]);
        assert_eq!(p.get(b, 9000), &[8; 9000]);
        let lazy = resident(&p.arena);
        assert!(lazy <= 64 << 10, "two frames, a few pages resident: {lazy}");
        p.prefault();
        assert!(resident(&p.arena) >= p.arena.len() - 4096);
    }

    /// A backend's buffer for the tests: a leaked boxed frame, released by dropping the box
    /// and counting the release.
    fn lend(bytes: &[u8], released: &'static std::sync::atomic::AtomicUsize) -> ForeignFrame {
        use std::ffi::c_void;
        use std::ptr::NonNull;
        /// The token: the frame's box and the counter to bump.
        struct Buf(Box<[u8]>, &'static std::sync::atomic::AtomicUsize);
        unsafe fn release(token: NonNull<c_void>) {
            // SAFETY: made from Box::into_raw below, released once.
            let b = unsafe { Box::from_raw(token.as_ptr().cast::<Buf>()) };
            b.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let mut b = Box::new(Buf(bytes.into(), released));
        let data = NonNull::new(b.0.as_mut_ptr()).unwrap();
        let token = NonNull::new(Box::into_raw(b).cast::<c_void>()).unwrap();
        static KIND: foreign::ForeignKind = foreign::ForeignKind { release, owner: 7 };
        // SAFETY: the box keeps the bytes alive until `release`, which runs once.
        unsafe { ForeignFrame::new(data, bytes.len() as u32, token, &KIND) }
    }

    #[test]
    fn a_slot_holds_a_foreign_buffer_until_freed_or_taken() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        static RELEASED: AtomicUsize = AtomicUsize::new(0);
        let mut p = PacketPool::new(4, 64);
        let a = p.alloc_foreign(lend(&[1, 2, 3, 4], &RELEASED)).unwrap();
        assert_eq!((p.foreign_held(), p.available()), (1, 3));
        assert_eq!(p.get(a, 4), &[1, 2, 3, 4], "read in place");
        p.get_mut(a, 4)[0] = 9;
        let c = p.clone_slot(a, 4).unwrap();
        assert_eq!(p.get(c, 4), &[9, 2, 3, 4], "a flood copy is a copy of the marked frame");
        p.free(c);
        assert_eq!(RELEASED.load(SeqCst), 0, "freeing a copy releases nothing");
        assert!(p.take_foreign(c, 4).is_none(), "an arena slot has nothing to hand over");

        // Taken for transmit: the slot is free, the buffer is the caller's.
        let f = p.take_foreign(a, 4).unwrap();
        assert_eq!((f.bytes(), f.owner()), (&[9, 2, 3, 4][..], 7));
        assert_eq!((p.foreign_held(), p.available()), (0, 4));
        assert_eq!(RELEASED.load(SeqCst), 0);
        drop(f);
        assert_eq!(RELEASED.load(SeqCst), 1, "dropping the frame releases the buffer");

        // Freed (a drop): released once.
        let b = p.alloc_foreign(lend(&[5; 10], &RELEASED)).unwrap();
        p.free(b);
        assert_eq!(RELEASED.load(SeqCst), 2);

        // Too long for a slot, or no slot free: given back, not released.
        let long = p.alloc_foreign(lend(&[0; 65], &RELEASED)).unwrap_err();
        assert_eq!(long.len(), 65);
        drop(long);
        assert_eq!(RELEASED.load(SeqCst), 3);
        for _ in 0..4 {
            p.alloc_copy(&[0]).unwrap();
        }
        let full = p.alloc_foreign(lend(&[1], &RELEASED)).unwrap_err();
        drop(full);
        assert_eq!(RELEASED.load(SeqCst), 4);

        // Still held when the pool goes: released then.
        let mut q = PacketPool::new(2, 64);
        q.alloc_foreign(lend(&[1], &RELEASED)).unwrap();
        q.alloc_foreign(lend(&[2], &RELEASED)).unwrap();
        drop(q);
        assert_eq!(RELEASED.load(SeqCst), 6);
    }
}

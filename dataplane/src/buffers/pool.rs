//! Packet buffers: one arena of fixed-size slots allocated at start-up, like a DPDK mempool.
//! Frames stay in their slot from reception to transmission; only a small descriptor moves
//! through the queues. The MMU bounds how many frames can be held, so the pool is sized from it
//! and never grows.
//!
//! A slot may also hold a frame in a buffer its port backend owns (a DPDK mbuf, received
//! without a copy: [`super::foreign`]). The slot then refers to that buffer instead of its
//! arena bytes; `get`, `get_mut` and `clone_slot` read and write it the same way, `free`
//! releases it, and `take_foreign` hands it to the transmitting backend. The pipeline never
//! knows which kind a slot holds.

use super::foreign::{self, Foreign, ForeignFrame};

/// A frame leaving its slot ([`PacketPool::take`]).
pub enum Taken<'a> {
    /// A copy in the arena: send these bytes.
    Arena(&'a [u8]),
    /// A backend's buffer, now the caller's.
    Foreign(ForeignFrame),
}

// The control plane's memory estimate counts a free-list entry and a foreign-buffer record per
// slot at exactly this size: a record that shrinks or grows fails here, not in a wrong estimate.
const _: () = assert!(
    (std::mem::size_of::<u32>() + std::mem::size_of::<Option<Foreign>>()) as u64
        == controlplane::memory::SLOT_BOOKKEEPING_BYTES
);

/// The packet slots of one switch (or shard): fixed-size, allocated and faulted in at start-up,
/// handed out by index.
#[derive(Debug)]
pub struct PacketPool {
    arena: Box<[u8]>,
    slot_size: usize,
    free: Vec<u32>,
    /// Per slot: the backend's buffer it holds instead of arena bytes, if any.
    foreign: Box<[Option<Foreign>]>,
    /// Slots holding a foreign buffer.
    foreign_held: usize,
}

impl PacketPool {
    /// `slots` slots of at least `slot_size` bytes (rounded up to 64, a cache line), all free.
    pub fn new(slots: usize, slot_size: usize) -> Self {
        let slot_size = slot_size.next_multiple_of(64);
        let mut arena = vec![0u8; slots * slot_size];
        // Fault the pages in now, like a DPDK mempool on hugepages, not on the packet path.
        std::hint::black_box(&mut arena);
        arena.fill(0);
        let mut foreign = vec![None; slots];
        std::hint::black_box(&mut foreign);
        foreign.fill(None);
        PacketPool {
            arena: arena.into_boxed_slice(),
            slot_size,
            // Popped from the end: hand out low slots first, which keeps replays' memory warm.
            free: (0..slots as u32).rev().collect(),
            foreign: foreign.into_boxed_slice(),
            foreign_held: 0,
        }
    }

    /// Bytes per slot: the longest frame a slot takes (a multiple of 64).
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Free slots.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Slots in all.
    pub fn capacity(&self) -> usize {
        self.arena.len() / self.slot_size
    }

    /// Slots holding a frame in a backend's buffer (zero copy) rather than a copy.
    pub fn foreign_held(&self) -> usize {
        self.foreign_held
    }

    /// Copies `frame` into a free slot. None when the pool is empty or the frame does not fit.
    #[inline]
    pub fn alloc_copy(&mut self, frame: &[u8]) -> Option<u32> {
        if frame.len() > self.slot_size {
            return None;
        }
        let slot = self.free.pop()?;
        let start = slot as usize * self.slot_size;
        self.arena[start..start + frame.len()].copy_from_slice(frame);
        Some(slot)
    }

    /// Keeps `frame` in a free slot without copying it: the slot holds the backend's buffer
    /// until it is freed or taken. Gives the frame back when the pool is empty or the frame is
    /// longer than a slot (the switch never holds a frame it could not have copied).
    /// Always inlined: once a frame on the zero-copy path, where an out-of-line call moved
    /// the whole `ForeignFrame` through the stack.
    #[inline(always)]
    pub fn alloc_foreign(&mut self, frame: ForeignFrame) -> Result<u32, ForeignFrame> {
        if frame.len() > self.slot_size {
            return Err(frame);
        }
        let Some(slot) = self.free.pop() else {
            return Err(frame);
        };
        let (buf, _) = frame.into_slot();
        self.foreign[slot as usize] = Some(buf);
        self.foreign_held += 1;
        Ok(slot)
    }

    /// Copies the first `len` bytes of slot `src` into a new slot (flooding): a flood copy
    /// always gets its own arena slot, whatever buffer the original is in.
    #[inline]
    pub fn clone_slot(&mut self, src: u32, len: usize) -> Option<u32> {
        let slot = self.free.pop()?;
        let d = slot as usize * self.slot_size;
        match self.foreign_of(src) {
            // SAFETY: the slot owns the buffer, which holds at least `len` bytes (the length
            // the descriptor records); it is not the arena, so the ranges do not overlap.
            Some(f) => self.arena[d..d + len].copy_from_slice(unsafe { f.bytes(len) }),
            None => {
                let s = src as usize * self.slot_size;
                self.arena.copy_within(s..s + len, d);
            }
        }
        Some(slot)
    }

    /// The foreign buffer slot `slot` holds, if any. Pools that hold none (replay, AF_PACKET,
    /// capture files) answer from one field, without reading the per-slot table.
    #[inline(always)]
    fn foreign_of(&self, slot: u32) -> Option<Foreign> {
        if self.foreign_held == 0 {
            return None;
        }
        self.foreign[slot as usize]
    }

    /// The first `len` bytes of the frame in `slot`, wherever it is kept; `len` must be the length
    /// it was queued with.
    #[inline]
    pub fn get(&self, slot: u32, len: usize) -> &[u8] {
        if let Some(f) = self.foreign_of(slot) {
            // SAFETY: the slot owns the buffer; `len` is the frame's length as queued.
            return unsafe { f.bytes(len) };
        }
        let start = slot as usize * self.slot_size;
        &self.arena[start..start + len]
    }

    /// As [`Self::get`], writable: ECN marks, DSCP and tag rewrites happen in place.
    #[inline]
    pub fn get_mut(&mut self, slot: u32, len: usize) -> &mut [u8] {
        if let Some(f) = self.foreign_of(slot) {
            // SAFETY: as in `get`, and `&mut self` makes the access exclusive.
            return unsafe { f.bytes_mut(len) };
        }
        let start = slot as usize * self.slot_size;
        &mut self.arena[start..start + len]
    }

    /// Frees a slot; a backend's buffer it held is released.
    #[inline]
    pub fn free(&mut self, slot: u32) {
        debug_assert!(self.free.len() < self.capacity(), "double free of slot {slot}");
        if let Some(f) = self.foreign_of(slot) {
            self.foreign[slot as usize] = None;
            self.foreign_held -= 1;
            // SAFETY: the slot owned the buffer and no longer refers to it.
            unsafe { foreign::release(f) };
        }
        // Never reallocates: capacity was reserved for every slot at construction.
        self.free.push(slot);
    }

    /// If slot `slot` holds a backend's buffer (a frame of `len` bytes), frees the slot and
    /// hands the buffer over instead of releasing it; an arena slot is left as it is.
    #[inline]
    pub fn take_foreign(&mut self, slot: u32, len: usize) -> Option<ForeignFrame> {
        self.foreign_of(slot)?;
        match self.take(slot, len) {
            Taken::Foreign(f) => Some(f),
            Taken::Arena(_) => None,
        }
    }

    /// Frees a slot whose frame (of `len` bytes) is leaving: its bytes, valid until the next
    /// allocation, or the backend's buffer it held, handed over (one look at the slot for
    /// both: the transmit path).
    #[inline]
    pub fn take(&mut self, slot: u32, len: usize) -> Taken<'_> {
        debug_assert!(self.free.len() < self.capacity(), "double free of slot {slot}");
        // Never reallocates: capacity was reserved for every slot at construction.
        self.free.push(slot);
        if let Some(f) = self.foreign_of(slot) {
            self.foreign[slot as usize] = None;
            self.foreign_held -= 1;
            // SAFETY: taken out of its slot, so owned here; `len` is the frame's queued length.
            return Taken::Foreign(unsafe { ForeignFrame::from_slot(f, len) });
        }
        let start = slot as usize * self.slot_size;
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
        for f in self.foreign.iter_mut().filter_map(Option::take) {
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

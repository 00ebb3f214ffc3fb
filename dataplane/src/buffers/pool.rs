//! Packet buffers: one arena of fixed-size slots allocated at start-up, like a DPDK mempool.
//! Frames stay in their slot from reception to transmission; only a small descriptor moves
//! through the queues. The MMU bounds how many frames can be held, so the pool is sized from it
//! and never grows.

#[derive(Debug)]
pub struct PacketPool {
    arena: Box<[u8]>,
    slot_size: usize,
    free: Vec<u32>,
}

impl PacketPool {
    pub fn new(slots: usize, slot_size: usize) -> Self {
        let slot_size = slot_size.next_multiple_of(64);
        let mut arena = vec![0u8; slots * slot_size];
        // Fault the pages in now, like a DPDK mempool on hugepages, not on the packet path.
        std::hint::black_box(&mut arena);
        arena.fill(0);
        PacketPool {
            arena: arena.into_boxed_slice(),
            slot_size,
            // Popped from the end: hand out low slots first, which keeps replays' memory warm.
            free: (0..slots as u32).rev().collect(),
        }
    }

    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    pub fn available(&self) -> usize {
        self.free.len()
    }

    pub fn capacity(&self) -> usize {
        self.arena.len() / self.slot_size
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

    /// Copies the first `len` bytes of slot `src` into a new slot (flooding).
    #[inline]
    pub fn clone_slot(&mut self, src: u32, len: usize) -> Option<u32> {
        let slot = self.free.pop()?;
        let (s, d) = (src as usize * self.slot_size, slot as usize * self.slot_size);
        self.arena.copy_within(s..s + len, d);
        Some(slot)
    }

    #[inline]
    pub fn get(&self, slot: u32, len: usize) -> &[u8] {
        let start = slot as usize * self.slot_size;
        &self.arena[start..start + len]
    }

    #[inline]
    pub fn get_mut(&mut self, slot: u32, len: usize) -> &mut [u8] {
        let start = slot as usize * self.slot_size;
        &mut self.arena[start..start + len]
    }

    #[inline]
    pub fn free(&mut self, slot: u32) {
        debug_assert!(self.free.len() < self.capacity(), "double free of slot {slot}");
        // Never reallocates: capacity was reserved for every slot at construction.
        self.free.push(slot);
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
}

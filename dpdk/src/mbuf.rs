//! Mbufs: one frame in DPDK's packet buffer, owned by exactly one handle.
//!
//! An [`Mbuf`] is a pointer with ownership: dropping it returns the buffer to its pool,
//! [`Mbuf::into_raw`] and [`Mbuf::from_raw`] move it in and out of descriptor storage (a
//! switch queue holds the raw pointer, not the handle). Frames are single-segment: the
//! ports are configured without scatter and the pools' mbufs are sized for a whole frame,
//! and [`crate::EthPort::rx_burst`] drops (and counts) any chained mbuf a driver still
//! delivers, so `data()` is always the whole frame.
//!
//! Field access goes straight to the `rte_mbuf` struct (whose layout bindgen checks at
//! compile time against DPDK's headers): these are per-packet operations, and a call into
//! C for each would cost more than the access.

use dpdk_sys as sys;
use std::ptr::NonNull;

/// An owned, single-segment packet buffer.
#[repr(transparent)]
pub struct Mbuf(NonNull<sys::rte_mbuf>);

// SAFETY: an mbuf may be used and freed from any thread (its pool is thread-safe), and the
// handle is its only owner.
unsafe impl Send for Mbuf {}

/// The new length does not fit in the mbuf's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom {
    /// The length asked for.
    pub len: usize,
    /// The most this mbuf can hold.
    pub room: usize,
}

impl Mbuf {
    /// Takes ownership of a raw mbuf.
    ///
    /// # Safety
    /// `ptr` must be a valid mbuf from a live pool (from [`Mbuf::into_raw`], a receive burst
    /// or `rte_pktmbuf_alloc`), directly holding its data (not attached to another mbuf's
    /// buffer), owned by nobody else (reference count 1), and not used through `ptr` again.
    #[inline]
    pub unsafe fn from_raw(ptr: *mut sys::rte_mbuf) -> Mbuf {
        debug_assert!(!ptr.is_null());
        // SAFETY: non-null by the caller's contract.
        Mbuf(unsafe { NonNull::new_unchecked(ptr) })
    }

    /// Gives up ownership, for descriptor storage or for handing to a driver; take it back
    /// with [`Mbuf::from_raw`].
    #[inline]
    pub fn into_raw(self) -> *mut sys::rte_mbuf {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    /// The raw pointer, still owned by this handle.
    #[inline]
    pub fn as_ptr(&self) -> *mut sys::rte_mbuf {
        self.0.as_ptr()
    }

    #[inline]
    fn raw(&self) -> &sys::rte_mbuf {
        // SAFETY: a valid mbuf we own (type invariant).
        unsafe { self.0.as_ref() }
    }

    /// The frame's length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.raw().data_len)
    }

    /// Whether the frame is empty (a freshly allocated mbuf).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.raw().data_len == 0
    }

    /// Number of chained segments (1 for every mbuf this crate hands out).
    #[inline]
    pub fn segments(&self) -> u16 {
        self.raw().nb_segs
    }

    /// The port id the driver recorded for a received frame. Hardware drivers set it;
    /// some virtual ones (`net_ring`) leave it at `u16::MAX`, so the receiving port is
    /// better known from which port's burst the frame came.
    #[inline]
    pub fn port(&self) -> u16 {
        self.raw().port
    }

    /// The frame.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let m = self.raw();
        // SAFETY: buf_addr + data_off is the start of the segment's data and data_len bytes
        // follow it inside the buffer (DPDK's invariant); we own the mbuf, so nobody writes
        // it while the slice lives.
        unsafe {
            std::slice::from_raw_parts(
                m.buf_addr.cast::<u8>().add(usize::from(m.data_off)),
                usize::from(m.data_len),
            )
        }
    }

    /// The frame, writable (ECN marking and DSCP rewriting happen in place).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`; `&mut self` and sole ownership make the access exclusive.
        unsafe {
            let m = self.0.as_ptr();
            std::slice::from_raw_parts_mut(
                (*m).buf_addr.cast::<u8>().add(usize::from((*m).data_off)),
                usize::from((*m).data_len),
            )
        }
    }

    /// Bytes the frame could grow by.
    #[inline]
    pub fn tailroom(&self) -> usize {
        let m = self.raw();
        usize::from(m.buf_len) - usize::from(m.data_off) - usize::from(m.data_len)
    }

    /// Sets the frame's length (new bytes are whatever the buffer held: write them).
    #[inline]
    pub fn set_len(&mut self, len: usize) -> Result<(), NoRoom> {
        let room = self.len() + self.tailroom();
        let Ok(len16) = u16::try_from(len) else {
            return Err(NoRoom { len, room });
        };
        if len > room {
            return Err(NoRoom { len, room });
        }
        // SAFETY: we own the mbuf exclusively; a single segment, so pkt_len = data_len.
        unsafe {
            let m = self.0.as_ptr();
            (*m).data_len = len16;
            (*m).pkt_len = u32::from(len16);
        }
        Ok(())
    }
}

impl Drop for Mbuf {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the mbuf; it is not used after this.
        unsafe { sys::rte_pktmbuf_free(self.0.as_ptr()) }
    }
}

impl std::fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mbuf")
            .field("ptr", &self.0)
            .field("len", &self.len())
            .field("segments", &self.segments())
            .finish()
    }
}

/// Frees the mbufs `ptrs` in one call into DPDK (refused transmissions, given back whole).
///
/// # Safety
/// Each pointer must be an owned mbuf of a live pool, not used afterwards.
#[inline]
pub unsafe fn free_raw_bulk(ptrs: &[NonNull<sys::rte_mbuf>]) {
    if ptrs.is_empty() {
        return;
    }
    // SAFETY: by the contract, each is freed exactly once; DPDK does not write the array.
    unsafe { sys::rte_pktmbuf_free_bulk(ptrs.as_ptr().cast_mut().cast::<*mut sys::rte_mbuf>(), ptrs.len() as u32) }
}

/// A burst of mbufs: the array a receive fills and a transmit offers.
///
/// Its storage is allocated once and never grows, and it is laid out exactly as the array
/// of `rte_mbuf *` DPDK's burst functions take, so a burst costs no copy and no allocation.
/// A transmit removes from the front what the driver took and leaves the rest, still owned,
/// in order; that is how a full transmit ring becomes back-pressure rather than a drop.
pub struct MbufBurst {
    /// Never reallocated: pushes beyond the capacity are refused.
    mbufs: Vec<Mbuf>,
}

impl MbufBurst {
    /// The usual burst size: DPDK's drivers are tuned for 32.
    pub const DEFAULT_CAPACITY: usize = 32;

    /// An empty burst with room for `capacity` mbufs (at most 65535, DPDK's burst limit).
    pub fn new(capacity: usize) -> MbufBurst {
        assert!(
            (1..=usize::from(u16::MAX)).contains(&capacity),
            "burst capacity {capacity} not in 1..=65535"
        );
        MbufBurst {
            mbufs: Vec::with_capacity(capacity),
        }
    }

    /// How many mbufs it holds.
    #[inline]
    pub fn len(&self) -> usize {
        self.mbufs.len()
    }

    /// Whether it holds none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.mbufs.is_empty()
    }

    /// How many it can hold.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.mbufs.capacity()
    }

    /// Room left.
    #[inline]
    pub fn spare(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Appends an mbuf, or gives it back when the burst is full.
    #[inline]
    pub fn push(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        if self.spare() == 0 {
            return Err(m);
        }
        self.mbufs.push(m);
        Ok(())
    }

    /// Removes the last mbuf.
    #[inline]
    pub fn pop(&mut self) -> Option<Mbuf> {
        self.mbufs.pop()
    }

    /// The mbufs, in order.
    #[inline]
    pub fn as_slice(&self) -> &[Mbuf] {
        &self.mbufs
    }

    /// The mbufs, in order, writable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [Mbuf] {
        &mut self.mbufs
    }

    /// Takes every mbuf out, in order.
    #[inline]
    pub fn drain(&mut self) -> std::vec::Drain<'_, Mbuf> {
        self.mbufs.drain(..)
    }

    /// Frees every mbuf (in one call into DPDK).
    pub fn clear(&mut self) {
        let n = self.mbufs.len();
        if n == 0 {
            return;
        }
        // SAFETY: the first n elements are owned mbufs, laid out as `rte_mbuf *`
        // (repr(transparent)); after set_len(0) the Vec no longer owns them, and
        // rte_pktmbuf_free_bulk frees each exactly once.
        unsafe {
            self.mbufs.set_len(0);
            sys::rte_pktmbuf_free_bulk(self.mbufs.as_mut_ptr().cast::<*mut sys::rte_mbuf>(), n as u32);
        }
    }

    /// Appends the mbufs `ptrs` as they are, as many as there is room for (the first ones),
    /// in one copy of their pointers; returns how many it took. What the switch transmits in
    /// its own buffers reaches the transmit array this way, with no `Mbuf` made for each.
    ///
    /// # Safety
    /// Each pointer must be an owned, single-segment mbuf of a live pool, used by nobody
    /// else: the ones taken belong to the burst now, the rest stay the caller's.
    #[inline]
    pub unsafe fn extend_raw(&mut self, ptrs: &[NonNull<sys::rte_mbuf>]) -> usize {
        let take = ptrs.len().min(self.spare());
        let len = self.mbufs.len();
        // SAFETY: `take` fits the spare capacity; `Mbuf` is a repr(transparent) non-null
        // pointer, so the pointers' bits are the elements; the caller hands their ownership over.
        unsafe {
            std::ptr::copy_nonoverlapping(ptrs.as_ptr().cast::<Mbuf>(), self.mbufs.as_mut_ptr().add(len), take);
            self.mbufs.set_len(len + take);
        }
        take
    }

    /// The free space as DPDK's receive array: pointer and length.
    #[inline]
    pub(crate) fn spare_raw(&mut self) -> (*mut *mut sys::rte_mbuf, u16) {
        let spare = self.spare() as u16;
        let len = self.mbufs.len();
        // SAFETY: len <= capacity, so the pointer stays within (or one past) the allocation.
        let p = unsafe { self.mbufs.as_mut_ptr().add(len) };
        (p.cast(), spare)
    }

    /// Records `n` mbufs a driver wrote into the free space, then drops (and counts) the
    /// chained ones among them. Returns how many were kept.
    ///
    /// # Safety
    /// The first `n` slots of the free space must hold valid, owned, received mbufs.
    #[inline]
    pub(crate) unsafe fn commit_received(&mut self, n: usize, dropped_chained: &mut u64) -> usize {
        let start = self.mbufs.len();
        debug_assert!(n <= self.spare());
        // SAFETY: the caller guarantees the slots hold owned mbufs.
        unsafe { self.mbufs.set_len(start + n) };
        // The common case, one tight pass: no chain among them.
        if self.mbufs[start..].iter().all(|m| m.segments() == 1) {
            return n;
        }
        let mut i = start;
        while i < self.mbufs.len() {
            if self.mbufs[i].segments() == 1 {
                i += 1;
            } else {
                // Rare: an mbuf chain this crate cannot give a contiguous view of. `remove`
                // keeps the order of the rest; the chain is freed whole by its drop.
                drop(self.mbufs.remove(i));
                *dropped_chained += 1;
            }
        }
        self.mbufs.len() - start
    }

    /// The mbufs as DPDK's transmit array: pointer and count.
    #[inline]
    pub(crate) fn as_raw(&mut self) -> (*mut *mut sys::rte_mbuf, u16) {
        (self.mbufs.as_mut_ptr().cast(), self.mbufs.len() as u16)
    }

    /// Forgets the first `n` mbufs (a driver took them) and moves the rest to the front.
    ///
    /// # Safety
    /// The first `n` mbufs must now belong to someone else (the driver).
    #[inline]
    pub(crate) unsafe fn consume_front(&mut self, n: usize) {
        let len = self.mbufs.len();
        debug_assert!(n <= len);
        // SAFETY: the first n are no longer ours: overwrite them without dropping, then
        // shrink; the remaining len - n move as bits (no drop, no duplicate).
        unsafe {
            let p = self.mbufs.as_mut_ptr();
            std::ptr::copy(p.add(n), p, len - n);
            self.mbufs.set_len(len - n);
        }
    }
}

impl Drop for MbufBurst {
    fn drop(&mut self) {
        self.clear();
    }
}

impl std::fmt::Debug for MbufBurst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MbufBurst")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Eal, EalArgs, Mempool};

    /// Drivers configured without scatter do not chain mbufs, so the drop path is driven
    /// by hand: a chain built the way a scattering driver builds one. Then the raw transmit
    /// hand-over (`extend_raw`, `free_raw_bulk`). (The only test in this binary that starts
    /// the EAL.)
    #[test]
    fn received_chains_are_dropped_counted_and_freed_whole() {
        let args = EalArgs::default_for_vdevs::<&str>(&[]).unwrap().into_vec();
        Eal::init(&args).unwrap_or_else(|e| panic!("{e}"));
        let pool = Mempool::new("chains", 63, 0, 256).unwrap();
        let frames: Vec<Mbuf> = (0u8..3).map(|i| pool.alloc_copy(&[i; 60]).unwrap()).collect();
        let tail = pool.alloc_copy(&[9; 40]).unwrap();
        let raw: Vec<*mut sys::rte_mbuf> = frames.into_iter().map(Mbuf::into_raw).collect();
        // SAFETY: raw[1] and tail are owned, valid mbufs; linking them makes raw[1] the
        // head of a two-segment chain that owns tail.
        unsafe {
            let head = raw[1];
            (*head).next = tail.into_raw();
            (*head).nb_segs = 2;
            (*head).pkt_len += 40;
        }
        assert_eq!(pool.in_use(), 4);

        let mut burst = MbufBurst::new(8);
        burst.push(pool.alloc_copy(&[7; 60]).unwrap()).unwrap();
        let (spare, room) = burst.spare_raw();
        assert_eq!(room, 7);
        // SAFETY: three owned mbufs written into the free space, as a driver would.
        let kept = unsafe {
            std::ptr::copy_nonoverlapping(raw.as_ptr(), spare, 3);
            let mut dropped = 0;
            let kept = burst.commit_received(3, &mut dropped);
            assert_eq!(dropped, 1);
            kept
        };
        assert_eq!(kept, 2);
        let firsts: Vec<u8> = burst.as_slice().iter().map(|m| m.data()[0]).collect();
        assert_eq!(firsts, [7, 0, 2], "order kept, the chain gone");
        assert_eq!(pool.in_use(), 3, "the chain was freed with its tail");
        drop(burst);
        assert_eq!(pool.in_use(), 0);

        // The transmit side's raw hand-over (this test owns the binary's one EAL): a burst
        // with room for two more takes the first two of four pointers, in order; the other
        // two stay the caller's and go back to the pool in one call.
        let mut burst = MbufBurst::new(3);
        burst.push(pool.alloc_copy(&[10; 60]).unwrap()).unwrap();
        let lent: Vec<NonNull<sys::rte_mbuf>> = (11u8..15)
            .map(|i| NonNull::new(pool.alloc_copy(&[i; 60]).unwrap().into_raw()).unwrap())
            .collect();
        assert_eq!(pool.in_use(), 5);
        // SAFETY: four owned single-segment mbufs, handed over; the first two taken.
        let took = unsafe { burst.extend_raw(&lent) };
        assert_eq!(took, 2);
        let firsts: Vec<u8> = burst.as_slice().iter().map(|m| m.data()[0]).collect();
        assert_eq!(firsts, [10, 11, 12]);
        // SAFETY: the two not taken are still owned here, freed once.
        unsafe { free_raw_bulk(&lent[took..]) };
        assert_eq!(pool.in_use(), 3);
        // SAFETY: an empty slice frees nothing.
        unsafe { free_raw_bulk(&[]) };
        drop(burst);
        assert_eq!(pool.in_use(), 0);
    }
}

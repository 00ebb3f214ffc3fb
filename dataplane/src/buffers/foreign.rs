//! Frames in buffers a port backend owns (DPDK mbufs), held by the switch without a copy.
//!
//! A backend that can give its receive buffers away (zero copy) hands the switch a
//! [`ForeignFrame`]: where the frame's bytes are, and how to give the buffer back. The switch
//! keeps it in a packet slot ([`super::pool::PacketPool::alloc_foreign`]) exactly as it keeps
//! a copied frame, so the pipeline code is the same for every backend; only the slot's bytes
//! live elsewhere. When the frame leaves, the transmitting backend takes the buffer as it is
//! if it can send that kind ([`ForeignFrame::into_token`], checked with [`ForeignFrame::owner`]);
//! otherwise the frame is copied out and the buffer released. A dropped frame releases its
//! buffer. Release runs the backend's function exactly once: [`ForeignFrame`] owns the buffer
//! and releases it when dropped.

use std::ffi::c_void;
use std::ptr::NonNull;

/// Gives a foreign buffer back to its owner (for DPDK: frees the mbuf).
pub type ReleaseFn = unsafe fn(token: NonNull<c_void>);

/// A kind of foreign buffer: how to give one back, and a name a backend recognises its own by.
/// One `static` per kind, which every buffer of the kind points to: a buffer then carries one
/// word for both, and every move of one (receive burst, packet slot, transmit burst) is a word
/// shorter.
#[derive(Debug)]
pub struct ForeignKind {
    /// Gives a buffer of this kind back.
    pub release: ReleaseFn,
    /// Which kind of buffer: see [`ForeignFrame::owner`].
    pub owner: u32,
}

/// A foreign buffer as a packet slot stores it (no ownership semantics of its own: the slot
/// owns it). See [`ForeignFrame`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Foreign {
    data: NonNull<u8>,
    token: NonNull<c_void>,
    /// How to give it back, and which kind it is (see [`ForeignFrame::owner`]).
    kind: &'static ForeignKind,
}

impl Foreign {
    /// The frame's first `len` bytes (`len` at most the frame's length), for as long as the
    /// caller says.
    ///
    /// # Safety
    /// `len` must not exceed the length the buffer was handed over with, and the slice must
    /// not outlive the buffer's ownership by the caller (the slot or frame holding it).
    #[inline]
    pub(crate) unsafe fn bytes<'a>(self, len: usize) -> &'a [u8] {
        // SAFETY: the buffer stays valid and unaliased while owned (ForeignFrame::new's contract).
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), len) }
    }

    /// The frame's first `len` bytes, writable (ECN marking, DSCP rewriting).
    ///
    /// # Safety
    /// As [`Foreign::bytes`]; the caller has exclusive access to the slot.
    #[inline]
    pub(crate) unsafe fn bytes_mut<'a>(self, len: usize) -> &'a mut [u8] {
        // SAFETY: as in `bytes`; the owner of the slot is the only one touching the buffer.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), len) }
    }
}

// SAFETY: ForeignFrame::new requires a buffer that may be used and released from any thread.
unsafe impl Send for Foreign {}

/// A frame in a buffer a backend owns, owned by whoever holds this value: dropping it gives
/// the buffer back (calls the backend's release function once).
#[derive(Debug)]
pub struct ForeignFrame {
    buf: Foreign,
    len: u32,
}

impl ForeignFrame {
    /// Takes ownership of a backend's buffer holding a `len`-byte frame at `data`.
    ///
    /// # Safety
    /// `data..data + len` must be the frame, valid for reads and writes and touched by nobody
    /// else until `release(token)` is called; `release(token)` must give the buffer back and
    /// may be called from any thread, exactly once (by the drop of this value or of the packet
    /// slot holding it) unless [`ForeignFrame::into_token`] hands the buffer back instead.
    /// `kind.release` gives it back; `kind.owner` must identify the kind of buffer `token` is,
    /// for [`ForeignFrame::owner`].
    #[inline]
    pub unsafe fn new(data: NonNull<u8>, len: u32, token: NonNull<c_void>, kind: &'static ForeignKind) -> Self {
        ForeignFrame {
            buf: Foreign { data, token, kind },
            len,
        }
    }

    /// The frame.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: len is the length the buffer was handed over with.
        unsafe { self.buf.bytes(self.len as usize) }
    }

    /// The frame's length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the frame is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Which kind of buffer this is: the `owner` it was made with. A backend takes back (with
    /// [`ForeignFrame::into_token`]) only its own kind.
    #[inline]
    pub fn owner(&self) -> u32 {
        self.buf.kind.owner
    }

    /// Gives up ownership without releasing: the token, for the backend that made it to use
    /// (e.g. send the mbuf as it is).
    #[inline]
    pub fn into_token(self) -> NonNull<c_void> {
        let t = self.buf.token;
        std::mem::forget(self);
        t
    }

    /// The slot form: ownership moves to the packet slot.
    #[inline]
    pub(crate) fn into_slot(self) -> (Foreign, usize) {
        let (buf, len) = (self.buf, self.len as usize);
        std::mem::forget(self);
        (buf, len)
    }

    /// Back from a packet slot: `len` is the frame's length as the descriptor records it.
    ///
    /// # Safety
    /// `buf` must come from [`ForeignFrame::into_slot`] and be owned by the caller (taken out
    /// of its slot).
    #[inline]
    pub(crate) unsafe fn from_slot(buf: Foreign, len: usize) -> ForeignFrame {
        ForeignFrame { buf, len: len as u32 }
    }
}

impl Drop for ForeignFrame {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the buffer; ForeignFrame::new's contract makes this the one release.
        unsafe { (self.buf.kind.release)(self.buf.token) }
    }
}

/// Releases a foreign buffer held by a slot (the slot is being freed).
///
/// # Safety
/// `buf` must be owned by the caller and not used afterwards.
#[inline]
pub(crate) unsafe fn release(buf: Foreign) {
    // SAFETY: by the caller's contract, the one release of an owned buffer.
    unsafe { (buf.kind.release)(buf.token) }
}

/// Frames a port sends in one go: [`OWNED_BURST`] at most.
pub const OWNED_BURST: usize = 32;

/// Frames leaving one port in their backends' buffers, each with its departure time (ns): what
/// one `transmit` call of the switch sends without a copy, handed to the port together
/// ([`crate::egress::TxSink::transmit_owned_burst`], [`crate::io::PortBackend::send_owned_burst`])
/// so a backend that queues its own buffers (DPDK) does it once a burst, not through a call
/// per frame. A fixed array: no allocation on the packet path.
pub type OwnedBurst = arrayvec::ArrayVec<(ForeignFrame, u64), OWNED_BURST>;

/// Buffers leaving one port that its backend sends as they are (its own kind, see
/// [`crate::io::PortBackend::own_kind`]), by token only: the sink gathers these instead of
/// [`OwnedBurst`]'s frame records when the port's backend names a kind, and the backend moves
/// them into its transmit array in one copy ([`crate::io::PortBackend::send_own_tokens`]).
pub type OwnTokens = arrayvec::ArrayVec<NonNull<c_void>, OWNED_BURST>;

/// A receive burst of buffers of one kind that a backend lends the switch (DPDK's mbufs), as
/// arrays rather than a record a frame: the backend writes each frame's address, length and
/// token once; the switch reads them in place and takes a buffer by setting its bit; what is
/// not taken goes back in one pass over the bits ([`LentBurst::finish`]), none at all when
/// every frame was kept. An [`RxFrame`] record a frame (written, matched for its bytes,
/// replaced when taken, matched again to give back) cost 32 instructions a frame more on the
/// DPDK path (bench/README.md, "Issue 47 item 3").
/// Made once per port and reused: a burst allocates nothing.
pub struct LentBurst {
    kind: &'static ForeignKind,
    data: [*mut u8; OWNED_BURST],
    len: [u32; OWNED_BURST],
    token: [*mut c_void; OWNED_BURST],
    n: usize,
    /// Bit i: the switch took frame i's buffer.
    taken: u32,
    /// Whether the switch may keep buffers this burst (else it copies what it keeps: the
    /// backend's lending limit was reached).
    lend: bool,
}

const _: () = assert!(OWNED_BURST <= u32::BITS as usize, "one bit a frame in LentBurst::taken");

// SAFETY: the buffers LentBurst::push takes may be used and released from any thread
// (ForeignFrame::new's contract); the burst owns them until taken or handed back.
unsafe impl Send for LentBurst {}

impl LentBurst {
    /// An empty burst of buffers of `kind`.
    pub fn new(kind: &'static ForeignKind) -> Self {
        LentBurst {
            kind,
            data: [std::ptr::null_mut(); OWNED_BURST],
            len: [0; OWNED_BURST],
            token: [std::ptr::null_mut(); OWNED_BURST],
            n: 0,
            taken: 0,
            lend: true,
        }
    }

    /// Starts a burst (empty); `lend`: whether the switch may keep buffers of it, or must copy.
    #[inline]
    pub fn start(&mut self, lend: bool) {
        debug_assert!(self.n == 0, "the last burst was finished");
        self.n = 0;
        self.taken = 0;
        self.lend = lend;
    }

    /// Adds a frame; false (and nothing added) when the burst is full ([`OWNED_BURST`]).
    ///
    /// # Safety
    /// As [`ForeignFrame::new`] for `data`, `len` and `token`, with this burst's kind: the
    /// burst owns the buffer until the switch takes it or [`LentBurst::finish`] hands it back.
    #[inline]
    pub unsafe fn push(&mut self, data: NonNull<u8>, len: u32, token: NonNull<c_void>) -> bool {
        let i = self.n;
        if i >= OWNED_BURST {
            return false;
        }
        self.data[i] = data.as_ptr();
        self.len[i] = len;
        self.token[i] = token.as_ptr();
        self.n = i + 1;
        true
    }

    /// Frames in the burst.
    #[inline]
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the burst holds no frame.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Frame `i`'s bytes, for as long as the caller says.
    ///
    /// # Safety
    /// `i < len()`; the slice must not be used once the buffer was released (taken by the
    /// switch and freed with its packet slot, or handed back by `finish`).
    #[inline(always)]
    pub(crate) unsafe fn bytes<'a>(&self, i: usize) -> &'a [u8] {
        // SAFETY: push's contract: data..data+len is the frame, valid while owned.
        unsafe { std::slice::from_raw_parts(self.data[i], self.len[i] as usize) }
    }

    /// Frame `i`'s buffer for the switch to keep: None when this burst does not lend (the
    /// switch copies) or it was taken already.
    #[inline(always)]
    pub(crate) fn take(&mut self, i: usize) -> Option<ForeignFrame> {
        let bit = 1u32 << (i & 31);
        if !self.lend || i >= self.n || self.taken & bit != 0 {
            return None;
        }
        self.taken |= bit;
        // SAFETY: push's contract; the bit makes this the one owner of the buffer from here.
        Some(unsafe {
            ForeignFrame::new(
                NonNull::new_unchecked(self.data[i]),
                self.len[i],
                NonNull::new_unchecked(self.token[i].cast()),
                self.kind,
            )
        })
    }

    /// Gives back a buffer [`LentBurst::take`] handed out for frame `i` (the switch could not
    /// store it): the burst owns it again.
    #[inline]
    pub(crate) fn put_back(&mut self, i: usize, f: ForeignFrame) {
        debug_assert_eq!(f.buf.token.as_ptr(), self.token[i & 31], "frame {i}'s own buffer");
        let _ = f.into_token(); // owned by the burst again, not released
        self.taken &= !(1u32 << (i & 31));
    }

    /// Ends the burst: `back` gets the token of every buffer the switch did not take, in
    /// order; returns how many it took. The burst is empty afterwards.
    #[inline]
    pub fn finish(&mut self, mut back: impl FnMut(NonNull<c_void>)) -> usize {
        let n = self.n;
        let all = ((1u64 << n) - 1) as u32; // n <= OWNED_BURST <= 32
        let mut left = all & !self.taken;
        let taken = n - left.count_ones() as usize;
        while left != 0 {
            let i = left.trailing_zeros() as usize;
            left &= left - 1;
            // SAFETY: not taken, so still owned by the burst, and non-null (push).
            back(unsafe { NonNull::new_unchecked(self.token[i]) });
        }
        self.n = 0;
        self.taken = 0;
        taken
    }
}

impl Drop for LentBurst {
    /// A burst not finished (a panic between push and finish) releases what it still owns.
    fn drop(&mut self) {
        let kind = self.kind;
        // SAFETY: the buffers not taken are still the burst's own; each released once.
        self.finish(|t| unsafe { (kind.release)(t) });
    }
}

/// A received frame as a backend hands it to the switch: its bytes, or the buffer itself when
/// the backend can give it away. The switch takes the buffer when it keeps the frame (zero
/// copy), and otherwise copies the bytes or drops the frame; after the call the backend gets
/// back whatever the switch did not take ([`RxFrame::give_back`]).
pub enum RxFrame<'a> {
    /// A frame the switch must copy to keep.
    Borrowed(&'a [u8]),
    /// A frame whose buffer the switch may keep.
    Owned(ForeignFrame),
    /// The switch took the buffer.
    Taken,
}

impl RxFrame<'_> {
    /// The frame's bytes (empty once the switch took the buffer).
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match self {
            RxFrame::Borrowed(b) => b,
            RxFrame::Owned(f) => f.bytes(),
            RxFrame::Taken => &[],
        }
    }

    /// What the switch did not keep: the backend's buffer if the frame was dropped or copied.
    #[inline]
    pub fn give_back(&mut self) -> Option<ForeignFrame> {
        match std::mem::replace(self, RxFrame::Taken) {
            RxFrame::Owned(f) => Some(f),
            _ => None,
        }
    }

    /// The buffer, for the switch to keep (None for a borrowed frame, which stays borrowed).
    #[inline]
    pub(crate) fn take(&mut self) -> Option<ForeignFrame> {
        if matches!(self, RxFrame::Owned(_)) {
            self.give_back()
        } else {
            None
        }
    }

    /// Puts back a buffer the switch took but could not store.
    #[inline]
    pub(crate) fn put_back(&mut self, f: ForeignFrame) {
        *self = RxFrame::Owned(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `ForeignKind` is for: a buffer is three words (data, token, kind) wherever it
    /// moves, and a frame four with its length; a slot's record has a niche for `None`.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_lent_buffer_is_three_words_and_a_frame_four() {
        use std::mem::size_of;
        assert_eq!(size_of::<Foreign>(), 24);
        assert_eq!(size_of::<Option<Foreign>>(), 24);
        assert_eq!(size_of::<ForeignFrame>(), 32);
    }

    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// Buffers of the tests below released so far (each test its own kind and count).
    static RELEASED_A: AtomicUsize = AtomicUsize::new(0);
    static RELEASED_B: AtomicUsize = AtomicUsize::new(0);
    /// # Safety
    /// `token` from `Box::into_raw` in `lend_into`, released once.
    unsafe fn release_a(token: NonNull<c_void>) {
        // SAFETY: made by Box::into_raw in lend_into, released once.
        drop(unsafe { Box::from_raw(token.as_ptr().cast::<Vec<u8>>()) });
        RELEASED_A.fetch_add(1, SeqCst);
    }
    /// # Safety
    /// As `release_a`.
    unsafe fn release_b(token: NonNull<c_void>) {
        // SAFETY: made by Box::into_raw in lend_into, released once.
        drop(unsafe { Box::from_raw(token.as_ptr().cast::<Vec<u8>>()) });
        RELEASED_B.fetch_add(1, SeqCst);
    }
    static KIND_A: ForeignKind = ForeignKind {
        release: release_a,
        owner: 9,
    };
    static KIND_B: ForeignKind = ForeignKind {
        release: release_b,
        owner: 9,
    };

    /// Lends `ids.len()` 60-byte frames, frame i filled with `ids[i]`; their tokens in order.
    fn lend_into(b: &mut LentBurst, ids: &[u8]) -> Vec<NonNull<c_void>> {
        ids.iter()
            .map(|&id| {
                let mut v = Box::new(vec![id; 60]);
                let data = NonNull::new(v.as_mut_ptr()).unwrap();
                let token = NonNull::new(Box::into_raw(v).cast::<c_void>()).unwrap();
                // SAFETY: the box keeps the bytes alive until the kind's release, run once.
                assert!(unsafe { b.push(data, 60, token) });
                token
            })
            .collect()
    }

    /// What the switch takes is its own (released when it drops it), taken once; a buffer
    /// put back is the burst's again; `finish` hands back exactly the rest, in order, counts
    /// what was taken, and leaves the burst empty for the next one.
    #[test]
    fn a_lent_burst_hands_back_exactly_what_was_not_taken() {
        let mut b = LentBurst::new(&KIND_A);
        b.start(true);
        let tokens = lend_into(&mut b, &[10, 11, 12, 13]);
        assert_eq!(b.len(), 4);
        // SAFETY: 1 < len, not released.
        assert_eq!(unsafe { b.bytes(1) }, &[11u8; 60][..]);
        let kept = b.take(0).expect("a lending burst lends");
        assert_eq!(kept.bytes()[0], 10);
        assert!(b.take(0).is_none(), "taken once");
        let refused = b.take(2).unwrap();
        b.put_back(2, refused);
        assert!(b.take(7).is_none(), "past the burst");
        let mut back = Vec::new();
        assert_eq!(b.finish(|t| back.push(t)), 1);
        assert_eq!(back, vec![tokens[1], tokens[2], tokens[3]]);
        assert!(b.is_empty());
        assert_eq!(RELEASED_A.load(SeqCst), 0, "finish hands back; it does not release");
        drop(kept);
        assert_eq!(RELEASED_A.load(SeqCst), 1);
        for t in back {
            // SAFETY: handed back by finish, owned here, released once.
            unsafe { release_a(t) };
        }
        assert_eq!(RELEASED_A.load(SeqCst), 4);
    }

    /// A burst that does not lend (the backend's limit reached) gives nothing away: the switch
    /// copies, and every buffer goes back. A burst dropped before `finish` releases what it
    /// still owns. A full burst refuses one more.
    #[test]
    fn a_burst_that_does_not_lend_keeps_everything_and_one_dropped_releases_it() {
        let mut b = LentBurst::new(&KIND_B);
        b.start(false);
        lend_into(&mut b, &[1, 2, 3]);
        assert!((0..3).all(|i| b.take(i).is_none()));
        let mut back = 0;
        assert_eq!(
            b.finish(|t| {
                back += 1;
                // SAFETY: handed back by finish, owned here, released once.
                unsafe { release_b(t) }
            }),
            0
        );
        assert_eq!((back, RELEASED_B.load(SeqCst)), (3, 3));

        b.start(true);
        lend_into(&mut b, &[0; OWNED_BURST]);
        let mut v = vec![0u8; 60];
        let p = NonNull::new(v.as_mut_ptr()).unwrap();
        // SAFETY: refused (the burst is full), so never owned or released by the burst.
        assert!(!unsafe { b.push(p, 60, p.cast()) }, "one past OWNED_BURST");
        let kept = b.take(5).unwrap();
        drop(b);
        assert_eq!(
            RELEASED_B.load(SeqCst),
            3 + OWNED_BURST - 1,
            "the burst released its own"
        );
        drop(kept);
        assert_eq!(RELEASED_B.load(SeqCst), 3 + OWNED_BURST);
    }
}

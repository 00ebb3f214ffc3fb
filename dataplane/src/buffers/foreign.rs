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
}

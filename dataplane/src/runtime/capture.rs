//! Live capture (`rocectl capture`): the bounded ring a port's worker copies frames into and
//! the control thread empties.
//!
//! Why it looks like this: the worker that owns a port must never wait for, allocate for or
//! call into the kernel for a capture, and a capture must not be able to grow the switch's
//! memory. So the control thread allocates every slot when the capture starts (frame bytes up
//! to the snap length, the timestamp, the original length) and the slots circulate between two
//! lock-free queues: `free` (empty slots) and `filled` (captured frames, oldest first). The
//! worker pops a free slot, copies the frame in and pushes it onto `filled`; the control thread
//! pops from `filled`, sends the frame and pushes the slot back onto `free`. A slot is always
//! in exactly one place — a queue, the worker's hand or the control thread's — so whoever holds
//! it may write it, and the queues' push/pop order the writes (crossbeam's `ArrayQueue`, the
//! ring type the workers already trade frames on). Moving a `Box` through a queue is a pointer
//! copy: nothing is allocated or freed on either side after the start. When no free slot is
//! left (the reader is behind), the frame is not waited for: it is counted in `dropped`, and
//! the switch goes on.
//!
//! How a worker learns that a capture started or stopped: the control thread sends the ring
//! (or `None`) with a [`crate::runtime::worker::ControlRequest::Capture`]; the worker that owns
//! the port (reached through the coordinator when there are several) keeps it on its `PortIo`. The
//! control thread keeps its own reference and frees the ring only once it is the last one
//! (the worker dropped its clone), so the memory is never returned on the packet path either.

use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicU64, Ordering};

/// Which way a captured frame went through its port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Received from the port's backend, before the switch parsed it.
    Rx,
    /// Taken by the port's backend for transmission.
    Tx,
}

/// One captured frame: the first `len` bytes of `data` are the frame's first bytes (at most
/// the snap length), `orig_len` its full length.
pub struct Slot {
    /// The capturing worker's clock (`worker::Clock` nanoseconds since the switch started).
    pub at_ns: u64,
    /// The frame's full length, bytes.
    pub orig_len: u32,
    /// Bytes kept in `data` (at most the snap length).
    pub len: u32,
    /// Received or transmitted.
    pub dir: Dir,
    /// The slot's buffer, snap length long; only the first `len` bytes are this frame's.
    pub data: Box<[u8]>,
}

impl Slot {
    /// The captured bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }

    fn fill(&mut self, dir: Dir, at_ns: u64, frame: &[u8]) {
        let n = frame.len().min(self.data.len());
        self.data[..n].copy_from_slice(&frame[..n]);
        self.len = n as u32;
        self.orig_len = frame.len().min(u32::MAX as usize) as u32;
        self.at_ns = at_ns;
        self.dir = dir;
    }
}

/// The ring of one capture (one port, one or both directions).
pub struct CaptureRing {
    filled: ArrayQueue<Box<Slot>>,
    free: ArrayQueue<Box<Slot>>,
    /// Frames copied into the ring (written by the worker only).
    captured: AtomicU64,
    /// Frames that found no free slot (written by the worker only).
    dropped: AtomicU64,
    snaplen: usize,
}

impl CaptureRing {
    /// A ring of `slots` frames of up to `snaplen` bytes each, every byte allocated now.
    /// `slots` and `snaplen` must be at least 1.
    pub fn new(slots: usize, snaplen: usize) -> CaptureRing {
        let slots = slots.max(1);
        let snaplen = snaplen.max(1);
        let free = ArrayQueue::new(slots);
        for _ in 0..slots {
            let slot = Box::new(Slot {
                at_ns: 0,
                orig_len: 0,
                len: 0,
                dir: Dir::Rx,
                data: vec![0u8; snaplen].into_boxed_slice(),
            });
            let _ = free.push(slot);
        }
        CaptureRing {
            filled: ArrayQueue::new(slots),
            free,
            captured: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            snaplen,
        }
    }

    /// Bytes this ring holds for frame data (what a capture costs in memory).
    pub fn bytes_reserved(slots: usize, snaplen: usize) -> usize {
        slots
            .max(1)
            .saturating_mul(snaplen.max(1) + std::mem::size_of::<Slot>())
    }

    /// The most bytes a frame keeps.
    pub fn snaplen(&self) -> usize {
        self.snaplen
    }

    /// Slots in the ring: frames it holds before the worker starts counting drops.
    pub fn capacity(&self) -> usize {
        self.free.capacity()
    }

    /// The worker's side: copies `frame` in, or counts it dropped if the ring is full. Never
    /// blocks, allocates or frees.
    #[inline]
    pub fn record(&self, dir: Dir, at_ns: u64, frame: &[u8]) {
        match self.free.pop() {
            Some(mut slot) => {
                slot.fill(dir, at_ns, frame);
                self.commit(slot);
            }
            None => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// For a frame whose buffer is about to be given away (zero-copy transmit): copies it into
    /// a free slot now, to [`CaptureRing::finish`] once it is known whether the port took it.
    /// `None` when the ring is full.
    #[inline]
    pub fn stage(&self, dir: Dir, at_ns: u64, frame: &[u8]) -> Option<Box<Slot>> {
        let mut slot = self.free.pop()?;
        slot.fill(dir, at_ns, frame);
        Some(slot)
    }

    /// Ends [`CaptureRing::stage`]: a frame the port took is captured (or counted dropped if
    /// there was no slot for it); one it refused is not a frame it sent.
    #[inline]
    pub fn finish(&self, staged: Option<Box<Slot>>, taken: bool) {
        match (staged, taken) {
            (Some(slot), true) => self.commit(slot),
            (Some(slot), false) => {
                // The slot came from `free`, which therefore has room for it.
                let _ = self.free.push(slot);
            }
            (None, true) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            (None, false) => {}
        }
    }

    #[inline]
    fn commit(&self, slot: Box<Slot>) {
        // Every slot is in exactly one place, so `filled` (as large as the ring) has room.
        let _ = self.filled.push(slot);
        self.captured.fetch_add(1, Ordering::Relaxed);
    }

    /// The control thread's side: the oldest captured frame, if any. Hand the slot back with
    /// [`CaptureRing::recycle`] once its bytes are sent.
    pub fn pop(&self) -> Option<Box<Slot>> {
        self.filled.pop()
    }

    /// Returns a slot [`CaptureRing::pop`] gave out.
    pub fn recycle(&self, slot: Box<Slot>) {
        let _ = self.free.push(slot);
    }

    /// Frames waiting to be read.
    pub fn pending(&self) -> usize {
        self.filled.len()
    }

    /// Frames copied into the ring so far.
    pub fn captured(&self) -> u64 {
        self.captured.load(Ordering::Relaxed)
    }

    /// Frames the ring had no room for so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn frame(seq: u64, len: usize) -> Vec<u8> {
        let mut f = vec![(seq % 251) as u8; len.max(8)];
        f[..8].copy_from_slice(&seq.to_le_bytes());
        f
    }

    /// A full ring counts what it cannot take and keeps what it holds: the producer never
    /// waits for the reader.
    #[test]
    fn a_full_ring_counts_drops_and_keeps_the_oldest() {
        let ring = CaptureRing::new(4, 64);
        for seq in 0..10 {
            ring.record(Dir::Rx, seq, &frame(seq, 100));
        }
        assert_eq!((ring.captured(), ring.dropped(), ring.pending()), (4, 6, 4));
        let mut got = Vec::new();
        while let Some(s) = ring.pop() {
            assert_eq!(s.orig_len, 100);
            assert_eq!(s.len, 64, "cut at the snap length");
            assert_eq!(s.bytes(), &frame(s.at_ns, 100)[..64]);
            got.push(s.at_ns);
            ring.recycle(s);
        }
        assert_eq!(got, [0, 1, 2, 3]);
        // Room again once the reader caught up.
        ring.record(Dir::Tx, 11, &frame(11, 20));
        let s = ring.pop().unwrap();
        assert_eq!(
            (s.dir, s.len, s.orig_len, s.bytes()),
            (Dir::Tx, 20, 20, &frame(11, 20)[..])
        );
    }

    /// A staged frame the port refused is neither captured nor dropped; one it took with no
    /// slot left is a drop.
    #[test]
    fn staging_counts_only_frames_the_port_took() {
        let ring = CaptureRing::new(1, 32);
        let s = ring.stage(Dir::Tx, 1, &frame(1, 40));
        ring.finish(s, false);
        assert_eq!((ring.captured(), ring.dropped(), ring.pending()), (0, 0, 0));
        let s = ring.stage(Dir::Tx, 2, &frame(2, 40));
        assert!(
            ring.stage(Dir::Tx, 3, &frame(3, 40)).is_none(),
            "the only slot is staged"
        );
        ring.finish(None, true);
        ring.finish(s, true);
        assert_eq!((ring.captured(), ring.dropped(), ring.pending()), (1, 1, 1));
        assert_eq!(ring.pop().unwrap().at_ns, 2);
    }

    #[derive(Debug, Clone)]
    enum Step {
        Record(usize),
        Pop,
    }

    proptest! {
        /// Against a model (a bounded FIFO that refuses when full): any interleaving of
        /// records and reads gives the same frames, in order, and the same drop count.
        #[test]
        fn behaves_as_a_bounded_fifo(
            slots in 1usize..8,
            snap in 1usize..40,
            steps in proptest::collection::vec(
                prop_oneof![(1usize..60).prop_map(Step::Record), Just(Step::Pop)], 0..200),
        ) {
            let ring = CaptureRing::new(slots, snap);
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            let (mut seq, mut dropped) = (0u64, 0u64);
            for step in steps {
                match step {
                    Step::Record(len) => {
                        let f = frame(seq, len);
                        ring.record(Dir::Rx, seq, &f);
                        if model.len() < slots {
                            model.push_back(f);
                        } else {
                            dropped += 1;
                        }
                        seq += 1;
                    }
                    Step::Pop => {
                        let got = ring.pop();
                        let want = model.pop_front();
                        prop_assert_eq!(got.is_some(), want.is_some());
                        if let (Some(s), Some(w)) = (got, want) {
                            prop_assert_eq!(s.orig_len as usize, w.len());
                            prop_assert_eq!(s.bytes(), &w[..w.len().min(snap)]);
                            ring.recycle(s);
                        }
                    }
                }
            }
            prop_assert_eq!(ring.dropped(), dropped);
            prop_assert_eq!(ring.pending(), model.len());
        }
    }

    /// One producer thread, one consumer thread that stalls now and then: every frame read is
    /// intact and in order, read + dropped = recorded, and the producer's pace does not depend
    /// on the reader (it records 200,000 frames while the reader keeps stopping to sleep).
    #[test]
    fn producer_and_consumer_on_two_threads() {
        const N: u64 = 200_000;
        let ring = Arc::new(CaptureRing::new(256, 96));
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (ring, done) = (ring.clone(), done.clone());
            std::thread::spawn(move || {
                let (mut read, mut last) = (0u64, None::<u64>);
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let mut any = false;
                    while let Some(s) = ring.pop() {
                        any = true;
                        let seq = u64::from_le_bytes(s.bytes()[..8].try_into().unwrap());
                        assert_eq!(s.at_ns, seq);
                        assert_eq!(s.bytes(), &frame(seq, s.orig_len as usize)[..s.len as usize]);
                        if let Some(l) = last {
                            assert!(l < seq, "out of order: {l} then {seq}");
                        }
                        last = Some(seq);
                        read += 1;
                        ring.recycle(s);
                        if read % 10_000 == 0 {
                            // A reader that falls behind.
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    }
                    if finished && !any {
                        return read;
                    }
                }
            })
        };
        let t0 = Instant::now();
        for seq in 0..N {
            ring.record(Dir::Tx, seq, &frame(seq, 60 + (seq % 37) as usize));
        }
        let produced_in = t0.elapsed();
        done.store(true, Ordering::Release);
        let read = reader.join().unwrap();
        assert_eq!(read + ring.dropped(), N, "every frame read or counted");
        assert_eq!(ring.captured(), read);
        assert!(read > 0);
        // Generous: 200k copies of <100 B take milliseconds; a producer that waited for the
        // sleeping reader would take seconds.
        assert!(produced_in < Duration::from_secs(5), "producer took {produced_in:?}");
    }
}

//! Zero copy through the pipeline, without DPDK: a frame a backend lends (`RxFrame::Owned`)
//! stays in its buffer from receive to transmit — the sink gets the very same buffer back,
//! marked in place — a flood copies it only for its extra ports, and a frame the switch does
//! not keep is handed back to the backend untouched. Buffers here are boxes whose release is
//! counted, so every buffer is seen to be released exactly once.

mod common;
use common::*;
use dataplane::io::{ForeignFrame, ForeignKind, RxFrame};
use dataplane::tools::gen::announce;
use dataplane::{Switch, TxSink};
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

const OWNER: u32 = 0x7465_7374;

/// A lent buffer: the frame's bytes in a leaked box, freed by `release`, which counts it in
/// `released`.
fn lend(frame: &[u8], released: &'static AtomicUsize) -> (ForeignFrame, *const u8) {
    type Buf = (Box<[u8]>, &'static AtomicUsize);
    unsafe fn release(token: NonNull<c_void>) {
        // SAFETY: made by Box::into_raw in `lend`, released once.
        let b = unsafe { Box::from_raw(token.as_ptr().cast::<Buf>()) };
        b.1.fetch_add(1, SeqCst);
    }
    static KIND: ForeignKind = ForeignKind { release, owner: OWNER };
    let mut b: Box<Buf> = Box::new((frame.into(), released));
    let data = NonNull::new(b.0.as_mut_ptr()).unwrap();
    let token = NonNull::new(Box::into_raw(b).cast::<c_void>()).unwrap();
    // SAFETY: the box keeps the bytes alive and unaliased until `release`, which runs once.
    let f = unsafe { ForeignFrame::new(data, frame.len() as u32, token, &KIND) };
    (f, data.as_ptr())
}

/// What left the switch: frames handed over in their buffer, and copies.
#[derive(Default)]
struct Sink {
    owned: Vec<(usize, ForeignFrame)>,
    copied: Vec<(usize, Vec<u8>)>,
}

impl TxSink for Sink {
    fn transmit(&mut self, port: usize, frame: &[u8], _at_ns: u64) {
        self.copied.push((port, frame.to_vec()));
    }
    fn transmit_owned(&mut self, port: usize, frame: ForeignFrame, _at_ns: u64) {
        self.owned.push((port, frame));
    }
}

#[test]
fn lent_frames_leave_in_their_own_buffer() {
    static RELEASED: AtomicUsize = AtomicUsize::new(0);
    let mut sw = Switch::new(&default_config(), 1);
    // Port 3's host is known: frames to it are unicast. Host 2 is not: frames to it flood.
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    // (The announcement itself is flooded: out of the way first.)
    let mut announced = Sink::default();
    for p in 0..3 {
        sw.transmit(p, 0, &mut announced);
    }
    assert_eq!(announced.copied.len(), 3);
    let unicast = burst32(0, 3, 26);
    let flood = burst32(1, 2, 26);
    let released = RELEASED.load(SeqCst);

    let mut lent = Vec::new();
    let mut rx = sw.burst_rx(0, 1_000);
    for f in &unicast[..4] {
        let (frame, ptr) = lend(f, &RELEASED);
        let mut frame = RxFrame::Owned(frame);
        rx.receive_frame(&mut frame);
        assert!(frame.give_back().is_none(), "the switch kept the buffer");
        lent.push(ptr);
    }
    // Shorter than an Ethernet header: dropped at ingress, so the buffer comes back.
    let (runt, runt_ptr) = lend(&[0u8; 10], &RELEASED);
    let mut runt = RxFrame::Owned(runt);
    rx.receive_frame(&mut runt);
    let back = runt.give_back().expect("a dropped frame's buffer comes back");
    assert_eq!(back.bytes().as_ptr(), runt_ptr);
    drop(back);
    assert_eq!(RELEASED.load(SeqCst), released + 1);
    drop(rx); // the burst ends: its frames are admitted
    let (frame, flood_ptr) = lend(&flood[0], &RELEASED);
    let mut frame = RxFrame::Owned(frame);
    sw.burst_rx(1, 1_000).receive_frame(&mut frame);
    assert!(frame.give_back().is_none());
    assert_eq!(sw.foreign_held(), 5);

    let mut sink = Sink::default();
    // The link sends what is due by `now`, one frame after another: 20 µs is ample.
    for now in (1_000..21_000).step_by(500) {
        for p in 0..4 {
            sw.transmit(p, now, &mut sink);
        }
    }
    assert_eq!(sw.foreign_held(), 0);
    // Everything lent left in its own buffer, to port 3, in order: the unicast frames, then
    // the flood (whose buffer goes to the last of its ports; the others get copies).
    let to3: Vec<*const u8> = sink
        .owned
        .iter()
        .map(|(p, f)| {
            assert_eq!((*p, f.owner()), (3, OWNER));
            f.bytes().as_ptr()
        })
        .collect();
    lent.push(flood_ptr);
    assert_eq!(to3, lent);
    for ((_, f), orig) in sink.owned.iter().zip(unicast[..4].iter().chain(&flood[..1])) {
        assert_eq!(f.bytes(), &orig[..]);
    }
    let copies: Vec<usize> = sink.copied.iter().map(|(p, _)| *p).collect();
    assert_eq!(copies, [0, 2], "a flood from port 1 reaches every other port once");
    assert!(sink.copied.iter().all(|(_, c)| c == &flood[0]));

    // Nothing was released while the sink held the buffers; dropping them releases each once.
    assert_eq!(RELEASED.load(SeqCst), released + 1);
    drop(sink);
    assert_eq!(RELEASED.load(SeqCst), released + 6);
}

/// A switch dropped with lent frames still queued gives their buffers back.
#[test]
fn a_switch_dropped_with_lent_frames_releases_them() {
    static RELEASED: AtomicUsize = AtomicUsize::new(0);
    let mut sw = Switch::new(&default_config(), 1);
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let before = RELEASED.load(SeqCst);
    let mut rx = sw.burst_rx(0, 1_000);
    for f in &burst32(0, 3, 26)[..3] {
        let mut frame = RxFrame::Owned(lend(f, &RELEASED).0);
        rx.receive_frame(&mut frame);
        assert!(frame.give_back().is_none());
    }
    drop(rx);
    assert_eq!(sw.foreign_held(), 3);
    drop(sw);
    assert_eq!(RELEASED.load(SeqCst), before + 3);
}

/// A burst lent as arrays (`LentBurst`, DPDK's receive path) takes the same path as the same
/// frames lent one `RxFrame` each: the same buffers kept (zero copy), the same ones handed
/// back (a runt, dropped at ingress), and the same frames out of the same ports.
#[test]
fn a_lent_burst_keeps_and_hands_back_what_lent_frames_do() {
    static RELEASED: AtomicUsize = AtomicUsize::new(0);
    type Buf = (Box<[u8]>, &'static AtomicUsize);
    unsafe fn release(token: NonNull<c_void>) {
        // SAFETY: made by Box::into_raw in `lend`, released once.
        let b = unsafe { Box::from_raw(token.as_ptr().cast::<Buf>()) };
        b.1.fetch_add(1, SeqCst);
    }
    // The kind `lend` uses, for the burst (its buffers are made the same way).
    static KIND: ForeignKind = ForeignKind { release, owner: OWNER };
    let unicast = burst32(0, 3, 26);
    let flood = burst32(0, 2, 26);
    let mut frames: Vec<Vec<u8>> = unicast[..4].to_vec();
    frames.insert(2, vec![0u8; 10]); // a runt: dropped at ingress
    frames.push(flood[0].clone());
    let switch = || {
        let mut sw = Switch::new(&default_config(), 1);
        sw.receive(3, &announce(3, 0).unwrap(), 0);
        let mut sink = Sink::default();
        for p in 0..4 {
            sw.transmit(p, 0, &mut sink);
        }
        sw
    };
    let drain = |sw: &mut Switch| {
        let mut sink = Sink::default();
        for now in (1_000..41_000).step_by(500) {
            for p in 0..4 {
                sw.transmit(p, now, &mut sink);
            }
        }
        let owned: Vec<(usize, Vec<u8>)> = sink.owned.iter().map(|(p, f)| (*p, f.bytes().to_vec())).collect();
        (owned, sink.copied)
    };

    // One RxFrame a frame.
    let mut by_frame = switch();
    let mut lent: Vec<RxFrame> = frames.iter().map(|f| RxFrame::Owned(lend(f, &RELEASED).0)).collect();
    by_frame.burst_rx(0, 1_000).receive_frames(&mut lent);
    let back_by_frame: Vec<usize> = (0..lent.len()).filter(|&i| lent[i].give_back().is_some()).collect();
    let held_by_frame = by_frame.foreign_held();

    // The same frames as one lent burst.
    let mut by_burst = switch();
    let mut burst = dataplane::io::LentBurst::new(&KIND);
    burst.start(true);
    let mut tokens = Vec::new();
    for f in &frames {
        let mut b: Box<Buf> = Box::new((f[..].into(), &RELEASED));
        let data = NonNull::new(b.0.as_mut_ptr()).unwrap();
        let token = NonNull::new(Box::into_raw(b).cast::<c_void>()).unwrap();
        // SAFETY: the box keeps the bytes alive and unaliased until `release`, which runs once.
        assert!(unsafe { burst.push(data, f.len() as u32, token) });
        tokens.push(token);
    }
    by_burst.burst_rx(0, 1_000).receive_lent(&mut burst);
    let mut back = Vec::new();
    let taken = burst.finish(|t| back.push(t));
    let back_by_burst: Vec<usize> = back
        .iter()
        .map(|t| tokens.iter().position(|x| x == t).unwrap())
        .collect();
    assert_eq!(back_by_burst, back_by_frame);
    assert_eq!(back_by_burst, [2], "the runt's buffer, and only it, comes back");
    assert_eq!((taken, by_burst.foreign_held()), (5, held_by_frame));
    for t in back {
        // SAFETY: handed back by finish, owned here, released once.
        unsafe { release(t) };
    }

    let (owned, copied) = drain(&mut by_burst);
    assert_eq!((owned.clone(), copied.clone()), drain(&mut by_frame));
    assert_eq!(
        owned.len(),
        5,
        "four unicast frames and the flood's last copy in their own buffers"
    );
    assert_eq!(copied.len(), 2, "the flood's copies to ports 1 and 2");
    drop(by_burst);
    drop(by_frame);
    drop(lent);
}

//! Property tests of a switch split into shards (`dataplane::shard`), driven by hand on one
//! thread so every interleaving is reproducible: each shard owns some ports, frames for another
//! shard's port cross in batches, releases come back. Whatever arrives, once everything drains
//! every shard's MMU is empty, every packet buffer is back, each frame is sent or counted as a
//! drop, and no flow is reordered.

mod common;
use common::*;
use dataplane::shard::{Batch, Link, PoolShare};
use dataplane::tools::gen::Flow;
use dataplane::wire::Ecn;
use dataplane::Switch;
use proptest::prelude::*;
use std::collections::HashMap;

#[derive(Debug, Clone)]
struct Burst {
    port: usize,
    dst: u16,
    dscp: u8,
    len: usize,
    count: u64,
    gap_ns: u64,
}

fn burst() -> impl Strategy<Value = Burst> {
    (
        0usize..4,
        0u16..5,
        prop::sample::select(vec![0u8, 26, 48, 10]),
        78usize..1500,
        1u64..48,
        0u64..3_000,
    )
        .prop_map(|(port, dst, dscp, len, count, gap_ns)| Burst {
            port,
            dst,
            dscp,
            len,
            count,
            gap_ns,
        })
}

/// The shards of one switch and the links between them, driven round by round.
struct Sharded {
    shards: Vec<Switch>,
    links: Vec<Vec<Link>>,
    share: PoolShare,
    owners: Vec<u8>,
    /// Every batch taken a message at a time (`take_one_by_one`).
    one_by_one: bool,
}

/// Takes `b` as batches of one message each, in the order `take_batch` takes a batch
/// (releases, frames): the frame-by-frame reference for the runs a batch's frames are
/// admitted in (`Egress::admit_crossed_run`).
fn take_one_by_one(sw: &mut Switch, b: &mut Batch, now: u64) {
    let single = |frames, releases| Batch { frames, releases };
    for r in b.releases.drain(..) {
        sw.take_batch(&mut single(Vec::new(), vec![r]), now);
    }
    for c in b.frames.drain(..) {
        sw.take_batch(&mut single(vec![c], Vec::new()), now);
    }
}

impl Sharded {
    fn new(owners: &[u8]) -> Self {
        Self::with_config(owners, default_config())
    }

    fn with_config(owners: &[u8], cfg: controlplane::Config) -> Self {
        let n = *owners.iter().max().unwrap() as usize + 1;
        Sharded {
            shards: (0..n)
                .map(|s| Switch::shard(&cfg, 3, s as u8, n as u8, owners))
                .collect(),
            links: (0..n).map(|_| (0..n).map(|_| Link::new()).collect()).collect(),
            share: PoolShare::new(n),
            owners: owners.to_vec(),
            one_by_one: false,
        }
    }

    /// One round of every shard: batches in, timers, transmit, then exchange and flush out.
    fn round(&mut self, now: u64, sink: &mut impl FnMut(usize, &[u8], u64)) {
        let n = self.shards.len();
        for me in 0..n {
            for from in (0..n).filter(|&f| f != me) {
                self.shards[me].take_learns(&self.links[from][me]);
                while let Some(mut b) = self.links[from][me].receive() {
                    if self.one_by_one {
                        take_one_by_one(&mut self.shards[me], &mut b, now);
                    } else {
                        self.shards[me].take_batch(&mut b, now);
                    }
                    self.links[from][me].recycle(b);
                }
            }
            let sw = &mut self.shards[me];
            sw.poll(now);
            for p in (0..self.owners.len()).filter(|&p| self.owners[p] as usize == me) {
                sw.transmit(p, now, sink);
            }
            sw.exchange(&self.share);
            for to in (0..n).filter(|&t| t != me) {
                sw.flush_to(to, &self.links[me][to]);
            }
        }
    }

    fn settled(&self) -> bool {
        let n = self.shards.len();
        self.shards.iter().all(|s| s.is_idle() && s.outboxes_empty())
            && (0..n).all(|a| (0..n).all(|b| self.links[a][b].is_empty()))
    }

    fn next_event(&self, now: u64) -> Option<u64> {
        self.shards.iter().filter_map(|s| s.next_event(now)).min()
    }
}

/// `count` RoCEv2 frames of `len` bytes from host `src` to host `dst` (the generator's, at
/// 25 Gb/s from time 0), their bytes only.
fn flow_frames(src: u16, dst: u16, dscp: u8, ecn: Ecn, len: usize, count: u64) -> Vec<Vec<u8>> {
    let flow = Flow {
        src,
        dst,
        dscp,
        ecn,
        qp: 1,
        frame_len: len,
        count,
        start_ns: 0,
        rate_bps: 25_000_000_000,
    };
    flow.frames().unwrap().into_iter().map(|(_, f)| f).collect()
}

/// A flow of a RoCEv2 frame over IPv4 (what the generator sends): its source MAC and DSCP
/// (frames of different classes may overtake each other, by design), and its PSN.
fn flow_key_and_psn(f: &[u8]) -> Option<(([u8; 6], u8), u32)> {
    if f.len() < 54 || f[12..14] != [0x08, 0x00] || f[23] != 17 {
        return None;
    }
    let bth = 42;
    let psn = u32::from_be_bytes([0, f[bth + 9], f[bth + 10], f[bth + 11]]);
    Some(((f[6..12].try_into().unwrap(), f[15] >> 2), psn))
}

/// Feeds `bursts` to a switch of shards owned as `owners` says, in receive bursts of 32 (of
/// 1 with `one_by_one`, whose batches are also taken a message at a time), round by round,
/// until it drains; every frame sent goes to `sink`. Returns the switch, the time it drained
/// and the frames received.
fn drive(
    bursts: &[Burst],
    owners: &[u8],
    cfg: controlplane::Config,
    one_by_one: bool,
    sink: &mut impl FnMut(usize, &[u8], u64),
) -> Result<(Sharded, u64, u64), TestCaseError> {
    let mut sw = Sharded::with_config(owners, cfg);
    sw.one_by_one = one_by_one;
    let mut now = 0u64;
    let mut received = 0u64;
    // Each source numbers its frames across bursts (PSN rewritten: the switch checks no ICRC),
    // so order is checked over the whole run, not only within a burst.
    let mut next_psn = [0u32; 4];
    for b in bursts {
        let mut frames = flow_frames(b.port as u16, b.dst, b.dscp, Ecn::Ect0, b.len, b.count);
        for f in &mut frames {
            let psn = next_psn[b.port];
            next_psn[b.port] += 1;
            f[42 + 9..42 + 12].copy_from_slice(&psn.to_be_bytes()[1..]);
        }
        // In receive bursts of 32, as a worker reads them, each only while the outboxes have
        // room (what the worker checks).
        for chunk in frames.chunks(if one_by_one { 1 } else { 32 }) {
            let owner = owners[b.port] as usize;
            while !sw.shards[owner].can_receive() {
                sw.round(now, sink);
            }
            sw.shards[owner].receive_burst(b.port, chunk.iter().map(Vec::as_slice), now);
            received += chunk.len() as u64;
        }
        sw.round(now, sink);
        now += b.gap_ns;
    }
    let mut guard = 0;
    while !sw.settled() {
        now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
        sw.round(now, sink);
        guard += 1;
        prop_assert!(guard < 1_000_000, "did not drain");
    }
    Ok((sw, now, received))
}

/// Frames of one burst for another shard's port are charged to their PG together and
/// admitted to their queue there together (`Switch::send_run_across`,
/// `Egress::admit_crossed_run`): the switch sends the same frames at the same times and ends
/// with the same counters, peaks and PFC as when every frame arrives alone and every batch is
/// taken a message at a time, which charges and admits each frame by itself. On a buffer of
/// `buffer` (e.g. "192KiB"), small enough that PGs reach XOFF and queues their limits.
fn runs_decide_as_frames_alone(bursts: &[Burst], owners: &[u8], buffer: &str) -> Result<(), TestCaseError> {
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml"))
        .unwrap()
        .replace(r#"size = "4MiB""#, &format!("size = {buffer:?}"));
    let cfg = controlplane::load_str(&text).unwrap().config;
    let mut outputs = [Vec::new(), Vec::new()];
    let mut snapshots = [Vec::new(), Vec::new()];
    for (i, one_by_one) in [false, true].into_iter().enumerate() {
        let out = &mut outputs[i];
        let (sw, now, _) = drive(bursts, owners, cfg.clone(), one_by_one, &mut |port, f: &[u8], t| {
            out.push((port, f.to_vec(), t))
        })?;
        snapshots[i] = sw.shards.iter().map(|s| s.snapshot(now)).collect();
    }
    prop_assert!(
        outputs[0] == outputs[1],
        "{} frames sent in runs, {} alone",
        outputs[0].len(),
        outputs[1].len()
    );
    prop_assert_eq!(&snapshots[0], &snapshots[1]);
    Ok(())
}

fn run(bursts: &[Burst], owners: &[u8]) -> Result<(), TestCaseError> {
    let mut sent = 0u64;
    // Per (egress port, flow): the last PSN seen there.
    let mut last: HashMap<(usize, ([u8; 6], u8)), u32> = HashMap::new();
    let mut reordered = Vec::new();
    // Each host sends on its own port: its source MAC says where a frame came in.
    let in_port_of: HashMap<[u8; 6], usize> = bursts
        .iter()
        .map(|b| {
            let f = flow_frames(b.port as u16, b.dst, b.dscp, Ecn::Ect0, b.len, 1).remove(0);
            (f[6..12].try_into().unwrap(), b.port)
        })
        .collect();
    // Data frames sent through a port of another shard than the one they came in on.
    let mut crossed_sent = 0u64;
    let mut sink = |port: usize, f: &[u8], _: u64| {
        sent += 1;
        if let Some((src, psn)) = flow_key_and_psn(f) {
            if owners[in_port_of[&src.0]] != owners[port] {
                crossed_sent += 1;
            }
            if let Some(prev) = last.insert((port, src), psn) {
                if psn <= prev {
                    reordered.push((port, src, prev, psn));
                }
            }
        }
    };
    let (sw, now, received) = drive(bursts, owners, default_config(), false, &mut sink)?;
    prop_assert!(
        reordered.is_empty(),
        "reordered: {:?}",
        &reordered[..reordered.len().min(5)]
    );
    let mut tx = 0;
    let mut rx = 0;
    let mut dropped_copies = 0;
    let mut crossed_out = 0;
    for (s, shard) in sw.shards.iter().enumerate() {
        prop_assert!(shard.buffers_empty(), "shard {s}: {:?}", shard.pool_use());
        prop_assert_eq!(shard.accounting_errors(), Vec::<String>::new());
        prop_assert_eq!(
            shard.free_buffers(),
            shard.buffer_capacity(),
            "shard {} holds packet slots",
            s
        );
        let snap = shard.snapshot(now);
        for (i, p) in snap.ports.iter().enumerate() {
            if owners[i] as usize != s {
                // Another shard's port: nothing of it is counted here.
                prop_assert_eq!((p.rx_packets, p.tx_packets), (0, 0));
                continue;
            }
            rx += p.rx_packets;
            tx += p.tx_packets;
            dropped_copies += p.drops.total();
            crossed_out += p.crossed_out;
            for g in &p.pgs {
                prop_assert_eq!(g.min_cells + g.shared_cells + g.headroom_cells, 0);
            }
        }
    }
    prop_assert_eq!(rx, received);
    prop_assert_eq!(tx, sent);
    // Every frame in is out (once per copy) or counted: unicast frames are one copy, floods
    // three; whatever is not sent is a counted drop.
    prop_assert!(
        tx + dropped_copies >= received,
        "tx {tx} + drops {dropped_copies} < rx {received}"
    );
    // What the ports say crossed (`crossed_out`): every frame sent by another shard than its
    // ingress one, and at most the frames dropped besides (a copy may cross, then be dropped).
    prop_assert!(
        crossed_sent <= crossed_out && crossed_out <= crossed_sent + dropped_copies,
        "crossed_out {crossed_out}, sent across {crossed_sent}, drops {dropped_copies}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Two shards, ports alternating (every unicast between ports 0 and 1 crosses).
    #[test]
    fn two_shards_conserve_cells_and_keep_order(bursts in prop::collection::vec(burst(), 1..40)) {
        run(&bursts, &[0, 1, 0, 1])?;
    }

    /// Four shards, one port each: every frame crosses.
    #[test]
    fn four_shards_conserve_cells_and_keep_order(bursts in prop::collection::vec(burst(), 1..40)) {
        run(&bursts, &[0, 1, 2, 3])?;
    }

    /// Two shards, ports alternating: runs to another shard's port decide as frames alone,
    /// on a small buffer (PGs pause, queues drop) and on the default one.
    #[test]
    fn two_shards_cross_in_runs_as_frames_alone_would(
        bursts in prop::collection::vec(burst(), 1..40),
        buffer in prop::sample::select(vec!["128KiB", "192KiB", "4MiB"]),
    ) {
        runs_decide_as_frames_alone(&bursts, &[0, 1, 0, 1], buffer)?;
    }
}

/// A crossing frame is charged to its ingress PG on its own shard until its release comes
/// back: a lossless incast into another shard's port makes the ingress shard send XOFF, and
/// XON once the egress shard has sent the frames and their releases returned.
#[test]
fn xoff_and_xon_are_decided_by_the_ingress_shard() {
    // Headroom for what this test's sender (which ignores PFC) sends after the XOFF.
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml"))
        .unwrap()
        .replace(r#"headroom = "auto""#, r#"headroom = "256KiB""#);
    let cfg = controlplane::load_str(&text).unwrap().config;
    let mut sw = Sharded::with_config(&[0, 1, 0, 1], cfg);
    let mut out = Vec::new();
    let mut sink = |port: usize, f: &[u8], _: u64| out.push((port, f.to_vec()));
    // Teach the switch where host 1 is, so nothing floods.
    let learn = dataplane::tools::gen::announce(1, 0).unwrap();
    sw.shards[1].receive(1, &learn, 0);
    sw.round(0, &mut sink);
    sw.round(0, &mut sink);
    // 550 lossless 1 KiB frames from port 0 (shard 0) to host 1 (port 1, shard 1) at once.
    let frames = flow_frames(0, 1, 26, Ecn::NotEct, 1024, 550);
    let mut now = 1_000;
    for chunk in frames.chunks(32) {
        while !sw.shards[0].can_receive() {
            sw.round(now, &mut sink);
        }
        sw.shards[0].receive_burst(0, chunk.iter().map(Vec::as_slice), now);
        sw.round(now, &mut sink);
    }
    let s0 = sw.shards[0].snapshot(now);
    assert!(
        s0.ports[0].pgs[3].xoff_sent >= 1,
        "the ingress shard paused its port: {:?}",
        s0.ports[0].pgs[3]
    );
    while !sw.settled() {
        now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
        sw.round(now, &mut sink);
    }
    let s0 = sw.shards[0].snapshot(now);
    let pg = &s0.ports[0].pgs[3];
    assert_eq!(pg.xon_sent, 1, "one XON once the PG drained: {pg:?}");
    assert_eq!(s0.ports[0].drops.total(), 0);
    let pfc_on_port0: Vec<_> = out
        .iter()
        .filter(|(p, f)| *p == 0 && f[12..14] == [0x88, 0x08])
        .collect();
    assert_eq!(
        pfc_on_port0.len() as u64,
        s0.ports[0].pfc_tx.iter().max().copied().unwrap_or(0),
        "every PFC frame counted once"
    );
    let data_on_port1 = out.iter().filter(|(p, f)| *p == 1 && f.len() == 1024).count();
    assert_eq!(data_on_port1, 550, "every lossless frame delivered");
    assert!(sw.shards.iter().all(Switch::buffers_empty));
}

/// More stations learnt in one round than the queue to another shard holds: the news that
/// does not fit is counted on the port (`learn_unannounced`), once per shard it missed, and the
/// frames are still forwarded.
#[test]
fn learns_that_miss_another_shard_are_counted() {
    let mut sw = Sharded::new(&[0, 1, 0, 1]);
    let mut out = 0u64;
    let mut sink = |_: usize, _: &[u8], _: u64| out += 1;
    // Host 2 is on port 2 (shard 0, as port 0): the frames below stay on shard 0.
    let host2 = dataplane::tools::gen::announce(2, 0).unwrap();
    sw.shards[0].receive(2, &host2, 0);
    sw.round(0, &mut sink);
    let template = flow_frames(0, 2, 0, Ecn::NotEct, 128, 1).remove(0);
    // 300 distinct locally administered unicast sources on port 0, all in one round.
    let stations = 300u16;
    let frames: Vec<Vec<u8>> = (0..stations)
        .map(|i| {
            let mut f = template.clone();
            f[6..12].copy_from_slice(&[0x02, 0xaa, 0, 0, (i >> 8) as u8, i as u8]);
            f
        })
        .collect();
    let now = 1_000;
    for chunk in frames.chunks(32) {
        assert!(sw.shards[0].can_receive());
        sw.shards[0].receive_burst(0, chunk.iter().map(Vec::as_slice), now);
    }
    sw.round(now, &mut sink);
    let queued = dataplane::shard::OUTBOX_LEARNS as u64;
    let s0 = sw.shards[0].snapshot(now);
    assert_eq!(s0.ports[0].learn_refused, 0);
    assert_eq!(
        s0.ports[0].learn_unannounced,
        u64::from(stations) - queued,
        "one shard missed what did not fit"
    );
    assert_eq!(s0.ports[2].learn_unannounced, 0);
    // Shown in the report only where it happened.
    let json = serde_json::to_value(&s0).unwrap();
    assert!(json["ports"][2].get("learn_unannounced").is_none());
    let mut t = now;
    while !sw.settled() {
        t = sw.next_event(t).unwrap_or(t + 1).max(t + 1);
        sw.round(t, &mut sink);
    }
    assert_eq!(s0.ports[0].drops.total(), 0);
    assert_eq!(
        sw.shards[0].snapshot(t).ports[2].tx_packets,
        u64::from(stations),
        "every frame forwarded"
    );
}

/// A 64-byte broadcast from source `i` (locally administered), an EtherType the switch
/// forwards at L2: what a source-MAC flood sends.
fn broadcast(i: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[0x02, 0xbb, (i >> 24) as u8, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

/// Shard 0 (ports 0 and 1) receives a broadcast flood on port 0, which crosses to shard 1's
/// ports 2 and 3, until the link to shard 1 holds every batch it has. Returns the time.
fn flood_until_the_link_is_full(sw: &mut Sharded) -> u64 {
    let now = 1_000;
    let mut i = 0u32;
    while sw.links[0][1].in_flight() < dataplane::shard::LINK_BATCHES {
        assert!(sw.shards[0].can_receive());
        let burst: Vec<Vec<u8>> = (0..32)
            .map(|_| {
                i += 1;
                broadcast(i % 8)
            })
            .collect();
        sw.shards[0].receive_burst(0, burst.iter().map(Vec::as_slice), now);
        sw.shards[0].exchange(&sw.share);
        sw.shards[0].flush_to(1, &sw.links[0][1]);
    }
    now
}

/// Issue 41 item 6: with two workers, a flood that crosses between them delayed learning.
/// A station learnt on shard 0 (B on port 1) was announced to shard 1 in a batch behind every
/// batch of the flood's frames on the link, and shard 1, which takes 8 batches a round, went
/// on flooding the frames of C (port 2) for B to port 3 meanwhile. Now learns travel on a
/// queue of their own, taken first: after one round of shard 1, B is known there, and C's
/// frame to B leaves through B's port alone.
#[test]
fn a_learn_overtakes_the_frames_waiting_between_the_shards() {
    let mut sw = Sharded::new(&[0, 0, 1, 1]);
    let now = flood_until_the_link_is_full(&mut sw);
    // B talks to C (unknown yet: flooded), and is learnt on shard 0.
    let b_to_c = flow_frames(1, 2, 26, Ecn::Ect0, 256, 1).remove(0);
    sw.shards[0].receive(1, &b_to_c, now);
    sw.shards[0].exchange(&sw.share);
    sw.shards[0].flush_to(1, &sw.links[0][1]);
    // Shard 1's round, as a worker takes it: the learns, then at most 8 batches.
    sw.shards[1].take_learns(&sw.links[0][1]);
    for _ in 0..8 {
        let mut b = sw.links[0][1].receive().unwrap();
        sw.shards[1].take_batch(&mut b, now);
        sw.links[0][1].recycle(b);
    }
    // C answers B.
    let c_to_b = flow_frames(2, 1, 26, Ecn::Ect0, 256, 1).remove(0);
    sw.shards[1].receive(2, &c_to_b, now);
    let b = dataplane::tools::gen::host_mac(1);
    let mut to_port_3 = 0;
    let later = now + 10_000_000;
    // Everything port 3 holds (the flood's frames that crossed, and a copy of C's if flooded).
    while sw.shards[1].transmit(3, later, &mut |_: usize, f: &[u8], _: u64| {
        to_port_3 += usize::from(f[..6] == b);
    }) > 0
    {}
    assert_eq!(to_port_3, 0, "C's frame for B was flooded: shard 1 had not heard of B");
    let s = sw.shards[1].snapshot(later);
    assert_eq!(s.ports[2].crossed_out, 1, "it crossed to B's port, once");
    assert_eq!(sw.shards[0].snapshot(later).ports[1].learn_late, 0);
}

/// Issue 41 item 6: an announcement that cannot go to the other shard the round it is made
/// (its queue of learns full: that shard is behind) is counted on its port as `learn_late`,
/// once per station, and still arrives later; what does not fit in the outbox either is
/// `learn_unannounced`.
#[test]
fn a_learn_that_waits_for_the_other_shard_is_counted_late() {
    let mut sw = Sharded::new(&[0, 1, 0, 1]);
    let host2 = dataplane::tools::gen::announce(2, 0).unwrap();
    sw.shards[0].receive(2, &host2, 0);
    sw.round(0, &mut |_: usize, _: &[u8], _: u64| {});
    let template = flow_frames(0, 2, 0, Ecn::NotEct, 128, 1).remove(0);
    let station = |i: u32| {
        let mut f = template.clone();
        f[6..12].copy_from_slice(&[0x02, 0xaa, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
        f
    };
    // Rounds of 100 new stations on port 0 while shard 1 takes nothing: the queue of learns
    // (LINK_LEARNS) fills, then the outbox (OUTBOX_LEARNS).
    let (queue, outbox) = (
        dataplane::shard::LINK_LEARNS as u64,
        dataplane::shard::OUTBOX_LEARNS as u64,
    );
    let rounds = (queue + outbox) / 100 + 2;
    for r in 0..rounds as u32 {
        let frames: Vec<Vec<u8>> = (0..100).map(|k| station(r * 100 + k)).collect();
        for chunk in frames.chunks(32) {
            sw.shards[0].receive_burst(0, chunk.iter().map(Vec::as_slice), 1_000);
        }
        sw.shards[0].exchange(&sw.share);
        sw.shards[0].flush_to(1, &sw.links[0][1]);
    }
    let learnt = rounds * 100;
    let p = &sw.shards[0].snapshot(1_000).ports[0];
    assert_eq!(p.learn_refused, 0);
    assert_eq!(p.learn_unannounced, learnt - queue - outbox, "past the outbox");
    assert_eq!(p.learn_late, outbox, "every station that waited in the outbox, once");
    let json = serde_json::to_value(sw.shards[0].snapshot(1_000)).unwrap();
    assert_eq!(json["ports"][0]["learn_late"], outbox);
    assert!(json["ports"][2].get("learn_late").is_none(), "left out while 0");
    // Shard 1 catches up: what waited arrives, and is not counted again.
    sw.round(2_000, &mut |_: usize, _: &[u8], _: u64| {});
    sw.round(3_000, &mut |_: usize, _: &[u8], _: u64| {});
    assert_eq!(sw.shards[0].snapshot(3_000).ports[0].learn_late, outbox);
    assert!(sw.links[0][1].is_empty() && sw.shards[0].outboxes_empty());
}

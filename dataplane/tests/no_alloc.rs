//! The packet path allocates nothing: a counting global allocator watches receive, classify,
//! admit, enqueue, WRED marking, PFC generation, scheduling and transmit at steady state.

mod common;
use common::*;
use dataplane::tools::gen::announce;
use dataplane::Switch;
mod counting_alloc;
use counting_alloc::{ALLOCS, COUNTING};
use std::sync::atomic::Ordering;

/// The counter is global: tests take turns, so one's set-up is not counted in another's run.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn congested_pipeline_does_not_allocate() {
    congested_run(&default_config());
}

/// The same under the VL arbitration scheduler on every port: RoCE in the high table, the
/// lossy queue in the low one, a limit that hands the low table its turns.
#[test]
fn vl_arbitration_does_not_allocate() {
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    let text = text.replacen(
        "mtu = 1500 ",
        "scheduler = \"vlarb\"\nvlarb = { high = [[6, 255], [3, 16]], low = [[0, 8]], high_limit = 1 }\nmtu = 1500 ",
        1,
    );
    let cfg = controlplane::load_str(&text).expect("vlarb config").config;
    assert!(cfg.ports.iter().all(|p| p.scheduler.name() == "vlarb"));
    congested_run(&cfg);
}

fn congested_run(cfg: &controlplane::Config) {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut sw = Switch::new(cfg, 1);
    let flows: Vec<Vec<Vec<u8>>> = (0..3).map(|s| burst32(s, 3, if s == 2 { 0 } else { 26 })).collect();
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let mut tx = 0u64;
    let mut sink = |_: usize, _: &[u8], _: u64| tx += 1;
    // 3→1 at line rate for 2000 bursts: queues build, WRED marks, PFC goes out, lossy drops.
    let mut now = 1_000u64;
    // Steady state: the queues, WRED and PFC settle in the first bursts. (The size classes
    // that hold the 1 KiB frames take chunks off the packet arena as they grow, which
    // allocates nothing: `buffers::pool`.)
    for _ in 0..1000 {
        for (s, burst) in flows.iter().enumerate() {
            sw.receive_burst(s, burst.iter().map(Vec::as_slice), now);
        }
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink);
        }
        now += 32 * 336;
    }
    let before = ALLOCS.load(Ordering::SeqCst);
    // This thread only: the test harness starts other tests (and they set up) meanwhile.
    counting_alloc::mark_this_thread();
    counting_alloc::ONLY_MARKED.store(true, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..2000 {
        for (s, burst) in flows.iter().enumerate() {
            sw.receive_burst(s, burst.iter().map(Vec::as_slice), now);
        }
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink);
        }
        now += 32 * 336;
    }
    COUNTING.store(false, Ordering::SeqCst);
    counting_alloc::ONLY_MARKED.store(false, Ordering::SeqCst);
    let allocs = ALLOCS.load(Ordering::SeqCst) - before;
    let snap = sw.snapshot(now);
    assert!(
        snap.ports[0].pfc_tx[3] > 0 && snap.ports[3].ecn_marked > 0,
        "the run was congested"
    );
    assert!(tx > 0);
    assert_eq!(allocs, 0, "{allocs} allocations on the packet path");
}

/// The same incast through emulated links (`rocesw run`'s software ports): reading into the
/// peers' stores, releasing at line rate, and the PFC they obey allocate nothing either.
#[test]
fn emulated_links_do_not_allocate() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use dataplane::runtime::emulated::{play_through, EmulatedPort};
    let cfg = default_config();
    let mut sw = Switch::new(&cfg, 1);
    let mut emu: Vec<Option<EmulatedPort>> = cfg.ports.iter().map(|p| Some(EmulatedPort::new(p, &cfg.pfc))).collect();
    let flows: Vec<Vec<Vec<u8>>> = (0..3).map(|s| burst32(s, 3, 26)).collect();
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let mut now = 1_000u64;
    // A burst of 32 frames per sender per round, at the senders' line rate.
    const ROUND_NS: u64 = 32 * 336;
    let step = emu.iter().flatten().map(EmulatedPort::step_ns).min().unwrap();
    let round = |sw: &mut Switch, emu: &mut [Option<EmulatedPort>], now: u64| {
        for (s, burst) in flows.iter().enumerate() {
            let em = emu[s].as_mut().unwrap();
            for f in burst.iter().take(em.room()) {
                em.accept(f, now, sw.port_maps(s));
            }
        }
        // The round played through as the worker does (`play_through`), then the switch at
        // the round's end.
        let end = now + ROUND_NS;
        let mut to_peers = |sw: &mut Switch, emu: &mut [Option<EmulatedPort>], t: u64| {
            let mut sink = |p: usize, f: &[u8], at: u64| {
                if let Some(em) = emu[p].as_mut() {
                    em.from_switch(f, at);
                }
            };
            (0..4).map(|p| sw.transmit(p, t, &mut sink)).sum()
        };
        play_through(sw, emu, now, end, step, 0, &mut to_peers);
        sw.poll(end);
        to_peers(sw, emu, end);
        // And what the emulated NICs tell their hosts (back-pressure PFC), as the worker does.
        for em in emu.iter_mut().flatten() {
            std::hint::black_box(em.backpressure(end, end));
        }
    };
    // Warm up until the peers hold frames (their queues are reserved up front regardless).
    // (With size classes that each allocated their 64 KiB chunks, 200 rounds were not enough
    // for the 1 KiB frames' classes to reach their peak; the arena's chunks allocate nothing.)
    for _ in 0..2000 {
        round(&mut sw, &mut emu, now);
        now += ROUND_NS;
    }
    let before = ALLOCS.load(Ordering::SeqCst);
    // This thread only: the test harness starts other tests (and they set up) meanwhile.
    counting_alloc::mark_this_thread();
    counting_alloc::ONLY_MARKED.store(true, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..2000 {
        round(&mut sw, &mut emu, now);
        now += ROUND_NS;
    }
    COUNTING.store(false, Ordering::SeqCst);
    counting_alloc::ONLY_MARKED.store(false, Ordering::SeqCst);
    let allocs = ALLOCS.load(Ordering::SeqCst) - before;
    let snap = sw.snapshot(now);
    let held: u64 = emu.iter().flatten().map(|e| e.report().held_frames[3]).sum();
    assert!(
        snap.ports[0].pfc_tx[3] > 0 && held > 0,
        "PFC went out and the peers obeyed it: pfc_tx {:?}, held {held}, peers {:?}",
        snap.ports[0].pfc_tx,
        emu.iter().flatten().map(|e| e.report()).collect::<Vec<_>>()
    );
    assert_eq!(snap.totals.drops.get("headroom_overflow"), 0);
    assert_eq!(allocs, 0, "{allocs} allocations on the emulated path");
}

/// A port for the worker test below that allocates nothing: it hands out `frames` over and over
/// (up to 16 per poll; once only if not `repeat`) while `flowing`, and counts what the switch
/// sends it.
struct LoopPort {
    name: String,
    frames: Vec<Vec<u8>>,
    repeat: bool,
    next: usize,
    flowing: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl dataplane::io::PortBackend for LoopPort {
    fn recv_burst(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, dataplane::io::PortError> {
        if !self.flowing.load(Ordering::Relaxed) || (!self.repeat && self.next == self.frames.len()) {
            return Ok(0);
        }
        let n = max.min(16).min(if self.repeat {
            usize::MAX
        } else {
            self.frames.len() - self.next
        });
        for _ in 0..n {
            f(&self.frames[self.next]);
            self.next += 1;
            if self.repeat {
                self.next %= self.frames.len();
            }
        }
        Ok(n)
    }

    fn send(&mut self, _frame: &[u8]) -> Result<bool, dataplane::io::PortError> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    fn tx_room(&mut self) -> usize {
        64
    }

    fn flush(&mut self) -> Result<(), dataplane::io::PortError> {
        Ok(())
    }

    fn link_up(&mut self) -> bool {
        true
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn stats(&mut self) -> dataplane::io::PortStats {
        dataplane::io::PortStats::default()
    }
}

/// The real worker (`worker::run`) with live captures running allocates nothing: a 3→1 incast
/// through emulated and wire ports, PFC and ECN marks going out, while captures copy port 0's
/// frames both ways (its emulated link's receive path and the PFC it sends), port 1's received
/// frames (a wire port's receive path) and port 3's transmitted frames into their rings, which
/// this thread empties as the control thread would. Only the worker's thread is counted (this
/// one drains the rings and sleeps).
#[test]
fn the_worker_with_captures_running_does_not_allocate() {
    workers_with_captures_allocate_nothing(1);
}

/// The same with two workers, ports alternating between them, so frames and releases cross
/// between the shards both ways: both workers are counted (worker 1 and the control
/// coordinator are threads the switch starts, counted by their names).
#[test]
fn two_workers_with_captures_running_do_not_allocate() {
    workers_with_captures_allocate_nothing(2);
}

fn workers_with_captures_allocate_nothing(workers: usize) {
    use counting_alloc::{mark_this_thread, ONLY_MARKED};
    use dataplane::runtime::capture::CaptureRing;
    use dataplane::runtime::worker::{self, ControlQueue, ControlRequest, RunOptions};
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::sync::Arc;
    use std::time::Duration;
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut cfg = default_config();
    cfg.run.workers = workers;
    cfg.run.idle_sleep_ns = Some(20_000);
    for p in cfg.ports.iter_mut() {
        // Slow enough for three senders polled every few tens of microseconds to congest.
        p.speed_bps = 1_000_000_000;
        p.worker = p.id as usize % workers;
        p.peer = if p.id % 2 == 0 {
            controlplane::model::PeerKind::Emulated
        } else {
            controlplane::model::PeerKind::Wire
        };
    }
    let flowing = Arc::new(AtomicBool::new(false));
    let sent: Vec<Arc<AtomicU64>> = (0..4).map(|_| Arc::default()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let queue: Arc<ControlQueue> = Arc::new(crossbeam_queue::ArrayQueue::new(16));
    let (f2, s2, sent2, q2) = (flowing.clone(), stop.clone(), sent.clone(), queue.clone());
    let handle = std::thread::spawn(move || {
        mark_this_thread();
        let opts = RunOptions {
            ready: None,
            seed: 1,
            control: Some(q2),
            open: Box::new(move |p| {
                let i = p.id;
                // Hosts 0-2 send lossless frames to host 3, which announces itself once.
                let frames = if i < 3 {
                    burst32(i, 3, 26)
                } else {
                    vec![announce(3, 0).unwrap()]
                };
                Ok(Box::new(LoopPort {
                    name: format!("loop{i}"),
                    frames,
                    repeat: i < 3,
                    next: 0,
                    flowing: f2.clone(),
                    sent: sent2[i as usize].clone(),
                }) as Box<dyn dataplane::io::PortBackend + Send>)
            }),
        };
        worker::run(&cfg, opts, s2, None).expect("run")
    });
    let ask = |port: usize, rx: Option<Arc<CaptureRing>>, tx: Option<Arc<CaptureRing>>| {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        assert!(queue.push(ControlRequest::Capture { port, rx, tx, reply }).is_ok());
        answer.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    };
    let rings: Vec<Arc<CaptureRing>> = (0..3).map(|_| Arc::new(CaptureRing::new(1024, 1518))).collect();
    ask(0, Some(rings[0].clone()), Some(rings[0].clone()));
    ask(1, Some(rings[1].clone()), None);
    ask(3, None, Some(rings[2].clone()));
    let mut pfc_captured = 0u64;
    let drain = |rings: &[Arc<CaptureRing>], pfc: &mut u64| {
        for (i, r) in rings.iter().enumerate() {
            while let Some(slot) = r.pop() {
                if i == 0 && slot.bytes()[12..14] == [0x88, 0x08] {
                    *pfc += 1;
                }
                r.recycle(slot);
            }
        }
    };
    flowing.store(true, Ordering::Relaxed);
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_millis(500) {
        drain(&rings, &mut pfc_captured);
        std::thread::sleep(Duration::from_millis(1));
    }
    let before = ALLOCS.load(Ordering::SeqCst);
    let captured_before: Vec<u64> = rings.iter().map(|r| r.captured()).collect();
    let pfc_before = pfc_captured;
    ONLY_MARKED.store(true, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_millis(1500) {
        drain(&rings, &mut pfc_captured);
        std::thread::sleep(Duration::from_millis(1));
    }
    COUNTING.store(false, Ordering::SeqCst);
    ONLY_MARKED.store(false, Ordering::SeqCst);
    let allocs = ALLOCS.load(Ordering::SeqCst) - before;
    stop.store(true, Ordering::Relaxed);
    flowing.store(false, Ordering::Relaxed);
    let out = handle.join().unwrap();
    for (i, r) in rings.iter().enumerate() {
        assert!(
            r.captured() > captured_before[i],
            "capture {i} copied frames while counted"
        );
    }
    assert!(
        pfc_captured > pfc_before,
        "PFC frames sent on port 0 were captured: {pfc_before} then {pfc_captured}; pfc_tx {:?}",
        out.snapshot.ports[0].pfc_tx
    );
    assert!(
        sent[3].load(Ordering::Relaxed) > 0 && out.snapshot.ports[3].ecn_marked > 0,
        "the incast ran"
    );
    assert_eq!(
        allocs, 0,
        "{allocs} allocations on {workers} worker(s) with captures running"
    );
}

/// What the worker test relies on: with `ONLY_MARKED`, a marked thread's allocations are
/// counted and an unmarked thread's are not.
#[test]
fn only_marked_threads_are_counted_when_asked() {
    use counting_alloc::{mark_this_thread, ONLY_MARKED};
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = ALLOCS.load(Ordering::SeqCst);
    ONLY_MARKED.store(true, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    std::hint::black_box(vec![1u8; 64]);
    let unmarked = ALLOCS.load(Ordering::SeqCst) - before;
    std::thread::scope(|s| {
        s.spawn(|| {
            mark_this_thread();
            std::hint::black_box(vec![1u8; 64]);
        });
    });
    let marked = ALLOCS.load(Ordering::SeqCst) - before - unmarked;
    // A thread the switch would start (named "rocesw-…") counts as marked.
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("rocesw-w1".into())
            .spawn_scoped(s, || {
                std::hint::black_box(vec![1u8; 64]);
            })
            .unwrap();
    });
    COUNTING.store(false, Ordering::SeqCst);
    ONLY_MARKED.store(false, Ordering::SeqCst);
    let named = ALLOCS.load(Ordering::SeqCst) - before - unmarked - marked;
    assert_eq!(unmarked, 0, "an unmarked thread is not counted");
    assert!(marked >= 1, "the marked thread's allocation is counted");
    assert!(named >= 1, "a switch worker's allocation is counted");
}

/// The EDF scheduler's path allocates nothing either, in each mode: deadlines from a DSCP
/// budget and from the IPv6 flow-label tag (read at enqueue, rewritten at departure), the
/// take-over list, the heap, order errors and deadline misses counted, under the same incast.
#[test]
fn edf_scheduler_does_not_allocate() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use controlplane::{EdfConfig, EdfMode, SchedulerConfig};
    use dataplane::tools::gen::{host_ip, host_mac};
    use dataplane::wire::{roce::opcode, Ecn, RoceFrameBuilder};
    let v6 = |i: u16| {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[12..].copy_from_slice(&host_ip(i));
        a
    };
    // Host 1 sends tagged IPv6 frames whose tags alternate between lax and urgent (so the
    // take-over list and the heap work); hosts 0 and 2 IPv4 frames on DSCP 26 and 24.
    let tagged: Vec<Vec<u8>> = (0..32u32)
        .map(|i| {
            let mut b = RoceFrameBuilder::new()
                .macs(host_mac(1), host_mac(3))
                .ipv6(v6(1), v6(3))
                .dscp(26)
                .ecn(Ecn::Ect0)
                .opcode(opcode::RC_SEND_ONLY)
                .dest_qp(9)
                .psn(i);
            b.flow_label = if i % 3 == 0 { 50_000 } else { 200 + i };
            b.build_sized(1024).unwrap()
        })
        .collect();
    for mode in [EdfMode::Ideal, EdfMode::Fifo2, EdfMode::TakeOver] {
        let mut cfg = default_config();
        let mut queue_budget_ns = [None; 8];
        queue_budget_ns[3] = Some(1_000_000);
        let mut dscp_budget_ns = [None; 64];
        dscp_budget_ns[26] = Some(20_000);
        for p in &mut cfg.ports {
            p.scheduler = SchedulerConfig::Edf(Box::new(EdfConfig {
                mode,
                queue_budget_ns,
                dscp_budget_ns,
                tag_unit_ns: Some(16),
            }));
        }
        let mut sw = Switch::new(&cfg, 1);
        let flows = [burst32(0, 3, 26), tagged.clone(), burst32(2, 3, 24)];
        sw.receive(3, &announce(3, 0).unwrap(), 0);
        let mut tx = 0u64;
        let mut sink = |_: usize, _: &[u8], _: u64| tx += 1;
        let mut now = 1_000u64;
        // Steady state, as in `congested_run`.
        for _ in 0..500 {
            for (s, burst) in flows.iter().enumerate() {
                sw.receive_burst(s, burst.iter().map(Vec::as_slice), now);
            }
            sw.poll(now);
            for p in 0..4 {
                sw.transmit(p, now, &mut sink);
            }
            now += 32 * 336;
        }
        let before = ALLOCS.load(Ordering::SeqCst);
        // This thread only: the test harness starts other tests (and they set up) meanwhile.
        counting_alloc::mark_this_thread();
        counting_alloc::ONLY_MARKED.store(true, Ordering::SeqCst);
        COUNTING.store(true, Ordering::SeqCst);
        for _ in 0..500 {
            for (s, burst) in flows.iter().enumerate() {
                sw.receive_burst(s, burst.iter().map(Vec::as_slice), now);
            }
            sw.poll(now);
            for p in 0..4 {
                sw.transmit(p, now, &mut sink);
            }
            now += 32 * 336;
        }
        COUNTING.store(false, Ordering::SeqCst);
        counting_alloc::ONLY_MARKED.store(false, Ordering::SeqCst);
        let allocs = ALLOCS.load(Ordering::SeqCst) - before;
        let snap = sw.snapshot(now);
        let q = &snap.ports[3].queues[3];
        assert!(tx > 0 && q.tx_packets > 0, "{mode:?}: the regulated queue sent");
        assert!(
            q.edf_deadline_misses > 0,
            "{mode:?}: the run was congested enough to miss deadlines"
        );
        if mode != EdfMode::Ideal {
            assert!(q.edf_order_errors > 0, "{mode:?}: the tags made order errors");
        }
        assert_eq!(allocs, 0, "{mode:?}: {allocs} allocations on the packet path");
    }
}

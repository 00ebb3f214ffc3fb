//! The real-time switch: poll-mode workers, each running a shard of the switch for the ports
//! it owns (`crate::shard`, `runtime::shard`), on one monotonic clock.
//!
//! Ownership (why the shared-buffer accounting stays exact): every port belongs to one worker,
//! which does the ingress side of what the port receives and the egress side of what it sends;
//! so every counter and every PG and queue account has one writer. A frame for another worker's
//! port crosses to it in a batch, in its own buffer; its release comes back the same way. With
//! one worker (or every port on one), the switch is one shard and nothing crosses.

use crate::io::PortBackend;
use crate::io::PortError;
use crate::report::Snapshot;
use crate::runtime::capture::CaptureRing;
use crate::runtime::coordinator::Coordinator;
use crate::runtime::emulated::EmulatedPort;
use crate::runtime::shard::{count_ring_drops, fill_backends, ShardEnd, ShardWorker, Shared};
use crate::runtime::shard_port::{PeerSlot, ShardPort};
use crate::switch::Switch;
use controlplane::snapshot::PeerReport;
use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::runtime::port_io::PortIo;

/// Frames taken from a port per poll: DPDK's usual burst.
pub const BURST: usize = 32;

/// Monotonic nanoseconds since the switch started: the pipeline's clock in real mode. It
/// also remembers the wall-clock time it started at, so a capture's timestamps (taken on this
/// clock, which never jumps) can be written as wall-clock time.
#[derive(Clone, Copy)]
pub struct Clock {
    start: Instant,
    wall_start_ns: u64,
}

impl Clock {
    /// A clock reading 0 now.
    pub fn start() -> Self {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Clock {
            start: Instant::now(),
            wall_start_ns: wall,
        }
    }

    /// Nanoseconds since [`Self::start`], monotonic.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Nanoseconds since the Unix epoch at `now_ns() == 0`.
    pub fn wall_start_ns(&self) -> u64 {
        self.wall_start_ns
    }
}

/// How workers wait when a round moved nothing.
#[derive(Clone, Copy)]
pub struct Polling {
    /// How long an idle round sleeps (`[run] idle`); `None` busy-polls.
    pub idle_sleep: Option<Duration>,
    /// How long the workers keep sending after the stop before they give up on what is queued
    /// (`[run] drain_timeout`).
    pub drain_timeout: Duration,
}

impl Polling {
    /// Called by each worker thread before its loop: with an idle sleep, ask for precise
    /// wake-ups (Linux's default 50 µs timer slack would stretch a 20 µs sleep to ~70 µs, and
    /// the receive rings fill meanwhile).
    pub(crate) fn prepare_thread(&self) {
        if self.idle_sleep.is_some() {
            // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
            unsafe {
                libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
            }
        }
    }
}

/// What a run ends with.
pub struct RunOutcome {
    /// The switch's counters at the end.
    pub snapshot: Snapshot,
    /// How long the switch ran, ns.
    pub uptime_ns: u64,
    /// Frames still queued when the drain timed out (0 if everything admitted was sent).
    pub undrained: usize,
    /// Frames the backends or the cross-worker rings could not take.
    pub tx_dropped: u64,
    /// What each port's backend counted itself, by port index: notably frames the kernel
    /// dropped because the receive ring was full (the switch did not poll fast enough), which
    /// the pipeline never sees.
    pub backends: Vec<(usize, crate::io::PortStats)>,
    /// The furthest the emulated wires fell behind real time, ns: a worker that cannot keep
    /// up with them slows them rather than leave their hosts unread
    /// (`emulated::round_time`). 0 without emulated ports.
    pub wires_behind_ns: u64,
}

/// What the control plane asks of the running switch. Requests wait on a lock-free queue and
/// a worker serves them between two bursts (with several workers, the coordinator asks each), so a config change applies to whole
/// bursts and the packet path never takes a lock.
pub enum ControlRequest {
    /// Switch to this (validated) config; answered with the reason if it cannot change live.
    Apply {
        /// The config to take.
        config: Box<controlplane::Config>,
        /// Where the answer goes.
        reply: std::sync::mpsc::SyncSender<Result<(), String>>,
    },
    /// Counters and buffer state now.
    Snapshot {
        /// Where the answer goes.
        reply: std::sync::mpsc::SyncSender<Snapshot>,
    },
    /// Counters now, then every peak restarts from the current use (watermark clearing).
    SnapshotAndRestartPeaks {
        /// Where the answer goes.
        reply: std::sync::mpsc::SyncSender<Snapshot>,
    },
    /// The MAC table now.
    Fdb {
        /// Where the answer goes.
        reply: std::sync::mpsc::SyncSender<Vec<crate::ingress::fdb::FdbRow>>,
    },
    /// Start (`Some` ring) or stop (`None`) capturing a port's received and/or transmitted
    /// frames (port index). Answered with the clock's wall-clock start (what a capture's
    /// timestamps are relative to), or why not. The worker that owns the port keeps the ring
    /// until told to stop; the control thread keeps its own reference and frees it after.
    Capture {
        /// The port's index.
        port: usize,
        /// The ring for received frames, or `None` to stop capturing them.
        rx: Option<Arc<CaptureRing>>,
        /// The ring for transmitted frames, or `None` to stop capturing them.
        tx: Option<Arc<CaptureRing>>,
        /// Where the answer goes.
        reply: std::sync::mpsc::SyncSender<Result<u64, String>>,
    },
    /// Between the coordinator and the shards of a switch of several (`runtime::coordinator`):
    /// stop taking frames and send across what was taken; answered once it has crossed.
    Quiesce {
        /// Where the answer goes.
        reply: std::sync::mpsc::SyncSender<Result<(), String>>,
    },
    /// Between the coordinator and the shards: take frames again.
    Resume {
        /// Where the answer goes.
        reply: std::sync::mpsc::SyncSender<Result<(), String>>,
    },
}

/// What to tell a user who starts several workers without a core of their own each: frames
/// that cross between workers wait whenever either is descheduled. Measured (issue 39): a 3→1
/// lab incast on two workers, on a 2-core machine shared with the test hosts, had a p99
/// latency of 162 ms against 29 ms on one worker. None with one worker, or with every worker
/// pinned and fewer workers than cores.
pub fn placement_advice(workers: usize, cores: &[Option<usize>], available: usize) -> Option<String> {
    if workers < 2 {
        return None;
    }
    let unpinned = cores.iter().filter(|c| c.is_none()).count();
    if unpinned == 0 && workers < available {
        return None;
    }
    let why = if workers >= available {
        format!("{workers} workers on {available} cores")
    } else {
        format!("{unpinned} of {workers} workers not pinned ([run] cores)")
    };
    Some(format!(
        "{why}: a frame that crosses from one worker to another waits whenever either is descheduled \
         (a lab incast on two workers sharing 2 cores with its hosts: p99 latency 162 ms, against 29 ms \
         on one worker). Give each worker a core of its own with nothing else on it ([run] cores, and \
         isolcpus), or run one worker"
    ))
}

/// The queue the control thread feeds and the workers drain.
pub type ControlQueue = ArrayQueue<ControlRequest>;

/// The switch's counters with, on each port that has one, what its emulated peer held;
/// `behind_ns`: how far the shard's emulated wires are behind real time now.
pub fn snapshot(sw: &Switch, ports: &[ShardPort], now: u64, behind_ns: u64) -> Snapshot {
    let mut s = sw.snapshot(now);
    for (report, port) in s.ports.iter_mut().zip(ports) {
        if let Some(em) = port.peer() {
            report.peer = Some(PeerReport {
                behind_ns,
                ..em.report()
            });
        }
    }
    s
}

/// Called by worker 0 about once a second with a fresh snapshot of the whole switch.
pub type StatsHook<'a> = &'a mut dyn FnMut(&Snapshot, u64);

/// Pins the calling thread to `core`, logging (not failing) if the OS refuses.
pub fn pin(core: usize) {
    let ok = core_affinity::get_core_ids()
        .and_then(|ids| ids.into_iter().find(|c| c.id == core))
        .is_some_and(core_affinity::set_for_current);
    if !ok {
        tracing::warn!(core, "could not pin worker to core");
    }
}

/// Opens the backend of a port (AF_PACKET in production, in-memory ports in tests).
pub type OpenPort = Box<dyn Fn(&controlplane::PortConfig) -> Result<Box<dyn PortBackend + Send>, PortError>>;

/// Bursts a port may send in one round of its shard (while they go out full). More than one:
/// with several shards, what crossed in is owed on top of what the shard's own ports received,
/// and an egress that sends one burst a round falls behind a neighbour's receive (whose PGs then
/// fill with frames waiting here, and drop what their PFC-deaf senders send next).
pub const TX_ROUNDS: usize = 4;

/// Options of `rocesw run` beyond the config.
pub struct RunOptions {
    /// Seeds the switch's random draws (WRED).
    pub seed: u64,
    /// Opens each port's backend.
    pub open: OpenPort,
    /// Requests from the control plane (`rocectl`), served between bursts.
    pub control: Option<Arc<ControlQueue>>,
    /// Called once every port is open and the workers are about to poll: a frame that reaches
    /// a port from then on is in the port's ring for the switch to read. Before it, an
    /// AF_PACKET port's socket may not exist yet, and what its host sends is lost where nothing
    /// counts it (the interface's own counters see it arrive). `rocesw run` says "switching …"
    /// here, the line scripts wait for before they start traffic.
    pub ready: Option<Ready>,
}

/// [`RunOptions::ready`].
pub type Ready = Box<dyn FnOnce() + Send>;

/// Runs the switch until `stop` is set: opens every port, starts a worker per shard (worker 0
/// on the calling thread), drains, and returns the final counters.
pub fn run(
    cfg: &controlplane::Config,
    opts: RunOptions,
    stop: Arc<AtomicBool>,
    stats: Option<StatsHook<'_>>,
) -> anyhow::Result<RunOutcome> {
    let workers = cfg.run.workers.max(1);
    let n = cfg.ports.len();
    anyhow::ensure!(n <= 256, "{n} ports: a switch has at most 256");
    // Shards are the workers that own ports, numbered in worker order; a worker without a
    // port has nothing to do and is not started.
    let worker_of: Vec<usize> = cfg.ports.iter().map(|p| p.worker.min(workers - 1)).collect();
    let mut used: Vec<usize> = worker_of.clone();
    used.sort_unstable();
    used.dedup();
    let shards = used.len().max(1);
    let owners: Vec<u8> = worker_of
        .iter()
        .map(|w| used.iter().position(|u| u == w).unwrap_or(0) as u8)
        .collect();
    let ready = opts.ready;
    let mut ports: Vec<Vec<ShardPort>> = (0..shards)
        .map(|_| (0..n).map(|_| ShardPort::Elsewhere).collect())
        .collect();
    for (i, p) in cfg.ports.iter().enumerate() {
        let backend = (opts.open)(p).map_err(|e| {
            anyhow::anyhow!(
                "port {} ({}): {e}",
                p.id,
                p.interface.as_deref().unwrap_or(if p.pcap.is_some() {
                    "capture files"
                } else {
                    "no interface"
                })
            )
        })?;
        let io = PortIo::new(i, p.id, backend);
        // Ports whose far end is software get an emulated link in front of the switch.
        ports[owners[i] as usize][i] = match p.peer {
            controlplane::model::PeerKind::Emulated => {
                ShardPort::Emulated(io, Box::new(EmulatedPort::new(p, &cfg.pfc)))
            }
            _ => ShardPort::Direct(io),
        };
    }
    let polling = Polling {
        idle_sleep: cfg.run.idle_sleep_ns.map(Duration::from_nanos),
        drain_timeout: Duration::from_nanos(cfg.run.drain_timeout_ns),
    };
    // One clock for every worker: capture timestamps from any of them are comparable.
    let clock = Clock::start();
    let mut shared = Shared::new(shards, owners.clone());
    shared.stats_wanted = stats.is_some();
    let shard_queues: Vec<ControlQueue> = (0..shards).map(|_| ArrayQueue::new(16)).collect();
    let coordinator_done = AtomicBool::new(false);
    let mut workers_of_shards: Vec<ShardWorker<'_>> = Vec::with_capacity(shards);
    for (s, ports) in ports.into_iter().enumerate() {
        let mut sw = if shards == 1 {
            Switch::new(cfg, opts.seed)
        } else {
            Switch::shard(cfg, opts.seed, s as u8, shards as u8, &owners)
        };
        // Real time: the packet arena is faulted in now, not on the packet path.
        sw.prefault();
        let control = if shards == 1 {
            opts.control.as_deref()
        } else {
            opts.control.as_ref().map(|_| &shard_queues[s])
        };
        workers_of_shards.push(ShardWorker {
            sw,
            ports,
            clock,
            polling,
            control,
            shared: &shared,
        });
    }
    let cores: Vec<Option<usize>> = used.iter().map(|&w| cfg.run.cores.get(w).copied()).collect();
    if let Some(advice) = placement_advice(
        shards,
        &cores,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    ) {
        tracing::warn!("{advice}");
    }
    let ends: Vec<ShardEnd> = std::thread::scope(|scope| -> anyhow::Result<Vec<ShardEnd>> {
        let coordinator = match (shards > 1, opts.control.as_deref()) {
            (true, Some(public)) => {
                let c = Coordinator {
                    public,
                    shards: shard_queues.iter().collect(),
                    owners: owners.clone(),
                    port_ids: cfg.ports.iter().map(|p| p.id).collect(),
                };
                let done = &coordinator_done;
                Some(
                    std::thread::Builder::new()
                        .name("rocesw-coord".into())
                        .spawn_scoped(scope, move || c.run(done))?,
                )
            }
            _ => None,
        };
        let mut rest = workers_of_shards.drain(1..).collect::<Vec<_>>();
        let first = workers_of_shards.pop().expect("shard 0");
        let mut handles = Vec::new();
        for (k, w) in rest.drain(..).enumerate() {
            let s = k + 1;
            let stop = &*stop;
            let core = cores[s];
            handles.push(
                std::thread::Builder::new()
                    .name(format!("rocesw-w{}", used[s]))
                    .spawn_scoped(scope, move || {
                        if let Some(c) = core {
                            pin(c);
                        }
                        w.run(stop, None)
                    })?,
            );
        }
        if let Some(c) = cores[0] {
            pin(c);
        }
        if let Some(ready) = ready {
            ready();
        }
        let mut ends = vec![first.run(&stop, stats)];
        for h in handles {
            ends.push(h.join().map_err(|_| anyhow::anyhow!("a worker panicked"))?);
        }
        coordinator_done.store(true, Ordering::Release);
        if let Some(h) = coordinator {
            h.join()
                .map_err(|_| anyhow::anyhow!("the control coordinator panicked"))?;
        }
        Ok(ends)
    })?;
    Ok(finish(ends, &shared))
}

/// After every worker stopped: what was still in flight between shards (releases of frames
/// sent at the very end) is handed over directly, then the figures are merged.
fn finish(mut ends: Vec<ShardEnd>, shared: &Shared) -> RunOutcome {
    let shards = ends.len();
    let uptime_ns = ends.iter().map(|e| e.uptime_ns).max().unwrap_or(0);
    if shards > 1 {
        for from in 0..shards {
            for to in (0..shards).filter(|&t| t != from) {
                let mut left = ends[from].sw.take_outbox(to);
                ends[to].sw.take_batch(&mut left, uptime_ns);
                let link = &shared.links[from][to];
                while let Some(mut b) = link.receive() {
                    ends[to].sw.take_batch(&mut b, uptime_ns);
                    link.recycle(b);
                }
            }
        }
    }
    let mut parts = Vec::with_capacity(shards);
    let mut undrained = 0;
    let mut tx_dropped = 0;
    let mut backends = Vec::new();
    for e in ends.iter_mut() {
        count_ring_drops(&mut e.sw, &mut e.ports);
        let mut s = snapshot(&e.sw, &e.ports, uptime_ns, 0);
        fill_backends(&mut s, &mut e.ports);
        undrained += s
            .ports
            .iter()
            .flat_map(|p| &p.queues)
            .map(|q| q.depth_packets as usize)
            .sum::<usize>()
            + e.undrained_peer_frames;
        tx_dropped += e
            .ports
            .iter()
            .filter_map(ShardPort::io)
            .map(|io| io.tx_dropped)
            .sum::<u64>();
        backends.extend(
            e.ports
                .iter_mut()
                .filter_map(ShardPort::io_mut)
                .map(|io| (io.index, io.backend.stats())),
        );
        parts.push(s);
    }
    backends.sort_by_key(|(i, _)| *i);
    let snapshot = if shards == 1 {
        parts.pop().expect("one shard")
    } else {
        crate::report::merge_shards(parts, &shared.owners)
    };
    RunOutcome {
        snapshot,
        uptime_ns,
        undrained,
        tx_dropped,
        backends,
        wires_behind_ns: ends.iter().map(|e| e.wires_behind_ns).max().unwrap_or(0),
    }
}

#[cfg(test)]
mod placement_tests {
    use super::placement_advice;

    #[test]
    fn several_workers_without_cores_of_their_own_are_told() {
        assert_eq!(placement_advice(1, &[None], 2), None);
        assert_eq!(placement_advice(2, &[Some(2), Some(3)], 8), None);
        let shared = placement_advice(2, &[Some(0), Some(1)], 2).unwrap();
        assert!(shared.starts_with("2 workers on 2 cores:"), "{shared}");
        let loose = placement_advice(2, &[Some(2), None], 8).unwrap();
        assert!(loose.starts_with("1 of 2 workers not pinned"), "{loose}");
    }
}

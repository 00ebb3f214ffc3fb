//! One worker's loop: a shard of the switch (`crate::shard`) and the ports it owns, run to
//! completion in named phases each round:
//!
//! 1. **receive**: a burst from each port (or, for a port with an emulated peer, everything its
//!    ring holds into the peer's store), only while every outbox can take a burst more;
//! 2. **emulated wires**: what crossed the emulated links since the last round enters the switch;
//! 3. **cross-in**: from the other shards, their learns first, then batches (frames to queue
//!    here, releases);
//! 4. **control**: a few requests (config, snapshots, captures) between two bursts;
//! 5. **timers**: XOFF refresh and the PFC watchdog;
//! 6. **transmit**: each port sends what its line rate and its ring allow; back-pressure PFC
//!    of emulated NICs; backends flushed;
//! 7. **cross-out**: the shared pool's figures exchanged, outboxes flushed to the other shards;
//! 8. **housekeeping**: link checks, the once-a-second figures, the drain at stop.

use crate::io::PortError;
use crate::report::Snapshot;
use crate::runtime::capture::Dir;
use crate::runtime::emulated::EmulatedPort;
use crate::runtime::port_io::PortIo;
use crate::runtime::shard_port::{PeerSlot, ShardPort};
use crate::runtime::sink::PortSink;
use crate::runtime::worker::{snapshot, Clock, ControlQueue, ControlRequest, Polling, StatsHook, BURST};
use crate::shard::{Link, PoolShare, MAX_BATCHES_IN_FLIGHT};
use crate::switch::Switch;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What every shard of one run shares.
pub struct Shared {
    /// `links[from][to]`: the ring of batches from shard `from` to shard `to`.
    pub links: Vec<Vec<Arc<Link>>>,
    /// Every shard's published shared-pool use, for the dynamic thresholds.
    pub pool: PoolShare,
    /// Per shard: it has stopped receiving for good and every frame it took has crossed (set
    /// while draining). A shard may leave once all are set and its own work is done.
    pub rx_done: Vec<AtomicBool>,
    /// Per shard: its latest snapshot, published about once a second, for the figures that
    /// shard 0 reports (`--stats`).
    pub figures: Vec<Mutex<Option<Snapshot>>>,
    /// Per port index: the shard that owns it.
    pub owners: Vec<u8>,
    /// Whether anyone reads the once-a-second figures (`--stats`): building them allocates, so
    /// the shards publish them only then.
    pub stats_wanted: bool,
}

impl Shared {
    /// The links between every pair of `shards`, with `owners` giving each port index's shard.
    pub fn new(shards: usize, owners: Vec<u8>) -> Self {
        Shared {
            links: (0..shards)
                .map(|_| (0..shards).map(|_| Arc::new(Link::new())).collect())
                .collect(),
            pool: PoolShare::new(shards),
            rx_done: (0..shards).map(|_| AtomicBool::new(false)).collect(),
            figures: (0..shards).map(|_| Mutex::new(None)).collect(),
            owners,
            stats_wanted: false,
        }
    }

    /// Shards in the run.
    pub fn shards(&self) -> usize {
        self.links.len()
    }
}

/// One shard's worker: its switch, its ports, and where its control requests come from.
pub struct ShardWorker<'a> {
    /// The shard's switch, owning the ports [`Shared::owners`] gives it.
    pub sw: Switch,
    /// Per port index: whether this shard owns it, its backend, and the emulated link in
    /// front of it when its far end is software.
    pub ports: Vec<ShardPort>,
    /// The run's clock, shared by every shard.
    pub clock: Clock,
    /// How the worker waits when idle and how long it drains.
    pub polling: Polling,
    /// Where this shard's control requests arrive (the coordinator's, or the control server's with
    /// one shard).
    pub control: Option<&'a ControlQueue>,
    /// What every shard of the run shares.
    pub shared: &'a Shared,
}

/// What a shard ends with.
pub struct ShardEnd {
    /// The shard's switch, with its final counts.
    pub sw: Switch,
    /// Its ports, backends still open.
    pub ports: Vec<ShardPort>,
    /// How long the shard ran, ns.
    pub uptime_ns: u64,
    /// Frames its emulated peers still held when it left.
    pub undrained_peer_frames: usize,
    /// The furthest its emulated wires fell behind real time, ns (`emulated::round_time`).
    pub wires_behind_ns: u64,
}

/// Whether the shard takes new frames: not while a config change is being made everywhere
/// (`Quiesce` … `Resume`), not after the stop.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Intake {
    Open,
    Quiesced,
    Stopped,
}

impl ShardWorker<'_> {
    /// Runs until `stop` is set and everything this shard holds has left (or the drain timed
    /// out). `stats`: on shard 0, called about once a second with every shard's figures.
    pub fn run(mut self, stop: &AtomicBool, mut stats: Option<StatsHook<'_>>) -> ShardEnd {
        self.polling.prepare_thread();
        let me = self.sw.shard_index();
        let shards = self.shared.shards();
        let n = self.sw.num_ports();
        let mine: Vec<usize> = (0..n).filter(|&p| self.ports[p].is_mine()).collect();
        let step_ns = self
            .ports
            .iter()
            .filter_map(ShardPort::peer)
            .map(EmulatedPort::step_ns)
            .min()
            .unwrap_or(u64::MAX);
        let mut intake = Intake::Open;
        let mut quiesce_reply: Option<std::sync::mpsc::SyncSender<Result<(), String>>> = None;
        let mut drain_deadline: Option<u64> = None;
        let mut next_check = 0u64;
        let mut last_now = 0u64;
        let mut wires_behind_ns = 0u64;
        // Which port is served first this round (`receive`, `play_emulated`).
        let mut turn = 0usize;
        loop {
            turn = turn.wrapping_add(1);
            // Two clocks: `real` for what the outside world times (the drain's deadline, the
            // hosts' pauses, housekeeping), `now` for the switch and its emulated wires, which
            // may run behind real time when the worker cannot keep up with them (see
            // `emulated::round_time`).
            let real = self.clock.now_ns();
            let now = match intake {
                Intake::Quiesced => real,
                _ if step_ns == u64::MAX => real,
                _ => crate::runtime::emulated::round_time(last_now, real, step_ns, self.peers_hold_frames()),
            };
            let behind_ns = real - now;
            wires_behind_ns = wires_behind_ns.max(behind_ns);
            let mut moved = 0usize;
            if drain_deadline.is_none() && stop.load(Ordering::Relaxed) {
                drain_deadline = Some(real + self.polling.drain_timeout.as_nanos() as u64);
                intake = Intake::Stopped;
                if me == 0 {
                    tracing::info!("stopping: no longer receiving, draining the queues");
                }
            }

            // 1. receive
            if intake == Intake::Open {
                moved += self.receive(now, turn);
            }
            // 2. emulated wires (while draining too: the peers' frames were sent before the
            // stop); not while a config change waits, so nothing new crosses meanwhile (the
            // wires stand still then: the next round plays on from this one's time).
            if intake != Intake::Quiesced {
                moved += self.play_emulated(last_now, now, step_ns, &mine, turn);
            }
            last_now = now;
            // 3. cross-in
            moved += self.cross_in(now);
            // 4. control
            if let Some(q) = self.control {
                self.serve_control(q, now, behind_ns, &mut intake, &mut quiesce_reply);
            }
            if intake == Intake::Quiesced && !self.sw.frames_waiting() {
                if let Some(r) = quiesce_reply.take() {
                    let _ = r.try_send(Ok(()));
                }
            }
            // 5. timers
            self.sw.poll(now);
            // 6. transmit
            moved += self.transmit(now, real, &mine);
            // 7. cross-out
            if shards > 1 {
                self.sw.exchange(&self.shared.pool);
                for to in (0..shards).filter(|&s| s != me) {
                    moved += self.sw.flush_to(to, &self.shared.links[me][to]);
                }
            }
            // 8. housekeeping
            if real >= next_check {
                next_check = real + 1_000_000_000;
                for io in self.ports.iter_mut().filter_map(ShardPort::io_mut) {
                    io.check_link();
                }
                count_ring_drops(&mut self.sw, &mut self.ports);
                self.publish_figures(me, now, behind_ns, stats.as_mut());
            }
            if let Some(deadline) = drain_deadline {
                if self.drained(me) || real >= deadline {
                    let undrained_peer_frames = self
                        .ports
                        .iter()
                        .filter_map(ShardPort::peer)
                        .map(|em| em.link.held_frames())
                        .sum();
                    return ShardEnd {
                        sw: self.sw,
                        ports: self.ports,
                        uptime_ns: real,
                        undrained_peer_frames,
                        wires_behind_ns,
                    };
                }
            }
            // A round behind real time is not idle: the wires have time to make up.
            if moved == 0 && now == real {
                match self.polling.idle_sleep {
                    Some(d) => std::thread::sleep(d),
                    None => std::hint::spin_loop(),
                }
            }
        }
    }

    /// Whether any emulated peer of this shard holds frames (the wires have something to play).
    fn peers_hold_frames(&self) -> bool {
        self.ports.iter().filter_map(ShardPort::peer).any(|em| !em.is_empty())
    }

    /// Phase 1: a burst from each of this shard's ports, from port `turn` on (modulo), while
    /// the other shards keep up with what crosses to them
    /// ([`crate::shard::MAX_BATCHES_IN_FLIGHT`]).
    fn receive(&mut self, now: u64, turn: usize) -> usize {
        let me = self.sw.shard_index();
        let links = &self.shared.links[me];
        if links
            .iter()
            .enumerate()
            .any(|(to, l)| to != me && l.in_flight() >= MAX_BATCHES_IN_FLIGHT)
        {
            return 0;
        }
        let mut moved = 0;
        let Self { sw, ports, .. } = self;
        // From another port each round: when the outboxes have room for a burst or two only
        // (a flood crossing to a worker that is behind), the first ports took it every round
        // and a later one was not read at all, so its hosts' frames, and the learning of where
        // they are, waited behind the flood (issue 41).
        let n = ports.len();
        for k in 0..n {
            let port = &mut ports[(k + turn) % n];
            let (io, peer) = match port {
                ShardPort::Elsewhere => continue,
                ShardPort::Direct(io) => (io, None),
                ShardPort::Emulated(io, em) => (io, Some(em)),
            };
            if io.gone {
                continue;
            }
            // A burst may send every frame to another shard: only when the outboxes have room
            // for it, so nothing received is ever lost for want of a place (the frames wait in
            // the port's own ring meanwhile).
            if !sw.can_receive() {
                break;
            }
            let res = match peer {
                // Read into the emulated peer; the frames enter the switch as they cross its
                // wire (phase 2).
                Some(em) => read_into_peer(io, em, sw.port_maps(io.index), now),
                None => {
                    let mut rx = sw.burst_rx(io.index, now);
                    // One capture check per burst; a captured frame is copied as the backend
                    // handed it over, before the switch parses it.
                    match io.rx_tap.as_deref() {
                        // A backend that lends a burst as arrays (DPDK) does; the others hand
                        // `RxFrame`s.
                        None => {
                            let lent = io.backend.recv_lent(BURST, &mut |burst| rx.receive_lent(burst));
                            match lent {
                                Some(res) => res,
                                None => io.backend.recv_frames(BURST, &mut |frames| rx.receive_frames(frames)),
                            }
                        }
                        Some(tap) => io.backend.recv_frames(BURST, &mut |frames| {
                            for frame in frames {
                                tap.record(Dir::Rx, now, frame.bytes());
                                rx.receive_frame(frame)
                            }
                        }),
                    }
                }
            };
            match res {
                Ok(k) => moved += k,
                Err(e) => io.fail(e),
            }
        }
        moved
    }

    /// Phase 2: the emulated wires up to `now`, transmitting as they go, port `turn` first.
    fn play_emulated(&mut self, from: u64, now: u64, step_ns: u64, mine: &[usize], turn: usize) -> usize {
        if step_ns == u64::MAX || !self.sw.can_receive() {
            return 0;
        }
        let Self { sw, ports, shared, .. } = self;
        let me = sw.shard_index();
        crate::runtime::emulated::play_through(sw, ports, from, now, step_ns, turn, |sw, ports, t| {
            if shared.shards() > 1 {
                let incoming = shared.links.iter().enumerate().filter(|&(s, _)| s != me);
                sw.trade_learns(shared.links[me].iter().map(|l| &**l), incoming.map(|(_, l)| &*l[me]));
            }
            transmit_ports(sw, ports, mine, t)
        })
    }

    /// Phase 3: what the other shards sent.
    fn cross_in(&mut self, now: u64) -> usize {
        let me = self.sw.shard_index();
        let mut moved = 0;
        for from in 0..self.shared.shards() {
            if from == me {
                continue;
            }
            let link = &self.shared.links[from][me];
            // Every learn first, whatever frames wait: a station is known here the round its
            // news arrives, not after the batches ahead of it (a flood's).
            moved += self.sw.take_learns(link);
            // A bounded number of batches per round, so one busy neighbour cannot starve the
            // ports.
            for _ in 0..8 {
                let Some(mut b) = link.receive() else { break };
                moved += b.frames.len() + b.releases.len();
                self.sw.take_batch(&mut b, now);
                link.recycle(b);
            }
        }
        moved
    }

    /// Phase 6: every port of this shard sends what it may, at the switch's time `now`; the
    /// emulated peers' hosts get their back-pressure on real time (`real`).
    fn transmit(&mut self, now: u64, real: u64, mine: &[usize]) -> usize {
        let moved = transmit_ports(&mut self.sw, &mut self.ports, mine, now);
        let mut sink = PortSink::new(&mut self.ports);
        for &port in mine {
            if let Some((frame, len)) = sink.ports[port].peer_mut().and_then(|em| em.backpressure(real, now)) {
                sink.send_to_host(port, &frame[..len], now);
            }
        }
        // Everything gathered was handed over at the end of each port's turn.
        drop(sink);
        flush_ports(&mut self.ports);
        moved
    }

    /// Whether this shard may leave the drain: it and every other shard have stopped taking
    /// frames (so no frame will cross here any more), and nothing waits here to be sent.
    fn drained(&mut self, me: usize) -> bool {
        let peers_empty = self
            .ports
            .iter()
            .filter_map(ShardPort::peer)
            .all(EmulatedPort::is_empty);
        if peers_empty && !self.sw.frames_waiting() {
            self.shared.rx_done[me].store(true, Ordering::Release);
        }
        let all_done = self.shared.rx_done.iter().all(|d| d.load(Ordering::Acquire));
        let inbound_empty = (0..self.shared.shards()).all(|from| from == me || self.shared.links[from][me].is_empty());
        all_done && inbound_empty && self.sw.is_idle() && peers_empty
    }

    /// About once a second: this shard's figures for the others to read; on shard 0, the
    /// stats hook with every shard's latest.
    fn publish_figures(&mut self, me: usize, now: u64, behind_ns: u64, stats: Option<&mut StatsHook<'_>>) {
        let shards = self.shared.shards();
        if shards == 1 {
            if let Some(hook) = stats {
                hook(&snapshot(&self.sw, &self.ports, now, behind_ns), now);
            }
            return;
        }
        if !self.shared.stats_wanted {
            return;
        }
        let s = snapshot(&self.sw, &self.ports, now, behind_ns);
        *self.shared.figures[me].lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
        if let Some(hook) = stats {
            let parts: Vec<Snapshot> = self
                .shared
                .figures
                .iter()
                .filter_map(|f| f.lock().unwrap_or_else(|e| e.into_inner()).clone())
                .collect();
            if parts.len() == shards {
                hook(&crate::report::merge_shards(parts, &self.shared.owners), now);
            }
        }
    }

    /// Phase 4: a few control requests. With several shards they come from the coordinator
    /// (`runtime::coordinator`), which also asks every shard to stop taking frames before a
    /// config change and to take them again after, so no frame is classified under one config
    /// and queued under another.
    fn serve_control(
        &mut self,
        q: &ControlQueue,
        now: u64,
        behind_ns: u64,
        intake: &mut Intake,
        quiesce_reply: &mut Option<std::sync::mpsc::SyncSender<Result<(), String>>>,
    ) {
        // A few per round: control traffic is rare, the packet path is not.
        for _ in 0..4 {
            let Some(req) = q.pop() else { return };
            match req {
                ControlRequest::Apply { config, reply } => {
                    // Whatever crossed under the old config is queued under it first.
                    if self.shared.shards() > 1 {
                        while self.cross_in(now) > 0 {}
                    }
                    let r = self.sw.reconfigure(&config);
                    if self.sw.shard_index() == 0 {
                        match &r {
                            Ok(()) => tracing::info!("config applied"),
                            Err(e) => tracing::warn!("config refused: {e}"),
                        }
                    }
                    let _ = reply.try_send(r);
                }
                ControlRequest::Snapshot { reply } => {
                    count_ring_drops(&mut self.sw, &mut self.ports);
                    let mut s = snapshot(&self.sw, &self.ports, now, behind_ns);
                    fill_backends(&mut s, &mut self.ports);
                    let _ = reply.try_send(s);
                }
                ControlRequest::SnapshotAndRestartPeaks { reply } => {
                    let s = snapshot(&self.sw, &self.ports, now, behind_ns);
                    self.sw.restart_peaks();
                    let _ = reply.try_send(s);
                }
                ControlRequest::Fdb { reply } => {
                    let _ = reply.try_send(self.sw.fdb().rows(now));
                }
                ControlRequest::Capture { port, rx, tx, reply } => {
                    let r = match self.ports.get_mut(port).and_then(ShardPort::io_mut) {
                        Some(io) => {
                            io.rx_tap = rx;
                            io.tx_tap = tx;
                            Ok(self.clock.wall_start_ns())
                        }
                        None => Err(format!("port index {port} has no backend in this run")),
                    };
                    let _ = reply.try_send(r);
                }
                ControlRequest::Quiesce { reply } => {
                    if *intake == Intake::Open {
                        *intake = Intake::Quiesced;
                    }
                    *quiesce_reply = Some(reply);
                }
                ControlRequest::Resume { reply } => {
                    if *intake == Intake::Quiesced {
                        *intake = Intake::Open;
                    }
                    let _ = reply.try_send(Ok(()));
                }
            }
        }
    }
}

/// Counts what each of `ports`' receive rings lost since the last look as `rx_ring` drops of
/// `sw` (the shard owning them): about once a second, at every snapshot and at the end.
pub fn count_ring_drops(sw: &mut Switch, ports: &mut [ShardPort]) {
    for port in ports.iter_mut() {
        let overrun = port.peer_mut().map_or(0, EmulatedPort::take_overrun);
        let Some(io) = port.io_mut() else { continue };
        let lost = io.take_ring_drops() + overrun;
        if lost > 0 {
            sw.count_rx_ring_drops(io.index, lost);
        }
    }
}

/// Every port of the shard sends what the switch allows at `now`, and each backend is offered
/// what it was given. With other shards a port may owe more than it received this round (what
/// crossed in): up to TX_ROUNDS bursts, each flushed, while bursts go out full.
///
/// Both the round's transmit phase and each step of a late round (`emulated::play_through`)
/// come here, so a step flushes too: a backend that only stages frames until `flush` (DPDK's
/// transmit burst) has room again in the next step. Without it a late round sent one burst in
/// its first step and nothing after, PFC frames included, so the queues filled while the
/// emulated peers, never shown the XOFF, went on sending into the headroom.
fn transmit_ports(sw: &mut Switch, ports: &mut [ShardPort], mine: &[usize], now: u64) -> usize {
    let mut moved = 0;
    let mut sink = PortSink::new(ports);
    for &port in mine {
        for _ in 0..crate::runtime::worker::TX_ROUNDS {
            let n = sink.transmit_port(sw, port, now);
            moved += n;
            if let Some(io) = sink.ports[port].io_mut().filter(|io| !io.gone) {
                if let Err(e) = io.backend.flush() {
                    io.fail(e);
                }
            }
            if n < crate::egress::TX_BURST {
                break;
            }
        }
    }
    moved
}

/// Offers every backend of the shard what it holds (what the emulated NICs sent their hosts
/// after the ports' turns).
fn flush_ports(ports: &mut [ShardPort]) {
    for io in ports.iter_mut().filter_map(ShardPort::io_mut) {
        if !io.gone {
            if let Err(e) = io.backend.flush() {
                io.fail(e);
            }
        }
    }
}

/// Puts each of this shard's ports' backend counters in `snap`.
pub fn fill_backends(snap: &mut Snapshot, ports: &mut [ShardPort]) {
    for (i, p) in snap.ports.iter_mut().enumerate() {
        if let Some(io) = ports.get_mut(i).and_then(ShardPort::io_mut) {
            p.backend = Some(io.report());
        }
    }
}

/// Reads an emulated port's receive ring into its peer's store: everything the ring holds, as
/// far as the store has room, not one burst per round. Reading is only a copy (the frames enter
/// the switch as they cross the emulated wire), and a round can come milliseconds after the
/// last on a busy machine (the gap it plays through costs time): one burst per round drained
/// 32 frames per port per ~3 ms round on a loaded 2-core lab, far below a 300 Mb/s host, and
/// the kernel's ring overflowed (`rx_kernel_drops`) while the store sat nearly empty.
///
/// Only whole bursts: a DPDK driver hands over what its burst holds, however few were asked
/// for, and what found no room in the store would be lost. With fewer than a burst of room
/// the port waits (a stalled read) until the wire has taken more.
fn read_into_peer(
    io: &mut PortIo,
    em: &mut EmulatedPort,
    maps: &crate::ingress::classify::PortMaps,
    now: u64,
) -> Result<usize, PortError> {
    let mut total = 0;
    loop {
        let room = BURST;
        if em.room() < room {
            em.link.counters.stalled_reads += 1;
            return Ok(total);
        }
        let k = match io.rx_tap.as_deref() {
            None => io.backend.recv_burst(room, &mut |frame| em.accept(frame, now, maps))?,
            Some(tap) => io.backend.recv_burst(room, &mut |frame| {
                tap.record(Dir::Rx, now, frame);
                em.accept(frame, now, maps)
            })?,
        };
        total += k;
        if k < room {
            return Ok(total);
        }
    }
}

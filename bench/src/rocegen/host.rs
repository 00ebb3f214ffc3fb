//! One host, one thread, one socket: the NIC loop. Receives (data → receiver, CNP → the
//! sender's DCQCN, PFC/PAUSE → the sender's pause state), sends what is due, and sleeps
//! briefly only when nothing arrived and nothing is due.

use super::receiver::{ipv4_addrs, Receiver};
use super::sender::{Dest, PauseRx, Sender, TrafficConfig};
use super::wire::{enter_netns, gratuitous_arp, now_ns, set_timer_slack_1us, sleep_ns, RawSocket};
use anyhow::{Context, Result};
use dataplane::wire::{decode_mac_control, parse};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

/// What a coordinated run's hosts share so that receivers stop once the network has drained:
/// frames still queued or paused somewhere when the senders stop (a loaded machine holds them
/// for hundreds of ms) arrive, instead of being reported as sent and never received. Receivers
/// keep listening after the senders stop until every frame sent has arrived or been seen lost
/// (a later PSN of its flow arrived), or the run's bound, whichever comes first.
pub struct Drain {
    /// Senders that have not yet stopped and published their count.
    senders_left: AtomicUsize,
    /// Data frames the stopped senders sent.
    sent: AtomicU64,
    /// Per host: frames its receiver has accounted for (received once, or seen lost).
    accounted: Vec<AtomicU64>,
    /// Set by the first host that sees every frame accounted for.
    done: AtomicBool,
    /// When the last sender published its count, CLOCK_MONOTONIC ns (0: not yet).
    last_sender_stop_ns: AtomicU64,
}

impl Drain {
    /// For `hosts` hosts of which `senders` send.
    pub fn new(hosts: usize, senders: usize) -> Arc<Drain> {
        Arc::new(Drain {
            senders_left: AtomicUsize::new(senders),
            sent: AtomicU64::new(0),
            accounted: (0..hosts).map(|_| AtomicU64::new(0)).collect(),
            done: AtomicBool::new(false),
            last_sender_stop_ns: AtomicU64::new(0),
        })
    }

    /// A sender stopped, having sent `frames` data frames.
    fn sender_stopped(&self, frames: u64, now: u64) {
        self.sent.fetch_add(frames, Ordering::AcqRel);
        if self.senders_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.last_sender_stop_ns.store(now.max(1), Ordering::Release);
        }
    }

    /// Whether every frame sent is accounted for (and remembers it once it is).
    fn drained(&self) -> bool {
        if self.done.load(Ordering::Acquire) {
            return true;
        }
        if self.senders_left.load(Ordering::Acquire) != 0 {
            return false;
        }
        let accounted: u64 = self.accounted.iter().map(|a| a.load(Ordering::Acquire)).sum();
        let done = accounted >= self.sent.load(Ordering::Acquire);
        if done {
            self.done.store(true, Ordering::Release);
        }
        done
    }

    /// Whether the run drained before its bound.
    pub fn completed(&self) -> bool {
        self.drained()
    }

    /// When the last sender stopped, CLOCK_MONOTONIC ns, if they all have.
    pub fn senders_stopped_ns(&self) -> Option<u64> {
        match self.last_sender_stop_ns.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }

    /// Frames sent and neither received nor seen lost, as the hosts last said.
    pub fn unaccounted(&self) -> u64 {
        let accounted: u64 = self.accounted.iter().map(|a| a.load(Ordering::Acquire)).sum();
        self.sent.load(Ordering::Acquire).saturating_sub(accounted)
    }
}

/// A host's part in a [`Drain`]: the shared state and its own slot.
pub struct DrainSlot {
    /// The run's shared state.
    pub drain: Arc<Drain>,
    /// This host's index in it.
    pub host: usize,
}

impl DrainSlot {
    /// Says how many of the frames sent to this host are accounted for: received (less
    /// duplicates) or seen lost (PSN gaps).
    fn publish_accounted(&self, receiver: Option<&Receiver>) {
        if let Some(r) = receiver {
            let accounted: u64 = r
                .flows
                .iter()
                .map(|f| (f.packets.saturating_sub(f.psn.duplicates)).saturating_add(f.psn.lost))
                .sum();
            self.drain.accounted[self.host].store(accounted, Ordering::Release);
        }
    }
}

/// The frames a host's sender has sent (none without one).
fn packets_sent(sender: Option<&Sender>) -> u64 {
    sender.map_or(0, |s| s.qps.iter().map(|q| q.stats.packets).sum())
}

/// Where a host is and how to address it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// A label for reports (the namespace, or the interface).
    pub name: String,
    /// Network namespace (`/var/run/netns/<netns>`) to enter; `None`: the current one.
    pub netns: Option<String>,
    /// Interface to send and receive on (an AF_PACKET socket bound to it).
    pub iface: String,
    /// `None`: read from the interface.
    pub mac: Option<[u8; 6]>,
    /// The host's IPv4 address: source of its frames, and what CNPs come back to.
    pub ip: [u8; 4],
}

/// What a host does in a run.
#[derive(Debug, Clone, Default)]
pub struct HostRole {
    /// Send to these destinations (empty: no sender).
    pub dests: Vec<Dest>,
    /// Run a receiver.
    pub receive: bool,
}

/// Frames the host loop saw, by kind.
#[derive(Debug, Clone, Default)]
pub struct RxCounters {
    /// Frames received, all kinds.
    pub frames: u64,
    /// RoCEv2 data frames (CNPs not included).
    pub roce_data: u64,
    /// CNPs received (handed to the sender's DCQCN).
    pub cnps_received: u64,
    /// MAC control frames received (PFC, PAUSE).
    pub mac_control: u64,
    /// Frames that did not parse, or MAC control frames that did not decode.
    pub malformed: u64,
    /// Anything else (ARP, IPv6 neighbour discovery, ...).
    pub other: u64,
    /// Frames a host without a receiver got (RoCEv2 data to a sender-only host).
    pub ignored_roce: u64,
    /// Frames the kernel dropped because this host did not read its socket in time: lost at
    /// the host, not in the network.
    pub socket_drops: u64,
}

/// Everything a host measured.
pub struct HostResult {
    /// The host it ran as.
    pub spec: HostSpec,
    /// Its MAC as used (given, or read from the interface).
    pub mac: [u8; 6],
    /// The sender's QPs and counters, if it sent.
    pub sender: Option<Sender>,
    /// The receiver's flows, if it received.
    pub receiver: Option<Receiver>,
    /// The PFC it received and the time it spent paused.
    pub pause: PauseRx,
    /// Frames received, by kind.
    pub rx: RxCounters,
    /// When sending started, CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// When sending stopped (start plus the duration), CLOCK_MONOTONIC ns.
    pub tx_stop_ns: u64,
    /// When the host loop ended, after the drain, CLOCK_MONOTONIC ns.
    pub end_ns: u64,
}

/// How a host thread learns its start time.
pub enum Start {
    /// Start now; senders stop after the configured duration, the loop `drain_ns` later.
    Now {
        /// How long the loop keeps receiving after the senders stop, ns.
        drain_ns: u64,
    },
    /// Report readiness on `ready`, then wait for (start, stop) on `go`.
    Sync {
        /// Where to report that setup succeeded (or why it failed).
        ready: mpsc::Sender<std::result::Result<(), String>>,
        /// Where the start and stop times (CLOCK_MONOTONIC ns) come from; the stop is the
        /// latest end, sooner when `drain` says every frame sent is accounted for.
        go: mpsc::Receiver<(u64, u64)>,
        /// The run's shared drain state, if the loop may end as soon as the network drained.
        drain: Option<DrainSlot>,
    },
}

/// How often a host looks at the drain state once its senders stopped.
const DRAIN_CHECK_NS: u64 = 1_000_000;

/// Runs one host to the end of its run (enters its namespace first if it has one: call
/// from a thread of its own then).
pub fn run_host(spec: HostSpec, role: HostRole, cfg: TrafficConfig, start: Start) -> Result<HostResult> {
    let setup = || -> Result<(RawSocket, [u8; 6], Option<Sender>)> {
        if let Some(ns) = &spec.netns {
            enter_netns(ns)?;
        }
        let sock = RawSocket::open(&spec.iface)?;
        let mac = match spec.mac {
            Some(m) => m,
            None => sock.mac()?,
        };
        let sender = if role.dests.is_empty() {
            None
        } else {
            Some(Sender::new(cfg.clone(), mac, spec.ip, &role.dests)?)
        };
        Ok((sock, mac, sender))
    };
    let ctx = || format!("host {} ({})", spec.name, spec.iface);
    let (sock, mac, mut sender, start_ns, end_ns, drain) = match start {
        Start::Now { drain_ns } => {
            let (s, m, snd) = setup().with_context(ctx)?;
            let t = now_ns();
            (s, m, snd, t, t + cfg.duration_ns + drain_ns, None)
        }
        Start::Sync { ready, go, drain } => {
            let r = setup().with_context(ctx);
            let _ = ready.send(r.as_ref().map(|_| ()).map_err(|e| format!("{e:#}")));
            let (s, m, snd) = r?;
            let (t0, t1) = go.recv().context("the coordinator went away")?;
            (s, m, snd, t0, t1, drain)
        }
    };
    // Announce this host before any traffic (see `gratuitous_arp`): the coordinator's start
    // is 20 ms ahead, time for the switch to learn every host. An announcement the kernel has
    // no room for is not retried: the switch then learns the host from its first frame.
    let _ = sock.send(&gratuitous_arp(mac, spec.ip));
    // Drops before the run (frames of earlier runs) are not this run's.
    let _ = sock.take_drops();
    let tx_stop_ns = start_ns + cfg.duration_ns;
    set_timer_slack_1us();
    let mut receiver = role
        .receive
        .then(|| Receiver::new(cfg.dcqcn.then_some(cfg.cnp_interval_ns)));
    let mut pause = PauseRx::default();
    let mut rx = RxCounters::default();
    if let Some(s) = &mut sender {
        s.start(start_ns);
    }
    let mut buf = vec![0u8; 16384];
    let mut sender_stopped = sender.is_none();
    let mut next_drain_check = tx_stop_ns;
    loop {
        let now = now_ns();
        if now >= end_ns {
            break;
        }
        if let Some(d) = &drain {
            if now >= tx_stop_ns {
                if !sender_stopped {
                    // Its last poll was before tx_stop_ns: the count is final.
                    sender_stopped = true;
                    d.drain.sender_stopped(packets_sent(sender.as_ref()), now);
                }
                if now >= next_drain_check {
                    next_drain_check = now + DRAIN_CHECK_NS;
                    d.publish_accounted(receiver.as_ref());
                    if d.drain.drained() {
                        break;
                    }
                }
            }
        }
        let mut busy = false;
        for _ in 0..64 {
            let Some(n) = sock
                .recv(&mut buf)
                .with_context(|| format!("receive on {}", spec.iface))?
            else {
                break;
            };
            busy = true;
            let t = now_ns();
            let frame = &buf[..n];
            rx.frames += 1;
            let info = match parse(frame, usize::MAX) {
                Ok(i) => i,
                Err(_) => {
                    rx.malformed += 1;
                    continue;
                }
            };
            if info.is_mac_control() {
                rx.mac_control += 1;
                match decode_mac_control(frame) {
                    Ok(mc) => {
                        if cfg.pfc {
                            pause.on_mac_control(mc, t, cfg.link_bps);
                        } else {
                            match mc {
                                dataplane::wire::MacControl::Pfc { .. } => pause.pfc_frames += 1,
                                dataplane::wire::MacControl::Pause { .. } => pause.pause_frames += 1,
                                _ => {}
                            }
                        }
                    }
                    Err(_) => rx.malformed += 1,
                }
            } else if info.is_cnp() {
                rx.cnps_received += 1;
                if let (Some(s), Some((src, _))) = (&mut sender, ipv4_addrs(frame, &info)) {
                    s.on_cnp(src, info.bth(frame).map_or(0, |b| b.dest_qp()), t);
                }
            } else if info.is_roce() {
                rx.roce_data += 1;
                match &mut receiver {
                    Some(r) => {
                        if let Some(cnp) = r.on_roce(frame, &info, t) {
                            if !matches!(sock.send(cnp), Ok(true)) {
                                r.cnp_send_failures += 1;
                            }
                        }
                    }
                    None => rx.ignored_roce += 1,
                }
            } else {
                rx.other += 1;
            }
        }
        let mut next_due = end_ns;
        if let Some(s) = &mut sender {
            let now = now_ns();
            if now < start_ns {
                next_due = next_due.min(start_ns);
            } else if now < tx_stop_ns {
                let iface = sock.iface();
                let nd = s
                    .poll(&mut pause, now, 32, now_ns, |f| sock.send(f))
                    .with_context(|| format!("send on {iface}"))?;
                next_due = next_due.min(nd).min(tx_stop_ns);
            }
        }
        if drain.is_some() && now_ns() >= tx_stop_ns {
            next_due = next_due.min(next_drain_check);
        }
        if !busy {
            let now = now_ns();
            if next_due > now + 2_000 {
                sleep_ns((next_due - now - 1_000).min(50_000));
            }
        }
    }
    if let Some(d) = &drain {
        // A host whose loop ended at the bound before its senders' stop was seen (a run
        // shorter than one loop) still says what it sent.
        if !sender_stopped {
            d.drain.sender_stopped(packets_sent(sender.as_ref()), now_ns());
        }
        d.publish_accounted(receiver.as_ref());
    }
    let end = now_ns();
    rx.socket_drops = sock.take_drops().unwrap_or(0);
    pause.finish(end);
    if let Some(s) = &mut sender {
        s.finish(end);
    }
    Ok(HostResult {
        spec,
        mac,
        sender,
        receiver,
        pause,
        rx,
        start_ns,
        tx_stop_ns,
        end_ns: end,
    })
}

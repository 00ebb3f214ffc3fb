//! `rocesw fabric`: several switches, hosts with the NIC model and the links between them, in
//! one virtual clock.
//!
//! * Each switch is the real [`Switch`] with its own config, driven as replay drives one:
//!   `receive` when a frame's last bit arrives, `poll` and `transmit` when it is woken, woken
//!   again at its `next_event`.
//! * Each host is the NIC model of [`crate::nic`] (rocegen's, shared): one [`Sender`] per flow
//!   (RC segmentation, pacing, DCQCN reaction point, PFC honouring) and one [`Receiver`]
//!   (latency, CE marks, the notification point's CNPs). Its port sends one frame at a time
//!   at line rate, CNPs before data.
//! * A link delivers a frame to its far end after serialisation and the cable's delay
//!   (5 ns/m): store and forward.
//!
//! **Routing.** The switch is an L2 switch (FDB by destination MAC). A leaf-spine is routed
//! (L3, ECMP), so the fabric does what a router's lookup does before the switch's queues see a
//! frame: on arrival at a switch it picks the egress port from the route to the destination
//! host (shortest paths, or the topology's `[[route]]`s; ECMP by a hash of the 5-tuple, seeded
//! per switch) and rewrites the destination MAC to that port's next-hop MAC
//! ([`topology::port_mac`]), for which the fabric adds a static FDB entry to the switch's
//! config (learning off). Everything after the lookup, classification, the MMU, PFC, ECN,
//! scheduling, is the switch's own. PFC frames are link-local and reach the switch untouched.
//!
//! One event queue ordered by (time, sequence): the same topology, configs and seed give the
//! same bytes out.

pub mod fct;
pub mod progress;
pub mod topology;

use crate::nic::histogram::Histogram;
use crate::nic::pause::PauseRx;
use crate::nic::receiver::{ipv4_addrs, Receiver};
use crate::nic::sender::{Dest, Sender, TrafficConfig};
use crate::nic::Op;
use crate::replay::PcapOutput;
use crate::report::Snapshot;
use crate::switch::{ser_ps, Switch};
use crate::wire::{decode_mac_control, parse};
use anyhow::{Context, Result};
use controlplane::{Config, StaticMac};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::path::{Path, PathBuf};
use topology::{End, FlowSize, Topology};

/// What to run, beyond the topology.
#[derive(Debug, Clone, Default)]
pub struct FabricOptions {
    /// Seeds the ECMP hashes and each switch's random draws (WRED): same seed, same bytes out.
    pub seed: u64,
    /// Overrides the topology's duration.
    pub duration_ns: Option<u64>,
    /// Overrides the topology's `nic.dcqcn`.
    pub dcqcn: Option<bool>,
    /// `Some(false)`: every switch runs without its PFC watchdog, whatever its config says
    /// (a deadlock with and without it, from one topology).
    pub watchdog: Option<bool>,
    /// Links (by name, `a-b` as the topology writes the ends) to capture, and where.
    pub pcaps: Vec<(String, PathBuf)>,
    /// Called now and then with (virtual ns done, virtual ns total).
    pub progress: Option<fn(u64, u64)>,
    /// Record a timeline (`--timeline`): [`FabricOutcome::timeline`]. Off, the loop only tests
    /// this once per instant and per switch step.
    pub timeline: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Switch(usize),
    Host(usize),
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A frame's last bit reaches `node`'s port (switch port index; 0 for a host).
    Deliver { node: Node, port: usize, frame: Vec<u8> },
    /// Time to look at `node` again (stale if `gen` is not its latest).
    Wake { node: Node, gen: u64 },
}

/// Per link direction (a → b is 0, b → a is 1).
#[derive(Debug, Clone, Default, Serialize)]
pub struct LinkDir {
    /// Frames sent this way, PFC included.
    pub frames: u64,
    /// Bytes of those frames, FCS, preamble and gap not counted.
    pub bytes: u64,
    /// PFC (and 802.3x PAUSE) frames sent this way.
    pub pfc_frames: u64,
    /// Time this direction's traffic was paused (its sender obeying PFC the other end sent:
    /// the opposite direction's `pfc_frames`), per priority.
    pub paused_ns: [u64; 8],
    /// When each of those PFC frames started (`rocesw tune` counts them per time window);
    /// not in summary.json.
    #[serde(skip)]
    pub pfc_at_ns: Vec<u64>,
}

/// One link of the topology and what crossed it each way (summary.json's `links`).
#[derive(Debug, Clone, Serialize)]
pub struct LinkReport {
    /// `a-b`, the ends as the topology names them (the name `--pcap` takes).
    pub name: String,
    /// Line rate in bits per second.
    pub speed_bps: u64,
    /// Cable length in metres (5 ns/m of propagation delay).
    pub cable_m: f64,
    /// a → b.
    pub forward: LinkDir,
    /// b → a.
    pub reverse: LinkDir,
}

/// One flow's outcome as its sender and receiver saw it (summary.json's `flows`).
#[derive(Debug, Clone, Serialize)]
pub struct FlowReport {
    /// Index in the topology's flow list.
    pub id: usize,
    /// The `[[traffic]]` pattern this flow came from.
    pub pattern: String,
    /// Sending host's name.
    pub src: String,
    /// Receiving host's name.
    pub dst: String,
    /// Bytes of the one message; `None`: a long flow (sends until the end).
    pub size: Option<u64>,
    /// Virtual time the first packet may leave, in ns.
    pub start_ns: u64,
    /// RoCE data packets the sender put on its port.
    pub packets_sent: u64,
    /// Data packets that reached the receiver.
    pub packets_received: u64,
    /// PSNs that never arrived (0 on a lossless path).
    pub lost: u64,
    /// Payload bytes delivered.
    pub delivered_bytes: u64,
    /// Payload bits per second from the flow's start to its last arrival.
    pub goodput_bps: f64,
    /// Start to the last packet's arrival, if every packet arrived.
    pub fct_ns: Option<u64>,
    /// When the last packet arrived (0: none did). Goodput is measured up to here, so a flow
    /// that stopped (a deadlock) shows it here, well before the end of the run.
    pub last_arrival_ns: u64,
    /// One-way latency median (NIC to NIC, ns); the other percentiles likewise.
    pub latency_p50_ns: u64,
    /// One-way latency, 90th percentile, ns.
    pub latency_p90_ns: u64,
    /// One-way latency, 99th percentile, ns.
    pub latency_p99_ns: u64,
    /// Worst one-way latency, ns.
    pub latency_max_ns: u64,
    /// Packets that arrived with ECN CE set.
    pub ce_marked: u64,
    /// CNPs the receiver (notification point) sent back for those marks.
    pub cnps_sent: u64,
    /// CNPs the sender's DCQCN reaction point received.
    pub cnps_received: u64,
    /// The DCQCN rate at the end (bits per second), if on.
    pub final_rate_bps: Option<f64>,
    /// Every packet's one-way latency (`rocesw tune` merges them per pattern); not in
    /// summary.json.
    #[serde(skip)]
    pub latency: Histogram,
}

/// One host's NIC as seen from its port (summary.json's `hosts`).
#[derive(Debug, Clone, Serialize)]
pub struct HostReport {
    /// The host's name in the topology.
    pub name: String,
    /// Its MAC, colon-separated hex.
    pub mac: String,
    /// Its IPv4 address, dotted text.
    pub ip: String,
    /// PFC and PAUSE frames that reached this host (honoured only when the NIC's PFC is on).
    pub pfc_frames_received: u64,
    /// Time the host's port was paused, per priority, ns.
    pub paused_ns: [u64; 8],
}

/// Everything one `rocesw fabric` run measured: the body of summary.json and of [`human_report`].
#[derive(Debug, Clone, Serialize)]
pub struct FabricOutcome {
    /// The seed the run used (with the topology and configs, it reproduces the run).
    pub seed: u64,
    /// Virtual time run (the topology's duration, or less if everything finished first).
    pub duration_ns: u64,
    /// Events taken off the event queue (deliveries and wake-ups): the simulation's work.
    pub events: u64,
    /// Whether the NICs ran DCQCN (the topology's `nic.dcqcn`, or its override).
    pub dcqcn: bool,
    /// Whether the NICs honoured PFC (the topology's `nic.pfc`).
    pub pfc: bool,
    /// Whether any switch ran a PFC watchdog (its storms and restorations are counted per
    /// port in `switches`).
    pub watchdog: bool,
    /// Per flow, in topology order.
    pub flows: Vec<FlowReport>,
    /// Per link, in topology order.
    pub links: Vec<LinkReport>,
    /// Per host, in topology order.
    pub hosts: Vec<HostReport>,
    /// Per switch, by name: the snapshot `rocesw replay` writes.
    pub switches: BTreeMap<String, Snapshot>,
    /// Frames the switches dropped, all reasons.
    pub drops: u64,
    /// Completion times of the finite flows, per power-of-two size bucket.
    pub fct_by_size: Vec<fct::SizeFct>,
    /// What happened over time, with [`FabricOptions::timeline`]; not in summary.json.
    #[serde(skip)]
    pub timeline: Option<crate::timeline::Timeline>,
}

struct Host {
    /// Per flow of this host: (flow index, sender, next time it may send).
    senders: Vec<(usize, Sender, u64)>,
    rr: usize,
    receiver: Receiver,
    pause: PauseRx,
    cnps: VecDeque<Vec<u8>>,
    /// When the port finishes the frame it is sending, in whole nanoseconds (rounded up: the
    /// next frame starts at a whole nanosecond anyway). Not picoseconds: a picosecond clock
    /// wraps after 2^64 ps, 213.5 days of virtual time.
    busy_until_ns: u64,
    pfc_rx: u64,
}

struct Fabric<'t> {
    topo: &'t Topology,
    switches: Vec<Switch>,
    /// Per switch: the span its timers run in, so what its watchdog logs names the switch
    /// (several switches share one process and one log).
    spans: Vec<tracing::Span>,
    hosts: Vec<Host>,
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    /// Per node: the time of its pending wake and its generation.
    wake: BTreeMap<Node, (u64, u64)>,
    links: Vec<[LinkDir; 2]>,
    pcaps: Vec<Option<PcapOutput>>,
    pcap_error: Option<anyhow::Error>,
    /// Per switch: the ECMP hash seed.
    hash_seed: Vec<u64>,
    host_by_ip: std::collections::HashMap<[u8; 4], usize>,
    events: u64,
    last_ns: u64,
    timeline: Option<crate::timeline::Recorder>,
}

/// A flow's QP number is this plus its index.
const FLOW_QPN_BASE: u32 = 0x100;

impl Fabric<'_> {
    fn push(&mut self, t: u64, ev: Event) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    fn wake_at(&mut self, node: Node, t: u64) {
        let e = self.wake.entry(node).or_insert((u64::MAX, 0));
        if e.0 == t {
            return;
        }
        e.0 = t;
        e.1 += 1;
        let gen = e.1;
        self.push(t, Event::Wake { node, gen });
    }

    /// The far end of `end`'s link and the link's (index, direction from `end`).
    fn far(&self, link: usize, from: End) -> (End, usize) {
        let l = &self.topo.links[link];
        if l.a == from {
            (l.b, 0)
        } else {
            (l.a, 1)
        }
    }

    /// `frame` leaves `from` on `link` starting at `at_ns` (its wire time `ser_ps`).
    fn send_on_link(&mut self, link: usize, from: End, frame: &[u8], at_ns: u64, ser_ps: u64) {
        let (to, dir) = self.far(link, from);
        let d = &mut self.links[link][dir];
        d.frames += 1;
        d.bytes += frame.len() as u64;
        if is_mac_control(frame) {
            d.pfc_frames += 1;
            d.pfc_at_ns.push(at_ns);
        }
        if let Some(out) = self.pcaps[link].as_mut() {
            if let Err(e) = out.write(at_ns, frame) {
                self.pcap_error.get_or_insert(e);
            }
        }
        let arrive = at_ns
            .saturating_add(ser_ps.div_ceil(1000))
            .saturating_add(self.topo.links[link].delay_ns());
        self.last_ns = self.last_ns.max(arrive);
        let (node, port) = match to {
            End::Host(h) => (Node::Host(h), 0),
            End::Switch(s, p) => (Node::Switch(s), p),
        };
        self.push(
            arrive,
            Event::Deliver {
                node,
                port,
                frame: frame.to_vec(),
            },
        );
    }

    /// The router's lookup in front of switch `s`: the egress port for this frame's
    /// destination host (ECMP by 5-tuple hash), written as the destination MAC.
    fn route(&self, s: usize, frame: &mut [u8]) {
        let Some((dst_ip, tuple_hash)) = flow_key(frame) else {
            return;
        };
        let Some(&dst) = self.host_by_ip.get(&dst_ip) else {
            return;
        };
        let ports = &self.topo.switches[s].routes[dst];
        if ports.is_empty() {
            return;
        }
        let h = mix(tuple_hash ^ self.hash_seed[s]);
        let p = ports[(h % ports.len() as u64) as usize];
        frame[..6].copy_from_slice(&topology::port_mac(s, p));
    }

    /// Payload bytes flow `i`'s receiver got so far (whole messages, plus the packets of the
    /// one under way at the MTU).
    fn delivered(&self, i: usize) -> u64 {
        let topo = self.topo;
        let f = &topo.flows[i];
        let qpn = FLOW_QPN_BASE + i as u32;
        let Some(r) = self.hosts[f.dst]
            .receiver
            .flows
            .iter()
            .find(|r| r.qpn == qpn && r.src_ip == topo.hosts[f.src].ip)
        else {
            return 0;
        };
        let msg = match f.size {
            FlowSize::Bytes(b) => b,
            FlowSize::Long => topo.nic.long_message,
        };
        let mtu = topo.nic.mtu as u64;
        let npk = msg.div_ceil(mtu);
        ((r.packets / npk) * msg + (r.packets % npk) * mtu).min(match f.size {
            FlowSize::Bytes(b) => b,
            FlowSize::Long => u64::MAX,
        })
    }

    /// The timeline's counters at `now`: a bucket boundary no later than the instant about to
    /// be handled, with nothing handled since the one before it.
    fn sample_timeline(&mut self, now: u64) {
        let Some(mut tl) = self.timeline.take() else { return };
        for (s, sw) in self.switches.iter().enumerate() {
            tl.sample_switch(s, sw);
        }
        for i in 0..self.topo.flows.len() {
            let f = &self.topo.flows[i];
            let delivered = self.delivered(i);
            // A flow all delivered has no rate any more: its DCQCN line ends with it.
            let done = matches!(f.size, FlowSize::Bytes(b) if delivered >= b);
            let rate = self.hosts[f.src]
                .senders
                .iter()
                .find(|x| x.0 == i)
                .filter(|_| !done)
                .and_then(|(_, s, _)| s.qps[0].dcqcn.as_ref().map(|d| d.rate()));
            tl.sample_flow(i, delivered, rate);
        }
        for (li, l) in self.topo.links.iter().enumerate() {
            for (dir, from) in [(0, l.a), (1, l.b)] {
                let paused = match from {
                    End::Switch(s, p) => self.switches[s].port_paused_ns(p, now),
                    End::Host(h) => self.hosts[h].pause.total_paused(now),
                };
                tl.sample_link(li * 2 + dir, &paused);
            }
        }
        tl.end_sample(now);
        self.timeline = Some(tl);
    }

    fn deliver(&mut self, now: u64, node: Node, port: usize, mut frame: Vec<u8>) {
        match node {
            Node::Switch(s) => {
                if !is_mac_control(&frame) {
                    self.route(s, &mut frame);
                }
                self.switches[s].receive(port, &frame, now);
            }
            Node::Host(h) => self.host_receive(h, &frame, now),
        }
    }

    fn host_receive(&mut self, h: usize, frame: &[u8], now: u64) {
        let Ok(info) = parse(frame, usize::MAX) else { return };
        let speed = self.topo.links[self.topo.hosts[h].link].speed_bps;
        let host = &mut self.hosts[h];
        if info.is_mac_control() {
            if let Ok(mc) = decode_mac_control(frame) {
                host.pfc_rx += 1;
                if self.topo.nic.pfc {
                    host.pause.on_mac_control(mc, now, speed);
                    // A sender that found its priority paused is due when the pause would
                    // expire; an XON (or a shorter pause) ends it sooner, so every sender looks
                    // again now (the host is stepped after this delivery). Without this a host
                    // stayed silent for the whole XOFF quanta after the switch had released it
                    // (two 100G senders through one 100G uplink got 23 Gb/s each).
                    for (_, _, due) in host.senders.iter_mut() {
                        *due = (*due).min(now);
                    }
                }
            }
        } else if info.is_cnp() {
            let qpn = info.bth(frame).map_or(0, |b| b.dest_qp());
            if let Some((src, _)) = ipv4_addrs(frame, &info) {
                if let Some((_, s, _)) = host
                    .senders
                    .iter_mut()
                    .find(|(f, _, _)| *f as u32 + FLOW_QPN_BASE == qpn)
                {
                    s.on_cnp(src, qpn, now);
                }
            }
        } else if info.is_roce() {
            if let Some(cnp) = host.receiver.on_roce(frame, &info, now) {
                host.cnps.push_back(cnp.to_vec());
            }
        }
    }

    /// Lets host `h` send its next frame if its port is free. Returns when to look again.
    fn host_step(&mut self, h: usize, now: u64) -> Option<u64> {
        let link = self.topo.hosts[h].link;
        let speed = self.topo.links[link].speed_bps;
        if self.hosts[h].busy_until_ns > now {
            return Some(self.hosts[h].busy_until_ns);
        }
        let host = &mut self.hosts[h];
        let mut out: Option<Vec<u8>> = host.cnps.pop_front();
        let mut next = u64::MAX;
        if out.is_none() {
            let n = host.senders.len();
            for k in 0..n {
                let i = (host.rr + k) % n;
                let (_, s, due) = &mut host.senders[i];
                if *due > now {
                    next = next.min(*due);
                    continue;
                }
                let mut got = None;
                let r = s.poll(
                    &mut host.pause,
                    now,
                    1,
                    || now,
                    |f| {
                        got = Some(f.to_vec());
                        Ok::<_, std::convert::Infallible>(true)
                    },
                );
                let Ok(d) = r;
                *due = d;
                if got.is_some() {
                    out = got;
                    host.rr = (i + 1) % n;
                    break;
                }
                next = next.min(d);
            }
        }
        let Some(frame) = out else {
            return (next != u64::MAX).then_some(next);
        };
        let ser = ser_ps(frame.len(), speed);
        let host = &mut self.hosts[h];
        host.busy_until_ns = now.saturating_add(ser.div_ceil(1000));
        let wake = host.busy_until_ns;
        self.send_on_link(link, End::Host(h), &frame, now, ser);
        Some(wake)
    }

    /// `timers`: the switch's own wake-up fired, so its timers (PFC refresh, watchdog) may be
    /// due; a step for arrivals alone skips them (`next_event` covers every timer, so a due
    /// one always has its wake-up queued).
    fn switch_step(&mut self, s: usize, now: u64, timers: bool) -> (bool, Option<u64>) {
        // Borrowed out (a pointer swap) so the sink can reach the links and the event queue.
        let mut switches = std::mem::take(&mut self.switches);
        let sw = &mut switches[s];
        if timers {
            let _named = self.spans[s].enter();
            sw.poll(now);
        }
        let mut sent = 0;
        for p in 0..sw.num_ports() {
            let Some(link) = self.topo.switches[s].links[p] else {
                continue;
            };
            let speed = self.topo.links[link].speed_bps;
            let mut sink = |_port: usize, frame: &[u8], at: u64| {
                self.send_on_link(link, End::Switch(s, p), frame, at, ser_ps(frame.len(), speed));
            };
            sent += sw.transmit(p, now, &mut sink);
        }
        let next = sw.next_event(now);
        if let Some(tl) = self.timeline.as_mut() {
            tl.observe_switch(s, sw, now);
        }
        self.switches = switches;
        (sent > 0, next)
    }
}

fn is_mac_control(frame: &[u8]) -> bool {
    frame.len() >= 14 && frame[12] == 0x88 && frame[13] == 0x08
}

/// (destination IPv4, hash of the 5-tuple) of an IPv4 frame (untagged or one VLAN tag).
fn flow_key(frame: &[u8]) -> Option<([u8; 4], u64)> {
    let mut off = 12;
    let mut et = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    if et == 0x8100 {
        off += 4;
        et = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    }
    if et != 0x0800 {
        return None;
    }
    let ip = frame.get(off + 2..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    let proto = *ip.get(9)?;
    let src = u32::from_be_bytes(ip.get(12..16)?.try_into().ok()?);
    let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
    let ports = ip
        .get(ihl..ihl + 4)
        .map_or(0, |p| u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
    let h = (u64::from(src) << 32 | u64::from(u32::from_be_bytes(dst)))
        ^ (u64::from(ports) << 8 | u64::from(proto)).rotate_left(17);
    Some((dst, h))
}

/// splitmix64's finaliser: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The switch's config as the fabric runs it: a static FDB entry per linked port for its
/// next-hop MAC, learning off (the fabric routes; see the module doc).
fn fabric_config(s: usize, spec: &topology::SwitchSpec, watchdog: bool) -> Config {
    let mut cfg = spec.config.clone();
    cfg.fdb.learning = false;
    if !watchdog {
        cfg.pfc.watchdog = None;
    }
    for (p, link) in spec.links.iter().enumerate() {
        if link.is_some() {
            cfg.fdb.static_entries.push(StaticMac {
                mac: topology::port_mac(s, p),
                port: cfg.ports[p].id,
            });
        }
    }
    cfg.fdb.capacity = cfg.fdb.capacity.max(cfg.fdb.static_entries.len());
    cfg
}

/// The link each `--pcap` names, by index, or an error naming the links there are.
fn pcap_links(topo: &Topology, pcaps: &[(String, PathBuf)]) -> Result<Vec<usize>> {
    let mut seen = vec![false; topo.links.len()];
    pcaps
        .iter()
        .map(|(name, _)| {
            let Some(i) = topo
                .links
                .iter()
                .position(|l| &l.name == name || &l.reverse_name == name)
            else {
                let names: Vec<&str> = topo.links.iter().map(|l| l.name.as_str()).collect();
                anyhow::bail!("--pcap {name}: no such link (links: {})", names.join(", "));
            };
            if std::mem::replace(&mut seen[i], true) {
                anyhow::bail!("--pcap {name}: the link is given twice");
            }
            Ok(i)
        })
        .collect()
}

/// What `--pcap` wrote, a line per file: the file, its link as the topology names it, and the
/// frames in it each way (`rocesw fabric` prints it after the summary).
pub fn pcaps_written(topo: &Topology, outcome: &FabricOutcome, pcaps: &[(String, PathBuf)]) -> Result<String> {
    let mut out = String::new();
    for (i, (_, path)) in pcap_links(topo, pcaps)?.into_iter().zip(pcaps) {
        let (link, l) = (&topo.links[i], &outcome.links[i]);
        // The ends as written: the '-' where `name` and `reverse_name` agree (names may hold '-').
        let (a, b) = link
            .name
            .match_indices('-')
            .map(|(k, _)| (&link.name[..k], &link.name[k + 1..]))
            .find(|(a, b)| link.reverse_name == format!("{b}-{a}"))
            .unwrap_or(("a", "b"));
        out += &format!(
            "wrote {}: link {}, {} frames ({a} → {b} {}, {b} → {a} {})\n",
            path.display(),
            l.name,
            l.forward.frames + l.reverse.frames,
            l.forward.frames,
            l.reverse.frames
        );
    }
    Ok(out)
}

/// Refuses, before anything is written, an output (`summary`, each `--pcap`) that is an input
/// (the topology at `topology`, a switch's config) or another output, however the paths are
/// spelt: the check every command that writes files shares ([`controlplane::files`]).
pub fn refuse_aliased_outputs(
    topology: &Path,
    topo: &Topology,
    summary: Option<&Path>,
    pcaps: &[(String, PathBuf)],
    timeline: Option<&Path>,
) -> Result<()> {
    pcap_links(topo, pcaps)?;
    let mut inputs: Vec<(String, &Path)> = vec![("topology".to_string(), topology)];
    for s in &topo.switches {
        if let Some(p) = &s.config_path {
            inputs.push((format!("config of switch {:?}", s.name), p.as_path()));
        }
    }
    let mut outputs: Vec<(String, &Path)> = Vec::new();
    if let Some(p) = summary {
        outputs.push(("the summary".to_string(), p));
    }
    for (name, p) in pcaps {
        outputs.push((format!("--pcap {name}"), p.as_path()));
    }
    let data = timeline.map(crate::timeline::data_path).transpose()?;
    if let (Some(page), Some(data)) = (timeline, &data) {
        outputs.push(("the timeline (--timeline)".to_string(), page));
        outputs.push(("the timeline's data".to_string(), data));
    }
    controlplane::files::refuse_aliased_outputs(&inputs, &outputs).map_err(anyhow::Error::msg)
}

/// Runs the fabric to the end of its duration (or until every flow finished and every queue
/// drained).
pub fn run(topo: &Topology, opts: &FabricOptions) -> Result<FabricOutcome> {
    let duration = opts.duration_ns.unwrap_or(topo.duration_ns);
    if duration == 0 {
        anyhow::bail!("duration must be positive");
    }
    let dcqcn = opts.dcqcn.unwrap_or(topo.nic.dcqcn);
    let mut pcaps: Vec<Option<PcapOutput>> = (0..topo.links.len()).map(|_| None).collect();
    // Every name checked, and no capture written over another or over a switch's config,
    // before the first file is created.
    let links = pcap_links(topo, &opts.pcaps)?;
    let configs: Vec<(String, &Path)> = topo
        .switches
        .iter()
        .filter_map(|s| Some((format!("config of switch {:?}", s.name), s.config_path.as_deref()?)))
        .collect();
    let outputs: Vec<(String, &Path)> = opts
        .pcaps
        .iter()
        .map(|(name, p)| (format!("--pcap {name}"), p.as_path()))
        .collect();
    controlplane::files::refuse_aliased_outputs(&configs, &outputs).map_err(anyhow::Error::msg)?;
    for (i, (_, path)) in links.into_iter().zip(&opts.pcaps) {
        pcaps[i] = Some(PcapOutput::create(path)?);
    }
    let switches: Vec<Switch> = topo
        .switches
        .iter()
        .enumerate()
        .map(|(s, spec)| {
            Switch::new(
                &fabric_config(s, spec, opts.watchdog.unwrap_or(true)),
                opts.seed.wrapping_add(s as u64),
            )
        })
        .collect();
    let mut hosts = Vec::with_capacity(topo.hosts.len());
    for _ in &topo.hosts {
        hosts.push(Host {
            senders: Vec::new(),
            rr: 0,
            receiver: Receiver::new(dcqcn.then_some(topo.nic.cnp_interval_ns)),
            pause: PauseRx::default(),
            cnps: VecDeque::new(),
            busy_until_ns: 0,
            pfc_rx: 0,
        });
    }
    for (i, f) in topo.flows.iter().enumerate() {
        let src = &topo.hosts[f.src];
        let dst = &topo.hosts[f.dst];
        let link_bps = topo.links[src.link].speed_bps;
        let cfg = TrafficConfig {
            op: Op::Write,
            msg_size: match f.size {
                FlowSize::Bytes(b) => b,
                FlowSize::Long => topo.nic.long_message,
            },
            mtu: topo.nic.mtu,
            dscp: topo.nic.dscp,
            vlan: None,
            rate_bps: link_bps,
            link_bps,
            qps: 1,
            duration_ns: duration,
            pfc: topo.nic.pfc,
            prio_map: crate::nic::PrioMap::default(),
            dcqcn,
            dcqcn_overrides: topo.nic.dcqcn_overrides,
            cnp_interval_ns: topo.nic.cnp_interval_ns,
            // A NIC does not bank unused line time: no burst beyond a frame.
            burst_ns: 0,
        };
        let dest = Dest {
            mac: dst.mac,
            ip: dst.ip,
        };
        // One QP per flow, numbered by the flow, so a CNP finds its flow.
        let mut s = Sender::with_qpns(cfg, src.mac, src.ip, &[dest], |_, _| FLOW_QPN_BASE + i as u32)
            .with_context(|| format!("flow {i} ({} → {})", src.name, dst.name))?;
        if let FlowSize::Bytes(_) = f.size {
            s.limit_messages(Some(1));
        }
        s.start(f.start_ns);
        hosts[f.src].senders.push((i, s, f.start_ns));
    }
    let hash_seed = (0..topo.switches.len())
        .map(|s| mix(opts.seed ^ (s as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
        .collect();
    let mut fab = Fabric {
        topo,
        switches,
        spans: topo
            .switches
            .iter()
            .map(|sw| tracing::error_span!("switch", name = %sw.name))
            .collect(),
        hosts,
        heap: BinaryHeap::new(),
        seq: 0,
        wake: BTreeMap::new(),
        links: vec![Default::default(); topo.links.len()],
        pcaps,
        pcap_error: None,
        hash_seed,
        host_by_ip: topo.hosts.iter().enumerate().map(|(i, h)| (h.ip, i)).collect(),
        events: 0,
        last_ns: 0,
        timeline: None,
    };
    if opts.timeline {
        let mut tl = crate::timeline::Recorder::new("fabric", duration);
        for (spec, sw) in topo.switches.iter().zip(&fab.switches) {
            tl.add_switch(&spec.name, sw);
        }
        for (i, f) in topo.flows.iter().enumerate() {
            tl.add_flow(format!(
                "flow {i} {}→{}",
                topo.hosts[f.src].name, topo.hosts[f.dst].name
            ));
        }
        let end_name = |e: End| match e {
            End::Host(h) => topo.hosts[h].name.clone(),
            End::Switch(s, p) => format!("{}:{}", topo.switches[s].name, fab.switches[s].port_id(p)),
        };
        for l in &topo.links {
            tl.add_link(format!("{}→{}", end_name(l.a), end_name(l.b)));
            tl.add_link(format!("{}→{}", end_name(l.b), end_name(l.a)));
        }
        fab.timeline = Some(tl);
    }
    for h in 0..topo.hosts.len() {
        if let Some(t) = fab.hosts[h].senders.iter().map(|s| s.2).min() {
            fab.wake_at(Node::Host(h), t);
        }
    }
    let mut now = 0u64;
    // Nodes touched at this instant, and whether their own wake-up fired.
    let mut dirty: Vec<(Node, bool)> = Vec::new();
    let mut last_progress = 0u64;
    // Log lines from here on carry the virtual time.
    let clock = crate::logging::VirtualClock::start();
    while let Some(Reverse((t, _, _))) = fab.heap.peek() {
        if *t > duration {
            break;
        }
        now = *t;
        clock.set(now);
        // At each bucket boundary the clock passed: nothing happened between the last instant
        // and `now`, so what the timers accrued up to each boundary is known exactly there.
        while let Some(b) = fab
            .timeline
            .as_ref()
            .filter(|tl| tl.sample_due(now))
            .map(|tl| tl.next_boundary())
        {
            fab.sample_timeline(b);
        }
        // Everything due at `now` first, then each node it touched, once.
        while let Some(Reverse((t, _, _))) = fab.heap.peek() {
            if *t != now {
                break;
            }
            let Reverse((_, _, ev)) = fab.heap.pop().expect("peeked");
            fab.events += 1;
            let (node, woken) = match ev {
                Event::Deliver { node, port, frame } => {
                    fab.deliver(now, node, port, frame);
                    (node, false)
                }
                Event::Wake { node, gen } => {
                    if fab.wake.get(&node).is_none_or(|w| w.1 != gen) {
                        continue;
                    }
                    fab.wake.remove(&node);
                    (node, true)
                }
            };
            match dirty.iter_mut().find(|d| d.0 == node) {
                Some(d) => d.1 |= woken,
                None => dirty.push((node, woken)),
            }
        }
        for (node, woken) in dirty.drain(..) {
            match node {
                Node::Switch(s) => {
                    let (progressed, next) = fab.switch_step(s, now, woken);
                    if let Some(t) = next {
                        let t = if t > now || progressed { t.max(now) } else { now + 1 };
                        fab.wake_at(node, t);
                    }
                }
                Node::Host(h) => {
                    if let Some(t) = fab.host_step(h, now) {
                        fab.wake_at(node, t.max(now + 1));
                    }
                }
            }
        }
        if let Some(e) = fab.pcap_error.take() {
            return Err(e);
        }
        if let Some(report) = opts.progress {
            if now - last_progress >= duration / 100 {
                report(now, duration);
                last_progress = now;
            }
        }
    }
    if let Some(report) = opts.progress {
        report(duration, duration);
    }
    let end = if fab.heap.is_empty() {
        now.min(duration)
    } else {
        duration
    };
    for p in fab.pcaps.iter_mut() {
        if let Some(out) = p.take() {
            out.finish()?;
        }
    }
    let watchdog = fab.switches.iter().any(|s| s.config().pfc.watchdog.is_some());
    // The last samples: the boundaries up to the end, then what is left, to its bucket.
    while let Some(b) = fab
        .timeline
        .as_ref()
        .filter(|tl| tl.sample_due(end))
        .map(|tl| tl.next_boundary())
    {
        fab.sample_timeline(b);
    }
    fab.sample_timeline(end);
    let timeline = fab.timeline.take().map(|tl| {
        let title = format!(
            "{} switches, {} hosts, {} flows, seed {}",
            topo.switches.len(),
            topo.hosts.len(),
            topo.flows.len(),
            opts.seed
        );
        tl.finish(title, end)
    });
    let mut o = outcome(&mut fab, end, opts.seed, dcqcn, watchdog);
    o.timeline = timeline;
    Ok(o)
}

fn outcome(fab: &mut Fabric<'_>, end: u64, seed: u64, dcqcn: bool, watchdog: bool) -> FabricOutcome {
    let topo = fab.topo;
    // Pause time per link direction: the paused side is the sender of that direction.
    for (li, l) in topo.links.iter().enumerate() {
        for (dir, from) in [(0, l.a), (1, l.b)] {
            fab.links[li][dir].paused_ns = match from {
                End::Switch(s, p) => fab.switches[s].port_paused_ns(p, end),
                End::Host(h) => {
                    fab.hosts[h].pause.finish(end);
                    fab.hosts[h].pause.paused_ns
                }
            };
        }
    }
    let mut flows = Vec::new();
    for (i, f) in topo.flows.iter().enumerate() {
        let src = &fab.hosts[f.src];
        let (_, s, _) = src.senders.iter().find(|x| x.0 == i).expect("every flow has a sender");
        let q = &s.qps[0];
        let qpn = FLOW_QPN_BASE + i as u32;
        let rx = fab.hosts[f.dst]
            .receiver
            .flows
            .iter()
            .find(|r| r.qpn == qpn && r.src_ip == topo.hosts[f.src].ip);
        let msg = match f.size {
            FlowSize::Bytes(b) => b,
            FlowSize::Long => topo.nic.long_message,
        };
        let npk = msg.div_ceil(topo.nic.mtu as u64);
        let (received, lost, last, ce, cnps_sent, hist) = match rx {
            Some(r) => (r.packets, r.psn.lost, r.last_ns, r.ce, r.cnps_sent, r.latency.clone()),
            None => (0, 0, 0, 0, 0, Histogram::new()),
        };
        let delivered = (received / npk) * msg + (received % npk) * topo.nic.mtu as u64;
        let complete = matches!(f.size, FlowSize::Bytes(_)) && received == npk && lost == 0;
        let span = last.saturating_sub(f.start_ns);
        flows.push(FlowReport {
            id: i,
            pattern: f.pattern.clone(),
            src: topo.hosts[f.src].name.clone(),
            dst: topo.hosts[f.dst].name.clone(),
            size: match f.size {
                FlowSize::Bytes(b) => Some(b),
                FlowSize::Long => None,
            },
            start_ns: f.start_ns,
            packets_sent: q.stats.packets,
            packets_received: received,
            lost,
            delivered_bytes: delivered.min(if complete { msg } else { u64::MAX }),
            goodput_bps: if span == 0 {
                0.0
            } else {
                (delivered * 8) as f64 * 1e9 / span as f64
            },
            fct_ns: complete.then_some(span),
            last_arrival_ns: last,
            latency_p50_ns: hist.quantile(0.5),
            latency_p90_ns: hist.quantile(0.9),
            latency_p99_ns: hist.quantile(0.99),
            latency_max_ns: hist.max(),
            ce_marked: ce,
            cnps_sent,
            cnps_received: q.stats.cnps_received,
            final_rate_bps: q.dcqcn.as_ref().map(|d| d.rate()),
            latency: hist,
        });
    }
    let hosts = topo
        .hosts
        .iter()
        .zip(&fab.hosts)
        .map(|(spec, h)| HostReport {
            name: spec.name.clone(),
            mac: fmt_mac(spec.mac),
            ip: std::net::Ipv4Addr::from(spec.ip).to_string(),
            pfc_frames_received: h.pfc_rx,
            paused_ns: h.pause.paused_ns,
        })
        .collect();
    let mut switches = BTreeMap::new();
    let mut drops = 0;
    for (spec, sw) in topo.switches.iter().zip(&fab.switches) {
        let snap = sw.snapshot(end);
        drops += snap.totals.drops.total();
        switches.insert(spec.name.clone(), snap);
    }
    let links = topo
        .links
        .iter()
        .zip(&fab.links)
        .map(|(l, d)| LinkReport {
            name: l.name.clone(),
            speed_bps: l.speed_bps,
            cable_m: l.cable_m,
            forward: d[0].clone(),
            reverse: d[1].clone(),
        })
        .collect();
    let fct_by_size = fct::by_size(&flows);
    FabricOutcome {
        seed,
        duration_ns: end,
        events: fab.events,
        dcqcn,
        pfc: topo.nic.pfc,
        watchdog,
        flows,
        links,
        hosts,
        switches,
        drops,
        fct_by_size,
        timeline: None,
    }
}

fn fmt_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// The short report for stdout.
/// `1 frame`, `2 frames`.
fn count(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// A name's sort key with its runs of digits compared as numbers: `leaf2` before `leaf10`.
fn natural_key(name: &str) -> Vec<(String, usize, String)> {
    let mut key = Vec::new();
    let mut rest = name;
    while !rest.is_empty() {
        let text_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let (text, after) = rest.split_at(text_len);
        let digits_len = after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len());
        let (digits, after) = after.split_at(digits_len);
        let digits = digits.trim_start_matches('0');
        key.push((text.to_string(), digits.len(), digits.to_string()));
        rest = after;
    }
    key
}

/// The text `rocesw fabric` prints to stdout: totals, then flows, links and the switches' drops.
pub fn human_report(o: &FabricOutcome) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "virtual time {:.3} ms, {} events, seed {}, DCQCN {}, PFC {}",
        o.duration_ns as f64 / 1e6,
        o.events,
        o.seed,
        if o.dcqcn { "on" } else { "off" },
        if o.pfc { "on" } else { "off" }
    );
    let done = o.flows.iter().filter(|f| f.fct_ns.is_some()).count();
    let finite = o.flows.iter().filter(|f| f.size.is_some()).count();
    let mut fcts: Vec<u64> = o.flows.iter().filter_map(|f| f.fct_ns).collect();
    fcts.sort_unstable();
    let _ = write!(out, "flows: {} ({} finite, {} completed", o.flows.len(), finite, done);
    if let (Some(mid), Some(max)) = (fcts.get(fcts.len() / 2), fcts.last()) {
        let _ = write!(
            out,
            "; FCT median {:.1} µs, max {:.1} µs",
            *mid as f64 / 1e3,
            *max as f64 / 1e3
        );
    }
    let _ = writeln!(out, ")");
    // Columns as wide as their longest entry (`permutation`, long host names).
    let width = |head: &str, of: &dyn Fn(&FlowReport) -> usize| o.flows.iter().map(of).fold(head.len(), usize::max);
    let (wp, ws, wd) = (
        width("pattern", &|f| f.pattern.chars().count()),
        width("src", &|f| f.src.chars().count()),
        width("dst", &|f| f.dst.chars().count()),
    );
    let _ = writeln!(
        out,
        "  {:>4} {:<wp$} {:<ws$} {:<wd$} {:>10} {:>10} {:>10} {:>9} {:>9} {:>7} {:>6} {:>5}",
        "flow", "pattern", "src", "dst", "goodput", "last rx", "FCT", "p50 lat", "p99 lat", "CE", "CNPs", "lost"
    );
    for f in &o.flows {
        let _ = writeln!(
            out,
            "  {:>4} {:<wp$} {:<ws$} {:<wd$} {:>8.2}G {:>8.1}µs {:>10} {:>7.1}µs {:>7.1}µs {:>7} {:>6} {:>5}",
            f.id,
            f.pattern,
            f.src,
            f.dst,
            f.goodput_bps / 1e9,
            // Goodput runs to the last arrival: a flow that stopped early shows it here.
            f.last_arrival_ns as f64 / 1e3,
            f.fct_ns.map_or("-".to_string(), |t| format!("{:.1}µs", t as f64 / 1e3)),
            f.latency_p50_ns as f64 / 1e3,
            f.latency_p99_ns as f64 / 1e3,
            f.ce_marked,
            f.cnps_received,
            f.lost
        );
    }
    let _ = writeln!(out, "links with PFC:");
    let mut any = false;
    for l in &o.links {
        // PFC sent one way pauses the traffic of the other.
        for (dir, d, other) in [("→", &l.forward, &l.reverse), ("←", &l.reverse, &l.forward)] {
            if d.pfc_frames > 0 {
                any = true;
                let paused: u64 = other.paused_ns.iter().sum();
                let _ = writeln!(
                    out,
                    "  {:<24} {dir} {} (the other end paused {:.1} µs)",
                    l.name,
                    count(d.pfc_frames, "PFC frame"),
                    paused as f64 / 1e3
                );
            }
        }
    }
    if !any {
        let _ = writeln!(out, "  none");
    }
    if o.watchdog {
        // Switches whose watchdog acted, leaf2 before leaf10; a line for all the others.
        let mut acted: Vec<(&String, u64, u64)> = o
            .switches
            .iter()
            .map(|(name, snap)| {
                let storms: u64 = snap.ports.iter().flat_map(|p| p.watchdog_storms).sum();
                let restores: u64 = snap.ports.iter().flat_map(|p| p.watchdog_restores).sum();
                (name, storms, restores)
            })
            .filter(|&(_, s, r)| s + r > 0)
            .collect();
        acted.sort_by_cached_key(|(name, _, _)| natural_key(name));
        let _ = writeln!(out, "PFC watchdog (storms detected / restored):");
        let w = acted.iter().map(|(n, _, _)| n.chars().count()).fold(10, usize::max);
        for (name, storms, restores) in &acted {
            let _ = writeln!(out, "  {name:<w$} {storms} / {restores}");
        }
        match (acted.len(), o.switches.len()) {
            (0, _) => {
                let _ = writeln!(out, "  none (no storm on any switch)");
            }
            (a, n) if a < n => {
                let _ = writeln!(
                    out,
                    "  none on the {} other switch{}",
                    n - a,
                    if n - a == 1 { "" } else { "es" }
                );
            }
            _ => {}
        }
    }
    // Frames still queued when the run ended: in a deadlock, what the cycle holds.
    let held: Vec<String> = o
        .switches
        .iter()
        .flat_map(|(name, snap)| {
            snap.ports.iter().flat_map(move |p| {
                p.queues
                    .iter()
                    .filter(|q| q.depth_packets > 0)
                    .map(move |q| format!("{name}:{} q{} {}", p.id, q.queue, count(q.depth_packets, "frame")))
            })
        })
        .collect();
    if !held.is_empty() {
        let _ = writeln!(out, "queued at the end: {}", held.join(", "));
    }
    let _ = writeln!(out, "switch drops: {}", o.drops);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23 item 12: the report lists leaf2 before leaf10, and counts in the singular.
    #[test]
    fn names_sort_by_their_numbers_and_counts_agree() {
        let mut names = vec!["leaf10", "spine0", "leaf1", "leaf2", "leaf02x", "leaf"];
        names.sort_by_cached_key(|n| natural_key(n));
        assert_eq!(names, ["leaf", "leaf1", "leaf2", "leaf02x", "leaf10", "spine0"]);
        assert_eq!(count(1, "frame"), "1 frame");
        assert_eq!(count(0, "frame"), "0 frames");
        assert_eq!(count(3, "PFC frame"), "3 PFC frames");
    }
}

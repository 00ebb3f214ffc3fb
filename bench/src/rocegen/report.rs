//! The run report: per flow throughput, loss, CE, CNPs, latency; Jain fairness; per host PFC
//! and pause time. One struct, printed as a table or serialised as JSON.

use super::dcqcn::DcqcnParams;
use super::histogram::{Histogram, Latency};
use super::host::HostResult;
use super::sender::TrafficConfig;
use super::{fmt_ip, fmt_mac, Op};
use serde::Serialize;
use std::fmt::Write as _;

/// The traffic settings the run used, echoed so a report stands on its own.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigReport {
    /// SEND or RDMA WRITE.
    pub op: Op,
    /// Message size, bytes.
    pub msg_size: u64,
    /// Path MTU, payload bytes per packet.
    pub mtu: usize,
    /// DSCP of the data frames.
    pub dscp: u8,
    /// The priority that DSCP maps to: the one whose PFC pauses the senders.
    pub priority: u8,
    /// VLAN id the frames were tagged with, if any.
    pub vlan: Option<u16>,
    /// Per sender → destination connection.
    pub rate_bps: u64,
    /// Line rate of the hosts' links, bits per second.
    pub link_bps: u64,
    /// QPs per connection.
    pub qps: u32,
    /// How long the senders sent, seconds.
    pub duration_s: f64,
    /// Whether hosts honoured received PFC/PAUSE.
    pub pfc: bool,
    /// Whether DCQCN ran (reaction and notification points).
    pub dcqcn: bool,
    /// Per QP (rates are per QP).
    pub dcqcn_params: Option<DcqcnParams>,
    /// The notification point's least time between two CNPs per QP, ns.
    pub cnp_interval_ns: u64,
}

/// The sender's side of a flow.
#[derive(Debug, Clone, Serialize)]
pub struct FlowTx {
    /// Data packets sent.
    pub packets: u64,
    /// Frame bytes sent (no preamble, gap or FCS).
    pub bytes: u64,
    /// Whole messages sent.
    pub messages: u64,
    /// Wire bits over the sending period.
    pub rate_bps: f64,
    /// CNPs that arrived for this QP.
    pub cnps_received: u64,
    /// Sending time lost to the sender running late beyond the token bucket depth.
    pub late_ns: u64,
    /// Rate cuts: CNPs the DCQCN reaction point acted on.
    pub rate_cuts: u64,
    /// DCQCN rate at the end, bits/s (`None` without DCQCN).
    pub final_rate_bps: Option<f64>,
    /// Lowest DCQCN rate reached, bits/s.
    pub min_rate_bps: Option<f64>,
    /// DCQCN's α at the end.
    pub alpha: Option<f64>,
}

/// The receiver's side of a flow.
#[derive(Debug, Clone, Serialize)]
pub struct FlowRxReport {
    /// Data packets that passed the ICRC check.
    pub packets: u64,
    /// Frame bytes of those packets (no preamble, gap or FCS).
    pub bytes: u64,
    /// Wire bits (frame + 24 B) between the first and the last arrival.
    pub throughput_bps: f64,
    /// PSNs skipped and never seen.
    pub lost: u64,
    /// Packets whose PSN had already arrived.
    pub duplicates: u64,
    /// Packets that arrived after a later PSN.
    pub out_of_order: u64,
    /// Packets dropped for a wrong ICRC.
    pub bad_icrc: u64,
    /// Packets that arrived CE-marked.
    pub ce: u64,
    /// `ce` over `packets` (0 when none arrived).
    pub ce_fraction: f64,
    /// CNPs the receiver's notification point sent for this flow.
    pub cnps_sent: u64,
    /// Longest time between two consecutive arrivals, and when it ended (ns after start).
    pub max_gap_ns: u64,
    /// When that longest gap ended, ns after the run's start.
    pub max_gap_end_ns: u64,
    /// One-way latency over the flow's packets.
    pub latency: Latency,
}

/// One flow, a (source IP, destination IP, QP), from both ends when this run had both.
#[derive(Debug, Clone, Serialize)]
pub struct FlowReport {
    /// Source IPv4 address, dotted.
    pub src: String,
    /// Destination IPv4 address, dotted.
    pub dst: String,
    /// The sending host's name, if it was one of this run's hosts.
    pub src_host: Option<String>,
    /// The receiving host's name, if it was one of this run's hosts.
    pub dst_host: Option<String>,
    /// Destination QP number.
    pub qp: u32,
    /// The receiver's throughput if it was measured, else the sender's rate.
    pub throughput_bps: f64,
    /// The sender's side, if this run sent the flow.
    pub tx: Option<FlowTx>,
    /// The receiver's side, if this run received it.
    pub rx: Option<FlowRxReport>,
    /// Sent and neither received nor seen missing (no later frame of the flow arrived to show
    /// the gap): still queued or paused somewhere when the receiver stopped, or lost at the
    /// flow's tail. Known only when this run both sent and received the flow.
    pub in_flight_at_end: Option<u64>,
}

/// Frames of a flow that left the sender and that the receiver neither got nor counted lost.
fn in_flight_at_end(tx: &FlowTx, rx: &FlowRxReport) -> u64 {
    let accounted = rx.packets.saturating_sub(rx.duplicates).saturating_add(rx.lost);
    tx.packets.saturating_sub(accounted)
}

/// How evenly the flows shared the network, over their throughputs.
#[derive(Debug, Clone, Serialize)]
pub struct Fairness {
    /// Jain's index (Σx)² / (n·Σx²) over the flows' throughput: 1 = equal shares.
    pub jain: f64,
    /// Flows counted.
    pub flows: usize,
    /// Lowest flow throughput, bits/s.
    pub min_bps: f64,
    /// Highest flow throughput, bits/s.
    pub max_bps: f64,
    /// Mean flow throughput, bits/s.
    pub mean_bps: f64,
}

/// One host of the run: who it is and what crossed its port.
#[derive(Debug, Clone, Serialize)]
pub struct HostReport {
    /// Its label (the namespace, or the interface).
    pub name: String,
    /// Its network namespace, if it ran in one.
    pub netns: Option<String>,
    /// Its interface.
    pub iface: String,
    /// Its MAC, colon-separated hex.
    pub mac: String,
    /// Its IPv4 address, dotted.
    pub ip: String,
    /// Whether it ran a sender.
    pub sends: bool,
    /// Whether it ran a receiver.
    pub receives: bool,
    /// Data packets its sender sent.
    pub tx_packets: u64,
    /// Frame bytes its sender sent.
    pub tx_bytes: u64,
    /// Sends that failed with an error.
    pub tx_errors: u64,
    /// Frames received, all kinds.
    pub rx_frames: u64,
    /// RoCEv2 data frames received.
    pub rx_roce: u64,
    /// Frames received that were neither RoCE nor MAC control (ARP, IPv6 ND, ...).
    pub rx_other: u64,
    /// Frames that did not parse, MAC control that did not decode included.
    pub rx_malformed: u64,
    /// Frames this host's kernel dropped because the host did not read in time (lost at the
    /// host, not in the network; also counted in the flows' `lost`).
    pub rx_socket_drops: u64,
    /// CNPs its receiver sent.
    pub cnps_sent: u64,
    /// CNPs it received.
    pub cnps_received: u64,
    /// PFC frames received.
    pub pfc_frames: u64,
    /// 802.3x PAUSE frames received.
    pub pause_frames: u64,
    /// PFC XOFFs (non-zero pause time) received, per priority.
    pub pfc_xoff: [u64; 8],
    /// PFC XONs (zero pause time) received, per priority.
    pub pfc_xon: [u64; 8],
    /// Time each priority was paused by received PFC/PAUSE (0 unless PFC is honoured).
    pub paused_ns: [u64; 8],
    /// `paused_ns` at the priority of this host's data.
    pub data_paused_ns: u64,
}

/// The run summed over flows and hosts.
#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    /// Data packets sent by all hosts.
    pub tx_packets: u64,
    /// Data packets received by all hosts.
    pub rx_packets: u64,
    /// Sum of the flows' throughputs, bits/s.
    pub throughput_bps: f64,
    /// PSNs lost, over all flows.
    pub lost: u64,
    /// Sent and neither received nor seen missing when the run ended ([`FlowReport`]).
    pub in_flight_at_end: u64,
    /// Duplicate packets, over all flows.
    pub duplicates: u64,
    /// Late (reordered) packets, over all flows.
    pub out_of_order: u64,
    /// Packets with a wrong ICRC, over all flows.
    pub bad_icrc: u64,
    /// CE-marked packets, over all flows.
    pub ce: u64,
    /// `ce` over `rx_packets`.
    pub ce_fraction: f64,
    /// CNPs sent by all receivers.
    pub cnps_sent: u64,
    /// CNPs received by all hosts.
    pub cnps_received: u64,
    /// PFC frames received by all hosts.
    pub pfc_frames: u64,
    /// PAUSE frames received by all hosts.
    pub pause_frames: u64,
    /// The longest any host's data priority was paused, ns.
    pub max_data_paused_ns: u64,
    /// Frames the hosts' kernels dropped because a host did not read in time: of `lost`, the
    /// part lost at the receiving host rather than in the network.
    pub rx_socket_drops: u64,
    /// One-way latency over every flow's packets.
    pub latency: Latency,
}

/// How long the receivers of a coordinated run listened after the senders stopped, and why
/// they stopped.
#[derive(Debug, Clone, Serialize)]
pub struct DrainReport {
    /// The most they would wait (`--drain`), seconds.
    pub bound_s: f64,
    /// How long they waited after the last sender stopped, seconds.
    pub waited_s: f64,
    /// True: they stopped because every frame sent had arrived or been seen lost. False: at
    /// the bound, with frames still unaccounted for (`totals.in_flight_at_end`).
    pub drained: bool,
    /// Frames sent and neither received nor seen lost when they stopped, by the hosts' own count.
    pub unaccounted: u64,
}

/// Everything one rocegen run measured; printed as a table ([`Self::to_table`]) or JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `send`, `recv` or `coordinate`.
    pub mode: String,
    /// The traffic pattern, in `coordinate` mode.
    pub pattern: Option<String>,
    /// The traffic settings.
    pub config: ConfigReport,
    /// Wall time from the first host's start to the last host's end, seconds.
    pub elapsed_s: f64,
    /// Every flow seen, sent by this run or only received.
    pub flows: Vec<FlowReport>,
    /// Fairness over the flows' throughputs; `None` without flows.
    pub fairness: Option<Fairness>,
    /// The run summed.
    pub totals: Totals,
    /// Per host, in the order given.
    pub hosts: Vec<HostReport>,
    /// In `coordinate` mode: how the receivers waited for the network to drain.
    pub drain: Option<DrainReport>,
}

/// Jain's fairness index of `xs` (1 for an empty or all-zero set).
pub fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || s2 == 0.0 {
        1.0
    } else {
        s * s / (xs.len() as f64 * s2)
    }
}

impl Report {
    /// Joins every host's sender and receiver into flows (source IP, destination IP, QP).
    pub fn build(mode: &str, pattern: Option<&str>, cfg: &TrafficConfig, hosts: &[HostResult]) -> Report {
        let name_of = |ip: [u8; 4]| hosts.iter().find(|h| h.spec.ip == ip).map(|h| h.spec.name.clone());
        let start = hosts.iter().map(|h| h.start_ns).min().unwrap_or(0);
        let end = hosts.iter().map(|h| h.end_ns).max().unwrap_or(start);
        let mut flows = Vec::new();
        let mut used_rx = std::collections::HashSet::new();
        let mut all_lat = Histogram::new();
        for h in hosts {
            let Some(s) = &h.sender else { continue };
            let tx_dur = h.tx_stop_ns.saturating_sub(h.start_ns).max(1) as f64;
            for q in &s.qps {
                let tx = FlowTx {
                    packets: q.stats.packets,
                    bytes: q.stats.bytes,
                    messages: q.stats.messages,
                    rate_bps: q.stats.wire_bytes as f64 * 8e9 / tx_dur,
                    cnps_received: q.stats.cnps_received,
                    late_ns: q.stats.late_ns,
                    rate_cuts: q.dcqcn.as_ref().map_or(0, |d| d.cnps),
                    final_rate_bps: q.dcqcn.as_ref().map(|d| d.rate()),
                    min_rate_bps: q.dcqcn.as_ref().map(|d| d.min_rc),
                    alpha: q.dcqcn.as_ref().map(|d| d.alpha()),
                };
                let rx = hosts.iter().enumerate().find_map(|(hi, rh)| {
                    let r = rh.receiver.as_ref()?;
                    let fi = r
                        .flows
                        .iter()
                        .position(|f| f.src_ip == h.spec.ip && f.dst_ip == q.dst_ip && f.qpn == q.qpn)?;
                    used_rx.insert((hi, fi));
                    Some(&r.flows[fi])
                });
                let rx_report = rx.map(|f| {
                    all_lat.merge(&f.latency);
                    rx_report(f, start)
                });
                flows.push(FlowReport {
                    src: fmt_ip(h.spec.ip),
                    dst: fmt_ip(q.dst_ip),
                    src_host: Some(h.spec.name.clone()),
                    dst_host: name_of(q.dst_ip),
                    qp: q.qpn,
                    throughput_bps: rx_report.as_ref().map_or(tx.rate_bps, |r| r.throughput_bps),
                    in_flight_at_end: rx_report.as_ref().map(|r| in_flight_at_end(&tx, r)),
                    tx: Some(tx),
                    rx: rx_report,
                });
            }
        }
        // Flows received from senders outside this run (`recv` mode).
        for (hi, h) in hosts.iter().enumerate() {
            let Some(r) = &h.receiver else { continue };
            for (fi, f) in r.flows.iter().enumerate() {
                if used_rx.contains(&(hi, fi)) {
                    continue;
                }
                all_lat.merge(&f.latency);
                let rr = rx_report(f, start);
                flows.push(FlowReport {
                    src: fmt_ip(f.src_ip),
                    dst: fmt_ip(f.dst_ip),
                    src_host: name_of(f.src_ip),
                    dst_host: Some(h.spec.name.clone()),
                    qp: f.qpn,
                    throughput_bps: rr.throughput_bps,
                    tx: None,
                    rx: Some(rr),
                    in_flight_at_end: None,
                });
            }
        }
        let tputs: Vec<f64> = flows.iter().map(|f| f.throughput_bps).collect();
        let fairness = (!tputs.is_empty()).then(|| Fairness {
            jain: jain(&tputs),
            flows: tputs.len(),
            min_bps: tputs.iter().copied().fold(f64::INFINITY, f64::min),
            max_bps: tputs.iter().copied().fold(0.0, f64::max),
            mean_bps: tputs.iter().sum::<f64>() / tputs.len() as f64,
        });
        let prio = cfg.priority();
        let host_reports: Vec<HostReport> = hosts
            .iter()
            .map(|h| HostReport {
                name: h.spec.name.clone(),
                netns: h.spec.netns.clone(),
                iface: h.spec.iface.clone(),
                mac: fmt_mac(h.mac),
                ip: fmt_ip(h.spec.ip),
                sends: h.sender.is_some(),
                receives: h.receiver.is_some(),
                tx_packets: h
                    .sender
                    .as_ref()
                    .map_or(0, |s| s.qps.iter().map(|q| q.stats.packets).sum()),
                tx_bytes: h
                    .sender
                    .as_ref()
                    .map_or(0, |s| s.qps.iter().map(|q| q.stats.bytes).sum()),
                tx_errors: h.sender.as_ref().map_or(0, |s| s.tx_errors),
                rx_frames: h.rx.frames,
                rx_roce: h.rx.roce_data,
                rx_other: h.rx.other,
                rx_malformed: h.rx.malformed,
                rx_socket_drops: h.rx.socket_drops,
                cnps_sent: h
                    .receiver
                    .as_ref()
                    .map_or(0, |r| r.flows.iter().map(|f| f.cnps_sent).sum()),
                cnps_received: h.rx.cnps_received,
                pfc_frames: h.pause.pfc_frames,
                pause_frames: h.pause.pause_frames,
                pfc_xoff: h.pause.xoff,
                pfc_xon: h.pause.xon,
                paused_ns: h.pause.paused_ns,
                data_paused_ns: h.pause.paused_ns[usize::from(prio)],
            })
            .collect();
        let rxs = || flows.iter().filter_map(|f| f.rx.as_ref());
        let rx_packets: u64 = rxs().map(|r| r.packets).sum();
        let ce: u64 = rxs().map(|r| r.ce).sum();
        let totals = Totals {
            tx_packets: host_reports.iter().map(|h| h.tx_packets).sum(),
            rx_packets,
            throughput_bps: tputs.iter().sum(),
            lost: rxs().map(|r| r.lost).sum(),
            in_flight_at_end: flows.iter().filter_map(|f| f.in_flight_at_end).sum(),
            duplicates: rxs().map(|r| r.duplicates).sum(),
            out_of_order: rxs().map(|r| r.out_of_order).sum(),
            bad_icrc: rxs().map(|r| r.bad_icrc).sum(),
            ce,
            ce_fraction: if rx_packets == 0 {
                0.0
            } else {
                ce as f64 / rx_packets as f64
            },
            cnps_sent: host_reports.iter().map(|h| h.cnps_sent).sum(),
            cnps_received: host_reports.iter().map(|h| h.cnps_received).sum(),
            pfc_frames: host_reports.iter().map(|h| h.pfc_frames).sum(),
            pause_frames: host_reports.iter().map(|h| h.pause_frames).sum(),
            max_data_paused_ns: host_reports.iter().map(|h| h.data_paused_ns).max().unwrap_or(0),
            rx_socket_drops: host_reports.iter().map(|h| h.rx_socket_drops).sum(),
            latency: all_lat.summary(),
        };
        Report {
            mode: mode.to_string(),
            pattern: pattern.map(str::to_string),
            config: ConfigReport {
                op: cfg.op,
                msg_size: cfg.msg_size,
                mtu: cfg.mtu,
                dscp: cfg.dscp,
                priority: prio,
                vlan: cfg.vlan,
                rate_bps: cfg.rate_bps,
                link_bps: cfg.link_bps,
                qps: cfg.qps,
                duration_s: cfg.duration_ns as f64 / 1e9,
                pfc: cfg.pfc,
                dcqcn: cfg.dcqcn,
                dcqcn_params: cfg.dcqcn.then(|| cfg.dcqcn_overrides.params(cfg.qp_max_rate())),
                cnp_interval_ns: cfg.cnp_interval_ns,
            },
            elapsed_s: end.saturating_sub(start) as f64 / 1e9,
            flows,
            fairness,
            totals,
            hosts: host_reports,
            drain: None,
        }
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the report serialises")
    }

    /// The human-readable table.
    pub fn to_table(&self) -> String {
        let mut o = String::new();
        let c = &self.config;
        let _ = writeln!(
            o,
            "rocegen {}{}: {:?} {} B messages, MTU {}, DSCP {} (priority {}), {} QP(s) at {} per connection, \
             link {}, {:.3} s; PFC {}, DCQCN {}",
            self.mode,
            self.pattern.as_deref().map(|p| format!(" {p}")).unwrap_or_default(),
            c.op,
            c.msg_size,
            c.mtu,
            c.dscp,
            c.priority,
            c.qps,
            rate(c.rate_bps as f64),
            rate(c.link_bps as f64),
            c.duration_s,
            on_off(c.pfc),
            on_off(c.dcqcn)
        );
        let _ = writeln!(
            o,
            "\n{:<16} {:<16} {:>6} {:>11} {:>10} {:>10} {:>7} {:>7} {:>7} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9}",
            "src",
            "dst",
            "qp",
            "throughput",
            "tx pkts",
            "rx pkts",
            "lost",
            "ooo",
            "badcrc",
            "CE%",
            "CNPtx",
            "CNPrx",
            "p50",
            "p99",
            "max"
        );
        for f in &self.flows {
            let rx = f.rx.as_ref();
            let tx = f.tx.as_ref();
            let dash = || "-".to_string();
            let _ = writeln!(
                o,
                "{:<16} {:<16} {:>6} {:>11} {:>10} {:>10} {:>7} {:>7} {:>7} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9}",
                f.src_host.clone().unwrap_or_else(|| f.src.clone()),
                f.dst_host.clone().unwrap_or_else(|| f.dst.clone()),
                f.qp,
                rate(f.throughput_bps),
                tx.map_or_else(dash, |t| t.packets.to_string()),
                rx.map_or_else(dash, |r| r.packets.to_string()),
                rx.map_or_else(dash, |r| r.lost.to_string()),
                rx.map_or_else(dash, |r| (r.out_of_order + r.duplicates).to_string()),
                rx.map_or_else(dash, |r| r.bad_icrc.to_string()),
                rx.map_or_else(dash, |r| format!("{:.2}", r.ce_fraction * 100.0)),
                rx.map_or_else(dash, |r| r.cnps_sent.to_string()),
                tx.map_or_else(dash, |t| t.cnps_received.to_string()),
                rx.map_or_else(dash, |r| dur(r.latency.p50_ns)),
                rx.map_or_else(dash, |r| dur(r.latency.p99_ns)),
                rx.map_or_else(dash, |r| dur(r.latency.max_ns)),
            );
        }
        let t = &self.totals;
        let _ = writeln!(
            o,
            "\ntotal {} over {} flow(s); Jain fairness {}; lost {} (at the hosts' sockets {}), in flight at the end {}, \
             out of order {}, duplicates {}, bad ICRC {}; CE {:.3}%; CNPs sent {} received {}; latency p50 {} p99 {} max {}",
            rate(t.throughput_bps),
            self.flows.len(),
            self.fairness.as_ref().map_or("-".into(), |f| format!("{:.4}", f.jain)),
            t.lost,
            t.rx_socket_drops,
            t.in_flight_at_end,
            t.out_of_order,
            t.duplicates,
            t.bad_icrc,
            t.ce_fraction * 100.0,
            t.cnps_sent,
            t.cnps_received,
            dur(t.latency.p50_ns),
            dur(t.latency.p99_ns),
            dur(t.latency.max_ns),
        );
        match &self.drain {
            Some(d) if d.drained => {
                let _ = writeln!(
                    o,
                    "(the receivers listened {:.3} s after the senders stopped, until every frame sent had \
                     arrived or been seen missing; at most {} s: --drain)",
                    d.waited_s, d.bound_s
                );
            }
            Some(d) => {
                let _ = writeln!(
                    o,
                    "(the receivers stopped at the --drain bound, {} s after the senders stopped, with {} frame(s) \
                     in flight: still queued or paused in the network, or lost after the last frame of their flow \
                     that arrived; not counted as lost. A longer --drain waits for them.)",
                    d.bound_s, t.in_flight_at_end
                );
            }
            None if t.in_flight_at_end > 0 => {
                let _ = writeln!(
                    o,
                    "({} frame(s) sent were neither received nor seen missing: still queued or paused in the \
                     network when the receivers stopped, or lost after the last frame that arrived)",
                    t.in_flight_at_end
                );
            }
            None => {}
        }
        let _ = writeln!(
            o,
            "\n{:<16} {:<10} {:<16} {:>10} {:>10} {:>6} {:>6} {:>6} {:>12}",
            "host", "iface", "ip", "tx pkts", "rx frames", "PFC", "PAUSE", "CNPrx", "data paused"
        );
        for h in &self.hosts {
            let _ = writeln!(
                o,
                "{:<16} {:<10} {:<16} {:>10} {:>10} {:>6} {:>6} {:>6} {:>12}",
                h.name,
                h.iface,
                h.ip,
                h.tx_packets,
                h.rx_frames,
                h.pfc_frames,
                h.pause_frames,
                h.cnps_received,
                dur(h.data_paused_ns)
            );
        }
        o
    }
}

fn rx_report(f: &super::receiver::FlowRx, start: u64) -> FlowRxReport {
    FlowRxReport {
        packets: f.packets,
        bytes: f.bytes,
        throughput_bps: f.throughput_bps(),
        lost: f.psn.lost,
        duplicates: f.psn.duplicates,
        out_of_order: f.psn.out_of_order,
        bad_icrc: f.bad_icrc,
        ce: f.ce,
        ce_fraction: if f.packets == 0 {
            0.0
        } else {
            f.ce as f64 / f.packets as f64
        },
        cnps_sent: f.cnps_sent,
        max_gap_ns: f.max_gap_ns,
        max_gap_end_ns: f.max_gap_end_ns.saturating_sub(start),
        latency: f.latency.summary(),
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// `1.23 Gb/s`.
pub fn rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3} Gb/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.2} Mb/s", bps / 1e6)
    } else {
        format!("{:.1} kb/s", bps / 1e3)
    }
}

/// `12.3 µs`.
pub fn dur(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.3} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index() {
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[]), 1.0);
    }

    /// Sent 100: 90 arrived (2 of them twice, so 88 distinct), 5 seen missing (a later PSN
    /// arrived): 7 are unaccounted for, in flight when the run ended.
    #[test]
    fn frames_neither_received_nor_seen_lost_are_in_flight() {
        let tx = FlowTx {
            packets: 100,
            bytes: 0,
            messages: 0,
            rate_bps: 0.0,
            cnps_received: 0,
            late_ns: 0,
            rate_cuts: 0,
            final_rate_bps: None,
            min_rate_bps: None,
            alpha: None,
        };
        let rx = FlowRxReport {
            packets: 90,
            bytes: 0,
            throughput_bps: 0.0,
            lost: 5,
            duplicates: 2,
            out_of_order: 0,
            bad_icrc: 0,
            ce: 0,
            ce_fraction: 0.0,
            cnps_sent: 0,
            max_gap_ns: 0,
            max_gap_end_ns: 0,
            latency: Histogram::new().summary(),
        };
        assert_eq!(in_flight_at_end(&tx, &rx), 7);
        let all_in = FlowRxReport {
            packets: 100,
            lost: 0,
            duplicates: 0,
            ..rx
        };
        assert_eq!(in_flight_at_end(&tx, &all_in), 0);
    }
}

//! rocegen: a RoCEv2 traffic generator that behaves like a RoCE NIC (RC SEND / RDMA WRITE,
//! PFC honouring, DCQCN), on raw AF_PACKET sockets, for lossless-Ethernet test labs.
//!
//! ```text
//! rocegen send --iface veth0 --src-ip 10.0.0.1 --dst-mac 02:..:02 --dst-ip 10.0.0.2 --rate 1G --qps 2
//! rocegen recv --iface veth1 --duration 2
//! rocegen coordinate --pattern incast --host h1:eth0:02:..:01:10.0.0.1 --host h2:... --host h3:... --json
//! rocegen coordinate --pattern all-to-all --lab lab.json
//! ```

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use rocesw_bench::rocegen::coordinate::{self, LabClasses, Pattern};
use rocesw_bench::rocegen::host::{run_host, HostRole, HostSpec, Start};
use rocesw_bench::rocegen::report::Report;
use rocesw_bench::rocegen::sender::{DcqcnOverrides, Dest, TrafficConfig};
use rocesw_bench::rocegen::wire::is_root;
use rocesw_bench::rocegen::{parse_ipv4, parse_mac, parse_rate, parse_size, Op, PrioMap};

#[derive(Parser)]
#[command(
    name = "rocegen",
    version,
    about = "RoCEv2 traffic generator that behaves like a RoCE NIC"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Send RoCEv2 RC traffic from one interface (honours PFC, reacts to CNPs).
    Send(SendArgs),
    /// Receive and measure RoCEv2 traffic on one interface (sends CNPs on CE).
    Recv(RecvArgs),
    /// Start senders in several hosts' namespaces at once; one report.
    Coordinate(CoordArgs),
}

#[derive(Args)]
struct Output {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct TrafficArgs {
    /// RC operation.
    #[arg(long, value_enum, default_value = "write")]
    op: Op,
    /// Message size (e.g. 4096, 64K, 1M).
    #[arg(long, default_value = "64K", value_parser = parse_size_arg)]
    msg_size: u64,
    /// Path MTU in bytes (payload per packet): 256, 512, 1024, 2048, 4096.
    #[arg(long, default_value_t = 1024)]
    mtu: usize,
    /// DSCP of data packets (ECN is ECT(0)). Default: with a --lab file that carries its
    /// switch's classes (`rocesw lab up` writes them), the lowest lossless DSCP; else 26.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..64))]
    dscp: Option<u8>,
    /// Tag data frames with this VLAN id (PCP = the DSCP's priority).
    #[arg(long)]
    vlan: Option<u16>,
    /// Target rate per sender → destination connection, wire bits/s (e.g. 200M, 10G).
    #[arg(long, default_value = "1G", value_parser = parse_rate_arg)]
    rate: u64,
    /// Link speed: pause quanta length and the DCQCN rate ceiling.
    #[arg(long, default_value = "25G", value_parser = parse_rate_arg)]
    link_speed: u64,
    /// QPs per connection, served round robin.
    #[arg(long, default_value_t = 1)]
    qps: u32,
    /// Seconds of sending.
    #[arg(long, default_value_t = 1.0)]
    duration: f64,
    /// Ignore received PFC/PAUSE (still counted).
    #[arg(long)]
    no_pfc: bool,
    /// DSCP → priority map for untagged traffic, DSCP=PRIORITY,... (others map to 0): which
    /// PFC priority pauses the data. Default: with a --lab file that carries its switch's
    /// classes, the switch's DSCP → traffic class map; else 26=3,48=6.
    #[arg(long)]
    prio_map: Option<String>,
    /// Disable DCQCN (no rate control at senders, no CNPs from receivers).
    #[arg(long)]
    no_dcqcn: bool,
    /// DCQCN: α gain g.
    #[arg(long)]
    dcqcn_g: Option<f64>,
    /// DCQCN: α update period K, µs (default 55).
    #[arg(long)]
    dcqcn_k_us: Option<f64>,
    /// DCQCN: rate increase timer T, µs (default 55).
    #[arg(long)]
    dcqcn_timer_us: Option<f64>,
    /// DCQCN: byte counter B (default 150K).
    #[arg(long, value_parser = parse_size_arg)]
    dcqcn_bytes: Option<u64>,
    /// DCQCN: fast recovery stages F (default 5).
    #[arg(long)]
    dcqcn_f: Option<u32>,
    /// DCQCN: additive increase R_AI (default 0.5 % of the per-QP ceiling).
    #[arg(long, value_parser = parse_rate_arg)]
    dcqcn_rai: Option<u64>,
    /// DCQCN: hyper increase R_HAI (default 10 × R_AI).
    #[arg(long, value_parser = parse_rate_arg)]
    dcqcn_rhai: Option<u64>,
    /// DCQCN: rate floor (default 0.1 % of the per-QP ceiling).
    #[arg(long, value_parser = parse_rate_arg)]
    dcqcn_min_rate: Option<u64>,
    /// Notification point: minimum interval between CNPs per QP, µs.
    #[arg(long, default_value_t = 50.0)]
    cnp_interval_us: f64,
    /// Token bucket depth, µs at the current rate.
    #[arg(long, default_value_t = 200.0)]
    burst_us: f64,
}

fn parse_rate_arg(s: &str) -> Result<u64, String> {
    parse_rate(s).map_err(|e| e.to_string())
}
fn parse_size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

fn us(v: f64) -> u64 {
    (v * 1000.0).round().max(0.0) as u64
}

/// The DSCP and priority map without --lab classes.
const DEFAULT_DSCP: u8 = 26;
const DEFAULT_PRIO_MAP: &str = "26=3,48=6";

/// The DSCP and priority map to send with: what the options say, else the lab's classes (its
/// lowest lossless DSCP, its switch's map), else 26 and 26=3,48=6. Second: what to tell the
/// user on stderr (a DSCP the lab's switch does not carry losslessly, or a lab without any).
fn classes(dscp: Option<u8>, prio_map: Option<&str>, lab: Option<&LabClasses>) -> (u8, String, Option<String>) {
    let lab_map = lab.map(|c| c.prio_map.as_str()).filter(|m| !m.is_empty());
    let map = prio_map.or(lab_map).unwrap_or(DEFAULT_PRIO_MAP).to_string();
    let lossless = lab.map(|c| &c.lossless_dscps[..]).unwrap_or_default();
    let listed = || lossless.iter().map(u8::to_string).collect::<Vec<_>>().join(", ");
    match (dscp, lab) {
        (Some(d), Some(_)) if !lossless.is_empty() && !lossless.contains(&d) => {
            let note = format!(
                "DSCP {d} is not lossless on the lab's switch (its lossless DSCPs: {}): frames may be dropped",
                listed()
            );
            (d, map, Some(note))
        }
        (Some(d), _) => (d, map, None),
        (None, Some(_)) if !lossless.is_empty() => (lossless[0], map, None),
        (None, Some(_)) => {
            let note =
                format!("the lab's switch carries no DSCP losslessly on every port; sending DSCP {DEFAULT_DSCP}");
            (DEFAULT_DSCP, map, Some(note))
        }
        (None, None) => (DEFAULT_DSCP, map, None),
    }
}

impl TrafficArgs {
    /// The traffic, with the lab's classes (from a --lab file) as the defaults of --dscp and
    /// --prio-map.
    fn config(&self, lab: Option<&LabClasses>) -> Result<TrafficConfig> {
        if !(self.duration.is_finite() && self.duration > 0.0) {
            bail!("--duration must be positive");
        }
        let (dscp, prio_map, note) = classes(self.dscp, self.prio_map.as_deref(), lab);
        if let Some(n) = note {
            eprintln!("rocegen: note: {n}");
        }
        let cfg = TrafficConfig {
            op: self.op,
            msg_size: self.msg_size,
            mtu: self.mtu,
            dscp,
            vlan: self.vlan,
            rate_bps: self.rate,
            link_bps: self.link_speed,
            qps: self.qps,
            duration_ns: (self.duration * 1e9) as u64,
            pfc: !self.no_pfc,
            prio_map: PrioMap::parse(&prio_map)?,
            dcqcn: !self.no_dcqcn,
            dcqcn_overrides: DcqcnOverrides {
                g: self.dcqcn_g,
                alpha_timer_ns: self.dcqcn_k_us.map(us),
                rate_timer_ns: self.dcqcn_timer_us.map(us),
                byte_counter: self.dcqcn_bytes,
                fast_recovery_stages: self.dcqcn_f,
                rai_bps: self.dcqcn_rai.map(|v| v as f64),
                rhai_bps: self.dcqcn_rhai.map(|v| v as f64),
                min_rate_bps: self.dcqcn_min_rate.map(|v| v as f64),
            },
            cnp_interval_ns: us(self.cnp_interval_us),
            burst_ns: us(self.burst_us),
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

#[derive(Args)]
struct SendArgs {
    /// Interface to send on.
    #[arg(long)]
    iface: String,
    /// Enter this network namespace (/var/run/netns/NAME) first.
    #[arg(long)]
    netns: Option<String>,
    /// Source MAC (default: the interface's).
    #[arg(long)]
    src_mac: Option<String>,
    #[arg(long)]
    src_ip: String,
    #[arg(long)]
    dst_mac: String,
    #[arg(long)]
    dst_ip: String,
    #[command(flatten)]
    traffic: TrafficArgs,
    #[command(flatten)]
    out: Output,
}

#[derive(Args)]
struct RecvArgs {
    /// Interface to receive on.
    #[arg(long)]
    iface: String,
    /// Enter this network namespace (/var/run/netns/NAME) first.
    #[arg(long)]
    netns: Option<String>,
    /// This host's IPv4 (only to label the report).
    #[arg(long, default_value = "0.0.0.0")]
    ip: String,
    /// Seconds to listen.
    #[arg(long, default_value_t = 1.0)]
    duration: f64,
    /// Send no CNPs (DCQCN notification point off).
    #[arg(long)]
    no_dcqcn: bool,
    /// Minimum interval between CNPs per QP, µs.
    #[arg(long, default_value_t = 50.0)]
    cnp_interval_us: f64,
    /// Link speed (for received pause quanta).
    #[arg(long, default_value = "25G", value_parser = parse_rate_arg)]
    link_speed: u64,
    #[command(flatten)]
    out: Output,
}

#[derive(Args)]
struct CoordArgs {
    /// Traffic pattern (incast: hosts 2..N → host 1; one-to-many: host 1 → the others).
    #[arg(long, value_enum)]
    pattern: Pattern,
    /// A host as NETNS:IFACE:MAC:IPV4 (repeatable; order matters for the pattern).
    #[arg(long = "host")]
    hosts: Vec<String>,
    /// A JSON lab file {"hosts":[{"netns","host_if","mac","ipv4"}], "classes":{..}} (instead
    /// of --host): `rocesw lab up`'s STATE_DIR/NAME.json, whose classes give --dscp and
    /// --prio-map their defaults.
    #[arg(long)]
    lab: Option<std::path::PathBuf>,
    /// At most this many seconds receivers keep listening after the senders stop, for frames
    /// still queued or paused in the network (a loaded machine holds them for hundreds of ms);
    /// they stop sooner once every frame sent has arrived or been seen lost. The report says
    /// how long they waited, and counts frames still in flight at the bound apart from lost.
    #[arg(long, default_value_t = 2.0)]
    drain: f64,
    #[command(flatten)]
    traffic: TrafficArgs,
    #[command(flatten)]
    out: Output,
}

fn print(report: &Report, out: &Output) {
    if out.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if !is_root() {
        eprintln!("rocegen: warning: not root; raw sockets and namespaces need root (or CAP_NET_RAW/CAP_SYS_ADMIN)");
    }
    match cli.cmd {
        Cmd::Send(a) => {
            let cfg = a.traffic.config(None)?;
            let spec = HostSpec {
                name: a.netns.clone().unwrap_or_else(|| a.iface.clone()),
                netns: a.netns.clone(),
                iface: a.iface.clone(),
                mac: a.src_mac.as_deref().map(parse_mac).transpose()?,
                ip: parse_ipv4(&a.src_ip)?,
            };
            let role = HostRole {
                dests: vec![Dest {
                    mac: parse_mac(&a.dst_mac)?,
                    ip: parse_ipv4(&a.dst_ip)?,
                }],
                receive: false,
            };
            let r = run_host(spec, role, cfg.clone(), Start::Now { drain_ns: 0 })?;
            print(&Report::build("send", None, &cfg, &[r]), &a.out);
        }
        Cmd::Recv(a) => {
            if !(a.duration.is_finite() && a.duration > 0.0) {
                bail!("--duration must be positive");
            }
            let cfg = TrafficConfig {
                duration_ns: (a.duration * 1e9) as u64,
                dcqcn: !a.no_dcqcn,
                cnp_interval_ns: us(a.cnp_interval_us),
                link_bps: a.link_speed,
                ..TrafficConfig::default()
            };
            let spec = HostSpec {
                name: a.netns.clone().unwrap_or_else(|| a.iface.clone()),
                netns: a.netns.clone(),
                iface: a.iface.clone(),
                mac: None,
                ip: parse_ipv4(&a.ip)?,
            };
            let role = HostRole {
                dests: vec![],
                receive: true,
            };
            let r = run_host(spec, role, cfg.clone(), Start::Now { drain_ns: 0 })?;
            print(&Report::build("recv", None, &cfg, &[r]), &a.out);
        }
        Cmd::Coordinate(a) => {
            let mut hosts = Vec::new();
            let mut classes = None;
            if let Some(p) = &a.lab {
                let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
                let lab = coordinate::parse_lab(&text).with_context(|| p.display().to_string())?;
                hosts.extend(lab.hosts);
                classes = lab.classes;
            }
            let cfg = a.traffic.config(classes.as_ref())?;
            for h in &a.hosts {
                hosts.push(coordinate::parse_host(h)?);
            }
            if !(a.drain.is_finite() && a.drain >= 0.0) {
                bail!("--drain must be ≥ 0");
            }
            let report = coordinate::run(&hosts, a.pattern, &cfg, (a.drain * 1e9) as u64)?;
            print(&report, &a.out);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 49 item 2: with a SONiC lab's file (AZURE: DSCP 3 and 4 lossless, 26 is TC 1),
    /// rocegen sends DSCP 3 with the switch's map unless told; without classes, 26 as always.
    #[test]
    fn the_labs_classes_give_the_defaults() {
        let azure = LabClasses {
            lossless_dscps: vec![3, 4],
            prio_map: "3=3,4=4,26=1".into(),
        };
        assert_eq!(classes(None, None, Some(&azure)), (3, "3=3,4=4,26=1".into(), None));
        assert_eq!(classes(None, None, None), (26, DEFAULT_PRIO_MAP.into(), None));
        assert_eq!(classes(Some(4), Some("4=4"), Some(&azure)), (4, "4=4".into(), None));
        let (d, _, note) = classes(Some(26), None, Some(&azure));
        assert_eq!(d, 26);
        assert!(note
            .unwrap()
            .contains("not lossless on the lab's switch (its lossless DSCPs: 3, 4)"));
        let none = LabClasses::default();
        let (d, map, note) = classes(None, None, Some(&none));
        assert_eq!((d, map.as_str()), (26, DEFAULT_PRIO_MAP));
        assert!(note.unwrap().contains("no DSCP losslessly"));
    }
}

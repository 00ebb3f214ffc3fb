//! `rocegen coordinate`: the CTBG idea (the ibdump paper's coordinated traffic generation):
//! one process enters every host's namespace (a thread each), starts all senders at the same
//! instant, keeps receivers running for a drain period after, and joins everything into one
//! report.

use super::host::{run_host, Drain, DrainSlot, HostResult, HostRole, HostSpec, Start};
use super::report::{DrainReport, Report};
use super::sender::{Dest, TrafficConfig};
use super::wire::now_ns;
use super::{parse_ipv4, parse_mac};
use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use std::sync::mpsc;

/// Who sends to whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pattern {
    /// Every host but the first sends to the first (N → 1).
    Incast,
    /// Every host sends to every other.
    AllToAll,
    /// The first host sends to every other (1 → N).
    OneToMany,
}

impl Pattern {
    /// The pattern as the command line and reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Incast => "incast",
            Pattern::AllToAll => "all-to-all",
            Pattern::OneToMany => "one-to-many",
        }
    }

    /// (sender, destination) host index pairs for `n` hosts.
    pub fn pairs(self, n: usize) -> Vec<(usize, usize)> {
        match self {
            Pattern::Incast => (1..n).map(|s| (s, 0)).collect(),
            Pattern::OneToMany => (1..n).map(|d| (0, d)).collect(),
            Pattern::AllToAll => (0..n)
                .flat_map(|s| (0..n).filter(move |&d| d != s).map(move |d| (s, d)))
                .collect(),
        }
    }
}

/// `NETNS:IFACE:MAC:IPV4` (the MAC contains colons: split from both ends).
pub fn parse_host(s: &str) -> Result<HostSpec> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 9 {
        bail!("--host {s:?}: expected NETNS:IFACE:MAC:IPV4, e.g. h1:eth0:02:00:00:00:00:01:10.0.0.1");
    }
    let netns = parts[0].to_string();
    let iface = parts[1].to_string();
    let mac = parse_mac(&parts[2..8].join(":"))?;
    let ip = parse_ipv4(parts[8])?;
    Ok(HostSpec {
        name: netns.clone(),
        netns: Some(netns),
        iface,
        mac: Some(mac),
        ip,
    })
}

#[derive(Deserialize)]
struct LabFile {
    hosts: Vec<LabHost>,
    #[serde(default)]
    classes: Option<LabClasses>,
}

/// The switch's classes as `rocesw lab up` writes them into the lab file: the DSCPs that
/// cross it losslessly and its DSCP → priority map.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct LabClasses {
    /// Lossless DSCPs, lowest first (empty: none).
    #[serde(default)]
    pub lossless_dscps: Vec<u8>,
    /// DSCP → priority, as `--prio-map` takes it.
    #[serde(default)]
    pub prio_map: String,
}

/// A lab file: its hosts, and its switch's classes if the file carries them.
#[derive(Debug, Clone)]
pub struct Lab {
    /// The hosts, in order.
    pub hosts: Vec<HostSpec>,
    /// `None` for a lab file without them (hand-written, or from an older rocesw).
    pub classes: Option<LabClasses>,
}

#[derive(Deserialize)]
struct LabHost {
    netns: String,
    host_if: String,
    mac: String,
    ipv4: String,
    #[serde(default)]
    name: Option<String>,
}

/// A lab state file: `{"hosts":[{"netns":..,"host_if":..,"mac":"02:..","ipv4":".."}],
/// "classes":{"lossless_dscps":[..],"prio_map":".."}}` (`classes` optional, other fields
/// ignored; `ipv4` may carry a prefix length).
pub fn parse_lab(text: &str) -> Result<Lab> {
    let lab: LabFile = serde_json::from_str(text).context("lab file: expected {\"hosts\":[...]}")?;
    let hosts = lab
        .hosts
        .into_iter()
        .map(|h| {
            Ok(HostSpec {
                name: h.name.unwrap_or_else(|| h.netns.clone()),
                netns: Some(h.netns),
                iface: h.host_if,
                mac: Some(parse_mac(&h.mac)?),
                ip: parse_ipv4(&h.ipv4)?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Lab {
        hosts,
        classes: lab.classes,
    })
}

/// Runs `pattern` over `hosts`: senders start together `lead_ns` after every host is ready
/// and send for the configured duration; receivers keep listening after that until every frame
/// sent has arrived or been seen lost, at most `drain_ns` ([`Drain`]; the report says which).
pub fn run(hosts: &[HostSpec], pattern: Pattern, cfg: &TrafficConfig, drain_ns: u64) -> Result<Report> {
    if hosts.len() < 2 {
        bail!("coordinate needs at least two hosts");
    }
    cfg.validate()?;
    let pairs = pattern.pairs(hosts.len());
    let mut roles = vec![HostRole::default(); hosts.len()];
    for &(s, d) in &pairs {
        let dst = &hosts[d];
        let mac = dst
            .mac
            .ok_or_else(|| anyhow!("host {} needs a MAC address", dst.name))?;
        roles[s].dests.push(Dest { mac, ip: dst.ip });
        roles[d].receive = true;
    }
    let drain = Drain::new(hosts.len(), roles.iter().filter(|r| !r.dests.is_empty()).count());
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut gos = Vec::new();
    let mut threads = Vec::new();
    for (i, (spec, role)) in hosts.iter().cloned().zip(roles).enumerate() {
        let (go_tx, go_rx) = mpsc::channel();
        gos.push(go_tx);
        let ready = ready_tx.clone();
        let cfg = cfg.clone();
        let name = spec.name.clone();
        let slot = DrainSlot {
            drain: drain.clone(),
            host: i,
        };
        let t = std::thread::Builder::new()
            .name(format!("rocegen-{name}"))
            .spawn(move || {
                run_host(
                    spec,
                    role,
                    cfg,
                    Start::Sync {
                        ready,
                        go: go_rx,
                        drain: Some(slot),
                    },
                )
            })
            .context("spawning a host thread")?;
        threads.push(t);
    }
    drop(ready_tx);
    let mut errors = Vec::new();
    for _ in 0..hosts.len() {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(_) => errors.push("a host thread died during set-up".into()),
        }
    }
    if errors.is_empty() {
        // A little lead so every thread is waiting on its clock, not waking up.
        let start = now_ns() + 20_000_000;
        let stop = start + cfg.duration_ns + drain_ns;
        for g in &gos {
            let _ = g.send((start, stop));
        }
    }
    drop(gos);
    let mut results: Vec<HostResult> = Vec::new();
    for t in threads {
        match t.join() {
            Ok(Ok(r)) => results.push(r),
            Ok(Err(e)) => errors.push(format!("{e:#}")),
            Err(_) => errors.push("a host thread panicked".into()),
        }
    }
    if !errors.is_empty() {
        bail!("coordinate failed:\n  {}", errors.join("\n  "));
    }
    let mut report = Report::build("coordinate", Some(pattern.name()), cfg, &results);
    let end = results.iter().map(|r| r.end_ns).max().unwrap_or(0);
    let stopped = drain
        .senders_stopped_ns()
        .unwrap_or_else(|| results.iter().map(|r| r.tx_stop_ns).max().unwrap_or(end));
    report.drain = Some(DrainReport {
        bound_s: drain_ns as f64 / 1e9,
        waited_s: end.saturating_sub(stopped) as f64 / 1e9,
        drained: drain.completed(),
        unaccounted: drain.unaccounted(),
    });
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_hosts() {
        assert_eq!(Pattern::Incast.pairs(3), vec![(1, 0), (2, 0)]);
        assert_eq!(Pattern::OneToMany.pairs(3), vec![(0, 1), (0, 2)]);
        assert_eq!(Pattern::AllToAll.pairs(3).len(), 6);
        let h = parse_host("h1:veth0:02:00:00:00:00:01:10.0.0.1").unwrap();
        assert_eq!(h.netns.as_deref(), Some("h1"));
        assert_eq!(
            (h.iface.as_str(), h.mac, h.ip),
            ("veth0", Some([2, 0, 0, 0, 0, 1]), [10, 0, 0, 1])
        );
        assert!(parse_host("h1:veth0:10.0.0.1").is_err());
        let lab = parse_lab(
            r#"{"hosts":[{"netns":"a","host_if":"e0","mac":"02:00:00:00:00:0a","ipv4":"10.0.0.1/24","x":1}]}"#,
        )
        .unwrap();
        assert_eq!(lab.hosts[0].ip, [10, 0, 0, 1]);
        assert_eq!(lab.hosts[0].iface, "e0");
        assert_eq!(lab.classes, None);
        let lab = parse_lab(r#"{"hosts":[],"classes":{"lossless_dscps":[3,4],"prio_map":"3=3,4=4"}}"#).unwrap();
        assert_eq!(lab.classes.unwrap().lossless_dscps, [3, 4]);
    }
}

//! What `rocesw run` prints when it stops, and the summary file it writes: the switch's
//! counters (as replay's summary), then whatever was lost or held outside the switch's
//! pipeline (an undrained queue, frames the interfaces refused, an emulated peer that waited,
//! receive rings that overflowed, DPDK drivers' own counters).

use crate::runtime::worker::RunOutcome;
use std::fmt::Write as _;

/// How far behind real time the emulated links must have fallen for the end of a run to say so:
/// a descheduled round or two on a shared machine is not news.
const WIRES_BEHIND_WORTH_SAYING_NS: u64 = 10_000_000;

/// The text printed on standard output at the end of a run.
pub fn text(outcome: &RunOutcome, cfg: &controlplane::Config) -> String {
    let mut o = crate::report::human_summary(&outcome.snapshot, "uptime", outcome.uptime_ns);
    crossing(&mut o, &outcome.snapshot);
    if outcome.undrained > 0 {
        let _ = writeln!(o, "drain timed out: {} frames were still queued", outcome.undrained);
    }
    if outcome.tx_dropped > 0 {
        let _ = writeln!(
            o,
            "{} frames could not be handed to the interfaces (TX ring full or link down)",
            outcome.tx_dropped
        );
    }
    for p in &outcome.snapshot.ports {
        let Some(peer) = p.peer else { continue };
        let held: u64 = peer.held_frames.iter().sum();
        if held > 0 || peer.stalled_reads > 0 {
            // Outside the switch's buffer: the emulated NIC at the far end obeyed PFC.
            let by_prio: Vec<String> = (0..8)
                .filter(|&q| peer.held_frames[q] > 0)
                .map(|q| {
                    format!(
                        "p{q}: {} frames, {:.1} µs mean",
                        peer.held_frames[q],
                        peer.held_ns[q] as f64 / peer.held_frames[q] as f64 / 1e3
                    )
                })
                .collect();
            let _ = writeln!(
                o,
                "port {}: emulated peer held {held} frames while paused ({}); {} stalled reads",
                p.label(),
                by_prio.join(", "),
                peer.stalled_reads
            );
        }
        let backpressure: u64 = peer.backpressure_xoff.iter().sum();
        if backpressure > 0 {
            let _ = writeln!(
                o,
                "port {}: the emulated NIC paused its host {backpressure} times (XOFF sent to the host: it wrote faster than the port's line rate)",
                p.label()
            );
        }
    }
    if outcome.wires_behind_ns >= WIRES_BEHIND_WORTH_SAYING_NS {
        let _ = writeln!(
            o,
            "the emulated links fell up to {:.0} ms behind real time: the worker could not keep up \
             with their line rate (busy cores?), so they ran slower and their hosts were paused",
            outcome.wires_behind_ns as f64 / 1e6
        );
    }
    for (i, st) in &outcome.backends {
        if let Some(line) = backend_losses(&cfg.ports[*i], st) {
            let _ = writeln!(o, "{line}");
        }
    }
    for (i, st) in &outcome.backends {
        let p = &cfg.ports[*i];
        if let Some(d) = &p.dpdk {
            let _ = writeln!(
                o,
                "port {} ({}): driver counters: imissed {}, ierrors {}, oerrors {}, rx_nombuf {}; \
                 {} sends found no free mbuf",
                p.label(),
                d.split(',').next().unwrap_or(d),
                st.imissed,
                st.ierrors,
                st.oerrors,
                st.rx_nombuf,
                st.tx_nombuf
            );
        }
    }
    o
}

/// What port `p`'s backend lost or refused outside the pipeline, in the words of that backend,
/// or `None` when nothing. Only AF_PACKET has a kernel receive ring to overflow; a DPDK port's
/// ring losses are the driver's `imissed` (said on its own line), and what each backend skips
/// as oversize differs (a capture's record, a ring slot, chained mbufs).
fn backend_losses(p: &controlplane::PortConfig, st: &crate::io::PortStats) -> Option<String> {
    let (ring, skipped) = match (&p.interface, &p.pcap, &p.dpdk) {
        (_, _, Some(_)) => (
            "TX ring",
            "received frames dropped (spread over chained mbufs, or shorter than an Ethernet header)",
        ),
        (Some(_), _, _) => (
            "TX ring",
            "received frames skipped (larger than a ring slot, or shorter than an Ethernet header)",
        ),
        _ => (
            "output",
            "capture records skipped (cut by a snap length, too long, or shorter than an Ethernet header)",
        ),
    };
    let mut parts = Vec::new();
    if st.rx_kernel_drops > 0 {
        parts.push(format!(
            "the kernel dropped {} received frames (receive ring full: the switch polled too slowly)",
            st.rx_kernel_drops
        ));
    }
    if st.tx_ring_full > 0 {
        parts.push(format!("{} sends found the {ring} full", st.tx_ring_full));
    }
    if st.rx_oversize > 0 {
        parts.push(format!("{} {skipped}", st.rx_oversize));
    }
    (!parts.is_empty()).then(|| format!("port {}: {}", p.label(), parts.join(", ")))
}

/// With several workers, how much traffic crossed between them, and what to do about it: the
/// one figure that says whether the ports' placement on workers suits the traffic. Nothing
/// while no frame crossed (one worker, or ports placed well).
fn crossing(o: &mut String, s: &controlplane::snapshot::Snapshot) {
    let crossed: u64 = s.ports.iter().map(|p| p.crossed_out).sum();
    if crossed == 0 {
        return;
    }
    let by_port: Vec<String> = s
        .ports
        .iter()
        .filter(|p| p.crossed_out > 0)
        .map(|p| format!("port {}: {}", p.label(), p.crossed_out))
        .collect();
    let _ = writeln!(
        o,
        "crossed between workers: {crossed} of {} frames received ({:.1} %) left through a port of \
         another worker ({}); a frame that crosses takes 2-2.7 times the CPU time of one that stays \
         (bench/README.md, \"Many cores\"), so ports that exchange traffic belong on one worker \
         (`[[port]] worker`)",
        s.totals.rx_packets,
        crossed as f64 * 100.0 / s.totals.rx_packets.max(1) as f64,
        by_port.join(", ")
    );
}

/// `--summary`'s JSON: the switch's snapshot, each port's backend counters, the uptime and
/// what the drain left.
pub fn summary_json(outcome: &RunOutcome, cfg: &controlplane::Config) -> serde_json::Value {
    let ports: Vec<serde_json::Value> = outcome
        .backends
        .iter()
        .map(|(i, st)| serde_json::json!({"id": cfg.ports[*i].id, "backend": st}))
        .collect();
    serde_json::json!({"switch": outcome.snapshot, "interfaces": ports, "uptime_ns": outcome.uptime_ns, "undrained": outcome.undrained, "wires_behind_ns": outcome.wires_behind_ns})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end of a run says what was lost outside the pipeline, port by port, after the
    /// counters; a clean run prints the counters alone.
    #[test]
    fn the_end_of_a_run_says_what_was_lost_outside_the_switch() {
        let cfg = crate::test_config();
        let sw = crate::Switch::new(&cfg, 1);
        let clean = RunOutcome {
            snapshot: sw.snapshot(0),
            uptime_ns: 2_000_000,
            undrained: 0,
            tx_dropped: 0,
            backends: vec![(0, crate::io::PortStats::default())],
            wires_behind_ns: 9_000_000,
        };
        let t = text(&clean, &cfg);
        assert_eq!(t, crate::report::human_summary(&clean.snapshot, "uptime", 2_000_000));
        assert!(t.starts_with("uptime 2.000 ms\n"), "{t}");
        // A long run's uptime reads in seconds.
        let long = crate::report::human_summary(&clean.snapshot, "uptime", 605_997_546_000);
        assert!(long.starts_with("uptime 605.998 s\n"), "{long}");
        let lossy = RunOutcome {
            undrained: 3,
            tx_dropped: 5,
            wires_behind_ns: 250_000_000,
            backends: vec![(
                1,
                crate::io::PortStats {
                    rx_kernel_drops: 40,
                    ..Default::default()
                },
            )],
            ..clean
        };
        let t = text(&lossy, &cfg);
        let tail: Vec<&str> = t.lines().rev().take(4).collect();
        assert_eq!(
            tail,
            [
                format!(
                    "port {}: the kernel dropped 40 received frames (receive ring full: the switch polled too slowly)",
                    cfg.ports[1].id
                )
                .as_str(),
                "the emulated links fell up to 250 ms behind real time: the worker could not keep up \
                 with their line rate (busy cores?), so they ran slower and their hosts were paused",
                "5 frames could not be handed to the interfaces (TX ring full or link down)",
                "drain timed out: 3 frames were still queued",
            ],
            "{t}"
        );
        let j = summary_json(&lossy, &cfg);
        assert_eq!(j["interfaces"][0]["backend"]["rx_kernel_drops"], 40);
        assert_eq!(j["undrained"], 3);
        assert_eq!(j["wires_behind_ns"], 250_000_000);
    }

    /// Issue 41 item 11: a DPDK port (an emulated net_pcap one at the end of a lab run) whose
    /// transmit ring was full printed AF_PACKET's "kernel dropped 0 received frames (receive
    /// ring full ...)". Each backend's losses are worded for it, and only those that happened.
    #[test]
    fn backend_losses_are_worded_by_backend() {
        let mut cfg = crate::test_config();
        let st = crate::io::PortStats {
            tx_ring_full: 7,
            rx_oversize: 2,
            ..Default::default()
        };
        let line = |cfg: &controlplane::Config| backend_losses(&cfg.ports[0], &st).unwrap();
        cfg.ports[0].dpdk = Some("net_pcap0,rx_pcap=a.pcap,tx_pcap=b.pcap".into());
        let dpdk = line(&cfg);
        assert_eq!(
            dpdk,
            format!(
                "port {}: 7 sends found the TX ring full, 2 received frames dropped (spread over chained \
                 mbufs, or shorter than an Ethernet header)",
                cfg.ports[0].id
            )
        );
        cfg.ports[0].dpdk = None;
        cfg.ports[0].interface = Some("veth0".into());
        assert!(line(&cfg).contains("larger than a ring slot"), "{}", line(&cfg));
        cfg.ports[0].interface = None;
        assert!(line(&cfg).contains("7 sends found the output full"), "{}", line(&cfg));
        for l in [dpdk, line(&cfg)] {
            assert!(!l.contains("kernel"), "{l}");
        }
        assert_eq!(backend_losses(&cfg.ports[0], &Default::default()), None);
    }

    /// Frames that crossed between workers are said after the counters, with the share of all
    /// received and the ports they came in on; the summary carries them per port.
    #[test]
    fn the_end_of_a_run_says_how_much_crossed_between_workers() {
        let cfg = crate::test_config();
        let sw = crate::Switch::new(&cfg, 1);
        let mut snapshot = sw.snapshot(0);
        snapshot.totals.rx_packets = 400;
        snapshot.ports[0].crossed_out = 30;
        snapshot.ports[2].crossed_out = 20;
        let outcome = RunOutcome {
            snapshot,
            uptime_ns: 1_000_000,
            undrained: 0,
            tx_dropped: 0,
            backends: vec![],
            wires_behind_ns: 0,
        };
        let t = text(&outcome, &cfg);
        let line = t
            .lines()
            .find(|l| l.starts_with("crossed between workers"))
            .unwrap_or_else(|| panic!("{t}"));
        assert!(
            line.starts_with(
                "crossed between workers: 50 of 400 frames received (12.5 %) left through a port of another worker"
            ),
            "{line}"
        );
        let ports = format!("(port {}: 30, port {}: 20)", cfg.ports[0].id, cfg.ports[2].id);
        assert!(line.contains(&ports), "{line}");
        assert!(line.ends_with("belong on one worker (`[[port]] worker`)"), "{line}");
        let j = summary_json(&outcome, &cfg);
        assert_eq!(j["switch"]["ports"][0]["crossed_out"], 30);
        assert!(j["switch"]["ports"][1].get("crossed_out").is_none(), "left out while 0");
    }
}

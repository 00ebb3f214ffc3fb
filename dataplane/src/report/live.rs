//! Once-a-second figures while `rocesw run --stats` (and the demo) switch.
//!
//! Every count on a line is what happened in the last interval (marked `+`), rates are over
//! that interval, and queue depths are as of now; a legend says so once, so nobody reads a
//! cumulative PFC count next to per-interval marks. Each line starts with the time since the
//! start and the interval it covers. Units as `rocectl show` and `watch` (README, "Units"):
//! frames as counts, bits in Gb/s, buffer levels in bytes (cells × the cell size) with
//! B/KiB/MiB suffixes, times in ms.

use crate::report::Snapshot;

/// The legend printed before the first line.
pub const LEGEND: &str = "each line: since start, interval; per port, over the interval: rx/tx in Gb/s | queue depths \
                          now, in bytes | +ce frames CE-marked \
                          | +cnp CNPs sent | +pfc_tx PFC frames sent | +pfc_rx PFC frames received | paused: ms \
                          this port's egress was held by received PFC | +drop frames lost, any reason (rx_ring: \
                          lost in the port's receive ring before the switch read them)";

/// One port's cumulative figures at one time.
#[derive(Clone, Copy, Default)]
struct PortTotals {
    rx_bytes: u64,
    tx_bytes: u64,
    ce: u64,
    cnp: u64,
    pfc_tx: u64,
    pfc_rx: u64,
    paused_ns: u64,
    drops: u64,
    ring_drops: u64,
}

/// Turns successive snapshots into the once-a-second `--stats` lines; it keeps the last totals to
/// subtract.
pub struct Printer {
    cnp_queue: usize,
    cell_bytes: u64,
    last: Option<(u64, Vec<PortTotals>)>,
}

impl Printer {
    /// A printer for a switch running `cfg` (its CNP queue and cell size).
    pub fn new(cfg: &controlplane::Config) -> Self {
        Printer {
            cnp_queue: cfg.cnp.queue as usize & 7,
            cell_bytes: u64::from(cfg.buffer.cell_bytes),
            last: None,
        }
    }

    fn totals(&self, s: &Snapshot) -> Vec<PortTotals> {
        s.ports
            .iter()
            .map(|p| PortTotals {
                rx_bytes: p.rx_bytes,
                tx_bytes: p.tx_bytes,
                ce: p.ecn_marked,
                cnp: p.queues[self.cnp_queue].tx_packets,
                pfc_tx: p.pfc_tx.iter().sum(),
                pfc_rx: p.pfc_rx.iter().sum(),
                paused_ns: p.paused_ns.iter().copied().max().unwrap_or(0),
                drops: p.drops.total(),
                ring_drops: p.drops.get("rx_ring"),
            })
            .collect()
    }

    /// The line for `s` at `now` (None for the first call, which only sets the baseline).
    pub fn line(&mut self, s: &Snapshot, now: u64) -> Option<String> {
        let cur = self.totals(s);
        let out = self.last.as_ref().map(|(t0, prev)| {
            let dt = (now.saturating_sub(*t0)).max(1) as f64 / 1e9;
            let mut line = format!("since start {:.1} s, interval {dt:.1} s", now as f64 / 1e9);
            for (p, (c, o)) in s.ports.iter().zip(cur.iter().zip(prev)) {
                let queues: Vec<String> = p
                    .queues
                    .iter()
                    .filter(|q| q.depth_cells > 0)
                    .map(|q| {
                        let bytes = u64::from(q.depth_cells) * self.cell_bytes;
                        format!("q{}:{}", q.queue, controlplane::units::human_bytes(bytes))
                    })
                    .collect();
                // `p3`, or the port's name (`Ethernet8`) where the config gives one.
                let who = p.name.clone().unwrap_or_else(|| format!("p{}", p.id));
                line += &format!(
                    " | {who} rx {:.3}Gb/s tx {:.3}Gb/s {} +ce {} +cnp {} +pfc_tx {} +pfc_rx {} paused {:.1}ms",
                    c.rx_bytes.saturating_sub(o.rx_bytes) as f64 * 8.0 / dt / 1e9,
                    c.tx_bytes.saturating_sub(o.tx_bytes) as f64 * 8.0 / dt / 1e9,
                    if queues.is_empty() {
                        "q -".to_string()
                    } else {
                        queues.join(",")
                    },
                    c.ce.saturating_sub(o.ce),
                    c.cnp.saturating_sub(o.cnp),
                    c.pfc_tx.saturating_sub(o.pfc_tx),
                    c.pfc_rx.saturating_sub(o.pfc_rx),
                    c.paused_ns.saturating_sub(o.paused_ns) as f64 / 1e6,
                );
                line += &format!(" +drop {}", c.drops.saturating_sub(o.drops));
                let ring = c.ring_drops.saturating_sub(o.ring_drops);
                if ring > 0 {
                    line += &format!(" (rx_ring {ring})");
                }
            }
            line
        });
        self.last = Some((now, cur));
        out
    }

    /// Prints the legend before the first figures, then one line per call (to stderr).
    pub fn print(&mut self, s: &Snapshot, now: u64) {
        if self.last.is_none() {
            eprintln!("{LEGEND}");
        }
        if let Some(line) = self.line(s, now) {
            eprintln!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts on a line are the interval's, not the totals: PFC sent before the interval does
    /// not show again, and sent and received are told apart.
    #[test]
    fn lines_show_what_happened_in_the_interval() {
        let cfg = crate::test_config();
        let sw = crate::Switch::new(&cfg, 1);
        let mut s = sw.snapshot(0);
        let mut printer = Printer::new(&cfg);
        s.ports[0].pfc_tx[3] = 100;
        s.ports[0].ecn_marked = 50;
        assert!(printer.line(&s, 0).is_none(), "the first call sets the baseline");
        s.ports[0].pfc_tx[3] = 107;
        s.ports[0].pfc_rx[3] = 2;
        s.ports[0].ecn_marked = 53;
        let line = printer.line(&s, 1_000_000_000).unwrap();
        assert!(
            line.contains("p0 ")
                && line.contains("+ce 3 ")
                && line.contains("+pfc_tx 7 ")
                && line.contains("+pfc_rx 2 "),
            "{line}"
        );
        assert!(line.contains("+drop 0") && !line.contains("rx_ring"), "{line}");
        // The header and the units (issue 23 item 6): since start and the interval, rates in
        // Gb/s, queue depths in bytes at the config's cell size.
        assert!(
            line.starts_with("since start 1.0 s, interval 1.0 s | p0 rx 0.000Gb/s tx 0.000Gb/s q - "),
            "{line}"
        );
        let again = printer.line(&s, 2_000_000_000).unwrap();
        assert!(again.contains("+pfc_tx 0 ") && again.contains("+ce 0 "), "{again}");
        // Frames the receive ring lost are drops like the switch's own, and say where.
        s.ports[1].drops.add("rx_ring", 40);
        s.ports[1].drops.add("wred", 2);
        s.ports[2].queues[3].depth_cells = 90;
        s.ports[2].queues[3].depth_bytes = 20_000;
        let lossy = printer.line(&s, 3_500_000_000).unwrap();
        let cell = u64::from(cfg.buffer.cell_bytes);
        let depth = format!(" q3:{} ", controlplane::units::human_bytes(90 * cell));
        assert!(lossy.starts_with("since start 3.5 s, interval 1.5 s |"), "{lossy}");
        assert!(
            lossy.split("| p2 ").nth(1).unwrap().contains(&depth),
            "{depth}: {lossy}"
        );
        assert!(lossy.contains("+drop 42 (rx_ring 40)"), "{lossy}");
        assert!(
            lossy.contains("| p0 ") && lossy.split("| p1 ").next().unwrap().contains("+drop 0"),
            "{lossy}"
        );
    }
}

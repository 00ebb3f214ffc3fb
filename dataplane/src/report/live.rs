//! What `rocesw run --stats` (and the demo) print while the switch runs: a few short lines
//! when something changed, not the same long line every second.
//!
//! About once a second the printer gets a snapshot and compares the last second with the one
//! before: a block is printed only when the picture changed (a port started or stopped moving
//! traffic, its rate doubled or halved, a queue filled or emptied, PFC started or stopped, a
//! priority was paused or released, a watchdog storm began or ended, the emulated wires fell
//! behind real time or caught up), whenever anything was lost, and every
//! [`HEARTBEAT_NS`] while traffic flows. A block is a header (the time since the start, the
//! interval, how far the emulated wires are behind real time when they are) and one line per
//! port that did or holds something; idle ports are left out, an idle switch says `idle` once.
//!
//! Rates and paused time are the last interval's; counts (marked `+`) are everything since the
//! previous block, so a skipped second hides nothing (the header says over how long when that
//! is longer than the interval); queue depths and "paused now" are as of now. Units as
//! `rocectl show` and `watch` (README, "Units"), but bit rates below 1 Gb/s in Mb/s or kb/s
//! (a 10M lab port's traffic would read 0.000Gb/s); buffer levels in bytes (cells ×
//! the cell size) with B/KiB/MiB suffixes, times in ms.

use crate::report::Snapshot;
use controlplane::NUM_TC;

/// The legend printed before the first block.
pub const LEGEND: &str = "--stats: a block when something changes (and every 10 s while traffic flows): since start, \
                          interval; then a line per port that is busy: rx/tx rates over the interval (Gb/s, Mb/s, kb/s) | queues: depths \
                          now, in bytes | +ce CE-marked, +cnp CNPs sent, +pfc_tx/+pfc_rx PFC frames sent/received, \
                          +drop frames lost (rx_ring: lost in the port's receive ring before the switch read them), \
                          counted since the previous block | paused: ms this port's egress was held by received PFC \
                          in the interval, `now p3` the priorities held right now | storm: priorities whose queue \
                          the PFC watchdog holds in a storm now. `wires N ms behind`: the emulated links run behind \
                          real time (the worker cannot keep up with them)";

/// While traffic flows and nothing changes, a block at least this often.
pub const HEARTBEAT_NS: u64 = 10_000_000_000;

/// Emulated wires less than this behind real time are not worth a word (a round's jitter).
const BEHIND_WORTH_SAYING_NS: u64 = 1_000_000;

/// One port's cumulative figures at one time.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
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

impl PortTotals {
    fn less(&self, o: &PortTotals) -> PortTotals {
        PortTotals {
            rx_bytes: self.rx_bytes.saturating_sub(o.rx_bytes),
            tx_bytes: self.tx_bytes.saturating_sub(o.tx_bytes),
            ce: self.ce.saturating_sub(o.ce),
            cnp: self.cnp.saturating_sub(o.cnp),
            pfc_tx: self.pfc_tx.saturating_sub(o.pfc_tx),
            pfc_rx: self.pfc_rx.saturating_sub(o.pfc_rx),
            paused_ns: self.paused_ns.saturating_sub(o.paused_ns),
            drops: self.drops.saturating_sub(o.drops),
            ring_drops: self.ring_drops.saturating_sub(o.ring_drops),
        }
    }
}

/// What a block says about the switch, coarsely: the block is printed when this changes.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
struct Picture {
    /// Per busy port: its label and what it does, in coarse steps.
    ports: Vec<(String, PortPicture)>,
    /// log2 of the emulated wires' lag in ms (+1), 0 while they keep up.
    behind: u32,
}

#[derive(Clone, PartialEq, Eq, Debug, Default)]
struct PortPicture {
    /// log2 of the rx and tx rates in Mb/s (+1), 0 when nothing moved.
    rx: u32,
    tx: u32,
    /// Queues holding frames now (mask).
    queued: u8,
    /// PFC sent, received, CE marks in the interval (yes or no).
    pfc_tx: bool,
    pfc_rx: bool,
    ce: bool,
    /// Priorities paused and stormed now (masks).
    paused: u8,
    storm: u8,
}

/// 0 for 0, else 1 + log2(x): a step each time `x` doubles.
fn octave(x: u64) -> u32 {
    if x == 0 {
        0
    } else {
        64 - x.leading_zeros()
    }
}

fn mask(v: &[bool; NUM_TC]) -> u8 {
    v.iter().enumerate().fold(0, |m, (i, &b)| m | (u8::from(b) << i))
}

fn prios(m: u8) -> String {
    (0..NUM_TC)
        .filter(|p| m & (1 << p) != 0)
        .map(|p| format!("p{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Turns successive snapshots into the `--stats` blocks; it keeps the last totals and those of
/// the last block printed to subtract, and the picture that block showed.
pub struct Printer {
    cnp_queue: usize,
    cell_bytes: u64,
    /// The previous snapshot's time and totals (rates are over the interval since).
    last: Option<(u64, Vec<PortTotals>)>,
    /// The last printed block's time, totals and picture (counts are since then).
    shown: Option<(u64, Vec<PortTotals>, Picture)>,
}

impl Printer {
    /// A printer for a switch running `cfg` (its CNP queue and cell size).
    pub fn new(cfg: &controlplane::Config) -> Self {
        Printer {
            cnp_queue: cfg.cnp.queue as usize & 7,
            cell_bytes: u64::from(cfg.buffer.cell_bytes),
            last: None,
            shown: None,
        }
    }

    fn totals(&self, s: &Snapshot) -> Vec<PortTotals> {
        s.ports
            .iter()
            .map(|p| PortTotals {
                rx_bytes: p.rx_bytes,
                tx_bytes: p.tx_bytes,
                ce: p.ecn_marked,
                cnp: p.queues.get(self.cnp_queue).map_or(0, |q| q.tx_packets),
                pfc_tx: p.pfc_tx.iter().sum(),
                pfc_rx: p.pfc_rx.iter().sum(),
                paused_ns: p.paused_ns.iter().copied().max().unwrap_or(0),
                drops: p.drops.total(),
                ring_drops: p.drops.get("rx_ring"),
            })
            .collect()
    }

    /// The block for `s` at `now`, or `None`: for the first call (which only sets the
    /// baseline) and while nothing changed (see the module doc).
    pub fn line(&mut self, s: &Snapshot, now: u64) -> Option<String> {
        let cur = self.totals(s);
        let Some((t0, prev)) = self.last.replace((now, cur.clone())) else {
            self.shown = Some((now, cur, Picture::default()));
            return None;
        };
        let (shown_t, shown_totals, shown_picture) =
            self.shown.clone().unwrap_or((t0, prev.clone(), Picture::default()));
        let dt_ns = now.saturating_sub(t0).max(1);
        let dt = dt_ns as f64 / 1e9;
        let behind_ns = (s.ports.iter())
            .filter_map(|p| p.peer.map(|peer| peer.behind_ns))
            .max()
            .unwrap_or(0);
        let behind_ns = if behind_ns >= BEHIND_WORTH_SAYING_NS {
            behind_ns
        } else {
            0
        };
        let mut picture = Picture {
            ports: Vec::new(),
            behind: octave(behind_ns / 1_000_000),
        };
        let mut lines = Vec::new();
        let mut lost = false;
        for (i, p) in s.ports.iter().enumerate() {
            let (Some(c), Some(o)) = (cur.get(i), prev.get(i)) else {
                continue;
            };
            let d = c.less(o);
            let since = c.less(shown_totals.get(i).unwrap_or(o));
            let queues: Vec<String> = (p.queues.iter())
                .filter(|q| q.depth_cells > 0)
                .map(|q| {
                    let bytes = u64::from(q.depth_cells) * self.cell_bytes;
                    format!("q{}:{}", q.queue, controlplane::units::human_bytes(bytes))
                })
                .collect();
            let pic = PortPicture {
                rx: octave(d.rx_bytes * 8 / dt_ns.div_ceil(1000).max(1)),
                tx: octave(d.tx_bytes * 8 / dt_ns.div_ceil(1000).max(1)),
                queued: (p.queues.iter())
                    .filter(|q| q.depth_cells > 0)
                    .fold(0, |m, q| m | (1 << (q.queue & 7))),
                pfc_tx: d.pfc_tx > 0,
                pfc_rx: d.pfc_rx > 0,
                ce: d.ce > 0,
                paused: mask(&p.paused_now),
                storm: mask(&p.storm_now),
            };
            lost |= since.drops > 0;
            let moved = d.rx_bytes + d.tx_bytes + since.ce + since.cnp + since.pfc_tx + since.pfc_rx + d.paused_ns;
            if moved == 0 && since.drops == 0 && pic == PortPicture::default() {
                continue;
            }
            // `p3`, or the port's name (`Ethernet8`) where the config gives one.
            let who = p.name.clone().unwrap_or_else(|| format!("p{}", p.id));
            let mut line = format!(
                "  {who} rx {} tx {}",
                controlplane::units::human_bit_rate(d.rx_bytes as f64 * 8.0 / dt),
                controlplane::units::human_bit_rate(d.tx_bytes as f64 * 8.0 / dt),
            );
            if !queues.is_empty() {
                line += &format!(" | {}", queues.join(" "));
            }
            let counts: Vec<String> = [
                ("+ce", since.ce),
                ("+cnp", since.cnp),
                ("+pfc_tx", since.pfc_tx),
                ("+pfc_rx", since.pfc_rx),
            ]
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
            if !counts.is_empty() {
                line += &format!(" | {}", counts.join(" "));
            }
            if d.paused_ns > 0 || pic.paused != 0 {
                line += &format!(" | paused {:.1}ms", d.paused_ns as f64 / 1e6);
                if pic.paused != 0 {
                    line += &format!(", now {}", prios(pic.paused));
                }
            }
            if pic.storm != 0 {
                line += &format!(" | storm {}", prios(pic.storm));
            }
            if since.drops > 0 {
                line += &format!(" | +drop {}", since.drops);
                if since.ring_drops > 0 {
                    line += &format!(" (rx_ring {})", since.ring_drops);
                }
            }
            lines.push(line);
            picture.ports.push((who, pic));
        }
        let busy = !picture.ports.is_empty();
        let changed = picture != shown_picture;
        let heartbeat = busy && now.saturating_sub(shown_t) >= HEARTBEAT_NS;
        if !(changed || lost || heartbeat) {
            return None;
        }
        let mut out = format!("since start {:.1} s, interval {dt:.1} s", now as f64 / 1e9);
        if shown_t < t0 {
            out += &format!(" (counts: last {:.1} s)", now.saturating_sub(shown_t) as f64 / 1e9);
        }
        if behind_ns > 0 {
            out += &format!(", wires {:.1} ms behind real time", behind_ns as f64 / 1e6);
        }
        if lines.is_empty() {
            out += ": idle";
        }
        for l in lines {
            out += "\n";
            out += &l;
        }
        self.shown = Some((now, cur, picture));
        Some(out)
    }

    /// Prints the legend before the first figures, then each block (to stderr).
    pub fn print(&mut self, s: &Snapshot, now: u64) {
        if self.last.is_none() {
            eprintln!("{LEGEND}");
        }
        if let Some(block) = self.line(s, now) {
            eprintln!("{block}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// Counts on a line are what happened since the previous block, not the totals: PFC sent
    /// before does not show again, and sent and received are told apart; idle ports are left
    /// out.
    #[test]
    fn lines_show_what_happened_since_the_last_block() {
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
        let block = printer.line(&s, S).unwrap();
        assert_eq!(
            block,
            "since start 1.0 s, interval 1.0 s\n  p0 rx 0 tx 0 | +ce 3 +pfc_tx 7 +pfc_rx 2"
        );
        // Nothing more happened: the switch is idle now, which is news once.
        assert_eq!(
            printer.line(&s, 2 * S).unwrap(),
            "since start 2.0 s, interval 1.0 s: idle"
        );
        assert!(printer.line(&s, 3 * S).is_none(), "idle again is not news");
        // Frames the receive ring lost are drops like the switch's own, and say where; a
        // queue's depth is in bytes at the config's cell size.
        s.ports[1].drops.add("rx_ring", 40);
        s.ports[1].drops.add("wred", 2);
        s.ports[2].queues[3].depth_cells = 90;
        let lossy = printer.line(&s, 4_500_000_000).unwrap();
        let cell = u64::from(cfg.buffer.cell_bytes);
        let depth = controlplane::units::human_bytes(90 * cell);
        assert_eq!(
            lossy,
            format!(
                "since start 4.5 s, interval 1.5 s (counts: last 2.5 s)\n  p1 rx 0 tx 0 | +drop 42 (rx_ring 40)\n  \
                 p2 rx 0 tx 0 | q3:{depth}"
            )
        );
        assert!(lossy.lines().all(|l| l.len() < 100), "short lines: {lossy}");
    }

    /// The same traffic second after second prints nothing new until the heartbeat; a rate
    /// that doubles, a priority paused now, a storm and wires behind real time are news.
    #[test]
    fn a_block_comes_when_the_picture_changes() {
        let cfg = crate::test_config();
        let sw = crate::Switch::new(&cfg, 1);
        let mut s = sw.snapshot(0);
        let mut printer = Printer::new(&cfg);
        let mut t = 0;
        let mut step = |s: &mut Snapshot, rx_bytes: u64| {
            t += S;
            s.ports[0].rx_bytes += rx_bytes;
            s.ports[3].tx_bytes += rx_bytes;
            printer.line(s, t)
        };
        assert!(step(&mut s, 0).is_none());
        let first = step(&mut s, 100_000_000).unwrap();
        assert!(
            first.contains("p0 rx 800.0Mb/s tx 0\n") && first.contains("p3 rx 0 tx 800.0Mb/s"),
            "{first}"
        );
        // Steady, and a few percent off: nothing new.
        for k in 0..9 {
            assert_eq!(step(&mut s, 100_000_000 + k * 1_000_000), None, "second {k}");
        }
        // Ten seconds after the last block, a heartbeat, whose counts cover them all.
        let beat = step(&mut s, 100_000_000).unwrap();
        assert!(
            beat.starts_with("since start 12.0 s, interval 1.0 s (counts: last 10.0 s)"),
            "{beat}"
        );
        // Twice the rate is news.
        assert!(step(&mut s, 200_000_000).unwrap().contains("p0 rx 1.600Gb/s tx 0"));
        assert_eq!(step(&mut s, 200_000_000), None);
        // Received PFC holding priority 3 of port 3 now.
        s.ports[3].paused_now[3] = true;
        s.ports[3].paused_ns[3] += 250_000_000;
        s.ports[3].pfc_rx[3] += 5;
        let paused = step(&mut s, 200_000_000).unwrap();
        assert!(
            paused.contains("p3 rx 0 tx 1.600Gb/s | +pfc_rx 5 | paused 250.0ms, now p3"),
            "{paused}"
        );
        // The watchdog declares a storm: news; it stays: not.
        s.ports[3].storm_now[3] = true;
        assert!(step(&mut s, 200_000_000).unwrap().contains("| storm p3"));
        assert_eq!(step(&mut s, 200_000_000), None);
        // The emulated wires fall 570 ms behind real time: the header says so.
        s.ports[0].peer = Some(controlplane::snapshot::PeerReport {
            behind_ns: 570_000_000,
            ..Default::default()
        });
        let behind = step(&mut s, 200_000_000).unwrap();
        assert!(behind.contains(", wires 570.0 ms behind real time\n"), "{behind}");
        // Less than a millisecond is not worth a word, nor a block.
        s.ports[0].peer.as_mut().unwrap().behind_ns = 300_000;
        let caught_up = step(&mut s, 200_000_000).unwrap();
        assert!(!caught_up.contains("behind"), "{caught_up}");
        assert_eq!(step(&mut s, 200_000_000), None);
    }
}

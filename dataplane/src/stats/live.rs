//! Once-a-second figures while `rocesw run --stats` switches.

use crate::stats::report::Snapshot;

/// Per port: bytes received, bytes sent, CE marks, frames sent from the CNP queue.
type PortTotals = Vec<(u64, u64, u64, u64)>;

pub struct Printer {
    cnp_queue: usize,
    last: Option<(u64, PortTotals)>,
}

impl Printer {
    pub fn new(cfg: &controlplane::Config) -> Self {
        Printer {
            cnp_queue: cfg.cnp.queue as usize & 7,
            last: None,
        }
    }

    /// One line per second: per port the rates, the depth of every non-empty queue, CE
    /// marks and CNPs sent in the last interval, and PFC frames sent so far.
    pub fn print(&mut self, s: &Snapshot, now: u64) {
        let cur: PortTotals = s
            .ports
            .iter()
            .map(|p| {
                (
                    p.rx_bytes,
                    p.tx_bytes,
                    p.ecn_marked,
                    p.queues[self.cnp_queue].tx_packets,
                )
            })
            .collect();
        if let Some((t0, prev)) = &self.last {
            let dt = (now - t0) as f64 / 1e9;
            let mut line = String::new();
            for (p, (c, o)) in s.ports.iter().zip(cur.iter().zip(prev)) {
                let queues: Vec<String> = p
                    .queues
                    .iter()
                    .filter(|q| q.depth_bytes > 0)
                    .map(|q| format!("q{}:{}KB", q.queue, q.depth_bytes / 1000))
                    .collect();
                line += &format!(
                    " | p{} rx {:.2}G tx {:.2}G {} ce {} cnp {} pfc {}",
                    p.id,
                    (c.0 - o.0) as f64 * 8.0 / dt / 1e9,
                    (c.1 - o.1) as f64 * 8.0 / dt / 1e9,
                    if queues.is_empty() {
                        "q -".to_string()
                    } else {
                        queues.join(",")
                    },
                    c.2 - o.2,
                    c.3 - o.3,
                    p.pfc_tx.iter().sum::<u64>()
                );
            }
            eprintln!("{:>7.1}s{line}", now as f64 / 1e9);
        }
        self.last = Some((now, cur));
    }
}

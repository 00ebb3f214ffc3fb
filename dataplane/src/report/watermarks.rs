//! User and persistent buffer watermarks, kept by the control thread, not the packet path.
//!
//! The switch keeps one peak per figure (PG, queue, port, pool), as an ASIC keeps one hardware
//! watermark. Clearing either kind reads every peak and restarts them from the current use in
//! one step on each worker (the `SnapshotAndRestartPeaks` control request: a snapshot, then
//! `Switch::restart_peaks`); the peaks read are
//! folded into both accumulators first, then the cleared kind's accumulator is emptied. A
//! kind's watermark is then `max(its accumulator, the peak now)`: exact, and the packet path
//! does one max per figure, as before. (SONiC's flex counters do the same with the hardware's
//! read-and-clear watermarks.)

use controlplane::protocol::{WatermarkKind, WatermarksData};
use controlplane::snapshot::{Peaks, Snapshot};
use std::time::Instant;

struct Acc {
    peaks: Peaks,
    since: Instant,
}

impl Acc {
    fn new() -> Acc {
        Acc {
            peaks: Peaks::default(),
            since: Instant::now(),
        }
    }
}

/// The user and the persistent watermark accumulators, each since its own last clear.
pub struct Watermarks {
    user: Acc,
    persistent: Acc,
}

impl Default for Watermarks {
    fn default() -> Self {
        Watermarks {
            user: Acc::new(),
            persistent: Acc::new(),
        }
    }
}

impl Watermarks {
    fn acc(&mut self, kind: WatermarkKind) -> &mut Acc {
        match kind {
            WatermarkKind::User => &mut self.user,
            WatermarkKind::Persistent => &mut self.persistent,
        }
    }

    /// `snapshot`: the switch's counters now (peaks not restarted).
    pub fn read(&mut self, kind: WatermarkKind, snapshot: &Snapshot) -> WatermarksData {
        let acc = self.acc(kind);
        let since_ms = acc.since.elapsed().as_millis() as u64;
        let mut peaks = snapshot.peaks();
        peaks.raise_to(&acc.peaks);
        WatermarksData {
            kind,
            since_ms,
            ports: peaks.ports,
            buffer: peaks.buffer,
            pools: peaks.pools,
        }
    }

    /// `restarted`: the counters read in the same step that restarted the switch's peaks.
    pub fn clear(&mut self, kind: WatermarkKind, restarted: &Snapshot) {
        let found = restarted.peaks();
        for acc in [&mut self.user, &mut self.persistent] {
            acc.peaks.raise_to(&found);
        }
        *self.acc(kind) = Acc::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use controlplane::snapshot::{PoolBuffer, PortReport, QueueReport, Totals};

    fn snap(peak: u32, now: u32) -> Snapshot {
        Snapshot {
            ports: vec![PortReport {
                id: 4,
                rx_packets: 9,
                queues: vec![QueueReport {
                    queue: 3,
                    depth_cells: now,
                    peak_cells: peak,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            totals: Totals {
                rx_packets: 9,
                ..Default::default()
            },
            buffer: PoolBuffer {
                used_cells: now,
                peak_used_cells: peak,
                ..Default::default()
            },
            pools: Vec::new(),
        }
    }

    fn q3(d: &WatermarksData) -> u32 {
        d.ports[0].queues[0].peak_cells
    }

    #[test]
    fn user_and_persistent_clear_independently() {
        let mut w = Watermarks::default();
        let r = w.read(WatermarkKind::User, &snap(100, 5));
        assert_eq!(q3(&r), 100);
        assert_eq!(r.ports[0].id, 4);
        assert_eq!(r.ports[0].queues[0].queue, 3);
        let json = serde_json::to_value(&r).unwrap();
        assert!(
            json["ports"][0].get("rx_packets").is_none() && json["ports"][0]["queues"][0].get("depth_cells").is_none()
        );
        assert_eq!(r.buffer.peak_used_cells, 100);

        // Clear user: the switch's peak restarts at the current use (5).
        w.clear(WatermarkKind::User, &snap(100, 5));
        assert_eq!(q3(&w.read(WatermarkKind::User, &snap(5, 5))), 5);
        assert_eq!(
            q3(&w.read(WatermarkKind::Persistent, &snap(5, 5))),
            100,
            "persistent kept"
        );
        // A new, lower peak shows in user; persistent still has the old one.
        assert_eq!(q3(&w.read(WatermarkKind::User, &snap(40, 2))), 40);
        // Clear persistent: the 40 was seen since the user clear, so user keeps it.
        w.clear(WatermarkKind::Persistent, &snap(40, 2));
        assert_eq!(q3(&w.read(WatermarkKind::Persistent, &snap(2, 2))), 2);
        assert_eq!(q3(&w.read(WatermarkKind::User, &snap(2, 2))), 40);
        assert_eq!(q3(&w.read(WatermarkKind::Persistent, &snap(70, 1))), 70);
    }
}

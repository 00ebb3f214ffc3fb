//! User and persistent buffer watermarks, kept by the control thread, not the packet path.
//!
//! The switch keeps one peak per figure (PG, queue, port, pool), as an ASIC keeps one hardware
//! watermark. Clearing either kind reads every peak and restarts them from the current use in
//! one step on the pipeline worker (`Switch::snapshot_and_restart_peaks`); the peaks read are
//! folded into both accumulators first, then the cleared kind's accumulator is emptied. A
//! kind's watermark is then `max(its accumulator, the peak now)`: exact, and the packet path
//! does one max per figure, as before. (SONiC's flex counters do the same with the hardware's
//! read-and-clear watermarks.)

use controlplane::protocol::{WatermarkKind, WatermarksData};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Instant;

struct Acc {
    peaks: BTreeMap<String, u64>,
    since: Instant,
}

impl Acc {
    fn new() -> Acc {
        Acc {
            peaks: BTreeMap::new(),
            since: Instant::now(),
        }
    }
}

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

/// Keys that say where a figure is (kept in the view), besides the peaks themselves.
const IDS: [&str; 3] = ["id", "queue", "pg"];

/// Every `peak_*` number of a snapshot by its path (`ports/3/queues/1/peak_cells`).
fn peaks(v: &Value, path: &str, out: &mut Vec<(String, u64)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}/{k}");
                match x.as_u64() {
                    Some(n) if k.starts_with("peak") => out.push((p, n)),
                    _ => peaks(x, &p, out),
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                peaks(x, &format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The snapshot cut down to ids and peaks, each peak raised to the accumulator's value.
fn view(v: &Value, path: &str, acc: &BTreeMap<String, u64>) -> Option<Value> {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            let mut any = false;
            for (k, x) in m {
                let p = format!("{path}/{k}");
                if k.starts_with("peak") {
                    if let Some(n) = x.as_u64() {
                        out.insert(k.clone(), acc.get(&p).copied().unwrap_or(0).max(n).into());
                        any = true;
                    }
                } else if IDS.contains(&k.as_str()) {
                    out.insert(k.clone(), x.clone());
                } else if let Some(inner) = view(x, &p, acc) {
                    out.insert(k.clone(), inner);
                    any = true;
                }
            }
            any.then_some(Value::Object(out))
        }
        Value::Array(a) => {
            let items: Vec<Value> = a
                .iter()
                .enumerate()
                .filter_map(|(i, x)| view(x, &format!("{path}/{i}"), acc))
                .collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        _ => None,
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
    pub fn read(&mut self, kind: WatermarkKind, snapshot: &Value) -> WatermarksData {
        let acc = self.acc(kind);
        let since_ms = acc.since.elapsed().as_millis() as u64;
        let v = view(snapshot, "", &acc.peaks).unwrap_or(Value::Null);
        WatermarksData {
            kind,
            since_ms,
            ports: v.get("ports").cloned().unwrap_or(Value::Array(Vec::new())),
            buffer: v.get("buffer").cloned().unwrap_or(Value::Null),
        }
    }

    /// `restarted`: the counters read in the same step that restarted the switch's peaks.
    pub fn clear(&mut self, kind: WatermarkKind, restarted: &Value) {
        let mut found = Vec::new();
        peaks(restarted, "", &mut found);
        for acc in [&mut self.user, &mut self.persistent] {
            for (p, n) in &found {
                let e = acc.peaks.entry(p.clone()).or_insert(0);
                *e = (*e).max(*n);
            }
        }
        *self.acc(kind) = Acc::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snap(peak: u64, now: u64) -> Value {
        json!({"ports": [{"id": 4, "rx_packets": 9, "queues": [{"queue": 3, "depth_cells": now, "peak_cells": peak}]}],
               "totals": {"rx_packets": 9}, "buffer": {"used_cells": now, "peak_used_cells": peak}})
    }

    fn q3(d: &WatermarksData) -> u64 {
        d.ports[0]["queues"][0]["peak_cells"].as_u64().unwrap()
    }

    #[test]
    fn user_and_persistent_clear_independently() {
        let mut w = Watermarks::default();
        let r = w.read(WatermarkKind::User, &snap(100, 5));
        assert_eq!(q3(&r), 100);
        assert_eq!(r.ports[0]["id"], 4);
        assert_eq!(r.ports[0]["queues"][0]["queue"], 3);
        assert!(r.ports[0].get("rx_packets").is_none() && r.ports[0]["queues"][0].get("depth_cells").is_none());
        assert_eq!(r.buffer["peak_used_cells"], 100);

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

//! Prometheus metrics (OpenMetrics text, via prometheus-client) from a switch's `counters`
//! snapshot, for `rocectl daemon`.
//!
//! The snapshot is walked generically rather than field by field, so every counter the switch
//! reports is exported, including ones added later, under predictable names:
//! * `rocesw_port_<field>{switch,port}` for each number of a port (`rx_packets` →
//!   `rocesw_port_rx_packets_total`), with a `priority` label for the per-priority arrays
//!   (`pfc_tx`, `pfc_rx`, `watchdog_*`), `reason` for `drops`, and `paused_ns` exported as
//!   `rocesw_port_paused_seconds_total`;
//! * `rocesw_port_buffer_<field>`, `rocesw_queue_<field>{…,queue}`, `rocesw_pg_<field>{…,pg}`
//!   and `rocesw_pool_<field>` for the buffer figures;
//! * what is a level rather than a running total (cells in use, depths, peaks/watermarks) is a
//!   gauge; everything else is a counter.
//!
//! `totals` is left out: it is the sum over ports, which Prometheus computes itself.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

type Labels = Vec<(String, String)>;

/// Metrics being assembled: one family per name, gauges and counters apart.
#[derive(Default)]
pub struct Metrics {
    counters: BTreeMap<String, Family<Labels, Counter<f64, AtomicU64>>>,
    gauges: BTreeMap<String, Family<Labels, Gauge<f64, AtomicU64>>>,
    help: BTreeMap<String, String>,
}

/// A level, not a running total: the buffer in use now, queue depths, and peaks (watermarks).
fn is_level(field: &str) -> bool {
    field.contains("cells") || field.starts_with("depth") || field.starts_with("peak") || field.contains("watermark")
}

impl Metrics {
    pub fn counter(&mut self, name: &str, help: &str, labels: Labels, v: f64) {
        self.help.entry(name.to_string()).or_insert_with(|| help.to_string());
        self.counters
            .entry(name.to_string())
            .or_default()
            .get_or_create(&labels)
            .inc_by(v);
    }

    pub fn gauge(&mut self, name: &str, help: &str, labels: Labels, v: f64) {
        self.help.entry(name.to_string()).or_insert_with(|| help.to_string());
        self.gauges
            .entry(name.to_string())
            .or_default()
            .get_or_create(&labels)
            .set(v);
    }

    /// A number of the snapshot, as a counter or a gauge by its name.
    fn number(&mut self, prefix: &str, field: &str, labels: &Labels, v: f64) {
        let help = format!("rocesw {prefix} {field} (see controlplane/PROTOCOL.md, counters)");
        if let Some(base) = field.strip_suffix("_ns") {
            let name = format!("rocesw_{prefix}_{base}_seconds");
            let help = format!("rocesw {prefix} {base} time in seconds");
            if is_level(field) {
                self.gauge(&name, &help, labels.clone(), v / 1e9);
            } else {
                self.counter(&name, &help, labels.clone(), v / 1e9);
            }
        } else if is_level(field) {
            self.gauge(&format!("rocesw_{prefix}_{field}"), &help, labels.clone(), v);
        } else {
            self.counter(&format!("rocesw_{prefix}_{field}"), &help, labels.clone(), v);
        }
    }

    /// Every number of `obj` (one level deep; arrays by priority, objects by `key_label`).
    fn object(&mut self, prefix: &str, obj: &serde_json::Map<String, Value>, labels: &Labels, skip: &[&str]) {
        for (field, v) in obj {
            if skip.contains(&field.as_str()) {
                continue;
            }
            match v {
                Value::Number(n) => {
                    if let Some(x) = n.as_f64() {
                        self.number(prefix, field, labels, x);
                    }
                }
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if let Some(x) = item.as_f64() {
                            let mut l = labels.clone();
                            l.push(("priority".into(), i.to_string()));
                            self.number(prefix, field, &l, x);
                        }
                    }
                }
                Value::Object(map) if field == "drops" => {
                    for (reason, x) in map {
                        if let Some(x) = x.as_f64() {
                            let mut l = labels.clone();
                            l.push(("reason".into(), reason.clone()));
                            self.counter(
                                &format!("rocesw_{prefix}_drops"),
                                "rocesw frames dropped, by reason",
                                l,
                                x,
                            );
                        }
                    }
                }
                Value::Object(map) => {
                    let inner = format!("{prefix}_{field}");
                    self.object(&inner, map, labels, &[]);
                }
                _ => {}
            }
        }
    }

    /// Adds a `counters` snapshot of the switch called `switch`.
    pub fn add_snapshot(&mut self, switch: &str, snap: &Value) {
        let base: Labels = vec![("switch".into(), switch.to_string())];
        for port in snap["ports"].as_array().into_iter().flatten() {
            let Some(p) = port.as_object() else { continue };
            let mut labels = base.clone();
            labels.push(("port".into(), port["id"].to_string()));
            self.object("port", p, &labels, &["id", "queues", "pgs"]);
            for (list, key) in [("queues", "queue"), ("pgs", "pg")] {
                for item in port[list].as_array().into_iter().flatten() {
                    let Some(o) = item.as_object() else { continue };
                    let mut l = labels.clone();
                    l.push((key.into(), item[key].to_string()));
                    self.object(key, o, &l, &[key]);
                }
            }
        }
        if let Some(pool) = snap["buffer"].as_object() {
            self.object("pool", pool, &base, &[]);
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(self) -> String {
        let mut reg = Registry::default();
        for (name, fam) in self.counters {
            let help = self.help.get(&name).cloned().unwrap_or_default();
            reg.register(name, help, fam);
        }
        for (name, fam) in self.gauges {
            let help = self.help.get(&name).cloned().unwrap_or_default();
            reg.register(name, help, fam);
        }
        let mut out = String::new();
        encode(&mut out, &reg).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_number_of_the_snapshot_is_exported() {
        let snap = json!({
            "ports": [{"id": 2, "rx_packets": 7, "drops": {"headroom_overflow": 3}, "pfc_tx": [0, 0, 0, 5],
                "paused_ns": [0, 0, 0, 1_500_000_000u64], "buffer": {"ingress_cells": 4, "peak_egress_cells": 9},
                "queues": [{"queue": 3, "tx_packets": 6, "depth_cells": 2, "peak_cells": 8}],
                "pgs": [{"pg": 3, "xoff_sent": 1, "headroom_cells": 0}]}],
            "totals": {"rx_packets": 7},
            "buffer": {"used_cells": 11, "total_cells": 16384}
        });
        let mut m = Metrics::default();
        m.add_snapshot("s1", &snap);
        let text = m.encode();
        for line in [
            r#"rocesw_port_rx_packets_total{switch="s1",port="2"} 7"#,
            r#"rocesw_port_drops_total{switch="s1",port="2",reason="headroom_overflow"} 3"#,
            r#"rocesw_port_pfc_tx_total{switch="s1",port="2",priority="3"} 5"#,
            r#"rocesw_port_paused_seconds_total{switch="s1",port="2",priority="3"} 1.5"#,
            r#"rocesw_port_buffer_ingress_cells{switch="s1",port="2"} 4"#,
            r#"rocesw_port_buffer_peak_egress_cells{switch="s1",port="2"} 9"#,
            r#"rocesw_queue_tx_packets_total{switch="s1",port="2",queue="3"} 6"#,
            r#"rocesw_queue_depth_cells{switch="s1",port="2",queue="3"} 2"#,
            r#"rocesw_pg_xoff_sent_total{switch="s1",port="2",pg="3"} 1"#,
            r#"rocesw_pool_used_cells{switch="s1"} 11"#,
        ] {
            let (name, value) = line.rsplit_once(' ').unwrap();
            let found = text
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{name} missing:\n{text}"));
            let got: f64 = found.rsplit_once(' ').unwrap().1.parse().unwrap();
            assert_eq!(got, value.parse::<f64>().unwrap(), "{found}");
        }
        assert!(text.contains("# TYPE rocesw_queue_depth_cells gauge"), "{text}");
        assert!(text.contains("# TYPE rocesw_port_rx_packets counter"), "{text}");
        assert!(!text.contains("totals"), "totals are left to Prometheus");
        assert!(text.ends_with("# EOF\n"));
    }
}

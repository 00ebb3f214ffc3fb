//! Prometheus metrics (OpenMetrics text, via prometheus-client) from a switch's `counters`
//! snapshot, for `rocectl daemon`.
//!
//! Every number of the snapshot is exported, under a name derived from its field, so names are
//! predictable from PROTOCOL.md and `summary.json`:
//! * `rocesw_port_<field>{switch,port,name}` for each number of a port (`rx_packets` →
//!   `rocesw_port_rx_packets_total`), with a `priority` label for the per-priority arrays
//!   (`pfc_tx`, `pfc_rx`, `watchdog_*`), `reason` for `drops`, and `paused_ns` exported as
//!   `rocesw_port_paused_seconds_total`;
//! * `rocesw_port_buffer_<field>`, `rocesw_queue_<field>{…,queue}`, `rocesw_pg_<field>{…,pg}`
//!   and `rocesw_pool_<field>` (the whole buffer) for the buffer figures, and
//!   `rocesw_buffer_pool_<field>{switch,pool,type}` for each pool the config names
//!   (`[buffer.pool.NAME]`, SONiC's BUFFER_POOL: `pool="ingress_lossless_pool"`,
//!   `type="ingress"`), `rocesw_buffer_pool_headroom_<field>` for its shared headroom pool;
//! * `rocesw_port_peer_<field>` for what a port's emulated peer held (only ports that have one:
//!   kept apart from the switch's buffer figures, since those frames never entered it);
//! * `rocesw_port_capture_<field>` for what live captures of a port copied and dropped (only
//!   ports captured since the switch started);
//! * `rocesw_port_backend_<field>{…,driver,device}` for what a port's I/O backend counted
//!   itself (`rocesw run` only: DPDK's `imissed`, `ierrors`, `oerrors`, `rx_nombuf`, AF_PACKET's
//!   kernel drops), its two strings as labels;
//! * what is a level rather than a running total (cells in use, depths, peaks/watermarks) is a
//!   gauge; everything else is a counter; with the cell size known ([`Metrics::cell_bytes`]),
//!   each level in cells is also exported in bytes (`rocesw_pg_shared_cells` and
//!   `rocesw_pg_shared_bytes`);
//! * `rocesw_port_drops_total{reason}` has every reason of
//!   [`controlplane::snapshot::DROP_REASONS`] from the start, at 0 until it happens;
//! * every family has a HELP line of its own, and the series come in the snapshot's order
//!   (ports, then priorities, queues, PGs) at every scrape.
//!
//! `totals` is left out: it is the sum over ports, which Prometheus computes itself.
//!
//! **Port names.** `port` is the port's id, always, and a port the config names (`[[port]] name
//! = "Ethernet8"`, as every port of a SONiC import is named) also carries `name="Ethernet8"` on
//! every series of it (its queues' and PGs' too). The id stays in `port` so dashboards, alerts
//! and recording rules written against it keep matching, and it is what stays put when a port is
//! renamed; the name is a label of every series rather than of an info metric to join
//! (`* on(port) group_left(name) …`), because a SONiC user selects an interface by its name
//! (`rocesw_queue_ecn_marked_total{name="Ethernet8",queue="3"}`), as SONiC's own counters
//! (`COUNTERS_PORT_NAME_MAP`) and exporters key them, and should not have to write a join into
//! every query. An unnamed port has no `name` label (to Prometheus an empty label is no label),
//! so a config without names exports exactly what it did before.
//!
//! **Names are data.** Port, pool and switch names come from config files (a SONiC
//! config_db.json's keys among them) and may hold any character: every label value is written
//! through [`escape_label_value`] (`\\`, `\"`, `\n`, as the exposition format says), never as
//! given, so no name can end its series, add one, or make a strict scraper reject the scrape.
//!
//! The snapshot is read through its shared type, each struct destructured without `..`: a field
//! added to `controlplane::snapshot` does not compile here until it is exported, and the test
//! below checks each number of a serialized snapshot against the metric its name implies.

use controlplane::snapshot::{
    BackendReport, CaptureReport, Drops, PeerReport, PgReport, PoolBuffer, PoolHeadroom, PoolReport, PortBuffer,
    PortReport, QueueReport, Snapshot, DROP_REASONS,
};
use controlplane::NUM_TC;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{
    EncodeLabel, EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelSetEncoder, LabelValueEncoder, MetricEncoder,
    NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, HashMap};

type Labels = Vec<(String, String)>;

/// Writes `value` as a label value of the exposition text must be written, between its
/// quotes: a backslash as `\\`, a double quote as `\"`, a newline as `\n`, everything else
/// (unicode, `}`, `,`, `=`) as it is (OpenMetrics 1.0, `escaped-char`; the Prometheus text format
/// the same). Every label value the daemon serves goes through it ([`EscapedLabels`]): port,
/// pool and switch names are config data, and prometheus-client writes label values as given
/// (its issue #151), so a name with a quote and a newline in it used to end its series and add
/// others of its own, and a trailing backslash made the whole scrape unparsable.
pub fn escape_label_value(value: &str, out: &mut impl std::fmt::Write) -> std::fmt::Result {
    let mut rest = value;
    while let Some(i) = rest.find(['\\', '"', '\n']) {
        out.write_str(&rest[..i])?;
        out.write_str(match rest.as_bytes()[i] {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            _ => "\\n",
        })?;
        rest = &rest[i + 1..];
    }
    out.write_str(rest)
}

/// A series' labels as the encoder writes them: each value through [`escape_label_value`].
struct EscapedLabels<'a>(&'a Labels);

/// One label value, escaped.
struct EscapedValue<'a>(&'a str);

impl EncodeLabelValue for EscapedValue<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        escape_label_value(self.0, encoder)
    }
}

impl EncodeLabelSet for EscapedLabels<'_> {
    fn encode(&self, mut encoder: LabelSetEncoder) -> Result<(), std::fmt::Error> {
        for (key, value) in self.0 {
            (key.as_str(), EscapedValue(value)).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// One metric family: its series in the order they were first added (ports as the snapshot
/// lists them, priorities 0-7...), so every scrape lists them in the same order.
/// prometheus-client's `Family` keeps them in a `HashMap`, whose order changes between scrapes.
#[derive(Debug, Default)]
struct Series {
    gauge: bool,
    rows: Vec<(Labels, f64)>,
    index: HashMap<Labels, usize>,
}

impl Series {
    fn row(&mut self, labels: Labels) -> &mut f64 {
        let i = *self.index.entry(labels.clone()).or_insert_with(|| {
            self.rows.push((labels, 0.0));
            self.rows.len() - 1
        });
        &mut self.rows[i].1
    }
}

impl EncodeMetric for Series {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, v) in &self.rows {
            let escaped = EscapedLabels(labels);
            let mut e = encoder.encode_family(&escaped)?;
            if self.gauge {
                e.encode_gauge(v)?;
            } else {
                e.encode_counter::<NoLabelSet, _, f64>(v, None)?;
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        if self.gauge {
            MetricType::Gauge
        } else {
            MetricType::Counter
        }
    }
}

/// Metrics being assembled: one family per name, gauges and counters apart.
#[derive(Default)]
pub struct Metrics {
    counters: BTreeMap<String, Series>,
    gauges: BTreeMap<String, Series>,
    help: BTreeMap<String, String>,
    /// The switch's buffer cell, when known: each level in cells (a PG's, a port's, the pool's)
    /// is then also exported in bytes, `..._cells` as `..._bytes` (queues have theirs already).
    pub cell_bytes: Option<u64>,
}

/// A level, not a running total: the buffer in use now, queue depths, and peaks (watermarks).
fn is_level(field: &str) -> bool {
    field.contains("cells")
        || field.starts_with("depth")
        || field.starts_with("peak")
        || field.contains("watermark")
        || field.ends_with("_now")
        || matches!(field, "behind_ns" | "link_up" | "cell_bytes")
}

/// What a number of the snapshot is, for the metric's HELP line (`prefix` as in its name:
/// `port`, `port_peer`, `queue`...; `field` as in the snapshot, `_ns` included).
fn describe(prefix: &str, field: &str) -> Option<&'static str> {
    Some(match (prefix, field) {
        ("port" | "pg", "rx_packets") => "frames received",
        ("port" | "pg", "rx_bytes") => "bytes received (L2, without FCS)",
        ("port" | "queue", "tx_packets") => "frames transmitted",
        ("port" | "queue", "tx_bytes") => "bytes transmitted (L2, without FCS)",
        ("port", "ecn_marked") => "frames marked CE by WRED-ECN on leaving this port",
        ("port", "pfc_tx") => "PFC frames sent by the switch, per priority",
        ("port", "pfc_rx") => "PFC frames received, per priority",
        ("port", "pause_rx") => "802.3x PAUSE frames received",
        ("port", "pfc_tx_skipped") => {
            "PFC requests merged into a waiting one or refused with the PFC backlog full (internal, not drops)"
        }
        ("port", "paused_ns") => "time the port's egress was paused by received PFC, per priority",
        ("port", "unknown_ethertype") => "frames of an EtherType the switch does not parse (forwarded at L2)",
        ("port", "learn_refused") => "source addresses the FDB refused to learn (the frames were forwarded)",
        ("port", "learn_unannounced") => {
            "stations learnt here that another worker's FDB did not hear about, per worker missed (it floods them until the next refresh)"
        }
        ("port", "learn_late") => {
            "stations learnt here whose news reached another worker a round or more late, per worker (it flooded them meanwhile)"
        }
        ("port", "crossed_out") => {
            "frames received here that left through a port of another worker (crossed between cores; each flooded copy counted)"
        }
        ("port", "watchdog_storms") => "PFC storms the watchdog detected, per priority",
        ("port", "watchdog_restores") => "queues the PFC watchdog restored after a storm, per priority",
        ("port", "paused_now") => "1 while received PFC pauses the port's egress on the priority now",
        ("port", "storm_now") => "1 while the PFC watchdog holds the priority's queue in a storm now",
        ("port_peer", "behind_ns") => "how far the emulated wire's time is behind real time now",
        ("port_backend", "link_up") => "1 while the port's link is up, as the backend last read it",
        ("port_peer", "held_frames") => "frames that waited at the emulated peer while PFC paused them, per priority",
        ("port_peer", "held_ns") => "time frames waited at the emulated peer while paused, per priority",
        ("port_peer", "stalled_reads") => "polls that did not read the port because the emulated peer was full",
        ("port_peer", "depth_frames") => "frames waiting at the emulated peer now",
        ("port_peer", "depth_bytes") => "bytes waiting at the emulated peer now",
        ("port_peer", "backpressure_xoff") => {
            "XOFF frames the emulated NIC sent its host because the peer was full, per priority"
        }
        ("port_capture", "frames") => "frames live captures of the port copied",
        ("port_capture", "dropped") => "frames live captures of the port had no room for (the reader fell behind)",
        ("port_buffer", "ingress_cells") => "buffer cells held by frames that entered through this port",
        ("port_buffer", "peak_ingress_cells") => "peak of the cells held by frames that entered through this port",
        ("port_buffer", "egress_cells") => "buffer cells held by frames waiting to leave through this port",
        ("port_buffer", "peak_egress_cells") => "peak of the cells held by frames waiting to leave through this port",
        ("port_backend", "rx_kernel_drops") => "AF_PACKET: frames the kernel dropped with the receive ring full",
        ("port_backend", "imissed") => "DPDK imissed: frames the NIC dropped with its receive ring full",
        ("port_backend", "ierrors") => "DPDK ierrors: erroneous frames received",
        ("port_backend", "oerrors") => "DPDK oerrors: failed transmissions",
        ("port_backend", "rx_nombuf") => "DPDK rx_nombuf: receive mbuf allocation failures",
        ("port_backend", "tx_nombuf") => "DPDK: frames not sent because the mbuf pool was empty",
        ("queue", "dropped_packets") => "frames dropped at this egress queue",
        ("queue", "dropped_bytes") => "bytes dropped at this egress queue",
        ("queue", "ecn_marked") => "frames marked CE by this queue's WRED-ECN",
        ("queue", "edf_order_errors") => "EDF: frames queued behind a frame of later deadline",
        ("queue", "edf_deadline_misses") => "EDF: frames that left after their deadline",
        ("queue", "depth_packets") => "frames in the egress queue now",
        ("queue", "depth_cells") => "buffer cells the egress queue holds now",
        ("queue", "depth_bytes") => "bytes in the egress queue now",
        ("queue", "peak_cells") => "peak of the cells the egress queue held (its watermark)",
        ("queue", "peak_bytes") => "peak of the bytes in the egress queue (its watermark)",
        ("pg", "dropped_packets") => "frames dropped at this ingress priority group",
        ("pg", "xoff_sent") => "PFC XOFF the priority group asked for",
        ("pg", "xon_sent") => "PFC XON the priority group asked for",
        ("pg", "min_cells") => "cells of the priority group's guaranteed minimum in use now",
        ("pg", "shared_cells") => "cells of the shared pool the priority group uses now",
        ("pg", "headroom_cells") => "cells of the priority group's headroom in use now",
        ("pg", "peak_cells") => "peak of the cells the priority group held (its watermark)",
        ("pg", "peak_headroom_cells") => "peak of the headroom cells the priority group used",
        ("pool", "total_cells") => "cells in the switch's buffer",
        ("pool", "shared_cells") => "cells of the shared pool (the buffer less reservations and headroom)",
        ("pool", "used_cells") => "cells in use now",
        ("pool", "peak_used_cells") => "peak of the cells in use",
        ("pool", "cell_bytes") => "bytes per buffer cell (every _cells figure counts cells of this size)",
        ("pool", "ingress_shared_cells") => "shared cells in use, as the ingress side counts them",
        ("pool", "peak_ingress_shared_cells") => "peak of the shared cells in use, ingress side",
        ("pool", "egress_shared_cells") => "shared cells in use, as the egress side counts them",
        ("pool", "peak_egress_shared_cells") => "peak of the shared cells in use, egress side",
        ("buffer_pool", "size_cells") => "cells of the named pool (its shared space; reserves are outside it)",
        ("buffer_pool", "used_cells") => "cells of the named pool in use now, as its side (ingress PGs, egress queues) counts them",
        ("buffer_pool", "peak_used_cells") => "peak of the cells of the named pool in use",
        ("buffer_pool_headroom", "size_cells") => "cells of the ingress pool's shared headroom pool",
        ("buffer_pool_headroom", "used_cells") => "cells of the shared headroom pool lossless PGs use now",
        ("buffer_pool_headroom", "peak_used_cells") => "peak of the cells of the shared headroom pool in use",
        _ => return None,
    })
}

impl Metrics {
    /// Adds `v` to counter `name` for these labels (`help` is kept from the name's first use).
    pub fn counter(&mut self, name: &str, help: &str, labels: Labels, v: f64) {
        self.help.entry(name.to_string()).or_insert_with(|| help.to_string());
        *self.counters.entry(name.to_string()).or_default().row(labels) += v;
    }

    /// Sets gauge `name` for these labels to `v` (`help` as for [`Metrics::counter`]).
    pub fn gauge(&mut self, name: &str, help: &str, labels: Labels, v: f64) {
        self.help.entry(name.to_string()).or_insert_with(|| help.to_string());
        let series = self.gauges.entry(name.to_string()).or_default();
        series.gauge = true;
        *series.row(labels) = v;
    }

    /// A number of the snapshot, as a counter or a gauge by its name.
    fn number(&mut self, prefix: &str, field: &str, labels: &Labels, v: f64) {
        let what = describe(prefix, field).map_or_else(
            || format!("{prefix} {field} (controlplane/PROTOCOL.md, counters)"),
            str::to_string,
        );
        let help = format!("rocesw: {what}");
        if let Some(base) = field.strip_suffix("_ns") {
            let name = format!("rocesw_{prefix}_{base}_seconds");
            let help = format!("{help}, in seconds");
            if is_level(field) {
                self.gauge(&name, &help, labels.clone(), v / 1e9);
            } else {
                self.counter(&name, &help, labels.clone(), v / 1e9);
            }
        } else if is_level(field) {
            self.gauge(&format!("rocesw_{prefix}_{field}"), &help, labels.clone(), v);
            if let (Some(cell), Some(base), false) = (self.cell_bytes, field.strip_suffix("cells"), prefix == "queue") {
                let help = format!("{help}, in bytes (cells × the {cell}-byte cell)");
                self.gauge(
                    &format!("rocesw_{prefix}_{base}bytes"),
                    &help,
                    labels.clone(),
                    v * cell as f64,
                );
            }
        } else {
            self.counter(&format!("rocesw_{prefix}_{field}"), &help, labels.clone(), v);
        }
    }

    fn numbers(&mut self, prefix: &str, labels: &Labels, fields: &[(&str, u64)]) {
        for &(field, v) in fields {
            self.number(prefix, field, labels, v as f64);
        }
    }

    fn per_priority(&mut self, prefix: &str, field: &str, labels: &Labels, v: &[u64; NUM_TC]) {
        for (i, x) in v.iter().enumerate() {
            let mut l = labels.clone();
            l.push(("priority".into(), i.to_string()));
            self.number(prefix, field, &l, *x as f64);
        }
    }

    /// Every reason this build knows ([`DROP_REASONS`]), at 0 until its first drop, then any
    /// other the switch reported (a newer switch's).
    fn drops(&mut self, prefix: &str, labels: &Labels, drops: &Drops) {
        let known = DROP_REASONS.iter().map(|&r| (r, drops.get(r)));
        let others = drops.iter().filter(|(r, _)| !DROP_REASONS.contains(r));
        for (reason, n) in known.chain(others) {
            let mut l = labels.clone();
            l.push(("reason".into(), reason.to_string()));
            self.counter(
                &format!("rocesw_{prefix}_drops"),
                "rocesw: frames the switch dropped, by reason (every reason from the start, 0 until it happens)",
                l,
                n as f64,
            );
        }
    }

    /// A port's backend counters: `rocesw_port_backend_<field>{switch,port,driver,device}`.
    fn backend(&mut self, labels: &Labels, b: &BackendReport) {
        let BackendReport {
            driver,
            device,
            rx_kernel_drops,
            imissed,
            ierrors,
            oerrors,
            rx_nombuf,
            tx_nombuf,
            link_up,
        } = b;
        let mut l = labels.clone();
        l.push(("driver".into(), driver.clone()));
        l.push(("device".into(), device.clone()));
        self.numbers(
            "port_backend",
            &l,
            &[
                ("rx_kernel_drops", *rx_kernel_drops),
                ("imissed", *imissed),
                ("ierrors", *ierrors),
                ("oerrors", *oerrors),
                ("rx_nombuf", *rx_nombuf),
                ("tx_nombuf", *tx_nombuf),
            ],
        );
        if let Some(up) = link_up {
            self.numbers("port_backend", &l, &[("link_up", u64::from(*up))]);
        }
    }

    /// Adds a `counters` snapshot of the switch called `switch`.
    pub fn add_snapshot(&mut self, switch: &str, snap: &Snapshot) {
        let base: Labels = vec![("switch".into(), switch.to_string())];
        let Snapshot {
            ports,
            totals: _,
            buffer: pool,
            pools,
        } = snap;
        for port in ports {
            let PortReport {
                id,
                name,
                rx_packets,
                rx_bytes,
                tx_packets,
                tx_bytes,
                drops,
                ecn_marked,
                pfc_tx,
                pfc_rx,
                pause_rx,
                pfc_tx_skipped,
                paused_ns,
                unknown_ethertype,
                learn_refused,
                learn_unannounced,
                learn_late,
                crossed_out,
                watchdog_storms,
                watchdog_restores,
                paused_now,
                storm_now,
                buffer,
                queues,
                pgs,
                peer,
                backend,
                capture,
            } = port;
            let mut labels = base.clone();
            labels.push(("port".into(), id.to_string()));
            // The port's name beside its id (the module doc says why both).
            if let Some(n) = name {
                labels.push(("name".into(), n.clone()));
            }
            if let Some(b) = backend {
                self.backend(&labels, b);
            }
            self.numbers(
                "port",
                &labels,
                &[
                    ("rx_packets", *rx_packets),
                    ("rx_bytes", *rx_bytes),
                    ("tx_packets", *tx_packets),
                    ("tx_bytes", *tx_bytes),
                    ("ecn_marked", *ecn_marked),
                    ("pause_rx", *pause_rx),
                    ("pfc_tx_skipped", *pfc_tx_skipped),
                    ("unknown_ethertype", *unknown_ethertype),
                    ("learn_refused", *learn_refused),
                ],
            );
            // Several workers only, as in the JSON (left out while 0).
            if *learn_unannounced > 0 {
                self.numbers("port", &labels, &[("learn_unannounced", *learn_unannounced)]);
            }
            if *learn_late > 0 {
                self.numbers("port", &labels, &[("learn_late", *learn_late)]);
            }
            if *crossed_out > 0 {
                self.numbers("port", &labels, &[("crossed_out", *crossed_out)]);
            }
            self.drops("port", &labels, drops);
            for (field, v) in [
                ("pfc_tx", pfc_tx),
                ("pfc_rx", pfc_rx),
                ("paused_ns", paused_ns),
                ("watchdog_storms", watchdog_storms),
                ("watchdog_restores", watchdog_restores),
            ] {
                self.per_priority("port", field, &labels, v);
            }
            // As in the JSON: only while some priority is paused or stormed.
            for (field, v) in [("paused_now", paused_now), ("storm_now", storm_now)] {
                if v.contains(&true) {
                    self.per_priority("port", field, &labels, &v.map(u64::from));
                }
            }
            if let Some(PeerReport {
                held_frames,
                held_ns,
                stalled_reads,
                depth_frames,
                depth_bytes,
                backpressure_xoff,
                behind_ns,
            }) = peer
            {
                self.per_priority("port_peer", "held_frames", &labels, held_frames);
                self.per_priority("port_peer", "backpressure_xoff", &labels, backpressure_xoff);
                self.per_priority("port_peer", "held_ns", &labels, held_ns);
                self.numbers(
                    "port_peer",
                    &labels,
                    &[
                        ("stalled_reads", *stalled_reads),
                        ("depth_frames", *depth_frames),
                        ("depth_bytes", *depth_bytes),
                        ("behind_ns", *behind_ns),
                    ],
                );
            }
            if let Some(CaptureReport { frames, dropped }) = capture {
                self.numbers("port_capture", &labels, &[("frames", *frames), ("dropped", *dropped)]);
            }
            let PortBuffer {
                ingress_cells,
                peak_ingress_cells,
                egress_cells,
                peak_egress_cells,
            } = *buffer;
            self.numbers(
                "port_buffer",
                &labels,
                &[
                    ("ingress_cells", ingress_cells.into()),
                    ("peak_ingress_cells", peak_ingress_cells.into()),
                    ("egress_cells", egress_cells.into()),
                    ("peak_egress_cells", peak_egress_cells.into()),
                ],
            );
            for q in queues {
                let QueueReport {
                    queue,
                    tx_packets,
                    tx_bytes,
                    dropped_packets,
                    dropped_bytes,
                    ecn_marked,
                    edf_order_errors,
                    edf_deadline_misses,
                    depth_packets,
                    depth_cells,
                    depth_bytes,
                    peak_cells,
                    peak_bytes,
                } = *q;
                let mut l = labels.clone();
                l.push(("queue".into(), queue.to_string()));
                self.numbers(
                    "queue",
                    &l,
                    &[
                        ("tx_packets", tx_packets),
                        ("tx_bytes", tx_bytes),
                        ("dropped_packets", dropped_packets),
                        ("dropped_bytes", dropped_bytes),
                        ("ecn_marked", ecn_marked),
                        ("depth_packets", depth_packets),
                        ("depth_cells", depth_cells.into()),
                        ("depth_bytes", depth_bytes),
                        ("peak_cells", peak_cells.into()),
                        ("peak_bytes", peak_bytes),
                    ],
                );
                // EDF ports' regulated queues only, as in the JSON (left out while 0).
                let edf: Vec<(&str, u64)> = [
                    ("edf_order_errors", edf_order_errors),
                    ("edf_deadline_misses", edf_deadline_misses),
                ]
                .into_iter()
                .filter(|&(_, v)| v > 0)
                .collect();
                if !edf.is_empty() {
                    self.numbers("queue", &l, &edf);
                }
            }
            for g in pgs {
                let PgReport {
                    pg,
                    rx_packets,
                    rx_bytes,
                    dropped_packets,
                    xoff_sent,
                    xon_sent,
                    min_cells,
                    shared_cells,
                    headroom_cells,
                    peak_cells,
                    peak_headroom_cells,
                } = *g;
                let mut l = labels.clone();
                l.push(("pg".into(), pg.to_string()));
                self.numbers(
                    "pg",
                    &l,
                    &[
                        ("rx_packets", rx_packets),
                        ("rx_bytes", rx_bytes),
                        ("dropped_packets", dropped_packets),
                        ("xoff_sent", xoff_sent),
                        ("xon_sent", xon_sent),
                        ("min_cells", min_cells.into()),
                        ("shared_cells", shared_cells.into()),
                        ("headroom_cells", headroom_cells.into()),
                        ("peak_cells", peak_cells.into()),
                        ("peak_headroom_cells", peak_headroom_cells.into()),
                    ],
                );
            }
        }
        let PoolBuffer {
            cell_bytes,
            total_cells,
            shared_cells,
            used_cells,
            peak_used_cells,
            ingress_shared_cells,
            peak_ingress_shared_cells,
            egress_shared_cells,
            peak_egress_shared_cells,
        } = *pool;
        self.numbers(
            "pool",
            &base,
            &[
                ("cell_bytes", cell_bytes.into()),
                ("total_cells", total_cells.into()),
                ("shared_cells", shared_cells.into()),
                ("used_cells", used_cells.into()),
                ("peak_used_cells", peak_used_cells.into()),
                ("ingress_shared_cells", ingress_shared_cells.into()),
                ("peak_ingress_shared_cells", peak_ingress_shared_cells.into()),
                ("egress_shared_cells", egress_shared_cells.into()),
                ("peak_egress_shared_cells", peak_egress_shared_cells.into()),
            ],
        );
        for p in pools {
            let PoolReport {
                name,
                kind,
                size_cells,
                used_cells,
                peak_used_cells,
                headroom,
            } = p;
            let mut l = base.clone();
            l.push(("pool".into(), name.clone()));
            l.push(("type".into(), kind.clone()));
            self.numbers(
                "buffer_pool",
                &l,
                &[
                    ("size_cells", (*size_cells).into()),
                    ("used_cells", (*used_cells).into()),
                    ("peak_used_cells", (*peak_used_cells).into()),
                ],
            );
            if let Some(PoolHeadroom {
                size_cells,
                used_cells,
                peak_used_cells,
            }) = *headroom
            {
                self.numbers(
                    "buffer_pool_headroom",
                    &l,
                    &[
                        ("size_cells", size_cells.into()),
                        ("used_cells", used_cells.into()),
                        ("peak_used_cells", peak_used_cells.into()),
                    ],
                );
            }
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
pub(crate) mod tests {
    use super::*;
    use controlplane::snapshot::Totals;
    use serde_json::Value;
    use std::collections::BTreeSet;

    /// A snapshot with every kind of row (a port with queues, PGs, a peer, a backend and a
    /// capture; pools with and without shared headroom); also the daemon's tests'.
    pub(crate) fn snapshot() -> Snapshot {
        let mut drops = Drops::default();
        drops.add("headroom_overflow", 3);
        drops.add("malformed", 1);
        let mut paused_ns = [0; NUM_TC];
        paused_ns[3] = 1_500_000_000;
        let mut pfc_tx = [0; NUM_TC];
        pfc_tx[3] = 5;
        Snapshot {
            ports: vec![PortReport {
                id: 2,
                rx_packets: 7,
                learn_unannounced: 3,
                crossed_out: 5,
                drops,
                pfc_tx,
                paused_ns,
                buffer: PortBuffer {
                    ingress_cells: 4,
                    peak_egress_cells: 9,
                    ..Default::default()
                },
                queues: vec![QueueReport {
                    queue: 3,
                    tx_packets: 6,
                    depth_cells: 2,
                    peak_cells: 8,
                    edf_order_errors: 2,
                    ..Default::default()
                }],
                pgs: vec![PgReport {
                    pg: 3,
                    xoff_sent: 1,
                    ..Default::default()
                }],
                paused_now: [false, false, false, true, false, false, false, false],
                peer: Some(controlplane::snapshot::PeerReport {
                    stalled_reads: 2,
                    depth_frames: 5,
                    behind_ns: 3_000_000,
                    ..Default::default()
                }),
                backend: Some(BackendReport {
                    driver: "net_vhost".into(),
                    device: "net_vhost0".into(),
                    imissed: 12,
                    oerrors: 4,
                    link_up: Some(true),
                    ..Default::default()
                }),
                capture: Some(controlplane::snapshot::CaptureReport { frames: 9, dropped: 1 }),
                ..Default::default()
            }],
            totals: Totals {
                rx_packets: 7,
                ..Default::default()
            },
            buffer: PoolBuffer {
                used_cells: 11,
                total_cells: 16384,
                ..Default::default()
            },
            pools: vec![
                PoolReport {
                    name: "ingress_lossless_pool".into(),
                    kind: "ingress".into(),
                    size_cells: 90827,
                    used_cells: 40,
                    peak_used_cells: 50,
                    headroom: Some(PoolHeadroom {
                        size_cells: 22357,
                        used_cells: 6,
                        peak_used_cells: 7,
                    }),
                },
                PoolReport {
                    name: "egress_lossy_pool".into(),
                    kind: "egress".into(),
                    size_cells: 1000,
                    ..Default::default()
                },
            ],
        }
    }

    /// [`snapshot`] with a second port, named as a SONiC import names it.
    fn named_snapshot() -> Snapshot {
        let mut s = snapshot();
        let mut p = s.ports[0].clone();
        p.id = 8;
        p.name = Some("Ethernet8".into());
        p.rx_packets = 70;
        s.ports.push(p);
        s
    }

    #[test]
    fn every_number_of_the_snapshot_is_exported() {
        let mut m = Metrics::default();
        m.add_snapshot("s1", &snapshot());
        let text = m.encode();
        for line in [
            r#"rocesw_port_rx_packets_total{switch="s1",port="2"} 7"#,
            r#"rocesw_port_drops_total{switch="s1",port="2",reason="headroom_overflow"} 3"#,
            r#"rocesw_port_pfc_tx_total{switch="s1",port="2",priority="3"} 5"#,
            r#"rocesw_port_crossed_out_total{switch="s1",port="2"} 5"#,
            r#"rocesw_port_paused_seconds_total{switch="s1",port="2",priority="3"} 1.5"#,
            r#"rocesw_port_buffer_ingress_cells{switch="s1",port="2"} 4"#,
            r#"rocesw_port_buffer_peak_egress_cells{switch="s1",port="2"} 9"#,
            r#"rocesw_queue_tx_packets_total{switch="s1",port="2",queue="3"} 6"#,
            r#"rocesw_queue_depth_cells{switch="s1",port="2",queue="3"} 2"#,
            r#"rocesw_pg_xoff_sent_total{switch="s1",port="2",pg="3"} 1"#,
            r#"rocesw_pool_used_cells{switch="s1"} 11"#,
            r#"rocesw_port_peer_stalled_reads_total{switch="s1",port="2"} 2"#,
            r#"rocesw_port_peer_depth_frames{switch="s1",port="2"} 5"#,
            r#"rocesw_port_peer_held_frames_total{switch="s1",port="2",priority="3"} 0"#,
            r#"rocesw_port_backend_imissed_total{switch="s1",port="2",driver="net_vhost",device="net_vhost0"} 12"#,
            r#"rocesw_port_backend_oerrors_total{switch="s1",port="2",driver="net_vhost",device="net_vhost0"} 4"#,
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

    /// The naming scheme applied to the snapshot's JSON: (metric name without `_total`, labels)
    /// for every number in `obj`.
    fn expected(
        prefix: &str,
        obj: &serde_json::Map<String, Value>,
        labels: &str,
        skip: &[&str],
    ) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (k, v) in obj.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
            let name = match k.strip_suffix("_ns") {
                Some(base) => format!("rocesw_{prefix}_{base}_seconds"),
                None => format!("rocesw_{prefix}_{k}"),
            };
            match v {
                // A state (`link_up`) is a 0/1 gauge.
                Value::Number(_) | Value::Bool(_) => out.push((name, labels.to_string())),
                Value::Array(a) => {
                    out.extend((0..a.len()).map(|i| (name.clone(), format!("{labels},priority=\"{i}\""))))
                }
                Value::Object(m) if k == "backend" => {
                    let l = format!("{labels},driver={},device={}", m["driver"], m["device"]);
                    out.extend(expected(&format!("{prefix}_{k}"), m, &l, &["driver", "device"]))
                }
                Value::Object(m) if k == "drops" => out.extend(
                    DROP_REASONS
                        .iter()
                        .map(|r| r.to_string())
                        .chain(m.keys().filter(|r| !DROP_REASONS.contains(&r.as_str())).cloned())
                        .map(|r| (format!("rocesw_{prefix}_drops"), format!("{labels},reason=\"{r}\""))),
                ),
                Value::Object(m) => out.extend(expected(&format!("{prefix}_{k}"), m, labels, &[])),
                _ => panic!("{k}: a snapshot holds numbers, states, lists of them and objects"),
            }
        }
        out
    }

    #[test]
    fn each_field_has_the_metric_its_json_name_implies_and_nothing_else_is_exported() {
        let snap = named_snapshot();
        let v = serde_json::to_value(&snap).unwrap();
        let mut want = Vec::new();
        for p in v["ports"].as_array().unwrap() {
            let mut labels = format!("switch=\"s1\",port=\"{}\"", p["id"]);
            if let Some(name) = p.get("name") {
                labels += &format!(",name={name}");
            }
            want.extend(expected(
                "port",
                p.as_object().unwrap(),
                &labels,
                &["id", "name", "queues", "pgs"],
            ));
            for (list, key) in [("queues", "queue"), ("pgs", "pg")] {
                for item in p[list].as_array().unwrap() {
                    let l = format!("{labels},{key}=\"{}\"", item[key]);
                    want.extend(expected(key, item.as_object().unwrap(), &l, &[key]));
                }
            }
        }
        want.extend(expected("pool", v["buffer"].as_object().unwrap(), "switch=\"s1\"", &[]));
        for p in v["pools"].as_array().unwrap() {
            let labels = format!("switch=\"s1\",pool={},type={}", p["name"], p["type"]);
            want.extend(expected(
                "buffer_pool",
                p.as_object().unwrap(),
                &labels,
                &["name", "type"],
            ));
        }
        assert!(want.iter().any(|(n, _)| n == "rocesw_buffer_pool_headroom_size_cells"));

        let mut m = Metrics::default();
        m.add_snapshot("s1", &snap);
        let text = m.encode();
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        for (name, labels) in &want {
            let found = samples.iter().any(|l| {
                [format!("{name}{{{labels}}} "), format!("{name}_total{{{labels}}} ")]
                    .iter()
                    .any(|p| l.starts_with(p.as_str()))
            });
            assert!(found, "no {name}{{{labels}}} in:\n{text}");
        }
        assert_eq!(samples.len(), want.len(), "exported beyond the snapshot:\n{text}");
    }

    /// Issue 37: a named port's series carry `name` beside `port` (its queues' and PGs' too), an
    /// unnamed port's none; each named pool is a series of its own, by name and type.
    #[test]
    fn a_named_port_carries_its_name_beside_its_id() {
        let mut m = Metrics {
            cell_bytes: Some(96),
            ..Default::default()
        };
        m.add_snapshot("s1", &named_snapshot());
        let text = m.encode();
        for (series, want) in [
            (
                r#"rocesw_port_rx_packets_total{switch="s1",port="8",name="Ethernet8"}"#,
                70.0,
            ),
            (r#"rocesw_port_rx_packets_total{switch="s1",port="2"}"#, 7.0),
            (
                r#"rocesw_queue_tx_packets_total{switch="s1",port="8",name="Ethernet8",queue="3"}"#,
                6.0,
            ),
            (
                r#"rocesw_pg_xoff_sent_total{switch="s1",port="8",name="Ethernet8",pg="3"}"#,
                1.0,
            ),
            (
                r#"rocesw_port_drops_total{switch="s1",port="8",name="Ethernet8",reason="headroom_overflow"}"#,
                3.0,
            ),
            (
                r#"rocesw_buffer_pool_used_cells{switch="s1",pool="ingress_lossless_pool",type="ingress"}"#,
                40.0,
            ),
            (
                r#"rocesw_buffer_pool_size_bytes{switch="s1",pool="ingress_lossless_pool",type="ingress"}"#,
                90827.0 * 96.0,
            ),
            (
                r#"rocesw_buffer_pool_headroom_peak_used_cells{switch="s1",pool="ingress_lossless_pool",type="ingress"}"#,
                7.0,
            ),
            (
                r#"rocesw_buffer_pool_size_cells{switch="s1",pool="egress_lossy_pool",type="egress"}"#,
                1000.0,
            ),
        ] {
            assert_eq!(value(&text, series), Some(want), "{series} in:\n{text}");
        }
        assert!(
            !text.contains(r#"port="2",name="#),
            "an unnamed port has no name label:\n{text}"
        );
        assert!(
            !text.contains(r#"rocesw_buffer_pool_headroom_size_cells{switch="s1",pool="egress_lossy_pool""#),
            "{text}"
        );
        for help in text.lines().filter(|l| l.starts_with("# HELP rocesw_buffer_pool")) {
            assert!(!help.contains("PROTOCOL.md"), "a HELP without a description: {help}");
        }
    }

    /// Issue 49 item 7: at 512 ports (an SN5600's, nothing tested more than a few) each port's
    /// series are there once, under its own id and name, with its own figures, and the cell
    /// size is a gauge of its own.
    #[test]
    fn every_port_of_512_has_its_own_named_series() {
        let mut snap = snapshot();
        let template = snap.ports[0].clone();
        snap.ports = (0..512u16)
            .map(|i| {
                let mut p = template.clone();
                p.id = i;
                p.name = Some(format!("Ethernet{}", 4 * u32::from(i)));
                p.rx_packets = 1000 + u64::from(i);
                p.pgs[0].peak_cells = u32::from(i);
                p
            })
            .collect();
        snap.buffer.cell_bytes = 96;
        let mut m = Metrics {
            cell_bytes: Some(96),
            ..Default::default()
        };
        m.add_snapshot("s1", &snap);
        let text = m.encode();
        for i in 0..512u32 {
            let labels = format!(r#"switch="s1",port="{i}",name="Ethernet{}""#, 4 * i);
            let rx = format!("rocesw_port_rx_packets_total{{{labels}}}");
            assert_eq!(value(&text, &rx), Some(f64::from(1000 + i)), "{rx}");
            let peak = format!(r#"rocesw_pg_peak_bytes{{{labels},pg="3"}}"#);
            assert_eq!(value(&text, &peak), Some(f64::from(i) * 96.0), "{peak}");
        }
        let rx_series = text
            .lines()
            .filter(|l| l.starts_with("rocesw_port_rx_packets_total{"))
            .count();
        assert_eq!(rx_series, 512);
        let names: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with("rocesw_port_rx_packets_total{"))
            .filter_map(|l| l.split("name=\"").nth(1)?.split('"').next())
            .collect();
        assert_eq!(names.len(), 512, "one name a port");
        assert_eq!(
            value(&text, r#"rocesw_pool_cell_bytes{switch="s1"}"#),
            Some(96.0),
            "{}",
            &text[..2000]
        );
    }

    /// The value of `series` (name and labels exactly) in an exposition.
    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// Issue 23 item 8: a switch that has dropped nothing yet exports every drop reason at 0
    /// on every port (before, `rocesw_port_drops_total` had no series until the first drop, so
    /// `rate()` and alerts on it had nothing to read); every family's HELP says what it is;
    /// the series come in the same order at every scrape (prometheus-client's `Family` lists
    /// them in `HashMap` order, which changed from one scrape to the next).
    #[test]
    fn a_fresh_switch_exports_every_reason_at_zero_in_a_stable_order() {
        let fresh = Snapshot {
            ports: (0..4)
                .map(|id| PortReport {
                    id,
                    queues: (0..NUM_TC as u8)
                        .map(|queue| QueueReport {
                            queue,
                            ..Default::default()
                        })
                        .collect(),
                    pgs: (0..NUM_TC as u8)
                        .map(|pg| PgReport {
                            pg,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let scrape = || {
            let mut m = Metrics::default();
            m.add_snapshot("s1", &fresh);
            m.encode()
        };
        let text = scrape();
        for port in 0..4 {
            for reason in DROP_REASONS {
                let series = format!("rocesw_port_drops_total{{switch=\"s1\",port=\"{port}\",reason=\"{reason}\"}}");
                assert_eq!(value(&text, &series), Some(0.0), "{series} in:\n{text}");
            }
        }
        // Ports in the snapshot's order, reasons in the list's, priorities 0-7.
        let drops: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("rocesw_port_drops_total"))
            .collect();
        assert_eq!(drops.len(), 4 * DROP_REASONS.len());
        assert!(drops[0].contains("port=\"0\",reason=\"egress_limit\""), "{}", drops[0]);
        assert!(drops[drops.len() - 1].contains("port=\"3\",reason=\"bad_pause\""));
        for _ in 0..20 {
            assert_eq!(
                scrape(),
                text,
                "the same snapshot scraped again lists the same lines in the same order"
            );
        }
        for help in text.lines().filter(|l| l.starts_with("# HELP rocesw_")) {
            assert!(!help.contains("PROTOCOL.md"), "a HELP without a description: {help}");
        }
    }

    /// Every field the snapshot has gets a description of its own in HELP.
    #[test]
    fn every_family_of_a_full_snapshot_says_what_it_is() {
        let mut m = Metrics::default();
        m.add_snapshot("s1", &snapshot());
        let mut snap = snapshot();
        snap.ports[0].queues[0].edf_deadline_misses = 1;
        m.add_snapshot("s2", &snap);
        let text = m.encode();
        let helps: Vec<&str> = text.lines().filter(|l| l.starts_with("# HELP rocesw_")).collect();
        assert!(helps.len() > 50, "{text}");
        for help in helps {
            assert!(!help.contains("PROTOCOL.md"), "a HELP without a description: {help}");
        }
    }

    /// Issue 23 item 8: with the cell size known (the daemon knows its config's), every level
    /// in cells is also a level in bytes, as SONiC shows buffer use.
    #[test]
    fn levels_in_cells_are_also_exported_in_bytes() {
        let mut m = Metrics {
            cell_bytes: Some(256),
            ..Default::default()
        };
        m.add_snapshot("s1", &snapshot());
        let text = m.encode();
        for (series, want) in [
            (r#"rocesw_port_buffer_ingress_bytes{switch="s1",port="2"}"#, 1024.0),
            (r#"rocesw_port_buffer_peak_egress_bytes{switch="s1",port="2"}"#, 2304.0),
            (r#"rocesw_pool_used_bytes{switch="s1"}"#, 2816.0),
            (r#"rocesw_pool_total_bytes{switch="s1"}"#, 4194304.0),
            (r#"rocesw_pg_shared_bytes{switch="s1",port="2",pg="3"}"#, 0.0),
        ] {
            assert_eq!(value(&text, series), Some(want), "{series} in:\n{text}");
        }
        assert!(text.contains("# TYPE rocesw_pool_used_bytes gauge"), "{text}");
        // A queue's own byte figures stay the only ones.
        assert_eq!(text.matches("# TYPE rocesw_queue_depth_bytes gauge").count(), 1);
    }

    /// One sample of a strictly read exposition: its metric name, its labels (values
    /// unescaped), its value.
    type Sample = (String, Vec<(String, String)>, f64);

    /// Reads OpenMetrics text strictly, as a scraper that rejects the whole scrape on one bad
    /// line does: every line is a `# HELP`/`# TYPE`/`# UNIT` comment, a sample or the final
    /// `# EOF`; a sample is a metric name, optional `{key="value",...}` whose values may escape
    /// only `\\`, `\"` and `\n`, one space and a number. The first line it rejects is the error.
    pub(crate) fn strict_samples(text: &str) -> Result<Vec<Sample>, String> {
        let body = text
            .strip_suffix("# EOF\n")
            .ok_or("the exposition does not end in `# EOF`")?;
        let is_name = |s: &str, colon: bool| {
            s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':'))
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':'))
        };
        let mut out = Vec::new();
        for line in body.split_terminator('\n') {
            let bad = |why: &str| Err(format!("{why}: {line:?}"));
            if let Some(c) = line.strip_prefix("# ") {
                let mut w = c.splitn(3, ' ');
                let (kind, name) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
                if !["HELP", "TYPE", "UNIT"].contains(&kind) || !is_name(name, true) {
                    return bad("not a HELP, TYPE or UNIT line");
                }
                continue;
            }
            let name_end = line
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(line.len());
            let name = &line[..name_end];
            if !is_name(name, true) {
                return bad("no metric name");
            }
            let mut rest = &line[name_end..];
            let mut labels: Vec<(String, String)> = Vec::new();
            if let Some(r) = rest.strip_prefix('{') {
                rest = r;
                loop {
                    if let Some(r) = rest.strip_prefix('}') {
                        rest = r;
                        break;
                    }
                    let Some(eq) = rest.find('=') else {
                        return bad("a label without =");
                    };
                    let key = &rest[..eq];
                    if !is_name(key, false) || labels.iter().any(|(k, _)| k == key) {
                        return bad("a bad or repeated label name");
                    }
                    let Some(r) = rest[eq + 1..].strip_prefix('"') else {
                        return bad("an unquoted label value");
                    };
                    let mut value = String::new();
                    let mut chars = r.char_indices();
                    let end = loop {
                        match chars.next() {
                            None => return bad("an unterminated label value"),
                            Some((i, '"')) => break i,
                            Some((_, '\\')) => match chars.next() {
                                Some((_, '\\')) => value.push('\\'),
                                Some((_, '"')) => value.push('"'),
                                Some((_, 'n')) => value.push('\n'),
                                _ => return bad("an escape other than \\\\, \\\" or \\n"),
                            },
                            Some((_, c)) => value.push(c),
                        }
                    };
                    labels.push((key.to_string(), value));
                    rest = &r[end + 1..];
                    if let Some(r) = rest.strip_prefix(',') {
                        rest = r;
                    } else if !rest.starts_with('}') {
                        return bad("labels not separated by ,");
                    }
                }
            }
            let Some(v) = rest.strip_prefix(' ') else {
                return bad("no space before the value");
            };
            let Ok(v) = v.parse::<f64>() else {
                return bad("a value that is not a number");
            };
            out.push((name.to_string(), labels, v));
        }
        Ok(out)
    }

    /// Issue 46 item 2: names are data. Port, pool and switch names with a backslash (also
    /// trailing), quotes, newlines, `}` and unicode, one of them shaped to inject a series,
    /// each come back exact from a strict reading of the scrape, and the scrape has exactly
    /// the series it has with plain names: nothing injected, nothing lost.
    #[test]
    fn hostile_names_are_label_values_never_syntax() {
        let hostile = [
            "trailing\\",
            "Ethernet\"8\"",
            "x\"} 1\nrocesw_injected_total{switch=\"evil",
            "two\nlines",
            "brace}",
            "a\\\"b\\n",
            "Ethernet\u{2160}·ポート",
        ];
        let build = |names: &[String], pool: &str, switch: &str| {
            let mut s = named_snapshot();
            let template = s.ports[1].clone();
            for (i, n) in names.iter().enumerate() {
                let mut p = template.clone();
                p.id = 9 + i as u16;
                p.name = Some(n.clone());
                s.ports.push(p);
            }
            s.pools[0].name = pool.to_string();
            let mut m = Metrics {
                cell_bytes: Some(96),
                ..Default::default()
            };
            m.add_snapshot(switch, &s);
            m.encode()
        };
        let names: Vec<String> = hostile.iter().map(|n| n.to_string()).collect();
        let plain: Vec<String> = (0..names.len()).map(|i| format!("p{i}")).collect();
        let (pool, switch) = ("pool \"lossless\"\\\n}", "sw\\\"1\n}");
        let text = build(&names, pool, switch);
        let samples = strict_samples(&text).unwrap_or_else(|e| panic!("{e}\nin:\n{text}"));
        let baseline = strict_samples(&build(&plain, "pool", "s1")).unwrap();
        assert_eq!(samples.len(), baseline.len(), "series injected or lost:\n{text}");
        let families = |s: &[Sample]| s.iter().map(|(n, _, _)| n.clone()).collect::<BTreeSet<_>>();
        assert_eq!(families(&samples), families(&baseline), "{text}");
        let label =
            |labels: &[(String, String)], key: &str| labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        for (_, labels, _) in &samples {
            assert_eq!(label(labels, "switch").as_deref(), Some(switch), "{labels:?}");
        }
        for (i, n) in hostile.iter().enumerate() {
            let port = (9 + i).to_string();
            let of_port: Vec<&Sample> = samples
                .iter()
                .filter(|(_, l, _)| label(l, "port") == Some(port.clone()))
                .collect();
            let want = baseline
                .iter()
                .filter(|(_, l, _)| label(l, "port") == Some(port.clone()))
                .count();
            assert_eq!(of_port.len(), want, "port {port}");
            for (_, labels, _) in of_port {
                assert_eq!(label(labels, "name").as_deref(), Some(*n), "{labels:?}");
            }
        }
        let pools = samples
            .iter()
            .filter(|(_, l, _)| label(l, "pool").as_deref() == Some(pool));
        assert!(pools.count() >= 3, "the hostile pool's series:\n{text}");
        // The one function writes exactly the three escapes.
        let mut s = String::new();
        escape_label_value("a\\b\"c\nd}é", &mut s).unwrap();
        assert_eq!(s, "a\\\\b\\\"c\\nd}é");
    }
}

//! The switch's counters at one instant: `summary.json`, the `counters` answer and what
//! `subscribe` pushes. Declared once, here, because both sides use it: the dataplane builds it
//! (`dataplane::report`), and `rocectl`, the daemon's metrics and the dataplane's watermarks
//! read its fields. A field renamed on one side is then a compile error on the other, where a
//! hand-kept copy read the missing field as zero.
//!
//! Reading one back (`serde_json::from_*`): every field is required, so a switch that renamed
//! or dropped a field is refused with that field's name. Fields this build does not know are
//! ignored rather than refused, because PROTOCOL.md promises clients that the snapshot may grow
//! within protocol v1 (an older `rocectl` keeps working against a newer switch); the
//! dataplane's tests check that both sides agree exactly (`dataplane/tests/snapshot.rs`).
//!
//! Field order is the JSON order of `summary.json` (the protocol sends keys sorted).

use crate::NUM_TC;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every counter and buffer level of one switch at one instant (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// One report per port, in config order.
    pub ports: Vec<PortReport>,
    /// Sums over the ports.
    pub totals: Totals,
    /// The shared buffer pool: the whole buffer's figures (with several pools, each direction's
    /// figures summed over its pools).
    pub buffer: PoolBuffer,
    /// Each pool the config names (`[buffer.pool.NAME]`, SONiC's BUFFER_POOL), in the config's
    /// order (ingress ones first, each direction in name order). Empty, and left out of the
    /// JSON, when the config names none: `buffer` is then the one pool (its ingress and egress
    /// views), and replay's summaries of such configs read as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolReport>,
}

/// One named pool: its size and its shared use now, as its own side counts it (ingress pools
/// the PGs' shared cells, egress pools the queues'), and its shared headroom pool if it has one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolReport {
    /// The NAME of `[buffer.pool.NAME]` (SONiC's BUFFER_POOL key), as PGs and queues name it.
    pub name: String,
    /// `ingress` or `egress` (a string, so a direction a newer switch adds still reads).
    #[serde(rename = "type")]
    pub kind: String,
    /// The pool's shared cells (its `size`; reserves are outside it).
    pub size_cells: u32,
    /// Shared cells in use now.
    pub used_cells: u32,
    /// Highest `used_cells` since start or the last watermark clear.
    pub peak_used_cells: u32,
    /// An ingress pool's shared headroom pool (SONiC's pool `xoff`); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<PoolHeadroom>,
}

/// A shared headroom pool: what the lossless PGs of its ingress pool take their headroom from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolHeadroom {
    /// Its cells.
    pub size_cells: u32,
    /// Cells of headroom in use now.
    pub used_cells: u32,
    /// Highest `used_cells` since start or the last watermark clear.
    pub peak_used_cells: u32,
}

/// The sums over ports (what a replay's test or summary line wants without adding up).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Frames received, over every port.
    pub rx_packets: u64,
    /// Bytes received (frames without FCS), over every port.
    pub rx_bytes: u64,
    /// Frames sent, PFC frames included, over every port.
    pub tx_packets: u64,
    /// Bytes sent (without FCS), over every port.
    pub tx_bytes: u64,
    /// Frames dropped, by reason, over every port.
    pub drops: Drops,
    /// Frames marked CE by WRED-ECN, over every port.
    pub ecn_marked: u64,
    /// PFC frames sent naming each priority, over every port.
    pub pfc_tx: [u64; NUM_TC],
    /// PFC frames received naming each priority, over every port.
    pub pfc_rx: [u64; NUM_TC],
}

/// One port's counters, its buffer use and its queues' and PGs'.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortReport {
    /// The port id as configured.
    pub id: u16,
    /// The port's `name` in the config (`Ethernet8`: every port of a SONiC import has one);
    /// absent, and left out of the JSON, for an unnamed port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Frames received, every one counted before any check (dropped and PFC frames included).
    pub rx_packets: u64,
    /// Bytes received (frames without FCS), as `rx_packets`.
    pub rx_bytes: u64,
    /// Frames sent, PFC frames included.
    pub tx_packets: u64,
    /// Bytes sent (without FCS), PFC frames included.
    pub tx_bytes: u64,
    /// Frames dropped, by reason: received here and dropped before queueing, or admitted and
    /// dropped leaving through here.
    pub drops: Drops,
    /// Frames marked CE by WRED-ECN on this port's egress.
    pub ecn_marked: u64,
    /// PFC frames sent naming each priority (one frame may name several).
    pub pfc_tx: [u64; NUM_TC],
    /// PFC frames received naming each priority.
    pub pfc_rx: [u64; NUM_TC],
    /// 802.3x PAUSE frames received; the switch ignores them (they also count as `pause_ignored`).
    pub pause_rx: u64,
    /// PFC requests merged into a waiting one for the same priorities, or refused with the
    /// port's PFC backlog full: internal, never packet drops.
    #[serde(default)]
    pub pfc_tx_skipped: u64,
    /// Nanoseconds each priority of this port's egress was paused by received PFC.
    pub paused_ns: [u64; NUM_TC],
    /// Frames with an EtherType the switch does not look into, forwarded at L2 in the default
    /// class.
    pub unknown_ethertype: u64,
    /// Source addresses the FDB refused to learn on this port (`[fdb]` capacity, `port_limit`,
    /// `learn_rate`): not drops, the frames were forwarded (flooded while their sender is
    /// unknown).
    #[serde(default)]
    pub learn_refused: u64,
    /// Several workers: stations learnt on this port that another worker's copy of the FDB
    /// did not hear about (counted once per worker missed; its announcement backlog or the
    /// queue to that worker was full). Not drops: that worker floods their frames until the
    /// entry's next refresh (a quarter of `aging`) reaches it. Left out of the JSON while 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub learn_unannounced: u64,
    /// Several workers: announcements of stations learnt on this port that reached another
    /// worker a round or more after they were made, because that worker was behind taking
    /// them (counted once per worker). Not drops: that worker flooded the stations' frames
    /// meanwhile. Left out of the JSON while 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub learn_late: u64,
    /// Several workers: frames received here that left through a port of another worker
    /// (each flooded copy counted). Such a frame crosses between the workers' cores, which
    /// takes 2-2.7 times the CPU time of a frame that stays: ports that exchange traffic belong
    /// on one worker. Left out of the JSON while 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub crossed_out: u64,
    /// PFC storms the watchdog detected, per priority.
    pub watchdog_storms: [u64; NUM_TC],
    /// Restorations after a storm, per priority.
    pub watchdog_restores: [u64; NUM_TC],
    /// Priorities whose egress on this port is held by received PFC at the snapshot's instant
    /// (a pause running now, whether or not frames wait behind it). Left out of the JSON while
    /// none is, so summaries without pauses read as before and older ones parse.
    #[serde(default, skip_serializing_if = "none_set")]
    pub paused_now: [bool; NUM_TC],
    /// Priorities whose egress queue on this port the PFC watchdog holds in a storm now
    /// (detected and not yet restored: SONiC's `show pfcwd stats` "stormed"). Left out of the
    /// JSON while none is.
    #[serde(default, skip_serializing_if = "none_set")]
    pub storm_now: [bool; NUM_TC],
    /// Buffer cells held by frames that entered / will leave through this port, with peaks.
    pub buffer: PortBuffer,
    /// One report per egress queue, queue 0 first.
    pub queues: Vec<QueueReport>,
    /// One report per ingress PG, PG 0 first.
    pub pgs: Vec<PgReport>,
    /// What the port's emulated peer held (`peer = "emulated"` in `rocesw run`): frames that
    /// waited on the far side of the emulated wire, never in the switch's buffer. Absent where
    /// there is no such peer: replay (whose summary is pinned byte for byte) and `peer = "wire"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerReport>,
    /// What the port's I/O backend counted itself: frames lost before the switch could see
    /// them. Only from `rocesw run` (its `counters` answer and summary); absent in replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendReport>,
    /// Live captures of the port (`rocectl capture`) since the switch started, running ones
    /// included. Only from `rocesw run`'s control server, and only for ports captured so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureReport>,
}

/// What the live captures of one port copied, and what their rings had no room for (their
/// readers fell behind; the switch never waits for a capture).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureReport {
    /// Frames copied to capture rings.
    pub frames: u64,
    /// Frames the rings had no room for.
    pub dropped: u64,
}

/// A port's emulated peer: the host side of the emulated wire (see `PortReport::peer`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerReport {
    /// Frames, per priority, that were waiting at the peer while the switch's PFC paused that
    /// priority.
    pub held_frames: [u64; NUM_TC],
    /// The total time those frames spent waiting, per priority.
    pub held_ns: [u64; NUM_TC],
    /// Polls that did not read the port because the peer's store was full.
    pub stalled_reads: u64,
    /// Frames waiting at the peer now, and their bytes.
    pub depth_frames: u64,
    /// Bytes of the frames waiting at the peer now.
    pub depth_bytes: u64,
    /// PFC XOFF frames the emulated NIC sent its host, per priority, because that much was
    /// already waiting at the peer (back-pressure: a NIC does not let its host send faster than
    /// its wire). Not the switch's PFC: those are `PortReport::pfc_tx`.
    #[serde(default)]
    pub backpressure_xoff: [u64; NUM_TC],
    /// How far this emulated wire's time is behind real time now, ns: a worker that cannot
    /// keep up with its wires lets them fall behind rather than leave their hosts unread
    /// (what the end of a run reports as "fell up to N ms behind"). 0 while it keeps up; the
    /// same for every emulated port of one worker.
    #[serde(default)]
    pub behind_ns: u64,
}

/// A port's backend (AF_PACKET, capture files, a DPDK driver) and its own loss counters, as
/// of its worker's last report (about once a second; exact at the end of a run). Every
/// counter exists for every backend and is 0 where that backend has no such thing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendReport {
    /// `af_packet`, `pcap`, `memory`, or the DPDK driver (`net_vhost`, `mlx5_pci`...).
    pub driver: String,
    /// The interface, the capture files' label, or the DPDK device (`net_vhost0`).
    pub device: String,
    /// AF_PACKET: frames the kernel dropped because the receive ring was full.
    pub rx_kernel_drops: u64,
    /// DPDK: the driver's `imissed`, frames the NIC dropped with its receive ring full.
    pub imissed: u64,
    /// DPDK: the driver's `ierrors`, erroneous frames received.
    pub ierrors: u64,
    /// DPDK: the driver's `oerrors`, failed transmissions. Some virtual drivers also count
    /// frames a full ring refused, which the switch keeps and offers again (not lost);
    /// `net_vhost` in DPDK 22.11 does not.
    pub oerrors: u64,
    /// DPDK: the driver's `rx_nombuf`, receive mbuf allocation failures.
    pub rx_nombuf: u64,
    /// DPDK: frames not sent because the mbuf pool was empty (lost after leaving their
    /// queue: raise `[run.dpdk] mbufs`).
    pub tx_nombuf: u64,
    /// The link as the backend last read it (about once a second): up (administratively up
    /// and running, for an interface; the driver's link for DPDK). Absent where the backend
    /// has no link (capture files) and from switches older than the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_up: Option<bool>,
}

/// A port's buffer use in cells, both views (ingress and egress), with peaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortBuffer {
    /// Cells held now by frames that entered through this port.
    pub ingress_cells: u32,
    /// Highest `ingress_cells` since start or the last watermark clear.
    pub peak_ingress_cells: u32,
    /// Cells held now by frames queued to leave through this port.
    pub egress_cells: u32,
    /// Highest `egress_cells` since start or the last watermark clear.
    pub peak_egress_cells: u32,
}

/// The shared buffer pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolBuffer {
    /// The buffer's cell, in bytes: every `_cells` figure of the snapshot (the pool's, the
    /// ports', queues' and PGs') counts cells of this size, so a reader of summary.json or of
    /// `counters` needs no config to turn them into bytes. 0 from a switch older than it.
    #[serde(default)]
    pub cell_bytes: u32,
    /// The whole buffer in cells (`buffer.size` / `buffer.cell`, rounded up).
    pub total_cells: u32,
    /// Cells left for the shared pool once minimums and headroom are reserved.
    pub shared_cells: u32,
    /// Cells held by frames in the switch now, each frame once.
    pub used_cells: u32,
    /// Highest `used_cells` since start or the last watermark clear.
    pub peak_used_cells: u32,
    /// Shared cells the ingress PGs use now (the ingress view of the pool).
    pub ingress_shared_cells: u32,
    /// Highest `ingress_shared_cells` since start or the last watermark clear.
    pub peak_ingress_shared_cells: u32,
    /// Shared cells the egress queues use now (the egress view of the pool).
    pub egress_shared_cells: u32,
    /// Highest `egress_shared_cells` since start or the last watermark clear.
    pub peak_egress_shared_cells: u32,
}

/// An egress queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueReport {
    /// Queue number, 0..8.
    pub queue: u8,
    /// Frames sent from this queue.
    pub tx_packets: u64,
    /// Bytes sent from this queue (without FCS).
    pub tx_bytes: u64,
    /// Admitted frames dropped at this queue (limit, WRED, watchdog...).
    pub dropped_packets: u64,
    /// Bytes of `dropped_packets`.
    pub dropped_bytes: u64,
    /// Frames marked CE by WRED-ECN.
    pub ecn_marked: u64,
    /// EDF ports' regulated queues: frames queued behind a frame of later deadline in the same
    /// FIFO list (order errors), and frames that left after their deadline. Left out of the
    /// JSON while 0, so reports of other schedulers read as before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub edf_order_errors: u64,
    /// See `edf_order_errors`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub edf_deadline_misses: u64,
    /// Frames waiting in the queue now.
    pub depth_packets: u64,
    /// Cells they hold (minimum and shared).
    pub depth_cells: u32,
    /// Bytes they hold (without FCS).
    pub depth_bytes: u64,
    /// Highest `depth_cells` since start or the last watermark clear.
    pub peak_cells: u32,
    /// Highest `depth_bytes` since start or the last watermark clear.
    pub peak_bytes: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn none_set(v: &[bool; NUM_TC]) -> bool {
    !v.contains(&true)
}

/// An ingress priority group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgReport {
    /// PG number, 0..8.
    pub pg: u8,
    /// Frames classified into this PG on this port.
    pub rx_packets: u64,
    /// Bytes of `rx_packets`.
    pub rx_bytes: u64,
    /// Frames of this PG dropped, before queueing or after admission.
    pub dropped_packets: u64,
    /// PFC XOFF frames sent for this PG, refreshes included.
    pub xoff_sent: u64,
    /// PFC XON frames sent for this PG's priorities.
    pub xon_sent: u64,
    /// Cells held now in the PG's reserved minimum.
    pub min_cells: u32,
    /// Cells held now in the shared pool.
    pub shared_cells: u32,
    /// Cells held now in headroom (a lossless PG past its shared limit, its XOFF point).
    pub headroom_cells: u32,
    /// Highest total use (min + shared + headroom) since start or the last watermark clear.
    pub peak_cells: u32,
    /// Highest `headroom_cells` since start or the last watermark clear.
    pub peak_headroom_cells: u32,
}

// ---------------------------------------------------------------------------------------------
// How people name ports: by the config's `name` where there is one (a SONiC import names every
// port `EthernetN`), else by id; in tables, messages and filters alike.

impl PortReport {
    /// How tables and messages name the port: its name where it has one, else its id.
    pub fn label(&self) -> String {
        crate::model::port_label(self.id, self.name.as_deref())
    }
}

impl PortPeaks {
    /// As [`PortReport::label`].
    pub fn label(&self) -> String {
        crate::model::port_label(self.id, self.name.as_deref())
    }
}

impl Snapshot {
    /// The id of the port a user named, by name (`Ethernet8`) or id (`8`), among this
    /// snapshot's ports; the error lists them.
    pub fn port_id_of(&self, name_or_id: &str) -> Result<u16, String> {
        let ports: Vec<(u16, Option<&str>)> = self.ports.iter().map(|p| (p.id, p.name.as_deref())).collect();
        crate::model::find_port(&ports, name_or_id, "the switch")
    }
}

/// A table's port column. While no port has a name, ids right-aligned in 4 characters, as the
/// tables always had them; once one has, every port's label (its name, else its id)
/// left-aligned, as SONiC's tables have port names, as wide as the longest (`Ethernet120`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortColumn {
    width: usize,
    names: bool,
}

impl PortColumn {
    /// The column for these ports (id, name).
    pub fn new<'a>(ports: impl IntoIterator<Item = (u16, Option<&'a str>)>) -> Self {
        let mut col = PortColumn { width: 4, names: false };
        for (id, name) in ports {
            col.names |= name.is_some();
            col.width = col.width.max(name.map_or_else(|| id.to_string().len(), str::len));
        }
        col
    }

    /// The column for a snapshot's ports.
    pub fn of(ports: &[PortReport]) -> Self {
        Self::new(ports.iter().map(|p| (p.id, p.name.as_deref())))
    }

    /// `text` (a port's label, or the header) padded to the column's width.
    pub fn pad(&self, text: &str) -> String {
        if self.names {
            format!("{text:<w$}", w = self.width)
        } else {
            format!("{text:>w$}", w = self.width)
        }
    }

    /// Characters the column takes.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The column at least `width` characters wide (room for a longer header).
    pub fn at_least(mut self, width: usize) -> Self {
        self.width = self.width.max(width);
        self
    }
}

// ---------------------------------------------------------------------------------------------
// Counters since a baseline: what `rocectl clear counters` shows (SONiC's `sonic-clear`), while
// the switch's own totals, its summary and its metrics stay monotonic.

fn sub_arr(a: &mut [u64; NUM_TC], b: &[u64; NUM_TC]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x -= y;
    }
}

/// Whether every counter of `a` is at least its counterpart in `b` (a baseline taken earlier of
/// the same switch run).
fn ge_arr(a: &[u64; NUM_TC], b: &[u64; NUM_TC]) -> bool {
    a.iter().zip(b).all(|(x, y)| x >= y)
}

impl Drops {
    /// These drops less `base`'s, or `None` if a reason went backwards.
    fn since(&self, base: &Drops) -> Option<Drops> {
        let mut out = Drops::default();
        for (k, v) in self.iter() {
            out.add(k, v.checked_sub(base.get(k))?);
        }
        // A reason in the baseline that is gone now went backwards too.
        base.iter().all(|(k, v)| v == 0 || self.get(k) >= v).then_some(out)
    }
}

impl Snapshot {
    /// The counters since `base` (levels and peaks as they are now), or `None` when `base` is
    /// not an earlier snapshot of this switch run: other ports, or a counter that went
    /// backwards (the switch restarted since).
    pub fn since(&self, base: &Snapshot) -> Option<Snapshot> {
        if self.ports.len() != base.ports.len() {
            return None;
        }
        let mut out = self.clone();
        let t = &mut out.totals;
        let bt = &base.totals;
        let scalars = [
            (&mut t.rx_packets, bt.rx_packets),
            (&mut t.rx_bytes, bt.rx_bytes),
            (&mut t.tx_packets, bt.tx_packets),
            (&mut t.tx_bytes, bt.tx_bytes),
            (&mut t.ecn_marked, bt.ecn_marked),
        ];
        for (x, y) in scalars {
            *x = x.checked_sub(y)?;
        }
        t.drops = t.drops.since(&bt.drops)?;
        if !ge_arr(&t.pfc_tx, &bt.pfc_tx) || !ge_arr(&t.pfc_rx, &bt.pfc_rx) {
            return None;
        }
        sub_arr(&mut t.pfc_tx, &bt.pfc_tx);
        sub_arr(&mut t.pfc_rx, &bt.pfc_rx);
        for (p, b) in out.ports.iter_mut().zip(&base.ports) {
            p.since(b)?;
        }
        Some(out)
    }
}

impl PortReport {
    fn since(&mut self, b: &PortReport) -> Option<()> {
        if self.id != b.id || self.queues.len() != b.queues.len() || self.pgs.len() != b.pgs.len() {
            return None;
        }
        let scalars = [
            (&mut self.rx_packets, b.rx_packets),
            (&mut self.rx_bytes, b.rx_bytes),
            (&mut self.tx_packets, b.tx_packets),
            (&mut self.tx_bytes, b.tx_bytes),
            (&mut self.ecn_marked, b.ecn_marked),
            (&mut self.pause_rx, b.pause_rx),
            (&mut self.pfc_tx_skipped, b.pfc_tx_skipped),
            (&mut self.unknown_ethertype, b.unknown_ethertype),
            (&mut self.learn_refused, b.learn_refused),
            (&mut self.learn_unannounced, b.learn_unannounced),
            (&mut self.learn_late, b.learn_late),
            (&mut self.crossed_out, b.crossed_out),
        ];
        for (x, y) in scalars {
            *x = x.checked_sub(y)?;
        }
        self.drops = self.drops.since(&b.drops)?;
        let arrays = [
            (&mut self.pfc_tx, &b.pfc_tx),
            (&mut self.pfc_rx, &b.pfc_rx),
            (&mut self.paused_ns, &b.paused_ns),
            (&mut self.watchdog_storms, &b.watchdog_storms),
            (&mut self.watchdog_restores, &b.watchdog_restores),
        ];
        for (x, y) in arrays {
            if !ge_arr(x, y) {
                return None;
            }
            sub_arr(x, y);
        }
        for (q, bq) in self.queues.iter_mut().zip(&b.queues) {
            let scalars = [
                (&mut q.tx_packets, bq.tx_packets),
                (&mut q.tx_bytes, bq.tx_bytes),
                (&mut q.dropped_packets, bq.dropped_packets),
                (&mut q.dropped_bytes, bq.dropped_bytes),
                (&mut q.ecn_marked, bq.ecn_marked),
                (&mut q.edf_order_errors, bq.edf_order_errors),
                (&mut q.edf_deadline_misses, bq.edf_deadline_misses),
            ];
            for (x, y) in scalars {
                *x = x.checked_sub(y)?;
            }
        }
        for (g, bg) in self.pgs.iter_mut().zip(&b.pgs) {
            let scalars = [
                (&mut g.rx_packets, bg.rx_packets),
                (&mut g.rx_bytes, bg.rx_bytes),
                (&mut g.dropped_packets, bg.dropped_packets),
                (&mut g.xoff_sent, bg.xoff_sent),
                (&mut g.xon_sent, bg.xon_sent),
            ];
            for (x, y) in scalars {
                *x = x.checked_sub(y)?;
            }
        }
        if let (Some(be), Some(bb)) = (self.backend.as_mut(), b.backend.as_ref()) {
            let scalars = [
                (&mut be.rx_kernel_drops, bb.rx_kernel_drops),
                (&mut be.imissed, bb.imissed),
                (&mut be.ierrors, bb.ierrors),
                (&mut be.oerrors, bb.oerrors),
                (&mut be.rx_nombuf, bb.rx_nombuf),
                (&mut be.tx_nombuf, bb.tx_nombuf),
            ];
            for (x, y) in scalars {
                *x = x.checked_sub(y)?;
            }
        }
        Some(())
    }
}

/// Every drop reason a switch of this build counts, in the dataplane's order: its own reasons
/// (`DropReason`), then its parser's malformed reasons (`Malformed`; its `oversize` is the
/// switch's, one key in `drops`). The metrics export each
/// at 0 before the first drop, so `rate()` and alerts have a series to read; a reason a newer
/// switch sends is exported too. A dataplane test checks the list against its enums.
pub const DROP_REASONS: [&str; 29] = [
    "egress_limit",
    "ingress_limit",
    "headroom_overflow",
    "wred",
    "policer",
    "no_route",
    "link_local",
    "oversize",
    "pfc_watchdog",
    "no_buffer",
    "pause_ignored",
    "rx_ring",
    "runt",
    "truncated_vlan",
    "truncated_ipv4",
    "bad_ip_version",
    "bad_ipv4_ihl",
    "bad_ipv4_length",
    "truncated_ipv6",
    "bad_ipv6_length",
    "truncated_ip_ext",
    "bad_ip_ext",
    "truncated_udp",
    "bad_udp_length",
    "truncated_bth",
    "truncated_mac_control",
    "not_mac_control",
    "bad_pfc",
    "bad_pause",
];

/// Frames dropped, by reason name, zeros left out. Keyed by name rather than by an enum
/// because the reasons come from two owners (the dataplane's drop reasons and its parser's
/// malformed reasons) and a client must read reasons newer than itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Drops(pub BTreeMap<String, u64>);

impl Drops {
    /// Counts `n` more drops for `name`; 0 adds no key, so zeros stay left out.
    pub fn add(&mut self, name: &str, n: u64) {
        if n > 0 {
            *self.0.entry(name.to_string()).or_default() += n;
        }
    }

    /// All drops, every reason.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Drops for `name`, 0 if absent.
    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// The reasons with their counts, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// No drops at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

// ---------------------------------------------------------------------------------------------
// The peaks alone: what `watermarks` answers (a snapshot cut down to the `peak_*` figures and
// the ids that locate them) and what the watermark accumulators keep.

/// Every peak of a snapshot, located as in the snapshot (ports, queues and PGs in the same
/// order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peaks {
    /// Per port, as in the snapshot.
    pub ports: Vec<PortPeaks>,
    /// The pool's peaks.
    pub buffer: PoolPeaks,
    /// Each named pool's, as in the snapshot (left out of the JSON without named pools).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolReportPeaks>,
}

/// A named pool's peaks, located by name and type.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolReportPeaks {
    /// As `PoolReport::name`.
    pub name: String,
    /// As `PoolReport::kind`.
    #[serde(rename = "type")]
    pub kind: String,
    /// As `PoolReport::peak_used_cells`.
    pub peak_used_cells: u32,
    /// Its shared headroom pool's, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<PoolHeadroomPeaks>,
}

/// `PoolHeadroom`'s peak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolHeadroomPeaks {
    /// As `PoolHeadroom::peak_used_cells`.
    pub peak_used_cells: u32,
}

/// A port's peaks, located by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortPeaks {
    /// The port id as configured.
    pub id: u16,
    /// As `PortReport::name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port's buffer peaks.
    pub buffer: PortBufferPeaks,
    /// Per queue, queue 0 first.
    pub queues: Vec<QueuePeaks>,
    /// Per PG, PG 0 first.
    pub pgs: Vec<PgPeaks>,
}

/// `PortBuffer`'s peaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortBufferPeaks {
    /// As `PortBuffer::peak_ingress_cells`.
    pub peak_ingress_cells: u32,
    /// As `PortBuffer::peak_egress_cells`.
    pub peak_egress_cells: u32,
}

/// `PoolBuffer`'s peaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolPeaks {
    /// As `PoolBuffer::peak_used_cells`.
    pub peak_used_cells: u32,
    /// As `PoolBuffer::peak_ingress_shared_cells`.
    pub peak_ingress_shared_cells: u32,
    /// As `PoolBuffer::peak_egress_shared_cells`.
    pub peak_egress_shared_cells: u32,
}

/// A queue's peaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePeaks {
    /// Queue number, 0..8.
    pub queue: u8,
    /// As `QueueReport::peak_cells`.
    pub peak_cells: u32,
    /// As `QueueReport::peak_bytes`.
    pub peak_bytes: u64,
}

/// A PG's peaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgPeaks {
    /// PG number, 0..8.
    pub pg: u8,
    /// As `PgReport::peak_cells`.
    pub peak_cells: u32,
    /// As `PgReport::peak_headroom_cells`.
    pub peak_headroom_cells: u32,
}

impl Snapshot {
    /// The peaks of this snapshot, nothing else.
    pub fn peaks(&self) -> Peaks {
        let b = &self.buffer;
        Peaks {
            ports: self
                .ports
                .iter()
                .map(|p| PortPeaks {
                    id: p.id,
                    name: p.name.clone(),
                    buffer: PortBufferPeaks {
                        peak_ingress_cells: p.buffer.peak_ingress_cells,
                        peak_egress_cells: p.buffer.peak_egress_cells,
                    },
                    queues: (p.queues.iter())
                        .map(|q| QueuePeaks {
                            queue: q.queue,
                            peak_cells: q.peak_cells,
                            peak_bytes: q.peak_bytes,
                        })
                        .collect(),
                    pgs: (p.pgs.iter())
                        .map(|g| PgPeaks {
                            pg: g.pg,
                            peak_cells: g.peak_cells,
                            peak_headroom_cells: g.peak_headroom_cells,
                        })
                        .collect(),
                })
                .collect(),
            buffer: PoolPeaks {
                peak_used_cells: b.peak_used_cells,
                peak_ingress_shared_cells: b.peak_ingress_shared_cells,
                peak_egress_shared_cells: b.peak_egress_shared_cells,
            },
            pools: (self.pools.iter())
                .map(|p| PoolReportPeaks {
                    name: p.name.clone(),
                    kind: p.kind.clone(),
                    peak_used_cells: p.peak_used_cells,
                    headroom: p.headroom.map(|h| PoolHeadroomPeaks {
                        peak_used_cells: h.peak_used_cells,
                    }),
                })
                .collect(),
        }
    }
}

/// Raises each of `into`'s figures to `from`'s at the same place (same index), taking what
/// `into` lacks from `from` whole.
fn raise_list<T: Clone>(into: &mut Vec<T>, from: &[T], raise: impl Fn(&mut T, &T)) {
    for (i, f) in from.iter().enumerate() {
        match into.get_mut(i) {
            Some(t) => raise(t, f),
            None => into.push(f.clone()),
        }
    }
}

impl Peaks {
    /// Each peak becomes the larger of itself and `other`'s at the same place: how a
    /// watermark accumulator takes in the peaks the switch just restarted, and how a reading
    /// is raised to what the accumulator holds. Ids are kept from `self`.
    pub fn raise_to(&mut self, other: &Peaks) {
        raise_list(&mut self.ports, &other.ports, |p, o| {
            p.buffer.peak_ingress_cells = p.buffer.peak_ingress_cells.max(o.buffer.peak_ingress_cells);
            p.buffer.peak_egress_cells = p.buffer.peak_egress_cells.max(o.buffer.peak_egress_cells);
            raise_list(&mut p.queues, &o.queues, |q, o| {
                q.peak_cells = q.peak_cells.max(o.peak_cells);
                q.peak_bytes = q.peak_bytes.max(o.peak_bytes);
            });
            raise_list(&mut p.pgs, &o.pgs, |g, o| {
                g.peak_cells = g.peak_cells.max(o.peak_cells);
                g.peak_headroom_cells = g.peak_headroom_cells.max(o.peak_headroom_cells);
            });
        });
        let (b, o) = (&mut self.buffer, &other.buffer);
        b.peak_used_cells = b.peak_used_cells.max(o.peak_used_cells);
        b.peak_ingress_shared_cells = b.peak_ingress_shared_cells.max(o.peak_ingress_shared_cells);
        b.peak_egress_shared_cells = b.peak_egress_shared_cells.max(o.peak_egress_shared_cells);
        raise_list(&mut self.pools, &other.pools, |p, o| {
            p.peak_used_cells = p.peak_used_cells.max(o.peak_used_cells);
            match (&mut p.headroom, o.headroom) {
                (Some(h), Some(oh)) => h.peak_used_cells = h.peak_used_cells.max(oh.peak_used_cells),
                (h @ None, oh) => *h = oh,
                (Some(_), None) => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counters since a baseline are the differences; levels and peaks are today's; a baseline
    /// of another run (a counter went backwards, other ports) is refused.
    #[test]
    fn counters_since_a_baseline_subtract_and_levels_stay() {
        let mut base = Snapshot {
            ports: vec![port(1, 5)],
            ..Default::default()
        };
        base.ports[0].rx_packets = 100;
        base.ports[0].pfc_tx[3] = 7;
        base.ports[0].drops.add("wred", 4);
        base.ports[0].queues[0].tx_packets = 90;
        base.totals.rx_packets = 100;
        base.totals.drops.add("wred", 4);
        let mut now = base.clone();
        now.ports[0].rx_packets = 150;
        now.ports[0].pfc_tx[3] = 9;
        now.ports[0].drops.add("wred", 1);
        now.ports[0].drops.add("rx_ring", 3);
        now.ports[0].queues[0].tx_packets = 130;
        now.ports[0].queues[0].depth_cells = 42;
        now.ports[0].queues[0].peak_cells = 60;
        now.totals.rx_packets = 150;
        now.totals.drops.add("wred", 1);
        let d = now.since(&base).unwrap();
        let p = &d.ports[0];
        assert_eq!((p.rx_packets, p.pfc_tx[3], p.queues[0].tx_packets), (50, 2, 40));
        assert_eq!((p.drops.get("wred"), p.drops.get("rx_ring")), (1, 3));
        assert_eq!((p.queues[0].depth_cells, p.queues[0].peak_cells), (42, 60));
        assert_eq!((d.totals.rx_packets, d.totals.drops.get("wred")), (50, 1));
        // Since itself: every counter 0, no drop reason left.
        let zero = now.since(&now).unwrap();
        assert_eq!((zero.ports[0].rx_packets, zero.totals.drops.total()), (0, 0));
        assert!(zero.ports[0].drops.is_empty());
        // The switch restarted: its counters are below the baseline's.
        assert!(base.since(&now).is_none());
        // Another switch: other ports.
        let other = Snapshot {
            ports: vec![port(2, 5)],
            ..Default::default()
        };
        assert!(other
            .since(&Snapshot {
                ports: vec![port(1, 5)],
                ..Default::default()
            })
            .is_none());
    }

    fn port(id: u16, peak: u32) -> PortReport {
        PortReport {
            id,
            queues: vec![QueueReport {
                queue: 3,
                depth_cells: 1,
                peak_cells: peak,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_renamed_or_missing_field_is_refused_by_name() {
        let s = Snapshot {
            ports: vec![port(1, 5)],
            ..Default::default()
        };
        let mut v = serde_json::to_value(&s).unwrap();
        assert_eq!(serde_json::from_value::<Snapshot>(v.clone()).unwrap(), s);
        let q = v["ports"][0]["queues"][0].as_object_mut().unwrap();
        let peak = q.remove("peak_cells").unwrap();
        q.insert("peak_cell".into(), peak);
        let e = serde_json::from_value::<Snapshot>(v).unwrap_err().to_string();
        assert!(e.contains("missing field `peak_cells`"), "{e}");
    }

    #[test]
    fn peaks_are_the_peak_fields_where_they_are() {
        let s = Snapshot {
            ports: vec![port(4, 100)],
            ..Default::default()
        };
        let v = serde_json::to_value(s.peaks()).unwrap();
        assert_eq!(v["ports"][0]["id"], 4);
        assert_eq!(v["ports"][0]["queues"][0]["queue"], 3);
        assert_eq!(v["ports"][0]["queues"][0]["peak_cells"], 100);
        assert!(v["ports"][0]["queues"][0].get("depth_cells").is_none());
        assert!(v["ports"][0].get("rx_packets").is_none());
    }

    /// Paths of the `peak*` numbers of `v` (`/ports/0/queues/0/peak_cells`), and the names of
    /// its other numbers.
    fn numbers(v: &serde_json::Value, path: &str, peaks: &mut Vec<String>, others: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let p = format!("{path}/{k}");
                    match x.is_u64() {
                        true if k.starts_with("peak") => peaks.push(p),
                        true => others.push(k.clone()),
                        false => numbers(x, &p, peaks, others),
                    }
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    numbers(x, &format!("{path}/{i}"), peaks, others);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn peaks_hold_every_peak_of_a_snapshot_and_the_ids_that_locate_them() {
        // One of everything, every number set, so no figure hides behind a zero.
        let mut v = serde_json::to_value(Snapshot {
            ports: vec![port(1, 5)],
            ..Default::default()
        })
        .unwrap();
        v["ports"][0]["pgs"] = serde_json::to_value(vec![PgReport::default()]).unwrap();
        v["ports"][0]["name"] = "Ethernet8".into();
        v["pools"] = serde_json::to_value(vec![PoolReport {
            headroom: Some(PoolHeadroom::default()),
            ..Default::default()
        }])
        .unwrap();
        fn ones(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::Number(_) => *v = 1.into(),
                serde_json::Value::Array(a) => a.iter_mut().for_each(ones),
                serde_json::Value::Object(m) => m.values_mut().for_each(ones),
                _ => {}
            }
        }
        ones(&mut v);
        let s: Snapshot = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(s.pools.len(), 1, "{v}");
        v.as_object_mut().unwrap().remove("totals");
        let (mut want, mut got, mut ids) = (Vec::new(), Vec::new(), Vec::new());
        numbers(&v, "", &mut want, &mut Vec::new());
        numbers(&serde_json::to_value(s.peaks()).unwrap(), "", &mut got, &mut ids);
        want.sort();
        got.sort();
        assert_eq!(got, want, "Peaks must carry every peak_* figure of the snapshot");
        ids.sort();
        ids.dedup();
        assert_eq!(ids, ["id", "pg", "queue"], "and besides them only the ids");
    }

    #[test]
    fn raising_takes_the_larger_figure_at_each_place() {
        let mut acc = Peaks::default();
        let a = Snapshot {
            ports: vec![port(4, 100)],
            ..Default::default()
        }
        .peaks();
        acc.raise_to(&a);
        assert_eq!(acc, a, "an empty accumulator takes everything");
        let mut low = Snapshot {
            ports: vec![port(4, 5)],
            ..Default::default()
        }
        .peaks();
        low.raise_to(&acc);
        assert_eq!(low.ports[0].queues[0].peak_cells, 100);
        acc.raise_to(
            &Snapshot {
                ports: vec![port(4, 7)],
                ..Default::default()
            }
            .peaks(),
        );
        assert_eq!(acc.ports[0].queues[0].peak_cells, 100);
    }

    /// A port's name travels with its figures when the config gives one, and is left out of
    /// the JSON when not (summaries of unnamed configs read as before, and old ones parse);
    /// likewise the named pools.
    #[test]
    fn names_and_pools_are_there_only_when_the_config_gives_them() {
        let plain = Snapshot {
            ports: vec![port(1, 5)],
            ..Default::default()
        };
        let v = serde_json::to_value(&plain).unwrap();
        assert!(v["ports"][0].get("name").is_none() && v.get("pools").is_none(), "{v}");
        let mut named = plain.clone();
        named.ports[0].name = Some("Ethernet120".into());
        named.pools.push(PoolReport {
            name: "ingress_lossless_pool".into(),
            kind: "ingress".into(),
            size_cells: 100,
            used_cells: 3,
            peak_used_cells: 9,
            headroom: Some(PoolHeadroom {
                size_cells: 10,
                used_cells: 1,
                peak_used_cells: 2,
            }),
        });
        let v = serde_json::to_value(&named).unwrap();
        assert_eq!(v["ports"][0]["name"], "Ethernet120");
        assert_eq!(v["pools"][0]["type"], "ingress");
        assert_eq!(serde_json::from_value::<Snapshot>(v).unwrap(), named);
        let p = named.peaks();
        assert_eq!(p.ports[0].name.as_deref(), Some("Ethernet120"));
        assert_eq!(p.pools[0].headroom.unwrap().peak_used_cells, 2);
        let mut acc = plain.peaks();
        acc.raise_to(&p);
        assert_eq!(acc.pools, p.pools, "an accumulator without pools takes them whole");
    }

    /// What holds a port now (received PFC, a watchdog storm, a wire behind real time) is in
    /// the JSON only while it holds, and a summary written before these fields parses as
    /// nothing holding.
    #[test]
    fn states_now_are_there_only_while_they_hold_and_old_summaries_parse() {
        let mut s = Snapshot {
            ports: vec![port(1, 5)],
            ..Default::default()
        };
        s.ports[0].peer = Some(PeerReport::default());
        s.ports[0].backend = Some(BackendReport::default());
        let v = serde_json::to_value(&s).unwrap();
        let p = &v["ports"][0];
        assert!(p.get("paused_now").is_none() && p.get("storm_now").is_none(), "{p}");
        assert!(p["backend"].get("link_up").is_none(), "{p}");
        // An older switch's port: no `behind_ns` in its peer either.
        let mut old = v.clone();
        old["ports"][0]["peer"].as_object_mut().unwrap().remove("behind_ns");
        assert_eq!(serde_json::from_value::<Snapshot>(old).unwrap(), s);
        s.ports[0].paused_now[3] = true;
        s.ports[0].storm_now[4] = true;
        s.ports[0].peer.as_mut().unwrap().behind_ns = 570_000_000;
        s.ports[0].backend.as_mut().unwrap().link_up = Some(false);
        let v = serde_json::to_value(&s).unwrap();
        let p = &v["ports"][0];
        assert_eq!(p["paused_now"][3], true);
        assert_eq!(p["paused_now"][2], false);
        assert_eq!(p["storm_now"][4], true);
        assert_eq!(p["peer"]["behind_ns"], 570_000_000u64);
        assert_eq!(p["backend"]["link_up"], false);
        assert_eq!(serde_json::from_value::<Snapshot>(v).unwrap(), s);
    }

    /// A user names a port by name or id; an unknown one is refused listing every port.
    #[test]
    fn ports_are_found_by_name_or_id() {
        let mut s = Snapshot {
            ports: vec![port(0, 1), port(8, 1), port(9, 1)],
            ..Default::default()
        };
        s.ports[0].name = Some("Ethernet0".into());
        s.ports[1].name = Some("Ethernet8".into());
        assert_eq!(s.port_id_of("Ethernet8"), Ok(8));
        assert_eq!(s.port_id_of("8"), Ok(8));
        assert_eq!(s.port_id_of(" 9 "), Ok(9));
        assert_eq!(
            s.port_id_of("Ethernet9").unwrap_err(),
            "\"Ethernet9\" is not a port of the switch (ports: 0 (Ethernet0), 8 (Ethernet8), 9)"
        );
        assert_eq!(s.ports[1].label(), "Ethernet8");
        assert_eq!(s.ports[2].label(), "9");
    }

    /// Unnamed ports keep the column tables always had (ids right-aligned in 4); named ones
    /// are left-aligned as wide as the longest name.
    #[test]
    fn the_port_column_fits_the_longest_name() {
        let ids = PortColumn::new([(0, None), (12, None)]);
        assert_eq!(
            (ids.pad("port"), ids.pad("12")),
            ("port".to_string(), "  12".to_string())
        );
        let named = PortColumn::new([(0, Some("Ethernet0")), (120, Some("Ethernet120")), (7, None)]);
        assert_eq!(named.width(), 11);
        assert_eq!(named.pad("port"), "port       ");
        assert_eq!(named.pad("Ethernet120"), "Ethernet120");
        assert_eq!(named.pad("7"), "7          ");
    }
}

//! The TOML file as people write it: serde structs, nothing resolved.
//!
//! Everything is optional here except what has no sane default, and quantities stay as the
//! user wrote them ([`Scalar`]) so validation can report *all* problems, each with the field
//! path and the original text, instead of serde stopping at the first bad unit. Unknown keys
//! are errors (`deny_unknown_fields`): a misspelt `kmni` must not silently fall back to a
//! default. Integers are read as `i64` and range-checked later for the same reason.
//! `configs/README.md` documents every key.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// A number or a string with a unit, kept as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A bare integer.
    Int(i64),
    /// A bare decimal number.
    Float(f64),
    /// A string, usually a number with a unit (`"4MiB"`, `"25G"`, `"1/8"`).
    Str(String),
}

impl fmt::Display for Scalar {
    /// Echoes the value as the user wrote it (strings without quotes), for error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::Float(v) => write!(f, "{v}"),
            Scalar::Str(s) => f.write_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a string with a unit such as \"4MiB\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                i64::try_from(v)
                    .map(Scalar::Int)
                    .map_err(|_| E::custom("number too large"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `[buffer]`.
    #[serde(default)]
    pub buffer: BufferSection,
    /// Values every `[[port]]` inherits unless it sets its own.
    #[serde(default)]
    pub port_defaults: PortDefaults,
    /// The `[[port]]` tables, in file order.
    #[serde(default, rename = "port")]
    pub ports: Vec<PortSection>,
    /// `[run]`: how `rocesw run` drives the ports.
    #[serde(default)]
    pub run: RunSection,
    /// `[classify]`.
    #[serde(default)]
    pub classify: ClassifySection,
    /// `[cnp]`.
    #[serde(default)]
    pub cnp: CnpSection,
    /// `[pfc]`.
    #[serde(default)]
    pub pfc: PfcSection,
    /// `[pg.N]`, keyed by PG number as written.
    #[serde(default)]
    pub pg: BTreeMap<String, PgSection>,
    /// `[queue.N]`, keyed by queue number as written.
    #[serde(default)]
    pub queue: BTreeMap<String, QueueSection>,
    /// `[ecn.NAME]` WRED-ECN profiles, referenced by name from queues.
    #[serde(default)]
    pub ecn: BTreeMap<String, EcnSection>,
    /// `[fdb]`.
    #[serde(default)]
    pub fdb: FdbSection,
}

/// `[buffer]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferSection {
    /// Accounting cell size (default 256 B; a power of two, 64..=4096 B).
    pub cell: Option<Scalar>,
    /// Total packet buffer (default 4 MiB; with pools, what the pools and reserves need).
    pub size: Option<Scalar>,
    /// `[buffer.pool.NAME]`: the shared pools, as SONiC's BUFFER_POOL configures them (none:
    /// one pool shared by every PG and queue, what the reserves leave of `size`).
    #[serde(default)]
    pub pool: BTreeMap<String, PoolSection>,
    /// Slices of the MMU (Broadcom's XPEs or ITMs, 1..=4; default 1): every pool's size is
    /// split evenly among them, and a port's PGs and queues are accounted in its own slice
    /// (`[[port]] slice`).
    pub slices: Option<i64>,
}

/// `[buffer.pool.NAME]`: one shared pool of one direction.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSection {
    /// `"ingress"` (PGs draw from it) or `"egress"` (queues do).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Its shared space: what dynamic limits scale with (reserves are outside it).
    pub size: Option<Scalar>,
    /// `"dynamic"` (default: its PGs or queues give alpha or dynamic_th) or `"static"` (they
    /// give static limits), as SAI's pool threshold mode.
    pub mode: Option<String>,
    /// Ingress only: a shared headroom pool of this size, which the lossless PGs' headroom is
    /// drawn from (each PG up to its own `headroom`) instead of being reserved per PG.
    pub headroom: Option<Scalar>,
}

/// `[port_defaults]`: what every `[[port]]` inherits unless it sets its own.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortDefaults {
    /// Line rate (a rate, bits per second); required here or per port.
    pub speed: Option<Scalar>,
    /// Cable length (default 15 m); only the headroom calculation reads it.
    pub cable: Option<Scalar>,
    /// IP MTU in bytes (default 1500, 68..=9216); the largest frame is MTU + 18.
    pub mtu: Option<i64>,
    /// The port scheduler's kind: "sp_wdrr" (default), "vlarb" or "edf".
    pub scheduler: Option<String>,
    /// The VL arbitration tables of ports whose scheduler is "vlarb".
    pub vlarb: Option<VlArbSection>,
    /// The EDF scheduler's settings, for the ports whose scheduler is "edf".
    pub edf: Option<EdfSection>,
}

/// `vlarb = { high = [[VL, weight], ...], low = [...], high_limit = N }`, as OpenSM's
/// `qos_vlarb_high`, `qos_vlarb_low` and `qos_high_limit`. Entries stay as written (each an
/// array) so validation can name a malformed one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VlArbSection {
    /// High-priority `[VL, weight]` entries, in order.
    pub high: Option<Vec<Vec<i64>>>,
    /// Low-priority `[VL, weight]` entries, in order.
    pub low: Option<Vec<Vec<i64>>>,
    /// LimitOfHighPriority in units of 4 KiB (0..=255; 255 = unbounded).
    pub high_limit: Option<i64>,
}

impl VlArbSection {
    /// `self` with every field `over` sets replacing it (a port's table over the defaults').
    pub fn overlaid(&self, over: &VlArbSection) -> VlArbSection {
        VlArbSection {
            high: over.high.clone().or_else(|| self.high.clone()),
            low: over.low.clone().or_else(|| self.low.clone()),
            high_limit: over.high_limit.or(self.high_limit),
        }
    }
}

/// `[port_defaults.edf]` and `[port.edf]`: a port's section overrides the default's key by key.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdfSection {
    /// "ideal", "fifo2" or "take-over" (default).
    pub mode: Option<String>,
    /// Delay budget per queue number: the regulated queues.
    pub budget: Option<BTreeMap<String, Scalar>>,
    /// Delay budget per DSCP, over its queue's.
    pub dscp_budget: Option<BTreeMap<String, Scalar>>,
    /// "off" (default) or "flow_label": read a time-to-destination tag from the IPv6 flow label.
    pub tag: Option<String>,
    /// The tag's unit (a duration, default 16ns).
    pub tag_unit: Option<Scalar>,
}

/// One `[[port]]` as written; unset keys fall back to `[port_defaults]`, unset PG and queue
/// keys to the global `[pg.N]` and `[queue.N]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSection {
    /// Port id, 0..=65535 and unique: the one required key.
    pub id: i64,
    /// A label for logs and the CLI.
    pub name: Option<String>,
    /// Line rate, over `[port_defaults] speed`.
    pub speed: Option<Scalar>,
    /// Cable length, over `[port_defaults] cable`.
    pub cable: Option<Scalar>,
    /// IP MTU, over `[port_defaults] mtu`.
    pub mtu: Option<i64>,
    /// Host interface for `rocesw run` (veth, tap...).
    pub interface: Option<String>,
    /// Worker that owns the port in `rocesw run`.
    pub worker: Option<i64>,
    /// A capture-file port for `rocesw run` instead of an interface.
    pub pcap: Option<PcapPortSection>,
    /// "emulated" or "wire": what is at the far end (default: by backend, see
    /// `PeerKind::default_for`).
    pub peer: Option<String>,
    /// A DPDK port for `rocesw run` instead of an interface: a virtual device string
    /// (`net_ring0`, `net_pcap0,rx_pcap=in.pcap`, `net_vhost0,iface=/run/rocesw/vm0.sock`) or
    /// a PCI address (`0000:3b:00.0`). Needs a rocesw built with `--features dpdk`.
    pub dpdk: Option<String>,
    /// This port's scheduler kind, over `[port_defaults] scheduler`.
    pub scheduler: Option<String>,
    /// `"off"`: the port transmits no data (its queues fill, as SAI's PKT_TX_ENABLE = false
    /// makes them, which SONiC's QoS tests use to fill a buffer); `"on"` (default).
    pub tx: Option<String>,
    /// The MMU slice (`[buffer] slices`) this port's PGs and queues are accounted in: its
    /// pipe's XPE on a Broadcom ASIC (default 0).
    pub slice: Option<i64>,
    /// This port's VL arbitration settings, field by field over `[port_defaults.vlarb]`.
    pub vlarb: Option<VlArbSection>,
    /// This port's EDF settings, key by key over `[port_defaults.edf]`.
    pub edf: Option<EdfSection>,
    /// This port's PFC-enabled priorities, over `[pfc] priorities` (SONiC's per-port
    /// `pfc_enable`): a subset of them; `[]` makes every PG of the port lossy.
    pub pfc: Option<Vec<i64>>,
    /// The `[classify.map.NAME]` this port's received frames are classified with (SONiC's
    /// per-port DSCP_TO_TC / DOT1P_TO_TC / TC_TO_PRIORITY_GROUP maps); default `[classify]`'s.
    pub classify: Option<String>,
    /// This port's own PG settings, field by field over the global `[pg.N]`.
    #[serde(default)]
    pub pg: BTreeMap<String, PgSection>,
    /// This port's own queue settings, field by field over the global `[queue.N]`.
    #[serde(default)]
    pub queue: BTreeMap<String, QueueSection>,
}

/// `[[port]] pcap = { input = "...", output = "...", pace = "capture" }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapPortSection {
    /// Classic pcap whose frames arrive on the port.
    pub input: Option<String>,
    /// File the port's transmitted frames are written to.
    pub output: Option<String>,
    /// "capture" (default: at the capture's own spacing) or "asap".
    pub pace: Option<String>,
}

/// `[run]` as written: only `rocesw run` reads it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// Poll-mode worker threads (default 1, at most 64).
    pub workers: Option<i64>,
    /// Core per worker to pin it to; empty: no pinning.
    #[serde(default)]
    pub cores: Vec<i64>,
    /// "busy" (default) or a duration to sleep after an idle round, e.g. "50us".
    pub idle: Option<String>,
    /// How long to keep sending what was admitted after SIGINT/SIGTERM (default 1 s).
    pub drain_timeout: Option<Scalar>,
    /// `[run.dpdk]`: how DPDK's EAL starts when some port has `dpdk = "..."`.
    pub dpdk: Option<DpdkRunSection>,
}

/// `[run.dpdk] eal_args = [...], memory = "512MiB", hugepages = false, mbufs = 16383`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpdkRunSection {
    /// Extra EAL arguments, appended after rocesw's own (e.g. `--log-level=pmd.net.*:debug`).
    #[serde(default)]
    pub eal_args: Vec<String>,
    /// Memory the EAL reserves (default 512 MiB).
    pub memory: Option<Scalar>,
    /// Back DPDK's memory with hugepages (default: only when a PCI port is configured).
    pub hugepages: Option<bool>,
    /// Packet buffers (mbufs) in the pool every DPDK port receives into and sends from.
    pub mbufs: Option<i64>,
}

/// `[classify]` as written: maps keyed by number as written (`"26" = 3`) so validation can name bad
/// keys.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifySection {
    /// "dscp" (default), "pcp" or "none".
    pub trust: Option<String>,
    /// Traffic class of frames without the trusted field (default 0).
    pub default_tc: Option<i64>,
    /// `{ DSCP = tc }`; unlisted DSCPs take `default_tc`.
    #[serde(default)]
    pub dscp_to_tc: BTreeMap<String, i64>,
    /// `{ PCP = tc }`; unlisted PCP p takes tc p.
    #[serde(default)]
    pub pcp_to_tc: BTreeMap<String, i64>,
    /// `{ tc = queue }`; default identity.
    #[serde(default)]
    pub tc_to_queue: BTreeMap<String, i64>,
    /// `{ tc = PG }`; default identity.
    #[serde(default)]
    pub tc_to_pg: BTreeMap<String, i64>,
    /// `[[classify.rule]]`, evaluated in order.
    #[serde(default, rename = "rule")]
    pub rules: Vec<RuleSection>,
    /// `[classify.map.NAME]`: named map sets a port may classify with (`[[port]] classify`).
    #[serde(default)]
    pub map: BTreeMap<String, MapSetSection>,
}

/// One `[classify.map.NAME]` as written: the ingress maps a port that names it classifies
/// with (SONiC's per-port PORT_QOS_MAP bindings); a map it does not give is `[classify]`'s.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapSetSection {
    /// `{ DSCP = tc }`, the whole map: unlisted DSCPs take `[classify] default_tc`.
    pub dscp_to_tc: Option<BTreeMap<String, i64>>,
    /// `{ PCP = tc }`, the whole map: unlisted PCP p takes tc p.
    pub pcp_to_tc: Option<BTreeMap<String, i64>>,
    /// `{ tc = PG }`, the whole map: default identity.
    pub tc_to_pg: Option<BTreeMap<String, i64>>,
    /// Read only to refuse it with a reason: the queue map is the switch's (see
    /// `validate::classify`).
    pub tc_to_queue: Option<BTreeMap<String, i64>>,
}

/// One `[[classify.rule]]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSection {
    /// Default `ruleN`, N its position from 0.
    pub name: Option<String>,
    /// `match`: every key given must match; none given matches every frame.
    #[serde(default, rename = "match")]
    pub matches: MatchSection,
    /// `action`: at least one of `tc`, `queue`, `set_dscp`.
    #[serde(default)]
    pub action: ActionSection,
}

/// `[[classify.rule]] match` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchSection {
    /// Port id the frame came in on.
    pub in_port: Option<i64>,
    /// EtherType (0..=0xffff) after any VLAN tag.
    pub ether_type: Option<i64>,
    /// IP protocol number (0..=255).
    pub ip_proto: Option<i64>,
    /// UDP destination port.
    pub udp_dport: Option<i64>,
    /// UDP source port.
    pub udp_sport: Option<i64>,
    /// IP DSCP (0..=63).
    pub dscp: Option<i64>,
    /// VLAN PCP (0..=7).
    pub pcp: Option<i64>,
    /// UDP destination port 4791 with a BTH.
    pub roce: Option<bool>,
    /// A CNP; CNPs take their queue before any rule, so `true` never matches.
    pub cnp: Option<bool>,
}

/// `[[classify.rule]] action` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionSection {
    /// New traffic class (0..=7); queue and PG follow the maps unless `queue` is given too.
    pub tc: Option<i64>,
    /// Egress queue override (0..=7).
    pub queue: Option<i64>,
    /// Rewrite the DSCP to this (0..=63).
    pub set_dscp: Option<i64>,
}

/// `[cnp]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CnpSection {
    /// The CNP queue (default 6); should be strict priority and lossy.
    pub queue: Option<i64>,
    /// Token bucket in front of the CNP queue, one per egress port.
    pub policer: Option<RateLimitSection>,
}

/// `{ rate, burst }`: a CNP policer or a queue shaper.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSection {
    /// Fill rate (a rate, bits per second, above 0).
    pub rate: Scalar,
    /// Bucket depth (a size).
    pub burst: Scalar,
}

/// `[pfc]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PfcSection {
    /// PFC-enabled (lossless) priorities, 0..=7.
    #[serde(default)]
    pub priorities: Vec<i64>,
    /// Pause time of our XOFF frames in quanta of 512 bit times (default 65535).
    pub pause_quanta: Option<i64>,
    /// Fraction of the pause time after which XOFF is re-sent while congested (default 0.5).
    pub refresh: Option<Scalar>,
    /// The PFC watchdog; absent: off.
    pub watchdog: Option<WatchdogSection>,
}

/// `[pfc] watchdog = { ... }` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchdogSection {
    /// `false` turns the watchdog off (default true).
    pub enabled: Option<bool>,
    /// How long a paused queue holding frames takes to count as stormed (default 200 ms).
    pub detection: Option<Scalar>,
    /// How long without PFC frames before the action ends (default 400 ms).
    pub restoration: Option<Scalar>,
    /// "drop" (default), "forward" or "alert".
    pub action: Option<String>,
}

/// `[pg.N]`: its limits ([`PgSection::limits`]), headroom and XON offset.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PgSection {
    /// Bytes reserved per port, never shared (default 0).
    pub min: Option<Scalar>,
    /// Dynamic limit: alpha × the free shared pool (`0.125` or `"1/8"`).
    pub alpha: Option<Scalar>,
    /// Fixed limit (a size).
    #[serde(rename = "static")]
    pub static_limit: Option<Scalar>,
    /// Dynamic limit as SAI writes it: alpha = 2^N.
    pub dynamic_th: Option<i64>,
    /// `true`: no limit on shared use.
    pub unlimited: Option<bool>,
    /// `"auto"` or a size; lossless PGs only.
    pub headroom: Option<Scalar>,
    /// How far below the XOFF point shared use must fall before XON (default 3 KiB).
    pub xon_offset: Option<Scalar>,
    /// XON also once shared use is at or below this (SAI's XON_TH; default 0).
    pub xon: Option<Scalar>,
    /// The `[buffer.pool.NAME]` (ingress) its shared use draws from.
    pub pool: Option<String>,
}

/// `[queue.N]`: its limits ([`QueueSection::limits`]), scheduling, shaper and ECN profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSection {
    /// Bytes reserved per port, never shared (default 0).
    pub min: Option<Scalar>,
    /// Dynamic limit: alpha × the free shared pool (`0.125` or `"1/8"`).
    pub alpha: Option<Scalar>,
    /// Fixed limit (a size).
    #[serde(rename = "static")]
    pub static_limit: Option<Scalar>,
    /// Dynamic limit as SAI writes it: alpha = 2^N.
    pub dynamic_th: Option<i64>,
    /// `true`: no limit on shared use.
    pub unlimited: Option<bool>,
    /// "strict" or "wdrr" (default; "strict" for the CNP queue).
    pub sched: Option<String>,
    /// WDRR byte-quantum multiplier, 1..=1000 (default 1).
    pub weight: Option<i64>,
    /// Token bucket the queue must conform to before it may send.
    pub shaper: Option<RateLimitSection>,
    /// Name of an `[ecn.NAME]` profile.
    pub ecn: Option<String>,
    /// The `[buffer.pool.NAME]` (egress) its shared use draws from.
    pub pool: Option<String>,
}

/// An `[ecn.NAME]` WRED-ECN profile as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcnSection {
    /// Queue length below which nothing is marked (a size).
    pub kmin: Scalar,
    /// Queue length at which the probability reaches `pmax` (a size).
    pub kmax: Scalar,
    /// Marking probability at `kmax`, 0..=1 (`0.2` or `"1/5"`).
    pub pmax: Scalar,
    /// `"instant"` (default) or `"ewma"` (then `ewma_shift` is required).
    pub average: Option<String>,
    /// EWMA weight as a power of two, 0..=15; only with `average = "ewma"`.
    pub ewma_shift: Option<i64>,
    /// "dequeue" (default) or "enqueue".
    pub mark_at: Option<String>,
    /// "pass" (default) or "drop": what WRED does to non-ECN-capable frames.
    pub non_ect: Option<String>,
}

/// `[fdb]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FdbSection {
    /// Learn source addresses (default true).
    pub learning: Option<bool>,
    /// How long a learnt entry lives unrefreshed (default 300 s).
    pub aging: Option<Scalar>,
    /// Entries the table holds at most, static ones included (default 4096).
    pub capacity: Option<i64>,
    /// Learnt entries one port may hold (default `capacity` / ports).
    pub port_limit: Option<i64>,
    /// New addresses a port may learn per second, and at once (default 1000).
    pub learn_rate: Option<i64>,
    /// `[[fdb.static]]` entries.
    #[serde(default, rename = "static")]
    pub static_entries: Vec<StaticMacSection>,
}

/// One `[[fdb.static]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticMacSection {
    /// Unicast MAC, `02:00:00:00:00:01` or with `-`.
    pub mac: String,
    /// Id of the port it is pinned to.
    pub port: i64,
}

/// What `[pg.N]` and `[queue.N]` have in common: `min`, and the shared-pool limit, given by at
/// most one of `alpha`, `static`, `dynamic_th` and `unlimited`. The two tables keep these keys
/// flat (serde cannot deny unknown keys through a flattened part); this is their one view, laid
/// over (`overlaid`) and resolved (`validate::profiles`) once for both.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LimitSection {
    /// As `[pg.N] min`.
    pub min: Option<Scalar>,
    /// As `[pg.N] alpha`.
    pub alpha: Option<Scalar>,
    /// As `[pg.N] static`.
    pub static_limit: Option<Scalar>,
    /// As `[pg.N] dynamic_th`.
    pub dynamic_th: Option<i64>,
    /// As `[pg.N] unlimited`.
    pub unlimited: Option<bool>,
}

impl LimitSection {
    /// Whether any of the shared-limit keys is given.
    pub fn gives_limit(&self) -> bool {
        self.alpha.is_some() || self.static_limit.is_some() || self.dynamic_th.is_some() || self.unlimited.is_some()
    }

    /// `self` with every key `over` sets replacing it. The shared-limit keys are one choice: an
    /// override giving any of them replaces all of them.
    pub fn overlaid(&self, over: &LimitSection) -> LimitSection {
        let base = if over.gives_limit() {
            LimitSection {
                min: self.min.clone(),
                ..LimitSection::default()
            }
        } else {
            self.clone()
        };
        LimitSection {
            min: over.min.clone().or(base.min),
            alpha: over.alpha.clone().or(base.alpha),
            static_limit: over.static_limit.clone().or(base.static_limit),
            dynamic_th: over.dynamic_th.or(base.dynamic_th),
            unlimited: over.unlimited.or(base.unlimited),
        }
    }
}

impl PgSection {
    /// Its `min` and shared-limit keys.
    pub fn limits(&self) -> LimitSection {
        LimitSection {
            min: self.min.clone(),
            alpha: self.alpha.clone(),
            static_limit: self.static_limit.clone(),
            dynamic_th: self.dynamic_th,
            unlimited: self.unlimited,
        }
    }

    /// `self` with every field `over` sets replacing it, the limits as
    /// [`LimitSection::overlaid`].
    pub fn overlaid(&self, over: &PgSection) -> PgSection {
        let l = self.limits().overlaid(&over.limits());
        PgSection {
            min: l.min,
            alpha: l.alpha,
            static_limit: l.static_limit,
            dynamic_th: l.dynamic_th,
            unlimited: l.unlimited,
            headroom: over.headroom.clone().or_else(|| self.headroom.clone()),
            xon_offset: over.xon_offset.clone().or_else(|| self.xon_offset.clone()),
            xon: over.xon.clone().or_else(|| self.xon.clone()),
            pool: over.pool.clone().or_else(|| self.pool.clone()),
        }
    }
}

impl QueueSection {
    /// Its `min` and shared-limit keys.
    pub fn limits(&self) -> LimitSection {
        LimitSection {
            min: self.min.clone(),
            alpha: self.alpha.clone(),
            static_limit: self.static_limit.clone(),
            dynamic_th: self.dynamic_th,
            unlimited: self.unlimited,
        }
    }

    /// As [`PgSection::overlaid`].
    pub fn overlaid(&self, over: &QueueSection) -> QueueSection {
        let l = self.limits().overlaid(&over.limits());
        QueueSection {
            min: l.min,
            alpha: l.alpha,
            static_limit: l.static_limit,
            dynamic_th: l.dynamic_th,
            unlimited: l.unlimited,
            sched: over.sched.clone().or_else(|| self.sched.clone()),
            weight: over.weight.or(self.weight),
            shaper: over.shaper.clone().or_else(|| self.shaper.clone()),
            ecn: over.ecn.clone().or_else(|| self.ecn.clone()),
            pool: over.pool.clone().or_else(|| self.pool.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(s: &str) -> Option<Scalar> {
        Some(Scalar::Str(s.into()))
    }

    /// PG and queue overrides lay their limits over the global table the same way: `min` key by
    /// key, the shared limit as one choice.
    #[test]
    fn limits_are_laid_over_alike_for_pgs_and_queues() {
        let global = LimitSection {
            min: size("1KiB"),
            alpha: size("1/8"),
            ..LimitSection::default()
        };
        let over = LimitSection {
            static_limit: size("64KiB"),
            ..LimitSection::default()
        };
        let laid = global.overlaid(&over);
        assert_eq!(
            laid,
            LimitSection {
                min: size("1KiB"),
                static_limit: size("64KiB"),
                ..LimitSection::default()
            }
        );
        let min_only = LimitSection {
            min: size("2KiB"),
            ..LimitSection::default()
        };
        assert_eq!(
            global.overlaid(&min_only),
            LimitSection {
                min: size("2KiB"),
                ..global.clone()
            }
        );
        let pg = PgSection {
            min: global.min.clone(),
            alpha: global.alpha.clone(),
            headroom: size("auto"),
            ..PgSection::default()
        };
        let pg_over = PgSection {
            static_limit: over.static_limit.clone(),
            ..PgSection::default()
        };
        let q = QueueSection {
            min: global.min.clone(),
            alpha: global.alpha.clone(),
            weight: Some(4),
            ..QueueSection::default()
        };
        let q_over = QueueSection {
            static_limit: over.static_limit.clone(),
            ..QueueSection::default()
        };
        let (pg, q) = (pg.overlaid(&pg_over), q.overlaid(&q_over));
        assert_eq!((pg.limits(), q.limits()), (laid.clone(), laid));
        assert_eq!((pg.headroom, q.weight), (size("auto"), Some(4)));
    }
}

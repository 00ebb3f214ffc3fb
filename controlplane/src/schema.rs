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
    Int(i64),
    Float(f64),
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
    #[serde(default)]
    pub buffer: BufferSection,
    /// Values every `[[port]]` inherits unless it sets its own.
    #[serde(default)]
    pub port_defaults: PortDefaults,
    #[serde(default, rename = "port")]
    pub ports: Vec<PortSection>,
    #[serde(default)]
    pub run: RunSection,
    #[serde(default)]
    pub classify: ClassifySection,
    #[serde(default)]
    pub cnp: CnpSection,
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
    #[serde(default)]
    pub fdb: FdbSection,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferSection {
    pub cell: Option<Scalar>,
    pub size: Option<Scalar>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortDefaults {
    pub speed: Option<Scalar>,
    pub cable: Option<Scalar>,
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
    pub high: Option<Vec<Vec<i64>>>,
    pub low: Option<Vec<Vec<i64>>>,
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSection {
    pub id: i64,
    /// A label for logs and the CLI.
    pub name: Option<String>,
    pub speed: Option<Scalar>,
    pub cable: Option<Scalar>,
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
    /// This port's VL arbitration settings, field by field over `[port_defaults.vlarb]`.
    pub vlarb: Option<VlArbSection>,
    /// This port's EDF settings, key by key over `[port_defaults.edf]`.
    pub edf: Option<EdfSection>,
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
    pub input: Option<String>,
    pub output: Option<String>,
    pub pace: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    pub workers: Option<i64>,
    #[serde(default)]
    pub cores: Vec<i64>,
    /// "busy" (default) or a duration to sleep after an idle round, e.g. "50us".
    pub idle: Option<String>,
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

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifySection {
    pub trust: Option<String>,
    pub default_tc: Option<i64>,
    #[serde(default)]
    pub dscp_to_tc: BTreeMap<String, i64>,
    #[serde(default)]
    pub pcp_to_tc: BTreeMap<String, i64>,
    #[serde(default)]
    pub tc_to_queue: BTreeMap<String, i64>,
    #[serde(default)]
    pub tc_to_pg: BTreeMap<String, i64>,
    #[serde(default, rename = "rule")]
    pub rules: Vec<RuleSection>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSection {
    pub name: Option<String>,
    #[serde(default, rename = "match")]
    pub matches: MatchSection,
    #[serde(default)]
    pub action: ActionSection,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchSection {
    pub in_port: Option<i64>,
    pub ether_type: Option<i64>,
    pub ip_proto: Option<i64>,
    pub udp_dport: Option<i64>,
    pub udp_sport: Option<i64>,
    pub dscp: Option<i64>,
    pub pcp: Option<i64>,
    pub roce: Option<bool>,
    pub cnp: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionSection {
    pub tc: Option<i64>,
    pub queue: Option<i64>,
    pub set_dscp: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CnpSection {
    pub queue: Option<i64>,
    pub policer: Option<RateLimitSection>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSection {
    pub rate: Scalar,
    pub burst: Scalar,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PfcSection {
    #[serde(default)]
    pub priorities: Vec<i64>,
    pub pause_quanta: Option<i64>,
    pub refresh: Option<Scalar>,
    pub watchdog: Option<WatchdogSection>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchdogSection {
    pub enabled: Option<bool>,
    pub detection: Option<Scalar>,
    pub restoration: Option<Scalar>,
    pub action: Option<String>,
}

/// `[pg.N]`: its limits ([`PgSection::limits`]), headroom and XON offset.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PgSection {
    pub min: Option<Scalar>,
    pub alpha: Option<Scalar>,
    #[serde(rename = "static")]
    pub static_limit: Option<Scalar>,
    pub dynamic_th: Option<i64>,
    pub unlimited: Option<bool>,
    /// `"auto"` or a size; lossless PGs only.
    pub headroom: Option<Scalar>,
    pub xon_offset: Option<Scalar>,
}

/// `[queue.N]`: its limits ([`QueueSection::limits`]), scheduling, shaper and ECN profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSection {
    pub min: Option<Scalar>,
    pub alpha: Option<Scalar>,
    #[serde(rename = "static")]
    pub static_limit: Option<Scalar>,
    pub dynamic_th: Option<i64>,
    pub unlimited: Option<bool>,
    pub sched: Option<String>,
    pub weight: Option<i64>,
    pub shaper: Option<RateLimitSection>,
    /// Name of an `[ecn.NAME]` profile.
    pub ecn: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcnSection {
    pub kmin: Scalar,
    pub kmax: Scalar,
    pub pmax: Scalar,
    /// `"instant"` (default) or `"ewma"` (then `ewma_shift` is required).
    pub average: Option<String>,
    pub ewma_shift: Option<i64>,
    pub mark_at: Option<String>,
    pub non_ect: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FdbSection {
    pub learning: Option<bool>,
    pub aging: Option<Scalar>,
    pub capacity: Option<i64>,
    pub port_limit: Option<i64>,
    pub learn_rate: Option<i64>,
    #[serde(default, rename = "static")]
    pub static_entries: Vec<StaticMacSection>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticMacSection {
    pub mac: String,
    pub port: i64,
}

/// What `[pg.N]` and `[queue.N]` have in common: `min`, and the shared-pool limit, given by at
/// most one of `alpha`, `static`, `dynamic_th` and `unlimited`. The two tables keep these keys
/// flat (serde cannot deny unknown keys through a flattened part); this is their one view, laid
/// over (`overlaid`) and resolved (`validate::profiles`) once for both.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LimitSection {
    pub min: Option<Scalar>,
    pub alpha: Option<Scalar>,
    pub static_limit: Option<Scalar>,
    pub dynamic_th: Option<i64>,
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

//! config_db.json → a rocesw TOML config, table family by table family as SONiC's orchagent
//! splits them (bufferorch: pools, profiles, PG and queue bindings; qosorch: maps, schedulers,
//! WRED; pfcwdorch: the watchdog), each value written with its origin (`TABLE|key|field`) in a
//! comment. The TOML is the one model both front ends share: running a config_db.json is
//! running the TOML it imports to, and `rocectl sonic import` writes exactly that text.

use super::db::{expand_key, reference, references, ConfigDb, Fields, Origin};
use super::headroom::{self, LookupRow, TrafficPattern};
use super::platform::{self, Platform, PoolSize, SizeMeaning};
use std::collections::{BTreeMap, BTreeSet};

mod buffers;
mod maps;
mod ports;
mod qos;
mod toml_out;

use buffers::{port_lists, read_buffers, read_pools};
use maps::read_maps;
use ports::read_ports;
use qos::{read_queues, read_watchdog, read_wred};
use toml_out::{write_toml, TomlParts};

/// The tables the importer reads; every other table is listed as ignored.
pub const READ_TABLES: &[&str] = &[
    "DEVICE_METADATA",
    "PORT",
    "CABLE_LENGTH",
    "BUFFER_POOL",
    "BUFFER_PROFILE",
    "BUFFER_PG",
    "BUFFER_QUEUE",
    "BUFFER_PORT_INGRESS_PROFILE_LIST",
    "BUFFER_PORT_EGRESS_PROFILE_LIST",
    "PORT_QOS_MAP",
    "DSCP_TO_TC_MAP",
    "DOT1P_TO_TC_MAP",
    "TC_TO_PRIORITY_GROUP_MAP",
    "TC_TO_QUEUE_MAP",
    "MAP_PFC_PRIORITY_TO_QUEUE",
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP",
    "SCHEDULER",
    "QUEUE",
    "WRED_PROFILE",
    "PFC_WD",
    "LOSSLESS_TRAFFIC_PATTERN",
    "DEFAULT_LOSSLESS_BUFFER_PARAMETER",
];

/// What the import takes besides the file.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// `--platform`: overrides DEVICE_METADATA's.
    pub platform: Option<String>,
    /// `--pg-lookup`: the platform's `pg_profile_lookup.ini`, its text and its name.
    pub pg_lookup: Option<(String, String)>,
    /// Where the file came from, for the header comment.
    pub source: Option<String>,
}

/// An imported config.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The rocesw TOML, every value with its origin.
    pub toml: String,
    /// The platform whose rules were applied.
    pub platform: &'static Platform,
    /// What was read but not modelled, or assumed: one line each (also in the TOML's header).
    pub notes: Vec<String>,
    /// The ports, in the order they were given ids: (SONiC name, id).
    pub ports: Vec<(String, u16)>,
    /// Which BUFFER_PROFILE each PG runs with: (port name, PG, profile); PGs whose buffer came
    /// from a lookup row or the formula are not listed.
    pub pg_profiles: Vec<(String, u8, String)>,
    /// Which WRED_PROFILE each queue runs with: (port name, queue, profile).
    pub queue_wred: Vec<(String, u8, String)>,
    /// The profiles made from `pg_profile_lookup.ini` rows, as buffermgrd names them
    /// (`pg_lossless_<speed>_<cable>_profile`) with the fields it gives them; their PGs are in
    /// `pg_profiles` and have no BUFFER_PG entry in the file.
    pub made_profiles: BTreeMap<String, Fields>,
    /// The ingress maps the switch's `[classify]` stands for: (PORT_QOS_MAP field, map name).
    pub default_maps: Vec<(&'static str, String)>,
    /// Each map set (`[classify.map.NAME]`) with the ingress maps it stands for, as
    /// `default_maps`.
    pub map_sets: Vec<(String, Vec<(&'static str, String)>)>,
}

/// Collects every problem of a file (as validation does), each naming its origin.
#[derive(Default)]
struct Problems {
    errors: Vec<String>,
    notes: Vec<String>,
    /// The errors and notes given, to give each once in constant time (a file of many ports
    /// gives many).
    seen: std::collections::HashSet<String>,
}

/// Each port's place by its name: one look-up a binding, not a scan of the ports.
fn port_index(ports: &[Port]) -> std::collections::HashMap<&str, usize> {
    ports.iter().enumerate().map(|(i, x)| (x.name.as_str(), i)).collect()
}

impl Problems {
    /// Each problem once, however many bindings lead to it.
    fn error(&mut self, at: impl std::fmt::Display, msg: impl std::fmt::Display) {
        let e = format!("{at}: {msg}");
        if self.seen.insert(format!("e{e}")) {
            self.errors.push(e);
        }
    }

    fn note(&mut self, msg: impl Into<String>) {
        let m = msg.into();
        if self.seen.insert(format!("n{m}")) {
            self.notes.push(m);
        }
    }

    /// Checks `fields` of `table|key` against `known`: each other field is an error.
    fn known(&mut self, table: &str, key: &str, fields: &Fields, known: &[&str]) {
        for f in fields.keys() {
            if !known.contains(&f.as_str()) {
                self.error(
                    Origin::new(table, key, f),
                    format!("unknown field (known: {})", known.join(", ")),
                );
            }
        }
    }
}

/// A whole number of `fields[field]`, or an error naming it.
fn int(p: &mut Problems, table: &str, key: &str, fields: &Fields, field: &str) -> Option<i64> {
    let v = fields.get(field)?;
    match v.trim().parse::<i64>() {
        Ok(n) => Some(n),
        Err(_) => {
            p.error(Origin::new(table, key, field), format!("{v:?} is not a whole number"));
            None
        }
    }
}

/// A byte count (non-negative, below 2^40), or an error naming it.
fn bytes(p: &mut Problems, table: &str, key: &str, fields: &Fields, field: &str) -> Option<u64> {
    let n = int(p, table, key, fields, field)?;
    if !(0..1 << 40).contains(&n) {
        p.error(
            Origin::new(table, key, field),
            format!("{n} is not a byte count (0 to 1 TiB)"),
        );
        return None;
    }
    Some(n as u64)
}

/// A port as SONiC configures it.
#[derive(Debug, Clone)]
struct Port {
    name: String,
    id: u16,
    speed_mbps: u64,
    mtu: u32,
    /// Whether PORT gives the mtu (else SONiC's default).
    mtu_given: bool,
    /// Whether PORT gives the speed (else the file's most common, said in a note).
    speed_given: bool,
    lanes: usize,
    /// The first of PORT's `lanes`: which pipe (and MMU slice) the port is on.
    first_lane: Option<u64>,
    cable: Option<(String, f64)>,
    admin_up: bool,
}

/// A shared limit as a profile gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Limit {
    DynamicTh(i64),
    Static(u64),
    Unlimited,
}

/// A PG's or queue's buffer as rocesw runs it, with where each part came from.
#[derive(Debug, Clone, PartialEq)]
struct Buf {
    pool: String,
    min: u64,
    limit: Limit,
    /// Lossless PGs: headroom, xon, xon_offset.
    headroom: Option<u64>,
    /// How `headroom` follows from the profile's xoff where it is not the xoff itself
    /// (`Platform::usable_headroom`), for its comment.
    headroom_note: Option<String>,
    xon: Option<u64>,
    xon_offset: Option<u64>,
    /// The profile (or lookup row, or formula) it came from, in words.
    origin: String,
    /// What kind of source that is: it decides how a field of it is named.
    source: Source,
    /// How each value was derived, in words that name only fields the source has.
    from: Derivation,
}

/// Where a [`Buf`] came from.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    /// A BUFFER_PROFILE entry of the file, by name: its fields are `BUFFER_PROFILE|name|field`.
    Profile(String),
    /// A `pg_profile_lookup.ini` row: the profile buffermgrd makes of it (`profile`) with the
    /// fields it gives it (`made`, as the file would hold it: export writes it as an explicit
    /// entry when it changes). The profile is made, not read, so a field is the row's.
    Lookup { profile: String, made: Fields },
    /// NVIDIA's headroom formula (the dynamic model's `"profile": "NULL"`): no profile at all.
    Formula,
}

impl Source {
    /// The BUFFER_PROFILE the buffer runs with (read, or made of a lookup row).
    fn profile(&self) -> Option<&str> {
        match self {
            Source::Profile(name) | Source::Lookup { profile: name, .. } => Some(name),
            Source::Formula => None,
        }
    }
}

/// Where each of a [`Buf`]'s values came from: the field it was read from, or how it was
/// computed (`size − xoff`), or that it is a default because the source has no such field.
#[derive(Debug, Clone, PartialEq, Default)]
struct Derivation {
    min: String,
    headroom: String,
    xon: String,
    xon_offset: String,
}

impl Buf {
    /// `field` of this buffer's source: `BUFFER_PROFILE|x|field` for a profile, `SOURCE: field`
    /// for a lookup row (whose profile is made, not read) or the formula.
    fn field(&self, field: &str) -> String {
        match self.source {
            Source::Profile(_) => format!("{}|{field}", self.origin),
            Source::Lookup { .. } | Source::Formula => format!("{}: {field}", self.origin),
        }
    }
}

/// A queue's scheduling as the QUEUE and SCHEDULER tables give it.
#[derive(Debug, Clone, PartialEq)]
struct Sched {
    strict: bool,
    weight: u32,
    shaper: Option<(u64, u64)>,
    ecn: Option<String>,
    origin: String,
}

/// A WRED_PROFILE as an `[ecn.NAME]`.
#[derive(Debug, Clone, PartialEq)]
struct Wred {
    kmin: u64,
    kmax: u64,
    pmax_percent: u64,
    drop_non_ect: bool,
}

/// Imports `db` under `opts`. Every problem found is returned at once, each naming its origin.
pub fn import(db: &ConfigDb, opts: &ImportOptions) -> Result<Imported, Vec<String>> {
    // Before any per-port work: thousands of ports are refused at once.
    let n = db.table("PORT").count();
    if n > crate::validate::MAX_PORTS {
        return Err(vec![format!(
            "PORT: {n} ports, at most {} are supported",
            crate::validate::MAX_PORTS
        )]);
    }
    let mut p = Problems::default();
    let platform = choose_platform(db, opts, &mut p);
    let lookup = opts
        .pg_lookup
        .as_ref()
        .and_then(|(text, name)| match headroom::parse_lookup(text) {
            Ok(rows) => Some((rows, name.clone())),
            Err(e) => {
                p.error(name, e);
                None
            }
        });
    let ports = read_ports(db, &mut p);
    let maps = read_maps(db, &ports, &mut p);
    let pools = read_pools(db, &mut p);
    let wred = read_wred(db, &mut p);
    let platform = match platform {
        Some(pl) => pl,
        None => return Err(p.errors),
    };
    // Per port: its PFC priorities and the PGs they make lossless.
    let mut port_prios: Vec<Vec<u8>> = ports
        .iter()
        .map(|x| maps.port_pfc.get(&x.name).map(|(v, _)| v.clone()).unwrap_or_default())
        .collect();
    let mut lossless_pgs: Vec<BTreeSet<u8>> = port_prios
        .iter()
        .zip(&ports)
        .map(|(prios, x)| {
            let tc_to_pg = maps.tc_to_pg_of(&x.name);
            prios.iter().map(|&pr| tc_to_pg[usize::from(pr & 7)]).collect()
        })
        .collect();
    // Every profile is checked, bound or not: a reference to a missing pool is wrong wherever
    // it is.
    for (name, _) in db.table("BUFFER_PROFILE") {
        let _ = buffers::read_profile(db, name, &pools, &mut p);
    }
    let (pgs, queues) = read_buffers(db, &ports, &pools, &mut lossless_pgs, platform, lookup.as_ref(), &mut p);
    let pools = buffers::shared_pools(pools, &pgs, &queues, platform, &mut p);
    // A PG buffermgrd made no profile for is lossy: its priorities leave the port's PFC.
    for ((prios, lossless), x) in port_prios.iter_mut().zip(&lossless_pgs).zip(&ports) {
        let tc_to_pg = maps.tc_to_pg_of(&x.name);
        prios.retain(|&pr| lossless.contains(&tc_to_pg[usize::from(pr & 7)]));
    }
    let port_pfc: Vec<Option<Vec<u8>>> = port_prios
        .into_iter()
        .map(|v| (v != maps.pfc_priorities).then_some(v))
        .collect();
    let scheds = read_queues(db, &ports, &wred, &mut p);
    let watchdog = read_watchdog(db, &ports, &mut p);
    port_lists(db, &mut p);
    non_strings(db, &mut p);
    if !db.ignored.is_empty() {
        p.note(format!(
            "tables a data plane does not need, not read: {}",
            db.ignored.join(", ")
        ));
    }
    if !p.errors.is_empty() {
        return Err(p.errors);
    }
    let toml = write_toml(&TomlParts {
        platform,
        ports: &ports,
        pools: &pools,
        maps: &maps,
        pgs: &pgs,
        queues: &queues,
        scheds: &scheds,
        wred: &wred,
        watchdog: &watchdog,
        port_pfc: &port_pfc,
        notes: &p.notes,
        source: opts.source.as_deref(),
    })
    .map_err(|e| vec![e])?;
    Ok(Imported {
        toml,
        platform,
        default_maps: maps.default_sonic.clone(),
        map_sets: maps.sets.iter().map(|s| (s.name.clone(), s.sonic.clone())).collect(),
        notes: p.notes,
        ports: ports.iter().map(|p| (p.name.clone(), p.id)).collect(),
        pg_profiles: ports
            .iter()
            .zip(&pgs)
            .flat_map(|(port, pgs)| {
                pgs.iter().enumerate().filter_map(move |(g, b)| {
                    let name = b.as_ref()?.source.profile()?.to_string();
                    Some((port.name.clone(), g as u8, name))
                })
            })
            .collect(),
        made_profiles: pgs
            .iter()
            .flatten()
            .flatten()
            .filter_map(|b| match &b.source {
                Source::Lookup { profile, made } => Some((profile.clone(), made.clone())),
                Source::Profile(_) | Source::Formula => None,
            })
            .collect(),
        queue_wred: ports
            .iter()
            .zip(&scheds)
            .flat_map(|(port, qs)| {
                qs.iter().enumerate().filter_map(move |(q, s)| {
                    let name = s.as_ref()?.ecn.clone()?;
                    Some((port.name.clone(), q as u8, name))
                })
            })
            .collect(),
    })
}

/// Whether the importer reads `field` of `table`: a value it does not read is ignored whatever
/// it is (a `null` region in DEVICE_METADATA), as SONiC ignores it.
fn reads_field(table: &str, field: &str) -> bool {
    match table {
        "DEVICE_METADATA" => field == "platform",
        "PORT" => ["speed", "mtu", "index", "lanes", "admin_status"].contains(&field),
        "PORT_QOS_MAP" => !["pfcwd_sw_enable", "tc_to_dscp_map", "scheduler"].contains(&field),
        _ => true,
    }
}

/// Values that are not strings: an error where the importer reads them, else nothing.
fn non_strings(db: &ConfigDb, p: &mut Problems) {
    for (at, kind) in &db.non_strings {
        if reads_field(&at.table, &at.field) {
            p.error(
                at,
                format!(
                    "{kind}: a string is expected (config_db.json stores every value as a string, e.g. \"100000\")"
                ),
            );
        }
    }
}

fn choose_platform(db: &ConfigDb, opts: &ImportOptions, p: &mut Problems) -> Option<&'static Platform> {
    if let Some(name) = &opts.platform {
        return platform::by_name(name).or_else(|| {
            p.error("--platform", format!("{name:?} is not one of {}", platform::names()));
            None
        });
    }
    let meta = db.entry("DEVICE_METADATA", "localhost");
    let Some(sonic) = meta.and_then(|m| m.get("platform")) else {
        p.error(
            "DEVICE_METADATA|localhost|platform",
            format!(
                "missing: the platform decides the buffer rules; give --platform ({})",
                platform::names()
            ),
        );
        return None;
    };
    platform::by_sonic_platform(sonic).or_else(|| {
        p.error(
            "DEVICE_METADATA|localhost|platform",
            format!(
                "{sonic:?} is a platform rocesw has no buffer rules for; give --platform ({}) \
                 with `rocectl sonic import` if its ASIC is one of those",
                platform::names()
            ),
        );
        None
    })
}

/// The switch's maps (`[classify]`), the map sets of the ports that bind other ingress maps,
/// and each port's PFC priorities.
#[derive(Debug, Default)]
struct Maps {
    dscp_to_tc: Option<(String, [u8; 64])>,
    dot1p_to_tc: Option<(String, [u8; 8])>,
    tc_to_queue: [u8; 8],
    tc_to_queue_from: Option<String>,
    tc_to_pg: [u8; 8],
    tc_to_pg_from: Option<String>,
    pfc_priorities: Vec<u8>,
    pfc_from: Option<String>,
    /// Each port's own `pfc_enable` (by name) with its origin; a port not here has none.
    port_pfc: BTreeMap<String, (Vec<u8>, String)>,
    /// The map sets (`[classify.map.NAME]`), in the order first bound.
    sets: Vec<MapSetIn>,
    /// Each port that classifies with a set (by name): the set's index and the origins of its
    /// bindings.
    port_set: BTreeMap<String, (usize, String)>,
    /// The PORT_QOS_MAP fields the switch's maps stand for and the map each names.
    default_sonic: Vec<(&'static str, String)>,
}

/// A `[classify.map.NAME]`: the ingress maps a port binds that the switch's do not hold, each
/// with its origin.
#[derive(Debug, Clone)]
struct MapSetIn {
    name: String,
    dscp_to_tc: Option<(String, [u8; 64])>,
    dot1p_to_tc: Option<(String, [u8; 8])>,
    tc_to_pg: Option<(String, [u8; 8])>,
    /// The PORT_QOS_MAP fields it stands for and the map each names (export writes them).
    sonic: Vec<(&'static str, String)>,
}

impl Maps {
    /// The TC → PG map port `name` classifies with.
    fn tc_to_pg_of(&self, name: &str) -> [u8; 8] {
        self.port_set
            .get(name)
            .and_then(|(k, _)| self.sets[*k].tc_to_pg.as_ref())
            .map_or(self.tc_to_pg, |(_, v)| *v)
    }
}

/// A BUFFER_POOL as a `[buffer.pool.NAME]`.
#[derive(Debug, Clone)]
struct Pool {
    name: String,
    ingress: bool,
    size: u64,
    dynamic: bool,
    xoff: u64,
    /// How `size` follows from the file's where it is not the file's own (the platform's
    /// `PoolSize`), for its comment.
    size_from: Option<String>,
}

/// Per port (by position), per PG and per queue: the buffer it runs with.
type Bindings = Vec<[Option<Buf>; 8]>;

/// PFC_WD: one watchdog for the switch (rocesw's is global).
#[derive(Debug, Default, Clone)]
struct Watchdog {
    on: Option<(u64, u64, String, String)>,
    poll_ms: Option<u64>,
}

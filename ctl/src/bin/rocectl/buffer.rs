//! `rocectl show buffer`: what SONiC users get from `show buffer configuration` and `show
//! buffer_pool watermark`. Per pool its type, mode, size, shared headroom pool and use now; per
//! port and PG the values in force (pool, min, limit, headroom, XON) and where each came from.
//!
//! The values are the control plane's resolution of the running config (`controlplane::
//! load_str`, the code the switch itself runs), never re-derived here. Where each came from is
//! read from the running config's text with `toml_edit`: in an import (its header says its
//! comments are origins, `controlplane::sonic::ORIGINS_LINE`) the trailing comment of the key
//! that gave the value (`BUFFER_PROFILE|pg_lossless_100000_5m_profile|xoff`, a
//! `pg_profile_lookup.ini` row, a formula; for a key a port's own table leaves to the global
//! one, the port's own source as the import wrote it above that table,
//! `controlplane::sonic::INHERITED`), else that key's path by the port's name
//! (`Ethernet0.pg.3.headroom`; `port[0].pg.3.headroom` for a port without one: a hand-written
//! config's comments are notes, not origins); a key written in a port's own
//! `[port.pg.N]` wins over the global `[pg.N]`, as validation lays them; a value no key gives is
//! `default`, and a headroom the config computes (no `headroom`, or `"auto"`) is `computed:`
//! from its port's speed, cable and MTU, each with its own origin.

use controlplane::model::{Config, PoolDir, PoolMode, PortConfig, Threshold};
use controlplane::snapshot::{PoolBuffer, PortBuffer, Snapshot};
use controlplane::{units, NUM_TC};
use serde::Serialize;
use toml_edit::{DocumentMut, Item, TableLike};

/// A value in force and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from: the key's comment, else its path; `default`; `computed: …`.
    pub origin: String,
    /// The key of the running config that gives it (`port[0].pg.3.headroom`); absent for
    /// defaults and computed values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A PG's or queue's shared-pool limit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// alpha × the pool's free space; `dynamic_th` is log2(alpha) when alpha is a power of two.
    Dynamic {
        /// The multiplier.
        alpha: f64,
        /// SAI's and SONiC's exponent, when alpha is 2^dynamic_th.
        #[serde(skip_serializing_if = "Option::is_none")]
        dynamic_th: Option<i32>,
    },
    /// A fixed limit (SONiC's `static_th`).
    Static {
        /// In bytes.
        bytes: u64,
    },
    /// No limit.
    Unlimited,
}

impl From<Threshold> for Limit {
    fn from(t: Threshold) -> Limit {
        match t {
            Threshold::Dynamic { alpha } => {
                let th = alpha.log2();
                let exact = alpha > 0.0 && th.fract() == 0.0 && th.abs() < 64.0;
                Limit::Dynamic {
                    alpha,
                    dynamic_th: exact.then_some(th as i32),
                }
            }
            Threshold::Static { bytes } => Limit::Static { bytes },
            Threshold::Unlimited => Limit::Unlimited,
        }
    }
}

/// One pool: as configured (a configured pool's values with their origins) and its use now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolView {
    /// `[buffer.pool.NAME]`'s NAME; `shared` for the one pool a config without pools has (one
    /// row per direction: its ingress and its egress view).
    pub name: String,
    /// `ingress` or `egress`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `dynamic` or `static`; none for the one pool of a config without pools (each PG and
    /// queue chooses).
    pub mode: Sourced<Option<String>>,
    /// Its shared space in bytes.
    pub size_bytes: Sourced<u64>,
    /// An ingress pool's shared headroom pool, in bytes, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headroom_bytes: Option<Sourced<u64>>,
    /// Cells in use now and their peak (as the switch reports them; absent from a switch that
    /// does not).
    pub used_cells: Option<u32>,
    /// See `used_cells`.
    pub peak_used_cells: Option<u32>,
    /// The shared headroom pool's cells in use now and their peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headroom_used_cells: Option<u32>,
    /// See `headroom_used_cells`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_headroom_used_cells: Option<u32>,
}

/// A PG's values in force on one port.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PgView {
    /// PG number.
    pub pg: u8,
    /// Whether a PFC priority maps to it.
    pub lossless: bool,
    /// Its ingress pool.
    pub pool: Sourced<String>,
    /// Its reserved minimum (SONiC's profile `size`), bytes.
    pub min_bytes: Sourced<u64>,
    /// Its shared-pool limit (`dynamic_th`, `static_th`).
    pub limit: Sourced<Limit>,
    /// Lossless only: its headroom (SONiC's `xoff`), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headroom_bytes: Option<Sourced<u64>>,
    /// Lossless only: XON at or below this shared use (SONiC's `xon`), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xon_bytes: Option<Sourced<u64>>,
    /// Lossless only: XON this far below the XOFF point (`xon_offset`), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xon_offset_bytes: Option<Sourced<u64>>,
    /// Whether the config says anything of it beyond a pool: lossless, or a key of its own. The
    /// table leaves the others out (lossy, no reserve, no limit of their own); `--json` has
    /// them all.
    #[serde(skip)]
    pub configured: bool,
}

/// A port: its buffer use now and its PGs' values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortView {
    /// The port id.
    pub id: u16,
    /// Its name, where the config gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its buffer use now, as the switch reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer: Option<PortBuffer>,
    /// PG 0 first.
    pub pgs: Vec<PgView>,
}

/// What `show buffer` shows (and `--json` prints).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BufferView {
    /// Bytes per cell: levels are cells × this.
    pub cell_bytes: u32,
    /// The whole buffer's figures, in cells.
    pub buffer: PoolBuffer,
    /// The pools: ingress ones first, each direction in name order.
    pub pools: Vec<PoolView>,
    /// The ports in config order.
    pub ports: Vec<PortView>,
}

impl BufferView {
    /// The view of a switch that answered `snapshot`, running the config whose text is `text`
    /// (already loaded as `config`).
    pub fn new(snapshot: &Snapshot, config: &Config, text: &str) -> BufferView {
        let mut origins = Origins::parse(text);
        origins.names = config.ports.iter().map(|p| p.name.clone()).collect();
        BufferView {
            cell_bytes: config.buffer.cell_bytes,
            buffer: snapshot.buffer,
            pools: pools(snapshot, config, &origins),
            ports: config
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| PortView {
                    id: p.id,
                    name: p.name.clone(),
                    buffer: snapshot.ports.iter().find(|r| r.id == p.id).map(|r| r.buffer),
                    pgs: (0..NUM_TC).map(|g| pg_view(config, i, p, g, &origins)).collect(),
                })
                .collect(),
        }
    }

    /// Only the ports with these ids (the pools and the whole buffer stay).
    pub fn keep_ports(&mut self, ids: &[u16]) {
        self.ports.retain(|p| ids.contains(&p.id));
    }
}

fn pools(snapshot: &Snapshot, config: &Config, o: &Origins) -> Vec<PoolView> {
    let cell = u64::from(config.buffer.cell_bytes);
    if config.buffer.pools.is_empty() {
        // One pool, two views: what the reserves leave of the buffer.
        let b = &snapshot.buffer;
        let size = |what: &str| Sourced {
            value: u64::from(b.shared_cells) * cell,
            origin: format!("computed: buffer.size less every min and headroom (no [buffer.pool.NAME]; {what} view)"),
            key: None,
        };
        return [
            ("ingress", b.ingress_shared_cells, b.peak_ingress_shared_cells),
            ("egress", b.egress_shared_cells, b.peak_egress_shared_cells),
        ]
        .into_iter()
        .map(|(kind, used, peak)| PoolView {
            name: "shared".into(),
            kind: kind.into(),
            mode: Sourced {
                value: None,
                origin: "each PG and queue chooses (alpha, dynamic_th or static)".into(),
                key: None,
            },
            size_bytes: size(kind),
            headroom_bytes: None,
            used_cells: Some(used),
            peak_used_cells: Some(peak),
            headroom_used_cells: None,
            peak_headroom_used_cells: None,
        })
        .collect();
    }
    config
        .buffer
        .pools
        .iter()
        .map(|p| {
            let kind = match p.dir {
                PoolDir::Ingress => "ingress",
                PoolDir::Egress => "egress",
            };
            let live = snapshot.pools.iter().find(|r| r.name == p.name && r.kind == kind);
            let path = |k: &'static str| vec![Step::Key("buffer"), Step::Key("pool"), Step::Key(&p.name), Step::Key(k)];
            let mode = match p.mode {
                PoolMode::Dynamic => "dynamic",
                PoolMode::Static => "static",
            };
            PoolView {
                name: p.name.clone(),
                kind: kind.into(),
                mode: o.sourced(Some(mode.to_string()), &[path("mode")]),
                size_bytes: o.sourced(p.size_bytes, &[path("size")]),
                headroom_bytes: (p.headroom_bytes > 0).then(|| o.sourced(p.headroom_bytes, &[path("headroom")])),
                used_cells: live.map(|r| r.used_cells),
                peak_used_cells: live.map(|r| r.peak_used_cells),
                headroom_used_cells: live.and_then(|r| r.headroom).map(|h| h.used_cells),
                peak_headroom_used_cells: live.and_then(|r| r.headroom).map(|h| h.peak_used_cells),
            }
        })
        .collect()
}

/// The keys that give a PG's shared-pool limit: one choice, so a port's own replaces the global.
const LIMIT_KEYS: [&str; 4] = ["alpha", "static", "dynamic_th", "unlimited"];

fn pg_view(config: &Config, index: usize, port: &PortConfig, g: usize, o: &Origins) -> PgView {
    let prof = &port.pgs[g];
    let gs = g.to_string();
    // Each key where validation looks for it: the port's own `pg.N` first, then `[pg.N]`.
    let paths = |keys: &[&'static str]| -> Vec<Vec<Step>> {
        let port_paths = keys.iter().map(|k| {
            vec![
                Step::Key("port"),
                Step::Index(index),
                Step::Key("pg"),
                Step::Key(&gs),
                Step::Key(k),
            ]
        });
        let global = keys.iter().map(|k| vec![Step::Key("pg"), Step::Key(&gs), Step::Key(k)]);
        port_paths.chain(global).collect()
    };
    let pool_name = config
        .buffer
        .pools_of(PoolDir::Ingress)
        .nth(usize::from(prof.pool))
        .map_or_else(|| "shared".to_string(), |p| p.name.clone());
    let configured = prof.lossless
        || ["min", "headroom", "xon", "xon_offset"]
            .iter()
            .chain(&LIMIT_KEYS)
            .any(|k| paths(&[k]).iter().any(|p| o.written(p).is_some()));
    // A key the port's own `[port.pg.N]` leaves to `[pg.N]` may come, for this port, from its
    // own source (an import's 5 m profile, where `[pg.N]` is the 40 m one's): its header says.
    let header = o.header(&[Step::Key("port"), Step::Index(index), Step::Key("pg"), Step::Key(&gs)]);
    let table = format!("pg.{g}");
    let inherit = |mut s: Sourced<()>| {
        let global = s.key.as_deref().and_then(|k| k.strip_prefix(&format!("{table}.")));
        if let (Some(h), Some(key)) = (header, global) {
            if let Some(origin) = controlplane::sonic::inherited_origin(h, key, &table) {
                s.origin = origin.to_string();
            }
        }
        s
    };
    fn put<T>(value: T, s: Sourced<()>) -> Sourced<T> {
        Sourced {
            value,
            origin: s.origin,
            key: s.key,
        }
    }
    let sourced = |keys: &[&'static str]| inherit(o.sourced((), &paths(keys)));
    let lossless = |v: u64, keys: &[&'static str]| prof.lossless.then(|| put(v, sourced(keys)));
    let headroom = prof.lossless.then(|| {
        let written = paths(&["headroom"])
            .into_iter()
            .find_map(|p| o.written(&p).map(|w| (p, w)));
        match written {
            Some((path, item)) if !is_auto(item) => o.sourced(port.headroom_bytes[g], &[path]),
            _ => Sourced {
                value: port.headroom_bytes[g],
                origin: computed_headroom(index, port, o),
                key: None,
            },
        }
    });
    PgView {
        pg: g as u8,
        lossless: prof.lossless,
        pool: put(pool_name, sourced(&["pool"])),
        min_bytes: put(prof.min_bytes, sourced(&["min"])),
        limit: put(Limit::from(prof.shared), sourced(&LIMIT_KEYS)),
        headroom_bytes: headroom,
        xon_bytes: lossless(prof.xon_bytes, &["xon"]),
        xon_offset_bytes: lossless(prof.xon_offset_bytes, &["xon_offset"]),
        configured,
    }
}

fn is_auto(item: &Item) -> bool {
    item.as_str().is_some_and(|s| s.trim().eq_ignore_ascii_case("auto"))
}

/// `computed: 100G (PORT|Ethernet8|speed), 40m (CABLE_LENGTH|AZURE|Ethernet8), mtu 9100 (…)`:
/// the headroom formula's inputs, each with its origin.
fn computed_headroom(index: usize, port: &PortConfig, o: &Origins) -> String {
    let from = |key: &'static str| {
        let paths = [
            vec![Step::Key("port"), Step::Index(index), Step::Key(key)],
            vec![Step::Key("port_defaults"), Step::Key(key)],
        ];
        o.sourced((), &paths).origin
    };
    let mtu = port
        .max_frame_bytes
        .saturating_sub(controlplane::headroom::L2_OVERHEAD_BYTES);
    let mut s = format!(
        "computed: {} ({}), {} ({}), mtu {mtu} ({})",
        units::format_rate(port.speed_bps),
        from("speed"),
        units::format_length(port.cable_m),
        from("cable"),
        from("mtu"),
    );
    if port.peer == controlplane::model::PeerKind::Emulated {
        s.push_str(", + the emulated peer's catch-up step");
    }
    s
}

/// A validation warning about an import's value (`port[0].pg.3.headroom (47104B) is below …`)
/// with the origin of the key it names, as the import's comment gives it
/// (`port[0].pg.3.headroom (47104B, BUFFER_PROFILE|pg_lossless_100000_5m_profile|xoff × 2: …)`):
/// the SONiC user reads the table, key and field to change, not only the TOML key. A warning
/// about a hand-written config, or one that names no key the text writes, is left as it is.
pub fn with_origin(toml: &str, warning: &str) -> String {
    let origins = Origins::parse(toml);
    if !origins.comments {
        return warning.to_string();
    }
    let key = warning.split([' ', ':']).next().unwrap_or("");
    let Some(path) = parse_path(key) else {
        return warning.to_string();
    };
    let origin = origins.sourced((), &[path]);
    if origin.key.is_none() || origin.origin == key {
        return warning.to_string();
    }
    let rest = &warning[key.len()..];
    match rest.strip_prefix(" (").and_then(|r| r.split_once(')')) {
        Some((value, after)) => format!("{key} ({value}, {}){after}", origin.origin),
        None => format!("{key} ({}){rest}", origin.origin),
    }
}

/// `port[0].pg.3.headroom` as steps; None for what is not a plain key path.
fn parse_path(key: &str) -> Option<Vec<Step<'_>>> {
    let mut steps = Vec::new();
    for part in key.split('.') {
        match part.split_once('[') {
            Some((k, i)) => {
                steps.push(Step::Key(k));
                steps.push(Step::Index(i.strip_suffix(']')?.parse().ok()?));
            }
            None if !part.is_empty() => steps.push(Step::Key(part)),
            None => return None,
        }
    }
    (!steps.is_empty()).then_some(steps)
}

/// One step of a path into the config's text: a key, or an index into an array of tables.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// How a path reads in messages: `port[0].pg.3.headroom`, as validation names keys.
fn path_text(path: &[Step]) -> String {
    let mut s = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The running config's text, parsed keeping comments.
struct Origins {
    doc: Option<DocumentMut>,
    /// Whether its comments are origins (an import's) or notes.
    comments: bool,
    /// The ports' names, in the order of the text's `[[port]]`s: a key of a named port reads
    /// `Ethernet4.pg.3.alpha`, as the user names the port, not `port[1].pg.3.alpha`.
    names: Vec<Option<String>>,
}

impl Origins {
    fn parse(text: &str) -> Origins {
        Origins {
            doc: text.parse().ok(),
            comments: controlplane::sonic::comments_are_origins(text),
            names: Vec::new(),
        }
    }

    /// The comment lines above the header of the table at `path`, in an import (whose
    /// comments are origins).
    fn header(&self, path: &[Step]) -> Option<&str> {
        if !self.comments {
            return None;
        }
        self.written(path)?.as_table()?.decor().prefix()?.as_str()
    }

    /// `path` as the user reads it: a named port's key by the port's name.
    fn named(&self, path: &[Step]) -> String {
        match path {
            [Step::Key("port"), Step::Index(i), rest @ ..] if !rest.is_empty() => {
                match self.names.get(*i).cloned().flatten() {
                    Some(name) => format!("{name}.{}", path_text(rest)),
                    None => path_text(path),
                }
            }
            _ => path_text(path),
        }
    }

    /// The item at `path`, if the text writes it.
    fn written(&self, path: &[Step]) -> Option<&Item> {
        walk(self.doc.as_ref()?.as_table(), path)
    }

    /// `value` with the origin of the first of `paths` the text writes, else `default`.
    fn sourced<T>(&self, value: T, paths: &[Vec<Step>]) -> Sourced<T> {
        for path in paths {
            if let Some(item) = self.written(path) {
                let key = path_text(path);
                let origin = self
                    .comments
                    .then(|| comment(item))
                    .flatten()
                    .unwrap_or_else(|| self.named(path));
                return Sourced {
                    value,
                    origin,
                    key: Some(key),
                };
            }
        }
        Sourced {
            value,
            origin: "default".into(),
            key: None,
        }
    }
}

/// The item `path` leads to from `table`: a key, then either more keys into its table or an
/// index into its array of tables.
fn walk<'a>(table: &'a dyn TableLike, path: &[Step]) -> Option<&'a Item> {
    let (Step::Key(k), more) = path.split_first()? else {
        return None;
    };
    let item = table.get(k)?;
    match more.first() {
        None => Some(item),
        Some(Step::Index(i)) => walk(nth_table(item, *i)?, &more[1..]),
        Some(Step::Key(_)) => walk(item.as_table_like()?, more),
    }
}

/// The `i`-th table of an array of tables, written `[[port]]` or inline.
fn nth_table(item: &Item, i: usize) -> Option<&dyn TableLike> {
    if let Some(aot) = item.as_array_of_tables() {
        return aot.get(i).map(|t| t as &dyn TableLike);
    }
    item.as_array()?.get(i)?.as_inline_table().map(|t| t as &dyn TableLike)
}

/// The trailing comment of a value (`size = "23552B"   # BUFFER_PROFILE|…|xoff`), without `#`.
fn comment(item: &Item) -> Option<String> {
    let suffix = item.as_value()?.decor().suffix()?.as_str()?;
    let c = suffix.trim_start().strip_prefix('#')?.trim();
    (!c.is_empty()).then(|| c.to_string())
}

//! rocesw's configuration: the TOML schema people write, its validation, and the resolved model
//! the dataplane runs on, and what the switch and its tools share: the protocol and its client,
//! the counters snapshot, the preparation of a config change. The tools themselves (`rocectl`,
//! its `set` edits, the daemon and its metrics) are the `ctl` crate (`ctl/`), above this one:
//! this crate carries no async runtime, HTTP, Prometheus or command-line parser.
//!
//! Flow: text → [`schema::ConfigFile`] (serde, unknown keys rejected) → [`validate::resolve`]
//! (units converted, defaults filled, every cross-field rule checked, *all* problems collected)
//! → [`model::Config`] plus warnings. `configs/README.md` documents the schema.

pub mod change;
pub mod files;
pub mod headroom;
pub mod live;
pub mod loopback;
pub mod memory;
pub mod model;
pub mod patch;
pub mod protocol;
pub mod retext;
pub mod schema;
pub mod snapshot;
pub mod sonic;
pub mod units;
pub mod validate;
pub mod vlarb_admit;
pub mod wire_timing;

pub use live::{frame_refusal, live_change_refusal};
pub use model::*;

use std::fmt;
use std::path::Path;

/// A validated configuration and the warnings it raised (valid, but probably not intended).
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The resolved configuration.
    pub config: Config,
    /// What validation warned about, one message per entry, each naming its key.
    pub warnings: Vec<String>,
}

impl Loaded {
    /// What a command that only uses the config (replay, gen, run, ...) says of its warnings:
    /// one line that counts them and names the command that lists them, so they are said in
    /// full once, by `rocectl check`, not again by every command that reads the same file.
    /// None when there are none.
    pub fn warnings_pointer(&self, file: &str) -> Option<String> {
        let n = self.warnings.len();
        (n > 0).then(|| {
            format!(
                "{file}: {n} warning{} (valid, but probably not intended): `rocectl check {file}` lists {}",
                if n == 1 { "" } else { "s" },
                if n == 1 { "it" } else { "them" }
            )
        })
    }
}

/// What stopped a configuration from loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// The file could not be read.
    Io,
    /// Not TOML, or not the schema (wrong type, unknown key); the toml crate's message, with
    /// line and column.
    Syntax,
    /// Well-formed but invalid: every problem found, one per entry.
    Invalid,
}

/// Why a configuration was rejected. `Display` prints every problem, one per line, each
/// naming the field path and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    problems: Vec<String>,
}

impl ConfigError {
    /// An error of this kind with these problems (one message each).
    pub fn new(kind: ConfigErrorKind, problems: Vec<String>) -> Self {
        ConfigError { kind, problems }
    }

    /// What stopped the load: reading, syntax, or validation.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// Every problem, one per entry (a syntax error is one entry, possibly multi-line).
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problems.join("\n"))
    }
}

impl std::error::Error for ConfigError {}

/// The shipped default profile (`configs/default.toml`, the documented source), built into
/// every binary so that commands that start from a profile work from any directory.
pub const DEFAULT_PROFILE: &str = include_str!("../../configs/default.toml");
/// How a message names [`DEFAULT_PROFILE`].
pub const DEFAULT_PROFILE_NAME: &str = "the built-in default profile (configs/default.toml)";

/// Parses and validates a configuration file.
pub fn load_file(path: &Path) -> Result<Loaded, ConfigError> {
    let text = files::read_text(path).map_err(|e| ConfigError::new(ConfigErrorKind::Io, vec![e]))?;
    load_str(&text).map_err(|mut e| {
        if e.kind == ConfigErrorKind::Syntax {
            for p in &mut e.problems {
                *p = format!("{}: {p}", path.display());
            }
        }
        e
    })
}

/// Parses and validates a configuration held in memory: rocesw's TOML, or a SONiC
/// config_db.json (told by its content, imported with the platform DEVICE_METADATA names).
pub fn load_str(text: &str) -> Result<Loaded, ConfigError> {
    let text = config_toml(text)?;
    let file: schema::ConfigFile =
        toml::from_str(&text).map_err(|e| ConfigError::new(ConfigErrorKind::Syntax, vec![syntax_message(&e)]))?;
    validate::resolve(&file)
}

/// A switch config's text as rocesw's TOML: a SONiC config_db.json (told by its content) is
/// imported first ([`sonic::import_text`]), so the running config, its edits and `rocectl show
/// config` are TOML whichever format was given. Problems of the import are `Invalid`, each
/// naming its `TABLE|key|field`.
pub fn config_toml(text: &str) -> Result<std::borrow::Cow<'_, str>, ConfigError> {
    if !sonic::looks_like_config_db(text) {
        return Ok(std::borrow::Cow::Borrowed(text));
    }
    sonic::import_text(text, &sonic::ImportOptions::default())
        .map(|i| std::borrow::Cow::Owned(i.toml))
        .map_err(|problems| {
            let mut problems = problems;
            problems.insert(0, "a SONiC config_db.json that cannot be imported:".to_string());
            ConfigError::new(ConfigErrorKind::Invalid, problems)
        })
}

/// The toml crate's message (line, column, the line itself), with a hint when the unknown key
/// is a SONiC name ([`sonic_hint`]).
pub fn syntax_message(e: &toml::de::Error) -> String {
    let mut msg = e.to_string().trim_end().to_string();
    if let Some(hint) = unknown_key(&msg).and_then(sonic_hint) {
        msg.push_str(&format!("\nhint: {hint}"));
    }
    msg
}

/// The key of the toml crate's "unknown field `KEY`, expected ..." message.
fn unknown_key(msg: &str) -> Option<&str> {
    let rest = &msg[msg.find("unknown field `")? + "unknown field `".len()..];
    Some(&rest[..rest.find('`')?])
}

/// Where a SONiC config's name (CONFIG_DB tables and buffer/WRED/PFC-watchdog fields) lives
/// in a rocesw config, for someone who writes the names they know.
pub fn sonic_hint(key: &str) -> Option<&'static str> {
    Some(match key.to_ascii_lowercase().as_str() {
        "wred_profile" => "SONiC's WRED_PROFILE is rocesw's [ecn.NAME] (kmin, kmax, pmax), named by a queue's `ecn`",
        "green_min_threshold" | "min_threshold" => "SONiC's green_min_threshold is rocesw's `kmin` in [ecn.NAME]",
        "green_max_threshold" | "max_threshold" => "SONiC's green_max_threshold is rocesw's `kmax` in [ecn.NAME]",
        "green_drop_probability" | "drop_probability" => {
            "SONiC's green_drop_probability is rocesw's `pmax` in [ecn.NAME], a fraction (0.1), not a percentage"
        }
        "buffer_pool" => {
            "SONiC's BUFFER_POOL is rocesw's [buffer.pool.NAME] (type, size, mode, and headroom for the pool's xoff); \
             a config_db.json itself is read as it is"
        }
        "buffer_profile" => {
            "SONiC's BUFFER_PROFILE is rocesw's [pg.N] and [queue.N] (min, alpha or static, headroom, xon_offset), \
             globally or in a [[port]]"
        }
        "buffer_pg" => "SONiC's BUFFER_PG is rocesw's [pg.N] (globally, or a [[port]]'s own pg.N)",
        "buffer_queue" => "SONiC's BUFFER_QUEUE is rocesw's [queue.N] (globally, or a [[port]]'s own queue.N)",
        "xoff" => "SONiC's `xoff` is rocesw's `headroom` in [pg.N] (\"auto\" or a size)",
        "xon" => "SONiC's `xon` is rocesw's `xon` in [pg.N] (XON at or below it), beside `xon_offset`",
        "size" => "SONiC's profile `size` is rocesw's `min` (the guaranteed reservation); a fixed limit is `static`",
        "static_th" => "SONiC's `static_th` is rocesw's `static` (a fixed shared limit)",
        "pool" => "`pool` names a [buffer.pool.NAME] in [pg.N] or [queue.N]",
        "pfc_wd" => "SONiC's PFC_WD is rocesw's [pfc.watchdog] (enabled, detection, restoration, action)",
        "detection_time" => "SONiC's detection_time is rocesw's `detection` in [pfc.watchdog], a duration (\"200ms\")",
        "restoration_time" => {
            "SONiC's restoration_time is rocesw's `restoration` in [pfc.watchdog], a duration (\"200ms\")"
        }
        "pfc_enable" => {
            "SONiC's pfc_enable is rocesw's [pfc] priorities = [3, 4] (a port's own: `pfc = [3]` under its [[port]])"
        }
        "port_qos_map" => "SONiC's PORT_QOS_MAP is rocesw's [pfc] priorities and the [classify] maps (a port's own: `pfc` and `classify = \"NAME\"` under its [[port]])",
        "dscp_to_tc_map" => "SONiC's DSCP_TO_TC_MAP is rocesw's [classify.dscp_to_tc] (a port's own: [classify.map.NAME] dscp_to_tc)",
        "dot1p_to_tc_map" => "SONiC's DOT1P_TO_TC_MAP is rocesw's [classify.pcp_to_tc]",
        "tc_to_queue_map" => "SONiC's TC_TO_QUEUE_MAP is rocesw's [classify.tc_to_queue]",
        "tc_to_priority_group_map" => "SONiC's TC_TO_PRIORITY_GROUP_MAP is rocesw's [classify.tc_to_pg] (a port's own: [classify.map.NAME] tc_to_pg)",
        "scheduler" => "SONiC's SCHEDULER is rocesw's `sched` and `weight` in [queue.N]",
        "cable_length" => "SONiC's CABLE_LENGTH is rocesw's `cable` in a [[port]] or [port_defaults] (\"15m\")",
        _ => return None,
    })
}

//! rocesw's configuration: the TOML schema people write, its validation, and the resolved model
//! the dataplane runs on, and the control plane around it: the protocol and its client, the
//! counters snapshot both sides share, `rocectl set` edits, the daemon and its metrics (the
//! `rocectl` binary is `src/bin/rocectl`).
//!
//! Flow: text → [`schema::ConfigFile`] (serde, unknown keys rejected) → [`validate::resolve`]
//! (units converted, defaults filled, every cross-field rule checked, *all* problems collected)
//! → [`model::Config`] plus warnings. `configs/README.md` documents the schema.

pub mod daemon;
pub mod files;
pub mod headroom;
pub mod help;
pub mod live;
pub mod memory;
pub mod metrics;
pub mod model;
pub mod patch;
pub mod protocol;
pub mod retext;
pub mod schema;
pub mod set;
pub mod snapshot;
pub mod units;
pub mod validate;
pub mod vlarb_admit;

pub use live::live_change_refusal;
pub use model::*;

use std::fmt;
use std::path::Path;

/// A validated configuration and the warnings it raised (valid, but probably not intended).
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<String>,
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
    pub fn new(kind: ConfigErrorKind, problems: Vec<String>) -> Self {
        ConfigError { kind, problems }
    }

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

/// Parses and validates a configuration file.
/// The shipped default profile (`configs/default.toml`, the documented source), built into
/// every binary so that commands that start from a profile work from any directory.
pub const DEFAULT_PROFILE: &str = include_str!("../../configs/default.toml");
/// How a message names [`DEFAULT_PROFILE`].
pub const DEFAULT_PROFILE_NAME: &str = "the built-in default profile (configs/default.toml)";

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

/// Parses and validates a configuration held in memory.
pub fn load_str(text: &str) -> Result<Loaded, ConfigError> {
    let file: schema::ConfigFile = toml::from_str(text)
        .map_err(|e| ConfigError::new(ConfigErrorKind::Syntax, vec![e.to_string().trim_end().to_string()]))?;
    validate::resolve(&file)
}

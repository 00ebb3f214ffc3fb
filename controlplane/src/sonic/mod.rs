//! SONiC's `config_db.json` as a front end to the same model as rocesw's TOML (DESIGN.md,
//! "SONiC configs: the importer's shape"): [`db`] reads the file in either of its shapes with
//! every value's origin, [`platform`] holds where ASICs read the buffer tables differently,
//! [`headroom`] computes lossless headroom as SONiC does, and [`import`] maps the tables onto a
//! TOML config with each value's `TABLE|key|field` in a comment. A config_db.json is told by
//! its content wherever a switch config is read ([`crate::config_toml`]).

pub mod db;
pub mod export;
pub mod headroom;
pub mod import;
pub mod platform;

pub use db::{looks_like_config_db, ConfigDb, DbError, Origin};

/// The line of an imported config's header that says its comments are origins: each value's
/// trailing comment is where it came from (`BUFFER_PROFILE|pg_lossless_100000_5m_profile|xoff`).
/// A hand-written config's comments are notes, so readers of origins (`rocectl show buffer`)
/// take comments as origins only in a text that carries this line.
pub const ORIGINS_LINE: &str = "# Each value's comment names where it came from (TABLE|key|field).";

/// In an import, a line above a port's own `[port.pg.N]` (or `queue.N`) table that says where
/// the port's value of a key it leaves to the global table comes from, when that is not the
/// global key's own origin: `# KEY as [pg.N]: ORIGIN` (a 5 m port's `min`, the same value as
/// the 40 m profile's, from its own 5 m profile). [`inherited_origin`] reads it.
pub const INHERITED: &str = " as ";

/// The origin a port's table's header lines ([`INHERITED`]) give for `key` of the global
/// table `table` (`pg.3`), if they give one.
pub fn inherited_origin<'a>(header: &'a str, key: &str, table: &str) -> Option<&'a str> {
    let lead = format!("# {key}{INHERITED}[{table}]: ");
    header.lines().find_map(|l| l.trim().strip_prefix(lead.as_str()))
}

/// Whether a rocesw TOML is an import whose comments are origins ([`ORIGINS_LINE`]).
pub fn comments_are_origins(toml: &str) -> bool {
    toml.lines().any(|l| l.trim_end() == ORIGINS_LINE)
}
pub use import::{ImportOptions, Imported};

/// Reads and imports a config_db.json's text: every problem, each naming its origin.
pub fn import_text(text: &str, opts: &ImportOptions) -> Result<Imported, Vec<String>> {
    let db = ConfigDb::parse(text, |t| import::READ_TABLES.contains(&t)).map_err(|e| vec![e.to_string()])?;
    import::import(&db, opts)
}

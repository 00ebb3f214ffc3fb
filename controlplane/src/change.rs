//! One way to prepare a change of a running switch's config, shared by every path that makes
//! one: the control socket (`apply`, `patch`, so `rocectl apply|patch|set` and the daemon),
//! `rocesw replay --schedule` and `rocesw tune`'s candidates. So each path refuses the same
//! change with the same words, and none has rules of its own.
//!
//! A change is prepared against the [`Running`] config in five steps: merged (a fragment into
//! the running table), written as text (over the running text, so its comments and layout stay,
//! `retext`), validated whole, checked to be one a running switch can take
//! ([`live_change_refusal`](crate::live::live_change_refusal) and
//! [`frame_refusal`](crate::live::frame_refusal)), and diffed (the dotted keys that changed).
//! What comes out is a [`Prepared`] change, ready to hand to the switch and then to
//! [`Running::commit`], or a [`ChangeError`] saying which step refused it.

use crate::{live, patch, retext, Config, ConfigError};
use std::fmt;
use toml::Table;

/// What a change is made of.
#[derive(Debug, Clone)]
pub enum Edit<'a> {
    /// A whole config's text (`apply`): it replaces the running one as written.
    Whole(&'a str),
    /// A TOML fragment merged into the running config (`patch`, a tuner setting). Its keys are
    /// checked against the schema first, so a typo is reported at the fragment's own line.
    Fragment(&'a str),
    /// A fragment already read from a file whose keys were checked there (a `--schedule`
    /// step's `[change.patch]`).
    Table(Table),
}

/// The config a switch runs: its text, the config that text resolves to, and its version (1 at
/// start, one more per change that took effect), with the one thing no change can move, the
/// size of the packet slots the switch allocated when it started.
#[derive(Debug, Clone)]
pub struct Running {
    /// The running config's TOML text: what `get_config` answers and a change is written over.
    pub text: String,
    /// The same config, parsed and validated.
    pub config: Config,
    /// 1 at start, one more for every change that took effect.
    pub version: u64,
    /// `text` as a table (what a fragment merges into and a change is diffed against).
    table: Table,
    /// The largest frame the switch's packet slots hold (`memory::footprint(..).slot_bytes`
    /// of the config it started with).
    slot_bytes: u64,
    /// The running config's validation warnings: said once, so a change reports only the
    /// warnings it brings (empty for a switch [`Running::started`] with a loaded config).
    warnings: Vec<String>,
}

/// A change that passed every step, not yet applied.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The whole new config's text.
    pub text: String,
    /// The validated config the change leads to.
    pub config: Config,
    /// Its validation warnings that the running config did not have (valid, but probably not
    /// intended): the ones this change brings. A change that keeps a warning does not say it
    /// again; `rocectl check` on the running config lists them all.
    pub warnings: Vec<String>,
    /// Every validation warning of the new config (what the running config has once it is
    /// committed).
    all_warnings: Vec<String>,
    /// Dotted paths of every value that differs from the running config, sorted
    /// (`patch::changed_keys`); empty when the change sets what is already set.
    pub changed: Vec<String>,
    table: Table,
}

/// Which step refused a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeError {
    /// The fragment is not TOML, or names a key the schema does not have.
    Fragment(String),
    /// The config the change would leave does not validate (every problem, as `load_str`
    /// reports them).
    Invalid(ConfigError),
    /// Valid, but a running switch cannot take it: the field and why.
    Refused(String),
    /// The new config cannot be written as text.
    Write(String),
}

impl fmt::Display for ChangeError {
    /// The words the control socket answers with (PROTOCOL.md); other paths put their own
    /// context before the reason ([`ChangeError::reason`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChangeError::Fragment(e) => write!(f, "invalid patch: {e}"),
            ChangeError::Invalid(e) => write!(f, "invalid config: {e}"),
            ChangeError::Refused(why) => write!(f, "the switch refused the change: {why}"),
            ChangeError::Write(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for ChangeError {}

impl ChangeError {
    /// The reason alone, without the words that say which step refused it.
    pub fn reason(&self) -> String {
        match self {
            ChangeError::Invalid(e) => e.to_string(),
            ChangeError::Fragment(e) | ChangeError::Refused(e) | ChangeError::Write(e) => e.clone(),
        }
    }
}

impl Running {
    /// The config a switch starts with, from its text (version 1).
    pub fn load(text: String) -> Result<Running, ConfigError> {
        // A config_db.json runs as the TOML it imports to: that is the text edits apply to.
        let text = crate::config_toml(&text)?.into_owned();
        let loaded = crate::load_str(&text)?;
        let mut running = Running::started(text, loaded.config);
        running.warnings = loaded.warnings;
        Ok(running)
    }

    /// As [`Running::load`], for a caller that has loaded `text` already (`config` must be what
    /// it resolves to).
    pub fn started(text: String, config: Config) -> Running {
        let text = match crate::config_toml(&text) {
            Ok(t) => t.into_owned(),
            Err(_) => text,
        };
        let table = text.parse().unwrap_or_default();
        let slot_bytes = crate::memory::footprint(&config).slot_bytes;
        Running {
            text,
            config,
            version: 1,
            table,
            slot_bytes,
            warnings: Vec::new(),
        }
    }

    /// Prepares `edit` against this config: merge, text, validation, live refusal, diff.
    pub fn prepare(&self, edit: Edit<'_>) -> Result<Prepared, ChangeError> {
        let (text, table) = match edit {
            Edit::Whole(text) => {
                // A config_db.json is applied as the TOML it imports to.
                let text = &*crate::config_toml(text).map_err(ChangeError::Invalid)?;
                // Validated first, so a broken text gets validation's words (line and column).
                let loaded = crate::load_str(text).map_err(ChangeError::Invalid)?;
                let table: Table = text
                    .parse()
                    .map_err(|e| ChangeError::Write(format!("invalid config: {e}")))?;
                return self.finish(text.to_string(), table, loaded);
            }
            Edit::Fragment(fragment) => {
                patch::check_fragment(fragment).map_err(ChangeError::Fragment)?;
                let fragment: Table = fragment
                    .parse()
                    .map_err(|e: toml::de::Error| ChangeError::Fragment(e.to_string().trim_end().to_string()))?;
                self.merged(fragment)?
            }
            Edit::Table(fragment) => self.merged(fragment)?,
        };
        let loaded = crate::load_str(&text).map_err(ChangeError::Invalid)?;
        self.finish(text, table, loaded)
    }

    /// The running table with `fragment` merged in, and written over the running text.
    fn merged(&self, fragment: Table) -> Result<(String, Table), ChangeError> {
        let mut table = self.table.clone();
        patch::merge(&mut table, fragment);
        let text = retext::rewrite(&self.text, &table).map_err(ChangeError::Write)?;
        Ok((text, table))
    }

    fn finish(&self, text: String, table: Table, loaded: crate::Loaded) -> Result<Prepared, ChangeError> {
        let refusal = live::live_change_refusal(&self.config, &loaded.config)
            .or_else(|| live::frame_refusal(self.slot_bytes, &loaded.config));
        if let Some(why) = refusal {
            return Err(ChangeError::Refused(why));
        }
        let new: Vec<String> = (loaded.warnings.iter())
            .filter(|w| !self.warnings.contains(w))
            .cloned()
            .collect();
        Ok(Prepared {
            changed: patch::changed_keys(&self.table, &table),
            text,
            config: loaded.config,
            warnings: new,
            all_warnings: loaded.warnings,
            table,
        })
    }

    /// The running config as a table (what a fragment merges into).
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Makes a change that took effect the running config (one version more).
    pub fn commit(&mut self, change: Prepared) {
        self.text = change.text;
        self.config = change.config;
        self.table = change.table;
        self.warnings = change.all_warnings;
        self.version += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Running {
        Running::load(crate::DEFAULT_PROFILE.to_string()).unwrap()
    }

    #[test]
    fn a_fragment_is_merged_over_the_running_text_and_diffed() {
        let r = base();
        let p = r.prepare(Edit::Fragment("[ecn.roce]\nkmax = \"300KB\"\n")).unwrap();
        assert_eq!(p.changed, ["ecn.roce.kmax"]);
        // Written over the running text: everything else, comments included, as it was.
        assert_eq!(p.text, r.text.replacen("kmax = \"400KB\"", "kmax = \"300KB\"", 1));
        assert_eq!(p.config.queues[3].ecn.as_ref().unwrap().kmax_bytes, 300_000);
        // The same change as a whole text, and as a table, is the same change.
        let whole = r.prepare(Edit::Whole(&p.text)).unwrap();
        let table = r.prepare(Edit::Table(p.table.clone())).unwrap();
        for q in [&whole, &table] {
            assert_eq!((&q.text, &q.config, &q.changed), (&p.text, &p.config, &p.changed));
        }
        let mut r2 = r.clone();
        r2.commit(p);
        assert_eq!(r2.version, 2);
        assert!(r2
            .prepare(Edit::Fragment("[ecn.roce]\nkmax = \"300KB\"\n"))
            .unwrap()
            .changed
            .is_empty());
    }

    /// Issue 49 item 4: a warning is said by the change that brings it, not again by every
    /// later change of a config that still has it.
    #[test]
    fn a_warning_is_said_once_by_the_change_that_brings_it() {
        let mut r = base();
        let small = r.prepare(Edit::Fragment("[pg.3]\nheadroom = \"1KiB\"\n")).unwrap();
        assert_eq!(small.warnings.len(), 1, "{:?}", small.warnings);
        assert!(
            small.warnings[0].starts_with("pg.3.headroom (1KiB) is below"),
            "{:?}",
            small.warnings
        );
        r.commit(small);
        let later = r.prepare(Edit::Fragment("[ecn.roce]\nkmax = \"300KB\"\n")).unwrap();
        assert_eq!(later.warnings, Vec::<String>::new(), "the headroom warning was said");
        assert_eq!(later.all_warnings.len(), 1, "the config still has it");
        // A config that warned at start says it at start (rocectl check, rocesw run's line),
        // not in its first change.
        let started = Running::load(r.text.clone()).unwrap();
        let p = started
            .prepare(Edit::Fragment("[ecn.roce]\nkmax = \"300KB\"\n"))
            .unwrap();
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    }

    #[test]
    fn each_step_refuses_in_its_own_words() {
        let r = base();
        let e = r.prepare(Edit::Fragment("[ecn.roce\n")).unwrap_err();
        assert!(
            matches!(e, ChangeError::Fragment(_)) && e.to_string().starts_with("invalid patch: "),
            "{e}"
        );
        let e = r.prepare(Edit::Fragment("[ecn.roce]\nkmni = \"1KB\"\n")).unwrap_err();
        assert!(
            matches!(e, ChangeError::Fragment(_)) && e.to_string().contains("kmni"),
            "{e}"
        );
        let e = r.prepare(Edit::Fragment("[ecn.roce]\nkmin = \"900KB\"\n")).unwrap_err();
        assert!(
            matches!(e, ChangeError::Invalid(_)) && e.to_string().contains("ecn.roce.kmin"),
            "{e}"
        );
        let e = r.prepare(Edit::Whole("[ecn.roce\n")).unwrap_err();
        assert!(e.to_string().starts_with("invalid config: "), "{e}");
        let e = r.prepare(Edit::Fragment("[buffer]\nsize = \"8MiB\"\n")).unwrap_err();
        assert_eq!(
            e,
            ChangeError::Refused("buffer.size cannot change while the switch runs (restart it)".into())
        );
        assert_eq!(
            e.to_string(),
            "the switch refused the change: buffer.size cannot change while the switch runs (restart it)"
        );
    }

    /// The largest frame may move below the packet slot the switch started with (its size
    /// rounded up to a cache line), never above it.
    /// A map set and a port's choice of it are live changes: a fragment adds the set, the
    /// port's own table names it (as `[change.port.NAME]` and `rocectl set port` edit one
    /// port), and the switch takes it without a restart.
    #[test]
    fn a_ports_map_set_changes_live() {
        let r = base();
        let mut t = r.table().clone();
        patch::merge(
            &mut t,
            "[classify.map.\"up link\"]\ndscp_to_tc = { 26 = 1 }\n".parse().unwrap(),
        );
        let id = r.config.ports[1].id.to_string();
        patch::merge_port(&mut t, &id, "classify = \"up link\"\n".parse().unwrap()).unwrap();
        let p = r.prepare(Edit::Table(t)).unwrap();
        assert_eq!(p.config.ports[1].map_set, Some(0));
        assert_eq!(p.config.port_maps(1).dscp_to_tc[26], 1);
        assert!(p.changed.iter().any(|k| k.contains("classify")), "{:?}", p.changed);
        // A name that is no set is refused by validation, naming the port.
        let mut t = r.table().clone();
        patch::merge_port(&mut t, &id, "classify = \"nope\"\n".parse().unwrap()).unwrap();
        let e = r.prepare(Edit::Table(t)).unwrap_err();
        assert!(e.to_string().contains("port[1].classify"), "{e}");
    }

    #[test]
    fn frames_may_grow_up_to_the_packet_slot_only() {
        let r = base();
        let mtu = r.config.ports[0].max_frame_bytes;
        assert_eq!(mtu, 1518);
        // 1518 B frames take 1536 B slots: an MTU 18 B larger still fits.
        let p = r.prepare(Edit::Fragment("[port_defaults]\nmtu = 1518\n")).unwrap();
        assert_eq!(p.config.ports[0].max_frame_bytes, 1536);
        let e = r.prepare(Edit::Fragment("[port_defaults]\nmtu = 9000\n")).unwrap_err();
        assert_eq!(
            e,
            ChangeError::Refused(
                "port[0].mtu (port 0): frames up to 9018 B exceed the 1536 B packet slots the switch was started with \
                 (restart it)"
                    .into()
            )
        );
        // Smaller is always taken.
        assert!(r.prepare(Edit::Fragment("[port_defaults]\nmtu = 1000\n")).is_ok());
    }
}

//! `rocesw replay --schedule`: timed config patches, each prepared (cumulatively, in time
//! order) before the replay starts, so a bad step fails the run up front, before any output
//! is written: as a valid config, and as a change the switch can take live. Each step is
//! prepared as the control socket prepares a `patch` (`controlplane::change`: merged, written
//! over the config before it, validated, checked against what a running switch cannot change
//! and the packet slots it was started with), so both refuse the same change in the same
//! words.
//!
//! Only each step's fragment is kept, and its config is prepared again when its time comes
//! ([`Player`]): a whole config per step made memory grow with entries × config (20,000
//! entries took 1.78 GiB, 64,000 more than 13 GB), while a fragment is the size of its lines
//! in the file, which [`controlplane::files::MAX_TEXT_BYTES`] bounds.

use anyhow::{anyhow, bail, Context, Result};
use controlplane::change::{ChangeError, Edit, Running};
use controlplane::Config;
use std::path::Path;

/// A `--schedule` whose every step was prepared once and passed: the config it starts from
/// and each step's fragment, in time order. Empty (no steps) without `--schedule`.
#[derive(Debug, Clone, Default)]
pub struct Schedule {
    /// The config the replay starts with, as the steps were prepared over it (`None` when
    /// there are no steps).
    start: Option<Running>,
    steps: Vec<Step>,
}

/// One change of a schedule.
#[derive(Debug, Clone)]
pub struct Step {
    /// When the change takes effect, virtual ns from the replay's start.
    pub at_ns: u64,
    /// Dotted config paths the change set (`ecn.roce.kmin`), as `rocectl patch` reports them.
    pub keys: Vec<String>,
    /// The fragment as TOML text, read again and merged over the config before it when its
    /// time comes: as text it takes the bytes of its lines, where a parsed table takes
    /// kilobytes (a B-tree node per level).
    patch: String,
    /// `[change.port.NAME]` as TOML text: each port's keys, merged into that `[[port]]` entry of
    /// the config before the step (a `[[port]]` array in `patch` would replace every port).
    ports: String,
}

impl Schedule {
    /// Reads a `--schedule` file (`[[change]]` entries of `at` and `patch`) and prepares each
    /// change over `config` in time order; the first bad step is an error naming it, before
    /// anything runs.
    pub fn load(config: &Path, path: &Path) -> Result<Schedule> {
        let base_text = controlplane::files::read_text(config).map_err(anyhow::Error::msg)?;
        let text = controlplane::files::read_text(path).map_err(anyhow::Error::msg)?;
        Schedule::from_text(
            base_text,
            &config.display().to_string(),
            &text,
            &path.display().to_string(),
        )
    }

    /// As [`Schedule::load`], from the texts: `base_text` the config (called `config_name` in
    /// messages), `text` the schedule (called `name`).
    pub fn from_text(base_text: String, config_name: &str, text: &str, name: &str) -> Result<Schedule> {
        let start = Running::load(base_text).map_err(|e| anyhow!("{config_name}: invalid config:\n{e}"))?;
        // A patch's unknown key, at its line of this file (merged into the config below, it
        // would be reported at a line of the merged text).
        controlplane::patch::check_schedule(text).map_err(|e| anyhow!("{name}: {e}"))?;
        let mut steps: Vec<Step> = Vec::new();
        for_each_change(text, name, |i, c| {
            let c = c
                .as_table()
                .ok_or_else(|| anyhow!("{name}: change[{i}] is not a table"))?;
            if let Some(k) = c.keys().find(|k| !["at", "patch", "port"].contains(&k.as_str())) {
                bail!("{name}: change[{i}].{k}: unknown key (expected `at`, `patch` and `port`)");
            }
            let at = c
                .get("at")
                .and_then(toml::Value::as_str)
                .ok_or_else(|| anyhow!("{name}: change[{i}].at: missing (a time such as \"500us\")"))?;
            let at = controlplane::units::parse_duration(at).map_err(|e| anyhow!("{name}: change[{i}].at: {e}"))?;
            let patch = match c.get("patch") {
                None => None,
                Some(p) => Some(
                    p.as_table()
                        .ok_or_else(|| anyhow!("{name}: change[{i}].patch: not a table"))?,
                ),
            };
            let ports = match c.get("port") {
                None => None,
                Some(p) => Some(port_edits(p).map_err(|e| anyhow!("{name}: change[{i}].port{e}"))?),
            };
            if patch.is_none() && ports.is_none() {
                bail!("{name}: change[{i}]: nothing to change (give `[change.patch]` or `[change.port.NAME]`)");
            }
            if ports.is_some() && patch.is_some_and(|p| p.contains_key("port")) {
                bail!(
                    "{name}: change[{i}]: `[[change.patch.port]]` replaces every port, `[change.port.NAME]` \
                     edits one: give one of them"
                );
            }
            let text = |t: Option<&toml::Table>| -> Result<String> {
                Ok(match t {
                    Some(t) => toml::to_string(t).with_context(|| format!("{name}: change[{i}]"))?,
                    None => String::new(),
                })
            };
            let (patch, ports) = (text(patch)?, text(ports)?);
            steps.push(Step {
                at_ns: at,
                keys: Vec::new(),
                patch,
                ports,
            });
            Ok(())
        })?;
        // Stable: two changes at one time apply in the file's order.
        steps.sort_by_key(|s| s.at_ns);
        let mut running = start.clone();
        for (i, step) in steps.iter_mut().enumerate() {
            let change = prepare(&running, step).map_err(|e| match e {
                ChangeError::Refused(why) => anyhow!(
                    "{name}: change {i} (at {} ns) cannot apply to a running switch: {why}",
                    step.at_ns
                ),
                e => anyhow!(
                    "{name}: the config after change {i} (at {} ns) is invalid:\n{}",
                    step.at_ns,
                    e.reason()
                ),
            })?;
            step.keys = change.changed.clone();
            running.commit(change);
        }
        Ok(Schedule {
            start: Some(start),
            steps,
        })
    }

    /// The steps, in time order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Whether there is no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Plays the steps in order from the start: each step's config is prepared when asked.
    pub fn player(&self) -> Player<'_> {
        Player {
            running: self.start.clone(),
            steps: &self.steps,
            next: 0,
        }
    }
}

/// Calls `f` with each `[[change]]` entry of a schedule's `text` (called `name`) and its index,
/// reading one entry at a time: the text is cut before each line that is `[[change]]`, and
/// each piece read as a document of its own. Read whole, a 4 MB schedule was held twice over
/// while it was read (the parser's document and the table, 300 MB). A piece after the first
/// holds nothing but its entry; where the pieces do not read as that (a syntax error, a
/// `change` key in the first piece, another table after an entry), the whole text is read as
/// before, so the result and the error (with the file's line) are the whole parser's.
fn for_each_change(text: &str, name: &str, mut f: impl FnMut(usize, &toml::Value) -> Result<()>) -> Result<()> {
    let cuts: Vec<usize> = std::iter::once(0)
        .chain(
            text.match_indices('\n')
                .map(|(i, _)| i + 1)
                .filter(|&i| text[i..].lines().next().is_some_and(|l| l.trim() == "[[change]]")),
        )
        .collect();
    let ends: Vec<usize> = cuts.iter().skip(1).copied().chain([text.len()]).collect();
    let pieces = cuts.iter().zip(&ends).map(|(&a, &b)| &text[a..b]);
    let more = cuts.len() > 1;
    let piecewise = |piece: &str| -> Option<toml::Table> {
        let t: toml::Table = piece.parse().ok()?;
        let entry = piece.lines().next().is_some_and(|l| l.trim() == "[[change]]");
        // An entry's piece holds its entry alone; what comes before the first entry holds no
        // `change` of its own when entries follow.
        let ok = if entry {
            t.keys().all(|k| k == "change")
        } else {
            !(more && t.contains_key("change"))
        };
        ok.then_some(t)
    };
    // Each piece is checked before any entry is handed on, so a fall-back never repeats one.
    let ok = pieces.clone().all(|p| piecewise(p).is_some());
    let mut i = 0;
    let mut entries = |t: &toml::Table| -> Result<()> {
        let Some(change) = t.get("change") else { return Ok(()) };
        let change = change
            .as_array()
            .ok_or_else(|| anyhow!("{name}: `change` must be [[change]] entries"))?;
        for c in change {
            f(i, c)?;
            i += 1;
        }
        Ok(())
    };
    if ok {
        for p in pieces {
            if let Some(t) = piecewise(p) {
                entries(&t)?;
            }
        }
    } else {
        let file: toml::Table = text.parse().with_context(|| format!("{name}: not TOML"))?;
        entries(&file)?;
    }
    if i == 0 {
        bail!("{name}: no [[change]] entries");
    }
    Ok(())
}

impl Step {
    /// What the step changes, for a reader: its keys, each `[change.port.NAME]` edit spelled
    /// out (`port.Ethernet12: tx = "off"`) in place of the bare `port` key.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let ports: toml::Table = self.ports.parse().unwrap_or_default();
        for (port, edit) in &ports {
            let kv = edit
                .as_table()
                .map(|t| {
                    t.iter()
                        .map(|(k, v)| format!("{k} = {v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            parts.push(format!("port.{port}: {kv}"));
        }
        let patch_touches_ports = self.patch.parse::<toml::Table>().is_ok_and(|t| t.contains_key("port"));
        parts.extend(
            self.keys
                .iter()
                // A port step's own keys (`port[2].tx`, or `port` when the array moved) are said
                // by its `port.NAME: …` above.
                .filter(|k| {
                    ports.is_empty() || patch_touches_ports || !(k.as_str() == "port" || k.starts_with("port["))
                })
                .cloned(),
        );
        parts.join("; ")
    }
}

/// `step` prepared over `running`: the one way both passes prepare a step.
fn prepare(running: &Running, step: &Step) -> Result<controlplane::change::Prepared, ChangeError> {
    // Written from tables that were read from TOML, so they read back; their keys were checked
    // when the schedule was read.
    let fragment = |text: &str| {
        text.parse::<toml::Table>()
            .map_err(|e: toml::de::Error| ChangeError::Fragment(e.to_string()))
    };
    let mut patch = fragment(&step.patch)?;
    if !step.ports.is_empty() {
        let mut root = toml::Table::new();
        if let Some(ports) = running.table().get("port") {
            root.insert("port".into(), ports.clone());
        }
        for (port, edit) in fragment(&step.ports)? {
            let edit = edit.as_table().cloned().unwrap_or_default();
            controlplane::patch::merge_port(&mut root, &port, edit).map_err(ChangeError::Fragment)?;
        }
        patch.extend(root);
    }
    running.prepare(Edit::Table(patch))
}

/// A `[change.port]` table checked: each key a port (its name or id), each value the keys of a
/// `[[port]]` entry (all but `id`, which names a port and cannot change). The error starts
/// with the path after `port`.
fn port_edits(value: &toml::Value) -> Result<&toml::Table, String> {
    let ports = value
        .as_table()
        .ok_or(": not a table (`[change.port.NAME]`, e.g. `[change.port.Ethernet8]` and `tx = \"off\"`)")?;
    for (port, edit) in ports {
        let edit = edit
            .as_table()
            .ok_or_else(|| format!(".{port}: not a table of the port's keys (e.g. `tx = \"off\"`)"))?;
        if edit.contains_key("id") {
            return Err(format!(".{port}.id: a port's id names it and cannot change"));
        }
        let mut whole = edit.clone();
        whole.insert("id".into(), toml::Value::Integer(0));
        <controlplane::schema::PortSection as serde::Deserialize>::deserialize(toml::Value::Table(whole))
            .map_err(|e| format!(".{port}: {}", e.message()))?;
    }
    Ok(ports)
}

/// Where a replay is in its schedule: the config so far and the next step. Holds one config
/// however many steps there are.
#[derive(Debug)]
pub struct Player<'a> {
    running: Option<Running>,
    steps: &'a [Step],
    next: usize,
}

impl Player<'_> {
    /// When the next step is due, if any is left.
    pub fn next_at(&self) -> Option<u64> {
        self.steps.get(self.next).map(|s| s.at_ns)
    }

    /// How many steps were taken.
    pub fn taken(&self) -> usize {
        self.next
    }

    /// The config the next step leads to, prepared now; moves past it. `None` when no step is
    /// left.
    pub fn take(&mut self) -> Option<Result<Config>> {
        let step = self.steps.get(self.next)?;
        let running = self.running.as_mut()?;
        self.next += 1;
        Some(match prepare(running, step) {
            Ok(change) => {
                let config = change.config.clone();
                running.commit(change);
                Ok(config)
            }
            // Prepared once already over the same config, so this is not the user's mistake.
            Err(e) => Err(anyhow!("schedule change at {} ns: {e}", step.at_ns)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Vec<(u64, Vec<String>)>> {
        let s = Schedule::from_text(controlplane::DEFAULT_PROFILE.to_string(), "config", text, "s.toml")?;
        Ok(s.steps().iter().map(|s| (s.at_ns, s.keys.clone())).collect())
    }

    /// Read an entry at a time or whole, a schedule means the same: entries after a comment,
    /// the inline form (one piece, read whole), and a syntax error names the file's line.
    #[test]
    fn entries_read_one_at_a_time_mean_what_the_whole_file_does() {
        let kmax = |v: &str| format!("[[change]]\nat = \"1us\"\n[change.patch.ecn.roce]\nkmax = \"{v}\"\n");
        let want = vec![(1000, vec!["ecn.roce.kmax".to_string()]); 2];
        let two = format!("# two changes\n\n{}{}", kmax("300KB"), kmax("350KB"));
        assert_eq!(load(&two).unwrap(), want);
        let inline = "change = [{ at = \"1us\", patch = { ecn = { roce = { kmax = \"300KB\" } } } },\n\
                      { at = \"1us\", patch = { ecn = { roce = { kmax = \"350KB\" } } } }]\n";
        assert_eq!(load(inline).unwrap(), want);
        // A `change` before the first entry is the whole parser's error (a key defined twice).
        let e = format!("{:#}", load(&format!("change = 1\n{}", kmax("300KB"))).unwrap_err());
        assert!(e.contains("not TOML"), "{e}");
        let e = format!(
            "{:#}",
            load(&format!("{}{}kmax = \n", kmax("300KB"), kmax("350KB"))).unwrap_err()
        );
        assert!(e.contains("s.toml: not TOML") && e.contains("line 9"), "{e}");
        assert!(format!("{:#}", load("# nothing\n").unwrap_err()).contains("no [[change]] entries"));
    }

    /// `[change.port.NAME]` changes that one port (by name or id) and leaves the others as they
    /// were; a typo, an id, an unknown port and a step that also replaces `[[port]]` are refused
    /// up front, naming the entry.
    #[test]
    fn a_port_step_changes_that_port_only() {
        let base = controlplane::DEFAULT_PROFILE.replace("id = 2\n", "id = 2\nname = \"Ethernet8\"\n");
        let schedule = |text: &str| Schedule::from_text(base.clone(), "config", text, "s.toml");
        let s = schedule(
            "[[change]]\nat = \"1us\"\n[change.port.Ethernet8]\ntx = \"off\"\n\
             [[change]]\nat = \"2us\"\n[change.port.1]\ntx = \"off\"\n\
             [[change]]\nat = \"3us\"\n[change.port.Ethernet8]\ntx = \"on\"\n",
        )
        .unwrap();
        assert_eq!(s.steps()[0].keys, ["port[2].tx"], "the key within the port it set");
        assert_eq!(s.steps()[0].describe(), "port.Ethernet8: tx = \"off\"");
        let mut player = s.player();
        let tx = |c: &Config| c.ports.iter().map(|p| p.tx_enabled).collect::<Vec<_>>();
        let first = player.take().unwrap().unwrap();
        assert_eq!(tx(&first), [true, true, false, true]);
        assert_eq!(first.ports[2].name.as_deref(), Some("Ethernet8"));
        assert_eq!(tx(&player.take().unwrap().unwrap()), [true, false, false, true]);
        assert_eq!(tx(&player.take().unwrap().unwrap()), [true, false, true, true]);
        let refused = |text: &str| format!("{:#}", schedule(text).unwrap_err());
        let one = |port: &str, body: &str| format!("[[change]]\nat = \"1us\"\n[change.port.{port}]\n{body}\n");
        let e = refused(&one("Ethernet9", "tx = \"off\""));
        assert!(
            e.contains("no port \"Ethernet9\" (ports: 0, 1, 2 (Ethernet8), 3)"),
            "{e}"
        );
        let e = refused(&one("Ethernet8", "txx = \"off\""));
        assert!(e.contains("change[0].port.Ethernet8: unknown field `txx`"), "{e}");
        let e = refused(&one("Ethernet8", "id = 5"));
        assert!(e.contains("change[0].port.Ethernet8.id: a port's id names it"), "{e}");
        let e = refused(&one("Ethernet8", "tx = \"of\""));
        assert!(e.contains("is invalid") && e.contains("tx"), "{e}");
        let e = refused("[[change]]\nat = \"1us\"\n[[change.patch.port]]\nid = 0\n[change.port.0]\ntx = \"off\"\n");
        assert!(e.contains("give one of them"), "{e}");
        let e = refused("[[change]]\nat = \"1us\"\n");
        assert!(e.contains("change[0]: nothing to change"), "{e}");
    }
}

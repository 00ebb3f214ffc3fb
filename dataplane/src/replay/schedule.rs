//! `rocesw replay --schedule`: timed config patches, each prepared (cumulatively, in time
//! order) before the replay starts, so a bad step fails the run up front, before any output
//! is written: as a valid config, and as a change the switch can take live. Each step is
//! prepared as the control socket prepares a `patch` (`controlplane::change`: merged, written
//! over the config before it, validated, checked against what a running switch cannot change
//! and the packet slots it was started with), so both refuse the same change in the same
//! words.

use anyhow::{anyhow, bail, Context, Result};
use controlplane::change::{ChangeError, Edit};
use std::path::Path;

/// Reads a `--schedule` file (`[[change]]` entries of `at` and `patch`) and prepares each change
/// over `config` in time order; the first bad step is an error naming it, before anything runs.
pub fn load(config: &Path, path: &Path) -> Result<Vec<super::ScheduledChange>> {
    let base_text = controlplane::files::read_text(config).map_err(anyhow::Error::msg)?;
    let mut running = controlplane::change::Running::load(base_text)
        .map_err(|e| anyhow!("{}: invalid config:\n{e}", config.display()))?;
    let text = controlplane::files::read_text(path).map_err(anyhow::Error::msg)?;
    let file: toml::Table = text.parse().with_context(|| format!("{}: not TOML", path.display()))?;
    // A patch's unknown key, at its line of this file (merged into the config below, it would
    // be reported at a line of the merged text).
    controlplane::patch::check_schedule(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let Some(changes) = file.get("change").and_then(toml::Value::as_array) else {
        bail!("{}: no [[change]] entries", path.display());
    };
    let mut steps: Vec<(u64, toml::Table)> = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        let c = c
            .as_table()
            .ok_or_else(|| anyhow!("{}: change[{i}] is not a table", path.display()))?;
        if let Some(k) = c.keys().find(|k| *k != "at" && *k != "patch") {
            bail!(
                "{}: change[{i}].{k}: unknown key (expected `at` and `patch`)",
                path.display()
            );
        }
        let at = c
            .get("at")
            .and_then(toml::Value::as_str)
            .ok_or_else(|| anyhow!("{}: change[{i}].at: missing (a time such as \"500us\")", path.display()))?;
        let at =
            controlplane::units::parse_duration(at).map_err(|e| anyhow!("{}: change[{i}].at: {e}", path.display()))?;
        let patch = c
            .get("patch")
            .and_then(toml::Value::as_table)
            .ok_or_else(|| anyhow!("{}: change[{i}].patch: missing table", path.display()))?;
        steps.push((at, patch.clone()));
    }
    steps.sort_by_key(|(at, _)| *at);
    let mut out = Vec::with_capacity(steps.len());
    for (i, (at, patch)) in steps.into_iter().enumerate() {
        let change = running.prepare(Edit::Table(patch)).map_err(|e| match e {
            ChangeError::Refused(why) => anyhow!(
                "{}: change {i} (at {at} ns) cannot apply to a running switch: {why}",
                path.display()
            ),
            e => anyhow!(
                "{}: the config after change {i} (at {at} ns) is invalid:\n{}",
                path.display(),
                e.reason()
            ),
        })?;
        out.push(super::ScheduledChange {
            at_ns: at,
            config: change.config.clone(),
            keys: change.changed.clone(),
        });
        running.commit(change);
    }
    Ok(out)
}

//! `rocesw replay --schedule`: timed config patches, each validated (cumulatively, in time
//! order) before the replay starts, so a bad step fails the run up front, before any output
//! is written: as a valid config, and as a change the switch can take live (the same rule
//! `Switch::reconfigure` applies, `controlplane::live_change_refusal`, against the config the
//! replay starts with, plus the largest frame its packet buffers were sized for).

use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;

pub fn load(config: &Path, path: &Path) -> Result<Vec<super::ScheduledChange>> {
    let base_text = controlplane::files::read_text(config).map_err(anyhow::Error::msg)?;
    let mut running: toml::Table = base_text
        .parse()
        .with_context(|| format!("{}: not TOML", config.display()))?;
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
    let start = controlplane::load_str(&base_text)
        .map_err(|e| anyhow!("{}: invalid config:\n{e}", config.display()))?
        .config;
    let slot_bytes = max_frame_bytes(&start);
    let mut out = Vec::with_capacity(steps.len());
    for (i, (at, patch)) in steps.into_iter().enumerate() {
        let before = running.clone();
        controlplane::patch::merge(&mut running, patch);
        let keys = controlplane::patch::changed_keys(&before, &running);
        let text = toml::to_string(&running)?;
        let loaded = controlplane::load_str(&text).map_err(|e| {
            anyhow!(
                "{}: the config after change {i} (at {at} ns) is invalid:\n{e}",
                path.display()
            )
        })?;
        let refusal = controlplane::live_change_refusal(&start, &loaded.config).or_else(|| {
            let (i, p) = loaded
                .config
                .ports
                .iter()
                .enumerate()
                .find(|(_, p)| p.max_frame_bytes > slot_bytes)?;
            Some(format!(
                "port[{i}].mtu (port {}): frames up to {} B exceed the {slot_bytes} B the switch was started with (restart it)",
                p.id, p.max_frame_bytes
            ))
        });
        if let Some(why) = refusal {
            bail!(
                "{}: change {i} (at {at} ns) cannot apply to a running switch: {why}",
                path.display()
            );
        }
        out.push(super::ScheduledChange {
            at_ns: at,
            config: loaded.config,
            keys,
        });
    }
    Ok(out)
}

/// The largest frame any port of `cfg` accepts: what the switch sizes its packet buffers for.
fn max_frame_bytes(cfg: &controlplane::Config) -> u32 {
    cfg.ports.iter().map(|p| p.max_frame_bytes).max().unwrap_or(1518)
}

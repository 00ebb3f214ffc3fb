//! `rocectl clear counters`: a baseline of a switch's counters that `show` subtracts, as SONiC's
//! `sonic-clear` does. The switch itself never resets a counter, so its totals, `summary.json`
//! and the Prometheus metrics (whose `rate()` needs monotonic counters) are untouched; each
//! user's baseline is theirs, in a file named after the switch's address.

use controlplane::protocol::Endpoint;
use controlplane::snapshot::Snapshot;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a baseline file holds.
#[derive(Serialize, Deserialize)]
pub struct Baseline {
    /// When it was taken, seconds since the Unix epoch.
    pub taken_unix_s: u64,
    pub snapshot: Snapshot,
}

/// Where baselines live: `$ROCECTL_STATE_DIR`, else `$XDG_STATE_HOME/rocectl`, else
/// `~/.local/state/rocectl`.
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("ROCECTL_STATE_DIR") {
        return d.into();
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME") {
        return PathBuf::from(d).join("rocectl");
    }
    let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    home.join(".local/state/rocectl")
}

/// The baseline file of the switch at `ep` (its address, made a file name).
pub fn path(ep: &Endpoint) -> PathBuf {
    let name: String = ep
        .to_string()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir().join(format!("counters{name}.json"))
}

/// Keeps `snapshot` as the baseline of the switch at `ep` (written whole, then renamed into
/// place, so a reader never sees half a file).
pub fn save(ep: &Endpoint, snapshot: Snapshot) -> Result<PathBuf, String> {
    let p = path(ep);
    let d = dir();
    std::fs::create_dir_all(&d).map_err(|e| format!("{}: cannot create: {e}", d.display()))?;
    let b = Baseline {
        taken_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_secs()),
        snapshot,
    };
    let text = serde_json::to_string(&b).map_err(|e| e.to_string())?;
    let tmp = p.with_extension(format!("json.{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| format!("{}: cannot write: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &p).map_err(|e| format!("{}: cannot write: {e}", p.display()))?;
    Ok(p)
}

/// The baseline of the switch at `ep`, if one was kept. A file that does not read back (from
/// another version, or damaged) is said once and removed.
pub fn load(ep: &Endpoint) -> Option<Baseline> {
    let p = path(ep);
    let text = std::fs::read_to_string(&p).ok()?;
    match serde_json::from_str(&text) {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("rocectl: {}: not a counters baseline ({e}); removed", p.display());
            let _ = std::fs::remove_file(&p);
            None
        }
    }
}

/// `now` less the baseline of the switch at `ep`, with a line saying since when; `now` as it
/// is when there is no baseline. A baseline of an earlier run of the switch (a counter went
/// backwards) is removed, and said.
pub fn apply(ep: &Endpoint, now: Snapshot) -> (Snapshot, Option<String>) {
    let Some(b) = load(ep) else {
        return (now, None);
    };
    match now.since(&b.snapshot) {
        Some(d) => {
            let ago = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_secs())
                .saturating_sub(b.taken_unix_s);
            (
                d,
                Some(format!(
                    "counters since `rocectl clear counters` {ago} s ago (the switch's totals: --json)"
                )),
            )
        }
        None => {
            let _ = std::fs::remove_file(path(ep));
            (
                now,
                Some("the counters baseline was of an earlier run of this switch: removed; totals since start".into()),
            )
        }
    }
}

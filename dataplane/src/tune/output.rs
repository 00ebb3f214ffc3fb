//! Where `rocesw tune` writes, and the check that it never writes over what it read: a
//! fragment written over a switch's config would lose that config.

use super::{report, TuneOutcome};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The files a run writes.
#[derive(Debug, Clone)]
pub struct Outputs {
    /// Every result: the [`TuneOutcome`] as JSON.
    pub json: PathBuf,
    /// Targets met per pattern, before and after, as a chart.
    pub svg: PathBuf,
    /// The winning setting's config fragment (TOML), for `rocectl patch`.
    pub fragment: PathBuf,
}

impl Outputs {
    /// DIR/tune.json, DIR/tune.svg, and the fragment at `fragment` or DIR/tuned.toml.
    pub fn new(dir: &Path, fragment: Option<&Path>) -> Outputs {
        Outputs {
            json: dir.join("tune.json"),
            svg: dir.join("tune.svg"),
            fragment: fragment.map_or_else(|| dir.join("tuned.toml"), Path::to_path_buf),
        }
    }

    fn all(&self) -> [(&'static str, &Path); 3] {
        [
            ("the JSON report", &self.json),
            ("the SVG", &self.svg),
            ("the fragment", &self.fragment),
        ]
    }
}

/// Refuses an output that is one of the inputs (by device and inode: a hard link, a symlink
/// or `..` is the same file) or another output, and the output directory being an input file:
/// the check every command that writes files shares ([`controlplane::files`]).
pub fn check(dir: &Path, outputs: &Outputs, inputs: &[(String, PathBuf)]) -> Result<()> {
    let ins: Vec<(String, &Path)> = inputs.iter().map(|(w, p)| (w.clone(), p.as_path())).collect();
    let outs: Vec<(String, &Path)> = outputs.all().iter().map(|(w, p)| (w.to_string(), *p)).collect();
    controlplane::files::refuse_aliased_outputs(&ins, &outs).map_err(anyhow::Error::msg)?;
    controlplane::files::refuse_dir_is_input("--output-dir", dir, &ins).map_err(anyhow::Error::msg)
}

/// Writes the JSON, the SVG and the fragment (with a header saying what it is).
pub fn write(dir: &Path, outputs: &Outputs, o: &TuneOutcome, apply_hint: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create output directory {}", dir.display()))?;
    let json = serde_json::to_string_pretty(o)? + "\n";
    std::fs::write(&outputs.json, json).with_context(|| format!("cannot write {}", outputs.json.display()))?;
    std::fs::write(&outputs.svg, report::svg(o)).with_context(|| format!("cannot write {}", outputs.svg.display()))?;
    let fragment = o.best.fragment.as_deref().unwrap_or_default();
    // The hosts' DCQCN is not the switch's: a comment for the topology's [nic], never a key
    // `rocectl patch` would refuse.
    let nic = match o.best.setting.as_ref().and_then(|s| s.nic.as_ref()) {
        Some(n) => format!(
            "# With the hosts' DCQCN (the topology's [nic], not a switch setting):\n#   dcqcn_rai = \"{}\"\n#   dcqcn_byte_counter = \"{}\"\n#   cnp_interval = \"{}\"\n",
            n.dcqcn_rai, n.dcqcn_byte_counter, n.cnp_interval
        ),
        None => String::new(),
    };
    let text = format!(
        "# rocesw tune (seed {}): {}\n# {} of {} patterns meet all three targets (the configs as given: {}).\n{nic}# {apply_hint}\n\n{fragment}",
        o.seed,
        o.best.label,
        o.best.all_met,
        o.patterns.len(),
        o.baseline.all_met
    );
    std::fs::write(&outputs.fragment, text).with_context(|| format!("cannot write {}", outputs.fragment.display()))?;
    Ok(())
}

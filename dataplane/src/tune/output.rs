//! Where `rocesw tune` writes, and the check that it never writes over what it read: a
//! fragment written over a switch's config would lose that config.

use super::{report, TuneOutcome};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The files a run writes.
#[derive(Debug, Clone)]
pub struct Outputs {
    pub json: PathBuf,
    pub svg: PathBuf,
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

/// The same file, whether or not `p` exists yet: an existing parent is resolved (links,
/// `..`), the name kept.
fn resolved(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let parent = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match (parent.canonicalize(), p.file_name()) {
        (Ok(d), Some(n)) => d.join(n),
        _ => p.to_path_buf(),
    }
}

/// Refuses an output that is one of the inputs, or the output directory being an input file.
pub fn check(dir: &Path, outputs: &Outputs, inputs: &[(String, PathBuf)]) -> Result<()> {
    let ins: Vec<(&String, PathBuf)> = inputs.iter().map(|(w, p)| (w, resolved(p))).collect();
    for (what, p) in outputs.all() {
        let r = resolved(p);
        if let Some((w, _)) = ins.iter().find(|(_, i)| *i == r) {
            bail!(
                "{what} would be written to {}, which is {w}: choose another output path",
                p.display()
            );
        }
    }
    let d = resolved(dir);
    if let Some((w, _)) = ins.iter().find(|(_, i)| *i == d) {
        bail!("--output-dir {} is {w}, a file: choose a directory", dir.display());
    }
    Ok(())
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

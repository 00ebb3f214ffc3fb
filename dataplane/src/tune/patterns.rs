//! The tuner's traffic patterns: a compact file of families, each expanded to the cross
//! product of its list-valued keys, so fifty patterns are a dozen lines that say what varies
//! (examples/tune/patterns.toml). Hosts are named by their position in the topology, so one
//! file fits any topology with enough hosts.

use crate::fabric::topology::{Number, SizeValue, Topology, TrafficSpec};
use anyhow::{anyhow, bail, Result};
use controlplane::units;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Virtual time each pattern runs (default 500us).
    duration: Option<String>,
    /// Named message-size distributions, `name = [[bytes, weight], ...]`.
    #[serde(default)]
    sizes: BTreeMap<String, Vec<(SizeValue, Number)>>,
    #[serde(default, rename = "family")]
    families: Vec<FamilyFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FamilyFile {
    name: String,
    /// incast | all-to-all | permutation.
    pattern: String,
    /// Incast: senders (hosts 0 … degree−1, into the last host of the topology).
    degree: Option<Vec<usize>>,
    /// All-to-all and permutation: how many hosts take part (the first N).
    hosts: Option<Vec<usize>>,
    /// One message of this size per pair, or "long".
    size: Option<Vec<String>>,
    /// Names from `[sizes]`: Poisson messages of that distribution (needs `load`).
    dist: Option<Vec<String>>,
    /// Each sender's offered load with `dist`, a fraction of its line rate.
    load: Option<Vec<f64>>,
    /// Long flows added underneath: host k → host N−1−k for k < long (N: the pattern's hosts).
    long: Option<Vec<usize>>,
}

/// The most patterns a file may expand to: each is at least one simulation per setting tried,
/// so even this many runs for days.
pub const MAX_PATTERNS: usize = 10_000;

impl FamilyFile {
    /// How many patterns the family expands to: the product of its lists' lengths.
    fn count(&self) -> usize {
        fn len<T>(v: &Option<Vec<T>>) -> usize {
            v.as_ref().map_or(1, Vec::len)
        }
        [
            len(&self.degree),
            len(&self.hosts),
            len(&self.size),
            len(&self.dist),
            len(&self.load),
            len(&self.long),
        ]
        .into_iter()
        .fold(1, usize::saturating_mul)
    }
}

/// One traffic pattern: a name and the `[[traffic]]` it puts on the topology.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The family's name plus the values that vary (`incast-d4`...).
    pub name: String,
    /// The traffic it puts on the topology in place of the topology's own.
    pub traffic: Vec<TrafficSpec>,
}

/// Every pattern a patterns file expands to, and how long each runs.
#[derive(Debug, Clone)]
pub struct PatternSet {
    /// Virtual time each pattern runs, ns (default 500 µs).
    pub duration_ns: u64,
    /// The patterns, in file order (each family's cross product in turn).
    pub patterns: Vec<Pattern>,
}

/// Reads and expands a patterns file; errors name the file.
pub fn load(path: &Path, topo: &Topology) -> Result<PatternSet> {
    let text = controlplane::files::read_text(path).map_err(|e| anyhow::anyhow!("patterns {e}"))?;
    from_str(&text, topo).map_err(|e| anyhow!("{}: {e:#}", path.display()))
}

/// Expands a patterns file's text for `topo`'s hosts; refuses an empty set, unknown keys or more
/// than [`MAX_PATTERNS`].
pub fn from_str(text: &str, topo: &Topology) -> Result<PatternSet> {
    let file: File = toml::from_str(text).map_err(|e| anyhow!("{e}"))?;
    let duration_ns =
        units::parse_duration(file.duration.as_deref().unwrap_or("500us")).map_err(|e| anyhow!("duration: {e}"))?;
    if duration_ns == 0 {
        bail!("duration must be positive");
    }
    for (name, d) in &file.sizes {
        if d.is_empty() {
            bail!("sizes.{name}: empty: give [[bytes, weight], ...]");
        }
    }
    if file.families.is_empty() {
        bail!("no [[family]]: nothing to tune for");
    }
    // Counted before anything is expanded: a few lists of a hundred values multiply to
    // billions of patterns.
    let mut total = 0usize;
    for (i, f) in file.families.iter().enumerate() {
        let n = f.count();
        total = total.saturating_add(n);
        if total > MAX_PATTERNS {
            bail!(
                "family {} ({}) makes the file {} patterns (each family is the product of its lists' lengths; this one {n}), more than the {MAX_PATTERNS} a tune can run: shorten the lists",
                i + 1,
                f.name,
                if total == usize::MAX { "more than 2^64".to_string() } else { total.to_string() }
            );
        }
    }
    let mut patterns = Vec::new();
    for (i, f) in file.families.iter().enumerate() {
        let what = format!("family {} ({})", i + 1, f.name);
        expand(f, &file.sizes, topo, &mut patterns).map_err(|e| anyhow!("{what}: {e}"))?;
    }
    let mut seen = BTreeMap::new();
    for (i, p) in patterns.iter().enumerate() {
        if let Some(j) = seen.insert(p.name.clone(), i) {
            bail!(
                "patterns {} and {} are both named {:?}: give their families different names",
                j + 1,
                i + 1,
                p.name
            );
        }
    }
    Ok(PatternSet { duration_ns, patterns })
}

/// A list key: absent means one "unset" value, present must not be empty.
fn axis<T: Clone>(v: &Option<Vec<T>>, key: &str) -> Result<Vec<Option<T>>> {
    match v {
        None => Ok(vec![None]),
        Some(l) if l.is_empty() => bail!("{key}: empty list"),
        Some(l) => Ok(l.iter().cloned().map(Some).collect()),
    }
}

fn expand(
    f: &FamilyFile,
    dists: &BTreeMap<String, Vec<(SizeValue, Number)>>,
    topo: &Topology,
    out: &mut Vec<Pattern>,
) -> Result<()> {
    let nhosts = topo.hosts.len();
    let host = |k: usize| topo.hosts[k].name.clone();
    match f.pattern.as_str() {
        "incast" => {
            if f.degree.is_none() {
                bail!("degree: an incast needs its number of senders");
            }
            if f.hosts.is_some() {
                bail!("hosts: an incast takes `degree` (its senders go to the last host)");
            }
        }
        "all-to-all" | "permutation" => {
            if f.hosts.is_none() {
                bail!("hosts: say how many hosts take part");
            }
            if f.degree.is_some() {
                bail!("degree: only an incast has one");
            }
        }
        other => bail!("pattern: unknown {other:?} (incast, all-to-all, permutation)"),
    }
    if f.size.is_some() == f.dist.is_some() {
        bail!("give `size` (one message per pair, or \"long\") or `dist` with `load` (Poisson messages), exactly one");
    }
    if f.dist.is_some() != f.load.is_some() {
        bail!("`dist` and `load` go together");
    }
    for &d in f.degree.iter().flatten() {
        if d == 0 || d + 1 > nhosts {
            bail!(
                "degree: {d} senders and a target need {} hosts; the topology has {nhosts}",
                d + 1
            );
        }
    }
    for &n in f.hosts.iter().flatten() {
        if n < 2 || n > nhosts {
            bail!("hosts: {n} is not between 2 and the topology's {nhosts}");
        }
    }
    for d in f.dist.iter().flatten() {
        if !dists.contains_key(d) {
            let known: Vec<&str> = dists.keys().map(String::as_str).collect();
            bail!("dist: no [sizes] entry {d:?} (known: {})", known.join(", "));
        }
    }
    for &l in f.load.iter().flatten() {
        if !(l > 0.0 && l <= 1.0) {
            bail!("load: {l} is not above 0 and at most 1");
        }
    }
    for s in f.size.iter().flatten() {
        if s != "long" {
            units::parse_size(s).map_err(|e| anyhow!("size: {s:?}: {e}"))?;
        }
    }
    for n in axis(&f.degree, "degree")? {
        for m in axis(&f.hosts, "hosts")? {
            for size in axis(&f.size, "size")? {
                for dist in axis(&f.dist, "dist")? {
                    for load in axis(&f.load, "load")? {
                        for long in axis(&f.long, "long")? {
                            let long = long.unwrap_or(0);
                            // The pattern's hosts, in topology order; an incast's target last.
                            let members: Vec<usize> = match (n, m) {
                                (Some(d), _) => (0..d).chain([nhosts - 1]).collect(),
                                (_, Some(m)) => (0..m).collect(),
                                _ => unreachable!("checked above"),
                            };
                            if 2 * long > members.len() {
                                bail!(
                                    "long: {long} long flows need {} hosts; the pattern has {}",
                                    2 * long,
                                    members.len()
                                );
                            }
                            let mut name = f.name.clone();
                            let mut spec = TrafficSpec {
                                pattern: f.pattern.clone(),
                                ..Default::default()
                            };
                            match (n, m) {
                                (Some(d), _) => {
                                    name += &format!("-d{d}");
                                    spec.from = members[..d].iter().map(|&k| host(k)).collect();
                                    spec.to = vec![host(nhosts - 1)];
                                }
                                (_, Some(m)) => {
                                    name += &format!("-n{m}");
                                    spec.from = members.iter().map(|&k| host(k)).collect();
                                }
                                _ => unreachable!(),
                            }
                            if let Some(s) = size.clone() {
                                name += &format!("-{s}");
                                spec.size = Some(s);
                            }
                            if let (Some(d), Some(l)) = (dist.clone(), load) {
                                name += &format!("-{d}-load{l}");
                                spec.sizes = Some(dists[&d].clone());
                                spec.load = Some(l);
                            }
                            let mut traffic = vec![spec];
                            if long > 0 {
                                name += &format!("+{long}long");
                                for k in 0..long {
                                    traffic.push(TrafficSpec {
                                        pattern: "flows".into(),
                                        from: vec![host(members[k])],
                                        to: vec![host(members[members.len() - 1 - k])],
                                        size: Some("long".into()),
                                        ..Default::default()
                                    });
                                }
                            }
                            out.push(Pattern { name, traffic });
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

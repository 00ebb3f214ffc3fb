//! `rocesw tune --shard I/N` and `rocesw tune merge`: one search spread over machines (a Slurm
//! array, a Kubernetes Indexed Job), its outcome byte for byte the unsharded one's.
//!
//! The search is adaptive: which settings run in a batch depends on the results of the
//! batches before it (the finalists on the screening, each climbing round on the one before).
//! So a sweep runs in **rounds**, one per batch: a shard reads every part file in its
//! `--output-dir` (the rounds before), replays the search over those results without
//! simulating anything, and at the first batch with results missing runs the jobs whose
//! position in that batch is its index modulo the shard count, writes them as
//! `tune.part.r<ROUND>.s<I>of<N>.json`, and exits. Running the N shards once per round (at
//! most [`super::max_rounds`]: the configs as given with the screening, the finalists, one per
//! climbing round; a shard run after the search is complete does nothing) completes the set;
//! `rocesw tune merge` replays the search over all the parts and writes the same files the
//! unsharded run writes. A merge of an incomplete set names the round and the shards whose
//! part is missing: rerunning those shards, then the later rounds, completes it.
//!
//! A part holds the search's options and a SHA-256 of its inputs (topology, patterns, switch
//! configs, config_db.json) so that parts of different sweeps never mix; the merge reads the
//! same input paths and refuses them if they changed. The wall time and host of each part go to
//! DIR/shards.json and stdout, never into the byte-identical files (tune.json, tune.svg, the
//! fragment, tuned.patch.json).

use super::targets::Measured;
use super::{Candidate, Job};
use crate::parts::PartFile;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// What a part file's `format` says.
pub const PART_FORMAT: &str = "rocesw tune part 1";

/// The options that decide a search's outcome, as the shards were given them: what a merge
/// runs the search with again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SearchSpec {
    /// `--topology`.
    pub topology: PathBuf,
    /// `--patterns` (none: the shipped set).
    pub patterns: Option<PathBuf>,
    /// `--default-config`.
    pub default_config: Option<PathBuf>,
    /// `--sonic`.
    pub sonic: Option<PathBuf>,
    /// `--target` KEY=VALUE, in order.
    pub targets: Vec<String>,
    /// `--seed`.
    pub seed: u64,
    /// `--budget`.
    pub budget: Option<usize>,
    /// `--quick`.
    pub quick: bool,
    /// `--dcqcn`.
    pub dcqcn: bool,
    /// `--duration`, ns.
    pub duration: Option<u64>,
}

/// One result of a part: a job and what it measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartResult {
    /// The configs as given, or a setting.
    pub candidate: Candidate,
    /// The pattern's index in the pattern set.
    pub pattern: usize,
    /// The run, measured.
    pub measured: Measured,
}

/// A part file: one shard's share of one round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part {
    /// [`PART_FORMAT`].
    pub format: String,
    /// The search's options.
    pub search: SearchSpec,
    /// SHA-256 of the options and every input file's bytes ([`digest`]).
    pub inputs_sha256: String,
    /// This shard's index.
    pub shard: usize,
    /// Shards in all.
    pub shards: usize,
    /// The round (the search's batch, from 1).
    pub round: usize,
    /// Simulations in the round, all shards'.
    pub round_jobs: usize,
    /// The host it ran on.
    pub host: String,
    /// Its wall time, s.
    pub seconds: f64,
    /// What it ran, in the round's job order.
    pub results: Vec<PartResult>,
}

impl Part {
    /// The file name a shard writes it under.
    pub fn file_name(&self) -> String {
        format!(
            "{}r{:02}.s{}of{}.json",
            Self::PREFIX,
            self.round,
            self.shard,
            self.shards
        )
    }
}

impl PartFile for Part {
    const FORMAT: &'static str = PART_FORMAT;
    const PREFIX: &'static str = "tune.part.";
    fn format(&self) -> &str {
        &self.format
    }
    fn shard(&self) -> usize {
        self.shard
    }
    fn shards(&self) -> usize {
        self.shards
    }
}

/// SHA-256 over the options and each input (its role and its bytes), hex.
pub fn digest(spec: &SearchSpec, inputs: &[(String, PathBuf)]) -> Result<String> {
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(spec)?);
    for (what, path) in inputs {
        let bytes = std::fs::read(path).with_context(|| format!("{what} {}: cannot read", path.display()))?;
        h.update((what.len() as u64).to_le_bytes());
        h.update(what.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The parts as one sweep's: the same options, inputs and shard count, no round's shard twice
/// with different results; its known results.
pub fn known(parts: &[(PathBuf, Part)]) -> Result<BTreeMap<Job, Measured>> {
    let Some((f0, p0)) = parts.first() else {
        return Ok(BTreeMap::new());
    };
    let mut seen: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut out = BTreeMap::new();
    for (f, p) in parts {
        if p.inputs_sha256 != p0.inputs_sha256 || p.search != p0.search {
            bail!(
                "{} and {} are parts of different sweeps (other options or inputs): merge one sweep's parts",
                f0.display(),
                f.display()
            );
        }
        if p.shards != p0.shards {
            bail!(
                "{} is shard {} of {}, {} one of {}: one sweep has one shard count",
                f.display(),
                p.shard,
                p.shards,
                f0.display(),
                p0.shards
            );
        }
        seen.insert((p.round, p.shard));
        for r in &p.results {
            if let Some(old) = out.insert((r.candidate, r.pattern), r.measured.clone()) {
                if old != r.measured {
                    bail!(
                        "{}: pattern {} of {:?} differs from another part's result for it",
                        f.display(),
                        r.pattern,
                        r.candidate
                    );
                }
            }
        }
    }
    Ok(out)
}

/// The shard indices that own the `missing` positions of a round of `shards` shards.
pub fn owners(missing: &[usize], shards: usize) -> Vec<usize> {
    let set: BTreeSet<usize> = missing.iter().map(|k| k % shards.max(1)).collect();
    set.into_iter().collect()
}

/// What the merge says of the shards: DIR/shards.json (kept out of the byte-identical files).
#[derive(Debug, Serialize)]
pub struct ShardsReport {
    /// Shards per round.
    pub shards: usize,
    /// Rounds the sweep took.
    pub rounds: usize,
    /// Distinct hosts that ran parts.
    pub hosts: Vec<String>,
    /// Every part: round, shard, host, simulations, seconds.
    pub parts: Vec<ShardLine>,
    /// Summed wall time of the parts, s (the work; the sweep's wall time is less with shards
    /// running side by side).
    pub total_seconds: f64,
}

/// One part in [`ShardsReport`].
#[derive(Debug, Serialize)]
pub struct ShardLine {
    /// The round.
    pub round: usize,
    /// The shard.
    pub shard: usize,
    /// Where it ran.
    pub host: String,
    /// Simulations it ran.
    pub simulations: usize,
    /// Its wall time, s.
    pub seconds: f64,
}

/// The shards' report of a set of parts.
pub fn shards_report(parts: &[(PathBuf, Part)]) -> ShardsReport {
    let mut lines: Vec<ShardLine> = parts
        .iter()
        .map(|(_, p)| ShardLine {
            round: p.round,
            shard: p.shard,
            host: p.host.clone(),
            simulations: p.results.len(),
            seconds: p.seconds,
        })
        .collect();
    lines.sort_by_key(|l| (l.round, l.shard));
    let hosts: BTreeSet<String> = lines.iter().map(|l| l.host.clone()).collect();
    ShardsReport {
        shards: parts.first().map_or(0, |(_, p)| p.shards),
        rounds: lines.iter().map(|l| l.round).max().unwrap_or(0),
        hosts: hosts.into_iter().collect(),
        total_seconds: lines.iter().map(|l| l.seconds).sum(),
        parts: lines,
    }
}

impl ShardsReport {
    /// As lines for stdout: a summary, then a line per round.
    pub fn text(&self) -> String {
        let mut t = format!(
            "{} shards, {} rounds, on {} host{} ({}); {:.1} s of shard time in all\n",
            self.shards,
            self.rounds,
            self.hosts.len(),
            if self.hosts.len() == 1 { "" } else { "s" },
            self.hosts.join(", "),
            self.total_seconds
        );
        for r in 1..=self.rounds {
            let cells: Vec<String> = self
                .parts
                .iter()
                .filter(|l| l.round == r)
                .map(|l| {
                    format!(
                        "shard {} {:.1} s ({} sims, {})",
                        l.shard, l.seconds, l.simulations, l.host
                    )
                })
                .collect();
            t.push_str(&format!("  round {r}: {}\n", cells.join("; ")));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_positions_modulo_the_count() {
        assert_eq!(owners(&[1, 5, 6, 9], 4), vec![1, 2]);
        assert_eq!(owners(&[], 4), Vec::<usize>::new());
    }
}

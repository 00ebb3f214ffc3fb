//! `rocesw tune`'s command line: the options, and the run from them to the files.

use super::output::{self, Outputs};
use super::shard::{self, Part, PartResult, SearchSpec};
use super::targets::Targets;
use super::{patterns, report, Grid, Mode, Searched, TuneOptions};
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The shipped patterns, compiled in so that `rocesw tune` finds them from any directory.
pub const SHIPPED_PATTERNS: &str = include_str!("../../../examples/tune/patterns.toml");

/// `rocesw tune`'s options, as clap parses them.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct TuneArgs {
    /// `rocesw tune merge`, or none: a search.
    #[command(subcommand)]
    pub command: Option<TuneCommand>,
    /// The fabric to tune (a `rocesw fabric` topology file; its [[traffic]] is ignored).
    /// Every switch gets the same fragment, so they should share their lossless class's ECN
    /// profile name and PG number.
    #[arg(long, value_name = "FILE", required = true)]
    pub topology: Option<PathBuf>,
    /// The traffic patterns (TOML: duration, [sizes] distributions, [[family]] entries
    /// expanded to the cross product of their lists; examples/tune/patterns.toml explains
    /// every key). Default: that shipped set of 50, built in.
    #[arg(long, value_name = "FILE")]
    pub patterns: Option<PathBuf>,
    /// Directory for tune.json (every result), tune.svg (targets met per pattern, before and
    /// after) and, unless --fragment says otherwise, tuned.toml; created if missing. With
    /// --shard: the directory of the sweep's part files, read and written.
    #[arg(long, value_name = "DIR", required = true)]
    pub output_dir: Option<PathBuf>,
    /// Where the winning config fragment goes (default DIR/tuned.toml), for `rocectl patch
    /// FILE`. Refused if it is one of the inputs.
    #[arg(long, value_name = "FILE")]
    pub fragment: Option<PathBuf>,
    /// Change a target, as KEY=VALUE (repeatable). Keys: goodput (fraction of line rate on
    /// bottleneck links, default 0.95), pfc_per_s (PFC frames per second, default 5),
    /// pfc_time (fraction of windows within that rate, default 0.99), windows (how many
    /// windows a run is cut into, default 100), latency_p90 (default 40us), latency_p99
    /// (default 80us).
    #[arg(long = "target", value_name = "KEY=VALUE")]
    pub targets: Vec<String>,
    /// Seed of the simulations (WRED, ECMP, permutations, message arrivals); the search is
    /// deterministic, so one seed gives one result on any number of threads.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulations at once (default, and at most: the machine's cores; fewer when that many
    /// fabrics' start-up memory would take more than half of what the machine has available).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Most simulations, the baseline's included (a smaller budget runs a prefix of the same
    /// search). Default 8000, or 300 with --quick.
    #[arg(long, value_name = "N")]
    pub budget: Option<usize>,
    /// A smaller search: a 16-setting grid screened on every 8th pattern, 2 finalists, 2
    /// climbing rounds, budget 300.
    #[arg(long)]
    pub quick: bool,
    /// Also search the hosts' DCQCN: the additive increase (×0.25 … ×16 the NIC model's 0.5%
    /// of line rate, hyper increase ten times it), the byte counter (37.5 KB … 600 KB) and
    /// the notification point's CNP interval (4, 10, 25, 50 µs). They are NIC settings: the
    /// fragment file names them in a comment, for the topology's [nic] (dcqcn_rai,
    /// dcqcn_byte_counter, cnp_interval) or the hosts, and the fragment stays the switch's.
    #[arg(long)]
    pub dcqcn: bool,
    /// Virtual time per pattern, instead of the patterns file's `duration`.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub duration: Option<u64>,
    /// Switch config for [[switch]] entries without `config`. Default: the built-in profile
    /// (configs/default.toml as shipped), so tune runs from any directory.
    #[arg(long, value_name = "FILE")]
    pub default_config: Option<PathBuf>,
    /// The SONiC config_db.json the switches' config came from: the winning setting is also
    /// written as an RFC 6902 JSON Patch against it (DIR/tuned.patch.json, what SONiC's
    /// `config apply-patch` takes: the changed WRED thresholds and lossless PGs' dynamic_th),
    /// with the changes on stderr.
    #[arg(long, value_name = "CONFIG_DB_JSON")]
    pub sonic: Option<PathBuf>,
    /// No progress bar and no table on stdout (the files are still written).
    #[arg(long, short)]
    pub quiet: bool,
    /// Run shard I of N (I from 0) of the search: read the part files in --output-dir (the
    /// rounds before), run this shard's share of the first round whose results are missing
    /// (the jobs whose position in it is I modulo N) and write them there as
    /// tune.part.r<ROUND>.s<I>ofN.json. Run the N shards once per round (at most 2 plus the
    /// climbing rounds: 4 with --quick, 14 by default; a shard after the last round does
    /// nothing), then `rocesw tune merge DIR --output-dir OUT`.
    #[arg(long, value_name = "I/N", value_parser = crate::parts::parse_spec)]
    pub shard: Option<(usize, usize)>,
}

/// `rocesw tune`'s subcommand.
#[derive(Debug, Subcommand)]
pub enum TuneCommand {
    /// Merge the part files of a sharded search (`rocesw tune --shard I/N`) into the files the
    /// unsharded search writes, byte for byte (given the same --output-dir and --fragment);
    /// DIR/shards.json and stdout say how many shards and hosts ran and how long each part
    /// took. An incomplete set is refused, naming the round and the shards to run again.
    Merge(MergeArgs),
}

/// `rocesw tune merge`'s options.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Part files, or directories holding them (their tune.part.*.json).
    #[arg(required = true, value_name = "PARTS")]
    pub parts: Vec<PathBuf>,
    /// Directory for tune.json, tune.svg, tuned.toml (unless --fragment) and shards.json;
    /// created if missing. The shards' options and input paths come from the parts (relative
    /// paths from this directory's working directory, as the shards ran).
    #[arg(long, value_name = "DIR")]
    pub output_dir: PathBuf,
    /// Where the winning config fragment goes (default DIR/tuned.toml).
    #[arg(long, value_name = "FILE")]
    pub fragment: Option<PathBuf>,
    /// Nothing on stdout (the files are still written).
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_duration(s: &str) -> Result<u64, String> {
    match controlplane::units::parse_duration(s) {
        Ok(0) => Err("must be above 0".into()),
        Ok(v) => Ok(v),
        Err(e) => Err(e.to_string()),
    }
}

static BAR: OnceLock<ProgressBar> = OnceLock::new();

fn progress(done: usize, planned: usize) {
    let bar = BAR.get_or_init(|| {
        let b = ProgressBar::new(planned as u64);
        b.set_style(
            ProgressStyle::with_template(
                "tune {bar:40} {pos} of at most {len} simulations ({elapsed}; the search may end sooner)",
            )
            .expect("static template"),
        );
        b
    });
    bar.set_length(planned as u64);
    bar.set_position(done as u64);
}

/// The options a command line asks for (no files touched).
pub fn options(args: &TuneArgs) -> Result<TuneOptions> {
    options_of(&spec(args)?, args.threads, args.quiet)
}

/// The options that decide the outcome, from the command line.
fn spec(args: &TuneArgs) -> Result<SearchSpec> {
    Ok(SearchSpec {
        topology: args.topology.clone().ok_or_else(|| anyhow!("--topology is required"))?,
        patterns: args.patterns.clone(),
        default_config: args.default_config.clone(),
        sonic: args.sonic.clone(),
        targets: args.targets.clone(),
        seed: args.seed,
        budget: args.budget,
        quick: args.quick,
        dcqcn: args.dcqcn,
        duration: args.duration,
    })
}

fn options_of(spec: &SearchSpec, threads: Option<usize>, quiet: bool) -> Result<TuneOptions> {
    let mut targets = Targets::default();
    for t in &spec.targets {
        targets.set(t)?;
    }
    let mut o = TuneOptions {
        seed: spec.seed,
        targets,
        threads: threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        ..Default::default()
    };
    if o.threads == 0 {
        bail!("--threads must be at least 1");
    }
    // Simulations are CPU-bound: more threads than cores only hold more fabrics in memory.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if o.threads > cores {
        eprintln!(
            "rocesw tune: --threads {}: using {cores}, the machine's cores (more would only hold more simulations in memory)",
            o.threads
        );
        o.threads = cores;
    }
    o.dcqcn = spec.dcqcn;
    if spec.quick {
        o.grid = Grid::quick();
        o.screen_every = 8;
        o.finalists = 2;
        o.rounds = 2;
        o.budget = 300;
    }
    if let Some(b) = spec.budget {
        o.budget = b;
    }
    if !quiet {
        o.progress = Some(progress);
    }
    Ok(o)
}

/// A search's inputs, loaded and checked.
struct Loaded {
    opts: TuneOptions,
    topo: crate::fabric::topology::Topology,
    set: patterns::PatternSet,
    /// Every input file, by role.
    inputs: Vec<(String, PathBuf)>,
}

fn load(spec: &SearchSpec, threads: Option<usize>, quiet: bool) -> Result<Loaded> {
    let mut opts = options_of(spec, threads, quiet)?;
    let topo = crate::fabric::topology::load(&spec.topology, spec.default_config.as_deref(), spec.seed)?;
    // Each thread holds a whole fabric: together their start-up memory stays within half of
    // what the machine has available (the other half for the frames they buffer).
    let per_sim = topo.memory_bytes();
    if let Some(avail) = controlplane::memory::machine_available() {
        let fit = usize::try_from(avail / 2 / per_sim.max(1)).unwrap_or(usize::MAX);
        if opts.threads > fit.max(1) {
            eprintln!(
                "rocesw tune: using {} threads: each simulation's switches need {} MiB at start-up, and the threads together stay within half of the {} MiB available",
                fit.max(1),
                per_sim >> 20,
                avail >> 20
            );
            opts.threads = fit.max(1);
        }
    }
    let mut set = match &spec.patterns {
        Some(p) => patterns::load(p, &topo)?,
        None => patterns::from_str(SHIPPED_PATTERNS, &topo)
            .map_err(|e| anyhow::anyhow!("the shipped patterns on this topology: {e:#}"))?,
    };
    if let Some(d) = spec.duration {
        set.duration_ns = d;
    }
    let mut inputs = vec![("topology".to_string(), spec.topology.clone())];
    if let Some(p) = &spec.patterns {
        inputs.push(("patterns file".to_string(), p.clone()));
    }
    if let Some(p) = &spec.default_config {
        inputs.push(("default config".to_string(), p.clone()));
    }
    for sw in &topo.switches {
        if let Some(p) = &sw.config_path {
            inputs.push((format!("config of switch {:?}", sw.name), p.clone()));
        }
    }
    if let Some(json) = &spec.sonic {
        inputs.push(("config_db.json".to_string(), json.clone()));
    }
    Ok(Loaded {
        opts,
        topo,
        set,
        inputs,
    })
}

/// Refuses a budget too small for the search (after the outputs' check, which comes first).
fn check_budget(l: &Loaded) -> Result<()> {
    if l.opts.budget < l.set.patterns.len() * 2 {
        bail!(
            "--budget {}: too small to run the configs as given and one setting on the {} patterns (at least {})",
            l.opts.budget,
            l.set.patterns.len(),
            l.set.patterns.len() * 2
        );
    }
    Ok(())
}

/// The files' check before anything runs: no output over an input.
fn check_outputs(l: &Loaded, spec: &SearchSpec, dir: &Path, outputs: &Outputs) -> Result<()> {
    // The default config is an input of the search, but not one an output could alias before
    // (the check as it was): keep the check's inputs as they were.
    let inputs: Vec<(String, PathBuf)> = l
        .inputs
        .iter()
        .filter(|(w, _)| w != "default config")
        .cloned()
        .collect();
    if spec.sonic.is_some() {
        let sonic_patch = dir.join("tuned.patch.json");
        let ins: Vec<(String, &std::path::Path)> = inputs.iter().map(|(w, p)| (w.clone(), p.as_path())).collect();
        controlplane::files::refuse_aliased_outputs(&ins, &[("the JSON Patch".to_string(), &sonic_patch)])
            .map_err(anyhow::Error::msg)?;
    }
    output::check(dir, outputs, &inputs)
}

/// Writes the outcome's files (and the JSON Patch with --sonic) and prints the summary.
fn finish(
    spec: &SearchSpec,
    outcome: &super::TuneOutcome,
    dir: &Path,
    outputs: &Outputs,
    quiet: bool,
    started: std::time::Instant,
) -> Result<()> {
    let hint = report::apply_hint(outcome, &outputs.fragment);
    output::write(dir, outputs, outcome, &hint)?;
    if let Some(json) = &spec.sonic {
        let sonic_patch = dir.join("tuned.patch.json");
        let text = controlplane::files::read_text(json).map_err(anyhow::Error::msg)?;
        let fragment = outcome.best.fragment.as_deref().unwrap_or_default();
        let opts = controlplane::sonic::ImportOptions::default();
        let e = controlplane::sonic::export::export_fragment(&text, &opts, fragment).map_err(|p| {
            anyhow::anyhow!(
                "the winning setting as a patch of {}:\n  {}",
                json.display(),
                p.join("\n  ")
            )
        })?;
        std::fs::write(&sonic_patch, serde_json::to_string_pretty(&e.patch)? + "\n")
            .map_err(|err| anyhow::anyhow!("cannot write {}: {err}", sonic_patch.display()))?;
        for n in &e.notes {
            eprintln!("rocesw tune: {}: note: {n}", json.display());
        }
        for c in &e.changes {
            eprintln!("rocesw tune: {}: {c}", json.display());
        }
        if !quiet {
            eprintln!(
                "rocesw tune: wrote {} ({} changes; on the switch: config apply-patch)",
                sonic_patch.display(),
                e.changes.len()
            );
        }
    }
    if !quiet {
        crate::report::print_stdout(&format!(
            "{}\nwrote {}, {} and {} in {:.0} s; {hint}\n",
            report::table(outcome),
            outputs.fragment.display(),
            outputs.json.display(),
            outputs.svg.display(),
            started.elapsed().as_secs_f64()
        ))?;
    }
    Ok(())
}

/// Runs `rocesw tune`: loads the topology and patterns, searches, writes tune.json, tune.svg and
/// the fragment, and prints the summary; with --shard, this shard's share of the next round;
/// `rocesw tune merge`, the parts' outcome.
pub fn run(args: TuneArgs) -> Result<()> {
    if let Some(TuneCommand::Merge(m)) = args.command {
        return merge(m);
    }
    let spec = spec(&args)?;
    let dir = args
        .output_dir
        .clone()
        .ok_or_else(|| anyhow!("--output-dir is required"))?;
    if let Some((index, count)) = args.shard {
        return run_shard(&spec, index, count, &dir, args.threads, args.quiet);
    }
    let l = load(&spec, args.threads, args.quiet)?;
    let outputs = Outputs::new(&dir, args.fragment.as_deref());
    check_outputs(&l, &spec, &dir, &outputs)?;
    check_budget(&l)?;
    let started = std::time::Instant::now();
    let outcome = super::run(&l.topo, &l.set, &l.opts)?;
    if let Some(b) = BAR.get() {
        b.finish_and_clear();
    }
    finish(&spec, &outcome, &dir, &outputs, args.quiet, started)
}

fn shard_progress(done: usize, share: usize) {
    eprintln!("rocesw tune: shard: {done} of {share} simulations (this shard's share of the round)");
}

fn run_shard(
    spec: &SearchSpec,
    index: usize,
    count: usize,
    dir: &Path,
    threads: Option<usize>,
    quiet: bool,
) -> Result<()> {
    let started = std::time::Instant::now();
    let mut l = load(spec, threads, true)?;
    check_budget(&l)?;
    if !quiet {
        l.opts.progress = Some(shard_progress);
    }
    let digest = shard::digest(spec, &l.inputs)?;
    let parts = if dir.is_dir() {
        crate::parts::read_parts::<Part>(&[dir.to_path_buf()])?
    } else {
        Vec::new()
    };
    for (f, p) in &parts {
        if p.inputs_sha256 != digest || &p.search != spec || p.shards != count {
            bail!(
                "{} is a part of another sweep (other options, inputs or shard count than {index}/{count}): give each sweep a directory of its own",
                f.display()
            );
        }
    }
    let known = shard::known(&parts)?;
    let max = super::max_rounds(&l.opts);
    let me = format!("shard {index}/{count}");
    match super::search(&l.topo, &l.set, &l.opts, Mode::Shard { index, count }, known)? {
        Searched::Done(_) => {
            eprintln!(
                "rocesw tune: {me}: the search is complete ({} part files in {}): nothing to run; `rocesw tune merge {} --output-dir OUT` writes its files",
                parts.len(),
                dir.display(),
                dir.display()
            );
        }
        Searched::Stopped(f) => {
            let share = (0..f.jobs.len()).filter(|k| k % count == index).count();
            if f.ran.is_empty() {
                let waiting: Vec<String> = shard::owners(&f.missing, count).iter().map(|s| s.to_string()).collect();
                eprintln!(
                    "rocesw tune: {me}: round {} (of at most {max}): this shard's share ({share} of {}) is done; shards {} have yet to write theirs",
                    f.round,
                    f.jobs.len(),
                    waiting.join(", ")
                );
                return Ok(());
            }
            let part = Part {
                format: shard::PART_FORMAT.into(),
                search: spec.clone(),
                inputs_sha256: digest,
                shard: index,
                shards: count,
                round: f.round,
                round_jobs: f.jobs.len(),
                host: crate::parts::hostname(),
                seconds: started.elapsed().as_secs_f64(),
                results: f
                    .ran
                    .into_iter()
                    .map(|((candidate, pattern), measured)| PartResult {
                        candidate,
                        pattern,
                        measured,
                    })
                    .collect(),
            };
            let path = dir.join(part.file_name());
            crate::parts::write_atomic(&path, &(serde_json::to_string(&part)? + "\n"))?;
            eprintln!(
                "rocesw tune: {me}: round {} (of at most {max}): ran {} of the round's {} simulations on {} in {:.1} s; wrote {}",
                part.round,
                part.results.len(),
                part.round_jobs,
                part.host,
                part.seconds,
                path.display()
            );
        }
    }
    Ok(())
}

fn merge(m: MergeArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let parts = crate::parts::read_parts::<Part>(&m.parts)?;
    let Some((_, first)) = parts.first() else {
        bail!(
            "no part files (tune.part.*.json) in {}: run the shards first (rocesw tune … --shard I/N --output-dir DIR)",
            m.parts
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let spec = first.search.clone();
    let count = first.shards;
    let digest0 = first.inputs_sha256.clone();
    let known = shard::known(&parts)?;
    let l = load(&spec, Some(1), true)?;
    if shard::digest(&spec, &l.inputs)? != digest0 {
        bail!(
            "the inputs the parts name ({}) changed since the shards ran: run the sweep again",
            l.inputs
                .iter()
                .map(|(_, p)| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let outputs = Outputs::new(&m.output_dir, m.fragment.as_deref());
    check_outputs(&l, &spec, &m.output_dir, &outputs)?;
    check_budget(&l)?;
    let max = super::max_rounds(&l.opts);
    match super::search(&l.topo, &l.set, &l.opts, Mode::Merge, known)? {
        Searched::Done(outcome) => {
            finish(&spec, &outcome, &m.output_dir, &outputs, m.quiet, started)?;
            let report = shard::shards_report(&parts);
            let path = m.output_dir.join("shards.json");
            std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")
                .map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
            if !m.quiet {
                crate::report::print_stdout(&format!(
                    "merged {} part files: {}(the shards' times: {})\n",
                    parts.len(),
                    report.text(),
                    path.display()
                ))?;
            }
            Ok(())
        }
        Searched::Stopped(f) => {
            let owners = shard::owners(&f.missing, count);
            let any_of_round = parts.iter().any(|(_, p)| p.round == f.round);
            let list: Vec<String> = owners.iter().map(|s| format!("{s}/{count}")).collect();
            if any_of_round {
                bail!(
                    "the parts are incomplete: round {} (of at most {max}) lacks the parts of shards {} ({} of its {} simulations): rerun `rocesw tune … --shard I/N` for those (same options and --output-dir), then the rounds after it, and merge again",
                    f.round,
                    list.join(", "),
                    f.missing.len(),
                    f.jobs.len()
                )
            } else {
                bail!(
                    "the parts are incomplete: round {} (of at most {max}) has not run (its {} simulations need rounds 1 to {}): run all {count} shards again (same options and --output-dir; each runs its share of the next round), then merge",
                    f.round,
                    f.jobs.len(),
                    f.round - 1
                )
            }
        }
    }
}

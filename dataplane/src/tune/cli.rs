//! `rocesw tune`'s command line: the options, and the run from them to the files.

use super::output::{self, Outputs};
use super::targets::Targets;
use super::{patterns, report, Grid, TuneOptions};
use anyhow::{bail, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The shipped patterns, compiled in so that `rocesw tune` finds them from any directory.
pub const SHIPPED_PATTERNS: &str = include_str!("../../../examples/tune/patterns.toml");

/// `rocesw tune`'s options, as clap parses them.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The fabric to tune (a `rocesw fabric` topology file; its [[traffic]] is ignored).
    /// Every switch gets the same fragment, so they should share their lossless class's ECN
    /// profile name and PG number.
    #[arg(long, value_name = "FILE")]
    pub topology: PathBuf,
    /// The traffic patterns (TOML: duration, [sizes] distributions, [[family]] entries
    /// expanded to the cross product of their lists; examples/tune/patterns.toml explains
    /// every key). Default: that shipped set of 50, built in.
    #[arg(long, value_name = "FILE")]
    pub patterns: Option<PathBuf>,
    /// Directory for tune.json (every result), tune.svg (targets met per pattern, before and
    /// after) and, unless --fragment says otherwise, tuned.toml; created if missing.
    #[arg(long, value_name = "DIR")]
    pub output_dir: PathBuf,
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
    let mut targets = Targets::default();
    for t in &args.targets {
        targets.set(t)?;
    }
    let mut o = TuneOptions {
        seed: args.seed,
        targets,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
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
    o.dcqcn = args.dcqcn;
    if args.quick {
        o.grid = Grid::quick();
        o.screen_every = 8;
        o.finalists = 2;
        o.rounds = 2;
        o.budget = 300;
    }
    if let Some(b) = args.budget {
        o.budget = b;
    }
    if !args.quiet {
        o.progress = Some(progress);
    }
    Ok(o)
}

/// Runs `rocesw tune`: loads the topology and patterns, searches, writes tune.json, tune.svg and
/// the fragment, and prints the summary.
pub fn run(args: TuneArgs) -> Result<()> {
    let mut opts = options(&args)?;
    let topo = crate::fabric::topology::load(&args.topology, args.default_config.as_deref(), args.seed)?;
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
    let mut set = match &args.patterns {
        Some(p) => patterns::load(p, &topo)?,
        None => patterns::from_str(SHIPPED_PATTERNS, &topo)
            .map_err(|e| anyhow::anyhow!("the shipped patterns on this topology: {e:#}"))?,
    };
    if let Some(d) = args.duration {
        set.duration_ns = d;
    }
    let outputs = Outputs::new(&args.output_dir, args.fragment.as_deref());
    let mut inputs = vec![("topology".to_string(), args.topology.clone())];
    if let Some(p) = &args.patterns {
        inputs.push(("patterns file".to_string(), p.clone()));
    }
    for sw in &topo.switches {
        if let Some(p) = &sw.config_path {
            inputs.push((format!("config of switch {:?}", sw.name), p.clone()));
        }
    }
    let sonic_patch = args.output_dir.join("tuned.patch.json");
    if let Some(json) = &args.sonic {
        inputs.push(("config_db.json".to_string(), json.clone()));
        let ins: Vec<(String, &std::path::Path)> = inputs.iter().map(|(w, p)| (w.clone(), p.as_path())).collect();
        controlplane::files::refuse_aliased_outputs(&ins, &[("the JSON Patch".to_string(), &sonic_patch)])
            .map_err(anyhow::Error::msg)?;
    }
    output::check(&args.output_dir, &outputs, &inputs)?;
    if opts.budget < set.patterns.len() * 2 {
        bail!(
            "--budget {}: too small to run the configs as given and one setting on the {} patterns (at least {})",
            opts.budget,
            set.patterns.len(),
            set.patterns.len() * 2
        );
    }
    let started = std::time::Instant::now();
    let outcome = super::run(&topo, &set, &opts)?;
    if let Some(b) = BAR.get() {
        b.finish_and_clear();
    }
    let hint = report::apply_hint(&outcome, &outputs.fragment);
    output::write(&args.output_dir, &outputs, &outcome, &hint)?;
    if let Some(json) = &args.sonic {
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
        for c in &e.changes {
            eprintln!("rocesw tune: {}: {c}", json.display());
        }
        if !args.quiet {
            eprintln!(
                "rocesw tune: wrote {} ({} changes; on the switch: config apply-patch)",
                sonic_patch.display(),
                e.changes.len()
            );
        }
    }
    if !args.quiet {
        crate::report::print_stdout(&format!(
            "{}\nwrote {}, {} and {} in {:.0} s; {hint}\n",
            report::table(&outcome),
            outputs.fragment.display(),
            outputs.json.display(),
            outputs.svg.display(),
            started.elapsed().as_secs_f64()
        ))?;
    }
    Ok(())
}

//! `rocesw tune`: searches Kmin, Kmax, Pmax and alpha for the setting under which the most
//! traffic patterns meet the targets, by running the fabric once per (setting, pattern).
//!
//! * **Deterministic.** The search is a fixed plan, not a random one: the configs as they are
//!   (the baseline), a coarse grid screened on every `screen_every`-th pattern, the best few
//!   of it on every pattern, then hill climbing one ladder step at a time on every pattern.
//!   Each simulation is deterministic for the seed; simulations run on worker threads that
//!   take jobs from a shared counter and write each result into its own slot, and every
//!   decision is taken after a batch, over results in job order: so neither the thread count
//!   nor the scheduling can change anything.
//! * **The ranking** of a setting: patterns meeting all three targets, then targets met
//!   summed over patterns; settings equal on both tie, and of a tie the least aggressive wins
//!   ([`space::Setting::aggressiveness`]: the lowest Pmax, then the largest Kmin and Kmax,
//!   then the smallest alpha), so there are no ties left and a knob that made no difference
//!   is left at its gentlest. The report says when the best had such a tie. (The configs as
//!   given, not a setting, are compared by the summed shortfall: how far from the targets the
//!   misses are.) Screening orders the grid by the counts, then by the shortfall.
//! * **Bounded.** `budget` caps the simulations; each stage takes what remains, in its fixed
//!   order, so a smaller budget gives a prefix of the same search.

pub mod cli;
pub mod output;
pub mod patterns;
pub mod report;
pub mod shard;
pub mod space;
pub mod targets;

use crate::fabric::topology::Topology;
use crate::fabric::{self, FabricOptions};
use anyhow::{anyhow, Result};
use patterns::PatternSet;
use serde::Serialize;
use space::{Knobs, Setting};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use targets::{Measured, Targets};

/// How [`run`] searches; [`Default`] is the CLI's defaults.
#[derive(Debug, Clone)]
pub struct TuneOptions {
    /// Seed of every simulation (the traffic's expansion and the fabric's draws).
    pub seed: u64,
    /// What a pattern's run must meet.
    pub targets: Targets,
    /// Worker threads (simulations at once).
    pub threads: usize,
    /// Most simulations to run, the baseline's included.
    pub budget: usize,
    /// Screen the coarse grid on every n-th pattern.
    pub screen_every: usize,
    /// Grid settings that go on from screening to every pattern.
    pub finalists: usize,
    /// Most hill-climbing rounds.
    pub rounds: usize,
    /// The coarse grid's ladder indices (Kmin, Kmax/Kmin steps, Pmax, alpha).
    pub grid: Grid,
    /// Also search the hosts' DCQCN (additive increase and byte counter).
    pub dcqcn: bool,
    /// Called after each simulation with (done, the most the whole search may run: the
    /// budget), so a progress bar's total does not grow stage by stage.
    pub progress: Option<fn(usize, usize)>,
}

/// The coarse grid, as ladder indices (see [`space`]).
#[derive(Debug, Clone)]
pub struct Grid {
    /// Kmin ladder indices ([`space::K_KIB`]).
    pub kmin: Vec<usize>,
    /// Kmax as Kmin's index plus these steps (each step doubles).
    pub kmax_steps: Vec<usize>,
    /// Pmax ladder indices ([`space::PMAX`]).
    pub pmax: Vec<usize>,
    /// alpha ladder indices ([`space::ALPHA`]).
    pub alpha: Vec<usize>,
}

impl Grid {
    /// 3 × 2 × 3 × 3 = 54 settings: Kmin 8/32/128 KiB, Kmax 2× or 8× Kmin, Pmax 0.05/0.2/1,
    /// alpha 1/16, 1/4, 1.
    pub fn standard() -> Grid {
        Grid {
            kmin: vec![1, 3, 5],
            kmax_steps: vec![1, 3],
            pmax: vec![2, 4, 6],
            alpha: vec![2, 4, 6],
        }
    }

    /// 2 × 2 × 2 × 2 = 16 settings.
    pub fn quick() -> Grid {
        Grid {
            kmin: vec![2, 4],
            kmax_steps: vec![1, 3],
            pmax: vec![3, 5],
            alpha: vec![3, 5],
        }
    }

    /// With `dcqcn`, each setting with the model's DCQCN and with a faster one: four times
    /// its additive increase, half its byte counter, CNPs every 10 µs instead of 50.
    fn settings(&self, dcqcn: bool) -> Vec<Setting> {
        let nics: Vec<Option<(usize, usize, usize)>> = if dcqcn {
            vec![Some(space::DCQCN_DEFAULT), Some((4, 1, 1))]
        } else {
            vec![None]
        };
        let mut out = Vec::new();
        for &nic in &nics {
            for &kmin in &self.kmin {
                for &step in &self.kmax_steps {
                    for &pmax in &self.pmax {
                        for &alpha in &self.alpha {
                            out.push(Setting {
                                kmin,
                                kmax: (kmin + step).min(space::K_KIB.len() - 1),
                                pmax,
                                alpha,
                                dcqcn: nic,
                            });
                        }
                    }
                }
            }
        }
        out.dedup();
        out
    }
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            seed: 1,
            targets: Targets::default(),
            threads: 2,
            budget: 8000,
            screen_every: 2,
            finalists: 4,
            rounds: 12,
            grid: Grid::standard(),
            dcqcn: false,
            progress: None,
        }
    }
}

/// A candidate: the configs as given (`None`) or a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Candidate {
    /// The topology's configs unchanged.
    Baseline,
    /// The configs with this setting's fragment merged in.
    Setting(Setting),
}

/// A candidate's results on every pattern, and its rank.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluated {
    /// The setting as one line (`Kmin 8KiB Kmax 64KiB ...`), or "the configs as given".
    pub label: String,
    /// The setting's values as people read them; `None` for the baseline.
    pub setting: Option<space::SettingView>,
    /// The config fragment (TOML) that applies the setting; `None` for the baseline.
    pub fragment: Option<String>,
    /// Patterns meeting all three targets.
    pub all_met: u32,
    /// Per target, patterns meeting it: (goodput, pfc, latency).
    pub met: [u32; 3],
    /// Summed [`Measured::shortfall`] over the patterns: how far the misses are.
    pub shortfall: f64,
    /// One per pattern, in the pattern set's order.
    pub results: Vec<Measured>,
    /// How it was reached: "baseline", "grid", "climb round N".
    pub stage: String,
    /// The setting on the ladders (`None` for the configs as given): what ties are broken by.
    #[serde(skip)]
    pub knobs: Option<Setting>,
}

impl Evaluated {
    fn key(&self) -> (u32, u32, f64) {
        (self.all_met, self.met.iter().sum(), -self.shortfall)
    }

    /// Meets the targets on exactly as many patterns as `o`, target by target: a tie.
    pub fn ties_with(&self, o: &Evaluated) -> bool {
        self.all_met == o.all_met && self.met == o.met
    }

    /// Strictly better than `o`: more patterns meeting all three targets, then more targets
    /// met; equal on both, the less aggressive setting ([`space::Setting::aggressiveness`]),
    /// or between a setting and the configs as given, the smaller shortfall.
    pub fn better_than(&self, o: &Evaluated) -> bool {
        let (a, b) = (self.key(), o.key());
        if (a.0, a.1) != (b.0, b.1) {
            return (a.0, a.1) > (b.0, b.1);
        }
        match (self.knobs, o.knobs) {
            (Some(x), Some(y)) if x != y => x.aggressiveness() < y.aggressiveness(),
            _ => a.2 > b.2 + 1e-12,
        }
    }
}

/// A whole search's result: what tune.json holds and the report prints.
#[derive(Debug, Serialize)]
pub struct TuneOutcome {
    /// The seed the simulations ran with.
    pub seed: u64,
    /// The targets measured against.
    pub targets: Targets,
    /// Virtual time each pattern ran, ns.
    pub duration_ns: u64,
    /// Pattern names, in order.
    pub patterns: Vec<String>,
    /// ECN profiles the fragment sets (those of the lossless queues).
    pub knobs_profiles: Vec<String>,
    /// PGs whose alpha the fragment sets (the lossless ones).
    pub knobs_pgs: Vec<u8>,
    /// The configs as given.
    pub baseline: Evaluated,
    /// The winner (the baseline if no setting beat it).
    pub best: Evaluated,
    /// Every setting run on every pattern, in the order run.
    pub finalists: Vec<Evaluated>,
    /// Grid settings screened (on the screening patterns only): label, all met, shortfall.
    pub screened: Vec<Screened>,
    /// Of the finalists, those no other beats on every target count (goodput, PFC,
    /// latency): the trade-offs on offer.
    pub pareto: Vec<String>,
    /// Fabric simulations run, the baseline's included (at most the budget).
    pub simulations: usize,
    /// The patterns the coarse grid was screened on (every `screen_every`-th).
    pub screening_patterns: Vec<String>,
}

/// One grid setting's screening result, on the screening patterns only.
#[derive(Debug, Clone, Serialize)]
pub struct Screened {
    /// The setting as one line.
    pub label: String,
    /// Screening patterns meeting all three targets.
    pub all_met: u32,
    /// Targets met, summed over the screening patterns.
    pub targets_met: u32,
    /// Summed shortfall over the screening patterns.
    pub shortfall: f64,
}

/// One simulation of the search: a candidate on a pattern (its index in the pattern set).
pub type Job = (Candidate, usize);

/// Where the search's simulations come from ([`search`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every simulation runs here.
    Local,
    /// Shard `index` of `count` (`rocesw tune --shard`): the search replays what is known, and
    /// at the first batch with unknown results runs the jobs whose position in that batch is
    /// `index` modulo `count`, then stops ([`Frontier`]).
    Shard {
        /// This shard, from 0.
        index: usize,
        /// Shards in all.
        count: usize,
    },
    /// Nothing runs (`rocesw tune merge`): the search replays the known results and stops at
    /// the first batch with one missing ([`Frontier`]).
    Merge,
}

/// Where a [`Mode::Shard`] or [`Mode::Merge`] search stopped: the first batch some of whose
/// results were not known.
#[derive(Debug)]
pub struct Frontier {
    /// The batch, from 1: each batch's jobs depend on the results of the batches before it
    /// (1: the configs as given and the grid's screening; 2: the finalists; then one per
    /// climbing round).
    pub round: usize,
    /// The batch's jobs, in order (a shard's share is its positions modulo the shard count).
    pub jobs: Vec<Job>,
    /// Positions in `jobs` whose results were not known.
    pub missing: Vec<usize>,
    /// What this shard ran of them (empty for a merge), in job order.
    pub ran: Vec<(Job, Measured)>,
}

impl std::fmt::Display for Frontier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "round {}: {} of its {} simulations not known",
            self.round,
            self.missing.len(),
            self.jobs.len()
        )
    }
}

impl std::error::Error for Frontier {}

/// How a [`search`] ended.
#[derive(Debug)]
pub enum Searched {
    /// Every result was known or run: the outcome.
    Done(Box<TuneOutcome>),
    /// It stopped at a batch with results missing ([`Mode::Shard`], [`Mode::Merge`]).
    Stopped(Frontier),
}

struct Engine<'a> {
    base: &'a Topology,
    /// Per pattern: the base topology with that pattern's traffic.
    topos: Vec<Topology>,
    set: &'a PatternSet,
    knobs: Knobs,
    opts: &'a TuneOptions,
    sims: usize,
    cache: BTreeMap<Job, Measured>,
    mode: Mode,
    /// Results run elsewhere (other shards' parts, earlier rounds').
    known: BTreeMap<Job, Measured>,
    /// Batches with at least one job so far.
    batches: usize,
}

impl Engine<'_> {
    fn remaining(&self) -> usize {
        self.opts.budget.saturating_sub(self.sims)
    }

    /// Runs every (candidate, pattern) job not cached as one batch: on the worker threads, or
    /// from the known results; a shard or a merge stops at the first batch with one unknown
    /// (an error holding a [`Frontier`]).
    fn run_jobs(&mut self, jobs: &[Job]) -> Result<()> {
        let jobs: Vec<Job> = jobs.iter().filter(|j| !self.cache.contains_key(j)).copied().collect();
        if jobs.is_empty() {
            return Ok(());
        }
        self.batches += 1;
        let missing: Vec<usize> = (0..jobs.len())
            .filter(|&k| !self.known.contains_key(&jobs[k]))
            .collect();
        if !missing.is_empty() {
            let ran = match self.mode {
                Mode::Local => {
                    let ms = self.simulate_batch(&jobs)?;
                    for (job, m) in jobs.iter().zip(ms) {
                        self.cache.insert(*job, m);
                    }
                    self.sims += jobs.len();
                    return Ok(());
                }
                Mode::Shard { index, count } => {
                    let mine: Vec<Job> = missing
                        .iter()
                        .filter(|&&k| k % count.max(1) == index)
                        .map(|&k| jobs[k])
                        .collect();
                    let ms = self.simulate_batch(&mine)?;
                    mine.into_iter().zip(ms).collect()
                }
                Mode::Merge => Vec::new(),
            };
            return Err(anyhow::Error::new(Frontier {
                round: self.batches,
                jobs,
                missing,
                ran,
            }));
        }
        for job in &jobs {
            self.cache.insert(*job, self.known[job].clone());
        }
        self.sims += jobs.len();
        Ok(())
    }

    /// Simulates `jobs` on the worker threads; the results in job order.
    fn simulate_batch(&self, jobs: &[Job]) -> Result<Vec<Measured>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        // Configs per candidate, patched once.
        let mut configs: BTreeMap<Candidate, Vec<controlplane::Config>> = BTreeMap::new();
        for (c, _) in jobs {
            if let (Candidate::Setting(s), false) = (c, configs.contains_key(c)) {
                configs.insert(*c, space::patch_all(self.base, &self.knobs.fragment(*s))?);
            }
        }
        let next = AtomicUsize::new(0);
        let slots: Mutex<Vec<Option<Result<Measured>>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
        let done = AtomicUsize::new(0);
        // Locally the whole run's bound: the budget (the search may stop before it); a shard's
        // its share of this batch.
        let (start_done, planned) = match self.mode {
            Mode::Local => (self.sims, self.opts.budget.max(self.sims + jobs.len())),
            _ => (0, jobs.len()),
        };
        let (topos, set, opts) = (&self.topos, self.set, self.opts);
        let configs = &configs;
        std::thread::scope(|scope| {
            for _ in 0..opts.threads.max(1) {
                scope.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(cand, p)) = jobs.get(k) else { break };
                    let r = simulate(&topos[p], cand, configs, set.duration_ns, opts);
                    slots.lock().expect("no worker panics holding it")[k] = Some(r);
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if let Some(progress) = opts.progress {
                        progress(start_done + n, planned);
                    }
                });
            }
        });
        let slots = slots.into_inner().expect("no worker panicked");
        let mut out = Vec::with_capacity(jobs.len());
        for (job, r) in jobs.iter().zip(slots) {
            let m = r.expect("every job ran").map_err(|e| {
                anyhow!(
                    "pattern {}: {}: {e:#}",
                    set.patterns[job.1].name,
                    match job.0 {
                        Candidate::Baseline => "the configs as given".to_string(),
                        Candidate::Setting(s) => s.label(),
                    }
                )
            })?;
            out.push(m);
        }
        Ok(out)
    }

    /// Of `settings`, those a search taking them one by one runs on every pattern before the
    /// budget stops it: each needs room left for all the patterns, and costs its jobs not yet
    /// cached.
    fn fitting(&self, settings: &[Setting], patterns: &[usize]) -> Vec<Setting> {
        let mut sims = self.sims;
        let mut out: Vec<Setting> = Vec::new();
        for s in settings {
            if self.opts.budget.saturating_sub(sims) < patterns.len() {
                break;
            }
            sims += patterns
                .iter()
                .filter(|&&p| !self.cache.contains_key(&(Candidate::Setting(*s), p)))
                .count();
            out.push(*s);
        }
        out
    }

    fn evaluate(&self, c: Candidate, patterns: &[usize], stage: &str) -> Evaluated {
        let t = &self.opts.targets;
        let results: Vec<Measured> = patterns.iter().map(|&p| self.cache[&(c, p)].clone()).collect();
        let mut met = [0u32; 3];
        let mut all_met = 0;
        let mut shortfall = 0.0;
        for m in &results {
            met[0] += u32::from(m.met.goodput);
            met[1] += u32::from(m.met.pfc);
            met[2] += u32::from(m.met.latency);
            all_met += u32::from(m.met.all());
            shortfall += m.shortfall(t);
        }
        let knobs = match c {
            Candidate::Baseline => None,
            Candidate::Setting(s) => Some(s),
        };
        let (label, setting, fragment) = match c {
            Candidate::Baseline => ("the configs as given".to_string(), None, None),
            Candidate::Setting(s) => {
                let line = self.base.links[self.base.hosts[0].link].speed_bps;
                (s.label(), Some(s.view_at(line)), Some(self.knobs.fragment(s)))
            }
        };
        Evaluated {
            label,
            setting,
            fragment,
            all_met,
            met,
            shortfall,
            results,
            stage: stage.to_string(),
            knobs,
        }
    }
}

fn simulate(
    topo: &Topology,
    cand: Candidate,
    configs: &BTreeMap<Candidate, Vec<controlplane::Config>>,
    duration_ns: u64,
    opts: &TuneOptions,
) -> Result<Measured> {
    let o = match cand {
        Candidate::Baseline => fabric::run(topo, &fabric_opts(opts.seed))?,
        Candidate::Setting(s) => {
            let mut t = topo.clone();
            space::apply_nic(&mut t, s);
            for (sw, cfg) in t.switches.iter_mut().zip(&configs[&cand]) {
                sw.config = cfg.clone();
            }
            fabric::run(&t, &fabric_opts(opts.seed))?
        }
    };
    Ok(targets::measure(topo, &o, duration_ns, &opts.targets))
}

fn fabric_opts(seed: u64) -> FabricOptions {
    FabricOptions {
        seed,
        ..Default::default()
    }
}

/// Runs the search. `base` is the topology whose switches are tuned; its own traffic is
/// replaced by each pattern's.
pub fn run(base: &Topology, set: &PatternSet, opts: &TuneOptions) -> Result<TuneOutcome> {
    match search(base, set, opts, Mode::Local, BTreeMap::new())? {
        Searched::Done(o) => Ok(*o),
        Searched::Stopped(f) => Err(anyhow!("a local search stopped at {f}")),
    }
}

/// The search with its simulations from `mode`: all run here ([`Mode::Local`], what [`run`]
/// does), or `known` results (other shards' and earlier rounds') completed by this shard's
/// share of the first batch that lacks some. The batches, and so the outcome, are the same
/// whichever way the results arrive.
pub fn search(
    base: &Topology,
    set: &PatternSet,
    opts: &TuneOptions,
    mode: Mode,
    known: BTreeMap<Job, Measured>,
) -> Result<Searched> {
    match search_inner(base, set, opts, mode, known) {
        Ok(o) => Ok(Searched::Done(Box::new(o))),
        Err(e) => match e.downcast::<Frontier>() {
            Ok(f) => Ok(Searched::Stopped(f)),
            Err(e) => Err(e),
        },
    }
}

/// The most batches a search with `opts` has: the configs as given with the grid's
/// screening, the finalists, and one per climbing round.
pub fn max_rounds(opts: &TuneOptions) -> usize {
    2 + opts.rounds
}

fn search_inner(
    base: &Topology,
    set: &PatternSet,
    opts: &TuneOptions,
    mode: Mode,
    known: BTreeMap<Job, Measured>,
) -> Result<TuneOutcome> {
    let knobs = Knobs::of(base)?;
    let mut topos = Vec::with_capacity(set.patterns.len());
    // The patterns' duration first: Poisson arrivals stop at it.
    let timed = Topology {
        duration_ns: set.duration_ns,
        ..base.clone()
    };
    for p in &set.patterns {
        let t = timed
            .with_traffic(&p.traffic, opts.seed)
            .map_err(|e| anyhow!("pattern {}: {e:#}", p.name))?;
        topos.push(t);
    }
    // The grid must patch cleanly before anything runs: a bad fragment is an input error.
    let mut start = knobs.current(base);
    if opts.dcqcn {
        start.dcqcn = Some(space::DCQCN_DEFAULT);
    }
    space::patch_all(base, &knobs.fragment(start))?;
    let mut e = Engine {
        base,
        topos,
        set,
        knobs,
        opts,
        sims: 0,
        cache: BTreeMap::new(),
        mode,
        known,
        batches: 0,
    };
    let all: Vec<usize> = (0..set.patterns.len()).collect();
    let jobs_for = |c: Candidate, ps: &[usize]| -> Vec<Job> { ps.iter().map(|&p| (c, p)).collect() };

    // 1. The baseline on every pattern: what "before" means; and in the same batch (its jobs
    // depend on the budget alone) 2. the grid (and the setting nearest the configs) screened
    // on a subset, as far as the budget allows; the best few go on to every pattern.
    let baseline_jobs = jobs_for(Candidate::Baseline, &all);
    let after_baseline = opts.budget.saturating_sub(e.sims + baseline_jobs.len());
    let screen: Vec<usize> = all.iter().copied().step_by(opts.screen_every.max(1)).collect();
    let mut grid = vec![start];
    for s in opts.grid.settings(opts.dcqcn) {
        if !grid.contains(&s) {
            grid.push(s);
        }
    }
    let reserve = opts.finalists * all.len();
    let fit = after_baseline.saturating_sub(reserve) / screen.len().max(1);
    grid.truncate(fit.max(1).min(grid.len()));
    let jobs: Vec<Job> = grid
        .iter()
        .flat_map(|s| jobs_for(Candidate::Setting(*s), &screen))
        // Always leave room for one setting on every pattern.
        .take(after_baseline.saturating_sub(all.len()))
        .collect();
    e.run_jobs(&[baseline_jobs, jobs].concat())?;
    let baseline = e.evaluate(Candidate::Baseline, &all, "baseline");
    let mut finalists: Vec<Evaluated> = Vec::new();
    let mut screened: Vec<(Evaluated, Setting)> = grid
        .iter()
        .filter(|s| {
            screen
                .iter()
                .all(|p| e.cache.contains_key(&(Candidate::Setting(**s), *p)))
        })
        .map(|s| (e.evaluate(Candidate::Setting(*s), &screen, "grid"), *s))
        .collect();
    // Best first, by a total order (a comparator with a tolerance is not one, and sorting
    // may then panic); a stable sort keeps the grid order among equals.
    screened.sort_by(|a, b| {
        let key = |e: &Evaluated| (e.all_met, e.met.iter().sum::<u32>());
        key(&b.0).cmp(&key(&a.0)).then(a.0.shortfall.total_cmp(&b.0.shortfall))
    });
    let screened_view: Vec<Screened> = screened
        .iter()
        .map(|(ev, _)| Screened {
            label: ev.label.clone(),
            all_met: ev.all_met,
            targets_met: ev.met.iter().sum(),
            shortfall: ev.shortfall,
        })
        .collect();
    let mut best: Option<(Evaluated, Setting)> = None;
    // A budget too small to screen goes on with the setting nearest the configs.
    let mut order: Vec<Setting> = screened.iter().map(|x| x.1).take(opts.finalists).collect();
    if order.is_empty() {
        order.push(start);
    }
    // One batch: the finalists that fit in the budget, taken in order.
    let order = e.fitting(&order, &all);
    let jobs: Vec<Job> = order
        .iter()
        .flat_map(|s| jobs_for(Candidate::Setting(*s), &all))
        .collect();
    e.run_jobs(&jobs)?;
    for s in &order {
        let ev = e.evaluate(Candidate::Setting(*s), &all, "grid");
        finalists.push(ev.clone());
        if best.as_ref().is_none_or(|b| ev.better_than(&b.0)) {
            best = Some((ev, *s));
        }
    }

    // 3. Hill climbing from the best: every neighbour one ladder step away on every pattern,
    // move to the best if it is better, until none is or the budget ends.
    if let Some((mut here, mut at)) = best.take() {
        for round in 1..=opts.rounds {
            let mut moved = false;
            let mut round_best: Option<(Evaluated, Setting)> = None;
            // One batch per round: the neighbours not run yet that fit in the budget.
            let mut fresh: Vec<Setting> = Vec::new();
            for n in at.neighbours() {
                let label = n.label();
                if !finalists.iter().any(|f| f.label == label) && !fresh.iter().any(|f| f.label() == label) {
                    fresh.push(n);
                }
            }
            let fresh = e.fitting(&fresh, &all);
            let jobs: Vec<Job> = fresh
                .iter()
                .flat_map(|s| jobs_for(Candidate::Setting(*s), &all))
                .collect();
            e.run_jobs(&jobs)?;
            for n in fresh {
                let ev = e.evaluate(Candidate::Setting(n), &all, &format!("climb round {round}"));
                finalists.push(ev.clone());
                if ev.better_than(round_best.as_ref().map_or(&here, |b| &b.0)) {
                    round_best = Some((ev, n));
                }
            }
            if let Some((ev, n)) = round_best {
                here = ev;
                at = n;
                moved = true;
            }
            if !moved || e.remaining() < all.len() {
                break;
            }
        }
        best = Some((here, at));
    }
    let best = match best {
        Some((b, _)) => b,
        None => {
            return Err(anyhow!(
                "the budget ({}) ran out before any setting ran on every pattern: raise --budget",
                opts.budget
            ))
        }
    };
    let pareto = pareto(&finalists, &best.label);
    Ok(TuneOutcome {
        seed: opts.seed,
        targets: opts.targets.clone(),
        duration_ns: set.duration_ns,
        patterns: set.patterns.iter().map(|p| p.name.clone()).collect(),
        knobs_profiles: e.knobs.profiles.iter().cloned().collect(),
        knobs_pgs: e.knobs.pgs.iter().copied().collect(),
        baseline,
        best,
        finalists,
        screened: screened_view,
        pareto,
        simulations: e.sims,
        screening_patterns: screen.iter().map(|&p| set.patterns[p].name.clone()).collect(),
    })
}

/// Labels of the finalists no other finalist beats on one target count while matching it on
/// the others; of several with the same counts, the chosen one (else the first run).
fn pareto(f: &[Evaluated], chosen: &str) -> Vec<String> {
    let dominated = |a: &Evaluated| {
        f.iter()
            .any(|b| (0..3).all(|k| b.met[k] >= a.met[k]) && (0..3).any(|k| b.met[k] > a.met[k]))
    };
    let mut seen: Vec<[u32; 3]> = Vec::new();
    let mut out = Vec::new();
    let order = f
        .iter()
        .filter(|a| a.label == chosen)
        .chain(f.iter().filter(|a| a.label != chosen));
    for a in order {
        if !dominated(a) && !seen.contains(&a.met) {
            seen.push(a.met);
            out.push(a.label.clone());
        }
    }
    out
}

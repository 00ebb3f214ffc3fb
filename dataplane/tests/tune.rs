//! `rocesw tune` (dataplane/src/tune): deterministic for a seed on any number of threads, its
//! fragment is what `rocectl patch` takes, it beats a bad starting config, and bad input is
//! refused with a clear error. Small patterns and short runs, so each test takes seconds.

mod common;

use dataplane::fabric::topology::{self, Topology};
use dataplane::tune::patterns::{self, PatternSet};
use dataplane::tune::targets::Targets;
use dataplane::tune::{self, output, Grid, TuneOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tune")
}

fn default_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/default.toml")
}

fn shipped_topology() -> Topology {
    topology::load(&examples().join("topology.toml"), Some(&default_config()), 1).unwrap()
}

/// The shared small pattern set, expanded on the shipped topology.
fn small_set(topo: &Topology) -> PatternSet {
    patterns::from_str(common::SMALL_TUNE_PATTERNS, topo).unwrap()
}

/// A search of a few dozen simulations.
fn small_opts(threads: usize) -> TuneOptions {
    TuneOptions {
        seed: 7,
        threads,
        budget: 60,
        screen_every: 2,
        finalists: 2,
        rounds: 2,
        grid: Grid {
            kmin: vec![1, 4],
            kmax_steps: vec![2],
            pmax: vec![3],
            alpha: vec![3, 5],
        },
        ..Default::default()
    }
}

#[test]
fn the_same_seed_gives_the_same_result_on_one_or_two_threads() {
    let topo = shipped_topology();
    let set = small_set(&topo);
    let dir = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for (k, threads) in [2, 2, 1].into_iter().enumerate() {
        let o = tune::run(&topo, &set, &small_opts(threads)).unwrap();
        let d = dir.path().join(format!("run{k}"));
        let outs = output::Outputs::new(&d, None);
        output::write(&d, &outs, &o, "test").unwrap();
        runs.push((
            std::fs::read(&outs.json).unwrap(),
            std::fs::read(&outs.fragment).unwrap(),
            std::fs::read(&outs.svg).unwrap(),
        ));
        assert!(o.simulations <= 60, "the budget holds: {}", o.simulations);
        assert!(o.simulations > 4 * 4, "more than the baseline ran");
    }
    assert!(runs[0] == runs[1], "two runs with two threads differ");
    assert!(runs[0] == runs[2], "one thread and two threads differ");
    // Another seed is another experiment (other arrivals, other WRED draws).
    let other = tune::run(
        &topo,
        &set,
        &TuneOptions {
            seed: 8,
            ..small_opts(2)
        },
    )
    .unwrap();
    let first: serde_json::Value = serde_json::from_slice(&runs[0].0).unwrap();
    assert_ne!(first["baseline"], serde_json::to_value(&other.baseline).unwrap());
}

/// The fragment written is taken by the control plane exactly as `rocectl patch` sends it to
/// a running switch: merged into the running config's text, validated whole, and accepted
/// as a live change; and it sets what the search chose.
#[test]
fn the_fragment_is_valid_for_rocectl_patch() {
    let topo = shipped_topology();
    let o = tune::run(&topo, &small_set(&topo), &small_opts(2)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let outs = output::Outputs::new(dir.path(), None);
    output::write(dir.path(), &outs, &o, "apply with rocectl patch").unwrap();
    let fragment = std::fs::read_to_string(&outs.fragment).unwrap();
    let running = std::fs::read_to_string(examples().join("tor.toml")).unwrap();
    // The control server's steps for a `patch` (controlplane::change, spelt out).
    let patch: toml::Table = fragment.parse().expect("the fragment is TOML");
    let mut merged: toml::Table = running.parse().unwrap();
    let before = merged.clone();
    controlplane::patch::merge(&mut merged, patch);
    let changed = controlplane::patch::changed_keys(&before, &merged);
    assert!(!changed.is_empty(), "the fragment changes something");
    assert!(
        changed
            .iter()
            .all(|k| ["ecn.roce.kmin", "ecn.roce.kmax", "ecn.roce.pmax", "pg.3.alpha"].contains(&k.as_str())),
        "{changed:?}"
    );
    let text = controlplane::retext::rewrite(&running, &merged).unwrap();
    let new = controlplane::load_str(&text)
        .expect("the patched config validates")
        .config;
    let old = controlplane::load_str(&running).unwrap().config;
    assert_eq!(controlplane::live_change_refusal(&old, &new), None);
    let best = o.best.setting.as_ref().unwrap();
    let ecn = new.queues[3].ecn.as_ref().unwrap();
    assert_eq!(ecn.kmin_bytes, controlplane::units::parse_size(&best.kmin).unwrap());
    assert_eq!(ecn.kmax_bytes, controlplane::units::parse_size(&best.kmax).unwrap());
    assert_eq!(ecn.pmax, best.pmax);
}

/// Issue 39 item 6: `rocectl patch` is offered for a running switch only when the setting
/// loses none of the targets the configs as given met, pattern by pattern; otherwise the hint
/// names what it loses, and says it is not offered (in the fragment's header too).
#[test]
fn rocectl_patch_is_offered_only_for_a_setting_that_loses_no_target() {
    let topo = shipped_topology();
    let mut o = tune::run(&topo, &small_set(&topo), &small_opts(2)).unwrap();
    let frag = Path::new("out/tuned.toml");
    assert!(o.best.fragment.is_some(), "a setting won: {}", o.best.label);
    // Everything the baseline met, the winner meets too.
    for (b, a) in o.baseline.results.clone().iter().zip(o.best.results.iter_mut()) {
        a.met.goodput |= b.met.goodput;
        a.met.pfc |= b.met.pfc;
        a.met.latency |= b.met.latency;
    }
    assert!(tune::report::losses(&o).is_empty());
    assert_eq!(
        tune::report::apply_hint(&o, frag),
        "Apply to a running switch: rocectl patch out/tuned.toml"
    );
    // The winner misses latency on the second pattern where the configs as given met it.
    o.baseline.results[1].met.latency = true;
    o.best.results[1].met.latency = false;
    let name = o.patterns[1].clone();
    assert_eq!(tune::report::losses(&o), vec![(name.clone(), vec!["latency"])]);
    let hint = tune::report::apply_hint(&o, frag);
    assert!(
        hint.starts_with("not offered for a running switch: the best setting misses targets the configs as given met")
            && hint.contains(&format!("({name}: latency)")),
        "{hint}"
    );
    assert!(!hint.contains("Apply to a running switch"), "{hint}");
    let dir = tempfile::tempdir().unwrap();
    let outs = output::Outputs::new(dir.path(), None);
    output::write(dir.path(), &outs, &o, &hint).unwrap();
    let text = std::fs::read_to_string(&outs.fragment).unwrap();
    assert!(text.contains(&format!("# {hint}")), "{text}");
    // No setting beat the configs as given: nothing to apply.
    o.best = o.baseline.clone();
    assert_eq!(
        tune::report::apply_hint(&o, frag),
        "no setting beat the configs as given: nothing to apply to a running switch"
    );
}

/// A switch that marks every RoCE packet (Kmin = Kmax = 1 KB, Pmax 1) throttles DCQCN to a
/// crawl; the search must find a setting that meets strictly more targets.
#[test]
fn the_tuner_beats_a_bad_starting_config() {
    let dir = tempfile::tempdir().unwrap();
    let tor = std::fs::read_to_string(examples().join("tor.toml")).unwrap();
    let bad = tor
        .replace("kmin = \"100KB\"", "kmin = \"1KB\"")
        .replace("kmax = \"400KB\"", "kmax = \"1KB\"")
        .replace("pmax = 0.2", "pmax = 1");
    assert_ne!(bad, tor);
    std::fs::write(dir.path().join("tor.toml"), bad).unwrap();
    std::fs::copy(examples().join("topology.toml"), dir.path().join("topology.toml")).unwrap();
    let topo = topology::load(&dir.path().join("topology.toml"), Some(&default_config()), 1).unwrap();
    let set = small_set(&topo);
    let o = tune::run(&topo, &set, &small_opts(2)).unwrap();
    assert!(
        o.best.better_than(&o.baseline),
        "best {} ({} all met, {:?}) is not better than the bad config ({} all met, {:?})",
        o.best.label,
        o.best.all_met,
        o.best.met,
        o.baseline.all_met,
        o.baseline.met
    );
    // Better on the measure that matters: goodput of the incast of long flows.
    let g = |e: &tune::Evaluated| e.results[0].goodput.unwrap();
    assert!(
        g(&o.best) > g(&o.baseline) + 0.1,
        "goodput {} → {}",
        g(&o.baseline),
        g(&o.best)
    );
}

#[test]
fn bad_patterns_and_targets_get_clear_errors() {
    let topo = shipped_topology();
    let cases = [
        (
            "[[family]]\nname = \"x\"\npattern = \"fanout\"\nhosts = [4]\nsize = [\"long\"]\n",
            "family 1 (x): pattern: unknown \"fanout\"",
        ),
        (
            "[[family]]\nname = \"x\"\npattern = \"incast\"\ndegree = [8]\nsize = [\"long\"]\n",
            "family 1 (x): degree: 8 senders and a target need 9 hosts; the topology has 8",
        ),
        (
            "[[family]]\nname = \"x\"\npattern = \"incast\"\ndegree = [2]\ndist = [\"web\"]\nload = [0.5]\n",
            "family 1 (x): dist: no [sizes] entry \"web\"",
        ),
        (
            "[[family]]\nname = \"x\"\npattern = \"all-to-all\"\nhosts = [4]\nsize = [\"big\"]\n",
            "family 1 (x): size: \"big\"",
        ),
        (
            "[[family]]\nname = \"x\"\npattern = \"all-to-all\"\nhosts = [4]\nsize = [\"long\"]\nspeed = 1\n",
            "unknown field `speed`",
        ),
        (
            "[[family]]\nname = \"x\"\npattern = \"all-to-all\"\nhosts = [4]\n",
            "family 1 (x): give `size`",
        ),
        ("duration = \"1ms\"\n", "no [[family]]"),
    ];
    for (text, want) in cases {
        let e = format!("{:#}", patterns::from_str(text, &topo).expect_err(text));
        assert!(e.contains(want), "{text}\nwanted: {want}\ngot: {e}");
    }
    let mut t = Targets::default();
    for (kv, want) in [
        (
            "goodput=1.5",
            "--target goodput: 1.5 is not a fraction above 0 and at most 1",
        ),
        (
            "latency=80us",
            "--target \"latency\": unknown target (known: goodput, pfc_per_s",
        ),
        ("latency_p99=soon", "--target latency_p99:"),
        (
            "latency_p90=100us",
            "latency_p90 (100000 ns) is above latency_p99 (80000 ns)",
        ),
        ("windows=0", "--target windows: 0 is not between 1 and 100000"),
        ("goodput", "expected KEY=VALUE"),
    ] {
        let e = t.set(kv).expect_err(kv).to_string();
        assert!(e.contains(want), "{kv}\nwanted: {want}\ngot: {e}");
    }
    t.set("goodput=0.9").unwrap();
    assert_eq!(t.goodput, 0.9);
}

/// The command refuses to write over what it reads, and says which input it would have hit;
/// an unknown target stops it before anything runs.
#[test]
fn the_command_refuses_an_output_that_is_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--fragment", "examples/tune/tor.toml"],
            "the fragment examples/tune/tor.toml is the config of switch \"tor\"",
        ),
        (
            &["--fragment", "./examples/../examples/tune/topology.toml"],
            "is the topology",
        ),
        (&["--target", "pfc=5"], "--target \"pfc\": unknown target"),
        (&["--budget", "10"], "--budget 10: too small"),
    ];
    for (extra, want) in cases {
        let mut args = vec![
            "tune",
            "--topology",
            "examples/tune/topology.toml",
            "--output-dir",
            out,
            "-q",
        ];
        args.extend_from_slice(extra);
        let o = common::rocesw_in(&common::repo_root(), &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}\nwanted: {want}\ngot: {err}");
    }
    let tor = std::fs::read_to_string(examples().join("tor.toml")).unwrap();
    assert!(tor.contains("kmin = \"100KB\""), "the input is untouched");
    // The patterns file given as the output directory's JSON target.
    let pats = dir.path().join("tune.json");
    std::fs::write(&pats, common::SMALL_TUNE_PATTERNS).unwrap();
    let o = common::rocesw_in(
        &common::repo_root(),
        &[
            "tune",
            "--topology",
            "examples/tune/topology.toml",
            "--patterns",
            pats.to_str().unwrap(),
            "--output-dir",
            out,
            "-q",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the JSON report") && err.contains("is the patterns file"),
        "{err}"
    );
}

/// `rocesw tune --help` explains every option and shows the defaults.
#[test]
fn the_help_explains_the_targets_and_options() {
    let o = common::rocesw_in(&common::repo_root(), &["tune", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    for want in [
        "--topology",
        "--patterns",
        "--output-dir",
        "--fragment",
        "--target",
        "--seed",
        "--threads",
        "--budget",
        "--quick",
        "--duration",
        "--default-config",
        "--quiet",
        "[default: 1]",
        "95% of line rate",
        "5 pause frames per second",
        "90% under 40 µs",
        "rocectl patch",
        "the least aggressive wins",
    ] {
        assert!(help.contains(want), "{want} missing from:\n{help}");
    }
}

/// The three targets measure what their definitions say, on runs whose answer is known: one
/// long flow alone fills its receiver's link with no PFC and no queue; an incast with PFC
/// alone keeps the target's link full but pauses all the time and queues; two 64 KiB messages
/// fill no link long enough to measure (goodput n/a).
#[test]
fn the_targets_measure_what_they_define() {
    let base = shipped_topology();
    let t = Targets::default();
    let run = |traffic: &str, dcqcn: bool| {
        let spec: toml::Table = traffic.parse().unwrap();
        let entries: Vec<topology::TrafficSpec> = spec["traffic"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.clone().try_into().unwrap())
            .collect();
        let mut topo = base.with_traffic(&entries, 1).unwrap();
        topo.duration_ns = 300_000;
        let o = dataplane::fabric::run(
            &topo,
            &dataplane::fabric::FabricOptions {
                seed: 1,
                dcqcn: Some(dcqcn),
                ..Default::default()
            },
        )
        .unwrap();
        tune::targets::measure(&topo, &o, topo.duration_ns, &t)
    };
    let alone = run(
        "[[traffic]]\npattern = \"flows\"\nfrom = [\"h0\"]\nto = [\"h7\"]\nsize = \"long\"\n",
        true,
    );
    let g = alone.goodput.unwrap();
    assert!(g > 0.97 && g <= 1.0, "one flow alone: {g}");
    assert_eq!((alone.pfc_frames, alone.pfc_ok_windows), (0, 1.0));
    assert!(alone.latency_p99_ns < 5_000, "{}", alone.latency_p99_ns);
    assert!(alone.met.all());

    let incast = run(
        "[[traffic]]\npattern = \"incast\"\nfrom = [\"h0\", \"h1\", \"h2\", \"h3\"]\nto = [\"h7\"]\nsize = \"long\"\n",
        false,
    );
    assert!(
        incast.goodput.unwrap() > 0.97,
        "PFC keeps the link full: {:?}",
        incast.goodput
    );
    assert!(incast.pfc_frames > 10 && incast.pfc_ok_windows < 0.9, "{incast:?}");
    assert!(!incast.met.pfc && incast.met.goodput);
    assert!(
        incast.latency_p90_ns > 40_000 && !incast.met.latency,
        "{}",
        incast.latency_p90_ns
    );
    assert_eq!(incast.drops, 0);

    let short = run(
        "[[traffic]]\npattern = \"incast\"\nfrom = [\"h0\", \"h1\"]\nto = [\"h7\"]\nsize = \"64KiB\"\n",
        true,
    );
    assert_eq!(short.goodput, None);
    assert!(short.met.goodput, "n/a counts as met");
    assert_eq!((short.messages, short.completed), (2, 2));
}

/// The smallest budget the command accepts (the baseline and one setting on every pattern)
/// runs the setting nearest the configs, and stops there.
#[test]
fn the_smallest_budget_runs_one_setting_on_every_pattern() {
    let topo = shipped_topology();
    let set = small_set(&topo);
    let n = set.patterns.len();
    static PLANNED: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());
    fn record(done: usize, planned: usize) {
        PLANNED.lock().unwrap().push((done, planned));
    }
    let o = tune::run(
        &topo,
        &set,
        &TuneOptions {
            budget: 2 * n,
            progress: Some(record),
            ..small_opts(2)
        },
    )
    .unwrap();
    assert_eq!(o.simulations, 2 * n);
    // Issue 23 item 11: the progress total is the whole run's from the first simulation on
    // (it was the stage's: n during the baseline, then 2n).
    let calls = PLANNED.lock().unwrap().clone();
    assert_eq!(calls.len(), 2 * n);
    assert!(calls.iter().all(|&(_, planned)| planned == 2 * n), "{calls:?}");
    assert_eq!(o.finalists.len(), 1);
    // configs/default.toml's 100KB / 400KB / 0.2 / 1/8, on the ladders.
    assert_eq!(o.best.label, "Kmin 128KiB Kmax 512KiB Pmax 0.2 alpha 1/8");
    assert!(o.screened.is_empty());
    // Issue 23 item 11: alone, the best has no tie; with another setting meeting exactly as
    // many patterns and targets that differs only in alpha, the report says alpha made no
    // difference, and the less aggressive of the two wins though the other misses by less.
    let mut o = o;
    assert_eq!(tune::report::ties(&o), None);
    let mut twin = o.best.clone();
    let here = o.best.knobs.expect("the best is a setting");
    twin.knobs = Some(tune::space::Setting { alpha: 8, ..here });
    twin.label = twin.knobs.unwrap().label();
    assert_eq!(twin.label, "Kmin 128KiB Kmax 512KiB Pmax 0.2 alpha 4");
    twin.setting.as_mut().unwrap().alpha = "4".into();
    twin.shortfall = (o.best.shortfall - 1.0).max(0.0);
    o.best.shortfall = twin.shortfall + 1.0;
    assert!(o.best.ties_with(&twin));
    assert!(
        o.best.better_than(&twin) && !twin.better_than(&o.best),
        "alpha 1/8 is less aggressive than alpha 4, whatever the shortfall"
    );
    o.finalists.push(twin);
    let line = tune::report::ties(&o).unwrap();
    assert!(
        line.starts_with("2 settings tie (")
            && line.contains("they differ in alpha (1/8, 4): alpha made no difference in this range")
            && line.contains("chosen: the least aggressive"),
        "{line}"
    );
    assert!(tune::report::table(&o).contains(&line));
    // The trade-off panel draws the two as one point labelled ×2, on axes with ticks.
    let svg = tune::report::svg(&o);
    assert_eq!(svg.matches(">×2</text>").count(), 1, "{svg}");
    assert!(
        svg.matches(r#"class="tick""#).count() >= 2 * (n + 1),
        "a tick per pattern count on each axis: {svg}"
    );
    assert!(svg.contains(&format!(r#"font-size="9">{n}</text>"#)), "{svg}");
}

/// Issue 23 item 11: of settings that meet the targets on as many patterns, target by target,
/// the least aggressive wins (the lowest Pmax, then the largest Kmin and Kmax, then the
/// smallest alpha), however close to the targets the others' misses are.
#[test]
fn a_tie_goes_to_the_least_aggressive_setting() {
    use tune::space::Setting;
    let s = |kmin, kmax, pmax, alpha| Setting {
        kmin,
        kmax,
        pmax,
        alpha,
        dcqcn: None,
    };
    let base = s(3, 5, 4, 4);
    let gentler = [
        ("lower Pmax", s(1, 1, 3, 8)),
        ("larger Kmin", s(4, 5, 4, 8)),
        ("larger Kmax", s(3, 6, 4, 8)),
        ("smaller alpha", s(3, 5, 4, 3)),
    ];
    for (why, g) in gentler {
        assert!(g.aggressiveness() < base.aggressiveness(), "{why}");
    }
    // Twenty-five settings, alpha 1/4 ... 4 on five Kmins, all meeting the same counts (the
    // issue's tie): the search's order picks alpha 1/4 at the largest Kmin.
    let topo = shipped_topology();
    let set = small_set(&topo);
    let o = tune::run(
        &topo,
        &set,
        &TuneOptions {
            budget: 2 * set.patterns.len(),
            ..small_opts(1)
        },
    )
    .unwrap();
    let template = o.best.clone();
    let mut tied: Vec<tune::Evaluated> = Vec::new();
    for (k, kmin) in (1..6).enumerate() {
        for (j, alpha) in (4..9).enumerate() {
            let mut e = template.clone();
            e.knobs = Some(s(kmin, 7, 4, alpha));
            e.label = e.knobs.unwrap().label();
            // The misses shrink as alpha grows: the old tie-break (the smallest shortfall)
            // took alpha 4.
            e.shortfall = 100.0 - (5 * k + j) as f64;
            tied.push(e);
        }
    }
    let best = tied
        .iter()
        .fold(None::<&tune::Evaluated>, |b, e| match b {
            Some(b) if !e.better_than(b) => Some(b),
            _ => Some(e),
        })
        .unwrap();
    assert_eq!(best.label, "Kmin 128KiB Kmax 512KiB Pmax 0.2 alpha 1/4");
    // Against the configs as given, the shortfall still decides a tie.
    let mut baseline = o.baseline.clone();
    baseline.all_met = best.all_met;
    baseline.met = best.met;
    baseline.shortfall = best.shortfall + 1.0;
    assert!(best.better_than(&baseline) && !baseline.better_than(best));
}

/// A real search: the setting it returns is the best of every setting it ran on every pattern
/// by the same order (so of a tie, the least aggressive), and the report says so when it tied.
#[test]
fn the_search_returns_the_least_aggressive_of_a_tie() {
    let topo = shipped_topology();
    let o = tune::run(&topo, &small_set(&topo), &small_opts(2)).unwrap();
    for f in &o.finalists {
        assert!(!f.better_than(&o.best), "{} beats the chosen {}", f.label, o.best.label);
    }
    let tied: Vec<&tune::Evaluated> = o
        .finalists
        .iter()
        .filter(|f| f.label != o.best.label && f.ties_with(&o.best))
        .collect();
    // Pinned: this search ties eleven settings at 2 of 4 patterns (goodput 2, PFC 4, latency
    // 4); the least aggressive is Pmax 0.05, where the climb went down the Pmax ladder (before
    // the fix the smallest shortfall chose Kmin 8KiB Kmax 32KiB Pmax 0.1 alpha 1/8).
    assert_eq!(o.best.label, "Kmin 8KiB Kmax 32KiB Pmax 0.05 alpha 1/8");
    assert_eq!((o.best.all_met, o.best.met), (2, [2, 4, 4]));
    assert_eq!(
        tied.len(),
        10,
        "{:?}",
        tied.iter().map(|f| &f.label).collect::<Vec<_>>()
    );
    for f in &tied {
        assert!(o.best.knobs.unwrap().aggressiveness() < f.knobs.unwrap().aggressiveness());
    }
    let line = tune::report::ties(&o).unwrap();
    assert!(
        line.starts_with("11 settings tie (2 of 4 patterns meet all three targets; goodput 2, PFC 4, latency 4)"),
        "{line}"
    );
    eprintln!("{line}");
}

/// Issue 21 item 9: DIR/tuned.toml hard-linked to the switch's config is that config (same
/// device and inode, though the paths differ): refused before anything runs, the config intact.
#[test]
fn a_hard_link_to_an_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for f in ["topology.toml", "tor.toml"] {
        std::fs::copy(examples().join(f), d.join(f)).unwrap();
    }
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::hard_link(d.join("tor.toml"), out.join("tuned.toml")).unwrap();
    let before = std::fs::read(d.join("tor.toml")).unwrap();
    // A budget too small to run: without the check it would stop there instead.
    let o = common::rocesw_in(
        &common::repo_root(),
        &[
            "tune",
            "--topology",
            d.join("topology.toml").to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
            "--budget",
            "10",
            "-q",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the fragment") && err.contains("tuned.toml") && err.contains("is the config of switch \"tor\""),
        "{err}"
    );
    assert_eq!(before, std::fs::read(d.join("tor.toml")).unwrap());
}

/// Issue 21 item 14: a patterns file is counted before it is expanded: a few long lists
/// multiply to more patterns than a tune can run (here 40,000; a 27 KB file made 2.7e9 and
/// expanded them all first), refused naming the family.
#[test]
fn a_patterns_file_is_counted_before_it_is_expanded() {
    let topo = shipped_topology();
    let degrees: Vec<String> = (0..200).map(|k| (1 + k % 7).to_string()).collect();
    let sizes: Vec<String> = (0..200).map(|k| format!("\"{}KiB\"", k + 1)).collect();
    let text = format!(
        "[[family]]\nname = \"ok\"\npattern = \"incast\"\ndegree = [2]\nsize = [\"4KiB\"]\n\
         [[family]]\nname = \"big\"\npattern = \"incast\"\ndegree = [{}]\nsize = [{}]\n",
        degrees.join(", "),
        sizes.join(", ")
    );
    let e = format!("{:#}", dataplane::tune::patterns::from_str(&text, &topo).unwrap_err());
    assert!(
        e.contains("family 2 (big) makes the file 40001 patterns") && e.contains("this one 40000"),
        "{e}"
    );
    assert!(e.contains("more than the 10000"), "{e}");
}

/// Issue 21 item 14: `--threads 100000` is clamped to the machine's cores, and says so.
#[test]
fn threads_are_clamped_to_the_cores() {
    let o = common::rocesw_in(
        &common::repo_root(),
        &[
            "tune",
            "--topology",
            "examples/tune/topology.toml",
            "--output-dir",
            "/nonexistent/never-written",
            "--threads",
            "100000",
            "--budget",
            "10",
            "-q",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        err.contains(&format!("--threads 100000: using {cores}, the machine's cores")),
        "{err}"
    );
}

/// Issue 23 item 2: `rocesw tune` run from a directory without configs/ loads a topology whose
/// switch has no `config` from the built-in default profile (it failed with
/// "configs/default.toml: cannot read"): it gets as far as checking the budget.
#[test]
fn a_switch_without_config_gets_the_built_in_profile_from_any_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = std::fs::read_to_string(examples().join("topology.toml")).unwrap();
    let text = text.replace("config = \"tor.toml\"\n", "");
    assert!(!text.contains("config ="));
    // The built-in profile has four ports: four hosts on them, and an incast among them.
    let cut = text.find("[[host]]").unwrap();
    let mut text = text[..cut].to_string();
    for h in 0..4 {
        text += &format!("[[host]]\nname = \"h{h}\"\n[[link]]\na = \"h{h}\"\nb = \"tor:{h}\"\n");
    }
    text += "[[traffic]]\npattern = \"incast\"\nto = [\"h3\"]\nsize = \"4KiB\"\n";
    std::fs::write(d.join("topology.toml"), text).unwrap();
    let patterns = "duration = \"300us\"\n[[family]]\nname = \"incast\"\npattern = \"incast\"\n\
                    degree = [3]\nsize = [\"long\"]\n";
    std::fs::write(d.join("patterns.toml"), patterns).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["tune", "--topology", "topology.toml", "--patterns", "patterns.toml"])
        .args(["--output-dir", "out", "-q", "--budget", "1"])
        .current_dir(d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--budget 1: too small"), "{err}");
}

/// `rocesw tune --sonic`: a fabric whose switch runs a SONiC config_db.json is tuned (the PGs'
/// limits written as `dynamic_th`, as the file has them: `alpha` beside it would be refused),
/// and DIR/tuned.patch.json is an RFC 6902 patch of that file which, applied, is the switch
/// that DIR/tuned.toml makes of it: the same ECN thresholds and PG limits.
#[test]
fn tune_sonic_writes_the_winner_back_as_a_json_patch() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sonic/spectrum1-t1.json");
    let mut topo = format!(
        "duration = \"300us\"\n[nic]\nmtu = 1024\ndscp = 3\npfc = true\ndcqcn = true\n\
         [[switch]]\nname = \"tor\"\nconfig = {:?}\n",
        json_path.display()
    );
    for (h, port) in [0, 4, 8, 12].iter().enumerate() {
        topo += &format!("[[host]]\nname = \"h{h}\"\n[[link]]\na = \"h{h}\"\nb = \"tor:{port}\"\n");
    }
    topo += "[[traffic]]\npattern = \"incast\"\nfrom = [\"h1\", \"h2\", \"h3\"]\nto = [\"h0\"]\nsize = \"64KiB\"\n";
    let topo_path = dir.path().join("topo.toml");
    std::fs::write(&topo_path, topo).unwrap();
    let pats = dir.path().join("patterns.toml");
    std::fs::write(
        &pats,
        "duration = \"300us\"\n[[family]]\nname = \"incast\"\npattern = \"incast\"\ndegree = [3]\nsize = [\"long\"]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = common::rocesw_in(
        &common::repo_root(),
        &[
            "tune",
            "--topology",
            topo_path.to_str().unwrap(),
            "--patterns",
            pats.to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
            "--budget",
            "4",
            "-q",
            "--sonic",
            json_path.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let fragment = std::fs::read_to_string(out.join("tuned.toml")).unwrap();
    assert!(
        fragment.contains("dynamic_th = ") && !fragment.lines().any(|l| l.starts_with("alpha")),
        "{fragment}"
    );
    let patch: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tuned.patch.json")).unwrap()).unwrap();
    let ops = patch.as_array().expect("a JSON Patch is an array of operations");
    assert!(!ops.is_empty());
    for op in ops {
        let path = op["path"].as_str().unwrap();
        assert!(
            op["op"] == "replace"
                && (path.starts_with("/WRED_PROFILE/AZURE_LOSSLESS/")
                    || path.starts_with("/BUFFER_PROFILE/pg_lossless_")),
            "{op}"
        );
        assert!(
            err.contains(&path[1..].replacen('/', "|", 2)),
            "each change is on stderr: {path}\n{err}"
        );
    }
    let original_text = std::fs::read_to_string(&json_path).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&original_text).unwrap();
    json_patch::patch(&mut doc, &serde_json::from_value::<json_patch::Patch>(patch).unwrap()).unwrap();
    let patched = controlplane::load_str(&doc.to_string())
        .expect("the patched file imports")
        .config;
    let running = controlplane::change::Running::load(original_text).unwrap();
    let tuned = running
        .prepare(controlplane::change::Edit::Fragment(&fragment))
        .expect("tuned.toml applies to the switch")
        .config;
    assert!(tuned.queues != running.config.queues || tuned.pgs != running.config.pgs);
    assert_eq!(patched.queues, tuned.queues);
    assert_eq!(patched.pgs, tuned.pgs);
}

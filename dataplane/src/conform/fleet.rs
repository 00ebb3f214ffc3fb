//! `rocesw conform sonic` over a fleet: many config_db.json files (directories or a list),
//! shared among shards (`--shard I/N`: config k goes to shard k modulo N) and merged
//! (`rocesw conform merge`) into one fleet report: each switch's pass or fail and its failed
//! checks (what was expected, what was seen), as fleet.json and fleet.txt, and with `--junit`
//! as JUnit XML (a testcase per test and config, a testsuite per config).
//!
//! The merged files are byte for byte those of the unsharded run of the same list: they hold
//! results only. Each part's host and wall time (and each config's) go to DIR/shards.json and
//! stdout. A merge names the shards whose part is missing; rerunning those completes the set.

use super::report::{Outcome, SuiteReport};
use crate::parts::PartFile;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What a part file's `format` says.
pub const PART_FORMAT: &str = "rocesw conform part 1";

/// The configs `--config` names, in order: a file as itself, a directory as its `*.json`
/// files sorted by name. A config named twice is refused (it would be tested twice).
pub fn expand(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::new();
    for a in args {
        if a.is_dir() {
            let mut here: Vec<PathBuf> = std::fs::read_dir(a)
                .with_context(|| format!("--config {}: cannot list", a.display()))?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
                .collect();
            here.sort();
            if here.is_empty() {
                bail!("--config {}: a directory without *.json files", a.display());
            }
            out.extend(here);
        } else {
            out.push(a.clone());
        }
    }
    let mut seen = BTreeSet::new();
    for p in &out {
        if !seen.insert(p.clone()) {
            bail!("--config: {} is named twice", p.display());
        }
    }
    Ok(out)
}

/// A failed check: the step it followed, what was expected, what was seen.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Deviation {
    /// The step's action.
    pub step: String,
    /// What the procedure expected.
    pub expected: String,
    /// What the counters said.
    pub seen: String,
}

/// One test of one switch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TestLine {
    /// The test and its parameter set (`PFCtest[xoff_1]`).
    pub name: String,
    /// `passed`, `failed`, `skipped` or `error`.
    pub outcome: String,
    /// Why it was skipped or could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its failed checks, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_checks: Vec<Deviation>,
}

/// One switch's result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SwitchResult {
    /// The config_db.json, as named on the command line (or found in a named directory).
    pub config: String,
    /// Whether every test passed or was skipped.
    pub passed: bool,
    /// The platform whose rules applied (none when the config could not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// Why the config could not run at all (not a config_db.json, not importable...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Tests passed, failed, skipped, in error.
    pub counts: [usize; 4],
    /// Every test, in the order it ran.
    pub tests: Vec<TestLine>,
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "passed",
        Outcome::Failed => "failed",
        Outcome::Skipped => "skipped",
        Outcome::Error => "error",
    }
}

impl SwitchResult {
    /// A suite's result, reduced to what the fleet report holds.
    pub fn of(config: &str, r: &SuiteReport) -> SwitchResult {
        let tests: Vec<TestLine> = r
            .tests
            .iter()
            .map(|t| TestLine {
                name: t.name.clone(),
                outcome: outcome_name(t.outcome).into(),
                reason: t.reason.clone(),
                failed_checks: t
                    .steps
                    .iter()
                    .flat_map(|s| {
                        s.checks.iter().filter(|c| !c.ok).map(|c| Deviation {
                            step: s.action.clone(),
                            expected: c.expected.clone(),
                            seen: c.seen.clone(),
                        })
                    })
                    .collect(),
            })
            .collect();
        let count = |x: Outcome| r.tests.iter().filter(|t| t.outcome == x).count();
        SwitchResult {
            config: config.into(),
            passed: r.passed(),
            platform: Some(r.platform.clone()),
            error: None,
            counts: [
                count(Outcome::Passed),
                count(Outcome::Failed),
                count(Outcome::Skipped),
                count(Outcome::Error),
            ],
            tests,
        }
    }

    /// A config that could not run.
    pub fn failed_to_run(config: &str, why: &str) -> SwitchResult {
        SwitchResult {
            config: config.into(),
            passed: false,
            platform: None,
            error: Some(why.into()),
            counts: [0; 4],
            tests: Vec::new(),
        }
    }
}

/// The fleet report: every switch in the list's order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FleetReport {
    /// Switches in the fleet.
    pub switches: usize,
    /// Of them, those whose every test passed or was skipped.
    pub passed: usize,
    /// The others (a failed test, a test in error, or a config that could not run).
    pub failed: usize,
    /// Each switch.
    pub results: Vec<SwitchResult>,
}

impl FleetReport {
    /// The report of these results.
    pub fn new(results: Vec<SwitchResult>) -> FleetReport {
        let passed = results.iter().filter(|r| r.passed).count();
        FleetReport {
            switches: results.len(),
            passed,
            failed: results.len() - passed,
            results,
        }
    }

    /// As text: a line per switch, then its failed checks (the first three of each test that
    /// failed), then the totals.
    pub fn text(&self) -> String {
        let mut o = String::new();
        for r in &self.results {
            let [p, f, s, e] = r.counts;
            match &r.error {
                Some(why) => {
                    let _ = writeln!(o, "ERROR {}: {why}", r.config);
                }
                None => {
                    let _ = writeln!(
                        o,
                        "{} {} (platform {}): {p} passed, {f} failed, {s} skipped, {e} errors",
                        if r.passed { "PASS " } else { "FAIL " },
                        r.config,
                        r.platform.as_deref().unwrap_or("?")
                    );
                }
            }
            for t in r.tests.iter().filter(|t| t.outcome == "failed" || t.outcome == "error") {
                let _ = writeln!(o, "      {} {}", t.outcome, t.name);
                if let Some(why) = &t.reason {
                    let _ = writeln!(o, "         {why}");
                }
                for d in t.failed_checks.iter().take(3) {
                    let _ = writeln!(o, "         after {}: expected {}; seen {}", d.step, d.expected, d.seen);
                }
                if t.failed_checks.len() > 3 {
                    let _ = writeln!(
                        o,
                        "         … {} more failed checks (fleet.json)",
                        t.failed_checks.len() - 3
                    );
                }
            }
        }
        let _ = writeln!(
            o,
            "fleet: {} switches, {} passed, {} failed",
            self.switches, self.passed, self.failed
        );
        o
    }

    /// As JUnit XML: a testsuite per config, a testcase per test (classname the config); a
    /// config that could not run is one testcase in error. No times, so that a merged fleet's
    /// file is the unsharded one's.
    pub fn junit(&self) -> String {
        let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let total = |k: usize| self.results.iter().map(|r| r.counts[k]).sum::<usize>();
        let run_errors = self.results.iter().filter(|r| r.error.is_some()).count();
        let tests: usize = self.results.iter().map(|r| r.tests.len().max(1)).sum();
        let _ = writeln!(
            o,
            "<testsuites name=\"rocesw conform sonic\" tests=\"{tests}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
            total(1),
            total(3) + run_errors,
            total(2)
        );
        for r in &self.results {
            let name = xml_attr(&r.config);
            let [_, f, s, e] = r.counts;
            let _ = writeln!(
                o,
                "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{f}\" errors=\"{}\" skipped=\"{s}\">",
                r.tests.len().max(1),
                e + usize::from(r.error.is_some())
            );
            if let Some(why) = &r.error {
                let _ = writeln!(
                    o,
                    "    <testcase classname=\"{name}\" name=\"config\">\n      <error message=\"{}\">{}</error>\n    </testcase>",
                    xml_attr(why),
                    xml_text(why)
                );
            }
            for t in &r.tests {
                let case = format!("    <testcase classname=\"{name}\" name=\"{}\"", xml_attr(&t.name));
                let detail: String = t
                    .failed_checks
                    .iter()
                    .map(|d| format!("after {}: expected {}; seen {}\n", d.step, d.expected, d.seen))
                    .collect();
                let reason = t.reason.as_deref().unwrap_or("");
                match t.outcome.as_str() {
                    "failed" => {
                        let first = t.failed_checks.first().map_or(String::from("failed"), |d| {
                            format!("expected {}; seen {}", d.expected, d.seen)
                        });
                        let _ = writeln!(
                            o,
                            "{case}>\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                            xml_attr(&first),
                            xml_text(&detail)
                        );
                    }
                    "error" => {
                        let _ = writeln!(
                            o,
                            "{case}>\n      <error message=\"{}\">{}</error>\n    </testcase>",
                            xml_attr(reason),
                            xml_text(&detail)
                        );
                    }
                    "skipped" => {
                        let _ = writeln!(
                            o,
                            "{case}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                            xml_attr(reason)
                        );
                    }
                    _ => {
                        let _ = writeln!(o, "{case}/>");
                    }
                }
            }
            o.push_str("  </testsuite>\n");
        }
        o.push_str("</testsuites>\n");
        o
    }
}

/// Text as XML character data: `&`, `<`, `>` escaped, and the characters XML 1.0 cannot hold
/// (controls other than tab, newline, carriage return) as U+FFFD.
pub fn xml_text(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '\t' | '\n' | '\r' => o.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}

/// Text as an XML attribute value in double quotes: [`xml_text`] and `"`, `'`, and the
/// whitespace an attribute would normalise (tab, newline, carriage return) as references.
pub fn xml_attr(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in xml_text(s).chars() {
        match c {
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\t' => o.push_str("&#9;"),
            '\n' => o.push_str("&#10;"),
            '\r' => o.push_str("&#13;"),
            c => o.push(c),
        }
    }
    o
}

/// One config of a part: its result and how long it took.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartEntry {
    /// Its index in the fleet's list.
    pub index: usize,
    /// Its result.
    pub result: SwitchResult,
    /// Its wall time, s.
    pub seconds: f64,
}

/// A part file: one shard's configs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part {
    /// [`PART_FORMAT`].
    pub format: String,
    /// SHA-256 of the options and the config list ([`options_digest`]).
    pub options_sha256: String,
    /// The whole fleet's configs, in order.
    pub configs: Vec<String>,
    /// This shard.
    pub shard: usize,
    /// Shards in all.
    pub shards: usize,
    /// The host it ran on.
    pub host: String,
    /// Its wall time, s.
    pub seconds: f64,
    /// Its configs' results, in list order.
    pub entries: Vec<PartEntry>,
}

impl Part {
    /// The file name a shard writes it under.
    pub fn file_name(&self) -> String {
        format!("{}s{}of{}.json", Self::PREFIX, self.shard, self.shards)
    }
}

impl PartFile for Part {
    const FORMAT: &'static str = PART_FORMAT;
    const PREFIX: &'static str = "conform.part.";
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

/// Reads part files (or directories of them).
pub fn read_parts(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Part)>> {
    crate::parts::read_parts(paths)
}

/// SHA-256 (hex) of what decides the results besides each config: the options and the list.
pub fn options_digest(opts: &super::Options, configs: &[String]) -> String {
    let mut h = Sha256::new();
    let field = |h: &mut Sha256, s: &str| {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    };
    field(&mut h, opts.platform.as_deref().unwrap_or("\0none"));
    for f in [&opts.pg_lookup, &opts.params] {
        match f {
            Some((text, _)) => field(&mut h, text),
            None => field(&mut h, "\0none"),
        }
    }
    field(&mut h, &opts.only.join(","));
    field(&mut h, opts.src.as_deref().unwrap_or("\0none"));
    field(&mut h, opts.dst.as_deref().unwrap_or("\0none"));
    for c in configs {
        field(&mut h, c);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs the suite on one config; a config that cannot run is a failed switch, not an error
/// of the fleet.
pub fn run_one(path: &Path, opts: &super::Options) -> SwitchResult {
    let name = path.display().to_string();
    let json = match controlplane::files::read_text(path) {
        Ok(j) => j,
        Err(e) => return SwitchResult::failed_to_run(&name, &e),
    };
    match super::run(&json, &name, opts, &mut |_| {}) {
        Ok((report, _)) => SwitchResult::of(&name, &report),
        Err(e) => SwitchResult::failed_to_run(&name, &format!("{e:#}")),
    }
}

/// Where a fleet run writes: fleet.json, fleet.txt and shards.json in the directory.
pub fn write_report(dir: &Path, report: &FleetReport, junit: Option<&Path>) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = dir.join("fleet.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)? + "\n")
        .with_context(|| format!("cannot write {}", json.display()))?;
    let txt = dir.join("fleet.txt");
    std::fs::write(&txt, report.text()).with_context(|| format!("cannot write {}", txt.display()))?;
    if let Some(j) = junit {
        std::fs::write(j, report.junit()).with_context(|| format!("cannot write {}", j.display()))?;
    }
    Ok(())
}

/// The fleet command: every config (or this shard's share), then the report (or the part).
pub fn run(
    configs: &[PathBuf],
    opts: &super::Options,
    shard: Option<(usize, usize)>,
    output_dir: Option<&Path>,
    junit: Option<&Path>,
    json: bool,
) -> Result<bool> {
    let started = std::time::Instant::now();
    let names: Vec<String> = configs.iter().map(|p| p.display().to_string()).collect();
    let (index, count) = shard.unwrap_or((0, 1));
    let mine: Vec<usize> = (0..configs.len()).filter(|k| k % count == index).collect();
    let me = match shard {
        Some((i, n)) => format!("shard {i}/{n}: "),
        None => String::new(),
    };
    eprintln!(
        "rocesw conform: {me}{} of the fleet's {} configs",
        mine.len(),
        configs.len()
    );
    let mut entries = Vec::with_capacity(mine.len());
    for (done, &k) in mine.iter().enumerate() {
        let t = std::time::Instant::now();
        let result = run_one(&configs[k], opts);
        let seconds = t.elapsed().as_secs_f64();
        eprintln!(
            "rocesw conform: {me}{} of {}: {} {} ({seconds:.1} s)",
            done + 1,
            mine.len(),
            if result.passed { "PASS" } else { "FAIL" },
            names[k]
        );
        entries.push(PartEntry {
            index: k,
            result,
            seconds,
        });
    }
    if let Some((index, count)) = shard {
        let dir = output_dir.ok_or_else(|| anyhow!("--shard needs --output-dir (where the part file goes)"))?;
        let part = Part {
            format: PART_FORMAT.into(),
            options_sha256: options_digest(opts, &names),
            configs: names,
            shard: index,
            shards: count,
            host: crate::parts::hostname(),
            seconds: started.elapsed().as_secs_f64(),
            entries,
        };
        let path = dir.join(part.file_name());
        crate::parts::write_atomic(&path, &(serde_json::to_string(&part)? + "\n"))?;
        eprintln!(
            "rocesw conform: {me}wrote {} ({} configs in {:.1} s on {}); `rocesw conform merge {} --output-dir OUT` when every shard has",
            path.display(),
            part.entries.len(),
            part.seconds,
            part.host,
            dir.display()
        );
        // A shard succeeds when it wrote its part; the merge says pass or fail.
        return Ok(true);
    }
    let report = FleetReport::new(entries.into_iter().map(|e| e.result).collect());
    emit(&report, output_dir, junit, json)?;
    Ok(report.failed == 0)
}

fn emit(report: &FleetReport, output_dir: Option<&Path>, junit: Option<&Path>, json: bool) -> Result<()> {
    match output_dir {
        Some(d) => write_report(d, report, junit)?,
        None => {
            if let Some(j) = junit {
                std::fs::write(j, report.junit()).with_context(|| format!("cannot write {}", j.display()))?;
            }
        }
    }
    let text = if json {
        serde_json::to_string_pretty(report)? + "\n"
    } else {
        report.text()
    };
    crate::report::print_stdout(&text)
}

/// `rocesw conform merge`'s options.
#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// Part files of `rocesw conform sonic --shard I/N`, or directories holding them (their
    /// conform.part.*.json).
    #[arg(required = true, value_name = "PARTS")]
    pub parts: Vec<PathBuf>,
    /// Directory for fleet.json, fleet.txt (the same bytes as the unsharded run's) and
    /// shards.json (each shard's host and wall time); created if missing.
    #[arg(long, value_name = "DIR")]
    pub output_dir: PathBuf,
    /// Also write the fleet as JUnit XML (a testsuite per config, a testcase per test).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// The fleet report as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The fleet report of a complete set of parts; an incomplete set is an error naming the
/// shards whose part is missing.
pub fn merge_parts(parts: &[(PathBuf, Part)]) -> Result<FleetReport> {
    let Some((f0, p0)) = parts.first() else {
        bail!("no part files (conform.part.*.json): run the shards first (rocesw conform sonic --config … --shard I/N --output-dir DIR)");
    };
    let mut results: BTreeMap<usize, SwitchResult> = BTreeMap::new();
    let mut have = BTreeSet::new();
    for (f, p) in parts {
        if p.options_sha256 != p0.options_sha256 || p.configs != p0.configs || p.shards != p0.shards {
            bail!(
                "{} and {} are parts of different runs (other configs, options or shard count): merge one run's parts",
                f0.display(),
                f.display()
            );
        }
        let want: Vec<usize> = (0..p.configs.len()).filter(|k| k % p.shards == p.shard).collect();
        let got: Vec<usize> = p.entries.iter().map(|e| e.index).collect();
        if want != got {
            bail!(
                "{}: shard {} of {} holds configs {got:?}, not its share {want:?}",
                f.display(),
                p.shard,
                p.shards
            );
        }
        for e in &p.entries {
            if e.result.config != p.configs[e.index] {
                bail!(
                    "{}: entry {} is {}, not {}",
                    f.display(),
                    e.index,
                    e.result.config,
                    p.configs[e.index]
                );
            }
            results.insert(e.index, e.result.clone());
        }
        have.insert(p.shard);
    }
    let missing: Vec<String> = (0..p0.shards)
        .filter(|s| !have.contains(s))
        .map(|s| format!("{s}/{}", p0.shards))
        .collect();
    if !missing.is_empty() {
        bail!(
            "the parts are incomplete: shards {} have no part file (they failed or have not run): rerun `rocesw conform sonic … --shard I/N` for those, with the same configs, options and --output-dir, and merge again",
            missing.join(", ")
        );
    }
    Ok(FleetReport::new(results.into_values().collect()))
}

/// Each part's host and times, for DIR/shards.json.
#[derive(Debug, Serialize)]
pub struct ShardsReport {
    /// Shards in all.
    pub shards: usize,
    /// Distinct hosts.
    pub hosts: Vec<String>,
    /// Per shard: host, configs, seconds, and each config's seconds.
    pub parts: Vec<ShardLine>,
}

/// One shard in [`ShardsReport`].
#[derive(Debug, Serialize)]
pub struct ShardLine {
    /// The shard.
    pub shard: usize,
    /// Where it ran.
    pub host: String,
    /// Its wall time, s.
    pub seconds: f64,
    /// Its configs and their wall times, s.
    pub configs: Vec<(String, f64)>,
}

/// Runs `rocesw conform merge`: true when every switch passed.
pub fn merge(m: MergeArgs) -> Result<bool> {
    let parts = read_parts(&m.parts)?;
    let report = merge_parts(&parts)?;
    let mut lines: Vec<ShardLine> = parts
        .iter()
        .map(|(_, p)| ShardLine {
            shard: p.shard,
            host: p.host.clone(),
            seconds: p.seconds,
            configs: p.entries.iter().map(|e| (e.result.config.clone(), e.seconds)).collect(),
        })
        .collect();
    lines.sort_by_key(|l| l.shard);
    lines.dedup_by_key(|l| l.shard);
    let hosts: BTreeSet<String> = lines.iter().map(|l| l.host.clone()).collect();
    let shards = ShardsReport {
        shards: parts[0].1.shards,
        hosts: hosts.into_iter().collect(),
        parts: lines,
    };
    write_report(&m.output_dir, &report, m.junit.as_deref())?;
    let path = m.output_dir.join("shards.json");
    std::fs::write(&path, serde_json::to_string_pretty(&shards)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    let mut summary = format!(
        "merged {} shards on {} host{} ({}):",
        shards.shards,
        shards.hosts.len(),
        if shards.hosts.len() == 1 { "" } else { "s" },
        shards.hosts.join(", ")
    );
    for l in &shards.parts {
        let _ = write!(
            summary,
            " shard {} {:.1} s ({} configs);",
            l.shard,
            l.seconds,
            l.configs.len()
        );
    }
    eprintln!("rocesw conform: {}", summary.trim_end_matches(';'));
    emit(&report, None, None, m.json)?;
    Ok(report.failed == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_in_junit() {
        let r = FleetReport::new(vec![
            SwitchResult::failed_to_run("a<b>&\"c'.json", "bad \u{1} input"),
            SwitchResult {
                config: "ok.json".into(),
                passed: false,
                platform: Some("spectrum1".into()),
                error: None,
                counts: [1, 1, 0, 0],
                tests: vec![
                    TestLine {
                        name: "PFCtest[x<1]".into(),
                        outcome: "failed".into(),
                        reason: None,
                        failed_checks: vec![Deviation {
                            step: "send".into(),
                            expected: "> 3".into(),
                            seen: "1 → 1".into(),
                        }],
                    },
                    TestLine {
                        name: "WRRtest".into(),
                        outcome: "passed".into(),
                        reason: None,
                        failed_checks: vec![],
                    },
                ],
            },
        ]);
        let x = r.junit();
        assert!(
            x.contains(r#"<testsuite name="a&lt;b&gt;&amp;&quot;c&apos;.json""#),
            "{x}"
        );
        assert!(x.contains("bad \u{FFFD} input"), "{x}");
        assert!(x.contains(r#"name="PFCtest[x&lt;1]""#), "{x}");
        assert!(x.contains(r#"<failure message="expected &gt; 3; seen 1 → 1">"#), "{x}");
        assert!(x.contains(r#"<testcase classname="ok.json" name="WRRtest"/>"#), "{x}");
        assert!(x.contains(r#"tests="3" failures="1" errors="1" skipped="0""#), "{x}");
        assert_eq!(r.failed, 2);
    }
}

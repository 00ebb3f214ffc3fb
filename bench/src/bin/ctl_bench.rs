//! Live configuration under traffic, measured: how long a change takes to be in force, and
//! whether forwarding dips while changes keep coming.
//!
//! A real `worker::run` (the pipeline worker of `rocesw run`, busy polling) with its control
//! socket forwards an endless stream of lossless RoCEv2 frames from port 0 to port 1 as fast as
//! one core allows (in-memory ports: no kernel in the way, so a dip would be the switch's own).
//! Three phases:
//! 1. latency: `--changes` patches, back to back, through the control socket; each one's time
//!    from sending the request to its answer. The server answers only after the pipeline
//!    worker ran `Switch::reconfigure` between two bursts, and that worker is the only one
//!    holding config, so the answer means "in force everywhere".
//! 2. `rocectl set` as a user runs it (a process per change), if `--rocectl` is given.
//! 3. throughput: delivered frames sampled every `--sample-ms` over alternating phases of
//!    `--phase-ms`, quiet ones and ones with a change every `--change-every-ms`; per-interval
//!    rates with and without changes, and an SVG figure. Alternating (rather than one block of
//!    changes) keeps slow drifts of a shared machine from passing for an effect of the changes;
//!    the pipeline worker is pinned to core 1 and everything else to core 0 for the same reason.
//!
//!   cargo run --release -p rocesw-bench --bin ctl_bench -- --rocectl target/release/rocectl \
//!       --svg bench/figures/throughput_during_changes.svg

use anyhow::{Context, Result};
use clap::Parser;
use controlplane::protocol::{Client, Op};
use dataplane::io::{PortBackend, PortError, PortStats};
use dataplane::runtime::control_server::ControlServer;
use dataplane::runtime::worker::{self, ControlQueue, RunOptions};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(about = "Control-plane latency and throughput during live changes (see bench/README.md)")]
struct Args {
    /// Config of the switch (its ports are used in memory).
    #[arg(long, default_value = "configs/default.toml")]
    config: PathBuf,
    /// Frame length in bytes.
    #[arg(long, default_value_t = 64)]
    frame: usize,
    /// Patches sent back to back in the latency phase.
    #[arg(long, default_value_t = 1000)]
    changes: usize,
    /// The rocectl binary, for timing `rocectl set` as a process (skipped if absent).
    #[arg(long)]
    rocectl: Option<PathBuf>,
    /// `rocectl set` invocations to time.
    #[arg(long, default_value_t = 100)]
    rocectl_runs: usize,
    /// Length of the throughput measurement in seconds.
    #[arg(long, default_value_t = 8.0)]
    seconds: f64,
    /// Length of each phase; odd phases carry changes, even ones are quiet.
    #[arg(long, default_value_t = 1000)]
    phase_ms: u64,
    /// Throughput sampling interval.
    #[arg(long, default_value_t = 10)]
    sample_ms: u64,
    /// Time between two changes in the throughput phase.
    #[arg(long, default_value_t = 100)]
    change_every_ms: u64,
    /// Write the throughput figure here (SVG).
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Write every figure as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Port 0: an endless source of one frame (after one announce from host 1, so the FDB knows
/// where host 1 is). No lock, no allocation: the switch's own cost is what is measured.
struct Source {
    frame: Vec<u8>,
    announce: Option<Vec<u8>>,
}

/// Port 1: counts what the switch transmits. Ports 2 and 3: silent.
struct Sink {
    name: String,
    count: Option<Arc<AtomicU64>>,
    announce: Option<Vec<u8>>,
    source: Option<Source>,
}

impl PortBackend for Sink {
    fn recv_burst(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        if let Some(a) = self.announce.take() {
            f(&a);
            return Ok(1);
        }
        let Some(src) = self.source.as_mut() else { return Ok(0) };
        if let Some(a) = src.announce.take() {
            f(&a);
            return Ok(1);
        }
        for _ in 0..max {
            f(&src.frame);
        }
        Ok(max)
    }

    fn send(&mut self, _frame: &[u8]) -> Result<bool, PortError> {
        if let Some(c) = &self.count {
            c.fetch_add(1, Ordering::Relaxed);
        }
        Ok(true)
    }

    /// A sink never fills.
    fn tx_room(&mut self) -> usize {
        usize::MAX
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn link_up(&mut self) -> bool {
        true
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn stats(&mut self) -> PortStats {
        PortStats::default()
    }
}

/// Two patches that alternate: ECN thresholds and the lossless PG's alpha, the knobs people
/// tune live.
const PATCHES: [&str; 2] = [
    "[ecn.roce]\nkmin = \"50KB\"\nkmax = \"200KB\"\npmax = 0.1\n[pg.3]\nalpha = \"1/4\"\n",
    "[ecn.roce]\nkmin = \"100KB\"\nkmax = \"400KB\"\npmax = 0.2\n[pg.3]\nalpha = \"1/8\"\n",
];

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile(&s, 0.5)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let text =
        std::fs::read_to_string(&args.config).with_context(|| format!("cannot read {}", args.config.display()))?;
    // The pipeline worker on core 1, the rest (control server, sampler, client) on core 0.
    // Written into the text the control server holds as well: `[run]` cannot change live, so
    // edits of that text would be refused if the switch ran on other `[run]` values.
    let mut table: toml::Table = text
        .parse()
        .with_context(|| format!("{}: not TOML", args.config.display()))?;
    table.insert(
        "run".into(),
        toml::Value::Table("workers = 1\nidle = \"busy\"\ncores = [1]\n".parse()?),
    );
    let text = toml::to_string(&table)?;
    let cfg = controlplane::load_str(&text)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .config;
    worker::pin(0);
    let flow = dataplane::tools::gen::Flow {
        src: 0,
        dst: 1,
        dscp: 26,
        ecn: dataplane::wire::Ecn::Ect0,
        qp: 1,
        frame_len: args.frame,
        count: 1,
        start_ns: 0,
        rate_bps: 25_000_000_000,
    };
    let frame = flow.frames()?.remove(0).1;
    let delivered = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let queue: Arc<ControlQueue> = Arc::new(crossbeam_queue::ArrayQueue::new(16));
    let dir = tempfile_dir()?;
    let socket = dir.join("rocesw.sock");
    let server = ControlServer::spawn(&socket, text.clone(), queue.clone())?;
    let (d2, s2, q2) = (delivered.clone(), stop.clone(), queue.clone());
    let run = std::thread::spawn(move || {
        let opts = RunOptions {
            ready: None,
            seed: 1,
            control: Some(q2),
            open: Box::new(move |p| {
                let i = p.id;
                Ok(Box::new(Sink {
                    name: format!("mem{i}"),
                    count: (i == 1).then(|| d2.clone()),
                    announce: (i == 1).then(|| dataplane::tools::gen::announce(1, 0).expect("announce")),
                    source: (i == 0).then(|| Source {
                        frame: frame.clone(),
                        announce: Some(dataplane::tools::gen::announce(0, 1).expect("announce")),
                    }),
                }) as Box<dyn PortBackend + Send>)
            }),
        };
        worker::run(&cfg, opts, s2, None)
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut client = Client::connect(&socket)?;
    client.set_timeout(Some(Duration::from_secs(10)))?;

    // 1. Request → in force → answer, back to back, under full load.
    eprintln!(
        "latency: {} patches through the control socket under load…",
        args.changes
    );
    let mut rtt_us = Vec::with_capacity(args.changes);
    let before = delivered.load(Ordering::Relaxed);
    for i in 0..args.changes {
        let t = Instant::now();
        client.call(Op::Patch {
            toml: PATCHES[i % 2].into(),
            if_version: None,
        })?;
        rtt_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    anyhow::ensure!(
        delivered.load(Ordering::Relaxed) > before,
        "no traffic flowed during the changes"
    );
    rtt_us.sort_by(f64::total_cmp);

    // 2. `rocectl set` as a process.
    let mut proc_ms = Vec::new();
    if let Some(bin) = &args.rocectl {
        eprintln!("rocectl: {} `rocectl set ecn` processes…", args.rocectl_runs);
        for i in 0..args.rocectl_runs {
            let kmax = if i % 2 == 0 { "200KB" } else { "400KB" };
            let t = Instant::now();
            let out = std::process::Command::new(bin)
                .arg("--socket")
                .arg(&socket)
                .args(["set", "ecn", "--profile", "roce", "--kmax", kmax])
                .output()
                .with_context(|| format!("cannot run {}", bin.display()))?;
            proc_ms.push(t.elapsed().as_secs_f64() * 1e3);
            anyhow::ensure!(
                out.status.success(),
                "rocectl: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        proc_ms.sort_by(f64::total_cmp);
    }

    // 3. Throughput over time, alternating quiet phases and phases with changes.
    eprintln!(
        "throughput: {} s in phases of {} ms, a change every {} ms in every other phase…",
        args.seconds, args.phase_ms, args.change_every_ms
    );
    let total = Duration::from_secs_f64(args.seconds);
    let phase = Duration::from_millis(args.phase_ms);
    let sampling = Arc::new(AtomicBool::new(true));
    let t0 = Instant::now();
    let (d3, s3) = (delivered.clone(), sampling.clone());
    let sample = Duration::from_millis(args.sample_ms);
    let sampler = std::thread::spawn(move || {
        let mut out = Vec::new();
        let (mut last_t, mut last_n) = (Instant::now(), d3.load(Ordering::Relaxed));
        while s3.load(Ordering::Relaxed) {
            std::thread::sleep(sample);
            let (t, n) = (Instant::now(), d3.load(Ordering::Relaxed));
            let mid = (last_t + (t - last_t) / 2).duration_since(t0).as_secs_f64();
            out.push((mid, (n - last_n) as f64 / (t - last_t).as_secs_f64()));
            (last_t, last_n) = (t, n);
        }
        out
    });
    let changing = |at: f64| (at / phase.as_secs_f64()) as u64 % 2 == 1;
    let mut change_at = Vec::new();
    let mut next = t0;
    let mut i = 0;
    while t0.elapsed() < total {
        let now = t0.elapsed().as_secs_f64();
        if changing(now) {
            change_at.push(now);
            client.call(Op::Patch {
                toml: PATCHES[i % 2].into(),
                if_version: None,
            })?;
            i += 1;
        }
        next += Duration::from_millis(args.change_every_ms);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    sampling.store(false, Ordering::Relaxed);
    let series = sampler.join().expect("sampler");
    drop(client);
    stop.store(true, Ordering::Relaxed);
    let outcome = run.join().expect("switch thread")?;
    server.shutdown();
    let _ = std::fs::remove_dir_all(&dir);

    // Samples straddling a phase boundary belong to neither side.
    let half = args.sample_ms as f64 / 2e3;
    let clean = |t: f64| changing(t - half) == changing(t + half);
    let quiet: Vec<f64> = series
        .iter()
        .filter(|(t, _)| clean(*t) && !changing(*t))
        .map(|s| s.1)
        .collect();
    let busy: Vec<f64> = series
        .iter()
        .filter(|(t, _)| clean(*t) && changing(*t))
        .map(|s| s.1)
        .collect();
    // The sample intervals that contain a change.
    let at_change: Vec<f64> = series
        .iter()
        .filter(|(t, _)| change_at.iter().any(|c| (t - c).abs() <= half))
        .map(|s| s.1)
        .collect();
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let drops = outcome.snapshot.totals.drops.total();

    println!("frame {} B, one pipeline worker, busy polling", args.frame);
    println!(
        "patch request → in force → answer ({} changes under load): p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        rtt_us.len(),
        percentile(&rtt_us, 0.5),
        percentile(&rtt_us, 0.99),
        rtt_us.last().copied().unwrap_or(f64::NAN)
    );
    if !proc_ms.is_empty() {
        println!(
            "`rocectl set ecn` process, start to exit ({} runs): p50 {:.2} ms, p99 {:.2} ms",
            proc_ms.len(),
            percentile(&proc_ms, 0.5),
            percentile(&proc_ms, 0.99)
        );
    }
    println!(
        "throughput per {} ms: median {:.3} Mpps without changes, {:.3} Mpps during changes (ratio {:.3}), \
         {:.3} Mpps in the intervals holding a change (ratio {:.3}); minimum {:.3} vs {:.3} Mpps; {} changes; {} drops",
        args.sample_ms,
        median(&quiet) / 1e6,
        median(&busy) / 1e6,
        median(&busy) / median(&quiet),
        median(&at_change) / 1e6,
        median(&at_change) / median(&quiet),
        min(&quiet) / 1e6,
        min(&busy) / 1e6,
        change_at.len(),
        drops
    );
    if let Some(path) = &args.svg {
        let phases: Vec<(f64, f64)> = (0..)
            .map(|k| (k as f64 * phase.as_secs_f64(), (k + 1) as f64 * phase.as_secs_f64()))
            .take_while(|(a, _)| *a < args.seconds)
            .filter(|(a, _)| changing(*a + 1e-9))
            .collect();
        std::fs::write(path, svg(&series, &change_at, &phases, args.frame, args.sample_ms))
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("figure: {}", path.display());
    }
    if let Some(path) = &args.json {
        let j = serde_json::json!({
            "frame": args.frame, "rtt_us": rtt_us, "rocectl_ms": proc_ms,
            "series": series, "change_at_s": change_at, "drops": drops,
        });
        std::fs::write(path, serde_json::to_string(&j)?)?;
    }
    Ok(())
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("rocesw-ctl-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A plain line chart: delivered Mpps over time, the changes as ticks, the phases with changes
/// shaded.
fn svg(series: &[(f64, f64)], changes: &[f64], shaded: &[(f64, f64)], frame: usize, sample_ms: u64) -> String {
    use std::fmt::Write;
    let (w, h, l, r, t, bm) = (900.0, 360.0, 60.0, 20.0, 40.0, 45.0);
    let tmax = series.last().map_or(1.0, |s| s.0).max(1e-9);
    let ymax = series.iter().map(|s| s.1).fold(0.0, f64::max) * 1.1 / 1e6;
    let ymax = if ymax > 0.0 { ymax } else { 1.0 };
    let x = |s: f64| l + (w - l - r) * s / tmax;
    let y = |mpps: f64| t + (h - t - bm) * (1.0 - mpps / ymax);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    for (a, b) in shaded {
        let _ = writeln!(
            o,
            r##"<rect x="{:.1}" y="{t}" width="{:.1}" height="{:.1}" fill="#fde9c8"/>"##,
            x(*a),
            x(b.min(tmax)) - x(*a),
            h - t - bm
        );
    }
    for c in changes {
        let _ = writeln!(
            o,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="#d08000" stroke-width="1"/>"##,
            x(*c),
            h - bm,
            h - bm + 6.0
        );
    }
    let pts: Vec<String> = series
        .iter()
        .map(|(s, v)| format!("{:.1},{:.1}", x(*s), y(v / 1e6)))
        .collect();
    let _ = writeln!(
        o,
        r##"<polyline fill="none" stroke="#1f5fbf" stroke-width="1.2" points="{}"/>"##,
        pts.join(" ")
    );
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        let _ = writeln!(
            o,
            r##"<line x1="{l}" x2="{:.1}" y1="{1:.1}" y2="{1:.1}" stroke="#ddd"/><text x="{2}" y="{3:.1}" text-anchor="end">{4:.2}</text>"##,
            w - r,
            y(v),
            l - 6.0,
            y(v) + 4.0,
            v
        );
    }
    let steps = tmax.ceil() as usize;
    for s in 0..=steps {
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{s}</text>"#,
            x(s as f64),
            h - bm + 20.0
        );
    }
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds (shaded: a config change at every tick below)</text>"#,
        (l + w - r) / 2.0,
        h - 6.0
    );
    let _ = writeln!(
        o,
        r#"<text x="{l}" y="24" font-size="14">rocesw: delivered Mpps per {sample_ms} ms, {frame} B lossless RoCEv2, one pipeline worker, live ECN/alpha patches</text>"#
    );
    o.push_str("</svg>\n");
    o
}

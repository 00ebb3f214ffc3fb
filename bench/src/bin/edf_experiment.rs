//! The EDF comparison of issue 11 (bench/README.md, "EDF: ideal, fifo2, take-over"): the same
//! control, latency-bound and best-effort input through the switch with its EDF scheduler in
//! each mode, in virtual time; prints a Markdown table (and JSON with --json).

use anyhow::Result;
use clap::Parser;
use rocesw_bench::edf::{input, run, table, Params};

#[derive(Parser, Debug)]
#[command(
    about = "Replays control, latency-bound and best-effort traffic into one 10G port whose \
                   scheduler is EDF in each mode (ideal, fifo2, take-over) and compares order \
                   errors and each latency-bound class's latency"
)]
struct Args {
    /// Virtual time the senders run for, in milliseconds.
    #[arg(long, default_value_t = 20)]
    ms: u64,
    /// Load of the latency-bound traffic as a fraction of the port's rate (0 < load < 1).
    #[arg(long, default_value_t = 0.8)]
    load: f64,
    /// Frames per latency-bound burst.
    #[arg(long, default_value_t = 8)]
    burst: u64,
    /// Size of the latency-bound frames in bytes.
    #[arg(long, default_value_t = 1024)]
    frame_len: usize,
    /// Seed of the arrival times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The latency-bound classes' delay budgets in microseconds, most demanding first (1 to 8
    /// classes, on DSCP 24, 26, 28, ...).
    #[arg(long, value_delimiter = ',', default_value = "20,100,500,2000")]
    budgets_us: Vec<u64>,
    /// Print the outcomes as JSON lines instead of the table.
    #[arg(long)]
    json: bool,
}

fn main() -> Result<()> {
    let a = Args::parse();
    anyhow::ensure!(
        a.load > 0.0 && a.load < 1.0,
        "--load must be between 0 and 1, not {}",
        a.load
    );
    anyhow::ensure!(
        (78..=1518).contains(&a.frame_len),
        "--frame-len must be 78 … 1518 bytes"
    );
    anyhow::ensure!(a.burst >= 1, "--burst must be at least 1");
    anyhow::ensure!(
        (1..=8).contains(&a.budgets_us.len()) && a.budgets_us.iter().all(|&b| (1..=1_000_000).contains(&b)),
        "--budgets-us takes 1 to 8 budgets of 1 … 1000000 µs"
    );
    let p = Params {
        duration_ns: a.ms * 1_000_000,
        regulated_load: a.load,
        burst: a.burst,
        frame_len: a.frame_len,
        seed: a.seed,
        budgets_ns: a.budgets_us.iter().map(|b| b * 1000).collect(),
    };
    let frames = input(&p)?;
    eprintln!("{} frames over {} ms of virtual time", frames.len(), a.ms);
    let mut outcomes = Vec::new();
    for mode in ["ideal", "fifo2", "take-over"] {
        eprintln!("running {mode} ...");
        let o = run(mode, &p, &frames)?;
        if a.json {
            let classes: Vec<_> = o
                .classes
                .iter()
                .map(|c| {
                    serde_json::json!({"dscp": c.dscp, "budget_ns": c.budget_ns, "frames": c.frames,
                        "mean_ns": c.mean_ns, "p99_ns": c.p99_ns, "max_ns": c.max_ns, "misses": c.misses})
                })
                .collect();
            println!(
                "{}",
                serde_json::json!({"mode": o.mode, "order_errors": o.order_errors,
                    "order_errors_full": o.order_errors_full, "deadline_misses": o.deadline_misses,
                    "reordered": o.reordered, "control_max_ns": o.control_max_ns,
                    "best_effort_sent": o.best_effort_sent, "classes": classes})
            );
        }
        outcomes.push(o);
    }
    if !a.json {
        print!("{}", table(&outcomes));
    }
    Ok(())
}

//! The VL arbitration sweep (bench/README.md, "VL arbitration sweep"): the bandwidth ratio of
//! a high-priority VL (weight H) to a low-priority VL (weight L) under LimitOfHighPriority Q,
//! both backlogged, through a real switch's egress path, for a grid of (Q, H, L); writes the
//! table as CSV and an SVG figure (ratio against L, one curve per H, one panel per Q), and
//! prints the paper's spot checks and whether the figure has the paper's shape.
//!
//!   cargo run --release -p rocesw-bench --bin vlarb_sweep -- \
//!       --csv bench/results/vlarb_sweep.csv --svg bench/results/vlarb_sweep.svg

use anyhow::{bail, Context, Result};
use clap::Parser;
use rocesw_bench::vlarb_sweep::{csv, predicted_ratio, svg, Point, Sweep};
use std::io::Write;
use std::path::PathBuf;

/// The paper's spot checks, (Q, H, L).
const SPOT: [(u8, u8, u8); 6] = [(0, 2, 2), (1, 16, 4), (2, 3, 2), (5, 10, 90), (6, 8, 40), (8, 25, 100)];

#[derive(Parser)]
#[command(
    about = "Sweep InfiniBand VL arbitration (queue 0 = high VL with weight H, queue 1 = low VL with \
             weight L, LimitOfHighPriority Q) through the switch: bandwidth ratio table (CSV) and figure (SVG)",
    after_help = "Example (the committed figure):\n  vlarb_sweep --csv bench/results/vlarb_sweep.csv --svg bench/results/vlarb_sweep.svg"
)]
struct Args {
    /// LimitOfHighPriority values, one panel each (units of 4 KiB; 0 = one high packet at a
    /// time, 255 = unbounded).
    #[arg(long, value_delimiter = ',', default_value = "2,4,6,8,10,14")]
    q: Vec<u8>,
    /// High-priority entry weights, one curve each (64-byte units, 1-255).
    #[arg(long, value_delimiter = ',', default_value = "2,3,8,10,16,25")]
    h: Vec<u8>,
    /// Low-priority entry weights: the x axis, as FIRST-LAST (64-byte units, 1-255).
    #[arg(long, default_value = "1-255")]
    l: String,
    /// Frame length in bytes (Ethernet, no FCS), the same for both VLs.
    #[arg(long, default_value_t = 2048)]
    frame: usize,
    /// Low-priority packets measured per point (the window ends just after the last of them).
    #[arg(long, default_value_t = 32)]
    cycles: u64,
    /// Low-priority packets let through after each point's config change before measuring.
    #[arg(long, default_value_t = 4)]
    warmup: u64,
    /// Write the table here (CSV: q,h,l,frame_bytes,high_packets,low_packets,ratio).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write the figure here (SVG).
    #[arg(long)]
    svg: Option<PathBuf>,
}

fn range(text: &str) -> Result<Vec<u8>> {
    let (a, b) = text.split_once('-').unwrap_or((text, text));
    let parse = |s: &str| {
        s.trim()
            .parse::<u8>()
            .with_context(|| format!("--l {text:?}: expected FIRST-LAST within 1-255, e.g. 1-255"))
    };
    let (a, b) = (parse(a)?, parse(b)?);
    if a == 0 || a > b {
        bail!("--l {text:?}: expected FIRST-LAST with 1 <= FIRST <= LAST <= 255 (weight 0 skips the entry)");
    }
    Ok((a..=b).collect())
}

fn main() -> Result<()> {
    let args = Args::parse();
    let ls = range(&args.l)?;
    if args.h.contains(&0) {
        bail!("--h: weight 0 skips the high entry (the high VL never sends); give 1-255");
    }
    if args.cycles == 0 {
        bail!("--cycles: at least 1");
    }
    let mut sweep = Sweep::new(args.frame)?;
    let total = args.q.len() * args.h.len() * ls.len();
    let mut points: Vec<Point> = Vec::with_capacity(total);
    let started = std::time::Instant::now();
    for &q in &args.q {
        for &h in &args.h {
            for &l in &ls {
                points.push(sweep.point(q, h, l, args.warmup, args.cycles)?);
            }
            eprint!(
                "\r{} of {total} points ({:.1} s)",
                points.len(),
                started.elapsed().as_secs_f64()
            );
            let _ = std::io::stderr().flush();
        }
    }
    eprintln!();
    if let Some(path) = &args.csv {
        std::fs::write(path, csv(&points, args.frame)).with_context(|| format!("writing {}", path.display()))?;
        println!("table: {}", path.display());
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, svg(&points, &args.q, &args.h, args.frame))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("figure: {}", path.display());
    }

    println!("\nper Q: the ratio over every H and L, and what the arbitration rules predict");
    for &q in &args.q {
        let r: Vec<f64> = points.iter().filter(|p| p.q == q).map(Point::ratio).collect();
        let (lo, hi) = r
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
        let pred = predicted_ratio(q, args.frame).map_or("unbounded (low starves)".into(), |n| n.to_string());
        println!("  Q = {q:>3}: min {lo:.4}  max {hi:.4}  predicted {pred}");
    }
    println!("\nthe paper's spot checks (Q, H, L) at {} B frames:", args.frame);
    for (q, h, l) in SPOT {
        let p = sweep.point(q, h, l, args.warmup, args.cycles)?;
        println!(
            "  ({q}, {h}, {l}): ratio {:.4} ({} high : {} low packets)",
            p.ratio(),
            p.high_packets,
            p.low_packets
        );
    }
    Ok(())
}

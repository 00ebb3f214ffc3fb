//! The EDF experiment (issue 11): the comparison of Martínez et al. ("Efficient Deadline-Based
//! QoS Algorithms for High-Performance Networks") on the real switch in virtual time: control,
//! latency-bound and best-effort traffic from four hosts into one 10 Gb/s port, whose
//! scheduler is EDF in each of its modes (`ideal`, `fifo2`, `take-over`) in turn; the same
//! input every time.
//!
//! * control: DSCP 48 → queue 6, strict (above EDF); small frames, a little load from each host;
//! * latency-bound: DSCP 24, 26, 28, 30 → queue 3, the regulated queue, with delay budgets of
//!   20 µs (the most demanding class), 100 µs, 500 µs and 2 ms (`dscp_budget`); each host sends
//!   each class in bursts at its line rate, at random (seeded) times;
//! * best effort: DSCP 0 → queue 0, WDRR (below EDF), a steady overload.
//!
//! The input comes from the repository's generator (`dataplane::tools::gen::Flow`), the frames
//! go through `Switch::receive` and leave through `Switch::transmit` at the times the switch
//! gives them, driven by `Switch::next_event`: the same calls `rocesw replay` makes. What is
//! measured: the switch's own counters (order errors, deadline misses per queue), and from
//! arrival and departure times, each latency-bound class's latency and deadline misses and the
//! order errors by the full definition (a frame that left after a frame of the same queue with
//! a later deadline that had arrived before it).

use anyhow::{Context, Result};
use controlplane::snapshot::Snapshot;
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::{self, Ecn};
use dataplane::Switch;
use std::collections::HashMap;

/// The port everything goes to, and the hosts that send.
pub const OUT: usize = 4;
/// Sending hosts, on ports 0..HOSTS.
pub const HOSTS: usize = 4;
/// Line rate of every port, bits per second.
pub const SPEED_BPS: u64 = 10_000_000_000;
/// The latency-bound classes' budgets by default (ns), most demanding first; class k is on
/// DSCP 24 + 2k.
pub const BUDGETS_NS: [u64; 4] = [20_000, 100_000, 500_000, 2_000_000];
/// The DSCP of latency-bound class `k`.
pub fn class_dscp(k: usize) -> u8 {
    24 + 2 * k as u8
}
/// DSCP of the control traffic (queue 6, strict priority).
pub const CONTROL_DSCP: u8 = 48;
/// DSCP of the best-effort traffic (queue 0, WDRR).
pub const BEST_EFFORT_DSCP: u8 = 0;

/// What a run is made of.
#[derive(Debug, Clone)]
pub struct Params {
    /// Virtual time the senders run for, ns.
    pub duration_ns: u64,
    /// Load of the latency-bound traffic over all hosts and classes, as a fraction of the
    /// output port's rate.
    pub regulated_load: f64,
    /// Frames per latency-bound burst.
    pub burst: u64,
    /// Length of every frame, bytes without FCS.
    pub frame_len: usize,
    /// Seeds the burst times: the same seed gives every mode the same input.
    pub seed: u64,
    /// The latency-bound classes' delay budgets (ns), most demanding first: 1 to 8 classes.
    pub budgets_ns: Vec<u64>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            duration_ns: 20_000_000,
            regulated_load: 0.8,
            burst: 8,
            frame_len: 1024,
            seed: 1,
            budgets_ns: BUDGETS_NS.to_vec(),
        }
    }
}

/// A small seeded generator (xorshift64*): the input must be the same for every mode.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Exponentially distributed, mean `mean`.
    fn exp(&mut self, mean: f64) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        -mean * (1.0 - u).ln()
    }
}

/// One frame of the input: when, from which host, which flow and class.
pub struct Arrival {
    /// Arrival time at the switch, virtual ns.
    pub at: u64,
    /// Sending host, which is also its ingress port.
    pub host: usize,
    /// The frame's bytes.
    pub frame: Vec<u8>,
}

/// The input: every frame, sorted by arrival time. Flows (by queue pair number): per host,
/// one per latency-bound class (so a flow's frames have non-decreasing deadlines), one
/// control and one best-effort flow.
pub fn input(p: &Params) -> Result<Vec<Arrival>> {
    let mut rng = Rng(p.seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut out = Vec::new();
    let wire_bits = (p.frame_len as f64 + 24.0) * 8.0;
    let push = |host: usize, flow: Flow, out: &mut Vec<Arrival>| -> Result<()> {
        for (at, frame) in flow.frames().context("generating frames")? {
            out.push(Arrival { at, host, frame });
        }
        Ok(())
    };
    for host in 0..HOSTS {
        for k in 0..p.budgets_ns.len() {
            let dscp = class_dscp(k);
            // Bursts at line rate, exponential gaps: each (host, class) an equal share of the
            // regulated load.
            let rate = p.regulated_load * SPEED_BPS as f64 / (HOSTS * p.budgets_ns.len()) as f64;
            let mean_gap = p.burst as f64 * wire_bits / rate * 1e9;
            let qp = (host * 16 + k + 1) as u32;
            let mut t = rng.exp(mean_gap);
            let mut psn = 0u32;
            while (t as u64) < p.duration_ns {
                let f = Flow {
                    src: host as u16,
                    dst: OUT as u16,
                    dscp,
                    ecn: Ecn::Ect0,
                    qp,
                    frame_len: p.frame_len,
                    count: p.burst,
                    start_ns: t as u64,
                    rate_bps: SPEED_BPS,
                };
                for (at, mut frame) in f.frames().context("generating frames")? {
                    // Number the flow's frames across its bursts (the generator starts each
                    // burst at PSN 0): what the order checks follow.
                    set_psn(&mut frame, psn);
                    psn += 1;
                    out.push(Arrival { at, host, frame });
                }
                t += rng
                    .exp(mean_gap)
                    .max(p.burst as f64 * wire_bits / SPEED_BPS as f64 * 1e9);
            }
        }
        push(
            host,
            Flow {
                src: host as u16,
                dst: OUT as u16,
                dscp: CONTROL_DSCP,
                ecn: Ecn::Ect0,
                qp: (host * 16 + 10) as u32,
                frame_len: 128,
                count: p.duration_ns / 20_000,
                start_ns: 3_000 + host as u64 * 700,
                rate_bps: (128 + 24) * 8 * 50_000,
            },
            &mut out,
        )?;
        push(
            host,
            Flow {
                src: host as u16,
                dst: OUT as u16,
                dscp: BEST_EFFORT_DSCP,
                ecn: Ecn::Ect0,
                qp: (host * 16 + 11) as u32,
                frame_len: 1500,
                count: (p.duration_ns as f64 * 2.5e9 / 1e9 / ((1500.0 + 24.0) * 8.0)) as u64,
                start_ns: 1_000 + host as u64 * 300,
                rate_bps: 2_500_000_000,
            },
            &mut out,
        )?;
    }
    out.sort_by_key(|a| a.at);
    Ok(out)
}

fn set_psn(frame: &mut [u8], psn: u32) {
    let info = wire::parse(frame, usize::MAX).expect("the generator's frames parse");
    let bth = info.l4_offset().expect("UDP") + 8;
    frame[bth + 9..bth + 12].copy_from_slice(&psn.to_be_bytes()[1..]);
}

/// The switch's config for a mode.
pub fn config(mode: &str, budgets_ns: &[u64]) -> Result<controlplane::Config> {
    let mut text = String::from(
        "[buffer]\ncell = \"256B\"\nsize = \"16MiB\"\n\
         [port_defaults]\nspeed = \"10G\"\ncable = \"5m\"\nscheduler = \"edf\"\n",
    );
    text += &format!("[port_defaults.edf]\nmode = \"{mode}\"\nbudget = {{ 3 = \"1ms\" }}\ndscp_budget = {{ ");
    text += &budgets_ns
        .iter()
        .enumerate()
        .map(|(k, ns)| format!("{} = \"{ns}ns\"", class_dscp(k)))
        .collect::<Vec<_>>()
        .join(", ");
    text += " }\n";
    for id in 0..=OUT {
        text += &format!("[[port]]\nid = {id}\n");
    }
    let regulated: String = (0..budgets_ns.len())
        .map(|k| format!("{} = 3, ", class_dscp(k)))
        .collect();
    text += &format!("[classify]\ntrust = \"dscp\"\ndefault_tc = 0\ndscp_to_tc = {{ 0 = 0, {regulated}48 = 6 }}\n");
    text += "[queue.6]\nsched = \"strict\"\n[queue.0]\nsched = \"wdrr\"\nweight = 1\n";
    Ok(controlplane::load_str(&text)
        .map_err(|e| anyhow::anyhow!("the experiment's config: {e}\n{text}"))?
        .config)
}

/// What one mode did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The EDF mode (`ideal`, `fifo2` or `take-over`).
    pub mode: String,
    /// The switch's counters for the regulated queue (3) of the output port.
    pub order_errors: u64,
    /// Frames of queue 3 that left after their deadline, as the switch counts them.
    pub deadline_misses: u64,
    /// Order errors by the full definition, from arrival and departure times: frames that, while
    /// they waited, saw a frame of their queue with a later deadline leave.
    pub order_errors_full: u64,
    /// Per latency-bound class (as `Params::budgets_ns`): frames, mean, p99 and max latency (ns), misses.
    pub classes: Vec<ClassOutcome>,
    /// Frames of one flow that left out of their arrival order (must be 0).
    pub reordered: u64,
    /// Worst control frame latency, arrival to departure, ns.
    pub control_max_ns: u64,
    /// Best-effort frames that left the output port.
    pub best_effort_sent: u64,
    /// The switch's counters at the end of the run.
    pub snapshot: Option<Snapshot>,
}

/// One latency-bound class's latency (arrival at the switch to departure) and its misses.
#[derive(Debug, Clone, Default)]
pub struct ClassOutcome {
    /// The class's DSCP ([`class_dscp`]).
    pub dscp: u8,
    /// Its delay budget, ns.
    pub budget_ns: u64,
    /// Its frames that left the output port.
    pub frames: u64,
    /// Mean latency, ns.
    pub mean_ns: u64,
    /// 99th percentile latency, ns.
    pub p99_ns: u64,
    /// Worst latency, ns.
    pub max_ns: u64,
    /// Frames whose latency exceeded the budget.
    pub misses: u64,
}

/// Runs the input through the switch with the scheduler in `mode`.
pub fn run(mode: &str, p: &Params, input: &[Arrival]) -> Result<Outcome> {
    let cfg = config(mode, &p.budgets_ns)?;
    let mut sw = Switch::new(&cfg, 1);
    sw.receive(OUT, &announce(OUT as u16, 0)?, 0);
    // Per frame (qp, psn): arrival time and deadline.
    let mut arrived: HashMap<(u32, u32), (u64, u64, usize)> = HashMap::with_capacity(input.len());
    // Departures in order: (qp, psn, departure time).
    let departed: std::cell::RefCell<Vec<(u32, u32, u64, u8)>> = Default::default();
    let mut sink = |port: usize, f: &[u8], at: u64| {
        if port != OUT {
            return;
        }
        let Ok(info) = wire::parse(f, usize::MAX) else { return };
        if let (Some(bth), Some(dscp)) = (info.bth(f), info.dscp()) {
            departed.borrow_mut().push((bth.dest_qp(), bth.psn(), at, dscp));
        }
    };
    let budget = |dscp: u8| {
        (0..p.budgets_ns.len())
            .find(|&k| class_dscp(k) == dscp)
            .map(|k| p.budgets_ns[k])
    };
    let mut now = 1;
    for (i, a) in input.iter().enumerate() {
        while now < a.at {
            match sw.next_event(now).map(|e| e.max(now + 1)) {
                Some(e) if e <= a.at => {
                    now = e;
                    sw.poll(now);
                    sw.transmit(OUT, now, &mut sink);
                }
                _ => break,
            }
        }
        now = now.max(a.at);
        let info = wire::parse(&a.frame, usize::MAX)?;
        let bth = info.bth(&a.frame).context("a RoCE frame")?;
        let dscp = info.dscp().unwrap_or(0);
        let deadline = budget(dscp).map_or(0, |b| a.at + b);
        arrived.insert((bth.dest_qp(), bth.psn()), (a.at, deadline, i));
        sw.receive(a.host, &a.frame, now);
        sw.poll(now);
        sw.transmit(OUT, now, &mut sink);
    }
    let mut guard = 0u64;
    while !sw.is_idle() {
        now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
        sw.poll(now);
        for p in 0..=OUT {
            sw.transmit(p, now, &mut sink);
        }
        guard += 1;
        anyhow::ensure!(guard < 50_000_000, "the switch did not drain");
    }
    let departed = departed.into_inner();
    let snap = sw.snapshot(now);
    let q3 = &snap.ports[OUT].queues[3];
    let mut out = Outcome {
        mode: mode.into(),
        order_errors: q3.edf_order_errors,
        deadline_misses: q3.edf_deadline_misses,
        ..Outcome::default()
    };

    // Latency per class, reordering per flow, control's worst case.
    let mut lat: HashMap<u8, Vec<u64>> = HashMap::new();
    let mut last_psn: HashMap<u32, u32> = HashMap::new();
    for &(qp, psn, at, dscp) in &departed {
        let Some(&(arr, _, _)) = arrived.get(&(qp, psn)) else {
            continue;
        };
        if let Some(prev) = last_psn.insert(qp, psn) {
            if psn < prev {
                out.reordered += 1;
            }
        }
        if dscp == CONTROL_DSCP {
            out.control_max_ns = out.control_max_ns.max(at - arr);
        } else if dscp == BEST_EFFORT_DSCP {
            out.best_effort_sent += 1;
        } else {
            lat.entry(dscp).or_default().push(at - arr);
        }
    }
    for (k, &budget_ns) in p.budgets_ns.iter().enumerate() {
        let dscp = class_dscp(k);
        let mut v = lat.remove(&dscp).unwrap_or_default();
        v.sort_unstable();
        let n = v.len() as u64;
        out.classes.push(ClassOutcome {
            dscp,
            budget_ns,
            frames: n,
            mean_ns: v.iter().sum::<u64>().checked_div(n).unwrap_or(0),
            p99_ns: v
                .get((v.len() * 99 / 100).min(v.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0),
            max_ns: v.last().copied().unwrap_or(0),
            misses: v.iter().filter(|&&l| l > budget_ns).count() as u64,
        });
    }

    // Full order errors: a regulated frame is one when, while it waited, a frame of its queue
    // with a later deadline left. Events in time order (a departure before an arrival at the
    // same instant: that frame did not wait for it); the waiting frames by deadline, each
    // marked (and forgotten) at the first later-deadline departure.
    let mut events: Vec<(u64, bool, u64, (u32, u32))> = Vec::new(); // (time, is_arrival, deadline, id)
    let mut left_at: HashMap<(u32, u32), u64> = HashMap::new();
    for &(qp, psn, at, dscp) in &departed {
        if budget(dscp).is_some() {
            left_at.insert((qp, psn), at);
        }
    }
    for (&id, &(arr, dl, _)) in &arrived {
        if let Some(&at) = left_at.get(&id) {
            events.push((arr, true, dl, id));
            events.push((at, false, dl, id));
        }
    }
    events.sort_unstable();
    // The waiting frames not counted yet, by deadline.
    let mut unmarked = std::collections::BTreeSet::new();
    // Frames that left the instant they arrived (an idle link): their departure sorts first.
    let mut gone = std::collections::HashSet::new();
    let mut waiting = std::collections::HashSet::new();
    for (_, arrival, dl, id) in events {
        if arrival {
            if !gone.remove(&id) {
                waiting.insert(id);
                unmarked.insert((dl, id));
            }
        } else if !waiting.remove(&id) {
            gone.insert(id);
        } else {
            unmarked.remove(&(dl, id));
            // Everything still waiting with an earlier deadline was overtaken by this frame.
            while let Some(&first) = unmarked.first() {
                if first.0 >= dl {
                    break;
                }
                unmarked.remove(&first);
                out.order_errors_full += 1;
            }
        }
    }
    out.snapshot = Some(snap);
    Ok(out)
}

/// The comparison as a Markdown table: per mode, the order errors, the deadline misses, and
/// each latency-bound class's mean / p99 latency (max too for the most demanding).
pub fn table(outcomes: &[Outcome]) -> String {
    let us = |ns: u64| ns as f64 / 1000.0;
    let Some(first) = outcomes.first() else {
        return String::new();
    };
    let mut s = String::from("| mode | order errors (switch) | order errors (full) | deadline misses |");
    let mut rule = String::from("| --- | ---: | ---: | ---: |");
    for (k, c) in first.classes.iter().enumerate() {
        let what = if k == 0 { "mean / p99 / max" } else { "mean / p99" };
        s += &format!(" {} µs class: {what} (µs) |", us(c.budget_ns));
        rule += " ---: |";
    }
    s += " reordered |\n";
    rule += " ---: |\n";
    s += &rule;
    for o in outcomes {
        s += &format!(
            "| {} | {} | {} | {} |",
            o.mode, o.order_errors, o.order_errors_full, o.deadline_misses
        );
        for (k, c) in o.classes.iter().enumerate() {
            if k == 0 {
                s += &format!(" {:.1} / {:.1} / {:.1} |", us(c.mean_ns), us(c.p99_ns), us(c.max_ns));
            } else {
                s += &format!(" {:.1} / {:.1} |", us(c.mean_ns), us(c.p99_ns));
            }
        }
        s += &format!(" {} |\n", o.reordered);
    }
    s
}

//! The three targets and how one fabric run is measured against them. The definitions are
//! written out here because each is a choice: UCloud states them for a production network over
//! hours, and a tuner sees a few hundred microseconds.
//!
//! * **Goodput** ≥ 95% of line rate, on the links the pattern can fill: a host's receiving
//!   link (switch → host) is a bottleneck when a long flow ends there, when the messages sent
//!   to it all at once are at least 100 µs of its line rate, or when Poisson messages offer
//!   it at least its line rate on average (the sources' loads, not the seed's arrivals, so a
//!   lucky burst does not make a link a bottleneck). Its utilisation is the wire
//!   bytes it carried (every frame plus the 24 B of preamble, FCS and gap: headers count, as
//!   they do in "line rate") over its line rate times the time from the pattern's first
//!   start to its last delivery there (the run's end if a long or unfinished flow ends there).
//!   The pattern's figure is the lowest over its bottlenecks; it has none (n/a, met) when
//!   nothing offers a link enough to fill it.
//! * **PFC rarely**: at most 5 pause frames a second, 99% of the time. The run is cut into
//!   `windows` equal windows; a window is within the rate when the PFC frames every switch
//!   sent in it are at most `pfc_per_s × window`. Windows are far shorter than the
//!   1/5 s in which one frame is allowed, so in practice a window is within the rate when it
//!   has no pause frame, and the target allows 1% of the windows one.
//! * **Latency** ≤ 80 µs, 90% under 40 µs: the one-way latency of every packet of the pattern
//!   (NIC send to NIC receive: switch queueing, serialisation, cables), its 99th percentile
//!   ≤ 80 µs (the bound; the single worst packet is left to the 1%) and its 90th ≤ 40 µs.

use crate::fabric::topology::{End, FlowSize, Topology};
use crate::fabric::FabricOutcome;
use crate::nic::histogram::Histogram;
use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

/// Wire overhead per frame beyond its bytes (preamble, start delimiter, FCS, inter-frame gap).
const WIRE_OVERHEAD: u64 = crate::switch::WIRE_OVERHEAD_BYTES;

/// Work below this, in line-rate time, is too short to measure a link's utilisation: the
/// first frame's path delay alone is about a microsecond.
const MIN_BUSY_NS: u64 = 100_000;

/// What a pattern must meet (the module's three targets); [`Default`] is the published ones.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Targets {
    /// Fraction of line rate a bottleneck link must carry.
    pub goodput: f64,
    /// Pause frames per second a window may have.
    pub pfc_per_s: f64,
    /// Fraction of windows that must be within `pfc_per_s`.
    pub pfc_time: f64,
    /// How many windows a run is cut into.
    pub windows: u32,
    /// Bound on the 90th percentile one-way latency, ns (default 40 µs).
    pub latency_p90_ns: u64,
    /// Bound on the 99th percentile one-way latency, ns (default 80 µs).
    pub latency_p99_ns: u64,
}

impl Default for Targets {
    fn default() -> Self {
        Targets {
            goodput: 0.95,
            pfc_per_s: 5.0,
            pfc_time: 0.99,
            windows: 100,
            latency_p90_ns: 40_000,
            latency_p99_ns: 80_000,
        }
    }
}

/// The keys `--target` takes, with what each means.
pub const TARGET_KEYS: &[(&str, &str)] = &[
    (
        "goodput",
        "fraction of line rate on bottleneck links (0 < x ≤ 1), default 0.95",
    ),
    (
        "pfc_per_s",
        "pause frames per second a window may have (≥ 0), default 5",
    ),
    (
        "pfc_time",
        "fraction of windows within pfc_per_s (0 < x ≤ 1), default 0.99",
    ),
    ("windows", "windows a run is cut into (1 … 100000), default 100"),
    ("latency_p90", "90th percentile one-way latency bound, default 40us"),
    ("latency_p99", "99th percentile one-way latency bound, default 80us"),
];

impl Targets {
    /// Applies one `KEY=VALUE`; on an error nothing changes.
    pub fn set(&mut self, kv: &str) -> Result<()> {
        let mut new = self.clone();
        new.set_in_place(kv)?;
        *self = new;
        Ok(())
    }

    fn set_in_place(&mut self, kv: &str) -> Result<()> {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--target {kv:?}: expected KEY=VALUE"))?;
        let (k, v) = (k.trim(), v.trim());
        let num = || -> Result<f64> {
            let x: f64 = v.parse().map_err(|_| anyhow!("--target {k}: {v:?} is not a number"))?;
            if !x.is_finite() {
                bail!("--target {k}: {v:?} is not a finite number");
            }
            Ok(x)
        };
        let frac = || -> Result<f64> {
            let x = num()?;
            if !(x > 0.0 && x <= 1.0) {
                bail!("--target {k}: {x} is not a fraction above 0 and at most 1");
            }
            Ok(x)
        };
        let time = || -> Result<u64> {
            let ns = units_duration(v).map_err(|e| anyhow!("--target {k}: {e}"))?;
            if ns == 0 {
                bail!("--target {k}: must be above 0");
            }
            Ok(ns)
        };
        match k {
            "goodput" => self.goodput = frac()?,
            "pfc_per_s" => {
                let x = num()?;
                if x < 0.0 {
                    bail!("--target pfc_per_s: {x} is negative");
                }
                self.pfc_per_s = x;
            }
            "pfc_time" => self.pfc_time = frac()?,
            "windows" => {
                let n: u32 = v
                    .parse()
                    .map_err(|_| anyhow!("--target windows: {v:?} is not a whole number"))?;
                if !(1..=100_000).contains(&n) {
                    bail!("--target windows: {n} is not between 1 and 100000");
                }
                self.windows = n;
            }
            "latency_p90" => self.latency_p90_ns = time()?,
            "latency_p99" => self.latency_p99_ns = time()?,
            other => {
                let keys: Vec<&str> = TARGET_KEYS.iter().map(|k| k.0).collect();
                bail!("--target {other:?}: unknown target (known: {})", keys.join(", "));
            }
        }
        if self.latency_p90_ns > self.latency_p99_ns {
            bail!(
                "--target: latency_p90 ({} ns) is above latency_p99 ({} ns)",
                self.latency_p90_ns,
                self.latency_p99_ns
            );
        }
        Ok(())
    }
}

fn units_duration(v: &str) -> Result<u64> {
    controlplane::units::parse_duration(v).map_err(|e| anyhow!("{e}"))
}

/// One pattern's run, measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measured {
    /// Lowest utilisation over the bottleneck links; `None`: the pattern has none.
    pub goodput: Option<f64>,
    /// Fraction of windows within the PFC rate.
    pub pfc_ok_windows: f64,
    /// PFC frames the switches sent.
    pub pfc_frames: u64,
    /// 90th percentile one-way latency over the pattern's packets, ns.
    pub latency_p90_ns: u64,
    /// 99th percentile one-way latency, ns.
    pub latency_p99_ns: u64,
    /// Packets whose latency was measured.
    pub packets: u64,
    /// Frames the switches dropped (a lossless fabric should drop none).
    pub drops: u64,
    /// Finite messages that completed, of those sent.
    pub completed: u64,
    /// Finite messages sent.
    pub messages: u64,
    /// Completion times per size bucket (the fabric's own figures).
    pub fct_by_size: Vec<crate::fabric::fct::SizeFct>,
    /// Which targets the run met.
    pub met: Met,
}

/// Which of the three targets a run met.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Met {
    /// Every bottleneck at the goodput fraction (true when there is none).
    pub goodput: bool,
    /// Enough windows within the PFC rate.
    pub pfc: bool,
    /// Both latency percentiles within their bounds.
    pub latency: bool,
}

impl Met {
    /// Whether all three were met.
    pub fn all(self) -> bool {
        self.goodput && self.pfc && self.latency
    }

    /// How many of the three were met.
    pub fn count(self) -> u32 {
        u32::from(self.goodput) + u32::from(self.pfc) + u32::from(self.latency)
    }
}

impl Measured {
    /// How far from meeting each target, summed (0 when all are met): orders candidates that
    /// meet as many targets, so the search can tell a near miss from a wide one.
    pub fn shortfall(&self, t: &Targets) -> f64 {
        let g = self.goodput.map_or(0.0, |g| (t.goodput - g).max(0.0) / t.goodput);
        let p = (t.pfc_time - self.pfc_ok_windows).max(0.0);
        let l90 = (self.latency_p90_ns as f64 / t.latency_p90_ns as f64 - 1.0).max(0.0);
        let l99 = (self.latency_p99_ns as f64 / t.latency_p99_ns as f64 - 1.0).max(0.0);
        // A drop on a lossless fabric is worse than any miss.
        g + p + l90 + l99 + if self.drops > 0 { 10.0 } else { 0.0 }
    }
}

/// Measures one fabric run of a pattern against the targets; `duration_ns` is the pattern's run
/// time (what PFC windows divide).
pub fn measure(topo: &Topology, o: &FabricOutcome, duration_ns: u64, t: &Targets) -> Measured {
    let goodput = goodput(topo, o, duration_ns);
    // PFC frames per window, from every switch.
    let w = u64::from(t.windows);
    let mut per_window = vec![0u64; t.windows as usize];
    let mut pfc_frames = 0;
    for (l, r) in topo.links.iter().zip(&o.links) {
        for (from, d) in [(l.a, &r.forward), (l.b, &r.reverse)] {
            if let End::Switch(..) = from {
                for &at in &d.pfc_at_ns {
                    let k = ((u128::from(at) * u128::from(w)) / u128::from(duration_ns.max(1))) as usize;
                    per_window[k.min(t.windows as usize - 1)] += 1;
                    pfc_frames += 1;
                }
            }
        }
    }
    let allowed = t.pfc_per_s * (duration_ns as f64 / w as f64) / 1e9;
    let ok = per_window.iter().filter(|&&n| n as f64 <= allowed).count();
    let pfc_ok_windows = ok as f64 / w as f64;
    let mut hist = Histogram::new();
    for f in &o.flows {
        hist.merge(&f.latency);
    }
    let (p90, p99) = (hist.quantile(0.9), hist.quantile(0.99));
    let messages = o.flows.iter().filter(|f| f.size.is_some()).count() as u64;
    let completed = o.flows.iter().filter(|f| f.fct_ns.is_some()).count() as u64;
    let met = Met {
        goodput: goodput.is_none_or(|g| g >= t.goodput),
        // A tolerance for the float: 99 of 100 windows is 0.99.
        pfc: pfc_ok_windows + 1e-9 >= t.pfc_time,
        latency: p90 <= t.latency_p90_ns && p99 <= t.latency_p99_ns && o.drops == 0,
    };
    Measured {
        goodput,
        pfc_ok_windows,
        pfc_frames,
        latency_p90_ns: p90,
        latency_p99_ns: p99,
        packets: hist.count(),
        drops: o.drops,
        completed,
        messages,
        fct_by_size: o.fct_by_size.clone(),
        met,
    }
}

/// See the module doc: the lowest utilisation over the links the pattern can fill.
fn goodput(topo: &Topology, o: &FabricOutcome, duration_ns: u64) -> Option<f64> {
    let mut lowest: Option<f64> = None;
    for (h, host) in topo.hosts.iter().enumerate() {
        let into: Vec<usize> = (0..topo.flows.len()).filter(|&i| topo.flows[i].dst == h).collect();
        if into.is_empty() {
            continue;
        }
        let link = &topo.links[host.link];
        let rate = link.speed_bps as f64;
        let first = into.iter().map(|&i| topo.flows[i].start_ns).min().expect("non-empty");
        let long = into.iter().any(|&i| topo.flows[i].size == FlowSize::Long);
        let offered = topo.offered_bps.get(h).copied().unwrap_or(0.0);
        // Messages that are not part of a Poisson stream all start together (one per pair).
        let once: u64 = if offered > 0.0 {
            0
        } else {
            into.iter()
                .map(|&i| match topo.flows[i].size {
                    FlowSize::Bytes(b) => b,
                    FlowSize::Long => 0,
                })
                .sum()
        };
        let once_ns = once as f64 * 8.0 / rate * 1e9;
        let fills = long || offered >= rate || once_ns >= MIN_BUSY_NS as f64;
        if !fills {
            continue;
        }
        // Last delivery: the run's end if any flow into the host is long or unfinished.
        let mut end = first;
        for &i in &into {
            match o.flows[i].fct_ns {
                Some(fct) => end = end.max(topo.flows[i].start_ns + fct),
                None => end = duration_ns,
            }
        }
        let end = end.min(duration_ns);
        if end <= first {
            continue;
        }
        let r = &o.links[host.link];
        let d = if link.a == End::Host(h) { &r.reverse } else { &r.forward };
        let wire = (d.bytes + d.frames * WIRE_OVERHEAD) as f64 * 8.0;
        let util = wire / (rate * (end - first) as f64 / 1e9);
        lowest = Some(lowest.map_or(util, |l: f64| l.min(util)));
    }
    lowest
}

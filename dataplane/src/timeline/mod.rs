//! `--timeline FILE.html` of `rocesw replay` and `rocesw fabric`: what happened over time, as
//! one self-contained page (inline SVG, script and style: no network) with its data beside it
//! (FILE.json, the same object the page embeds).
//!
//! **Bounded.** Time is cut into at most [`MAX_BUCKETS`] buckets of equal width; when a run
//! outlasts them, neighbouring buckets merge two by two and the width doubles, so a long run
//! stays a page of the same size. A PFC row keeps at most [`MAX_INTERVALS`] bars (beyond, bars
//! closer than a gap that doubles until they fit are joined, and the row says so), and the
//! page at most [`MAX_MARKS`] watchdog marks (the rest are counted, `marks_left_off`).
//!
//! **Free when off.** Nothing here is on the switch's packet path: the event loops (replay's,
//! the fabric's) hold an `Option<Recorder>` and look at it once per round. With it, each round
//! reads what the switch already keeps (queue depths in bytes, XOFF state, pause timers,
//! watchdog counters); counters that only add up (CE marks, bytes delivered, time paused) are
//! read only when a round crosses into a new bucket, and their growth since the last such read
//! is given to the bucket it happened in (every round between two reads lies in one bucket).

pub mod html;

use crate::switch::Switch;
use anyhow::{bail, Context, Result};
use controlplane::NUM_TC;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Buckets a timeline has at most.
pub const MAX_BUCKETS: usize = 400;
/// Bars one PFC row keeps at most.
pub const MAX_INTERVALS: usize = 300;
/// Watchdog marks kept at most.
pub const MAX_MARKS: usize = 1000;
/// "Last value" buckets that saw no sample.
const NONE: u64 = u64::MAX;

/// The JSON written beside a timeline page: `x.html` → `x.json`. Refuses a name that does not
/// end in `.html` or `.htm` (the data would have nowhere else to go, or overwrite the page).
pub fn data_path(page: &Path) -> Result<PathBuf> {
    match page.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm") => Ok(page.with_extension("json")),
        _ => bail!(
            "--timeline {}: the page's name must end in .html (its data goes beside it, as .json)",
            page.display()
        ),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Merge {
    Sum,
    Max,
    Last,
}

struct Series {
    merge: Merge,
    v: Vec<u64>,
}

/// One PFC row's state: XOFF a switch port's PG sent (per priority it names), or pause a
/// switch port's egress obeyed (per priority).
struct Row {
    switch: usize,
    port: usize,
    prio: u8,
    kind: &'static str,
    bars: Vec<[u64; 2]>,
    /// Open bar (XOFF not yet ended, or a pause still running).
    open: bool,
    merged_below_ns: u64,
}

impl Row {
    fn push(&mut self, bar: [u64; 2]) {
        self.bars.push(bar);
        if self.bars.len() > MAX_INTERVALS {
            let mut gap = self.merged_below_ns.max(1);
            while self.bars.len() > MAX_INTERVALS / 2 {
                gap *= 2;
                let mut joined: Vec<[u64; 2]> = Vec::with_capacity(self.bars.len());
                for b in self.bars.drain(..) {
                    match joined.last_mut() {
                        Some(l) if b[0] < l[1].saturating_add(gap) => l[1] = l[1].max(b[1]),
                        _ => joined.push(b),
                    }
                }
                self.bars = joined;
            }
            self.merged_below_ns = gap;
        }
    }
}

struct SwitchProbe {
    name: String,
    port_ids: Vec<u16>,
    port_names: Vec<Option<String>>,
    /// Per port × queue: its depth series and its CE counter.
    depth: Vec<usize>,
    ce: Vec<usize>,
    xoff_last: Vec<u8>,
    /// Per port: the priorities whose pause bar is open.
    pause_open: Vec<u8>,
    pg_prios: [u8; NUM_TC],
    wd_last: Vec<([u64; NUM_TC], [u64; NUM_TC])>,
    /// Rows: port × priority × (xoff, paused).
    row_base: usize,
}

struct Counter {
    series: usize,
    last: u64,
}

/// What a timeline records while a run goes on; [`Recorder::finish`] makes the [`Timeline`].
pub struct Recorder {
    kind: &'static str,
    width_ns: u64,
    used: usize,
    series: Vec<Series>,
    next_boundary: u64,
    last_sample: u64,
    switches: Vec<SwitchProbe>,
    rows: Vec<Row>,
    marks: Vec<Mark>,
    marks_left_off: u64,
    counters: Vec<Counter>,
    flows: Vec<(String, usize, usize)>,
    links: Vec<(String, usize)>,
    /// Two of the largest frame any watched port takes: a queue that never got this deep
    /// (a frame leaving while the next waits) did not build up.
    built_up_bytes: u64,
}

impl Recorder {
    /// `kind`: "replay" or "fabric". `expected_ns`: how long the run is expected to last (the
    /// fabric's duration), or 0 when unknown (replay): the first bucket width.
    pub fn new(kind: &'static str, expected_ns: u64) -> Self {
        let width_ns = expected_ns.div_ceil(MAX_BUCKETS as u64).max(100);
        Recorder {
            kind,
            width_ns,
            used: 0,
            series: Vec::new(),
            next_boundary: 0,
            last_sample: 0,
            switches: Vec::new(),
            rows: Vec::new(),
            marks: Vec::new(),
            marks_left_off: 0,
            counters: Vec::new(),
            flows: Vec::new(),
            links: Vec::new(),
            built_up_bytes: 0,
        }
    }

    fn add_series(&mut self, merge: Merge) -> usize {
        let fill = if merge == Merge::Last { NONE } else { 0 };
        self.series.push(Series {
            merge,
            v: vec![fill; MAX_BUCKETS],
        });
        self.series.len() - 1
    }

    fn add_counter(&mut self) -> usize {
        let series = self.add_series(Merge::Sum);
        self.counters.push(Counter { series, last: 0 });
        self.counters.len() - 1
    }

    /// Watches switch `sw` (named `name` in the page; "" for replay's one switch).
    pub fn add_switch(&mut self, name: &str, sw: &Switch) {
        let n = sw.num_ports();
        let mut depth = Vec::with_capacity(n * NUM_TC);
        let mut ce = Vec::with_capacity(n * NUM_TC);
        for _ in 0..n * NUM_TC {
            depth.push(self.add_series(Merge::Max));
            ce.push(self.add_counter());
        }
        let row_base = self.rows.len();
        let switch = self.switches.len();
        for port in 0..n {
            for prio in 0..NUM_TC as u8 {
                for kind in ["xoff", "paused"] {
                    self.rows.push(Row {
                        switch,
                        port,
                        prio,
                        kind,
                        bars: Vec::new(),
                        open: false,
                        merged_below_ns: 0,
                    });
                }
            }
        }
        let cfg = sw.config();
        let largest = cfg
            .ports
            .iter()
            .map(|p| u64::from(p.max_frame_bytes))
            .max()
            .unwrap_or(0);
        self.built_up_bytes = self.built_up_bytes.max(2 * largest);
        self.switches.push(SwitchProbe {
            name: name.to_string(),
            port_ids: (0..n).map(|p| sw.port_id(p)).collect(),
            port_names: cfg.ports.iter().map(|p| p.name.clone()).collect(),
            depth,
            ce,
            xoff_last: vec![0; n],
            pause_open: vec![0; n],
            pg_prios: sw.pg_priorities(),
            wd_last: (0..n)
                .map(|p| (*sw.watchdog_counts(p).0, *sw.watchdog_counts(p).1))
                .collect(),
            row_base,
        });
    }

    /// A flow of the fabric (its page label); the id [`Recorder::sample_flow`] takes.
    pub fn add_flow(&mut self, label: String) -> usize {
        let bytes = self.add_counter();
        let rate = self.add_series(Merge::Last);
        self.flows.push((label, bytes, rate));
        self.flows.len() - 1
    }

    /// A link direction of the fabric (its page label); the id [`Recorder::sample_link`] takes.
    pub fn add_link(&mut self, label: String) -> usize {
        let c = self.add_counter();
        self.links.push((label, c));
        self.links.len() - 1
    }

    /// The bucket of time `t`, merging buckets two by two until it fits.
    fn bucket(&mut self, t: u64) -> usize {
        while t / self.width_ns >= MAX_BUCKETS as u64 {
            for s in &mut self.series {
                for i in 0..MAX_BUCKETS / 2 {
                    let (a, b) = (s.v[2 * i], s.v[2 * i + 1]);
                    s.v[i] = match s.merge {
                        Merge::Sum => a + b,
                        Merge::Max => a.max(b),
                        Merge::Last if b == NONE => a,
                        Merge::Last => b,
                    };
                }
                let fill = if s.merge == Merge::Last { NONE } else { 0 };
                s.v[MAX_BUCKETS / 2..].fill(fill);
            }
            self.width_ns *= 2;
            self.used = self.used.div_ceil(2);
        }
        let i = (t / self.width_ns) as usize;
        self.used = self.used.max(i + 1);
        i
    }

    /// Whether a round at `now` crosses into a new bucket: then the caller reads its counters
    /// ([`Recorder::sample_switch`], [`Recorder::sample_flow`], [`Recorder::sample_link`])
    /// between this and [`Recorder::end_sample`]. Call at the top of a round, before anything
    /// at `now` happened.
    #[inline]
    pub fn sample_due(&self, now: u64) -> bool {
        now >= self.next_boundary
    }

    /// The next bucket boundary: a loop whose clock jumped over several samples at each one
    /// passed, so that time-integrated counters (time paused) land where they accrued.
    pub fn next_boundary(&self) -> u64 {
        self.next_boundary
    }

    /// Ends a sample begun when [`Recorder::sample_due`] said so.
    pub fn end_sample(&mut self, now: u64) {
        self.bucket(now);
        self.last_sample = now;
        self.next_boundary = (now / self.width_ns + 1) * self.width_ns;
    }

    fn count(&mut self, counter: usize, cumulative: u64) {
        let i = self.bucket(self.last_sample);
        let c = &mut self.counters[counter];
        let delta = cumulative.saturating_sub(c.last);
        c.last = cumulative;
        self.series[c.series].v[i] += delta;
    }

    /// Reads switch `s`'s counters (a sample).
    pub fn sample_switch(&mut self, s: usize, sw: &Switch) {
        for port in 0..sw.num_ports() {
            let qc = sw.queue_counters(port);
            for (q, c) in qc.iter().enumerate() {
                let k = self.switches[s].ce[port * NUM_TC + q];
                self.count(k, c.ecn_marked);
            }
        }
    }

    /// Reads a flow's bytes delivered so far and its sender's DCQCN rate (a sample).
    pub fn sample_flow(&mut self, id: usize, delivered_bytes: u64, rate_bps: Option<f64>) {
        let (_, bytes, rate) = self.flows[id];
        self.count(bytes, delivered_bytes);
        if let Some(r) = rate_bps {
            let i = self.bucket(self.last_sample);
            self.series[rate].v[i] = r as u64;
        }
    }

    /// Reads a link direction's time paused so far, summed over its priorities (a sample).
    pub fn sample_link(&mut self, id: usize, paused_ns: &[u64; NUM_TC]) {
        let c = self.links[id].1;
        self.count(c, paused_ns.iter().sum());
    }

    /// After a round at `now` in which switch `s` did something: its queue depths, XOFF
    /// states, pauses and watchdog events.
    pub fn observe_switch(&mut self, s: usize, sw: &Switch, now: u64) {
        let i = self.bucket(now);
        let prios = self.switches[s].pg_prios;
        for port in 0..sw.num_ports() {
            for q in 0..NUM_TC {
                let d = sw.queue_use(port, q).bytes;
                if d == 0 {
                    // Nothing to raise (most queues, most rounds): the series stays untouched.
                    continue;
                }
                let k = self.switches[s].depth[port * NUM_TC + q];
                let v = &mut self.series[k].v[i];
                *v = (*v).max(d);
            }
            let base = self.switches[s].row_base + port * NUM_TC * 2;
            // XOFF: PGs entering or leaving it, as the priorities their frames name.
            let xoff = sw.pg_xoff_mask(port);
            let was = std::mem::replace(&mut self.switches[s].xoff_last[port], xoff);
            if xoff != was {
                let (mut now_on, mut was_on) = (0u8, 0u8);
                for (pg, p) in prios.iter().enumerate() {
                    if xoff & (1 << pg) != 0 {
                        now_on |= p;
                    }
                    if was & (1 << pg) != 0 {
                        was_on |= p;
                    }
                }
                for prio in 0..NUM_TC {
                    let row = &mut self.rows[base + prio * 2];
                    match (was_on & (1 << prio) != 0, now_on & (1 << prio) != 0) {
                        (false, true) => {
                            row.push([now, u64::MAX]);
                            row.open = true;
                        }
                        (true, false) => {
                            if let Some(b) = row.bars.last_mut() {
                                b[1] = now;
                            }
                            row.open = false;
                        }
                        _ => {}
                    }
                }
            }
            // Pause obeyed: a bar from when it was first seen to when it runs out (an XON
            // ends it when it arrives, which is a round of this switch).
            let until = sw.port_paused_until(port);
            // Only a port paused now or with a bar still open has a row to look at.
            if self.switches[s].pause_open[port] != 0 || until.iter().any(|&u| u > now) {
                let mut open = 0u8;
                for (prio, &u) in until.iter().enumerate() {
                    let row = &mut self.rows[base + prio * 2 + 1];
                    if u > now {
                        match row.bars.last_mut() {
                            Some(b) if row.open && b[1] >= now => b[1] = u,
                            _ => {
                                row.push([now, u]);
                                row.open = true;
                            }
                        }
                    } else if row.open {
                        if let Some(b) = row.bars.last_mut() {
                            b[1] = b[1].min(now).min(u.max(b[0]));
                        }
                        row.open = false;
                    }
                    open |= u8::from(row.open) << prio;
                }
                self.switches[s].pause_open[port] = open;
            }
            let (storms, restores) = sw.watchdog_counts(port);
            let last = self.switches[s].wd_last[port];
            if *storms != last.0 || *restores != last.1 {
                for prio in 0..NUM_TC {
                    for (kind, n) in [
                        ("storm", storms[prio] - last.0[prio]),
                        ("restore", restores[prio] - last.1[prio]),
                    ] {
                        for _ in 0..n {
                            if self.marks.len() < MAX_MARKS {
                                self.marks.push(Mark {
                                    t_ns: now,
                                    switch: s,
                                    port,
                                    prio: prio as u8,
                                    kind,
                                });
                            } else {
                                self.marks_left_off += 1;
                            }
                        }
                    }
                }
                self.switches[s].wd_last[port] = (*storms, *restores);
            }
        }
    }

    /// The timeline of a run that ended at `end_ns` (the caller took a last sample there).
    pub fn finish(mut self, title: String, end_ns: u64) -> Timeline {
        self.bucket(end_ns);
        let used = self.used.max(1);
        let cut = |v: &[u64]| v[..used].to_vec();
        let mut queues = Vec::new();
        let mut queues_not_built_up = 0;
        for (s, sw) in self.switches.iter().enumerate() {
            for (port, id) in sw.port_ids.iter().enumerate() {
                for q in 0..NUM_TC {
                    let depth = cut(&self.series[sw.depth[port * NUM_TC + q]].v);
                    let ce = cut(&self.series[self.counters[sw.ce[port * NUM_TC + q]].series].v);
                    let peak = depth.iter().copied().max().unwrap_or(0);
                    if peak == 0 {
                        continue;
                    }
                    if peak < self.built_up_bytes {
                        queues_not_built_up += 1;
                        continue;
                    }
                    queues.push(QueueSeries {
                        label: format!("{}queue {q}", port_label(sw, port, *id)),
                        switch: s,
                        port: *id,
                        queue: q as u8,
                        peak_bytes: peak,
                        ce_total: ce.iter().sum(),
                        depth_bytes: depth,
                        ce_marks: ce,
                    });
                }
            }
        }
        queues.sort_by_key(|q| std::cmp::Reverse(q.peak_bytes));
        let mut pfc = Vec::new();
        for r in self.rows.iter_mut().filter(|r| !r.bars.is_empty()) {
            let sw = &self.switches[r.switch];
            for b in &mut r.bars {
                b[1] = b[1].min(end_ns).max(b[0]);
            }
            pfc.push(PfcRow {
                label: format!(
                    "{}prio {} {}",
                    port_label(sw, r.port, sw.port_ids[r.port]),
                    r.prio,
                    if r.kind == "xoff" { "XOFF sent" } else { "paused" }
                ),
                switch: r.switch,
                port: sw.port_ids[r.port],
                prio: r.prio,
                kind: r.kind,
                total_ns: r.bars.iter().map(|b| b[1] - b[0]).sum(),
                bars: std::mem::take(&mut r.bars),
                merged_below_ns: r.merged_below_ns,
            });
        }
        let marks = self
            .marks
            .iter()
            .map(|m| {
                let sw = &self.switches[m.switch];
                MarkOut {
                    t_ns: m.t_ns,
                    label: format!("{}prio {}", port_label(sw, m.port, sw.port_ids[m.port]), m.prio),
                    kind: m.kind,
                }
            })
            .collect();
        let flows = self
            .flows
            .iter()
            .map(|(label, bytes, rate)| {
                let b = cut(&self.series[self.counters[*bytes].series].v);
                FlowSeries {
                    label: label.clone(),
                    rate_bps: b
                        .iter()
                        .map(|&x| ((x * 8) as f64 * 1e9 / self.width_ns as f64).round() as u64)
                        .collect(),
                    dcqcn_bps: cut(&self.series[*rate].v)
                        .into_iter()
                        .map(|x| (x != NONE).then_some(x))
                        .collect(),
                }
            })
            .collect();
        let mut links = Vec::new();
        let mut links_never_paused = 0;
        for (label, c) in &self.links {
            let ns = cut(&self.series[self.counters[*c].series].v);
            if ns.iter().all(|&x| x == 0) {
                links_never_paused += 1;
                continue;
            }
            links.push(LinkSeries {
                label: label.clone(),
                paused_ns: ns.iter().sum(),
                paused_fraction: ns
                    .iter()
                    .map(|&x| (x as f64 * 1e4 / self.width_ns as f64).round() / 1e4)
                    .collect(),
            });
        }
        Timeline {
            kind: self.kind,
            title,
            bucket_ns: self.width_ns,
            buckets: used,
            end_ns,
            built_up_bytes: self.built_up_bytes,
            queues,
            queues_not_built_up,
            pfc,
            marks,
            marks_left_off: self.marks_left_off,
            flows,
            links,
            links_never_paused,
        }
    }
}

fn port_label(sw: &SwitchProbe, port: usize, id: u16) -> String {
    let sw_name = if sw.name.is_empty() {
        String::new()
    } else {
        format!("{} ", sw.name)
    };
    match &sw.port_names[port] {
        Some(n) => format!("{sw_name}port {id} ({n}) "),
        None => format!("{sw_name}port {id} "),
    }
}

struct Mark {
    t_ns: u64,
    switch: usize,
    port: usize,
    prio: u8,
    kind: &'static str,
}

/// Everything the page shows (FILE.json).
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// "replay" or "fabric".
    pub kind: &'static str,
    /// What ran (the page's heading).
    pub title: String,
    /// Width of one bucket, ns.
    pub bucket_ns: u64,
    /// Buckets in every series.
    pub buckets: usize,
    /// Virtual time the run ended, ns.
    pub end_ns: u64,
    /// A queue built up if it held this many bytes at some time: two of the largest frame a
    /// port takes (less is a frame leaving while the next one waits).
    pub built_up_bytes: u64,
    /// Every egress queue that built up, deepest first.
    pub queues: Vec<QueueSeries>,
    /// Queues that held something but never built up: not in `queues`.
    pub queues_not_built_up: usize,
    /// Every (port, priority) that sent XOFF or was paused, as bars.
    pub pfc: Vec<PfcRow>,
    /// PFC watchdog storms and restorations.
    pub marks: Vec<MarkOut>,
    /// Watchdog events beyond [`MAX_MARKS`], not in `marks`.
    pub marks_left_off: u64,
    /// Fabric: per flow, the rate it was delivered at.
    pub flows: Vec<FlowSeries>,
    /// Fabric: per link direction whose sender was paused at some time, the share of each
    /// bucket it was.
    pub links: Vec<LinkSeries>,
    /// Fabric: link directions never paused (not in `links`).
    pub links_never_paused: usize,
}

/// One egress queue over time.
#[derive(Debug, Clone, Serialize)]
pub struct QueueSeries {
    /// Switch (fabric), port and queue.
    pub label: String,
    /// The switch's index (0 in replay).
    pub switch: usize,
    /// The port's id.
    pub port: u16,
    /// The queue.
    pub queue: u8,
    /// Deepest it got, bytes.
    pub peak_bytes: u64,
    /// Frames CE-marked on leaving it.
    pub ce_total: u64,
    /// Per bucket: the deepest it got, bytes.
    pub depth_bytes: Vec<u64>,
    /// Per bucket: frames CE-marked on leaving it.
    pub ce_marks: Vec<u64>,
}

/// One (port, priority) of PFC: XOFF the port sent, or pause its egress obeyed.
#[derive(Debug, Clone, Serialize)]
pub struct PfcRow {
    /// Switch (fabric), port, priority and kind.
    pub label: String,
    /// The switch's index (0 in replay).
    pub switch: usize,
    /// The port's id.
    pub port: u16,
    /// The priority.
    pub prio: u8,
    /// "xoff": the port's PG was in XOFF (it sent XOFF for this priority until its XON);
    /// "paused": the port's egress was paused for this priority by PFC it received.
    pub kind: &'static str,
    /// [start, end] in ns.
    pub bars: Vec<[u64; 2]>,
    /// Bars closer than this were joined to keep the row within [`MAX_INTERVALS`] (0: none).
    pub merged_below_ns: u64,
    /// Time covered by the bars, ns.
    pub total_ns: u64,
}

/// A PFC watchdog event.
#[derive(Debug, Clone, Serialize)]
pub struct MarkOut {
    /// When, ns.
    pub t_ns: u64,
    /// Switch (fabric), port and priority.
    pub label: String,
    /// "storm" or "restore".
    pub kind: &'static str,
}

/// One fabric flow over time.
#[derive(Debug, Clone, Serialize)]
pub struct FlowSeries {
    /// Its id, source and destination.
    pub label: String,
    /// Per bucket: payload delivered to its receiver, bits per second (rounded).
    pub rate_bps: Vec<u64>,
    /// Per bucket: its sender's DCQCN rate at the bucket's end, bits per second (null: not
    /// sampled, or DCQCN off).
    pub dcqcn_bps: Vec<Option<u64>>,
}

/// One fabric link direction over time.
#[derive(Debug, Clone, Serialize)]
pub struct LinkSeries {
    /// `a→b`: the direction whose sender was paused.
    pub label: String,
    /// Time paused in all, ns (summed over priorities).
    pub paused_ns: u64,
    /// Per bucket: time paused (summed over priorities) over the bucket's width, to four
    /// decimals; above 1 when several priorities were paused at once.
    pub paused_fraction: Vec<f64>,
}

impl Timeline {
    /// Writes the page at `page` and the data beside it ([`data_path`]), creating the folder
    /// if missing.
    pub fn write(&self, page: &Path) -> Result<()> {
        let json_path = data_path(page)?;
        if let Some(dir) = page.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let json = serde_json::to_string(self)?;
        std::fs::write(&json_path, format!("{json}\n"))
            .with_context(|| format!("cannot write {}", json_path.display()))?;
        std::fs::write(page, html::page(self, &json)).with_context(|| format!("cannot write {}", page.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_merge_two_by_two_and_stay_bounded() {
        let mut r = Recorder::new("replay", 0);
        let c = r.add_counter();
        let m = r.add_series(Merge::Max);
        let mut t = 0;
        let mut total = 0;
        while t < 10_000_000 {
            if r.sample_due(t) {
                r.count(c, total);
                r.end_sample(t);
            }
            let i = r.bucket(t);
            r.series[m].v[i] = r.series[m].v[i].max(t % 1000);
            total += 3;
            t += 777;
        }
        r.count(c, total);
        assert!(r.used <= MAX_BUCKETS);
        assert!(r.width_ns >= 10_000_000 / MAX_BUCKETS as u64, "{}", r.width_ns);
        let sum: u64 = r.series[r.counters[c].series].v.iter().sum();
        assert_eq!(sum, total, "every count lands in some bucket, once");
        assert!(
            r.series[m].v[..r.used].iter().all(|&x| x > 900),
            "maxima survive merging"
        );
    }

    #[test]
    fn a_row_of_many_bars_joins_the_closest_and_says_so() {
        let mut row = Row {
            switch: 0,
            port: 0,
            prio: 3,
            kind: "xoff",
            bars: Vec::new(),
            open: false,
            merged_below_ns: 0,
        };
        for i in 0..10_000u64 {
            row.push([i * 100, i * 100 + 50]);
        }
        assert!(row.bars.len() <= MAX_INTERVALS);
        assert!(row.merged_below_ns > 50);
        assert_eq!(row.bars[0][0], 0);
        assert_eq!(row.bars.last().unwrap()[1], 9_999 * 100 + 50);
    }

    #[test]
    fn the_data_goes_beside_the_page() {
        assert_eq!(data_path(Path::new("out/t.html")).unwrap(), Path::new("out/t.json"));
        let e = data_path(Path::new("out/t.json")).unwrap_err().to_string();
        assert!(e.contains("must end in .html"), "{e}");
    }
}

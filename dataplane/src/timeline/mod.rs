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

use crate::counters::DropReason;
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
/// A lazily made series or counter not made yet.
const UNSET: u32 = u32::MAX;

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

/// A level that holds between the moments it is read (a queue's depth, a PG's use): each
/// bucket gets the highest level it saw, the level carried into it included, so a bucket in
/// which nothing happened shows the level that held through it rather than nothing.
struct Held {
    series: usize,
    /// The level last read.
    level: u64,
    /// The bucket it was read in; the buckets after it are filled with `level` when the level
    /// next changes, or at the end.
    at: usize,
}

struct SwitchProbe {
    name: String,
    port_ids: Vec<u16>,
    port_names: Vec<Option<String>>,
    cell_bytes: u64,
    /// Per port × queue: its depth (a [`Held`], made when the queue first holds something)
    /// and its CE counter.
    depth: Vec<u32>,
    ce: Vec<usize>,
    /// Per port × PG: its use, all regions, and its headroom use (each a [`Held`] made when
    /// first non-zero).
    pg_use: Vec<[u32; 2]>,
    /// Per port × drop reason: the count at the last sample and its counter (made at the
    /// first drop).
    drops_last: Vec<[u64; DropReason::COUNT]>,
    drop_counter: Vec<u32>,
    xoff_last: Vec<u8>,
    /// Per port: the priorities whose pause bar is open.
    pause_open: Vec<u8>,
    /// Per port: the priorities each PG's PFC frames name.
    pg_prios: Vec<[u8; NUM_TC]>,
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
    held: Vec<Held>,
    changes: Vec<ChangeMark>,
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
            held: Vec::new(),
            changes: Vec::new(),
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

    fn add_held(&mut self, at: usize) -> u32 {
        let series = self.add_series(Merge::Max);
        self.held.push(Held { series, level: 0, at });
        (self.held.len() - 1) as u32
    }

    /// Level `h` read as `level` in bucket `i` (no earlier than the last read).
    fn hold(&mut self, h: u32, i: usize, level: u64) {
        let hd = &mut self.held[h as usize];
        if level == hd.level {
            // Unchanged: the buckets since are filled when it changes, or at the end.
            return;
        }
        let v = &mut self.series[hd.series].v;
        if hd.level > 0 {
            for b in &mut v[hd.at + 1..=i.max(hd.at)] {
                *b = (*b).max(hd.level);
            }
        }
        v[i] = v[i].max(level);
        hd.level = level;
        hd.at = i;
    }

    /// Each level holds from where it was last read to the end (`used` buckets).
    fn hold_to_end(&mut self, used: usize) {
        for h in &self.held {
            if h.level > 0 {
                for b in &mut self.series[h.series].v[h.at + 1..used.max(h.at + 1)] {
                    *b = (*b).max(h.level);
                }
            }
        }
    }

    /// A level read as `level` in bucket `i`, its [`Held`] in `slot` (made here when `level`
    /// is the first non-zero one).
    fn hold_lazy(&mut self, slot: u32, i: usize, level: u64) -> u32 {
        if slot == UNSET {
            if level == 0 {
                return UNSET;
            }
            let h = self.add_held(i);
            self.hold(h, i, level);
            return h;
        }
        self.hold(slot, i, level);
        slot
    }

    /// A schedule change applied at `t_ns` (a mark across every panel), `label` saying what.
    /// As many as the schedule has steps: the user's file bounds them.
    pub fn change(&mut self, t_ns: u64, label: String) {
        self.changes.push(ChangeMark { t_ns, label });
    }

    /// Watches switch `sw` (named `name` in the page; "" for replay's one switch).
    pub fn add_switch(&mut self, name: &str, sw: &Switch) {
        let n = sw.num_ports();
        let mut ce = Vec::with_capacity(n * NUM_TC);
        for _ in 0..n * NUM_TC {
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
            cell_bytes: u64::from(sw.cell_bytes()),
            depth: vec![UNSET; n * NUM_TC],
            ce,
            pg_use: vec![[UNSET; 2]; n * NUM_TC],
            drops_last: (0..n).map(|p| sw.port_counters(p).drops).collect(),
            drop_counter: vec![UNSET; n * DropReason::COUNT],
            xoff_last: vec![0; n],
            pause_open: vec![0; n],
            pg_prios: (0..n).map(|p| sw.pg_priorities(p)).collect(),
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
            for h in &mut self.held {
                h.at /= 2;
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
            let drops = sw.port_counters(port).drops;
            if drops != self.switches[s].drops_last[port] {
                for (r, &n) in drops.iter().enumerate() {
                    let slot = port * DropReason::COUNT + r;
                    let mut k = self.switches[s].drop_counter[slot];
                    if k == UNSET {
                        if n == self.switches[s].drops_last[port][r] {
                            continue;
                        }
                        k = self.add_counter() as u32;
                        self.counters[k as usize].last = self.switches[s].drops_last[port][r];
                        self.switches[s].drop_counter[slot] = k;
                    }
                    self.count(k as usize, n);
                }
                self.switches[s].drops_last[port] = drops;
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
        let cell = self.switches[s].cell_bytes;
        for port in 0..sw.num_ports() {
            for q in 0..NUM_TC {
                let d = sw.queue_use(port, q).bytes;
                let slot = self.switches[s].depth[port * NUM_TC + q];
                // Never held anything (most queues): nothing to record.
                if slot == UNSET && d == 0 {
                    continue;
                }
                self.switches[s].depth[port * NUM_TC + q] = self.hold_lazy(slot, i, d);
            }
            for pg in 0..NUM_TC {
                let u = sw.pg_use(port, pg);
                let (total, headroom) = (u64::from(u.total()) * cell, u64::from(u.headroom) * cell);
                let [a, b] = self.switches[s].pg_use[port * NUM_TC + pg];
                if a == UNSET && total == 0 {
                    continue;
                }
                let a = self.hold_lazy(a, i, total);
                let b = self.hold_lazy(b, i, headroom);
                self.switches[s].pg_use[port * NUM_TC + pg] = [a, b];
            }
            let base = self.switches[s].row_base + port * NUM_TC * 2;
            // XOFF: PGs entering or leaving it, as the priorities their frames name.
            let xoff = sw.pg_xoff_mask(port);
            let prios = self.switches[s].pg_prios[port];
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
        self.hold_to_end(used);
        let cut = |v: &[u64]| v[..used].to_vec();
        let held = |h: u32| match h {
            UNSET => vec![0; used],
            h => cut(&self.series[self.held[h as usize].series].v),
        };
        let mut queues = Vec::new();
        let mut queues_not_built_up = 0;
        let mut pgs = Vec::new();
        let mut pgs_not_built_up = 0;
        let mut drops = Vec::new();
        for (s, sw) in self.switches.iter().enumerate() {
            for (port, id) in sw.port_ids.iter().enumerate() {
                for pg in 0..NUM_TC {
                    let [a, b] = sw.pg_use[port * NUM_TC + pg];
                    if a == UNSET {
                        continue;
                    }
                    let (use_bytes, headroom_bytes) = (held(a), held(b));
                    let peak = use_bytes.iter().copied().max().unwrap_or(0);
                    let peak_headroom = headroom_bytes.iter().copied().max().unwrap_or(0);
                    if peak < self.built_up_bytes && peak_headroom == 0 {
                        pgs_not_built_up += 1;
                        continue;
                    }
                    pgs.push(PgSeries {
                        label: format!("{}PG {pg}", port_label(sw, port, *id)),
                        switch: s,
                        port: *id,
                        pg: pg as u8,
                        peak_bytes: peak,
                        peak_headroom_bytes: peak_headroom,
                        use_bytes,
                        headroom_bytes,
                    });
                }
                for (r, reason) in DropReason::ALL.iter().enumerate() {
                    let k = sw.drop_counter[port * DropReason::COUNT + r];
                    if k == UNSET {
                        continue;
                    }
                    let frames = cut(&self.series[self.counters[k as usize].series].v);
                    drops.push(DropSeries {
                        label: format!("{}{}", port_label(sw, port, *id), reason.name()),
                        switch: s,
                        port: *id,
                        reason: reason.name(),
                        total: frames.iter().sum(),
                        frames,
                    });
                }
                for q in 0..NUM_TC {
                    let depth = held(sw.depth[port * NUM_TC + q]);
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
        pgs.sort_by_key(|g| std::cmp::Reverse((g.peak_headroom_bytes, g.peak_bytes)));
        drops.sort_by_key(|d| std::cmp::Reverse(d.total));
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
            pgs,
            pgs_not_built_up,
            drops,
            changes: std::mem::take(&mut self.changes),
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
    /// Every ingress PG that built up or used headroom, the most headroom first.
    pub pgs: Vec<PgSeries>,
    /// PGs that held something but neither built up nor used headroom: not in `pgs`.
    pub pgs_not_built_up: usize,
    /// Every (port, reason) that dropped frames, the most first.
    pub drops: Vec<DropSeries>,
    /// Config changes a schedule applied (replay's `--schedule`), in time order.
    pub changes: Vec<ChangeMark>,
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
    /// Per bucket: the deepest it got, bytes, the depth carried into the bucket included (a
    /// queue held full through a bucket in which nothing happened reads full).
    pub depth_bytes: Vec<u64>,
    /// Per bucket: frames CE-marked on leaving it.
    pub ce_marks: Vec<u64>,
}

/// One ingress PG over time.
#[derive(Debug, Clone, Serialize)]
pub struct PgSeries {
    /// Switch (fabric), port and PG.
    pub label: String,
    /// The switch's index (0 in replay).
    pub switch: usize,
    /// The port's id.
    pub port: u16,
    /// The PG.
    pub pg: u8,
    /// Most it held, all regions (reserved minimum, shared, headroom), bytes.
    pub peak_bytes: u64,
    /// Most headroom it held, bytes.
    pub peak_headroom_bytes: u64,
    /// Per bucket: the most it held, all regions, bytes (the level carried in included).
    pub use_bytes: Vec<u64>,
    /// Per bucket: the most headroom it held, bytes.
    pub headroom_bytes: Vec<u64>,
}

/// One port's drops for one reason over time.
#[derive(Debug, Clone, Serialize)]
pub struct DropSeries {
    /// Switch (fabric), port and reason.
    pub label: String,
    /// The switch's index (0 in replay).
    pub switch: usize,
    /// The port's id.
    pub port: u16,
    /// The reason, as `drops` in summary.json names it.
    pub reason: &'static str,
    /// Frames dropped in all.
    pub total: u64,
    /// Per bucket: frames dropped.
    pub frames: Vec<u64>,
}

/// A config change applied during the run.
#[derive(Debug, Clone, Serialize)]
pub struct ChangeMark {
    /// When, ns.
    pub t_ns: u64,
    /// What changed (the keys).
    pub label: String,
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

    /// A level read once and then left alone (a paused queue: nothing happens to it) reads
    /// in every bucket until it changes, across merges; a bucket with a change reads the
    /// highest level it saw, the one carried in included.
    #[test]
    fn a_level_holds_through_buckets_where_nothing_happened() {
        let mut r = Recorder::new("replay", 0);
        let w = r.width_ns;
        let i = r.bucket(w / 2);
        let h = r.hold_lazy(UNSET, i, 500);
        // Read again only at bucket 300 (dropping to 100) and then 2000 buckets on (0).
        let i = r.bucket(300 * w + 1);
        r.hold(h, i, 100);
        let end = 2_000 * w;
        let i = r.bucket(end);
        r.hold(h, i, 0);
        let used = r.used;
        r.hold_to_end(used);
        let wide = r.width_ns;
        assert!(wide > w, "the buckets merged");
        let v = &r.series[r.held[h as usize].series].v[..used];
        let at = |ns: u64| v[(ns / wide) as usize];
        assert_eq!(at(0), 500);
        assert_eq!(at(150 * w), 500, "held through buckets where nothing was read");
        assert_eq!(
            at(300 * w),
            500,
            "the level carried in counts in the bucket it changed in"
        );
        assert_eq!(at(1_000 * w), 100);
        assert_eq!(at(1_999 * w), 100);
        assert_eq!(*v.last().unwrap(), 100, "the last bucket carried 100 in, then read 0");
        assert!(v.iter().all(|&x| x >= 100), "{v:?}");
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

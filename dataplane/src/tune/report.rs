//! What `rocesw tune` shows: a table for the terminal, and an SVG of which pattern meets
//! which target before and after (hand-written: a grid of coloured cells needs no library).

use super::targets::Measured;
use super::{Evaluated, TuneOutcome};
use std::fmt::Write;

fn us(ns: u64) -> String {
    format!("{:.1}µs", ns as f64 / 1e3)
}

fn goodput(m: &Measured) -> String {
    m.goodput.map_or("n/a".into(), |g| format!("{:.1}%", g * 100.0))
}

fn flags(m: &Measured) -> String {
    let f = |ok: bool, c: char| if ok { c } else { '-' };
    let g = if m.goodput.is_none() {
        '.'
    } else {
        f(m.met.goodput, 'G')
    };
    format!("{g}{}{}", f(m.met.pfc, 'P'), f(m.met.latency, 'L'))
}

fn counts(e: &Evaluated, n: usize) -> String {
    format!(
        "{}/{n} all three (goodput {}, PFC {}, latency {})",
        e.all_met, e.met[0], e.met[1], e.met[2]
    )
}

/// The settings run on every pattern that meet exactly as many patterns and targets as the
/// best one (a tie), and which knobs they differ in: a knob that varies across a tie made no
/// difference to the targets in the range tried, and the search took the least aggressive of
/// the tied settings ([`super::space::Setting::aggressiveness`]). `None` without a tie.
pub fn ties(o: &TuneOutcome) -> Option<String> {
    let a = &o.best;
    let tied: Vec<&super::Evaluated> = o
        .finalists
        .iter()
        .filter(|f| f.label != a.label && f.ties_with(a))
        .collect();
    if tied.is_empty() {
        return None;
    }
    let views: Vec<&super::space::SettingView> = std::iter::once(a)
        .chain(tied.iter().copied())
        .filter_map(|e| e.setting.as_ref())
        .collect();
    let mut varied = Vec::new();
    let mut names = Vec::new();
    for (knob, value) in [
        (
            "Kmin",
            (|v: &super::space::SettingView| v.kmin.clone()) as fn(&super::space::SettingView) -> String,
        ),
        ("Kmax", |v| v.kmax.clone()),
        ("Pmax", |v| v.pmax.to_string()),
        ("alpha", |v| v.alpha.clone()),
    ] {
        let mut seen: Vec<String> = Vec::new();
        for v in &views {
            let x = value(v);
            if !seen.contains(&x) {
                seen.push(x);
            }
        }
        if seen.len() > 1 {
            varied.push(format!("{knob} ({})", seen.join(", ")));
            names.push(knob);
        }
    }
    let n = tied.len() + 1;
    let differ = match names.as_slice() {
        [] => "they differ in nothing the search varies".to_string(),
        [one] => format!(
            "they differ in {}: {one} made no difference in this range",
            varied.join("")
        ),
        many => format!(
            "they differ in {}: {} made no difference in these ranges",
            and_list(&varied),
            and_list(many)
        ),
    };
    Some(format!(
        "{n} settings tie ({} of {} patterns meet all three targets; goodput {}, PFC {}, latency {}); \
         {differ}; chosen: the least aggressive of them (lowest Pmax, then largest Kmin, largest Kmax, \
         smallest alpha)",
        a.all_met,
        o.patterns.len(),
        a.met[0],
        a.met[1],
        a.met[2],
    ))
}

/// "a, b and c".
fn and_list<S: AsRef<str>>(items: &[S]) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_string(),
        [init @ .., last] => {
            let init: Vec<&str> = init.iter().map(AsRef::as_ref).collect();
            format!("{} and {}", init.join(", "), last.as_ref())
        }
    }
}

/// The targets the best setting misses on a pattern where the configs as given met them:
/// (pattern, the targets), in pattern order; empty when the setting loses nothing.
pub fn losses(o: &TuneOutcome) -> Vec<(String, Vec<&'static str>)> {
    o.patterns
        .iter()
        .zip(o.baseline.results.iter().zip(&o.best.results))
        .filter_map(|(name, (b, a))| {
            let lost: Vec<&'static str> = [
                (b.met.goodput && !a.met.goodput, "goodput"),
                (b.met.pfc && !a.met.pfc, "PFC"),
                (b.met.latency && !a.met.latency, "latency"),
            ]
            .into_iter()
            .filter_map(|(lost, what)| lost.then_some(what))
            .collect();
            (!lost.is_empty()).then(|| (name.clone(), lost))
        })
        .collect()
}

/// What to do with the fragment at `fragment`: "apply to a running switch: rocectl patch …"
/// only when the best setting loses none of the targets the configs as given met, pattern by
/// pattern (a live switch carries all of that traffic at once, and more targets met in all is
/// no comfort to the pattern that lost one); otherwise which it loses, and that it is not
/// offered; with no setting better than the configs as given, that there is nothing to apply.
pub fn apply_hint(o: &TuneOutcome, fragment: &std::path::Path) -> String {
    if o.best.fragment.is_none() {
        return "no setting beat the configs as given: nothing to apply to a running switch".into();
    }
    let lost = losses(o);
    if lost.is_empty() {
        return format!("Apply to a running switch: rocectl patch {}", fragment.display());
    }
    let list: Vec<String> = lost.iter().map(|(p, t)| format!("{p}: {}", t.join(", "))).collect();
    format!(
        "not offered for a running switch: the best setting misses targets the configs as given met \
         ({}); tune.json has every result, and `rocectl patch {}` would apply it anyway",
        list.join("; "),
        fragment.display()
    )
}

/// The report on stdout.
pub fn table(o: &TuneOutcome) -> String {
    let mut out = String::new();
    let n = o.patterns.len();
    let (b, a) = (&o.baseline, &o.best);
    let _ = writeln!(out, "best setting: {} (found by: {})", a.label, a.stage);
    if let Some(line) = ties(o) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "before (the configs as given): {}", counts(b, n));
    let _ = writeln!(out, "after  (the best setting):     {}", counts(a, n));
    let _ = writeln!(
        out,
        "{} simulations of {:.0} µs virtual time each, seed {}; targets: goodput ≥ {:.0}% of line rate on bottleneck links, \
         ≤ {} PFC frames/s in {:.0}% of {} windows, latency p90 ≤ {} and p99 ≤ {}",
        o.simulations,
        o.duration_ns as f64 / 1e3,
        o.seed,
        o.targets.goodput * 100.0,
        o.targets.pfc_per_s,
        o.targets.pfc_time * 100.0,
        o.targets.windows,
        us(o.targets.latency_p90_ns),
        us(o.targets.latency_p99_ns)
    );
    let _ = writeln!(out);
    let w = o.patterns.iter().map(|p| p.len()).max().unwrap_or(7).max(7);
    let _ = writeln!(
        out,
        "{:<w$}  {:>15}  {:>13}  {:>17}  {:>17}  {:>9}",
        "", "goodput", "PFC frames", "p90 latency", "p99 latency", "met G P L"
    );
    let _ = writeln!(
        out,
        "{:<w$}  {:>7} {:>7}  {:>6} {:>6}  {:>8} {:>8}  {:>8} {:>8}  {:>4} {:>4}",
        "pattern", "before", "after", "before", "after", "before", "after", "before", "after", "bef", "aft"
    );
    for (i, name) in o.patterns.iter().enumerate() {
        let (x, y) = (&b.results[i], &a.results[i]);
        let _ = writeln!(
            out,
            "{name:<w$}  {:>7} {:>7}  {:>6} {:>6}  {:>8} {:>8}  {:>8} {:>8}  {:>4} {:>4}",
            goodput(x),
            goodput(y),
            x.pfc_frames,
            y.pfc_frames,
            us(x.latency_p90_ns),
            us(y.latency_p90_ns),
            us(x.latency_p99_ns),
            us(y.latency_p99_ns),
            flags(x),
            flags(y)
        );
    }
    let _ = writeln!(
        out,
        "(G goodput, P PFC, L latency met; - missed; . goodput n/a: nothing fills a link)"
    );
    let _ = writeln!(out);
    out += &tradeoff(o);
    out
}

/// What the best setting gives up: the targets it misses, where the configs as given met
/// them, and the other settings on the Pareto front.
pub fn tradeoff(o: &TuneOutcome) -> String {
    let mut out = String::new();
    let (b, a) = (&o.baseline, &o.best);
    let _ = writeln!(out, "trade-off:");
    let names = ["goodput", "PFC", "latency"];
    let pick = |m: &Measured, k: usize| [m.met.goodput, m.met.pfc, m.met.latency][k];
    let mut any = false;
    for (k, name) in names.iter().enumerate() {
        let missed: Vec<&str> = (0..o.patterns.len())
            .filter(|&i| !pick(&a.results[i], k))
            .map(|i| o.patterns[i].as_str())
            .collect();
        if missed.is_empty() {
            continue;
        }
        any = true;
        let lost: Vec<&str> = (0..o.patterns.len())
            .filter(|&i| !pick(&a.results[i], k) && pick(&b.results[i], k))
            .map(|i| o.patterns[i].as_str())
            .collect();
        let _ = writeln!(
            out,
            "  {name} missed on {} pattern(s): {}",
            missed.len(),
            missed.join(", ")
        );
        if !lost.is_empty() {
            let _ = writeln!(
                out,
                "    of which the configs as given met it on {}: {}",
                lost.len(),
                lost.join(", ")
            );
        }
    }
    if !any {
        let _ = writeln!(out, "  none: every target met on every pattern");
    }
    let _ = writeln!(
        out,
        "  settings no other beats on every target (patterns meeting goodput / PFC / latency):"
    );
    for label in &o.pareto {
        if let Some(f) = o.finalists.iter().find(|f| &f.label == label) {
            let mark = if f.label == a.label { "  <- chosen" } else { "" };
            let _ = writeln!(
                out,
                "    {:<48} {:>3} / {:>3} / {:>3}, all three {:>3}{mark}",
                f.label, f.met[0], f.met[1], f.met[2], f.all_met
            );
        }
    }
    out
}

/// The step between axis ticks for counts 0 ..= n: 1 up to 10, then 2, 5, 10, 20, 50 …, so
/// there are at most about ten ticks.
fn tick_step(n: u32) -> u32 {
    let mut m: u64 = 1;
    loop {
        for k in [1, 2, 5] {
            if u64::from(n) <= 10 * k * m {
                return u32::try_from(k * m).unwrap_or(u32::MAX);
            }
        }
        m *= 10;
    }
}

/// The trade-off panel's side, px.
const PANEL: i64 = 240;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Patterns × targets, before and after: green met, red missed, grey not applicable.
pub fn svg(o: &TuneOutcome) -> String {
    let row = 14;
    let cell = 22;
    let left = 8 + 7 * o.patterns.iter().map(|p| p.len()).max().unwrap_or(10) as i64;
    let top = 92;
    let gap = 24;
    let panel_x = left + 6 * i64::from(cell) + i64::from(gap) + 40;
    // Wide enough for the trade-off panel's title (50 characters of 11 px monospace).
    let width = panel_x + 380;
    // Tall enough for the patterns' rows and for the trade-off panel with its legend.
    let height = (top + row * o.patterns.len() as i64 + 60).max(top + PANEL + 110);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="8" y="18" font-size="13" font-weight="bold">rocesw tune: targets met per pattern, before and after</text>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="8" y="36">before: {} / {} all three; after ({}): {} / {}</text>"#,
        o.baseline.all_met,
        o.patterns.len(),
        esc(&o.best.label),
        o.best.all_met,
        o.patterns.len()
    );
    let x0 = left;
    let x1 = left + 3 * i64::from(cell) + i64::from(gap);
    for (x, title) in [(x0, "before"), (x1, "after")] {
        let _ = writeln!(s, r#"<text x="{x}" y="62">{title}</text>"#);
        for (k, t) in ["G", "P", "L"].iter().enumerate() {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="middle">{t}</text>"#,
                x + k as i64 * i64::from(cell) + i64::from(cell) / 2,
                top - 6
            );
        }
    }
    for (i, name) in o.patterns.iter().enumerate() {
        let y = top + row * i as i64;
        let _ = writeln!(s, r#"<text x="8" y="{}">{}</text>"#, y + row - 3, esc(name));
        for (x, e) in [(x0, &o.baseline), (x1, &o.best)] {
            let m = &e.results[i];
            let states = [
                if m.goodput.is_none() { None } else { Some(m.met.goodput) },
                Some(m.met.pfc),
                Some(m.met.latency),
            ];
            for (k, st) in states.iter().enumerate() {
                let fill = match st {
                    None => "#d0d0d0",
                    Some(true) => "#4caf50",
                    Some(false) => "#e53935",
                };
                let _ = writeln!(
                    s,
                    r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}" stroke="white"/>"#,
                    x + k as i64 * i64::from(cell),
                    y,
                    cell,
                    row
                );
            }
        }
    }
    let ly = top + row * o.patterns.len() as i64 + 20;
    let legend = [
        ("#4caf50", "met"),
        ("#e53935", "missed"),
        ("#d0d0d0", "n/a (nothing fills a link)"),
    ];
    let mut x = 8;
    for (fill, text) in legend {
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{fill}"/>"#,
            ly - 10
        );
        let _ = writeln!(s, r#"<text x="{}" y="{ly}">{text}</text>"#, x + 16);
        x += 24 + 7 * text.len() as i64;
    }
    let _ = writeln!(
        s,
        r#"<text x="8" y="{}">G goodput ≥ {:.0}% of line rate · P ≤ {} PFC/s in {:.0}% of windows · L p90 ≤ {}, p99 ≤ {}</text>"#,
        ly + 20,
        o.targets.goodput * 100.0,
        o.targets.pfc_per_s,
        o.targets.pfc_time * 100.0,
        us(o.targets.latency_p90_ns),
        us(o.targets.latency_p99_ns)
    );
    s += &tradeoff_panel(o, panel_x, top);
    s += "</svg>\n";
    s
}

/// Every setting run on every pattern as a point: patterns meeting latency (x) against
/// patterns meeting goodput (y), where the search's trade-off shows; the configs as given, the
/// Pareto front and the chosen setting marked.
fn tradeoff_panel(o: &TuneOutcome, x0: i64, y0: i64) -> String {
    let mut s = String::new();
    let size = PANEL;
    let n = o.patterns.len().max(1) as i64;
    let px = |v: u32| x0 + i64::from(v) * size / n;
    let py = |v: u32| y0 + size - i64::from(v) * size / n;
    let _ = writeln!(
        s,
        r#"<text x="{x0}" y="{}">the trade-off: every setting run on every pattern</text>"#,
        y0 - 22
    );
    let _ = writeln!(
        s,
        r##"<rect x="{x0}" y="{y0}" width="{size}" height="{size}" fill="none" stroke="#888"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">patterns meeting latency (0 … {n})</text>"#,
        x0 + size / 2,
        y0 + size + 28
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle" transform="rotate(-90 {} {})">patterns meeting goodput (0 … {n})</text>"#,
        x0 - 26,
        y0 + size / 2,
        x0 - 26,
        y0 + size / 2
    );
    // Ticks on both axes: every pattern count up to 10 patterns, else a round step.
    let step = tick_step(n as u32);
    let mut v = 0u32;
    while i64::from(v) <= n {
        let _ = writeln!(
            s,
            r##"<line class="tick" x1="{x}" y1="{y}" x2="{x}" y2="{}" stroke="#888"/><text class="tick-label" x="{x}" y="{}" text-anchor="middle" font-size="9">{v}</text>"##,
            y0 + size + 4,
            y0 + size + 13,
            x = px(v),
            y = y0 + size,
        );
        let y = py(v);
        let _ = writeln!(
            s,
            r##"<line class="tick" x1="{}" y1="{y}" x2="{x0}" y2="{y}" stroke="#888"/><text class="tick-label" x="{}" y="{}" text-anchor="end" font-size="9">{v}</text>"##,
            x0 - 4,
            x0 - 6,
            y + 3,
        );
        v += step;
    }
    // Settings that land on one spot (they meet as many patterns on both targets) are one
    // point, its size and a "×N" label saying how many; blue if any of them is on the front.
    let mut spots: Vec<((u32, u32), Vec<&Evaluated>)> = Vec::new();
    for f in &o.finalists {
        let at = (f.met[2], f.met[0]);
        match spots.iter_mut().find(|(p, _)| *p == at) {
            Some((_, fs)) => fs.push(f),
            None => spots.push((at, vec![f])),
        }
    }
    for ((lat, good), fs) in &spots {
        let front = fs.iter().any(|f| o.pareto.contains(&f.label));
        let fill = if front { "#1e88e5" } else { "#9e9e9e" };
        let count = fs.len();
        let r = 3.0 + (count as f64).sqrt().min(4.0);
        let title: Vec<String> = fs
            .iter()
            .map(|f| format!("{}: {} all three", esc(&f.label), f.all_met))
            .collect();
        let _ = writeln!(
            s,
            r#"<circle cx="{}" cy="{}" r="{r:.1}" fill="{fill}" fill-opacity="0.7"><title>{}</title></circle>"#,
            px(*lat),
            py(*good),
            title.join("\n")
        );
        if count > 1 {
            let _ = writeln!(
                s,
                r#"<text class="count" x="{}" y="{}" font-size="9">×{count}</text>"#,
                px(*lat) + r.ceil() as i64 + 2,
                py(*good) - 2
            );
        }
    }
    let b = &o.baseline;
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{}" width="8" height="8" fill="#e53935"><title>the configs as given: {} all three</title></rect>"##,
        px(b.met[2]) - 4,
        py(b.met[0]) - 4,
        b.all_met
    );
    let a = &o.best;
    let _ = writeln!(
        s,
        r##"<circle cx="{}" cy="{}" r="6" fill="none" stroke="#2e7d32" stroke-width="2"><title>chosen: {}</title></circle>"##,
        px(a.met[2]),
        py(a.met[0]),
        esc(&a.label)
    );
    let ly = y0 + size + 48;
    let items = [
        ("#e53935", "configs as given"),
        ("#1e88e5", "Pareto front"),
        ("#9e9e9e", "other settings"),
        ("#2e7d32", "chosen"),
    ];
    for (k, (fill, text)) in items.iter().enumerate() {
        let y = ly + 16 * k as i64;
        let _ = writeln!(
            s,
            r#"<rect x="{x0}" y="{}" width="10" height="10" fill="{fill}"/>"#,
            y - 9
        );
        let _ = writeln!(s, r#"<text x="{}" y="{y}">{text}</text>"#, x0 + 16);
    }
    s
}

//! `[pfc]` and the watchdog, and which PGs and queues are therefore lossless: the fact the PG,
//! queue, CNP and budget checks all start from.

use super::ctx::Ctx;
use super::defaults::*;
use crate::model::*;
use crate::schema::*;
use crate::units;

pub(super) fn resolve_pfc(cx: &mut Ctx, s: &PfcSection) -> PfcConfig {
    let mut enabled = [false; NUM_TC];
    for (i, p) in s.priorities.iter().enumerate() {
        if let Some(p) = cx.idx(&format!("pfc.priorities[{i}]"), *p, 7, "priority") {
            if enabled[usize::from(p)] {
                cx.warn(format!("pfc.priorities[{i}]: priority {p} is listed twice"));
            }
            enabled[usize::from(p)] = true;
        }
    }
    let pause_quanta = s
        .pause_quanta
        .and_then(|q| cx.int_in("pfc.pause_quanta", q, 1, 65535))
        .and_then(|q| u16::try_from(q).ok())
        .unwrap_or(DEFAULT_PAUSE_QUANTA);
    let mut refresh_fraction = DEFAULT_REFRESH;
    if let Some(v) = &s.refresh {
        if let Some(f) = cx.real("pfc.refresh", v) {
            if f > 0.0 && f < 1.0 {
                refresh_fraction = f;
            } else {
                cx.error(format!(
                    "pfc.refresh ({v}) must be strictly between 0 and 1 (a fraction of the pause time)"
                ));
            }
        }
    }
    let watchdog = s.watchdog.as_ref().and_then(|w| resolve_watchdog(cx, w));
    if watchdog.is_some() && !enabled.iter().any(|e| *e) {
        cx.warn("pfc.watchdog: enabled but no PFC priority is; it has nothing to watch".to_string());
    }
    PfcConfig {
        enabled,
        pause_quanta,
        refresh_fraction,
        watchdog,
    }
}

fn resolve_watchdog(cx: &mut Ctx, w: &WatchdogSection) -> Option<WatchdogConfig> {
    let mut time = |key: &str, v: &Option<Scalar>, default: u64| -> u64 {
        let path = format!("pfc.watchdog.{key}");
        match v {
            None => default,
            Some(v) => match cx.duration(&path, v) {
                Some(0) => {
                    cx.error(format!("{path} ({v}) must be above 0"));
                    default
                }
                Some(ns) => ns,
                None => default,
            },
        }
    };
    let detection_ns = time("detection", &w.detection, DEFAULT_WD_DETECTION_NS);
    let restoration_ns = time("restoration", &w.restoration, DEFAULT_WD_RESTORATION_NS);
    let action = w
        .action
        .as_deref()
        .and_then(|a| {
            cx.word(
                "pfc.watchdog.action",
                a,
                &[
                    ("drop", WatchdogAction::Drop),
                    ("forward", WatchdogAction::Forward),
                    ("alert", WatchdogAction::Alert),
                ],
            )
        })
        .unwrap_or(WatchdogAction::Drop);
    if restoration_ns < detection_ns {
        cx.warn(format!(
            "pfc.watchdog.restoration ({}) is shorter than detection ({}): a storm may flap",
            units::format_duration(restoration_ns),
            units::format_duration(detection_ns)
        ));
    }
    if w.enabled == Some(false) {
        return None;
    }
    Some(WatchdogConfig {
        detection_ns,
        restoration_ns,
        action,
    })
}

/// Which PGs and queues are lossless, derived from the PFC priorities and the tc maps.
pub(super) struct Losslessness {
    pub(super) pg: [bool; NUM_TC],
    pub(super) queue: [bool; NUM_TC],
}

impl Losslessness {
    pub(super) fn check(cx: &mut Ctx, c: &ClassifyConfig, pfc: &PfcConfig) -> Self {
        let mut pg = [false; NUM_TC];
        let mut queue = [false; NUM_TC];
        for (p, _) in pfc.enabled.iter().enumerate().filter(|(_, e)| **e) {
            pg[usize::from(c.tc_to_pg[p])] = true;
            queue[usize::from(c.tc_to_queue[p])] = true;
        }
        let lossless_of =
            |field: &[u8; NUM_TC], target: u8| (0..NUM_TC).find(|&p| pfc.enabled[p] && field[p] == target);
        for t in (0..NUM_TC).filter(|&t| !pfc.enabled[t]) {
            let g = c.tc_to_pg[t];
            if pg[usize::from(g)] {
                let p = lossless_of(&c.tc_to_pg, g).unwrap_or(0);
                cx.error(format!(
                    "classify.tc_to_pg: lossy tc {t} and lossless priority {p} both map to PG {g}; \
                     a PG is either lossless or lossy"
                ));
            }
            let q = c.tc_to_queue[t];
            if queue[usize::from(q)] {
                let p = lossless_of(&c.tc_to_queue, q).unwrap_or(0);
                cx.error(format!(
                    "classify.tc_to_queue: lossy tc {t} and lossless priority {p} both map to queue {q}; \
                     a lossless queue must carry only lossless traffic"
                ));
            }
        }
        // A map set's PG map, likewise (its ports' queues are the switch's, checked above).
        for set in &c.sets {
            for t in (0..NUM_TC).filter(|&t| !pfc.enabled[t]) {
                let g = set.tc_to_pg[t];
                if let Some(p) = (0..NUM_TC).find(|&p| pfc.enabled[p] && set.tc_to_pg[p] == g) {
                    cx.error(format!(
                        "classify.map.{}.tc_to_pg: lossy tc {t} and lossless priority {p} both map to PG {g}; \
                         a PG is either lossless or lossy",
                        toml_edit::Key::new(set.name.as_str()).display_repr()
                    ));
                }
            }
        }
        // A lossless priority nothing is classified into is probably a mistake in the maps.
        for p in (0..NUM_TC).filter(|&p| pfc.enabled[p]) {
            let tc = u8::try_from(p).unwrap_or(0);
            let by_rule = c.rules.iter().any(|r| r.action.tc == Some(tc));
            let (mapped, via) = match c.trust {
                Trust::Dscp => (
                    c.dscp_to_tc.contains(&tc),
                    "no DSCP value maps to it (classify.dscp_to_tc)",
                ),
                Trust::Pcp => (
                    c.pcp_to_tc.contains(&tc),
                    "no PCP value maps to it (classify.pcp_to_tc)",
                ),
                Trust::None => (
                    c.default_tc == tc,
                    "classify.trust is none and default_tc is another tc",
                ),
            };
            if !mapped && !by_rule {
                cx.warn(format!(
                    "pfc.priorities: priority {p} is lossless but {via} and no rule sets tc {p}"
                ));
            }
        }
        for (i, r) in c.rules.iter().enumerate() {
            if let Some(q) = r.action.queue {
                let tc_lossless = r.action.tc.is_some_and(|t| pfc.enabled[usize::from(t)]);
                if queue[usize::from(q)] && !tc_lossless {
                    cx.warn(format!(
                        "classify.rule[{i}].action.queue: queue {q} is lossless but rule {:?} \
                         does not set a lossless tc; lossy frames would share it",
                        r.name
                    ));
                }
            }
        }
        Losslessness { pg, queue }
    }
}

/// Nanoseconds (rounded up) `bytes` of line time take at `speed_bps`.
fn line_ns(bytes: u64, speed_bps: u64) -> u64 {
    let ns = u128::from(bytes) * 8 * 1_000_000_000;
    u64::try_from(ns.div_ceil(u128::from(speed_bps.max(1)))).unwrap_or(u64::MAX)
}

/// What a PFC XOFF must outlast on one port, in nanoseconds, and its parts in words: a refresh
/// can wait behind one max frame already on our wire, then takes its own PFC frame's time,
/// crosses the cable, and the peer takes its 802.3 response time to stop. If the pause the
/// previous XOFF asked for runs out sooner, the peer resumes while the PG is still congested.
fn hold_ns(p: &PortConfig) -> (u64, String) {
    use crate::headroom::{response_quanta, BITS_PER_QUANTUM};
    use crate::wire_timing::{MIN_FRAME_BYTES, PREAMBLE_SFD_IFG_BYTES, WIRE_OVERHEAD_BYTES};
    let frame = line_ns(u64::from(p.max_frame_bytes) + WIRE_OVERHEAD_BYTES, p.speed_bps);
    let pfc = line_ns(MIN_FRAME_BYTES + PREAMBLE_SFD_IFG_BYTES, p.speed_bps);
    let rq = response_quanta(p.speed_bps);
    let response = line_ns(rq * BITS_PER_QUANTUM / 8, p.speed_bps);
    // 2e8 m/s in copper and fibre: 5 ns per metre.
    let cable = (p.cable_m * 5.0).ceil() as u64;
    let words = format!(
        "a {} B frame ahead of the XOFF {frame} ns + the PFC frame {pfc} ns + peer response \
         {rq} quanta {response} ns + {} of cable {cable} ns",
        p.max_frame_bytes,
        units::format_length(p.cable_m)
    );
    (frame + pfc + response + cable, words)
}

/// Pause times PFC cannot work with, which validate but lose lossless frames or flood the link:
/// a pause that runs out between a refresh and the peer obeying it (`pfc.pause_quanta` too
/// small for the port's speed, cable and MTU), and refreshes so frequent that the link cannot
/// carry them (`pfc.refresh` too small: they would only coalesce in the port's PFC backlog). One warning per set of figures, naming the ports.
pub(super) fn check_pause_time(cx: &mut Ctx, c: &Config) {
    let lossless_pgs = (0..NUM_TC)
        .filter(|&p| c.pfc.enabled[p])
        .map(|p| c.classify.tc_to_pg[p])
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u64;
    if lossless_pgs == 0 {
        return;
    }
    let (q, f) = (c.pfc.pause_quanta, c.pfc.refresh_fraction);
    let mut short: std::collections::BTreeMap<String, Vec<u16>> = Default::default();
    let mut busy: std::collections::BTreeMap<String, Vec<u16>> = Default::default();
    for p in &c.ports {
        // As the dataplane computes them: wire::pfc::quanta_to_ns truncates, and the generator
        // refreshes at the fraction of the pause, at least 1 ns.
        let pause_ns = u64::from(q) * crate::headroom::BITS_PER_QUANTUM * 1_000_000_000 / p.speed_bps.max(1);
        let refresh_ns = ((pause_ns as f64 * f) as u64).max(1);
        let margin = pause_ns.saturating_sub(refresh_ns);
        let (hold, words) = hold_ns(p);
        if margin < hold {
            short
                .entry(format!(
                    "pfc.pause_quanta ({q} = {pause_ns} ns at {}) with pfc.refresh ({f}) leaves \
                     {margin} ns between a refresh and the end of the pause it renews, less than \
                     the {hold} ns PFC must hold ({words}): the peer's pause runs out while the PG \
                     is congested and lossless frames may be dropped; raise pfc.pause_quanta \
                     (at least {} quanta) or lower pfc.refresh",
                    units::format_rate(p.speed_bps),
                    min_quanta(hold, f, p.speed_bps)
                ))
                .or_default()
                .push(p.id);
        }
        // Every lossless PG in XOFF sends one PFC frame per refresh interval, and each may wait
        // behind a max frame: the link must carry that with room to spare, or the refreshes
        // queue up behind each other and crowd out the data they protect.
        use crate::wire_timing::{MIN_FRAME_BYTES, PREAMBLE_SFD_IFG_BYTES, WIRE_OVERHEAD_BYTES};
        let pfc_ns = line_ns(MIN_FRAME_BYTES + PREAMBLE_SFD_IFG_BYTES, p.speed_bps);
        let frame_ns = line_ns(u64::from(p.max_frame_bytes) + WIRE_OVERHEAD_BYTES, p.speed_bps);
        let need = lossless_pgs * pfc_ns + frame_ns;
        if refresh_ns < need {
            busy.entry(format!(
                "pfc.refresh ({f}) refreshes an XOFF every {refresh_ns} ns at {} (pause \
                 {pause_ns} ns), less than the {need} ns the link needs to send {lossless_pgs} \
                 PFC frame(s) of {pfc_ns} ns and a {} B frame of {frame_ns} ns: refreshes outpace \
                 the link; raise pfc.refresh or pfc.pause_quanta",
                units::format_rate(p.speed_bps),
                p.max_frame_bytes
            ))
            .or_default()
            .push(p.id);
        }
    }
    for (msg, ids) in short.into_iter().chain(busy) {
        let ids: Vec<String> = ids.iter().map(u16::to_string).collect();
        let s = if ids.len() == 1 { "" } else { "s" };
        cx.warn(format!("{msg} (port{s} {})", ids.join(", ")));
    }
}

/// The smallest pause (in quanta, capped at 65535) whose margin after a refresh covers `hold_ns`.
fn min_quanta(hold_ns: u64, refresh: f64, speed_bps: u64) -> u64 {
    let pause_ns = hold_ns as f64 / (1.0 - refresh).max(f64::MIN_POSITIVE);
    let bits = pause_ns * speed_bps as f64 / 1e9;
    ((bits / crate::headroom::BITS_PER_QUANTUM as f64).ceil() as u64).clamp(1, 65535)
}

/// A shaper on a lossless queue holds its frames back, and PFC holds the senders back while
/// they wait: one so slow that a max frame takes longer than the watchdog's detection time (or
/// 1 s without a watchdog) to leave keeps the senders paused for good, and replay would run
/// for ever writing refreshed pause frames. Refused, naming the field and the least rate.
pub(super) fn check_lossless_shapers(cx: &mut Ctx, c: &Config, loss: &Losslessness) {
    let (window_ns, window) = match &c.pfc.watchdog {
        Some(w) => (
            w.detection_ns,
            format!("pfc.watchdog.detection ({})", units::format_duration(w.detection_ns)),
        ),
        None => (1_000_000_000, "1s (no PFC watchdog)".to_string()),
    };
    let mut seen = std::collections::BTreeSet::new();
    for (i, p) in c.ports.iter().enumerate() {
        for q in (0..NUM_TC).filter(|&q| loss.queue[q]) {
            let Some(s) = p.queues[q].shaper else { continue };
            let bits = u128::from(p.max_frame_bytes) * 8;
            let floor =
                u64::try_from((bits * 1_000_000_000).div_ceil(u128::from(window_ns.max(1)))).unwrap_or(u64::MAX);
            if s.rate_bps >= floor {
                continue;
            }
            let field = if c.queues[q].shaper == Some(s) {
                format!("queue.{q}.shaper.rate")
            } else {
                format!("port[{i}].queue.{q}.shaper.rate")
            };
            if !seen.insert((field.clone(), p.max_frame_bytes)) {
                continue;
            }
            let drain_ns = (bits * 1_000_000_000).div_ceil(u128::from(s.rate_bps.max(1)));
            cx.error(format!(
                "{field} ({}) on lossless queue {q} takes {} to send one {} B frame, longer \
                 than {window}: PFC would pause the senders for good; use at least {} or \
                 make the queue lossy",
                units::format_rate(s.rate_bps),
                units::format_duration(u64::try_from(drain_ns).unwrap_or(u64::MAX)),
                p.max_frame_bytes,
                units::format_rate(floor)
            ));
        }
    }
}

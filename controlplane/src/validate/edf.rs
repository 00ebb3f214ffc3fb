//! `edf` (`[port_defaults.edf]` and `[port.edf]`) for ports whose scheduler is "edf": the mode,
//! the regulated queues' delay budgets, per-DSCP budgets and the flow-label tag. Each key of a
//! port's section overrides the default section's.

use super::ctx::Ctx;
use crate::model::*;
use crate::schema::*;
use std::collections::BTreeMap;

/// The modes `edf.mode` accepts.
const EDF_MODES: &[(&str, EdfMode)] = &[
    ("ideal", EdfMode::Ideal),
    ("fifo2", EdfMode::Fifo2),
    ("take-over", EdfMode::TakeOver),
];

/// The default unit of the flow-label tag: 2^20 − 1 units of 16 ns reach 16.7 ms.
pub const DEFAULT_TAG_UNIT_NS: u64 = 16;

/// One EDF port's settings: the port's own keys over the defaults'. Errors name the section the
/// offending value came from.
pub(super) fn resolve_edf(cx: &mut Ctx, i: usize, own: Option<&EdfSection>, base: &EdfSection) -> EdfConfig {
    let own_path = format!("port[{i}].edf");
    let pick = |own: Option<&EdfSection>, f: fn(&EdfSection) -> bool| -> &'static str {
        if own.is_some_and(f) {
            "own"
        } else {
            "default"
        }
    };
    let path = |which: &str, key: &str| {
        if which == "own" {
            format!("{own_path}.{key}")
        } else {
            format!("port_defaults.edf.{key}")
        }
    };
    let sect = |which: &str| {
        if which == "own" {
            own.expect("own section")
        } else {
            base
        }
    };

    let w = pick(own, |s| s.mode.is_some());
    let mode = sect(w)
        .mode
        .as_deref()
        .and_then(|m| cx.word(&path(w, "mode"), m, EDF_MODES))
        .unwrap_or_default();

    let mut queue_budget_ns = [None; NUM_TC];
    let w = pick(own, |s| s.budget.is_some());
    match sect(w).budget.as_ref() {
        Some(budgets) if !budgets.is_empty() => {
            for (q, d) in budgets_of(cx, &path(w, "budget"), budgets, NUM_TC as u8 - 1, "queue") {
                queue_budget_ns[q as usize] = Some(d);
            }
        }
        _ => cx.error(format!(
            "{}: an EDF port needs at least one regulated queue: give its delay budget, e.g. budget = {{ 3 = \"50us\" }}",
            path(w, "budget")
        )),
    }

    let mut dscp_budget_ns = [None; 64];
    let w = pick(own, |s| s.dscp_budget.is_some());
    if let Some(budgets) = sect(w).dscp_budget.as_ref() {
        for (d, ns) in budgets_of(cx, &path(w, "dscp_budget"), budgets, 63, "DSCP") {
            dscp_budget_ns[d as usize] = Some(ns);
        }
    }

    let w = pick(own, |s| s.tag.is_some());
    let tag = sect(w)
        .tag
        .as_deref()
        .and_then(|t| cx.word(&path(w, "tag"), t, &[("off", false), ("flow_label", true)]))
        .unwrap_or(false);
    let w = pick(own, |s| s.tag_unit.is_some());
    let unit = match sect(w).tag_unit.as_ref() {
        Some(v) => {
            let p = path(w, "tag_unit");
            cx.duration(&p, v).and_then(|ns| in_range(cx, &p, ns, 1, 1_000_000))
        }
        None => Some(DEFAULT_TAG_UNIT_NS),
    };
    EdfConfig {
        mode,
        queue_budget_ns,
        dscp_budget_ns,
        tag_unit_ns: if tag { unit } else { None },
    }
}

/// A table of budgets keyed by a small index, each checked.
fn budgets_of(cx: &mut Ctx, path: &str, t: &BTreeMap<String, Scalar>, hi: u8, what: &str) -> Vec<(u8, u64)> {
    t.iter()
        .filter_map(|(k, v)| {
            let idx = cx.key(path, k, hi, what)?;
            let p = format!("{path}.{k}");
            let ns = cx.duration(&p, v)?;
            Some((idx, in_range(cx, &p, ns, 1, MAX_EDF_BUDGET_NS)?))
        })
        .collect()
}

fn in_range(cx: &mut Ctx, path: &str, ns: u64, lo: u64, hi: u64) -> Option<u64> {
    if (lo..=hi).contains(&ns) {
        Some(ns)
    } else {
        cx.error(format!(
            "{path}: {} is out of range {} … {}",
            crate::units::format_duration(ns),
            crate::units::format_duration(lo),
            crate::units::format_duration(hi)
        ));
        None
    }
}

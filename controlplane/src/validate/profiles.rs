//! `[pg.N]`, `[queue.N]` (global, and each port's overrides laid over them) and `[cnp]`: shared
//! limits, headroom as written, schedulers, shapers, the CNP queue and policer.

use super::ctx::Ctx;
use super::defaults::*;
use super::pfc::Losslessness;
use super::ports::PortDraft;
use crate::model::*;
use crate::schema::*;
use crate::units::{self, format_rate, format_size};
use std::collections::{BTreeMap, BTreeSet};

/// The `min` (bytes, 0 if not given) and the shared-pool threshold of a `[pg.N]` or
/// `[queue.N]` table: the latter given by at most one of the keys, `None` if none was given.
fn resolve_limits(cx: &mut Ctx, path: &str, k: &LimitSection) -> (u64, Option<Threshold>) {
    let min_bytes = k
        .min
        .as_ref()
        .and_then(|v| cx.size(&format!("{path}.min"), v))
        .unwrap_or(0);
    (min_bytes, resolve_limit(cx, path, k))
}

fn resolve_limit(cx: &mut Ctx, path: &str, k: &LimitSection) -> Option<Threshold> {
    let given: Vec<&str> = [
        ("alpha", k.alpha.is_some()),
        ("static", k.static_limit.is_some()),
        ("dynamic_th", k.dynamic_th.is_some()),
        ("unlimited", k.unlimited == Some(true)),
    ]
    .iter()
    .filter(|(_, g)| *g)
    .map(|(n, _)| *n)
    .collect();
    if given.len() > 1 {
        cx.error(format!(
            "{path}: give only one of alpha, static, dynamic_th, unlimited (found {})",
            given.join(" and ")
        ));
        return None;
    }
    if k.unlimited == Some(false) && given.is_empty() {
        cx.error(format!(
            "{path}.unlimited: false is not a limit; give alpha, static or dynamic_th instead"
        ));
        return None;
    }
    if let Some(v) = &k.alpha {
        return cx
            .real(&format!("{path}.alpha"), v)
            .map(|alpha| Threshold::Dynamic { alpha });
    }
    if let Some(v) = &k.static_limit {
        return cx
            .size(&format!("{path}.static"), v)
            .map(|bytes| Threshold::Static { bytes });
    }
    if let Some(th) = k.dynamic_th {
        return Some(match units::alpha_from_dynamic_th(th) {
            Some(alpha) => Threshold::Dynamic { alpha },
            None => Threshold::Unlimited,
        });
    }
    if k.unlimited == Some(true) {
        return Some(Threshold::Unlimited);
    }
    None
}

/// Looks up `[pg.N]`/`[queue.N]` tables by number, reporting bad or duplicate keys.
fn by_index<'a, T>(cx: &mut Ctx, section: &str, map: &'a BTreeMap<String, T>) -> [Option<&'a T>; NUM_TC] {
    let mut out: [Option<&T>; NUM_TC] = [None; NUM_TC];
    let mut keys: [Option<&str>; NUM_TC] = [None; NUM_TC];
    let what = if section.ends_with("pg") { "PG" } else { "queue" };
    for (k, v) in map {
        let path = format!("{section}.{k}");
        if let Some(i) = cx.key(&path, k, 7, what) {
            let i = usize::from(i);
            if let Some(prev) = keys[i] {
                cx.error(format!("{path}: {what} {i} is already configured as {section}.{prev}"));
            }
            keys[i] = Some(k);
            out[i] = Some(v);
        }
    }
    out
}

/// The index of the pool `name` among `buffer`'s pools of direction `dir`, for `path.pool`:
/// the one pool of that direction when `name` is not given; 0 when no pools are configured
/// (the one implicit pool per direction).
fn resolve_pool(cx: &mut Ctx, path: &str, name: Option<&str>, buffer: &BufferConfig, dir: PoolDir) -> u8 {
    let (what, table) = match dir {
        PoolDir::Ingress => ("ingress", "PG"),
        PoolDir::Egress => ("egress", "queue"),
    };
    let pools: Vec<&PoolConfig> = buffer.pools_of(dir).collect();
    if buffer.pools.is_empty() {
        if let Some(n) = name {
            cx.error(format!(
                "{path}.pool: {n:?}, but no [buffer.pool.{n}] is configured (without pools every {table} shares the one pool)"
            ));
        }
        return 0;
    }
    match name {
        Some(n) => match pools.iter().position(|p| p.name == n) {
            Some(i) => i as u8,
            None => {
                let other = buffer.pools.iter().any(|p| p.name == n);
                let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
                cx.error(format!(
                    "{path}.pool: {n:?} is {}; the {what} pools are: {}",
                    if other {
                        format!("not an {what} pool")
                    } else {
                        "not configured".to_string()
                    },
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ));
                0
            }
        },
        None if pools.len() == 1 => 0,
        None => {
            cx.error(format!(
                "{path}.pool: missing; there are {} {what} pools, so each {table} names its own",
                pools.len()
            ));
            0
        }
    }
}

/// Headroom as written for a lossless PG.
#[derive(Clone, Copy, Debug)]
pub(super) enum HeadroomSpec {
    None,
    Auto,
    Fixed { bytes: u64 },
}

/// PG profiles from `[pg.N]` (`section` = "pg") or a port's merged view of them
/// (`section` = "port[i].pg", which is also how errors name them).
pub(super) fn resolve_pgs(
    cx: &mut Ctx,
    section: &str,
    map: &BTreeMap<String, PgSection>,
    loss: &Losslessness,
    buffer: &BufferConfig,
) -> ([PgProfile; NUM_TC], [(HeadroomSpec, String); NUM_TC]) {
    let sections = by_index(cx, section, map);
    let default = PgSection::default();
    let pgs: [(PgProfile, (HeadroomSpec, String)); NUM_TC] = std::array::from_fn(|g| {
        let s = sections[g].unwrap_or(&default);
        let path = format!("{section}.{g}");
        let lossless = loss.pg[g];
        let (min_bytes, limit) = resolve_limits(cx, &path, &s.limits());
        let shared = match (limit, lossless) {
            (Some(t), _) => t,
            (None, true) => Threshold::Dynamic {
                alpha: DEFAULT_LOSSLESS_PG_ALPHA,
            },
            (None, false) => Threshold::Unlimited,
        };
        if lossless && shared == Threshold::Unlimited {
            cx.error(format!(
                "{path}: PG {g} is lossless, so it needs a shared limit (alpha, static or \
                 dynamic_th below 7) to know when to send XOFF"
            ));
        }
        let mut spec = (HeadroomSpec::None, String::new());
        if let Some(v) = &s.headroom {
            if !lossless {
                cx.error(format!(
                    "{path}.headroom: PG {g} is lossy (no PFC priority maps to it), so it has no headroom"
                ));
            } else if matches!(v, Scalar::Str(t) if t.trim().eq_ignore_ascii_case("auto")) {
                spec = (HeadroomSpec::Auto, v.to_string());
            } else if let Some(bytes) = cx.size(&format!("{path}.headroom"), v) {
                spec = (HeadroomSpec::Fixed { bytes }, v.to_string());
            }
        } else if lossless {
            spec = (HeadroomSpec::Auto, "auto".to_string());
        }
        let mut xon_offset_bytes = 0;
        if lossless {
            xon_offset_bytes = s
                .xon_offset
                .as_ref()
                .and_then(|v| cx.size(&format!("{path}.xon_offset"), v))
                .unwrap_or(DEFAULT_XON_OFFSET_BYTES);
            if let (Threshold::Static { bytes }, true) = (shared, xon_offset_bytes > 0) {
                if xon_offset_bytes > bytes {
                    cx.warn(format!(
                        "{path}.xon_offset ({}) is above the PG's static limit ({}): XON waits until the PG is empty",
                        format_size(xon_offset_bytes),
                        format_size(bytes)
                    ));
                }
            }
        } else if s.xon_offset.is_some() {
            cx.warn(format!(
                "{path}.xon_offset: ignored, PG {g} is lossy and never sends XOFF"
            ));
        }
        let xon_bytes = match (&s.xon, lossless) {
            (Some(v), true) => cx.size(&format!("{path}.xon"), v).unwrap_or(0),
            (Some(_), false) => {
                cx.warn(format!("{path}.xon: ignored, PG {g} is lossy and never sends XOFF"));
                0
            }
            (None, _) => 0,
        };
        let pool = resolve_pool(cx, &path, s.pool.as_deref(), buffer, PoolDir::Ingress);
        (
            PgProfile {
                lossless,
                min_bytes,
                shared,
                xon_offset_bytes,
                xon_bytes,
                pool,
            },
            spec,
        )
    });
    let profiles = std::array::from_fn(|g| pgs[g].0.clone());
    let specs = std::array::from_fn(|g| pgs[g].1.clone());
    (profiles, specs)
}

pub(super) fn resolve_cnp_queue(cx: &mut Ctx, s: &CnpSection) -> u8 {
    s.queue
        .and_then(|q| cx.idx("cnp.queue", q, 7, "queue"))
        .unwrap_or(DEFAULT_CNP_QUEUE)
}

fn resolve_rate_limit(
    cx: &mut Ctx,
    path: &str,
    s: &RateLimitSection,
    min_burst: u64,
    min_burst_why: &str,
) -> Option<RateLimit> {
    let rate = cx.rate(&format!("{path}.rate"), &s.rate);
    let burst = cx.size(&format!("{path}.burst"), &s.burst);
    if rate == Some(0) {
        cx.error(format!("{path}.rate ({}) must be above 0", s.rate));
    }
    if let Some(b) = burst {
        if b < min_burst {
            cx.error(format!(
                "{path}.burst ({}) must be at least {} ({min_burst_why})",
                s.burst,
                format_size(min_burst)
            ));
        }
    }
    Some(RateLimit {
        rate_bps: rate.filter(|r| *r > 0)?,
        burst_bytes: burst.filter(|b| *b >= min_burst)?,
    })
}

/// Queue profiles from `[queue.N]` or a port's merged view (as `resolve_pgs`), with the ECN
/// profiles they use.
#[allow(clippy::too_many_arguments)]
pub(super) fn resolve_queues<'e>(
    cx: &mut Ctx,
    section: &str,
    map: &BTreeMap<String, QueueSection>,
    loss: &Losslessness,
    ecn: &'e BTreeMap<String, EcnProfile>,
    cnp_queue: u8,
    ports: &[PortDraft],
    buffer: &BufferConfig,
) -> ([QueueProfile; NUM_TC], BTreeSet<&'e str>) {
    let sections = by_index(cx, section, map);
    let default = QueueSection::default();
    let max_frame = ports.iter().map(PortDraft::max_frame).max().unwrap_or(1518);
    let max_speed = ports.iter().map(|p| p.speed_bps).max().unwrap_or(0);
    let mut used_ecn: BTreeSet<&str> = BTreeSet::new();
    let queues = std::array::from_fn(|q| {
        let s = sections[q].unwrap_or(&default);
        let path = format!("{section}.{q}");
        let lossless = loss.queue[q];
        let (min_bytes, limit) = resolve_limits(cx, &path, &s.limits());
        let shared = match (limit, lossless) {
            (Some(t), _) => t,
            (None, true) => Threshold::Unlimited,
            (None, false) => Threshold::Dynamic {
                alpha: DEFAULT_LOSSY_QUEUE_ALPHA,
            },
        };
        if !lossless && limit == Some(Threshold::Unlimited) {
            cx.warn(format!(
                "{path}: lossy queue {q} is unlimited and can take the whole shared pool"
            ));
        }
        let is_cnp = usize::from(cnp_queue) == q;
        let strict = match s.sched.as_deref() {
            Some(w) => cx
                .word(&format!("{path}.sched"), w, &[("strict", true), ("wdrr", false)])
                .unwrap_or(false),
            None => is_cnp,
        };
        let weight = s
            .weight
            .and_then(|w| cx.int_in(&format!("{path}.weight"), w, 1, MAX_WEIGHT))
            .and_then(|w| u32::try_from(w).ok())
            .unwrap_or(DEFAULT_WEIGHT);
        if strict && s.weight.is_some() {
            cx.warn(format!("{path}.weight: ignored, queue {q} is strict priority"));
        }
        let sched = if strict {
            SchedMode::Strict
        } else {
            SchedMode::Wdrr { weight }
        };
        let shaper = s.shaper.as_ref().and_then(|sh| {
            let sp = format!("{path}.shaper");
            let r = resolve_rate_limit(cx, &sp, sh, u64::from(max_frame), "one max frame, or the queue stalls")?;
            if max_speed > 0 && r.rate_bps >= max_speed {
                cx.warn(format!(
                    "{sp}.rate ({}) is not below the fastest port ({}), so it never limits",
                    sh.rate,
                    format_rate(max_speed)
                ));
            }
            Some(r)
        });
        let ecn = s.ecn.as_deref().and_then(|name| match ecn.get_key_value(name) {
            Some((k, p)) => {
                used_ecn.insert(k.as_str());
                Some(p.clone())
            }
            None => {
                let defined: Vec<&str> = ecn.keys().map(String::as_str).collect();
                cx.error(format!(
                    "{path}.ecn: there is no profile {name:?} (no [ecn.{name}]; defined: {})",
                    if defined.is_empty() {
                        "none".to_string()
                    } else {
                        defined.join(", ")
                    }
                ));
                None
            }
        });
        if let (Some(p), Threshold::Static { bytes }) = (&ecn, shared) {
            if p.kmin_bytes > bytes.saturating_add(min_bytes) {
                cx.warn(format!(
                    "{path}.ecn: ecn.{}.kmin ({}) is above the queue's limit ({}), so it never marks",
                    p.name,
                    format_size(p.kmin_bytes),
                    format_size(bytes.saturating_add(min_bytes))
                ));
            }
        }
        let pool = resolve_pool(cx, &path, s.pool.as_deref(), buffer, PoolDir::Egress);
        QueueProfile {
            min_bytes,
            shared,
            sched,
            shaper,
            ecn,
            pool,
        }
    });
    (queues, used_ecn)
}

/// A port's view of `[pg.N]`/`[queue.N]`: the global tables with its own overrides laid over
/// them, matched by number.
pub(super) fn overlay<T: Clone + Default>(
    global: &BTreeMap<String, T>,
    over: &BTreeMap<String, T>,
    lay: impl Fn(&T, &T) -> T,
) -> BTreeMap<String, T> {
    let mut merged = global.clone();
    for (k, v) in over {
        let n = k.trim().parse::<u8>().ok();
        let same = n.and_then(|n| global.keys().find(|g| g.trim().parse::<u8>().ok() == Some(n)).cloned());
        match same {
            Some(g) => {
                let laid = lay(&merged[&g], v);
                merged.insert(g, laid);
            }
            None => {
                merged.insert(k.clone(), lay(&T::default(), v));
            }
        }
    }
    merged
}

pub(super) fn resolve_cnp(
    cx: &mut Ctx,
    s: &CnpSection,
    queue: u8,
    queues: &[QueueProfile; NUM_TC],
    loss: &Losslessness,
    ports: &[PortDraft],
) -> CnpConfig {
    let q = usize::from(queue);
    if queues[q].sched != SchedMode::Strict {
        cx.warn(format!(
            "cnp.queue: queue {queue} is not strict priority (queue.{queue}.sched); \
             CNPs should overtake data to keep the control loop short"
        ));
    }
    if loss.queue[q] {
        cx.warn(format!(
            "cnp.queue: queue {queue} is lossless; CNPs would wait behind paused data"
        ));
    }
    let policer = s
        .policer
        .as_ref()
        .and_then(|p| resolve_rate_limit(cx, "cnp.policer", p, MIN_POLICER_BURST, "one minimum frame"));
    if let Some(r) = policer {
        // Each egress port polices its own CNPs: a rate a port cannot exceed never limits
        // there, and whatever a host labels a CNP takes the strict-priority lane at line rate.
        let unlimited: Vec<String> = ports
            .iter()
            .filter(|p| p.speed_bps > 0 && r.rate_bps >= p.speed_bps)
            .map(|p| format!("{} ({})", p.id, format_rate(p.speed_bps)))
            .collect();
        if !unlimited.is_empty() {
            cx.warn(format!(
                "cnp.policer.rate ({}) is not below the speed of port {}, so it never limits CNPs \
                 there: a flood of frames marked as CNPs would take the strict-priority lane at line \
                 rate; use a fraction of the slowest port's speed (configs/default.toml: 5%)",
                format_rate(r.rate_bps),
                unlimited.join(", port ")
            ));
        }
    }
    CnpConfig { queue, policer }
}

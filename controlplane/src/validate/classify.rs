//! `[classify]`: trust, the DSCP/PCP/tc maps and the ordered rules, with the warnings about
//! rules that are never reached or maps that are ignored.

use super::ctx::Ctx;
use super::defaults::*;
use super::ports::PortDraft;
use crate::model::*;
use crate::schema::*;
use std::collections::BTreeMap;

pub(super) fn resolve_classify(cx: &mut Ctx, s: &ClassifySection, ports: &[PortDraft]) -> ClassifyConfig {
    let trust = s
        .trust
        .as_deref()
        .and_then(|t| {
            cx.word(
                "classify.trust",
                t,
                &[("dscp", Trust::Dscp), ("pcp", Trust::Pcp), ("none", Trust::None)],
            )
        })
        .unwrap_or(DEFAULT_TRUST);
    let default_tc = s
        .default_tc
        .and_then(|t| cx.idx("classify.default_tc", t, 7, "tc"))
        .unwrap_or(0);

    let mut dscp_to_tc = [default_tc; 64];
    fill_map(cx, "classify.dscp_to_tc", &s.dscp_to_tc, ("DSCP", 63), &mut dscp_to_tc);
    let mut pcp_to_tc = identity();
    fill_map(cx, "classify.pcp_to_tc", &s.pcp_to_tc, ("PCP", 7), &mut pcp_to_tc);
    let mut tc_to_queue = identity();
    fill_map(cx, "classify.tc_to_queue", &s.tc_to_queue, ("tc", 7), &mut tc_to_queue);
    let mut tc_to_pg = identity();
    fill_map(cx, "classify.tc_to_pg", &s.tc_to_pg, ("tc", 7), &mut tc_to_pg);
    if matches!(trust, Trust::None | Trust::Pcp) && !s.dscp_to_tc.is_empty() {
        cx.warn(format!(
            "classify.dscp_to_tc: ignored because classify.trust is {trust:?}"
        ));
    }
    if matches!(trust, Trust::None | Trust::Dscp) && !s.pcp_to_tc.is_empty() {
        cx.warn(format!(
            "classify.pcp_to_tc: ignored because classify.trust is {trust:?}"
        ));
    }

    let rules = resolve_rules(cx, &s.rules, ports);
    if s.map.len() > MAX_MAP_SETS {
        cx.error(format!(
            "classify.map: {} map sets, at most {MAX_MAP_SETS} are supported",
            s.map.len()
        ));
    }
    let sets = s
        .map
        .iter()
        .map(|(name, m)| resolve_set(cx, name, m, (trust, default_tc), (&dscp_to_tc, &pcp_to_tc, &tc_to_pg)))
        .collect();
    ClassifyConfig {
        trust,
        default_tc,
        dscp_to_tc,
        pcp_to_tc,
        tc_to_queue,
        tc_to_pg,
        rules,
        sets,
    }
}

/// One `[classify.map.NAME]`: each map it gives, whole (an unlisted key takes the default a
/// `[classify]` map gives it, not `[classify]`'s value), the others `[classify]`'s.
fn resolve_set(
    cx: &mut Ctx,
    name: &str,
    m: &MapSetSection,
    (trust, default_tc): (Trust, u8),
    (dscp, pcp, pg): (&[u8; 64], &[u8; 8], &[u8; NUM_TC]),
) -> MapSet {
    // The name is data (an imported file's map name): quoted as TOML would, so a path stays
    // readable whatever it holds.
    let at = format!("classify.map.{}", toml_edit::Key::new(name).display_repr());
    if name.trim().is_empty() {
        cx.error(format!("{at}: a map set's name must not be empty"));
    }
    let mut set = MapSet {
        name: name.to_string(),
        dscp_to_tc: *dscp,
        pcp_to_tc: *pcp,
        tc_to_pg: *pg,
    };
    if let Some(map) = &m.dscp_to_tc {
        set.dscp_to_tc = [default_tc; 64];
        fill_map(cx, &format!("{at}.dscp_to_tc"), map, ("DSCP", 63), &mut set.dscp_to_tc);
        if matches!(trust, Trust::None | Trust::Pcp) {
            cx.warn(format!("{at}.dscp_to_tc: ignored because classify.trust is {trust:?}"));
        }
    }
    if let Some(map) = &m.pcp_to_tc {
        set.pcp_to_tc = identity();
        fill_map(cx, &format!("{at}.pcp_to_tc"), map, ("PCP", 7), &mut set.pcp_to_tc);
        if matches!(trust, Trust::None | Trust::Dscp) {
            cx.warn(format!("{at}.pcp_to_tc: ignored because classify.trust is {trust:?}"));
        }
    }
    if let Some(map) = &m.tc_to_pg {
        set.tc_to_pg = identity();
        fill_map(cx, &format!("{at}.tc_to_pg"), map, ("tc", 7), &mut set.tc_to_pg);
    }
    if m.tc_to_queue.is_some() {
        cx.error(format!(
            "{at}.tc_to_queue: the queue map is the switch's ([classify] tc_to_queue): SAI applies \
             a TC_TO_QUEUE map on the port a frame leaves by, and rocesw picks a frame's queue \
             once, where it arrives, so a map set holds only the ingress maps (dscp_to_tc, \
             pcp_to_tc, tc_to_pg)"
        ));
    }
    set
}

fn identity() -> [u8; NUM_TC] {
    [0, 1, 2, 3, 4, 5, 6, 7]
}

/// Fills `out[key] = value` from a `{ key = value }` table whose values are tcs, queues or PGs
/// (0..=7) and whose keys are `key_what` numbers up to `key_max`.
fn fill_map(cx: &mut Ctx, path: &str, map: &BTreeMap<String, i64>, (key_what, key_max): (&str, u8), out: &mut [u8]) {
    let value_what = match path.rsplit('_').next() {
        Some("queue") => "queue",
        Some("pg") => "PG",
        _ => "tc",
    };
    let mut seen: BTreeMap<u8, &str> = BTreeMap::new();
    for (k, v) in map {
        let p = format!("{path}.{k}");
        let key = cx.key(&p, k, key_max, key_what);
        let value = cx.idx(&p, *v, 7, value_what);
        if let Some(key) = key {
            if let Some(prev) = seen.insert(key, k) {
                cx.error(format!("{p}: {key_what} {key} is already mapped as {path}.{prev}"));
            }
            if let Some(value) = value {
                out[usize::from(key)] = value;
            }
        }
    }
}

fn resolve_rules(cx: &mut Ctx, rules: &[RuleSection], ports: &[PortDraft]) -> Vec<Rule> {
    let mut out = Vec::with_capacity(rules.len());
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut catch_all: Option<usize> = None;
    for (i, r) in rules.iter().enumerate() {
        let path = format!("classify.rule[{i}]");
        let name = r.name.clone().unwrap_or_else(|| format!("rule{i}"));
        if name.trim().is_empty() {
            cx.error(format!("{path}.name: must not be empty"));
        } else if let Some(j) = names.insert(name.clone(), i) {
            cx.warn(format!("{path}.name: {name:?} is also the name of classify.rule[{j}]"));
        }
        let m = &r.matches;
        let mp = format!("{path}.match");
        let in_port = m.in_port.and_then(|p| {
            let id = cx.int_in(&format!("{mp}.in_port"), p, 0, 65535)?;
            let id = u16::try_from(id).ok()?;
            if !ports.iter().any(|d| d.id == id) {
                cx.error(format!("{mp}.in_port: there is no port with id {id}"));
            }
            Some(id)
        });
        let matches = RuleMatch {
            in_port,
            ether_type: m
                .ether_type
                .and_then(|v| cx.int_in(&format!("{mp}.ether_type"), v, 0, 0xffff))
                .and_then(|v| u16::try_from(v).ok()),
            ip_proto: m
                .ip_proto
                .and_then(|v| cx.int_in(&format!("{mp}.ip_proto"), v, 0, 255))
                .and_then(|v| u8::try_from(v).ok()),
            udp_dport: m
                .udp_dport
                .and_then(|v| cx.int_in(&format!("{mp}.udp_dport"), v, 0, 65535))
                .and_then(|v| u16::try_from(v).ok()),
            udp_sport: m
                .udp_sport
                .and_then(|v| cx.int_in(&format!("{mp}.udp_sport"), v, 0, 65535))
                .and_then(|v| u16::try_from(v).ok()),
            dscp: m.dscp.and_then(|v| cx.idx(&format!("{mp}.dscp"), v, 63, "DSCP")),
            pcp: m.pcp.and_then(|v| cx.idx(&format!("{mp}.pcp"), v, 7, "PCP")),
            roce: m.roce,
            cnp: m.cnp,
        };
        let a = &r.action;
        let ap = format!("{path}.action");
        let action = RuleAction {
            tc: a.tc.and_then(|v| cx.idx(&format!("{ap}.tc"), v, 7, "tc")),
            queue: a.queue.and_then(|v| cx.idx(&format!("{ap}.queue"), v, 7, "queue")),
            set_dscp: a
                .set_dscp
                .and_then(|v| cx.idx(&format!("{ap}.set_dscp"), v, 63, "DSCP")),
        };
        if a.tc.is_none() && a.queue.is_none() && a.set_dscp.is_none() {
            cx.error(format!(
                "{ap}: does nothing (rule {name:?}); give tc, queue or set_dscp"
            ));
        }
        if let Some(j) = catch_all {
            cx.warn(format!(
                "{path}: rule {name:?} is never reached: classify.rule[{j}] matches everything"
            ));
        } else if is_catch_all(m) {
            catch_all = Some(i);
        }
        out.push(Rule { name, matches, action });
    }
    out
}

fn is_catch_all(m: &MatchSection) -> bool {
    m.in_port.is_none()
        && m.ether_type.is_none()
        && m.ip_proto.is_none()
        && m.udp_dport.is_none()
        && m.udp_sport.is_none()
        && m.dscp.is_none()
        && m.pcp.is_none()
        && m.roce.is_none()
        && m.cnp.is_none()
}

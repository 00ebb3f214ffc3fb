//! sonic-mgmt's QoS test procedures (tests/saitests/py3/sai_qos_tests.py, tests/pfcwd), step by
//! step, margins included, on a [`Dut`]. Each follows its PTF class: the same traffic from the
//! same kind of ports, the same counters read after each step, the same comparisons; where
//! rocesw reads a counter differently from an ASIC the docs say so (docs/conform.md).
//! The code is ours, written from the procedures' descriptions (configs/sonic/QOS_TESTS.md).

use super::dut::Dut;
use super::params::{self, LosslessPoints};
use super::report::TestResult;
use super::Plan;
use anyhow::Result;
use controlplane::snapshot::Snapshot;
use controlplane::PoolDir;

/// Drop reasons that are ingress drops (SAI's IF_IN_DISCARDS / IN_DROPPED_PKTS).
const INGRESS_DROPS: [&str; 3] = ["ingress_limit", "headroom_overflow", "no_buffer"];
/// Drop reasons that are egress drops (IF_OUT_DISCARDS / OUT_DROPPED_PKTS).
const EGRESS_DROPS: [&str; 3] = ["egress_limit", "wred", "pfc_watchdog"];

fn pfc(s: &Snapshot, port: usize, prio: usize) -> u64 {
    s.ports[port].pfc_tx[prio & 7]
}

/// The source ports' ingress drops as the platform's SAI counts them. rocesw counts a drop
/// where its threshold is: a lossy frame over its ingress PG's limit on the port it came in
/// on (`ingress_limit`). NVIDIA's SAI counts a lossy frame's buffer drop on the egress port
/// and class it was for (tc_no_buffer_discard_uc), whichever threshold refused it: there it is
/// an egress drop (see [`egress_drops`]).
fn ingress_drops(plan: &Plan, s: &Snapshot, port: usize) -> u64 {
    INGRESS_DROPS
        .iter()
        .filter(|r| !(plan.lossy_drops_at_egress && **r == "ingress_limit"))
        .map(|r| s.ports[port].drops.get(r))
        .sum()
}

/// `dst`'s egress drops as the platform's SAI counts them; with NVIDIA's counting, the lossy
/// frames the test's `srcs` dropped at ingress too (every frame of a test's flow is for `dst`).
fn egress_drops(plan: &Plan, s: &Snapshot, dst: usize, srcs: &[usize]) -> u64 {
    let own: u64 = EGRESS_DROPS.iter().map(|r| s.ports[dst].drops.get(r)).sum();
    let moved: u64 = if plan.lossy_drops_at_egress {
        srcs.iter().map(|&p| s.ports[p].drops.get("ingress_limit")).sum()
    } else {
        0
    };
    own + moved
}

/// The traffic class, PG and queue a DSCP maps to on port index `src` (its map set's maps:
/// SONiC binds DSCP → TC and TC → PG per port).
fn class(d: &Dut, src: usize, dscp: u8) -> (usize, usize, usize) {
    let c = d.config().port_maps(src);
    let tc = usize::from(c.dscp_to_tc[usize::from(dscp & 63)]);
    (tc, usize::from(c.tc_to_pg[tc]), usize::from(c.tc_to_queue[tc]))
}

fn send_text(d: &Dut, n: u64, src: usize, dst: usize, dscp: u8, len: usize) -> String {
    format!(
        "send {n} frames {} → {}, DSCP {dscp}, {len} B",
        d.name(src),
        d.name(dst)
    )
}

/// `a - b`, or an error naming the step when the parameters make it negative (as the suite's
/// own arithmetic would send nothing sensible).
fn count(a: i128, what: &str) -> Result<u64, String> {
    u64::try_from(a).map_err(|_| format!("{what} comes out negative ({a}): the parameters do not fit this procedure"))
}

/// Checks that a counter did not move.
fn same(t: &mut TestResult, what: &str, before: u64, after: u64) {
    t.check(
        before == after,
        format!("{what}: unchanged"),
        format!("{before} → {after}"),
    );
}

/// Checks that a counter went up.
fn rose(t: &mut TestResult, what: &str, before: u64, after: u64) {
    t.check(
        after > before,
        format!("{what}: increased"),
        format!("{before} → {after}"),
    );
}

/// The lossless class a test's DSCP must be in, or why the test cannot run.
fn lossless_class(d: &Dut, src: usize, dscp: u8, pg: usize) -> Result<usize, String> {
    let (tc, cpg, _) = class(d, src, dscp);
    if !d.config().pfc.enabled[tc] {
        return Err(format!(
            "DSCP {dscp} maps to TC {tc}, which is not lossless (pfc_enable): no PFC to test"
        ));
    }
    if cpg != pg {
        return Err(format!("DSCP {dscp} maps to PG {cpg}, not the test's PG {pg}"));
    }
    Ok(tc)
}

/// PFCtest (`testQosSaiPfcXoffLimit`): below the trigger count minus the margin no PFC and no
/// drop; past it PFC; past the ingress-drop count an ingress drop; never an egress drop.
pub fn pfc_xoff(d: &mut Dut, plan: &Plan, name: &str, dscp: u8, pg: usize) -> Result<TestResult> {
    let t = TestResult::new(format!("PFCtest[{name}]"));
    let (src, dst) = (plan.src, plan.dst);
    let (prio, mut t) = match lossless_class(d, src, dscp, pg) {
        Ok(x) => (x, t),
        Err(e) => return Ok(t.error(e)),
    };
    let len = plan.lossless_len;
    let p = plan.lossless_points(d, src, pg, len);
    t.explain = p.derivation.clone();
    let m = i128::from(plan.margins.xoff);
    let (tp, dp) = (i128::from(p.trig_pfc), i128::from(p.trig_ingr_drp));
    let counts = (|| {
        Ok::<_, String>([
            count(tp - 1 - m, "trig_pfc − 1 − margin")?,
            count(1 + 2 * m, "1 + 2·margin")?,
            count(dp - tp - 1 - 2 * m, "(trig_ingr_drp − trig_pfc) − 1 − 2·margin")?,
            count(1 + 2 * m, "1 + 2·margin")?,
        ])
    })();
    let counts = match counts {
        Ok(c) => c,
        Err(e) => return Ok(t.error(e)),
    };
    d.set_tx(dst, false)?;
    let base = d.snapshot();
    let pfc_what = format!("PFC frames sent on {} for priority {prio}", d.name(src));
    let ing_what = format!("ingress drops on {}", d.name(src));
    let eg_what = format!("egress drops on {}", d.name(dst));
    for (i, n) in counts.iter().enumerate() {
        t.step(send_text(d, *n, src, dst, dscp, len));
        d.send(src, dst, dscp, *n, len)?;
        let s = d.snapshot();
        if i == 0 {
            same(&mut t, &pfc_what, pfc(&base, src, prio), pfc(&s, src, prio));
        } else {
            rose(&mut t, &pfc_what, pfc(&base, src, prio), pfc(&s, src, prio));
        }
        if i < 3 {
            same(
                &mut t,
                &ing_what,
                ingress_drops(plan, &base, src),
                ingress_drops(plan, &s, src),
            );
        } else {
            rose(
                &mut t,
                &ing_what,
                ingress_drops(plan, &base, src),
                ingress_drops(plan, &s, src),
            );
            let pg_what = format!("PG {pg} drops on {}", d.name(src));
            rose(
                &mut t,
                &pg_what,
                base.ports[src].pgs[pg].dropped_packets,
                s.ports[src].pgs[pg].dropped_packets,
            );
        }
        same(
            &mut t,
            &eg_what,
            egress_drops(plan, &base, dst, &[src]),
            egress_drops(plan, &s, dst, &[src]),
        );
    }
    t.step(format!("transmit on {} again", d.name(dst)));
    d.set_tx(dst, true)?;
    Ok(t)
}

/// PFCXonTest (`testQosSaiPfcXonLimit`): the PG filled past XOFF through three destinations;
/// releasing the second leaves it paused, releasing the third brings it to XON, and no PFC
/// follows for the next 30 s.
pub fn pfc_xon(d: &mut Dut, plan: &Plan, name: &str, dscp: u8, pg: usize) -> Result<TestResult> {
    let t = TestResult::new(format!("PFCXonTest[{name}]"));
    let src = plan.src;
    let Some(&[d1, d2, d3]) = plan.xon_dsts.as_deref() else {
        return Ok(t.skip("needs four ports (a source and three destinations)"));
    };
    let (prio, mut t) = match lossless_class(d, src, dscp, pg) {
        Ok(x) => (x, t),
        Err(e) => return Ok(t.error(e)),
    };
    let len = plan.lossless_len;
    let p = plan.lossless_points(d, src, pg, len);
    t.explain = p.derivation.clone();
    // The suite's dismiss count X and hysteresis H bracket the XON point: the PG holds
    // T − X − H − margin frames once the third destination is released. rocesw's rules put
    // XON at `xon_frames` held, so X + H = T − margin − xon_frames.
    let m = i128::from(plan.margins.xon);
    let tp = i128::from(p.trig_pfc);
    let dismiss_plus_h = tp - m - i128::from(p.xon_frames);
    t.explain.push(format!(
        "pkts_num_dismiss_pfc + pkts_num_hysteresis = trig_pfc − margin − XON frames = {dismiss_plus_h}"
    ));
    let counts = (|| {
        Ok::<_, String>([
            count(tp - dismiss_plus_h - m, "trig_pfc − dismiss − hysteresis − margin")?,
            count(dismiss_plus_h + 2 * m - 1, "dismiss + hysteresis + 2·margin − 1")?,
            1,
        ])
    })();
    let counts = match (p.xon_sends, counts) {
        (Some(c), _) => c,
        (None, Ok(c)) => c,
        (None, Err(e)) => return Ok(t.error(e)),
    };
    for dst in [d1, d2, d3] {
        d.set_tx(dst, false)?;
    }
    let base = d.snapshot();
    let pfc_what = format!("PFC frames sent on {} for priority {prio}", d.name(src));
    let no_drops = |t: &mut TestResult, d: &Dut, s: &Snapshot| {
        same(
            t,
            &format!("ingress drops on {}", d.name(src)),
            ingress_drops(plan, &base, src),
            ingress_drops(plan, s, src),
        );
        for dst in [d1, d2, d3] {
            same(
                t,
                &format!("egress drops on {}", d.name(dst)),
                egress_drops(plan, &base, dst, &[src]),
                egress_drops(plan, s, dst, &[src]),
            );
        }
    };
    for (n, dst) in counts.iter().zip([d1, d2, d3]) {
        t.step(send_text(d, *n, src, dst, dscp, len));
        d.send(src, dst, dscp, *n, len)?;
    }
    let s = d.snapshot();
    rose(&mut t, &pfc_what, pfc(&base, src, prio), pfc(&s, src, prio));
    no_drops(&mut t, d, &s);
    t.step(format!("transmit on {} again", d.name(d2)));
    let before = d.snapshot();
    d.set_tx(d2, true)?;
    let s = d.snapshot();
    rose(&mut t, &pfc_what, pfc(&before, src, prio), pfc(&s, src, prio));
    no_drops(&mut t, d, &s);
    t.step(format!("transmit on {} again", d.name(d3)));
    d.set_tx(d3, true)?;
    let s = d.snapshot();
    no_drops(&mut t, d, &s);
    t.step("wait 30 s".to_string());
    let before = d.snapshot();
    d.wait(30_000_000_000)?;
    let s = d.snapshot();
    same(&mut t, &pfc_what, pfc(&before, src, prio), pfc(&s, src, prio));
    no_drops(&mut t, d, &s);
    t.step(format!("transmit on {} again", d.name(d1)));
    d.set_tx(d1, true)?;
    Ok(t)
}

/// LossyQueueTest (`testQosSaiLossyQueue`): a lossy queue drops at egress at its trigger count,
/// never with PFC.
pub fn lossy_queue(d: &mut Dut, plan: &Plan, dscp: u8, pg: usize) -> Result<TestResult> {
    let mut t = TestResult::new("LossyQueueTest[lossy_queue_1]");
    let (src, dst) = (plan.src, plan.dst);
    let (tc, cpg, q) = class(d, src, dscp);
    if d.config().pfc.enabled[tc] {
        return Ok(t.error(format!("DSCP {dscp} maps to TC {tc}, which is lossless")));
    }
    if cpg != pg {
        return Ok(t.error(format!("DSCP {dscp} maps to PG {cpg}, not the test's PG {pg}")));
    }
    let len = plan.lossy_len;
    let p = params::lossy(d.config(), src, pg, dst, q, len);
    t.explain = p.derivation.clone();
    let m = i128::from(plan.margins.lossy);
    let e = match plan.trig_egr_drp_override {
        Some(e) => i128::from(e),
        None => i128::from(p.trig_drp),
    };
    let counts = match (
        count(e - 1 - m, "trig_egr_drp − 1 − margin"),
        count(1 + 2 * m, "1 + 2·margin"),
    ) {
        (Ok(a), Ok(b)) => [a, b],
        (Err(x), _) | (_, Err(x)) => return Ok(t.error(x)),
    };
    d.set_tx(dst, false)?;
    let base = d.snapshot();
    for (i, n) in counts.iter().enumerate() {
        t.step(send_text(d, *n, src, dst, dscp, len));
        d.send(src, dst, dscp, *n, len)?;
        let s = d.snapshot();
        let pfc_what = format!("PFC frames sent on {} for priority {pg}", d.name(src));
        same(&mut t, &pfc_what, pfc(&base, src, pg), pfc(&s, src, pg));
        let ing = format!("ingress drops on {}", d.name(src));
        same(
            &mut t,
            &ing,
            ingress_drops(plan, &base, src),
            ingress_drops(plan, &s, src),
        );
        let eg = format!("egress drops on {}", d.name(dst));
        if i == 0 {
            same(
                &mut t,
                &eg,
                egress_drops(plan, &base, dst, &[src]),
                egress_drops(plan, &s, dst, &[src]),
            );
        } else {
            rose(
                &mut t,
                &eg,
                egress_drops(plan, &base, dst, &[src]),
                egress_drops(plan, &s, dst, &[src]),
            );
        }
    }
    t.step(format!("transmit on {} again", d.name(dst)));
    d.set_tx(dst, true)?;
    Ok(t)
}

/// WRRtest (`testQosSaiDwrr`): with transmit off, each queue's packets queued; once on, every
/// queue's last packet arrives within `limit` packets of the end (DWRR serves the weights).
pub fn wrr(d: &mut Dut, plan: &Plan) -> Result<TestResult> {
    wrr_run(
        d,
        plan,
        TestResult::new("WRRtest[wrr]"),
        &plan.wrr_counts,
        plan.wrr_limit,
    )
}

/// The suite's WRRtest with `counts` (DSCP, frames) and `limit`, reported in `t`.
fn wrr_run(d: &mut Dut, plan: &Plan, mut t: TestResult, counts: &[(u8, u64)], limit: u64) -> Result<TestResult> {
    let (src, dst) = (plan.src, plan.dst);
    let len = plan.wrr_len;
    d.set_tx(dst, false)?;
    d.capture(dst, true);
    let mut sent = Vec::new();
    for &(dscp, n) in counts {
        let (_, _, q) = class(d, src, dscp);
        t.explain
            .push(format!("DSCP {dscp} → queue {q}: {n} frames of {len} B"));
        t.step(send_text(d, n, src, dst, dscp, len));
        d.send(src, dst, dscp, n, len)?;
        sent.push((dscp, n));
    }
    t.step(format!("transmit on {} again; capture what it sends", d.name(dst)));
    d.set_tx(dst, true)?;
    let got = d.capture(dst, false);
    let total: u64 = sent.iter().map(|(_, n)| n).sum();
    t.check(
        got.len() as u64 == total,
        format!("{total} frames received"),
        format!("{}", got.len()),
    );
    let mut seen = std::collections::BTreeMap::<u8, u64>::new();
    for (pos, dscp) in got.iter().enumerate() {
        let c = seen.entry(*dscp).or_default();
        *c += 1;
        if let Some(&(_, n)) = sent.iter().find(|(x, _)| x == dscp) {
            if *c == n {
                let diff = total - (pos as u64 + 1);
                let (_, _, q) = class(d, src, *dscp);
                t.check(
                    diff < limit,
                    format!("DSCP {dscp} (queue {q}): its last frame within {limit} of the end"),
                    format!("{diff} frames after it"),
                );
            }
        }
    }
    Ok(t)
}

/// DscpMappingPB (`testQosSaiDscpQueueMapping`): one frame per DSCP 0-63; each queue's
/// counter moves by the number of DSCPs the maps send to it, and no DSCP is rewritten.
pub fn dscp_mapping(d: &mut Dut, plan: &Plan) -> Result<TestResult> {
    let mut t = TestResult::new("DscpMappingPB[dscp_mapping]");
    let (src, dst) = (plan.src, plan.dst);
    let mut expected = [0u64; 8];
    for dscp in 0..64u8 {
        expected[class(d, src, dscp).2 & 7] += 1;
    }
    match plan.yaml.as_ref().filter(|y| y.set("dscp_mapping").is_some()) {
        Some(y) => {
            for (q, e) in expected.iter_mut().enumerate() {
                *e = y.int("dscp_mapping", &format!("q{q}_num_of_pkts")).unwrap_or(0).max(0) as u64;
            }
            t.explain
                .push(format!("frames per queue from {}.dscp_mapping: {expected:?}", y.path));
        }
        None => t.explain.push(format!(
            "frames per queue from DSCP_TO_TC_MAP and TC_TO_QUEUE_MAP: {expected:?}"
        )),
    }
    let base = d.snapshot();
    d.capture(dst, true);
    t.step(format!(
        "send one 64 B frame per DSCP 0-63, {} → {}",
        d.name(src),
        d.name(dst)
    ));
    for dscp in 0..64u8 {
        d.send(src, dst, dscp, 1, 64)?;
    }
    let got = d.capture(dst, false);
    let s = d.snapshot();
    for (q, want) in expected.iter().enumerate() {
        let moved = s.ports[dst].queues[q].tx_packets - base.ports[dst].queues[q].tx_packets;
        t.check(moved == *want, format!("queue {q}: {want} frames"), format!("{moved}"));
    }
    let sent: Vec<u8> = (0..64).collect();
    t.check(
        got == sent,
        "each frame received once, its DSCP unchanged".to_string(),
        if got == sent {
            "64 frames, DSCPs 0-63".into()
        } else {
            format!("{got:?}")
        },
    );
    Ok(t)
}

/// One PG HdrmPoolSizeTest fills: (source, DSCP, PG, XOFF frame, headroom frames after it).
pub type HdrmPg = (usize, u8, usize, u64, u64);

/// HdrmPoolSizeTest's fill, by the platform's rules: which PGs, each one's XOFF frame and
/// the headroom frames it then takes, until the shared headroom pool is out.
#[derive(Debug, Clone)]
pub struct HdrmFill {
    /// The ingress pool (index among the ingress pools).
    pub pool_index: u8,
    /// Its name.
    pub pool_name: String,
    /// Its shared headroom pool, in cells.
    pub shp: u64,
    /// Cells per frame.
    pub occ: u64,
    /// The source ports (indices), in the order the suite takes them.
    pub srcs: Vec<usize>,
    /// Every (source, DSCP, PG) the suite may fill, sources first (its `sidx_dscp_pg_tuples`).
    pub tuples: Vec<(usize, u8, usize)>,
    /// The PGs filled: (source, DSCP, PG, XOFF frame, headroom frames after it).
    pub plans: Vec<HdrmPg>,
    /// Cells of shared headroom left after them (less than a frame when the pool runs out).
    pub left: u64,
}

/// Why there is no [`HdrmFill`]: the test is an error, or skipped.
pub enum NoHdrmFill {
    /// The test cannot run on this config: why.
    Error(String),
    /// The test does not apply: why.
    Skip(String),
}

/// [`HdrmFill`] of `plan` on the switch as configured.
pub fn hdrm_fill(d: &Dut, plan: &Plan) -> Result<HdrmFill, NoHdrmFill> {
    let dst = plan.dst;
    let cfg = d.config();
    let cell = u64::from(cfg.buffer.cell_bytes);
    let len = plan.lossless_len;
    let occ = params::occupancy(cfg, len);
    let pgs: Vec<(u8, usize)> = plan
        .lossless_dscps
        .iter()
        .map(|&dscp| (dscp, class(d, plan.src, dscp).1))
        .filter(|&(dscp, _)| cfg.pfc.enabled[class(d, plan.src, dscp).0])
        .collect();
    if pgs.is_empty() {
        return Err(NoHdrmFill::Error("no lossless DSCP".into()));
    }
    let pool_index = cfg.ports[dst].pgs[pgs[0].1].pool;
    let Some(pool) = cfg.buffer.pools_of(PoolDir::Ingress).nth(usize::from(pool_index)) else {
        return Err(NoHdrmFill::Skip(
            "the config has no BUFFER_POOL: no shared headroom pool to fill".into(),
        ));
    };
    if pool.headroom_bytes == 0 {
        return Err(NoHdrmFill::Skip(format!(
            "{} has no shared headroom pool (BUFFER_POOL xoff): each PG has headroom of its own",
            pool.name
        )));
    }
    // With an MMU in slices (XPEs) each slice has its share of the headroom pool, and only
    // the PGs of one slice's ports draw on it: the sources are the first source's slice's.
    let shp = pool.headroom_bytes / cell / u64::from(cfg.buffer.slices.max(1));
    let slice = (0..cfg.ports.len())
        .find(|&p| p != dst)
        .map_or(0, |p| cfg.ports[p].slice);
    let srcs: Vec<usize> = (0..cfg.ports.len())
        .filter(|&p| p != dst && cfg.ports[p].slice == slice)
        .take(7)
        .collect();
    let tuples: Vec<(usize, u8, usize)> = srcs
        .iter()
        .flat_map(|&s| pgs.iter().map(move |&(dscp, pg)| (s, dscp, pg)))
        .collect();
    // Each PG's point by the rules, with the pool as the PGs before it leave it: its XOFF
    // frame, and the headroom it then has left, until the headroom pool is out.
    let mut others = 0;
    let mut left = shp;
    let mut plans = Vec::new();
    for &(s, dscp, pg) in &tuples {
        let p = params::lossless_with(cfg, s, pg, len, others);
        let (shared, in_headroom, _) = params::lossless_fill(cfg, s, pg, len, others, p.trig_pfc);
        let h = cfg.ports[s].headroom_bytes[pg].div_ceil(cell);
        left = left.saturating_sub(in_headroom);
        let fill = (h - in_headroom).min(left) / occ;
        left -= fill * occ;
        others += shared;
        plans.push((s, dscp, pg, p.trig_pfc, fill));
        if left < occ {
            break;
        }
    }
    Ok(HdrmFill {
        pool_index,
        pool_name: pool.name.clone(),
        shp,
        occ,
        srcs,
        tuples,
        plans,
        left,
    })
}

/// HdrmPoolSizeTest's PGs as `--params`' `hdrm_pool_size` set holds them, as the suite reads
/// it: `pgs_num` PGs of the (source, DSCP) tuples in order, each sent its XOFF count
/// (`pkts_num_trig_pfc_multi[i]`, else `pkts_num_trig_pfc`), then `pkts_num_hdrm_full` headroom
/// frames (`pkts_num_hdrm_full_multi[i]`, rocesw's own, where given: ports with profiles of
/// different cable lengths have headroom of different sizes, which the suite's one count
/// cannot say), the last PG `pkts_num_hdrm_partial`, counts in cells of `cell_size`. `None` when the
/// set lacks them (as NVIDIA's file does: its generator fills them in on the testbed); then
/// the rules' counts stand.
fn hdrm_from_params(plan: &Plan, fill: &HdrmFill) -> Option<Result<Vec<HdrmPg>, String>> {
    const SET: &str = "hdrm_pool_size";
    let y = plan.yaml.as_ref()?;
    let (num, full, partial) = (
        y.int(SET, "pgs_num")?,
        y.int(SET, "pkts_num_hdrm_full")?,
        y.int(SET, "pkts_num_hdrm_partial")?,
    );
    let len = plan.lossless_len;
    let multi = y.ints(SET, "pkts_num_trig_pfc_multi");
    // rocesw's own, beside the suite's one count: each PG's headroom where ports differ.
    let full_multi = y.ints(SET, "pkts_num_hdrm_full_multi");
    let single = y.int(SET, "pkts_num_trig_pfc").filter(|&t| t > 0);
    let num = match usize::try_from(num) {
        Ok(n) if n >= 1 && n <= fill.tuples.len() => n,
        _ => {
            return Some(Err(format!(
                "{}.{SET}.pgs_num = {num}: the switch has {} PGs to fill ({} sources × the lossless DSCPs)",
                y.path,
                fill.tuples.len(),
                fill.srcs.len()
            )))
        }
    };
    let mut out = Vec::with_capacity(num);
    for (i, &(s, dscp, pg)) in fill.tuples.iter().take(num).enumerate() {
        let trig = match multi.as_ref().and_then(|m| m.get(i)).copied().or(single) {
            Some(t) => y.cells_as_frames(SET, t, len),
            None => fill.plans.get(i).map_or(0, |p| p.3),
        };
        let h = match full_multi.as_ref().and_then(|m| m.get(i)).copied() {
            Some(h) if i + 1 < num => h,
            _ if i + 1 < num => full,
            _ => partial,
        };
        out.push((s, dscp, pg, trig, y.cells_as_frames(SET, h, len)));
    }
    Some(Ok(out))
}

/// HdrmPoolSizeTest (`testQosSaiHeadroomPoolSize`): PGs of several sources filled to XOFF, then
/// their headroom until the shared headroom pool is used up: the next frame is an ingress
/// drop; the pool's watermark follows. The counts are the rules', or `--params`' own
/// (`hdrm_pool_size`: a pool cut since they were written runs out before they are sent).
pub fn hdrm_pool_size(d: &mut Dut, plan: &Plan) -> Result<TestResult> {
    let mut t = TestResult::new("HdrmPoolSizeTest[hdrm_pool_size]");
    let dst = plan.dst;
    let len = plan.lossless_len;
    let fill = match hdrm_fill(d, plan) {
        Ok(f) => f,
        Err(NoHdrmFill::Error(e)) => return Ok(t.error(e)),
        Err(NoHdrmFill::Skip(e)) => return Ok(t.skip(e)),
    };
    let (pool_index, shp, occ, srcs) = (fill.pool_index, fill.shp, fill.occ, fill.srcs.clone());
    let m = plan.margins.hdrm;
    let (plans, expected) = match hdrm_from_params(plan, &fill) {
        Some(Err(e)) => return Ok(t.error(e)),
        Some(Ok(plans)) => {
            let headroom: u64 = plans.iter().map(|p| p.4 * occ).sum();
            t.explain.push(format!(
                "{}.hdrm_pool_size: {} PGs: XOFF at frames {:?}, then headroom frames {:?}, of {occ} cell(s) \
                 (at least {headroom} cells of {}'s {shp} cells of shared headroom)",
                plan.yaml.as_ref().map_or("", |y| y.path.as_str()),
                plans.len(),
                plans.iter().map(|p| p.3).collect::<Vec<_>>(),
                plans.iter().map(|p| p.4).collect::<Vec<_>>(),
                fill.pool_name
            ));
            (plans, headroom)
        }
        None => {
            let left = fill.left;
            if left >= occ {
                return Ok(t.skip(format!(
                    "the shared headroom pool ({shp} cells) holds the headroom of all {} PGs the switch's other {} ports have ({} cells): it cannot run out",
                    fill.tuples.len(),
                    srcs.len(),
                    shp - left
                )));
            }
            t.explain.push(format!(
                "{} ({shp} cells of shared headroom) runs out after {} PGs: XOFF at frames {:?}, then headroom frames {:?}, of {occ} cell(s)",
                fill.pool_name,
                fill.plans.len(),
                fill.plans.iter().map(|p| p.3).collect::<Vec<_>>(),
                fill.plans.iter().map(|p| p.4).collect::<Vec<_>>()
            ));
            (fill.plans.clone(), shp - left)
        }
    };
    d.set_tx(dst, false)?;
    d.clear_watermarks();
    let base = d.snapshot();
    // Each PG to its XOFF point: the count short of it by the margin, then single frames until
    // its PFC counter moves (the suite allows 10 more).
    for &(s, dscp, pg, trig, _) in &plans {
        let before = d.snapshot();
        let first = trig.saturating_sub(1 + m);
        t.step(format!(
            "{}, then single frames until PFC",
            send_text(d, first, s, dst, dscp, len)
        ));
        d.send(s, dst, dscp, first, len)?;
        let mut singles = 0;
        while pfc(&d.snapshot(), s, pg) == pfc(&before, s, pg) && singles < 2 * m + 10 {
            d.send(s, dst, dscp, 1, len)?;
            singles += 1;
        }
        let after = d.snapshot();
        rose(
            &mut t,
            &format!(
                "PFC on {} priority {pg} within {} single frames (took {singles})",
                d.name(s),
                2 * m + 10
            ),
            pfc(&before, s, pg),
            pfc(&after, s, pg),
        );
    }
    let used: Vec<usize> = {
        let mut v: Vec<usize> = plans.iter().map(|p| p.0).collect();
        v.dedup();
        v
    };
    let ing_all = |s: &Snapshot| used.iter().map(|&p| ingress_drops(plan, s, p)).sum::<u64>();
    for (i, &(s, dscp, _, _, f)) in plans.iter().enumerate() {
        let f = if i + 1 == plans.len() { f.saturating_sub(m) } else { f };
        t.step(send_text(d, f, s, dst, dscp, len));
        d.send(s, dst, dscp, f, len)?;
    }
    let s = d.snapshot();
    let by_port: Vec<String> = used
        .iter()
        .filter(|&&p| ingress_drops(plan, &s, p) > ingress_drops(plan, &base, p))
        .map(|&p| format!("{} {:?}", d.name(p), s.ports[p].drops))
        .collect();
    t.check(
        ing_all(&s) - ing_all(&base) <= m,
        format!("ingress drops on the sources: at most {m}"),
        format!("{} {}", ing_all(&s) - ing_all(&base), by_port.join("; ")),
    );
    let (last, dscp) = plans.last().map(|p| (p.0, p.1)).expect("non-empty");
    let n = 1 + 2 * m;
    t.step(send_text(d, n, last, dst, dscp, len));
    let before = d.snapshot();
    d.send(last, dst, dscp, n, len)?;
    let s = d.snapshot();
    rose(
        &mut t,
        &format!("ingress drops on {}", d.name(last)),
        ingress_drops(plan, &before, last),
        ingress_drops(plan, &s, last),
    );
    same(
        &mut t,
        &format!("egress drops on {}", d.name(dst)),
        egress_drops(plan, &base, dst, &srcs),
        egress_drops(plan, &s, dst, &srcs),
    );
    let (_, hdrm) = d.switch().pool.pool(PoolDir::Ingress, usize::from(pool_index));
    let wm = u64::from(hdrm[2]);
    t.check(
        wm + m * occ >= expected && wm <= shp,
        format!(
            "headroom pool watermark: {expected} cells (− {}), at most {shp}",
            m * occ
        ),
        format!("{wm} cells"),
    );
    t.step(format!("transmit on {} again", d.name(dst)));
    d.set_tx(dst, true)?;
    Ok(t)
}

/// The step sizes of the watermark tests: first `1 + margin`, then a quarter of the rest each,
/// up to `total`, then one more step past it (the overflow).
fn wm_steps(total: u64, margin: u64) -> Vec<u64> {
    let mut steps = Vec::new();
    let first = (1 + margin).min(total);
    steps.push(first);
    let quarter = (total / 4).max(1);
    let mut done = first;
    while done < total {
        let n = quarter.min(total - done);
        steps.push(n);
        done += n;
    }
    steps
}

/// Which watermark a watermark test reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watermark {
    /// The source PG's shared watermark.
    PgShared,
    /// The source PG's headroom watermark.
    PgHeadroom,
    /// The destination queue's shared watermark.
    QueueShared,
    /// The ingress pool's watermark (the PG's pool).
    IngressPool,
}

/// The PG and queue watermark tests (`PGSharedWatermarkTest`, `PGHeadroomWatermarkTest`,
/// `QSharedWatermarkTest`, `BufferPoolWatermarkTest`) on the lossless class: fill in steps with
/// the destination's transmit off, and after each step the watermark (cleared first, as
/// `sonic-clear` does) is within the margin of what was sent.
pub fn watermark(d: &mut Dut, plan: &Plan, which: Watermark, dscp: u8, pg: usize) -> Result<TestResult> {
    let name = match which {
        Watermark::PgShared => "PGSharedWatermarkTest[wm_pg_shared_lossless]",
        Watermark::PgHeadroom => "PGHeadroomWatermarkTest[wm_pg_headroom]",
        Watermark::QueueShared => "QSharedWatermarkTest[wm_q_shared_lossless]",
        Watermark::IngressPool => "BufferPoolWatermarkTest[wm_buf_pool_lossless]",
    };
    let t = TestResult::new(name);
    let (src, dst) = (plan.src, plan.dst);
    let mut t = t;
    if let Err(e) = lossless_class(d, src, dscp, pg) {
        return Ok(t.error(e));
    }
    let (_, _, q) = class(d, src, dscp);
    let len = plan.lossless_len;
    let p: LosslessPoints = plan.lossless_points(d, src, pg, len);
    let cfg = d.config().clone();
    let cell = u64::from(cfg.buffer.cell_bytes);
    let occ = p.occupancy;
    t.explain = p.derivation.clone();
    let q_min = cfg.ports[dst].queues[q].min_bytes.div_ceil(cell);
    let m = match which {
        Watermark::PgShared => plan.margins.wm_pg_shared,
        Watermark::PgHeadroom => plan.margins.wm_pg_headroom,
        Watermark::QueueShared => plan.margins.wm_q_shared,
        Watermark::IngressPool => plan.margins.wm_pool,
    };
    // (frames before the watermark starts to move, frames over which it moves, cells per
    // frame it gains, its ceiling in cells)
    let (fill_min, total, ceiling) = match which {
        Watermark::PgShared => (p.fill_min, p.trig_pfc - p.fill_min, p.shared_cells_at_xoff),
        Watermark::PgHeadroom => (p.trig_pfc, p.trig_ingr_drp - p.trig_pfc - 1, u64::MAX),
        Watermark::QueueShared => (q_min / occ, p.trig_ingr_drp - 1 - q_min / occ, u64::MAX),
        Watermark::IngressPool => (p.fill_min, p.trig_pfc - p.fill_min, p.shared_cells_at_xoff),
    };
    t.explain.push(format!(
        "the watermark starts to move after {fill_min} frames and moves {occ} cell(s) a frame for {total} frames"
    ));
    let pool_index = usize::from(cfg.ports[src].pgs[pg].pool);
    let read = |d: &Dut| -> u64 {
        let sw = d.switch();
        u64::from(match which {
            Watermark::PgShared => sw.pg_use(src, pg).peak_shared,
            Watermark::PgHeadroom => sw.pg_use(src, pg).peak_headroom,
            Watermark::QueueShared => sw.queue_use(dst, q).peak.saturating_sub(q_min as u32),
            Watermark::IngressPool => sw.pool.pool(PoolDir::Ingress, pool_index).0[2],
        })
    };
    d.set_tx(dst, false)?;
    d.clear_watermarks();
    t.step(send_text(d, fill_min, src, dst, dscp, len));
    d.send(src, dst, dscp, fill_min, len)?;
    let wm = read(d);
    t.check(
        wm <= m * occ,
        format!("watermark: 0 (at most {} B)", m * occ * cell),
        format!("{} B", wm * cell),
    );
    let mut expected = 0u64;
    let steps = wm_steps(total, m);
    let last = steps.len();
    for (i, n) in steps.into_iter().chain([(total / 4).max(1)]).enumerate() {
        t.step(send_text(d, n, src, dst, dscp, len));
        d.send(src, dst, dscp, n, len)?;
        let overflow = i == last;
        if !overflow {
            expected = (expected + n * occ).min(ceiling);
        }
        let wm = read(d);
        let (lo, hi) = (
            expected.saturating_sub(m * occ),
            expected + m * occ + if overflow { occ } else { 0 },
        );
        t.check(
            (lo..=hi).contains(&wm),
            format!(
                "watermark {} B ({lo}..={hi} cells){}",
                expected * cell,
                if overflow { ", saturated" } else { "" }
            ),
            format!("{} B ({wm} cells)", wm * cell),
        );
    }
    t.step(format!("transmit on {} again", d.name(dst)));
    d.set_tx(dst, true)?;
    Ok(t)
}

/// The PFC watchdog (tests/pfcwd: test_pfcwd_function's actions, test_pfcwd_timer_accuracy's
/// bounds): a storm on a lossless priority of a port holding frames is detected within the
/// detection time plus one poll interval (and within the suite's wait), the action applies
/// to the next 100 frames, and restoration follows the storm's end within the restoration time
/// plus one poll interval.
pub fn pfcwd(d: &mut Dut, plan: &Plan, dscp: u8) -> Result<TestResult> {
    let mut t = TestResult::new("PfcWdTest[pfcwd]");
    let (src, port) = (plan.src, plan.dst);
    let cfg = d.config().clone();
    let Some(wd) = cfg.pfc.watchdog.clone() else {
        return Ok(t.skip("no PFC_WD entry: the watchdog is off"));
    };
    let (tc, _, q) = class(d, src, dscp);
    if !cfg.pfc.enabled[tc] {
        return Ok(t.error(format!("DSCP {dscp} maps to TC {tc}, which is not lossless")));
    }
    let poll = plan.wd_poll_ns;
    let wait_limit = plan.wd_detect_wait_ns;
    t.explain.push(format!(
        "detection {} ms, restoration {} ms, action {:?}, poll interval {} ms (PFC_WD|GLOBAL|POLL_INTERVAL); the suite waits {} s for a detection",
        wd.detection_ns / 1_000_000,
        wd.restoration_ns / 1_000_000,
        wd.action,
        poll / 1_000_000,
        wait_limit / 1_000_000_000
    ));
    // A storm: the peer on `port` pauses priority `tc` continuously (a frame per 50 µs),
    // while frames for it wait in the queue.
    t.step(format!(
        "storm: {}'s peer sends PFC for priority {tc}; {} sends 10 frames to it, DSCP {dscp}",
        d.name(port),
        d.name(src)
    ));
    let base = d.snapshot();
    let started = d.now();
    d.start_storm(port, 1 << tc, 20_000);
    d.send(src, port, dscp, 10, 1024)?;
    let step = (poll / 20).max(1_000_000);
    let mut detected = None;
    while d.now() < started + wait_limit {
        d.wait(step)?;
        if d.snapshot().ports[port].watchdog_storms[q] > base.ports[port].watchdog_storms[q] {
            detected = Some(d.now() - started);
            break;
        }
    }
    match detected {
        None => t.check(
            false,
            format!(
                "storm detected within the suite's {} s wait",
                wait_limit / 1_000_000_000
            ),
            "not detected".to_string(),
        ),
        Some(at) => {
            let ok = at >= wd.detection_ns && at < wd.detection_ns + poll + step;
            t.check(
                ok,
                format!(
                    "storm detected after the detection time, before detection + poll ({} .. {} ms)",
                    wd.detection_ns / 1_000_000,
                    (wd.detection_ns + poll) / 1_000_000
                ),
                format!("after {} ms (looked every {} ms)", at / 1_000_000, step / 1_000_000),
            );
        }
    }
    t.step(format!("{} sends 100 frames to the stormed queue", d.name(src)));
    let before = d.snapshot();
    d.send(src, port, dscp, 100, 1024)?;
    let s = d.snapshot();
    let dropped = s.ports[port].drops.get("pfc_watchdog") - before.ports[port].drops.get("pfc_watchdog");
    let sent = s.ports[port].queues[q].tx_packets - before.ports[port].queues[q].tx_packets;
    match wd.action {
        controlplane::WatchdogAction::Drop => t.check(
            dropped >= 100,
            "action drop: the 100 frames dropped".to_string(),
            format!("{dropped} dropped, {sent} sent"),
        ),
        controlplane::WatchdogAction::Forward => t.check(
            sent >= 100,
            "action forward: the 100 frames sent".to_string(),
            format!("{sent} sent, {dropped} dropped"),
        ),
        controlplane::WatchdogAction::Alert => t.check(
            dropped == 0 && sent == 0,
            "action alert: the 100 frames held (paused), none dropped".to_string(),
            format!("{sent} sent, {dropped} dropped"),
        ),
    }
    t.step("the storm stops".to_string());
    d.stop_storm(port);
    let stopped = d.now();
    let mut restored = None;
    while d.now() < stopped + 2 * wd.restoration_ns + poll {
        d.wait(step)?;
        if d.snapshot().ports[port].watchdog_restores[q] > base.ports[port].watchdog_restores[q] {
            restored = Some(d.now() - stopped);
            break;
        }
    }
    let ok =
        restored.is_some_and(|at| at >= wd.restoration_ns.saturating_sub(step) && at < wd.restoration_ns + poll + step);
    t.check(
        ok,
        format!(
            "restored after the restoration time, before restoration + poll ({} .. {} ms)",
            wd.restoration_ns / 1_000_000,
            (wd.restoration_ns + poll) / 1_000_000
        ),
        restored.map_or("not restored".to_string(), |at| format!("after {} ms", at / 1_000_000)),
    );
    d.settle()?;
    Ok(t)
}

/// The DWRR weight change (`testQosSaiDwrrWeightChange`, the `wrr_chg` set): the lossy and
/// the lossless scheduler profiles' weights are set to `lossy_weight` and `lossless_weight`
/// while the switch runs (the suite writes them to CONFIG_DB), then WRRtest runs with
/// `wrr_chg`'s counts: DWRR serves the new weights at once. Every port's lossless queues (the
/// queues of the PFC-enabled classes) take the lossless weight, its other weighted queues the
/// lossy one, as the two profiles are bound on SONiC. The weights are put back after.
/// sonic-mgmt skips the test on NVIDIA platforms (tests_mark_conditions.yaml); so does this
/// where NVIDIA's parameters give a `wrr_chg` set (its weights, 8 and 8, are not meant to
/// pass), not with the computed ones (the suite's default set) nor with numbers rocesw wrote
/// (`--write-params`, told by their `dscp_mapping` set, which sonic-mgmt's files have not).
pub fn wrr_chg(d: &mut Dut, plan: &Plan) -> Result<TestResult> {
    const SET: &str = "wrr_chg";
    let mut t = TestResult::new("WRRtest[wrr_chg]");
    let nvidias = plan
        .yaml
        .as_ref()
        .is_some_and(|y| y.set(SET).is_some() && y.set("dscp_mapping").is_none());
    if plan.nvidia && nvidias {
        return Ok(t.skip(
            "sonic-mgmt skips testQosSaiDwrrWeightChange on Mellanox platforms (tests/common/plugins/conditional_mark/tests_mark_conditions.yaml)",
        ));
    }
    let y = plan.yaml.as_ref().filter(|y| y.set(SET).is_some());
    let int = |field: &str, default: u64| y.and_then(|y| y.int(SET, field)).map_or(default, |v| v.max(0) as u64);
    // The suite's defaults (every qos_params file with a wrr_chg set has these).
    let (lossy_w, lossless_w) = (int("lossy_weight", 8), int("lossless_weight", 30));
    let q = |n: u8, default: u64| int(&format!("q{n}_num_of_pkts"), default);
    let counts: Vec<(u8, u64)> = super::wrr_dscps(plan.qos_remap)
        .iter()
        .map(|&(dscp, n, lossless)| (dscp, q(n, if lossless { 300 } else { 80 })))
        .collect();
    let limit = int("limit", 80);
    let (Ok(lossy), Ok(lossless)) = (u32::try_from(lossy_w), u32::try_from(lossless_w)) else {
        return Ok(t.error(format!("{SET}: weights {lossy_w} and {lossless_w} are out of range")));
    };
    if lossy == 0 || lossless == 0 {
        return Ok(t.error(format!("{SET}: a weight of 0 ({lossy_w}, {lossless_w})")));
    }
    let before = d.config().clone();
    let mut cfg = before.clone();
    let lossless_queues: Vec<usize> = (0..8)
        .filter(|&tc| cfg.pfc.enabled[tc])
        .map(|tc| usize::from(cfg.classify.tc_to_queue[tc]))
        .collect();
    let mut changed = 0;
    for port in &mut cfg.ports {
        for (qi, queue) in port.queues.iter_mut().enumerate() {
            if let controlplane::SchedMode::Wdrr { weight } = &mut queue.sched {
                *weight = if lossless_queues.contains(&qi) { lossless } else { lossy };
                changed += 1;
            }
        }
    }
    if changed == 0 {
        return Ok(t.error("no queue is weighted (DWRR): no weight to change"));
    }
    t.explain.push(format!(
        "{}: lossless queues {lossless_queues:?} weight {lossless}, the other weighted queues {lossy}",
        y.map_or("the suite's defaults".to_string(), |y| format!("{}.{SET}", y.path))
    ));
    t.step(format!(
        "set the lossless scheduler's weight to {lossless} and the lossy one's to {lossy} on every port"
    ));
    d.reconfigure(&cfg)?;
    let t = wrr_run(d, plan, t, &counts, limit)?;
    d.reconfigure(&before)?;
    Ok(t)
}

/// One of sonic-mgmt's `ecn_N` parameter sets (DscpEcnSend).
#[derive(Debug, Clone)]
struct EcnSet {
    dscp: u8,
    ecn: u8,
    frames: u64,
    len: usize,
    occ: u64,
    limit: u64,
    min_limit: u64,
}

/// The counts of set `ecn_i` the rules give: the suite's DSCP, ECN and frame count (fewer
/// if the queue would drop them), `limit` and `min_limit` the cells that leave. With ECN
/// `min_limit` is the frame count, so the suite's 3-7 % band does not apply (its marks depend
/// on the queue's WRED-ECN profile, checked apart).
fn ecn_computed(d: &Dut, plan: &Plan, i: usize) -> EcnSet {
    let (dscp, ecn, frames) = ECN_DEFAULTS[(i - 1).min(3)];
    let len = 1000;
    let occ = (len as u64).div_ceil(u64::from(d.config().buffer.cell_bytes));
    let (tc, pg, q) = class(d, plan.src, dscp);
    // As many as the queue holds without a drop (all of them on any real buffer).
    let frames = if d.config().pfc.enabled[tc] {
        frames
    } else {
        frames.min(
            params::lossy(d.config(), plan.src, pg, plan.dst, q, len)
                .trig_drp
                .saturating_sub(1),
        )
    };
    let cells = frames * occ;
    EcnSet {
        dscp,
        ecn,
        frames,
        len,
        occ,
        limit: cells,
        min_limit: if ecn == 0 { cells } else { frames },
    }
}

/// `ecn_i`'s counts as `--write-params` writes them (sonic-mgmt's fields, `cell_size` the
/// config's).
pub fn ecn_written(d: &Dut, plan: &Plan, i: usize) -> serde_json::Value {
    let e = ecn_computed(d, plan, i);
    serde_json::json!({"dscp": e.dscp, "ecn": e.ecn, "num_of_pkts": e.frames, "limit": e.limit,
                       "min_limit": e.min_limit, "packet_size": e.len,
                       "cell_size": d.config().buffer.cell_bytes})
}

/// The suite's `ecn_1..4` (identical in every qos_params file that has them): DSCP 8 and 0,
/// each not ECN-capable (5,000 frames) and ECT(1) (2,047 frames).
const ECN_DEFAULTS: [(u8, u8, u64); 4] = [(8, 0, 5000), (8, 1, 2047), (0, 0, 5000), (0, 1, 2047)];

/// DscpEcnSend (`testQosSaiDscpEcn`, the `ecn_N` sets): `num_of_pkts` frames of 1000 B with
/// the set's DSCP and ECN field queued on the destination with its transmit off, then
/// released and captured. Every frame leaves; without ECN none is marked and what leaves,
/// in cells, is within [`min_limit`, 1.05 × `limit`]; with ECN at least 95% of `limit` leaves
/// unmarked and, when more frames were sent than `min_limit`, 3-7% of `limit` are marked; the
/// destination's ingress counters do not move.
///
/// With `--params`, the set's own numbers; sonic-mgmt runs this test only on
/// x86_64-nokia_ixr7250e_36x400g-r0 (tests_mark_conditions.yaml), and a set whose numbers no
/// switch can meet (the th2 and mellanox files': 5,000 frames cannot make 180,000 cells) is
/// skipped with them. Computed: the suite's DSCPs, ECN and counts (fewer if the queue would
/// drop), `limit` and `min_limit` what the rules say leaves (every frame, `num_of_pkts ×`
/// cells), and the marks the queue's WRED-ECN profile allows: none without one, some once the
/// queue held more than its `kmin`.
pub fn dscp_ecn(d: &mut Dut, plan: &Plan, i: usize) -> Result<TestResult> {
    let name = format!("ecn_{i}");
    let mut t = TestResult::new(format!("DscpEcnSend[{name}]"));
    let (src, dst) = (plan.src, plan.dst);
    let y = plan.yaml.as_ref().filter(|y| y.set(&name).is_some());
    let (dscp, ecn, frames) = ECN_DEFAULTS[(i - 1).min(3)];
    let set = match y {
        Some(y) => {
            let int = |f: &str| y.int(&name, f).map(|v| v.max(0) as u64);
            let len = int("packet_size").unwrap_or(1000) as usize;
            let occ = match int("cell_size") {
                Some(c) if c > 0 => (len as u64).div_ceil(c),
                _ => 1,
            };
            EcnSet {
                dscp: int("dscp").unwrap_or(u64::from(dscp)) as u8 & 63,
                ecn: int("ecn").unwrap_or(u64::from(ecn)) as u8 & 3,
                frames: int("num_of_pkts").unwrap_or(frames),
                len,
                occ,
                limit: int("limit").unwrap_or(0),
                min_limit: int("min_limit").unwrap_or(0),
            }
        }
        None => ecn_computed(d, plan, i),
    };
    let EcnSet {
        dscp,
        ecn,
        frames,
        len,
        occ,
        limit,
        min_limit,
    } = set;
    t.explain.push(format!(
        "{}: DSCP {dscp}, ECN {ecn}, {frames} frames of {len} B ({occ} cell(s) each), limit {limit}, min_limit {min_limit} cells",
        y.map_or("computed from the config".to_string(), |y| format!("{}.{name}", y.path))
    ));
    let can_hold = if ecn == 0 {
        frames * occ >= min_limit && (frames * occ) as f64 <= limit as f64 * 1.05
    } else {
        (frames * occ) as f64 >= limit as f64 * 0.95
    };
    if !can_hold {
        return Ok(t.skip(format!(
            "sonic-mgmt runs testQosSaiDscpEcn only on x86_64-nokia_ixr7250e_36x400g-r0 (tests_mark_conditions.yaml), and {name}'s numbers cannot hold on any switch: \
             {frames} frames × {occ} cells = {} cells against {}",
            frames * occ,
            if ecn == 0 {
                format!("min_limit {min_limit} ..= 1.05 × limit {limit}")
            } else {
                format!("0.95 × limit {limit} unmarked")
            }
        )));
    }
    let (_, _, q) = class(d, src, dscp);
    let profile = d.config().ports[dst].queues[q].ecn.clone();
    let base = d.snapshot();
    d.set_tx(dst, false)?;
    t.step(format!("{}, ECN {ecn}", send_text(d, frames, src, dst, dscp, len)));
    let field = match ecn {
        0 => crate::wire::Ecn::NotEct,
        1 => crate::wire::Ecn::Ect1,
        2 => crate::wire::Ecn::Ect0,
        _ => crate::wire::Ecn::Ce,
    };
    d.send_ecn(src, dst, dscp, field, frames, len)?;
    t.step(format!("transmit on {} again; capture what it sends", d.name(dst)));
    d.capture_tos(dst, true);
    d.set_tx(dst, true)?;
    let got = d.capture_tos(dst, false);
    let s = d.snapshot();
    let (marked, not_marked) = (
        got.iter().filter(|&&tos| tos != 0xff && tos & 3 == 3).count() as u64,
        got.iter()
            .filter(|&&tos| tos != 0xff && matches!(tos & 3, 1 | 2))
            .count() as u64,
    );
    let tx = s.ports[dst].tx_packets - base.ports[dst].tx_packets;
    t.check(
        tx >= frames,
        format!("{} transmitted: at least {frames}", d.name(dst)),
        format!("{tx}"),
    );
    if ecn == 0 {
        t.check(marked == 0, "none marked CE".to_string(), format!("{marked}"));
        let cells = tx * occ;
        t.check(
            min_limit <= cells && cells as f64 <= limit as f64 * 1.05,
            format!("cells transmitted: {min_limit} ..= 1.05 × {limit}"),
            format!("{cells}"),
        );
    } else {
        t.check(
            (not_marked * occ) as f64 >= limit as f64 * 0.95,
            format!("unmarked cells: at least 0.95 × {limit}"),
            format!("{} ({not_marked} frames)", not_marked * occ),
        );
        if frames > min_limit {
            t.check(
                (limit as f64 * 0.03..=limit as f64 * 0.07).contains(&(marked as f64))
                    && marked >= frames.saturating_sub(not_marked),
                format!("marked: 3-7% of {limit}, and every frame not left unmarked"),
                format!("{marked}"),
            );
        }
        if y.is_none() {
            // The marks the queue's profile allows, frames held in bytes against its kmin.
            let held = frames * len as u64;
            match &profile {
                None => t.check(
                    marked == 0,
                    format!("queue {q} has no WRED-ECN profile: none marked"),
                    format!("{marked}"),
                ),
                Some(p) if held > p.kmin_bytes => t.check(
                    marked > 0,
                    format!(
                        "queue {q} held {held} B, over its profile's kmin {} B: some marked",
                        p.kmin_bytes
                    ),
                    format!("{marked}"),
                ),
                Some(p) => t.check(
                    marked == 0,
                    format!(
                        "queue {q} held {held} B, within its profile's kmin {} B: none marked",
                        p.kmin_bytes
                    ),
                    format!("{marked}"),
                ),
            }
        }
    }
    same(
        &mut t,
        &format!("ingress drops on {}", d.name(dst)),
        ingress_drops(plan, &base, dst),
        ingress_drops(plan, &s, dst),
    );
    Ok(t)
}

//! The properties every port scheduler kind must keep, through the whole transmit path of a
//! switch: random traffic into all eight queues of one egress port, random PFC received on
//! that port, shapers on some queues, the same checks for every kind:
//!
//! * no reordering within a queue: each queue's frames leave in the order they arrived;
//! * a paused priority's queue sends nothing while the pause it received lasts;
//! * a shaped queue never sends more than its bucket plus its rate allow;
//! * everything admitted drains (with `next_event` driving time), so no kind strands a queue.
//!
//! The scheduler-level properties (never an ineligible pick, work conservation, `select_again`
//! agreeing with `select`) are proptests over every kind in `egress/sched/props.rs`.

use controlplane::load_str;
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::{self, Ecn};
use dataplane::Switch;
use proptest::prelude::*;

const OUT: usize = 3;
const SPEED_BPS: u64 = 10_000_000_000;
/// Queue 5 is shaped in every kind's config (queue 3 is lossless, which may not be shaped).
const SHAPED: usize = 5;
const SHAPER_RATE_BPS: u64 = 2_000_000_000;
const SHAPER_BURST: u64 = 8192;

/// The scheduler part of a config, per kind: what goes in `[port_defaults]` (after the speed)
/// and any tables after it.
#[derive(Debug, Clone)]
struct Kind {
    name: &'static str,
    port_defaults: String,
    tables: String,
}

/// `[queue.N]` sections: the queues in the `strict` mask strict, the others WDRR at `weights`.
fn queue_tables(strict: u8, weights: &[u32]) -> String {
    (0..8)
        .map(|q| {
            if strict & (1 << q) != 0 {
                format!("[queue.{q}]\nsched = \"strict\"\n")
            } else {
                format!("[queue.{q}]\nsched = \"wdrr\"\nweight = {}\n", weights[q])
            }
        })
        .collect()
}

fn sp_wdrr() -> impl Strategy<Value = Kind> {
    (0u8..=255, prop::collection::vec(1u32..8, 8)).prop_map(|(strict, weights)| {
        let tables = queue_tables(strict, &weights);
        Kind {
            name: "sp_wdrr",
            port_defaults: "scheduler = \"sp_wdrr\"\n".into(),
            tables,
        }
    })
}

/// Random tables (weight 0 included, queues left out of both) and limits; at least one entry
/// with a weight, as validation requires.
fn vlarb() -> impl Strategy<Value = Kind> {
    let entries = || prop::collection::vec((0u8..8, prop_oneof![Just(0u8), 1u8..=255]), 0..12);
    let limit = prop_oneof![Just(0u8), Just(255u8), 0u8..=255];
    (entries(), entries(), limit, 0u8..8).prop_map(|(high, low, limit, always)| {
        let list = |v: &[(u8, u8)]| {
            let items: Vec<String> = v.iter().map(|(vl, w)| format!("[{vl}, {w}]")).collect();
            items.join(", ")
        };
        let low = if high.iter().chain(&low).all(|e| e.1 == 0) {
            [low, vec![(always, 1)]].concat()
        } else {
            low
        };
        Kind {
            name: "vlarb",
            port_defaults: format!(
                "scheduler = \"vlarb\"\nvlarb = {{ high = [{}], low = [{}], high_limit = {limit} }}\n",
                list(&high),
                list(&low)
            ),
            tables: String::new(),
        }
    })
}

/// EDF: some regulated queues (random budgets), the others strict (control) or WDRR (best
/// effort), in each of the three modes.
fn edf() -> impl Strategy<Value = Kind> {
    (
        1u8..=255,
        0u8..=255,
        prop::collection::vec(1u32..8, 8),
        prop::collection::vec(1u64..200, 8),
        prop::sample::select(vec!["ideal", "fifo2", "take-over"]),
    )
        .prop_map(|(regulated, strict, weights, budgets_us, mode)| {
            let mut tables = queue_tables(strict, &weights);
            let budget: Vec<String> = (0..8)
                .filter(|q| regulated & (1 << q) != 0)
                .map(|q| format!("{q} = \"{}us\"", budgets_us[q]))
                .collect();
            tables += &format!(
                "[port_defaults.edf]\nmode = \"{mode}\"\nbudget = {{ {} }}\n",
                budget.join(", ")
            );
            Kind {
                name: "edf",
                port_defaults: "scheduler = \"edf\"\n".into(),
                tables,
            }
        })
}

/// Every kind, with random settings.
fn any_kind() -> impl Strategy<Value = Kind> {
    prop_oneof![sp_wdrr(), vlarb(), edf()]
}

/// The priorities with PFC in [`config`] (`[pfc] priorities = [3]`).
const PFC_PRIOS: u8 = 1 << 3;

fn config(kind: &Kind) -> controlplane::Config {
    let mut text = format!(
        "[buffer]\ncell = \"256B\"\nsize = \"4MiB\"\n[port_defaults]\nspeed = \"10G\"\ncable = \"5m\"\nmtu = 1500\n{}",
        kind.port_defaults
    );
    for id in 0..4 {
        text += &format!("[[port]]\nid = {id}\n");
    }
    text += "[classify]\ntrust = \"dscp\"\ndefault_tc = 0\n\
             dscp_to_tc = { 0 = 0, 8 = 1, 16 = 2, 24 = 3, 32 = 4, 40 = 5, 48 = 6, 56 = 7 }\n\
             [cnp]\nqueue = 6\n[pfc]\npriorities = [3]\n[pg.3]\nalpha = \"1/8\"\n";
    text += &kind.tables;
    // Queue 5's section may already exist: add the shaper as a dotted key under the root.
    text += &format!(
        "[queue.{SHAPED}.shaper]\nrate = \"{}\"\nburst = \"{SHAPER_BURST}B\"\n",
        SHAPER_RATE_BPS
    );
    load_str(&text)
        .unwrap_or_else(|e| panic!("config for {} does not load: {e}\n{text}", kind.name))
        .config
}

#[derive(Debug, Clone)]
enum Event {
    /// `count` frames of `len` bytes into queue `queue` from port `src`.
    Burst {
        src: usize,
        queue: u8,
        len: usize,
        count: u64,
    },
    /// A PFC frame received on the egress port: these priorities paused for `quanta`
    /// (0 = XON).
    Pfc { prios: u8, quanta: u16 },
}

fn event() -> impl Strategy<Value = (Event, u64)> {
    let burst = (0usize..3, 0u8..8, 78usize..1500, 1u64..40).prop_map(|(src, queue, len, count)| Event::Burst {
        src,
        queue,
        len,
        count,
    });
    let pfc = (1u8..=255, prop::sample::select(vec![0u16, 50, 500, 5000, 65535]))
        .prop_map(|(prios, quanta)| Event::Pfc { prios, quanta });
    (prop_oneof![4 => burst, 1 => pfc], 0u64..20_000)
}

/// A transmitted data frame: when it started, its queue, and which arrival it was.
struct Sent {
    at: u64,
    queue: usize,
    id: (u32, u32),
    len: usize,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_kind_keeps_order_pauses_and_shapers(kind in any_kind(), events in prop::collection::vec(event(), 1..40)) {
        let cfg = config(&kind);
        let mut sw = Switch::new(&cfg, 7);
        // The host behind the egress port announces itself, so data is unicast to it.
        sw.receive(OUT, &announce(OUT as u16, 0).unwrap(), 0);
        let sent: std::cell::RefCell<Vec<Sent>> = Default::default();
        let mut sink = |port: usize, f: &[u8], at: u64| {
            // The other ports send the announcement's flood copies and their XOFFs.
            if port != OUT {
                return;
            }
            let Ok(info) = wire::parse(f, usize::MAX) else { return };
            let (Some(bth), Some(dscp)) = (info.bth(f), info.dscp()) else { return };
            if info.is_roce() {
                sent.borrow_mut().push(Sent { at, queue: usize::from(dscp / 8), id: (bth.dest_qp(), bth.psn()), len: f.len() });
            }
        };
        // Per queue, the arrivals in order; per priority, the pauses received (time, quanta,
        // and how many frames had been sent before it arrived).
        let mut arrived: Vec<Vec<(u32, u32)>> = vec![Vec::new(); 8];
        let mut pauses: Vec<Vec<(u64, u16, usize)>> = vec![Vec::new(); 8];
        let mut now = 1_000u64;
        for (i, (ev, gap)) in events.iter().enumerate() {
            match *ev {
                Event::Burst { src, queue, len, count } => {
                    let flow = Flow { src: src as u16, dst: OUT as u16, dscp: queue * 8, ecn: Ecn::Ect0, qp: i as u32 + 1, frame_len: len, count, start_ns: 0, rate_bps: SPEED_BPS };
                    for (_, f) in flow.frames().unwrap() {
                        sw.receive(src, &f, now);
                    }
                    arrived[usize::from(queue)].extend((0..count as u32).map(|psn| (i as u32 + 1, psn)));
                }
                Event::Pfc { prios, quanta } => {
                    let mut buf = [0u8; 64];
                    let n = wire::pfc::encode_pfc(&mut buf, [2, 0, 0, 0, 0, 9], prios, [quanta; 8]);
                    sw.receive(OUT, &buf[..n], now);
                    // Only priority 3 has PFC: a PFC frame's other priorities are ignored
                    // (counted as `pause_ignored`), so they hold nothing.
                    for (p, list) in pauses.iter_mut().enumerate() {
                        if prios & (1 << p) & PFC_PRIOS != 0 {
                            list.push((now, quanta, sent.borrow().len()));
                        }
                    }
                }
            }
            sw.poll(now);
            sw.transmit(OUT, now, &mut sink);
            now += gap;
        }
        let mut guard = 0;
        while !sw.is_idle() {
            now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
            sw.poll(now);
            for p in 0..4 {
                sw.transmit(p, now, &mut sink);
            }
            guard += 1;
            prop_assert!(guard < 1_000_000, "{}: the queues did not drain", kind.name);
        }

        let sent = sent.into_inner();
        for (q, arrivals) in arrived.iter().enumerate() {
            // No reordering: what left is a subsequence of what arrived (drops leave gaps).
            let left: Vec<(u32, u32)> = sent.iter().filter(|s| s.queue == q).map(|s| s.id).collect();
            let mut it = arrivals.iter();
            for id in &left {
                prop_assert!(it.any(|a| a == id), "{}: queue {q} sent {id:?} out of arrival order", kind.name);
            }
        }
        for (n, s) in sent.iter().enumerate() {
            // The pause in force for the queue's priority (queue q carries priority q) when
            // this frame was sent: the last one received before it.
            let last = pauses[s.queue].iter().rev().find(|(_, _, before)| *before <= n);
            if let Some(&(t, quanta, _)) = last {
                let until = t + wire::pfc::quanta_to_ns(quanta, SPEED_BPS);
                prop_assert!(s.at >= until, "{}: queue {} sent at {} ns while paused from {t} to {until}", kind.name, s.queue, s.at);
            }
        }
        let mut bytes = 0u64;
        for s in sent.iter().filter(|s| s.queue == SHAPED) {
            bytes += s.len as u64;
            // Tokens start full at 0 ns and refill at the rate; a frame is sent only when its
            // length is in the bucket.
            let allowed = SHAPER_BURST + (s.at as u128 * SHAPER_RATE_BPS as u128 / 8 / 1_000_000_000) as u64 + 1;
            prop_assert!(bytes <= allowed, "{}: shaped queue sent {bytes} B by {} ns, allowed {allowed}", kind.name, s.at);
        }
    }
}

//! The properties every scheduler kind must have, checked against every kind with the same
//! proptests: a kind joins by adding its strategy to [`any_scheduler`] (and its variant to
//! [`every_kind_has_a_strategy`], which will not compile without it).
//!
//! * it never picks a queue that is not eligible (empty, paused or shaped out: the caller's
//!   mask says which), and it is work-conserving (Some whenever some queue is eligible);
//! * `select_again` is a shortcut, never a different decision: when it keeps a queue, `select`
//!   with the same eligible queues picks that queue and leaves the same state; when it does
//!   not, it changes nothing.
//!
//! No reordering within a queue is a property of the whole transmit path (a scheduler only
//! names a queue; the queue pops its head): `dataplane/tests/sched_props.rs` checks it, with
//! pauses and shapers, through the switch for every kind.

use super::*;
use controlplane::SchedMode;
use proptest::prelude::*;

fn sp_wdrr() -> impl Strategy<Value = Scheduler> {
    (0u8..=255, proptest::collection::vec(1u32..8, NUM_TC), 1518u32..9216).prop_map(|(strict, weights, quantum)| {
        let modes = std::array::from_fn(|q| {
            if strict & (1 << q) != 0 {
                SchedMode::Strict
            } else {
                SchedMode::Wdrr { weight: weights[q] }
            }
        });
        Scheduler::SpWdrr(SpWdrr::new(&modes, quantum))
    })
}

/// Tables of up to 64 entries over all eight VLs (weight 0 included), any limit (0 and 255
/// often): queues in neither table and tables with nothing eligible are part of the run.
fn vlarb() -> impl Strategy<Value = Scheduler> {
    let entries = || proptest::collection::vec((0u8..8, prop_oneof![Just(0u8), 1u8..=255]), 0..=64);
    let limit = prop_oneof![Just(0u8), Just(255u8), 0u8..=255];
    (entries(), entries(), limit).prop_map(|(high, low, high_limit)| {
        let t = |v: Vec<(u8, u8)>| {
            v.into_iter()
                .map(|(vl, weight)| controlplane::VlArbEntry { vl, weight })
                .collect()
        };
        Scheduler::VlArb(VlArb::new(&controlplane::VlArbConfig {
            high: t(high),
            low: t(low),
            high_limit,
        }))
    })
}

/// EDF over any set of regulated queues, the rest strict or WDRR at random weights.
fn edf() -> impl Strategy<Value = Scheduler> {
    (
        1u8..=255,
        0u8..=255,
        proptest::collection::vec(1u32..8, NUM_TC),
        1518u32..9216,
    )
        .prop_map(|(regulated, strict, weights, quantum)| {
            let modes = std::array::from_fn(|q| {
                if strict & (1 << q) != 0 {
                    SchedMode::Strict
                } else {
                    SchedMode::Wdrr { weight: weights[q] }
                }
            });
            Scheduler::Edf(Edf::new(&modes, quantum, regulated))
        })
}

/// A scheduler of any kind, with random settings.
pub(super) fn any_scheduler() -> impl Strategy<Value = Scheduler> {
    prop_oneof![sp_wdrr(), vlarb(), edf()]
}

/// Every kind has a strategy in [`any_scheduler`]: this match has no wildcard, so a new
/// variant does not compile until it is added here, and the strategy must produce it.
#[test]
fn every_kind_has_a_strategy() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut seen = std::collections::BTreeSet::new();
    let mut runner = TestRunner::deterministic();
    for _ in 0..200 {
        let s = any_scheduler().new_tree(&mut runner).unwrap().current();
        seen.insert(match s {
            Scheduler::SpWdrr(_) => "sp_wdrr",
            Scheduler::VlArb(_) => "vlarb",
            Scheduler::Edf(_) => "edf",
        });
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["edf", "sp_wdrr", "vlarb"]);
}

/// A step of a run: which queues are eligible, each queue's head (length, deadline), and how
/// many times the caller tries `select_again` after a pick.
fn steps() -> impl Strategy<Value = Vec<(u8, Vec<Head>, usize)>> {
    let head = (64u32..9000, any::<u64>()).prop_map(|(len, deadline)| Head { len, deadline });
    proptest::collection::vec((0u8..=255, proptest::collection::vec(head, NUM_TC), 0usize..6), 1..300)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn picks_only_eligible_queues_and_is_work_conserving(mut s in any_scheduler(), steps in steps()) {
        for (eligible, heads, _) in steps {
            let picked = s.select(eligible, |q| heads[q]);
            match picked {
                Some(q) => prop_assert!(q < NUM_TC && eligible & (1 << q) != 0, "{} picked ineligible queue {q} of {eligible:#010b}", s.kind()),
                None => prop_assert_eq!(eligible, 0, "{} idle with queues eligible", s.kind()),
            }
        }
    }

    #[test]
    fn select_again_agrees_with_select(mut s in any_scheduler(), steps in steps()) {
        for (eligible, heads, again) in steps {
            let Some(q) = s.select(eligible, |q| heads[q]) else { continue };
            for _ in 0..again {
                let before = s.clone();
                let mut reference = s.clone();
                if s.select_again(q, heads[q]) {
                    prop_assert_eq!(reference.select(eligible, |q| heads[q]), Some(q));
                    prop_assert_eq!(&s, &reference);
                } else {
                    prop_assert_eq!(&s, &before);
                    break;
                }
            }
        }
    }
}

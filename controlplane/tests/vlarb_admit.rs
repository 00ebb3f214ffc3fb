//! The fill-in method's guarantee and the table's invariants, over random sequences of
//! requests and releases (`controlplane::vlarb_admit`).

use controlplane::vlarb_admit::{
    bit_reverse, Admission, PortParams, Refusal, Request, ENTRIES, MAX_WEIGHT, MIN_FRAME_BYTES,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Bandwidth in per-mille of the link, distance 2^d, a latency (ns slack over the
    /// distance's guaranteed bound) instead of the distance when `by_latency`, a frame size.
    Admit {
        permille: u64,
        log_d: u32,
        by_latency: Option<u64>,
        frame: u32,
    },
    /// Release the n-th admitted connection (modulo how many there are).
    Release(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u64..=300, 1u32..=6, prop::option::of(0u64..20_000), MIN_FRAME_BYTES..=1518).prop_map(
            |(permille, log_d, by_latency, frame)| Op::Admit { permille, log_d, by_latency, frame }
        ),
        1 => any::<usize>().prop_map(Op::Release),
    ]
}

fn params() -> impl Strategy<Value = PortParams> {
    (
        prop::sample::select(vec![
            10_000_000_000u64,
            25_000_000_000,
            100_000_000_000,
            400_000_000_000,
        ]),
        prop::sample::select(vec![0u8, 1, 6, 200, 255]),
        prop::sample::select(vec![1518u32, 4114, 9234]),
    )
        .prop_map(|(speed_bps, high_limit, max_frame)| PortParams {
            speed_bps,
            high_limit,
            max_frame,
            min_frame: MIN_FRAME_BYTES,
            // Seven VLs for the seven sequence sizes (1..64 entries): VLs never run out.
            vls: (1..8).collect(),
        })
}

/// Entries a request needs, computed from the rule as stated (not by the code under test): the
/// smallest power of two n ≥ 64/d whose per-entry share, in whole frames, fits a weight of 255.
fn entries_needed(credits: u64, distance: u32, frame: u32) -> Option<(u32, u32)> {
    let p = u64::from(frame.div_ceil(64));
    let mut n = ENTRIES / distance;
    while n <= ENTRIES {
        let share = credits.div_ceil(u64::from(n) * p).max(1) * p;
        if share <= u64::from(MAX_WEIGHT) {
            return Some((n, share as u32));
        }
        n *= 2;
    }
    None
}

/// First fit as a buddy allocator over bit-reversed entry addresses, written apart from the
/// code under test: a block of n entries at address a (a multiple of n) is the entries k with
/// bitrev6(k) in a..a+n.
fn buddy_starts(sizes: &[u32]) -> Vec<u32> {
    let mut used = [false; 64];
    let mut out = Vec::new();
    for &n in sizes {
        let a = (0..64)
            .step_by(n as usize)
            .find(|&a| (a..a + n).all(|x| !used[bit_reverse(x, 6) as usize]))
            .expect("fits");
        for x in a..a + n {
            used[bit_reverse(x, 6) as usize] = true;
        }
        // The set's lowest entry is its j.
        out.push((a..a + n).map(|x| bit_reverse(x, 6)).min().unwrap());
    }
    out
}

/// Every invariant of a table, whatever led to it.
fn check(a: &Admission) -> Result<(), TestCaseError> {
    let table = a.table();
    let seqs = a.sequences();
    let mut owner = [None; 64];
    for (i, s) in seqs.iter().enumerate() {
        let d = ENTRIES / s.entries;
        let start = a.start(i);
        prop_assert!(start < d);
        let shares: u32 = s.members.iter().map(|m| a.plan(m).unwrap().share).sum();
        prop_assert!(shares <= MAX_WEIGHT, "sequence {i}: weight {shares}");
        for k in (start..64).step_by(d as usize) {
            prop_assert_eq!(owner[k as usize], None, "entry {} given twice", k);
            owner[k as usize] = Some(i);
            prop_assert_eq!(table[k as usize].sequence, Some(i));
            prop_assert_eq!(table[k as usize].weight, shares);
            prop_assert_eq!(table[k as usize].vl, s.vl);
        }
        for (o, other) in seqs.iter().enumerate().take(i) {
            prop_assert_eq!(other.vl == s.vl, other.entries == s.entries, "VLs of {} and {}", o, i);
        }
    }
    for (k, e) in table.iter().enumerate() {
        if owner[k].is_none() {
            prop_assert_eq!((e.weight, e.sequence), (0, None));
        }
    }
    prop_assert_eq!(a.free_entries() as usize, owner.iter().filter(|o| o.is_none()).count());
    // The placement is first fit in bit-reversal order of the sequences as listed.
    let sizes: Vec<u32> = seqs.iter().map(|s| s.entries).collect();
    let starts: Vec<u32> = (0..seqs.len()).map(|i| a.start(i)).collect();
    prop_assert_eq!(starts, buddy_starts(&sizes));
    // The guarantee for whatever comes next: every size up to the free count has a free set.
    let mut n = 1;
    while n <= a.free_entries() {
        let d = ENTRIES / n;
        prop_assert!(
            (0..d).any(|j| (j..64).step_by(d as usize).all(|k| owner[k as usize].is_none())),
            "{} free but no free set of {}",
            a.free_entries(),
            n
        );
        n *= 2;
    }
    for c in a.connections() {
        let name = &c.request.name;
        // Exactly spaced, wrap-around included, at no more than the distance asked.
        let d = c.plan.effective_distance();
        prop_assert!(d <= c.plan.distance, "{name}: {d} > {}", c.plan.distance);
        prop_assert_eq!(c.entries.len() as u32, ENTRIES / d);
        for (x, y) in c.entries.iter().zip(c.entries.iter().cycle().skip(1)) {
            prop_assert_eq!((y + ENTRIES - x) % ENTRIES, d % ENTRIES, "{}: {:?}", name, c.entries);
        }
        // Whole frames, enough for the rate.
        let p = c.plan.frame.div_ceil(64);
        prop_assert!(c.plan.share >= p && c.plan.share % p == 0);
        prop_assert!(u64::from(c.plan.share) * u64::from(ENTRIES / d) >= c.plan.credits);
        prop_assert!(
            c.rate_floor_bps >= c.request.bw_bps,
            "{name}: floor {} < {}",
            c.rate_floor_bps,
            c.request.bw_bps
        );
        // Bounds: now ≤ guaranteed ≤ asked.
        prop_assert!(c.latency_now_ns <= c.latency_guaranteed_ns);
        if let Some(l) = c.request.latency_ns {
            prop_assert!(
                c.latency_guaranteed_ns <= l,
                "{name}: {} > {l}",
                c.latency_guaranteed_ns
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The paper's guarantee: a request that cannot join a sequence is admitted whenever the
    /// free entries are at least what it needs; whatever the requests and releases, the table
    /// keeps every invariant and is the placement of its sequences afresh.
    #[test]
    fn a_request_fits_when_enough_entries_are_free(params in params(), ops in prop::collection::vec(op(), 1..60)) {
        let mut a = Admission::new(params.clone()).unwrap();
        let mut names: Vec<String> = Vec::new();
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Admit { permille, log_d, by_latency, frame } => {
                    let distance = 1u32 << log_d;
                    let name = format!("c{n}");
                    let bw_bps = params.speed_bps / 1000 * permille;
                    let r = Request {
                        name: name.clone(),
                        bw_bps,
                        latency_ns: by_latency.map(|slack| a.guaranteed_bound_ns(distance) + slack),
                        distance: by_latency.is_none().then_some(distance),
                        frame: Some(frame),
                        vl: None,
                    };
                    let credits = a.credits_per_cycle(bw_bps);
                    // A latency is met by the largest distance whose guaranteed bound meets it.
                    let distance = match r.latency_ns {
                        Some(l) => (1..=6).map(|i| 1u32 << i).filter(|&d| a.guaranteed_bound_ns(d) <= l).max().unwrap(),
                        None => distance,
                    };
                    let need = entries_needed(credits, distance, frame);
                    let free = a.free_entries();
                    let could_join = need.is_some_and(|(n, share)| {
                        a.sequences().iter().any(|s| {
                            s.entries == n
                                && s.members.iter().map(|m| a.plan(m).unwrap().share).sum::<u32>() + share <= MAX_WEIGHT
                        })
                    });
                    match (a.admit(r), need) {
                        (Ok(_), Some((n, share))) => {
                            let p = a.plan(a.sequences().iter().flat_map(|s| &s.members).find(|m| m.name == name).unwrap()).unwrap();
                            prop_assert_eq!((p.entries, p.share), (n, share));
                            prop_assert_eq!(p.distance, distance);
                            prop_assert_eq!(a.free_entries(), if could_join { free } else { free - n });
                            names.push(name);
                        }
                        (Err(Refusal::NotEnoughEntries { need: got, free: f, .. }), Some((n, _))) => {
                            prop_assert_eq!((got, f), (n, free));
                            prop_assert!(free < n, "refused with {free} free for {n}");
                            prop_assert!(!could_join, "could have joined");
                        }
                        (Err(Refusal::AboveTable { .. }), None) => {}
                        (got, need) => prop_assert!(false, "{got:?} for need {need:?}"),
                    }
                }
                Op::Release(k) if !names.is_empty() => {
                    let name = names.remove(k % names.len());
                    let before = a.used_entries();
                    a.release(&name).unwrap();
                    prop_assert!(a.used_entries() <= before);
                    prop_assert!(a.connections().iter().all(|c| c.request.name != name));
                    // The state written and read back is the same table.
                    let again = Admission::from_state(a.state()).unwrap();
                    prop_assert_eq!(again.table(), a.table());
                }
                Op::Release(_) => {}
            }
            check(&a)?;
            prop_assert_eq!(a.connections().len(), names.len());
        }
    }

    /// Releasing every connection leaves the empty table, in any order.
    #[test]
    fn releasing_everything_empties_the_table(params in params(), ops in prop::collection::vec(op(), 1..40), seed in any::<u64>()) {
        let mut a = Admission::new(params.clone()).unwrap();
        for (n, op) in ops.into_iter().enumerate() {
            if let Op::Admit { permille, log_d, frame, .. } = op {
                let _ = a.admit(Request {
                    name: format!("c{n}"),
                    bw_bps: params.speed_bps / 1000 * permille,
                    latency_ns: None,
                    distance: Some(1 << log_d),
                    frame: Some(frame),
                    vl: None,
                });
            }
        }
        let mut names: Vec<String> = a.connections().into_iter().map(|c| c.request.name).collect();
        let mut s = seed;
        while !names.is_empty() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let name = names.remove((s >> 33) as usize % names.len());
            a.release(&name).unwrap();
            check(&a)?;
        }
        prop_assert_eq!(a.free_entries(), ENTRIES);
        prop_assert_eq!(a.release("c0"), Err(Refusal::UnknownName("c0".into())));
    }

    /// Nothing a user can write makes it panic: any spec text, any port, any request and
    /// release, any state file.
    #[test]
    fn bad_input_never_panics(
        spec in "[a-z=,0-9GMKus.]{0,40}",
        speed_bps in prop_oneof![Just(0u64), 1u64..=1_000, Just(u64::MAX), any::<u64>()],
        high_limit in any::<u8>(),
        max_frame in prop_oneof![0u32..=20_000, Just(u32::MAX)],
        min_frame in prop_oneof![0u32..=20_000, Just(u32::MAX)],
        vls in prop::collection::vec(0u8..=9, 0..9),
        reqs in prop::collection::vec(
            (any::<u64>(), prop::option::of(any::<u64>()), prop::option::of(0u32..200), prop::option::of(any::<u32>()), prop::option::of(0u8..=9)),
            0..20,
        ),
        state in "[\\[\\]{}\":,0-9a-z_ ]{0,80}",
    ) {
        let _ = Request::parse_spec(&spec);
        let _ = controlplane::vlarb_admit::parse_requests(&spec, false);
        let _ = controlplane::vlarb_admit::parse_requests(&spec, true);
        if let Ok(s) = serde_json::from_str::<controlplane::vlarb_admit::State>(&state) {
            let _ = Admission::from_state(s);
        }
        let params = PortParams { speed_bps, high_limit, max_frame, min_frame, vls };
        let Ok(mut a) = Admission::new(params) else { return Ok(()) };
        for (n, (bw_bps, latency_ns, distance, frame, vl)) in reqs.into_iter().enumerate() {
            let _ = a.admit(Request { name: format!("c{n}"), bw_bps, latency_ns, distance, frame, vl });
            if n % 3 == 2 {
                let _ = a.release(&format!("c{}", n / 2));
            }
        }
        let _ = a.connections();
        let _ = controlplane::vlarb_admit::fragment(&a, None);
        let back = Admission::from_state(a.state());
        prop_assert_eq!(back.map(|b| b.table()), Ok(a.table()));
    }
}

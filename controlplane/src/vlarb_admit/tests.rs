use super::*;

fn port(speed: &str) -> Admission {
    Admission::new(PortParams {
        speed_bps: crate::units::parse_rate(speed).unwrap(),
        high_limit: UNBOUNDED_LIMIT,
        max_frame: 1518,
        min_frame: MIN_FRAME_BYTES,
        vls: (1..8).collect(),
    })
    .unwrap()
}

fn req(spec: &str) -> Request {
    Request::parse_spec(spec).unwrap()
}

#[test]
fn bit_reversal_order() {
    assert_eq!(candidate_order(8), [0, 4, 2, 6, 1, 5, 3, 7]);
    assert_eq!(candidate_order(2), [0, 1]);
    assert_eq!(candidate_order(1), [0]);
    assert_eq!(candidate_order(4), [0, 2, 1, 3]);
    let mut all = candidate_order(64);
    assert_eq!(&all[..4], [0, 32, 16, 48]);
    all.sort();
    assert_eq!(all, (0..64).collect::<Vec<_>>(), "a permutation");
    assert_eq!(entry_set(16, 3).collect::<Vec<_>>(), [3, 19, 35, 51]);
}

/// Four distance-8 sequences take j = 0, 4, 2, 6; what is left is the odd entries, E(1, 1),
/// so a distance-2 request for 32 entries still fits. Trying j in plain order
/// (0, 1, 2, 3) would leave entries ≡ 4..7 mod 8, which hold no set of distance 2.
#[test]
fn bit_reversal_keeps_room_for_the_smallest_distance() {
    let mut a = port("100G");
    for n in 0..4 {
        // Each too big to share a sequence: 192 credits per entry.
        let i = a.admit(req(&format!("name=c{n},bw=6G,distance=8,frame=1024"))).unwrap();
        assert_eq!(a.sequences()[i].members.len(), 1, "c{n} joined");
    }
    let starts: Vec<u32> = (0..4).map(|i| a.start(i)).collect();
    assert_eq!(starts, [0, 4, 2, 6]);
    let i = a.admit(req("name=fast,bw=1G,distance=2,frame=1024")).unwrap();
    assert_eq!(a.start(i), 1);
    assert_eq!(a.free_entries(), 0);
    // The plain order, for contrast.
    let used: u64 = (0..4).map(|j| mask(8, j)).fold(0, |m, x| m | x);
    assert!((0..2).all(|j| used & mask(2, j) != 0), "plain order leaves no E(1, j)");
}

#[test]
fn whole_frames_and_entries_for_bandwidth() {
    let a = port("100G");
    // A tiny rate still gets one whole frame per entry: 1024 B = 16 credits.
    let p = a.plan(&req("name=a,bw=1M,distance=8,frame=1024")).unwrap();
    assert_eq!((p.entries, p.share), (8, 16));
    // A 1025 B frame is charged 17 credits.
    let p = a.plan(&req("name=a,bw=1M,distance=8,frame=1025")).unwrap();
    assert_eq!(p.share, 17);
    // max(64/d, w/255): 40G needs more than 1 entry of 255 at distance 64.
    let p = a.plan(&req("name=a,bw=40G,distance=64,frame=1024")).unwrap();
    let min = p.credits.div_ceil(255);
    assert!(u64::from(p.entries) >= min && p.entries >= 1 && p.entries.is_power_of_two());
    assert!(
        u64::from(p.entries / 2) * 240 < p.credits,
        "no smaller power of two holds it"
    );
    assert_eq!(p.share % 16, 0, "whole 1024 B frames");
    assert!(u64::from(p.share) * u64::from(p.entries) >= p.credits);
}

#[test]
fn rate_maps_to_credits_through_the_full_cycle() {
    let a = port("100G");
    // Unbounded limit, 1518 B frames: a full cycle is 64 visits of 16320 + 1518 + 24·272
    // line bytes, plus the frame in transmission.
    let visit = 16320 + 1518 + 24 * (16320u64.div_ceil(60));
    assert_eq!(a.full_cycle_line_bytes(), 1542 + 64 * visit);
    // The whole link needs more credits than a table holds (overheads): refused.
    assert!(matches!(
        a.plan(&req("name=a,bw=100G,distance=64")),
        Err(Refusal::AboveTable { .. })
    ));
    // Half the link: about half the table.
    let w = a.credits_per_cycle(50_000_000_000);
    assert_eq!(w, (50 * a.full_cycle_line_bytes()).div_ceil(100 * 64));
    assert!(w > 64 * 255 / 2 && w < 64 * 255, "{w}");
}

#[test]
fn latency_picks_the_largest_distance_that_meets_it() {
    let a = port("100G");
    for d in [2, 4, 8, 16, 32] {
        assert!(a.guaranteed_bound_ns(d) < a.guaranteed_bound_ns(d * 2));
    }
    let l8 = a.guaranteed_bound_ns(8);
    let p = a.plan(&req(&format!("name=a,bw=1G,latency={l8}ns"))).unwrap();
    assert_eq!(p.distance, 8);
    let p = a.plan(&req(&format!("name=a,bw=1G,latency={}ns", l8 - 1))).unwrap();
    assert_eq!(p.distance, 4);
    let best = a.guaranteed_bound_ns(2);
    assert_eq!(
        a.plan(&req(&format!("name=a,bw=1G,latency={}ns", best - 1))),
        Err(Refusal::LatencyTooLow {
            asked_ns: best - 1,
            best_ns: best
        })
    );
    // Distance 8 at 100G, unbounded limit: frame in flight + 8 visits.
    let visit = 16320 + 1518 + 24 * 272u64;
    assert_eq!(l8, ((1542 + 8 * visit) * 8).div_ceil(100));
}

#[test]
fn the_low_priority_limit_adds_low_frames() {
    let mut params = port("100G").params().clone();
    let unbounded = Admission::new(params.clone()).unwrap().guaranteed_bound_ns(4);
    params.high_limit = 6;
    let limited = Admission::new(params.clone()).unwrap();
    let high = 1542 + 4 * (16320 + 1518 + 24 * 272u64);
    let lows = high / (6 * 4096) + 1;
    assert_eq!(limited.guaranteed_bound_ns(4), ((high + lows * 1542) * 8).div_ceil(100));
    assert!(limited.guaranteed_bound_ns(4) > unbounded);
    params.high_limit = 0;
    let one = Admission::new(params).unwrap();
    let frames = 1 + 4 * 272u64;
    assert_eq!(
        one.guaranteed_bound_ns(4),
        ((high + (frames + 1) * 1542) * 8).div_ceil(100)
    );
}

#[test]
fn a_connection_joins_its_sizes_sequence_while_weight_is_left() {
    let mut a = port("100G");
    let s0 = a.admit(req("name=a,bw=100M,distance=8,frame=1024")).unwrap();
    let s1 = a.admit(req("name=b,bw=100M,distance=8,frame=1024")).unwrap();
    assert_eq!(s0, s1, "joined");
    assert_eq!(a.table()[a.start(s0) as usize].weight, 32);
    // A different size gets its own sequence and VL.
    let s2 = a.admit(req("name=c,bw=100M,distance=4,frame=1024")).unwrap();
    assert_ne!(s2, s0);
    assert_ne!(a.sequences()[s2].vl, a.sequences()[s0].vl);
    assert_eq!(a.used_entries(), 8 + 16);
}

#[test]
fn refusals_name_the_reason() {
    let mut a = port("100G");
    assert_eq!(a.admit(req("name=z,bw=0,distance=8")), Err(Refusal::ZeroBandwidth));
    assert!(matches!(
        a.admit(req("name=z,bw=101G,distance=8")),
        Err(Refusal::AboveLink { .. })
    ));
    assert_eq!(a.admit(req("name=z,bw=1G,distance=1")), Err(Refusal::BadDistance(1)));
    assert_eq!(
        a.admit(req("name=z,bw=1G,distance=128")),
        Err(Refusal::BadDistance(128))
    );
    assert!(matches!(
        a.admit(req("name=z,bw=1G,distance=8,frame=9000")),
        Err(Refusal::FrameSize { .. })
    ));
    a.admit(req("name=big,bw=30G,distance=2,frame=1024")).unwrap();
    assert!(matches!(
        a.admit(req("name=big,bw=1G,distance=2")),
        Err(Refusal::DuplicateName(_))
    ));
    a.admit(req("name=more,bw=30G,distance=2,frame=1024")).unwrap();
    assert_eq!(
        a.admit(req("name=x,bw=100M,distance=64,frame=1024")),
        Err(Refusal::NotEnoughEntries {
            need: 1,
            free: 0,
            distance: 64
        })
    );
    assert_eq!(a.release("nobody"), Err(Refusal::UnknownName("nobody".into())));
    assert!(matches!(
        a.admit(req("name=v,bw=1G,distance=8,vl=0")),
        Err(Refusal::VlNotAllowed { vl: 0, .. })
    ));
    let msg = Refusal::NotEnoughEntries {
        need: 16,
        free: 8,
        distance: 4,
    }
    .to_string();
    assert!(msg.contains("needs 16") && msg.contains("8 free"), "{msg}");
}

#[test]
fn one_vl_per_size() {
    let mut a = port("100G");
    a.admit(req("name=a,bw=1G,distance=8,vl=3")).unwrap();
    assert!(matches!(
        a.admit(req("name=b,bw=1G,distance=4,vl=3")),
        Err(Refusal::VlTaken { vl: 3, .. })
    ));
    assert!(matches!(
        a.admit(req("name=b,bw=1G,distance=8,vl=4")),
        Err(Refusal::VlTaken { vl: 4, .. })
    ));
    let mut few = Admission::new(PortParams {
        vls: vec![1],
        ..a.params().clone()
    })
    .unwrap();
    few.admit(req("name=a,bw=1G,distance=8")).unwrap();
    assert!(matches!(
        few.admit(req("name=b,bw=1G,distance=4")),
        Err(Refusal::NoFreeVl { .. })
    ));
}

#[test]
fn release_defragments() {
    let mut a = port("100G");
    for n in 0..4 {
        a.admit(req(&format!("name=c{n},bw=6G,distance=8,frame=1024"))).unwrap();
    }
    // Free two distance-8 sets that are not buddies (j = 0 and 2). Left in place, c1 and
    // c3 would keep j = 4 and 6: after a distance-2 set on the odd entries, no E(2, j) is
    // free although 16 entries are.
    let in_place = mask(8, 4) | mask(8, 6) | mask(2, 1);
    assert!((0..4).all(|j| in_place & mask(4, j) != 0));
    a.release("c0").unwrap();
    a.release("c2").unwrap();
    assert_eq!(a.free_entries(), 48);
    assert_eq!((a.start(0), a.start(1)), (0, 4), "re-packed");
    a.admit(req("name=d4,bw=1G,distance=2,frame=1024")).unwrap();
    a.admit(req("name=d16,bw=1G,distance=4,frame=1024")).unwrap();
    assert_eq!(a.free_entries(), 0);
}

#[test]
fn requests_parse_and_name_bad_fields() {
    let r = req("name=a, bw=2G, latency=20us, mtu=1024");
    assert_eq!(
        r,
        Request {
            name: "a".into(),
            bw_bps: 2_000_000_000,
            latency_ns: Some(20_000),
            distance: None,
            frame: Some(1042),
            vl: None
        }
    );
    assert_eq!(Request::parse_spec(&r.spec()).unwrap(), r);
    for (spec, field) in [
        ("name=a,bw=2X,distance=8", "bw:"),
        ("name=a,bw=2G,latency=20", "latency:"),
        ("name=a,bw=2G,distance=x", "distance:"),
        ("name=a,bw=2G,distance=8,vl=8", "vl:"),
        ("name=a,bw=2G,distance=8,mtu=1,frame=2", "frame:"),
        ("name=a,bw=2G,distance=8,speed=1", "speed:"),
        ("bw=2G,distance=8", "name:"),
        ("name=a,distance=8", "bw:"),
        ("name=a,bw=1G", "latency or distance"),
        ("name=a,bw=1G,latency=1us,distance=8", "latency or distance"),
        ("name=a,name=b,bw=1G", "given twice"),
        ("name=a,bw", "key=value"),
        ("name=a,bw=1G,distance=8,mtu=99999999999", "mtu:"),
    ] {
        let e = Request::parse_spec(spec).unwrap_err();
        assert!(e.contains(field), "{spec}: {e}");
    }
}

#[test]
fn the_state_round_trips_and_is_checked() {
    let mut a = port("25G");
    a.admit(req("name=a,bw=100M,distance=8,frame=1024")).unwrap();
    a.admit(req("name=b,bw=100M,distance=8,frame=1024")).unwrap();
    let json = serde_json::to_string(&a.state()).unwrap();
    let back = Admission::from_state(serde_json::from_str(&json).unwrap()).unwrap();
    assert_eq!(back, a);
    let mut bad = a.state();
    bad.sequences[0].entries = 16;
    let e = Admission::from_state(bad).unwrap_err();
    assert!(e.contains("sequences[0]") && e.contains("a:"), "{e}");
    let mut bad = a.state();
    bad.sequences[0].members[1].name = "a".into();
    assert!(Admission::from_state(bad).unwrap_err().contains("twice"));
    // 65 entries: nine sequences of 8 (each member alone, so each is a valid sequence).
    let mut bad = a.state();
    let one = bad.sequences[0].members[0].clone();
    bad.sequences = (0..9)
        .map(|n| Sequence {
            entries: 8,
            vl: 1,
            members: vec![Request {
                name: format!("m{n}"),
                ..one.clone()
            }],
        })
        .collect();
    let e = Admission::from_state(bad).unwrap_err();
    assert!(e.contains("more entries than the table has"), "{e}");
}

#[test]
fn the_fragment_is_the_form_the_scheduler_reads() {
    let mut a = port("100G");
    a.admit(req("name=a,bw=100M,distance=32,frame=1024")).unwrap();
    let text = fragment(&a, None).unwrap();
    let t: toml::Table = text.parse().unwrap();
    let d = &t["port_defaults"];
    assert_eq!(d["scheduler"].as_str(), Some("vlarb"));
    let high = d["vlarb"]["high"].as_array().unwrap();
    assert_eq!(high.len(), 64);
    assert_eq!(
        high[0].as_array().unwrap(),
        &[toml::Value::Integer(1), toml::Value::Integer(16)]
    );
    assert_eq!(high[32].as_array().unwrap()[1].as_integer(), Some(16));
    assert_eq!(high[1].as_array().unwrap()[1].as_integer(), Some(0));
    assert_eq!(d["vlarb"]["high_limit"].as_integer(), Some(255));
    assert!(d["vlarb"].get("low").is_none(), "the running low table is left alone");
}

/// A config's vlarb keys are read (and set aside for validation, so this works before and
/// after the scheduler's keys exist): the port's own high_limit over the defaults'.
#[test]
fn a_config_gives_speed_frame_and_high_limit() {
    let base = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml")).unwrap();
    let text = base
        .replacen(
            "\n[[port]]\nid = 0\n",
            "\n[port_defaults.vlarb]\nhigh = [[1, 8]]\nlow = [[0, 64]]\nhigh_limit = 6\n\n[[port]]\nid = 0\n",
            1,
        )
        .replacen(
            "\n[[port]]\nid = 2\n",
            "\n[[port]]\nid = 2\nspeed = \"100G\"\nmtu = 9000\nscheduler = \"vlarb\"\nvlarb = { high_limit = 2 }\n",
            1,
        );
    let all = read_config(&text, None).unwrap();
    assert_eq!(
        (all.speed_bps, all.max_frame, all.high_limit),
        (25_000_000_000, 9018, Some(6))
    );
    let two = read_config(&text, Some(2)).unwrap();
    assert_eq!(
        (two.speed_bps, two.max_frame, two.high_limit),
        (100_000_000_000, 9018, Some(2))
    );
    let zero = read_config(&text, Some(0)).unwrap();
    assert_eq!(
        (zero.speed_bps, zero.max_frame, zero.high_limit),
        (25_000_000_000, 1518, Some(6))
    );
    let e = read_config(&text.replace("high_limit = 6", "high_limit = 300"), None).unwrap_err();
    assert!(e.contains("port_defaults.vlarb.high_limit") && e.contains("300"), "{e}");
    assert!(read_config(&text, Some(7)).unwrap_err().contains("no port 7"));
    let e = read_config(&text.replace("speed = \"25G\"", "speed = \"fast\""), None).unwrap_err();
    assert!(e.contains("speed"), "{e}");
}

//! The shipped profiles load cleanly and resolve to what their comments promise.

use controlplane::{load_file, Loaded, MarkPoint, SchedMode, Threshold, Trust};
use std::path::Path;

fn load(name: &str) -> Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs").join(name);
    match load_file(&path) {
        Ok(l) => l,
        Err(e) => panic!("{name} does not load:\n{e}"),
    }
}

#[test]
fn default_profile_loads_without_warnings() {
    let l = load("default.toml");
    assert!(l.warnings.is_empty(), "warnings: {:#?}", l.warnings);
}

#[test]
fn default_profile_resolves_as_documented() {
    let c = load("default.toml").config;
    assert_eq!(c.buffer.cell_bytes, 256);
    assert_eq!(c.buffer.total_bytes, 4 << 20);
    assert_eq!(c.ports.len(), 4);
    for (i, p) in c.ports.iter().enumerate() {
        assert_eq!(usize::from(p.id), i);
        assert_eq!(p.speed_bps, 25_000_000_000);
        assert_eq!(p.cable_m, 15.0);
        assert_eq!(p.max_frame_bytes, 1518);
        assert!(p.headroom_bytes[3] > 0);
        assert_eq!(p.headroom_bytes[3] % 256, 0);
        for g in [0, 1, 2, 4, 5, 6, 7] {
            assert_eq!(p.headroom_bytes[g], 0, "lossy PG {g} has headroom");
        }
    }
    // 25G over 15 m: 100 cells (see headroom.rs).
    assert_eq!(c.ports[0].headroom_bytes[3], 100 * 256);

    assert_eq!(c.classify.trust, Trust::Dscp);
    assert_eq!(c.classify.dscp_to_tc[26], 3);
    assert_eq!(c.classify.dscp_to_tc[48], 6);
    assert_eq!(c.classify.dscp_to_tc[0], 0);
    assert_eq!(c.classify.dscp_to_tc[46], 0);
    assert_eq!(c.classify.tc_to_queue, [0, 1, 2, 3, 4, 5, 6, 7]);

    assert!(c.pfc.enabled[3]);
    assert_eq!(c.pfc.enabled.iter().filter(|e| **e).count(), 1);
    let wd = c.pfc.watchdog.as_ref().expect("watchdog on");
    assert_eq!((wd.detection_ns, wd.restoration_ns), (200_000_000, 400_000_000));

    assert!(c.pgs[3].lossless);
    assert_eq!(c.pgs[3].shared, Threshold::Dynamic { alpha: 0.125 });
    assert_eq!(c.pgs[3].xon_offset_bytes, 3072);
    assert!(!c.pgs[0].lossless);

    assert_eq!(c.queues[3].shared, Threshold::Unlimited);
    assert_eq!(c.queues[3].sched, SchedMode::Wdrr { weight: 1 });
    assert_eq!(c.queues[0].sched, SchedMode::Wdrr { weight: 1 });
    assert_eq!(c.queues[0].shared, Threshold::Dynamic { alpha: 1.0 });
    assert_eq!(c.queues[6].sched, SchedMode::Strict);
    let ecn = c.queues[3].ecn.as_ref().expect("ecn on queue 3");
    assert_eq!((ecn.kmin_bytes, ecn.kmax_bytes), (100_000, 400_000));
    assert_eq!(ecn.pmax, 0.2);
    assert_eq!(ecn.mark_at, MarkPoint::Dequeue);
    assert_eq!(ecn.ewma_shift, None);

    assert_eq!(c.cnp.queue, 6);
    let pol = c.cnp.policer.expect("CNP policer");
    assert_eq!(pol.rate_bps, 1_250_000_000);
    assert!(c.fdb.learning);
    assert_eq!(c.fdb.aging_ns, 300_000_000_000);
}

#[test]
fn ucloud_profile_loads() {
    let l = load("ucloud-tor.toml");
    assert!(l.warnings.is_empty(), "warnings: {:#?}", l.warnings);
    let c = l.config;
    assert!(c.ports.len() >= 4);
    assert!(c
        .ports
        .iter()
        .all(|p| p.speed_bps == 100_000_000_000 && p.cable_m == 100.0));
    assert_eq!(c.classify.dscp_to_tc[46], 5);
    assert_eq!(c.classify.dscp_to_tc[48], 6);
    assert_eq!(c.classify.dscp_to_tc[0], 2);
    assert!(c.pfc.enabled[5] && c.pgs[5].lossless);
    assert_eq!(c.queues[6].sched, SchedMode::Strict);
    assert!(c.queues[6].shaper.is_some());
    assert_eq!(c.queues[5].sched, SchedMode::Wdrr { weight: 1 });
    assert_eq!(c.queues[2].sched, SchedMode::Wdrr { weight: 1 });
    let ecn = c.queues[5].ecn.as_ref().expect("ecn on queue 5");
    assert_eq!((ecn.kmin_bytes, ecn.kmax_bytes, ecn.pmax), (400_000, 1_600_000, 0.2));
    // 100G over 100 m: 413 cells (see headroom.rs).
    assert_eq!(c.ports[0].headroom_bytes[5], 413 * 256);
}

//! Issue 45: per-port maps, as qosorch binds them. The Arista-7260CX3-C64 T1 with DSCP remap
//! (configs/sonic/rendered/, as sonic-cfggen rendered it) gives its uplinks (to the T2s)
//! DSCP_TO_TC_MAP AZURE_UPLINK and pfc_enable "3,4", its downlinks (to the T0s) AZURE and
//! "2,3,4,6". AZURE sends DSCP 2 and 6 to their own lossless classes, AZURE_UPLINK to TC 1
//! (best effort): the same frame lands in another PG and queue by the port it arrives on.

mod common;
use common::*;
use controlplane::sonic::{import_text, ImportOptions};
use controlplane::Config;
use dataplane::tools::gen::{announce, host_ip, host_mac};
use dataplane::wire::RoceFrameBuilder;
use dataplane::Switch;

fn rendered(name: &str) -> String {
    std::fs::read_to_string(repo_root().join("configs/sonic/rendered").join(name)).unwrap()
}

/// The remap file's TOML, as `rocectl sonic import --platform tomahawk2 --pg-lookup ...`
/// writes it.
fn remap_toml() -> String {
    let opts = ImportOptions {
        platform: Some("tomahawk2".into()),
        pg_lookup: Some((
            rendered("arista-7260cx3-c64.pg_profile_lookup.ini"),
            "arista-7260cx3-c64.pg_profile_lookup.ini".into(),
        )),
        source: None,
    };
    import_text(&rendered("arista-7260cx3-c64-t1-remap.json"), &opts)
        .unwrap_or_else(|e| panic!("{}", e.join("\n")))
        .toml
}

fn load(toml: &str) -> Config {
    controlplane::load_str(toml)
        .unwrap_or_else(|e| panic!("{e}\n{toml}"))
        .config
}

/// Uplinks Ethernet0 and Ethernet4, downlinks Ethernet136 and Ethernet144: hosts 1..=4 behind
/// them, in that order.
const PORTS: [&str; 4] = ["Ethernet0", "Ethernet4", "Ethernet136", "Ethernet144"];

struct Lab {
    sw: Switch,
    idx: [usize; 4],
    now: u64,
}

impl Lab {
    fn new(cfg: &Config) -> Lab {
        let idx = PORTS.map(|n| cfg.port_index(cfg.port_id_of(n).unwrap()).unwrap());
        let mut sw = Switch::new(cfg, 1);
        for (h, &p) in idx.iter().enumerate() {
            sw.receive(p, &announce(h as u16 + 1, 0).unwrap(), 0);
        }
        let mut lab = Lab { sw, idx, now: 1_000 };
        lab.drain();
        lab
    }

    fn drain(&mut self) {
        while !self.sw.is_idle() {
            self.now = self.sw.next_event(self.now).unwrap_or(self.now + 1).max(self.now + 1);
            self.sw.poll(self.now);
            for p in 0..self.sw.num_ports() {
                self.sw.transmit(p, self.now, &mut |_: usize, _: &[u8], _: u64| {});
            }
        }
    }

    /// Sends one RoCEv2 frame with `dscp` from the host behind PORTS[from] to the one behind
    /// PORTS[to]; returns the ingress PG it was counted in and the egress queue it left from.
    fn send(&mut self, from: usize, to: usize, dscp: u8) -> (usize, usize) {
        let (src, dst) = (from as u16 + 1, to as u16 + 1);
        let frame = RoceFrameBuilder::new()
            .macs(host_mac(src), host_mac(dst))
            .ipv4(host_ip(src), host_ip(dst))
            .dscp(dscp)
            .payload_len(512)
            .build()
            .unwrap();
        let (pi, po) = (self.idx[from], self.idx[to]);
        let pg_before: Vec<u64> = self.sw.pg_counters(pi).iter().map(|c| c.rx_packets).collect();
        let q_before: Vec<u64> = self.sw.queue_counters(po).iter().map(|c| c.tx_packets).collect();
        self.now += 1_000;
        self.sw.receive(pi, &frame, self.now);
        self.drain();
        let one = |after: Vec<u64>, before: Vec<u64>, what: &str| {
            let moved: Vec<usize> = (0..8).filter(|&i| after[i] != before[i]).collect();
            assert_eq!(moved.len(), 1, "{what}: {before:?} → {after:?}");
            assert_eq!(after[moved[0]], before[moved[0]] + 1, "{what}");
            moved[0]
        };
        let pg = one(
            self.sw.pg_counters(pi).iter().map(|c| c.rx_packets).collect(),
            pg_before,
            "ingress PG",
        );
        let q = one(
            self.sw.queue_counters(po).iter().map(|c| c.tx_packets).collect(),
            q_before,
            "egress queue",
        );
        (pg, q)
    }
}

#[test]
fn one_dscp_lands_by_the_ports_map_set() {
    let cfg = load(&remap_toml());
    let mut lab = Lab::new(&cfg);
    // From a T2 (uplink Ethernet0) to a T0 (downlink Ethernet144): AZURE_UPLINK.
    assert_eq!(lab.send(0, 3, 2), (0, 1), "DSCP 2 from an uplink: TC 1, PG 0, queue 1");
    assert_eq!(lab.send(0, 3, 6), (0, 1), "DSCP 6 from an uplink: TC 1");
    // From a T0 (downlink Ethernet136) to a T2 (uplink Ethernet4): AZURE.
    assert_eq!(lab.send(2, 1, 2), (2, 2), "DSCP 2 from a downlink: TC 2, PG 2, queue 2");
    assert_eq!(lab.send(2, 1, 6), (6, 6), "DSCP 6 from a downlink: TC 6");
    // The classes both maps agree on.
    for from in [0, 2] {
        assert_eq!(lab.send(from, 3 - from, 3), (3, 3), "DSCP 3 from {}", PORTS[from]);
        assert_eq!(lab.send(from, 3 - from, 4), (4, 4), "DSCP 4 from {}", PORTS[from]);
    }
    // Each port's PGs are lossless for its own priorities only.
    assert!(cfg.ports[lab.idx[2]].pgs[2].lossless && !cfg.ports[lab.idx[0]].pgs[2].lossless);
    // And its XOFF frames name its own priorities: PG 2 and 6 name 2 and 6 on a downlink,
    // nothing on an uplink; PG 3 names 3 on both.
    let (up, down) = (lab.sw.pg_priorities(lab.idx[0]), lab.sw.pg_priorities(lab.idx[2]));
    assert_eq!((down[2], down[6], down[3]), (1 << 2, 1 << 6, 1 << 3));
    assert_eq!((up[2], up[6], up[3]), (0, 0, 1 << 3));
}

/// A port's map set changes on a running switch: the next frame is classified by the new one.
#[test]
fn a_ports_map_set_changes_live() {
    let toml = remap_toml();
    let mut lab = Lab::new(&load(&toml));
    assert_eq!(lab.send(0, 3, 2), (0, 1));
    // Ethernet0 back to the switch's maps (AZURE), as `rocectl apply` would give it.
    let at = toml.find("name = \"Ethernet0\"").unwrap();
    let line = toml[at..].find("classify = \"AZURE_UPLINK\"").unwrap() + at;
    let end = toml[line..].find('\n').unwrap() + line;
    let edited = format!("{}{}", &toml[..line], &toml[end + 1..]);
    let new = load(&edited);
    assert_eq!(new.ports[lab.idx[0]].map_set, None);
    assert_eq!(controlplane::live_change_refusal(&load(&toml), &new), None);
    lab.sw.reconfigure(&new).unwrap();
    // DSCP 2 is now TC 2; Ethernet0 still pauses only 3 and 4, so PG 2 is lossy there, but it
    // is PG 2 that counts it.
    assert_eq!(lab.send(0, 3, 2), (2, 2));
}

/// `rocesw conform sonic` on the remap file as rendered: DscpMappingPB's expected queues are
/// the source port's maps, so from the default source (Ethernet0, an uplink: DSCP 2 and 6 to
/// queue 1) and from a downlink (Ethernet136: to queues 2 and 6) alike it passes, and so do
/// the PFC tests on the lossless DSCPs 3 and 4.
#[test]
fn conform_expects_the_source_ports_maps() {
    use dataplane::conform::{self, report::Outcome, Options};
    let json = rendered("arista-7260cx3-c64-t1-remap.json");
    for src in [None, Some("Ethernet136")] {
        let opts = Options {
            platform: Some("tomahawk2".into()),
            pg_lookup: Some((
                rendered("arista-7260cx3-c64.pg_profile_lookup.ini"),
                "arista-7260cx3-c64.pg_profile_lookup.ini".into(),
            )),
            only: vec!["DscpMappingPB".into(), "PFCtest".into()],
            src: src.map(Into::into),
            dst: src.map(|_| "Ethernet144".into()),
            ..Options::default()
        };
        let (r, _) = conform::run(&json, "remap.json", &opts, &mut |_| {}).unwrap();
        assert_eq!(r.tests.len(), 3, "{}", r.text(false, false));
        assert!(
            r.tests.iter().all(|t| t.outcome == Outcome::Passed),
            "{src:?}:\n{}",
            r.text(false, false)
        );
    }
}

/// The whole computed suite on the remap file as rendered, from its default source (an
/// uplink): nothing fails. WRRtest and WRRtest[wrr_chg] take sonic-mgmt's DSCP list for a
/// switch with `tunnel_qos_remap` enabled (3, 4, 8, 0, 46, 48 to queues 3, 4, 0, 1, 5, 7):
/// the file sends DSCP 5 to queue 1 beside DSCP 0 and DSCP 48 to queue 7, and with the
/// remap-disabled list both WRR tests failed here (DSCP 0's last frame 158 from the end).
#[test]
fn the_computed_suite_passes_on_the_remap_file_with_the_suites_remap_dscps() {
    use dataplane::conform::{self, report::Outcome, Options};
    let json = rendered("arista-7260cx3-c64-t1-remap.json");
    let opts = Options {
        platform: Some("tomahawk2".into()),
        pg_lookup: Some((
            rendered("arista-7260cx3-c64.pg_profile_lookup.ini"),
            "arista-7260cx3-c64.pg_profile_lookup.ini".into(),
        )),
        ..Options::default()
    };
    let (r, _) = conform::run(&json, "remap.json", &opts, &mut |_| {}).unwrap();
    let text = r.text(true, true);
    assert!(
        r.tests
            .iter()
            .all(|t| matches!(t.outcome, Outcome::Passed | Outcome::Skipped)),
        "{text}"
    );
    let wrr: Vec<_> = r.tests.iter().filter(|t| t.name.starts_with("WRRtest")).collect();
    assert_eq!(wrr.len(), 2, "{text}");
    assert!(wrr.iter().all(|t| t.outcome == Outcome::Passed), "{text}");
    assert!(
        text.contains("DSCP 48 → queue 7") && !text.contains("DSCP 5 → queue"),
        "{text}"
    );

    // The file without the remap keeps the suite's other list (DSCP 5 in queue 2, 48 in 6).
    let plain = rendered("arista-7260cx3-c64-t1.json");
    let only = Options {
        only: vec!["WRRtest".into()],
        ..opts
    };
    let (r, _) = conform::run(&plain, "plain.json", &only, &mut |_| {}).unwrap();
    let text = r.text(true, true);
    assert!(
        text.contains("DSCP 5 → queue 2") && text.contains("DSCP 48 → queue 6"),
        "{text}"
    );
    assert!(r.tests.iter().all(|t| t.outcome == Outcome::Passed), "{text}");
}

//! Issue 37: a SONiC config_db.json runs on real frames with its platform's buffer rules. The
//! project's two T1 configs in SONiC's format (configs/sonic/: NVIDIA Spectrum-1 with a shared
//! headroom pool, Broadcom Tomahawk 2 with old-style references and flat keys) replay RoCEv2
//! traffic; each lossless PG's XOFF and drop points, measured in replay as SONiC's own PFC test
//! measures them (the destination's transmit off, a counted burst from one source), are what the
//! platform's rules give from the file's values, to the cell; nudging the file by one cell moves
//! them by one frame.

mod common;
use common::*;
use controlplane::sonic::{import_text, ImportOptions};
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::Ecn;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn sonic(name: &str) -> String {
    std::fs::read_to_string(repo_root().join("configs/sonic").join(name)).unwrap()
}

/// The switch a config_db.json gives, with `edit` applied to its imported TOML.
fn switch_config(json: &str, edit: impl Fn(String) -> String) -> controlplane::Config {
    let toml = import_text(json, &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{e:#?}"))
        .toml;
    let toml = edit(toml);
    controlplane::load_str(&toml)
        .unwrap_or_else(|e| panic!("{e}\n{toml}"))
        .config
}

/// `json` with `from` replaced by `to` (once, and it must be there).
fn nudged(json: &str, from: &str, to: &str) -> String {
    assert!(json.contains(from), "{from} not in the file");
    json.replacen(from, to, 1)
}

/// The bundled 3→1 incast (25G senders) into Ethernet12, and a 3→1 at 100G on DSCP 3 (AZURE's
/// lossless TC 3) from ports with 40 m and 300 m profiles: nothing dropped, and the 100G incast
/// is held by PFC.
#[test]
fn incasts_through_sonic_configs_lose_no_lossless_frame() {
    let dir = tempfile::tempdir().unwrap();
    let ex = repo_root().join("examples/incast");
    let incast100 = dir.path().join("incast100");
    std::fs::create_dir_all(&incast100).unwrap();
    for s in 0..3u16 {
        let flow = Flow {
            src: s,
            dst: 3,
            dscp: 3,
            ecn: Ecn::Ect0,
            qp: u32::from(s) + 1,
            frame_len: 1024,
            count: 30_000,
            start_ns: 1_000,
            rate_bps: 100_000_000_000,
        };
        write_pcap(&incast100.join(format!("h{s}.pcap")), flow.frames().unwrap());
    }
    write_pcap(&incast100.join("h3.pcap"), vec![(0, announce(3, 0).unwrap())]);
    for file in ["spectrum1-t1.json", "tomahawk2-t1.json"] {
        let cfg = switch_config(&sonic(file), |t| t);
        let id = |name: &str| cfg.port_id_of(name).unwrap();
        let bundled: Vec<(u16, PathBuf)> = ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"]
            .iter()
            .enumerate()
            .map(|(i, n)| (id(n), ex.join(format!("port{i}.pcap"))))
            .collect();
        let o = replay(&cfg, &dir.path().join(format!("{file}-bundled")), &bundled, 1, false);
        assert_eq!(
            o.snapshot.totals.drops.total(),
            0,
            "{file}: {:?}",
            o.snapshot.totals.drops
        );
        assert_eq!(port(&o, id("Ethernet12")).tx_packets, 6000, "{file}");

        // Senders on the 40 m and 300 m ports (Ethernet16/20/24 on Spectrum, 16/20/24 on TH2),
        // the receiver on Ethernet28.
        let senders = ["Ethernet16", "Ethernet20", "Ethernet24"];
        let mut inputs: Vec<(u16, PathBuf)> = senders
            .iter()
            .enumerate()
            .map(|(i, n)| (id(n), incast100.join(format!("h{i}.pcap"))))
            .collect();
        inputs.push((id("Ethernet28"), incast100.join("h3.pcap")));
        let o = replay(&cfg, &dir.path().join(format!("{file}-100g")), &inputs, 1, false);
        assert_eq!(
            o.snapshot.totals.drops.total(),
            0,
            "{file}: {:?}",
            o.snapshot.totals.drops
        );
        let pfc: u64 = senders.iter().map(|n| port(&o, id(n)).pfc_tx[3]).sum();
        assert!(pfc > 0, "{file}: the 100G incast is held by PFC");
        let delivered = port(&o, id("Ethernet28")).tx_packets - port(&o, id("Ethernet28")).pfc_tx.iter().sum::<u64>();
        assert_eq!(delivered, 90_000, "{file}: every frame delivered");
    }
}

/// What a wrong value looks like: with the file's shared headroom pool a Spectrum-1 PG may take
/// two xoffs of it (sonic-mgmt's NVIDIA generator, issue 45), so the shipped 5 m profile (xoff
/// 23552 B, from the SN2700's pg_profile_lookup.ini) holds a 3→1 at 100G from a peer that takes
/// 802.3's 394 pause quanta, and so does the xoff SONiC's own dynamic formula gives for 5 m
/// (41984 B, `sonic::headroom::nvidia`); half the shipped xoff (11776 B, two of which are the
/// 23552 B a PG had before) is short, and the 5 m ports lose lossless frames at their ingress.
#[test]
fn a_short_xoff_shows_up_as_lost_lossless_frames() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    let json = sonic("spectrum1-t1.json");
    let cfg = switch_config(&json, |t| t);
    let id = |name: &str| cfg.port_id_of(name).unwrap();
    for (s, name) in ["Ethernet0", "Ethernet4", "Ethernet8"].iter().enumerate() {
        let flow = Flow {
            src: s as u16,
            dst: 3,
            dscp: 3,
            ecn: Ecn::Ect0,
            qp: s as u32 + 1,
            frame_len: 1024,
            count: 20_000,
            start_ns: 1_000,
            rate_bps: 100_000_000_000,
        };
        let path = dir.path().join(format!("h{s}.pcap"));
        write_pcap(&path, flow.frames().unwrap());
        inputs.push((id(name), path));
    }
    let h3 = dir.path().join("h3.pcap");
    write_pcap(&h3, vec![(0, announce(3, 0).unwrap())]);
    inputs.push((id("Ethernet12"), h3));
    let lost = |o: &dataplane::replay::ReplayOutcome, n: &str| port(o, id(n)).drops.get("headroom_overflow");
    let o = replay(&cfg, &dir.path().join("shipped"), &inputs, 1, false);
    assert_eq!(o.snapshot.totals.drops.total(), 0, "{:?}", o.snapshot.totals.drops);
    let short = nudged(&json, "\"xoff\": \"23552\"", "\"xoff\": \"11776\"");
    let o = replay(
        &switch_config(&short, |t| t),
        &dir.path().join("short"),
        &inputs,
        1,
        false,
    );
    assert!(
        lost(&o, "Ethernet0") > 0 && lost(&o, "Ethernet4") > 0,
        "{:?}",
        o.snapshot.totals.drops
    );
    assert_eq!(lost(&o, "Ethernet8"), 0, "the 40 m profile (two of 29696 B) holds");
    let fixed = nudged(&json, "\"xoff\": \"23552\"", "\"xoff\": \"41984\"");
    let cfg = switch_config(&fixed, |t| t);
    let o = replay(&cfg, &dir.path().join("formula"), &inputs, 1, false);
    assert_eq!(o.snapshot.totals.drops.total(), 0, "{:?}", o.snapshot.totals.drops);
}

/// Issue 49 item 4: `rocectl check`'s headroom warning against what the switch does. The
/// shipped 5 m profile (two xoffs of 23552 B: 491 cells) holds the 1 KiB incasts above, yet check
/// warns about it; SONiC's own formula's xoff for 5 m (41984 B, two of them 875 cells) it
/// accepts. The warning is right: headroom is sized for the worst frames, not for 1 KiB ones.
/// Frames of 97 B take two 96 B cells for 121 B of line time (1 KiB ones 11 cells for 1048 B),
/// and a PFC frame waits for the jumbo frame the port is sending. So a sender of 97 B frames on
/// Ethernet0, whose egress carries a lossy jumbo flow, overflows the shipped headroom, and not
/// the formula's: check warns about the file that loses frames. (Measured: the shipped 491
/// cells lose 35 frames, their peak 490; SONiC's 875 peak at 560; without the jumbo flow the
/// shipped ones hold. check asks 794 cells of this port: its formula also counts MAC/PHY delay
/// and the cable both ways, which replay's peer model leaves out, and frames of the MTU where
/// these are small, so a headroom between what a replay can fill and the formula's is warned
/// about though no replay here loses a frame.)
#[test]
fn the_headroom_check_warns_about_the_file_that_loses_small_frames() {
    let dir = tempfile::tempdir().unwrap();
    let json = sonic("spectrum1-t1.json");
    let shipped_cfg = switch_config(&json, tx_off("Ethernet12"));
    let id = |name: &str| shipped_cfg.port_id_of(name).unwrap();
    let small = Flow {
        src: 0,
        dst: 3,
        dscp: 3,
        ecn: Ecn::Ect0,
        qp: 1,
        frame_len: 97,
        count: 40_000,
        start_ns: 1_000,
        rate_bps: 100_000_000_000,
    };
    // Lossy jumbo frames into Ethernet0 all along: its egress is busy when XOFF is due.
    let jumbo = Flow {
        src: 1,
        dst: 0,
        dscp: 0,
        ecn: Ecn::NotEct,
        qp: 2,
        frame_len: 9100,
        count: 2_000,
        start_ns: 2_000,
        rate_bps: 100_000_000_000,
    };
    let (h0, h1, h3) = (
        dir.path().join("h0.pcap"),
        dir.path().join("h1.pcap"),
        dir.path().join("h3.pcap"),
    );
    write_pcap(&h0, small.frames().unwrap());
    write_pcap(&h1, jumbo.frames().unwrap());
    write_pcap(&h3, vec![(0, announce(3, 0).unwrap())]);
    let inputs = [(id("Ethernet0"), h0), (id("Ethernet4"), h1), (id("Ethernet12"), h3)];
    let lost = |o: &dataplane::replay::ReplayOutcome| port(o, id("Ethernet0")).drops.get("headroom_overflow");
    // What check says of each file, and what the switch does with it.
    let warned = |json: &str| -> bool {
        let toml = import_text(json, &ImportOptions::default()).unwrap().toml;
        let w = controlplane::load_str(&toml).unwrap().warnings;
        w.iter().any(|w| w.starts_with("port[0].pg.3.headroom ("))
    };
    assert!(warned(&json), "check warns about the shipped 5 m profile");
    let o = replay(&shipped_cfg, &dir.path().join("shipped"), &inputs, 1, false);
    assert!(
        lost(&o) > 0,
        "the shipped headroom overflows: {:?}",
        o.snapshot.totals.drops
    );
    let formula = nudged(&json, "\"xoff\": \"23552\"", "\"xoff\": \"41984\"");
    assert!(!warned(&formula), "check accepts SONiC's own 41984 B");
    let o = replay(
        &switch_config(&formula, tx_off("Ethernet12")),
        &dir.path().join("formula"),
        &inputs,
        1,
        false,
    );
    assert_eq!(lost(&o), 0, "{:?}", o.snapshot.totals.drops);
    assert!(port(&o, id("Ethernet0")).pfc_tx[3] > 0, "held by PFC");
}

/// A platform's rules for one lossless PG, from the file's values, in cells of the platform.
struct PgRules {
    /// The PG's reserve before it uses the shared pool.
    min: u64,
    /// The ingress pool's size and the PG's alpha (2^dynamic_th).
    pool: u64,
    alpha: f64,
    /// The headroom past XOFF.
    headroom: u64,
}

impl PgRules {
    /// The rules on a platform of `cell`-byte cells for a PG whose reserve is `min` bytes, in a
    /// pool of `pool` bytes split evenly in `slices` (XPEs), with `dynamic_th` and `headroom`
    /// bytes.
    fn new(cell: u64, pool: u64, min: u64, headroom: u64, dynamic_th: i32, slices: u64) -> PgRules {
        PgRules {
            min: min.div_ceil(cell),
            pool: pool.div_ceil(cell) / slices,
            alpha: 2f64.powi(dynamic_th),
            headroom: headroom.div_ceil(cell),
        }
    }

    /// Frames of one cell from one source, counted from 1, at which the PG first asks for XOFF
    /// and is first refused, by SAI's reading of the profile: the reserve first; then the
    /// shared pool while the PG's use stays within alpha × the pool's free cells (SAI's dynamic
    /// threshold), XOFF once it reaches that; then the headroom; then drops.
    fn points(&self) -> (u64, u64) {
        let limit = |shared: u64| (self.alpha * (self.pool - shared) as f64).floor() as u64;
        let (mut min, mut shared, mut headroom, mut xoff) = (0, 0, 0, None);
        for frame in 1.. {
            let in_headroom = if min < self.min {
                min += 1;
                false
            } else if shared < self.pool && shared < limit(shared) {
                // A one-cell frame fits: use + 1 <= limit.
                shared += 1;
                false
            } else if headroom < self.headroom {
                headroom += 1;
                true
            } else {
                return (xoff.expect("XOFF before the first drop"), frame);
            };
            if xoff.is_none() && (in_headroom || shared >= limit(shared)) {
                xoff = Some(frame);
            }
        }
        unreachable!()
    }
}

/// Replays `frames` one-cell lossless frames from `from` to `to` (transmit off), with a peer that
/// keeps sending through PFC (as a PTF host does); returns (PFC frames sent, frames dropped).
fn burst(cfg: &controlplane::Config, dir: &Path, from: &str, to: &str, frames: u64, len: usize) -> (u64, u64) {
    std::fs::create_dir_all(dir).unwrap();
    let flow = Flow {
        src: 0,
        dst: 1,
        dscp: 3,
        ecn: Ecn::Ect0,
        qp: 1,
        frame_len: len,
        count: frames,
        start_ns: 1_000,
        rate_bps: 100_000_000_000,
    };
    let (src, dst) = (dir.join("src.pcap"), dir.join("dst.pcap"));
    write_pcap(&src, flow.frames().unwrap());
    write_pcap(&dst, vec![(0, announce(1, 0).unwrap())]);
    let (a, b) = (cfg.port_id_of(from).unwrap(), cfg.port_id_of(to).unwrap());
    let o = replay(cfg, dir, &[(a, src), (b, dst)], 1, true);
    let p = port(&o, a);
    (p.pfc_tx[3], o.snapshot.totals.drops.total())
}

/// Measures the XOFF and drop points of PG 3 on `from` by replaying one frame less and exactly
/// as many as `expected` says, and checks them.
fn check_points(cfg: &controlplane::Config, dir: &Path, from: &str, expected: (u64, u64), len: usize) {
    let (xoff, drop) = expected;
    assert_eq!(
        burst(cfg, &dir.join("a"), from, "Ethernet8", xoff - 1, len),
        (0, 0),
        "{from}: no PFC below {xoff} frames"
    );
    let (pfc, dropped) = burst(cfg, &dir.join("b"), from, "Ethernet8", xoff, len);
    assert!(
        pfc > 0 && dropped == 0,
        "{from}: PFC at frame {xoff} ({pfc} PFC, {dropped} drops)"
    );
    let (_, dropped) = burst(cfg, &dir.join("c"), from, "Ethernet8", drop - 1, len);
    assert_eq!(dropped, 0, "{from}: no drop below {drop} frames");
    let (_, dropped) = burst(cfg, &dir.join("d"), from, "Ethernet8", drop, len);
    assert_eq!(dropped, 1, "{from}: frame {drop} is the first dropped");
}

/// The destination's transmit off, as SONiC's QoS tests disable it (SAI's PKT_TX_ENABLE).
fn tx_off(port: &'static str) -> impl Fn(String) -> String {
    move |t: String| {
        let line = format!("name = \"{port}\"");
        let at = t.find(&line).unwrap_or_else(|| panic!("{port} not in the import"));
        let mut t = t;
        t.insert_str(at, "tx = \"off\"\n");
        t
    }
}

#[test]
fn spectrum1_xoff_and_drop_points_are_the_platforms_to_the_cell() {
    let dir = tempfile::tempdir().unwrap();
    let json = sonic("spectrum1-t1.json");
    // Spectrum-1: 96 B cells; with a shared headroom pool (ingress_lossless_pool xoff) a
    // lossless profile's size is its reserve (size = xon) and its xoff the headroom it may
    // take from the pool. Ethernet0's profile: pg_lossless_100000_5m_profile.
    // With the shared headroom pool a PG's headroom is two xoffs (sonic-mgmt's NVIDIA generator
    // puts the first drop there).
    let rules = |size: u64, xoff: u64, th: i32| PgRules::new(96, 8_719_360, size, 2 * xoff, th, 1);
    let base = rules(19456, 23552, 0);
    let cfg = switch_config(&json, tx_off("Ethernet8"));
    check_points(&cfg, &dir.path().join("base"), "Ethernet0", base.points(), 64);
    // One cell more of xoff: two frames later to the first drop (two xoffs), XOFF where it was.
    let more = nudged(&json, "\"xoff\": \"23552\"", "\"xoff\": \"23648\"");
    let (x0, d0) = base.points();
    let (x1, d1) = rules(19456, 23648, 0).points();
    assert_eq!((x1, d1), (x0, d0 + 2));
    check_points(
        &switch_config(&more, tx_off("Ethernet8")),
        &dir.path().join("xoff"),
        "Ethernet0",
        (x1, d1),
        64,
    );
    // One cell less of size: XOFF and the drop a frame earlier.
    let less = nudged(&json, "\"size\": \"19456\"", "\"size\": \"19360\"");
    let (x2, d2) = rules(19360, 23552, 0).points();
    assert_eq!((x2, d2), (x0 - 1, d0 - 1));
    check_points(
        &switch_config(&less, tx_off("Ethernet8")),
        &dir.path().join("size"),
        "Ethernet0",
        (x2, d2),
        64,
    );
}

#[test]
fn tomahawk2_xoff_and_drop_points_are_the_platforms_to_the_cell() {
    let dir = tempfile::tempdir().unwrap();
    let json = sonic("tomahawk2-t1.json");
    // Tomahawk 2: 208 B cells; a lossless profile's size is the PG's guaranteed minimum and its
    // xoff the headroom beside it. Ethernet0's profile: pg_lossless_100000_40m_profile.
    // The MMU is four XPEs, each with a quarter of the pool (issue 45); Ethernet0's PG is
    // charged in its pipe's.
    let rules = |size: u64, xoff: u64, th: i32| PgRules::new(208, 33_582_016, size, xoff, th, 4);
    let base = rules(1248, 59696, 0);
    let cfg = switch_config(&json, tx_off("Ethernet8"));
    check_points(&cfg, &dir.path().join("base"), "Ethernet0", base.points(), 64);
    let (x0, d0) = base.points();
    // One cell more of xoff (208 B): the first drop one frame later.
    let more = nudged(&json, "\"xoff\": \"59696\"", "\"xoff\": \"59904\"");
    let (x1, d1) = rules(1248, 59904, 0).points();
    assert_eq!((x1, d1), (x0, d0 + 1));
    check_points(
        &switch_config(&more, tx_off("Ethernet8")),
        &dir.path().join("xoff"),
        "Ethernet0",
        (x1, d1),
        64,
    );
    // dynamic_th one step higher (alpha 2): XOFF much later.
    let steeper = nudged(&json, "\"dynamic_th\": \"0\"", "\"dynamic_th\": \"1\"");
    let (x2, _) = rules(1248, 59696, 1).points();
    assert!(x2 > x0 + 6_000, "{x2} against {x0}");
    let cfg = switch_config(&steeper, tx_off("Ethernet8"));
    let (pfc, _) = burst(&cfg, &dir.path().join("th"), "Ethernet0", "Ethernet8", x0, 64);
    assert_eq!(pfc, 0, "with dynamic_th 1 the old XOFF point passes without PFC");
}

/// Port names from SONiC are the ports' names: `--input Ethernet8=…` on the command line, and
/// the summary names each port.
#[test]
fn sonic_port_names_work_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let ex = repo_root().join("examples/incast");
    let cfg = repo_root().join("configs/sonic/spectrum1-t1.json");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["replay", "-q", "--config"])
        .arg(&cfg)
        .arg("--input")
        .arg(format!("Ethernet0={}", ex.join("port0.pcap").display()))
        .arg("--input")
        .arg(format!("Ethernet12={}", ex.join("port3.pcap").display()))
        .arg("--output-dir")
        .arg(&out)
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let p12 = s["ports"].as_array().unwrap().iter().find(|p| p["id"] == 12).unwrap();
    assert_eq!(p12["tx_packets"], 2000);
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["replay", "-q", "--config"])
        .arg(&cfg)
        .arg("--input")
        .arg(format!("Ethernet2={}", ex.join("port0.pcap").display()))
        .arg("--output-dir")
        .arg(dir.path().join("bad"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && err.contains("\"Ethernet2\" is not a port") && err.contains("8 (Ethernet8)"),
        "{err}"
    );
}

/// Issue 49 item 8: `replay --config` takes a config_db.json as well as TOML, and its help
/// says so (it said "(TOML)").
#[test]
fn replay_help_says_config_takes_a_config_db_json() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["replay", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(o.stdout).unwrap();
    // The option's entry (the usage line names it too), up to the next one.
    let at = help.find("--config <FILE>\n").expect("--config in the help");
    let text = &help[at..at + help[at..].find("\n\n").unwrap()];
    assert!(text.contains("config_db.json") && !text.contains("(TOML)"), "{text}");
}

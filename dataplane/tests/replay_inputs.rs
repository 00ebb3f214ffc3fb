//! Real captures, malformed frames and bad command lines.

mod common;
use common::*;
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::Ecn;
use std::process::Command;

/// The public RoCEv2 RC capture the repository holds (tests/data/README.md says where it is from).
fn public_pcap() -> std::path::PathBuf {
    repo_root().join("dataplane/tests/data/public-rocev2-rc-send.pcap")
}

/// The public RoCEv2 RC capture, split by sender MAC onto ports 0 and 1, crosses the switch
/// with every frame intact and in order.
#[test]
fn public_rocev2_capture_crosses_intact() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let frames = read_pcap(&public_pcap());
    let a = [0x18, 0x3d, 0x5e, 0xbf, 0x43, 0x71];
    let base = frames[0].0;
    let (mut p0, mut p1) = (Vec::new(), Vec::new());
    for (t, f) in &frames {
        let item = (t - base, f.clone());
        if f[6..12] == a {
            p0.push(item)
        } else {
            p1.push(item)
        }
    }
    assert!(!p0.is_empty() && !p1.is_empty());
    write_pcap(&d.join("p0.pcap"), p0.clone());
    write_pcap(&d.join("p1.pcap"), p1.clone());
    let o = replay(
        &default_config(),
        d,
        &[(0, d.join("p0.pcap")), (1, d.join("p1.pcap"))],
        1,
        false,
    );
    assert_eq!(o.snapshot.totals.drops.total(), 0, "{:?}", o.snapshot.totals.drops);

    for (src, dst, sent) in [(0u16, 1u16, &p0), (1, 0, &p1)] {
        let got = read_pcap(&out_pcap(d, dst));
        let sent_roce: Vec<&Vec<u8>> = sent
            .iter()
            .map(|(_, f)| f)
            .filter(|f| f.len() > 42 && f[12..14] == [8, 0] && f[23] == 17)
            .collect();
        let got_roce: Vec<&Vec<u8>> = got
            .iter()
            .map(|(_, f)| f)
            .filter(|f| f.len() > 42 && f[12..14] == [8, 0] && f[23] == 17)
            .collect();
        assert_eq!(
            got_roce, sent_roce,
            "RoCEv2 frames from port {src} changed on the way to port {dst}"
        );
    }
    let s = oracle("check_pcap.py", &[out_pcap(d, 0), out_pcap(d, 1)]);
    assert_eq!(s["totals"]["roce"], 105);
    assert_eq!(s["totals"]["icrc_ok"], 105);
}

#[test]
fn malformed_frames_are_counted_by_reason_and_the_rest_pass() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = Flow {
        src: 0,
        dst: 1,
        dscp: 26,
        ecn: Ecn::Ect0,
        qp: 1,
        frame_len: 256,
        count: 10,
        start_ns: 1_000,
        rate_bps: 1_000_000_000,
    }
    .frames()
    .unwrap();
    let mut frames = good.clone();
    let g = &good[0].1;
    let mut bad_ihl = g.clone();
    bad_ihl[14] = 0x43; // IHL 3 < 5
    let mut bad_len = g.clone();
    bad_len[16..18].copy_from_slice(&9000u16.to_be_bytes()); // total length past the frame
    let mut truncated_udp = g[..14 + 20 + 4].to_vec();
    truncated_udp[16..18].copy_from_slice(&24u16.to_be_bytes()); // IP says 4 bytes of payload
    let runt = g[..10].to_vec();
    let oversize = vec![0u8; 9000];
    let mut unknown = g.clone();
    unknown[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // IEEE local experimental
    for (i, f) in [bad_ihl, bad_len, truncated_udp, runt, oversize, unknown]
        .into_iter()
        .enumerate()
    {
        frames.push((50_000 + i as u64 * 1_000, f));
    }
    write_pcap(&d.join("p0.pcap"), frames);
    write_pcap(&d.join("p1.pcap"), vec![(0, announce(1, 0).unwrap())]);
    let o = replay(
        &default_config(),
        d,
        &[(0, d.join("p0.pcap")), (1, d.join("p1.pcap"))],
        1,
        false,
    );
    let p = port(&o, 0);
    assert_eq!(p.rx_packets, 16);
    for reason in ["bad_ipv4_ihl", "bad_ipv4_length", "truncated_udp", "runt", "oversize"] {
        assert_eq!(p.drops.get(reason), 1, "{reason}: {:?}", p.drops);
    }
    assert_eq!(p.unknown_ethertype, 1);
    // The 10 good frames and the unknown-EtherType frame reach host 1.
    assert_eq!(port(&o, 1).tx_packets, 11);
}

fn rocesw(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rocesw")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_command_lines_fail_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = repo_root().join("configs/default.toml");
    let cfg = cfg.to_str().unwrap();
    let out = d.join("out");
    let out = out.to_str().unwrap();
    let good = d.join("good.pcap");
    write_pcap(&good, vec![(0, announce(0, 1).unwrap())]);
    let good = format!("0={}", good.display());

    let (ok, err) = rocesw(&[
        "replay",
        "--config",
        cfg,
        "--input",
        "0=/nonexistent.pcap",
        "--output-dir",
        out,
    ]);
    assert!(!ok && err.contains("/nonexistent.pcap"), "{err}");

    let text = d.join("text.pcap");
    std::fs::write(&text, "not a capture").unwrap();
    let (ok, err) = rocesw(&[
        "replay",
        "--config",
        cfg,
        "--input",
        &format!("0={}", text.display()),
        "--output-dir",
        out,
    ]);
    assert!(!ok && err.contains("not a readable pcap"), "{err}");

    let (ok, err) = rocesw(&[
        "replay",
        "--config",
        cfg,
        "--input",
        &good.replace("0=", "9="),
        "--output-dir",
        out,
    ]);
    assert!(
        !ok && err.contains("\"9\" is not a port of the config (ports: 0, 1, 2, 3)"),
        "{err}"
    );

    let bad_cfg = d.join("bad.toml");
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    std::fs::write(&bad_cfg, text.replace("kmin = \"100KB\"", "kmin = \"900KB\"")).unwrap();
    let (ok, err) = rocesw(&[
        "replay",
        "--config",
        bad_cfg.to_str().unwrap(),
        "--input",
        &good,
        "--output-dir",
        out,
    ]);
    assert!(!ok && err.contains("kmin"), "{err}");

    let (ok, _) = rocesw(&[
        "replay",
        "--config",
        cfg,
        "--input",
        &good,
        "--output-dir",
        out,
        "--quiet",
    ]);
    assert!(ok);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("out/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["ports"].as_array().unwrap().len(), 4);
    assert!(summary["totals"]["drops"].is_object());
}

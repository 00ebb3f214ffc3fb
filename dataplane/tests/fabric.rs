//! `rocesw fabric`: several real switches and NIC-model hosts in one virtual clock
//! (dataplane/src/fabric). Each run is a few milliseconds of virtual time.

use dataplane::fabric::{self, topology, FabricOptions, FabricOutcome};
use std::path::{Path, PathBuf};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/fabric")
}

fn default_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/default.toml")
}

/// The shipped leaf-spine topology with its [[traffic]] replaced (and its switch configs found
/// where they are shipped).
fn leaf_spine(traffic: &str) -> topology::Topology {
    let text = std::fs::read_to_string(examples().join("leaf-spine.toml")).unwrap();
    let cut = text.find("[[traffic]]").unwrap();
    let text = format!("{}{traffic}", &text[..cut]);
    topology::from_str(&text, &examples(), Some(&default_config()), 1).unwrap()
}

fn run(topo: &topology::Topology, opts: &FabricOptions) -> FabricOutcome {
    fabric::run(topo, opts).unwrap()
}

/// Two shipped leaf switches (`names`) joined by their port 4, `hosts` as (name, SWITCH:PORT),
/// one `[[traffic]]` section, 3 ms, DCQCN off: PFC alone.
fn two_leaves(names: (&str, &str), hosts: &[(&str, &str)], traffic: &str) -> topology::Topology {
    let leaf = examples().join("leaf.toml");
    let mut text = String::from("duration = \"3ms\"\n[nic]\ndcqcn = false\n");
    for name in [names.0, names.1] {
        text += &format!("[[switch]]\nname = \"{name}\"\nconfig = \"{}\"\n", leaf.display());
    }
    for (name, _) in hosts {
        text += &format!("[[host]]\nname = \"{name}\"\n");
    }
    for (name, port) in hosts {
        text += &format!("[[link]]\na = \"{name}\"\nb = \"{port}\"\n");
    }
    text += &format!("[[link]]\na = \"{}:4\"\nb = \"{}:4\"\n", names.0, names.1);
    text += &format!("[[traffic]]\n{traffic}\n");
    topology::from_str(&text, &examples(), Some(&default_config()), 1).unwrap_or_else(|e| panic!("{e:#}\n{text}"))
}

const INCAST_1M: &str = r#"
[[traffic]]
pattern = "incast"
to = ["h7"]
size = "1MiB"
"#;

/// The shipped example twice with one seed, with a pcap of a link: the same bytes out. Another
/// seed changes the ECMP hashing and so the result.
#[test]
fn same_topology_and_seed_give_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let topo = topology::load(&examples().join("leaf-spine.toml"), Some(&default_config()), 1).unwrap();
    let mut outs = Vec::new();
    for k in 0..2 {
        let pcap = dir.path().join(format!("uplink{k}.pcap"));
        let opts = FabricOptions {
            seed: 1,
            pcaps: vec![("leaf0:4-spine0:0".into(), pcap.clone())],
            ..Default::default()
        };
        let o = run(&topo, &opts);
        outs.push((serde_json::to_vec_pretty(&o).unwrap(), std::fs::read(&pcap).unwrap()));
    }
    assert_eq!(outs[0].0, outs[1].0, "summary differs between two runs");
    assert_eq!(outs[0].1, outs[1].1, "pcap differs between two runs");
    assert!(outs[0].1.len() > 100_000, "the uplink carried traffic");
    let other = run(
        &topology::load(&examples().join("leaf-spine.toml"), Some(&default_config()), 2).unwrap(),
        &FabricOptions {
            seed: 2,
            ..Default::default()
        },
    );
    assert_ne!(serde_json::to_vec_pretty(&other).unwrap(), outs[0].0);
}

/// A 7→1 incast of 1 MiB messages through 2 leaves and 2 spines. With PFC alone: pause frames
/// on the way to the senders and not one lossless frame lost; every flow completes. With
/// DCQCN on: the switches mark CE, the receiver sends CNPs, the senders cut their rate, and
/// the fabric needs fewer pauses.
#[test]
fn leaf_spine_incast_is_lossless_with_pfc_and_marks_with_dcqcn() {
    let topo = leaf_spine(INCAST_1M);
    let pfc_only = run(
        &topo,
        &FabricOptions {
            seed: 1,
            dcqcn: Some(false),
            ..Default::default()
        },
    );
    let pfc_frames = |o: &FabricOutcome| -> u64 {
        o.links
            .iter()
            .map(|l| l.forward.pfc_frames + l.reverse.pfc_frames)
            .sum()
    };
    assert_eq!(pfc_only.drops, 0, "switch drops");
    assert!(pfc_frames(&pfc_only) > 0, "the incast must pause someone");
    for f in &pfc_only.flows {
        assert_eq!(f.lost, 0, "flow {} lost packets", f.id);
        assert!(f.fct_ns.is_some(), "flow {} did not complete", f.id);
        assert_eq!(
            (f.ce_marked > 0, f.cnps_received),
            (true, 0),
            "flow {}: marks but no CNPs without DCQCN",
            f.id
        );
    }
    // Seven senders share h7's 100G: the last completes after 7 MiB of line time.
    let last = pfc_only.flows.iter().filter_map(|f| f.fct_ns).max().unwrap();
    assert!(
        last > 7 * (1 << 20) * 8 / 100,
        "faster than the bottleneck allows: {last} ns"
    );
    let paused_hosts = pfc_only.hosts.iter().filter(|h| h.pfc_frames_received > 0).count();
    assert!(paused_hosts > 0, "PFC reached the senders");

    let dcqcn = run(
        &topo,
        &FabricOptions {
            seed: 1,
            dcqcn: Some(true),
            ..Default::default()
        },
    );
    assert_eq!(dcqcn.drops, 0);
    for f in &dcqcn.flows {
        assert_eq!(f.lost, 0);
        assert!(
            f.ce_marked > 0 && f.cnps_sent > 0 && f.cnps_received > 0,
            "flow {}: {f:?}",
            f.id
        );
        assert!(f.final_rate_bps.unwrap() < 100e9, "flow {} never cut its rate", f.id);
    }
    assert!(
        pfc_frames(&dcqcn) < pfc_frames(&pfc_only),
        "DCQCN should need fewer pauses: {} vs {}",
        pfc_frames(&dcqcn),
        pfc_frames(&pfc_only)
    );
}

/// Two switches in a chain, a sender on each and the receiver on the second: the second
/// switch's port to the receiver is the only bottleneck (2:1). Its PG facing the first switch
/// fills and pauses it (PFC on the inter-switch link); the first switch, never congested by
/// its own traffic (100G in, 100G out), then backs up into the PG of its sender and pauses
/// that host. Nothing is lost.
#[test]
fn pfc_spreads_from_the_downstream_switch_to_the_upstream_one() {
    let topo = two_leaves(
        ("up", "down"),
        &[("a", "up:0"), ("d", "down:1"), ("r", "down:0")],
        "pattern = \"incast\"\nto = [\"r\"]\nsize = \"12MiB\"",
    );
    let o = run(
        &topo,
        &FabricOptions {
            seed: 1,
            ..Default::default()
        },
    );
    let inter = o.links.iter().find(|l| l.name == "up:4-down:4").unwrap();
    assert!(inter.reverse.pfc_frames > 0, "down paused up: {inter:?}");
    assert!(
        inter.forward.paused_ns[3] > 0,
        "up's traffic to down was paused on priority 3"
    );
    assert_eq!(inter.forward.pfc_frames, 0, "nothing pauses down");
    let a = o.links.iter().find(|l| l.name == "a-up:0").unwrap();
    assert!(
        a.reverse.pfc_frames > 0,
        "the pause spread to the first switch's sender: {a:?}"
    );
    assert!(o.hosts[0].paused_ns[3] > 0);
    assert_eq!(o.switches["up"].totals.pfc_rx[3], inter.reverse.pfc_frames);
    assert_eq!(o.drops, 0);
    for f in &o.flows {
        assert_eq!(f.lost, 0);
        assert!(f.fct_ns.is_some());
    }
}

/// Bad topologies are refused with the entry and the reason, never a panic.
#[test]
fn bad_topologies_get_useful_errors() {
    let leaf = examples().join("leaf.toml");
    let base = |links: &str, traffic: &str| {
        format!(
            "[[switch]]\nname = \"s\"\nconfig = \"{}\"\n[[switch]]\nname = \"t\"\nconfig = \"{}\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n{links}\n{traffic}",
            leaf.display(),
            leaf.display()
        )
    };
    let ok_links = "[[link]]\na = \"a\"\nb = \"s:0\"\n[[link]]\na = \"b\"\nb = \"s:1\"\n";
    let incast = "[[traffic]]\npattern = \"incast\"\nto = [\"b\"]\nsize = \"4KiB\"\n";
    let cases = [
        (base(ok_links, incast), None),
        (
            base("[[link]]\na = \"a\"\nb = \"x:0\"\n", incast),
            Some("no host or switch named \"x\""),
        ),
        (
            base(
                "[[link]]\na = \"a\"\nb = \"s:9\"\n[[link]]\na = \"b\"\nb = \"s:1\"\n",
                incast,
            ),
            Some("switch \"s\" has no port 9"),
        ),
        (
            base(
                "[[link]]\na = \"a\"\nb = \"s:0\"\n[[link]]\na = \"b\"\nb = \"s:0\"\n",
                incast,
            ),
            Some("port 0 of switch \"s\" is already used by link 1"),
        ),
        (
            base("[[link]]\na = \"a\"\nb = \"s:0\"\n", incast),
            Some("host \"b\" has no link"),
        ),
        (
            base(
                "[[link]]\na = \"a\"\nb = \"s:0\"\n[[link]]\na = \"b\"\nb = \"t:0\"\n",
                incast,
            ),
            Some("no route from \"a\" to \"b\""),
        ),
        (
            base(ok_links, "[[traffic]]\npattern = \"incast\"\nto = [\"zz\"]\n"),
            Some("no host named \"zz\""),
        ),
        (
            base(ok_links, "[[traffic]]\npattern = \"spray\"\n"),
            Some("unknown pattern \"spray\""),
        ),
        (
            base(
                "[[link]]\na = \"a\"\nb = \"s:0\"\nspeed = \"25G\"\n[[link]]\na = \"b\"\nb = \"s:1\"\n",
                incast,
            ),
            Some("runs at 100000000000 b/s"),
        ),
        (base(ok_links, ""), Some("no traffic")),
        // Issue 21 item 13: a cable beyond what a switch config takes, or one that contradicts
        // the port's config (which sized its headroom), is refused naming both; the same
        // length in other words is not a contradiction.
        (
            base(
                "[[link]]\na = \"a\"\nb = \"s:0\"\ncable = \"100000000000000000000000km\"\n[[link]]\na = \"b\"\nb = \"s:1\"\n",
                incast,
            ),
            Some("link 1 (a – s:0): cable \"100000000000000000000000km\" must be from 0m to 10000m"),
        ),
        (
            base(
                "[[link]]\na = \"a\"\nb = \"s:0\"\ncable = \"10km\"\n[[link]]\na = \"b\"\nb = \"s:1\"\n",
                incast,
            ),
            Some("cable: the link says 10km, but port 0 of switch \"s\" has 10m in its config"),
        ),
        (
            base(
                "[[link]]\na = \"a\"\nb = \"s:0\"\ncable = \"0.01km\"\n[[link]]\na = \"b\"\nb = \"s:1\"\ncable = \"1000cm\"\n",
                incast,
            ),
            None,
        ),
        (
            base(
                ok_links,
                "[[traffic]]\npattern = \"permutation\"\nfrom = [\"a\", \"a\"]\nsize = \"4KiB\"\n",
            ),
            Some("\"a\" is listed twice in `from` (entry 2)"),
        ),
        (
            base(
                &format!("{ok_links}[[route]]\nswitch = \"s\"\nto = \"b\"\nports = [5]\n"),
                incast,
            ),
            Some("port 5 of switch \"s\" has no link"),
        ),
        (
            "[[switch]]\nname = \"s\"\nbogus = 1\n".to_string(),
            Some("unknown field `bogus`"),
        ),
    ];
    for (text, want) in cases {
        let r = topology::from_str(&text, &examples(), Some(&default_config()), 1);
        match (want, r) {
            (None, Ok(_)) => {}
            (None, Err(e)) => panic!("refused a good topology: {e:#}"),
            (Some(w), Ok(_)) => panic!("accepted a bad topology (wanted {w:?}):\n{text}"),
            (Some(w), Err(e)) => {
                let msg = format!("{e:#}");
                assert!(msg.contains(w), "error {msg:?} does not say {w:?}");
            }
        }
    }
}

/// Issue 49 item 2: a config_db.json's ports have names (Ethernet0, Ethernet4, ...) and ids 0,
/// 4, 8: a topology names them as the file does, in links and routes (`"tor:Ethernet0"` was
/// refused as "not a port id"); a number is still an id, and a name the switch lacks is
/// refused with the ports it has.
#[test]
fn links_and_routes_take_a_config_db_jsons_port_names() {
    let json = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sonic/spectrum1-t1.json");
    let topo = |tor_ports: [&str; 3], route: &str| {
        let mut t = format!(
            "duration = \"1ms\"\n[[switch]]\nname = \"tor\"\nconfig = \"{}\"\n",
            json.display()
        );
        for (h, p) in ["a", "b", "c"].iter().zip(tor_ports) {
            t += &format!("[[host]]\nname = \"{h}\"\n[[link]]\na = \"{h}\"\nb = \"tor:{p}\"\n");
        }
        t + route + "[[traffic]]\npattern = \"incast\"\nto = [\"c\"]\nsize = \"64KiB\"\n"
    };
    let route = "[[route]]\nswitch = \"tor\"\nto = \"c\"\nports = [\"Ethernet8\"]\n";
    let t = topology::from_str(&topo(["Ethernet0", "4", "Ethernet8"], route), &examples(), None, 1)
        .unwrap_or_else(|e| panic!("{e:#}"));
    let o = run(&t, &FabricOptions::default());
    assert_eq!(o.drops, 0);
    assert!(
        o.flows.iter().all(|f| f.lost == 0 && f.fct_ns.is_some()),
        "{:?}",
        o.flows
    );
    let e = topology::from_str(&topo(["Ethernet0", "Ethernet2", "Ethernet8"], ""), &examples(), None, 1).unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("switch \"tor\" has no port Ethernet2 (its config has ports Ethernet0 (0), Ethernet4 (4),"),
        "{e}"
    );
    // README's `rocesw tune --sonic` example: the file's eight ports by name.
    let shipped = topology::from_str(
        &std::fs::read_to_string(examples().join("../tune/sonic-topology.toml")).unwrap(),
        &examples().join("../tune"),
        None,
        1,
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(shipped.hosts.len(), 8);
    let bad_route = "[[route]]\nswitch = \"tor\"\nto = \"c\"\nports = [\"Ethernet28\"]\n";
    let e = topology::from_str(&topo(["Ethernet0", "4", "Ethernet8"], bad_route), &examples(), None, 1).unwrap_err();
    assert!(
        format!("{e:#}").contains("port Ethernet28 of switch \"tor\" has no link"),
        "{e:#}"
    );
}

/// The command line: twice on the shipped example gives the same summary.json, byte for byte;
/// the report names the flows; --help explains every option.
#[test]
fn the_command_writes_the_same_summary_twice_and_explains_itself() {
    let bin = env!("CARGO_BIN_EXE_rocesw");
    let dir = tempfile::tempdir().unwrap();
    let mut summaries = Vec::new();
    for k in 0..2 {
        let out = dir.path().join(format!("run{k}"));
        let o = std::process::Command::new(bin)
            .args(["fabric", "--topology"])
            .arg(examples().join("leaf-spine.toml"))
            .arg("--output-dir")
            .arg(&out)
            .arg("--pcap")
            .arg(format!("h7-leaf1:3={}", out.join("h7.pcap").display()))
            .args(["--duration", "500us"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let report = String::from_utf8(o.stdout).unwrap();
        assert!(
            report.contains("incast") && report.contains("switch drops: 0"),
            "{report}"
        );
        // It says what --pcap wrote: the file, its link, the frames in it each way.
        let pcap = std::fs::read(out.join("h7.pcap")).unwrap();
        let big = pcap[..4] == [0xa1, 0xb2, 0x3c, 0x4d];
        let (mut frames, mut at) = (0, 24);
        while at + 16 <= pcap.len() {
            let len: [u8; 4] = pcap[at + 8..at + 12].try_into().unwrap();
            let len = if big {
                u32::from_be_bytes(len)
            } else {
                u32::from_le_bytes(len)
            };
            at += 16 + len as usize;
            frames += 1;
        }
        let line = report
            .lines()
            .find(|l| l.starts_with(&format!("wrote {}: ", out.join("h7.pcap").display())))
            .unwrap_or_else(|| panic!("no line for the pcap: {report}"));
        assert!(
            frames > 0 && line.contains(&format!("link h7-leaf1:3, {frames} frames (h7 → leaf1:3 ")),
            "{line}"
        );
        summaries.push((
            std::fs::read(out.join("summary.json")).unwrap(),
            std::fs::read(out.join("h7.pcap")).unwrap(),
        ));
    }
    assert_eq!(summaries[0], summaries[1]);
    let bad = std::process::Command::new(bin)
        .args(["fabric", "--topology", "/nonexistent.toml", "--output-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("topology /nonexistent.toml: cannot read"));
    let help = std::process::Command::new(bin)
        .args(["fabric", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for opt in [
        "--topology",
        "--output-dir",
        "--seed",
        "--duration",
        "--no-dcqcn",
        "--no-watchdog",
        "--pcap",
        "--default-config",
        "--quiet",
    ] {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(opt) || l.contains(&format!(" {opt}")))
            .unwrap_or_else(|| panic!("{opt} missing from --help"));
        assert!(!line.is_empty());
    }
    assert!(
        help.contains("Example:") && help.starts_with("Run several switches"),
        "{help}"
    );
}

/// PFC alone (no DCQCN) keeps a congested link busy: two 100G senders behind one switch share
/// its 100G uplink to the receiver's switch, each paused and released in turn, and together
/// they fill it. A host released by an XON sends again at once: before, it waited out the
/// whole XOFF quanta, and the pair got 23 Gb/s each.
#[test]
fn pfc_released_senders_fill_the_congested_link() {
    let topo = two_leaves(
        ("s0", "s1"),
        &[("h0", "s0:0"), ("h1", "s0:1"), ("r", "s1:1")],
        "pattern = \"flows\"\nfrom = [\"h0\", \"h1\"]\nto = [\"r\"]\nsize = \"long\"",
    );
    let o = run(
        &topo,
        &FabricOptions {
            seed: 1,
            ..Default::default()
        },
    );
    let h0 = o.links.iter().find(|l| l.name == "h0-s0:0").unwrap();
    assert!(h0.reverse.pfc_frames > 0, "the senders were paused: {h0:?}");
    let goodput: f64 = o.flows.iter().map(|f| f.goodput_bps).sum();
    // One sender alone gets 92 Gb/s of RDMA payload on this path (1024 B of 1086 B frames).
    assert!(goodput > 85e9, "the uplink stayed busy: {goodput:.3e} b/s in all");
    for f in &o.flows {
        assert!(
            (f.goodput_bps - goodput / 2.0).abs() < 0.1 * goodput,
            "each gets about half: {:.3e} of {goodput:.3e}",
            f.goodput_bps
        );
        assert_eq!(f.lost, 0);
    }
    assert_eq!(o.drops, 0);
}

/// The parking lot with PFC alone (`examples/fabric/parking-lot.toml`, DCQCN off): the flow
/// that joins at the second switch gets about twice what each of the two crossing both gets,
/// and together they fill the receiver's link.
#[test]
fn the_parking_lot_is_two_to_one_unfair_with_pfc_alone() {
    let topo = topology::load(&examples().join("parking-lot.toml"), Some(&default_config()), 1).unwrap();
    let o = run(
        &topo,
        &FabricOptions {
            seed: 1,
            dcqcn: Some(false),
            ..Default::default()
        },
    );
    let g: Vec<f64> = o.flows.iter().map(|f| f.goodput_bps).collect();
    let (h0, h1, h2) = (g[0], g[1], g[2]);
    assert!(h0 + h1 + h2 > 85e9, "r's link is full: {g:?}");
    assert!(
        (h0 - h1).abs() < 0.05 * h0,
        "the two crossing flows share equally: {g:?}"
    );
    let ratio = h2 / h0;
    assert!((1.8..=2.2).contains(&ratio), "about 2:1: {ratio:.2} ({g:?})");
    assert_eq!(o.drops, 0);
}

fn deadlock_topology() -> topology::Topology {
    topology::load(&examples().join("deadlock.toml"), Some(&default_config()), 1).unwrap()
}

/// Per switch of the ring: (storms detected, restored) summed over its ports.
fn watchdog_counts(o: &FabricOutcome) -> Vec<(u64, u64)> {
    o.switches
        .values()
        .map(|s| {
            (
                s.ports.iter().flat_map(|p| p.watchdog_storms).sum(),
                s.ports.iter().flat_map(|p| p.watchdog_restores).sum(),
            )
        })
        .collect()
}

/// PFC deadlock (`examples/fabric/deadlock.toml`): three switches in a ring, three 4 MiB
/// messages each routed across two ring links, PFC alone, and from 1 ms a long flow that is
/// no part of the cycle but needs one of its queues. Without the watchdog the cycle of
/// paused queues closes for good: nothing arrives anywhere after 0.3 ms, the later flow
/// delivers nothing, and at the end every ring port still holds lossless frames under a
/// pause. With the watchdog (1 ms detection and restoration) each switch sees its stuck
/// queue as a storm, drops what it holds, restores it once the PFC stops, and the later flow
/// runs. Figures: bench/README.md, "PFC deadlock".
#[test]
fn a_cyclic_buffer_dependency_deadlocks_and_the_watchdog_breaks_it() {
    let topo = deadlock_topology();
    let end = topo.duration_ns;
    let stuck = run(
        &topo,
        &FabricOptions {
            seed: 1,
            watchdog: Some(false),
            ..Default::default()
        },
    );
    assert!(!stuck.watchdog);
    assert_eq!(stuck.drops, 0, "PFC alone loses nothing, it stops");
    for f in &stuck.flows[..3] {
        assert!(f.delivered_bytes > 0, "the cycle ran before it closed: {f:?}");
        assert!(f.last_arrival_ns < 300_000, "nothing arrives after the deadlock: {f:?}");
        assert!(f.fct_ns.is_none());
    }
    let late = &stuck.flows[3];
    assert_eq!(late.delivered_bytes, 0, "the later flow is stuck behind it: {late:?}");
    for (name, link) in [("s0", "s0:1-s1:2"), ("s1", "s1:1-s2:2"), ("s2", "s2:1-s0:2")] {
        let port = &stuck.switches[name].ports[1];
        assert!(
            port.queues[3].depth_packets > 1000,
            "{name}'s ring port holds its frames at the end: {}",
            port.queues[3].depth_packets
        );
        let l = stuck.links.iter().find(|l| l.name == link).unwrap();
        assert!(
            l.forward.paused_ns[3] > end - 300_000,
            "{link} paused from the deadlock to the end: {:?}",
            l.forward.paused_ns
        );
    }
    assert_eq!(watchdog_counts(&stuck), vec![(0, 0); 3]);

    let healed = run(
        &topo,
        &FabricOptions {
            seed: 1,
            ..Default::default()
        },
    );
    assert!(healed.watchdog);
    for (s, (storms, restores)) in watchdog_counts(&healed).into_iter().enumerate() {
        assert!(storms >= 1, "switch {s} detected the storm");
        assert_eq!(restores, storms, "switch {s} restored every storm it detected");
    }
    let dropped: u64 = healed
        .switches
        .values()
        .map(|s| s.totals.drops.get("pfc_watchdog"))
        .sum();
    assert_eq!(dropped, healed.drops, "only the watchdog drops");
    assert!(dropped > 1000, "the watchdog dropped what the cycle held: {dropped}");
    let late = &healed.flows[3];
    // Measured: 18.3 MB, from the storm's restoration (about 2.25 ms) to the end at 92 Gb/s.
    assert!(late.delivered_bytes > 15_000_000, "the later flow runs: {late:?}");
    assert!(
        late.last_arrival_ns > end - 10_000,
        "and still runs at the end: {late:?}"
    );
    for name in ["s0", "s1", "s2"] {
        assert_eq!(healed.switches[name].ports[2].queues[3].depth_packets, 0);
    }
    // Storms, drops and restorations repeat byte for byte.
    let again = run(
        &topo,
        &FabricOptions {
            seed: 1,
            ..Default::default()
        },
    );
    assert_eq!(
        serde_json::to_vec(&healed).unwrap(),
        serde_json::to_vec(&again).unwrap()
    );
}

/// A victim of PFC spreading (`examples/fabric/victim.toml`): a 4→1 incast into r under leaf1
/// (one sender, s, behind leaf0 and the spine) and, from 0.5 ms, a victim flow v → w that
/// shares the uplinks with s but not r's congested port; its share of the path is 75 Gb/s.
/// With PFC alone leaf1 pauses the spine, the spine leaf0, leaf0 pauses v: the victim gets
/// less than each incast sender (measured 18.6 Gb/s). With DCQCN (the paper's byte counter
/// and R_AI) and leaf.toml's ECN thresholds (marking from 40 KB, far below the PG's XOFF
/// point) the senders slow down before any PG needs PFC: not one pause frame, and the victim
/// gets 71.9 Gb/s (71.7–72.1 over seeds 1–6). Figures: bench/README.md, "Victim flow".
#[test]
fn pfc_spreading_slows_a_victim_flow_and_dcqcn_with_early_ecn_spares_it() {
    let topo = topology::load(&examples().join("victim.toml"), Some(&default_config()), 1).unwrap();
    let link = |o: &FabricOutcome, name: &str| o.links.iter().find(|l| l.name == name).unwrap().clone();
    let pfc_frames = |o: &FabricOutcome| -> u64 {
        o.links
            .iter()
            .map(|l| l.forward.pfc_frames + l.reverse.pfc_frames)
            .sum()
    };
    let pfc_alone = run(
        &topo,
        &FabricOptions {
            seed: 1,
            dcqcn: Some(false),
            ..Default::default()
        },
    );
    let victim = &pfc_alone.flows[4];
    assert_eq!((victim.src.as_str(), victim.dst.as_str()), ("v", "w"));
    assert!(victim.goodput_bps < 30e9, "the victim is held back: {victim:?}");
    // The pause travels up the victim's path: leaf1 → spine, spine → leaf0, leaf0 → v.
    let l1 = link(&pfc_alone, "leaf1:4-spine:1");
    let l0 = link(&pfc_alone, "leaf0:4-spine:0");
    let v = link(&pfc_alone, "v-leaf0:1");
    assert!(
        l1.forward.pfc_frames > 1000 && l0.reverse.pfc_frames > 1000 && v.reverse.pfc_frames > 500,
        "{l1:?} {l0:?} {v:?}"
    );
    assert!(v.forward.paused_ns[3] > 1_500_000, "v paused most of its 2.5 ms: {v:?}");
    // w's port, the victim's only link of its own, never pauses anyone.
    let w = link(&pfc_alone, "w-leaf1:1");
    assert!(w.reverse.pfc_frames == 0 && w.forward.pfc_frames == 0);
    assert_eq!(pfc_alone.drops, 0);

    let dcqcn = run(
        &topo,
        &FabricOptions {
            seed: 1,
            ..Default::default()
        },
    );
    let victim = &dcqcn.flows[4];
    assert!(
        victim.goodput_bps > 60e9,
        "the victim keeps most of its share: {victim:?}"
    );
    assert_eq!(pfc_frames(&dcqcn), 0, "no PG needed PFC");
    assert!(
        dcqcn.flows[..4].iter().all(|f| f.cnps_received > 0),
        "DCQCN slowed the incast"
    );
    assert_eq!(dcqcn.drops, 0);
}

/// The parking lot with DCQCN at the paper's defaults (the topology's [nic] sets its byte
/// counter, 10 MB, and R_AI, 40 Mb/s): the three flows get within 10 % of their mean (measured:
/// equal to 0.1 %, with no PFC at all), where PFC alone gives 2:1. The three start together at
/// line rate, see the same marks and so move together; the price of the small R_AI is a slow
/// climb back after the first cuts (79 % of r's link used over 10 ms, 85 % over 20 ms).
#[test]
fn the_parking_lot_is_fair_with_dcqcn() {
    let topo = topology::load(&examples().join("parking-lot.toml"), Some(&default_config()), 1).unwrap();
    let o = run(
        &topo,
        &FabricOptions {
            seed: 1,
            duration_ns: Some(10_000_000),
            ..Default::default()
        },
    );
    assert!(o.dcqcn);
    let g: Vec<f64> = o.flows.iter().map(|f| f.goodput_bps).collect();
    let mean = g.iter().sum::<f64>() / 3.0;
    for (f, x) in o.flows.iter().zip(&g) {
        assert!(
            (x - mean).abs() < 0.1 * mean,
            "flow {} at {x:.3e}, mean {mean:.3e}: {g:?}",
            f.id
        );
        assert!(f.cnps_received > 0, "DCQCN acted on flow {}", f.id);
    }
    assert!(3.0 * mean > 75e9, "r's link mostly used: {g:?}");
    let pfc: u64 = o
        .links
        .iter()
        .map(|l| l.forward.pfc_frames + l.reverse.pfc_frames)
        .sum();
    assert_eq!(pfc, 0, "DCQCN acted before any PG needed PFC");
    assert_eq!(o.drops, 0);
}

/// `examples/fabric/incast.toml` with leaf.toml's lossless PG given `alpha` and `headroom`
/// (written beside a copy of the topology in `dir`, as bench/README.md's commands do).
fn incast_with(dir: &Path, alpha: &str, headroom: &str) -> FabricOutcome {
    let leaf = std::fs::read_to_string(examples().join("leaf.toml")).unwrap();
    assert!(
        leaf.contains("alpha = \"1/8\"") && leaf.contains("headroom = \"auto\""),
        "leaf.toml's lossless PG keys moved: update this test and bench/README.md"
    );
    let text = leaf
        .replace("alpha = \"1/8\"", &format!("alpha = \"{alpha}\""))
        .replace("headroom = \"auto\"", &format!("headroom = \"{headroom}\""));
    std::fs::write(dir.join("leaf.toml"), text).unwrap();
    std::fs::copy(examples().join("incast.toml"), dir.join("incast.toml")).unwrap();
    let topo = topology::load(&dir.join("incast.toml"), Some(&default_config()), 1).unwrap();
    run(
        &topo,
        &FabricOptions {
            seed: 1,
            ..Default::default()
        },
    )
}

/// UCloud's buffer choices on a 5→1 incast of 1 MiB messages with DCQCN: (PFC frames, the
/// worst flow's p99 latency in ns). A larger alpha lets each lossless PG take more of the
/// shared pool before XOFF: fewer pause frames, longer queues. A larger headroom is carved out
/// of the shared pool: the PGs reach their limit sooner, more pause frames, shorter queues.
/// Measured (bench/README.md, "UCloud incast"): alpha 1/8 → 1/2 at headroom auto, PFC 270 → 0
/// and p99 210 → 283 µs; headroom auto → 1 MiB at alpha 1/8, PFC 270 → 394 and p99 210 → 56 µs.
#[test]
fn an_incast_follows_the_alpha_and_headroom_choices() {
    let dir = tempfile::tempdir().unwrap();
    let measure = |alpha: &str, headroom: &str| {
        let o = incast_with(dir.path(), alpha, headroom);
        assert_eq!(o.drops, 0, "lossless whatever the choice");
        assert!(o.flows.iter().all(|f| f.fct_ns.is_some()), "every message arrives");
        let pfc: u64 = o
            .links
            .iter()
            .map(|l| l.forward.pfc_frames + l.reverse.pfc_frames)
            .sum();
        let p99 = o.flows.iter().map(|f| f.latency_p99_ns).max().unwrap();
        (pfc, p99)
    };
    let base = measure("1/8", "auto");
    let more_alpha = measure("1/2", "auto");
    let more_headroom = measure("1/8", "1MiB");
    assert!(base.0 > 0, "the incast needs PFC at alpha 1/8: {base:?}");
    assert!(
        more_alpha.0 < base.0 && more_alpha.1 > base.1 * 5 / 4,
        "more alpha: fewer pauses, higher latency: {base:?} → {more_alpha:?}"
    );
    assert!(
        more_headroom.0 > base.0 && more_headroom.1 < base.1 / 2,
        "more headroom: more pauses, lower latency: {base:?} → {more_headroom:?}"
    );
}

/// A one-switch topology in `d` (its config a copy of the shipped leaf.toml there), saved as
/// `name`: hosts a on s:0 and b on s:1, a 4 KiB incast, 100 µs.
fn small_topology_file(d: &Path, name: &str) -> PathBuf {
    std::fs::copy(examples().join("leaf.toml"), d.join("leaf.toml")).unwrap();
    let text = "duration = \"100us\"\n[[switch]]\nname = \"s\"\nconfig = \"leaf.toml\"\n\
                [[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n\
                [[link]]\na = \"a\"\nb = \"s:0\"\n[[link]]\na = \"b\"\nb = \"s:1\"\n\
                [[traffic]]\npattern = \"incast\"\nto = [\"b\"]\nsize = \"4KiB\"\n";
    let path = d.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn rocesw_fabric(args: &[&str]) -> (Option<i32>, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .arg("fabric")
        .args(args)
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Issue 41 item 11: `--duration 0ns` was taken on the command line (and ran a fabric of no
/// time) while a zero `duration` in the topology file is refused; both are refused now, in the
/// same words, before anything is written.
#[test]
fn a_zero_duration_is_refused_on_the_command_line_as_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let topo = small_topology_file(d, "topo.toml");
    let out = d.join("out");
    for zero in ["0ns", "0us", "0s"] {
        let (code, err) = rocesw_fabric(&[
            "--topology",
            topo.to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
            "--duration",
            zero,
            "-q",
        ]);
        assert_eq!(code, Some(2), "--duration {zero}: {err}");
        assert!(err.contains("--duration") && err.contains("must be positive"), "{err}");
        assert!(!out.exists(), "nothing written");
    }
    let text = std::fs::read_to_string(&topo).unwrap().replace("\"100us\"", "\"0ns\"");
    std::fs::write(&topo, text).unwrap();
    let (code, err) = rocesw_fabric(&[
        "--topology",
        topo.to_str().unwrap(),
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("must be positive"), "{err}");
}

/// Issue 21 item 7: `rocesw fabric` never writes over what it reads: a `--pcap` onto a
/// switch's config, the summary onto the topology (a topology named summary.json in the output
/// folder), two `--pcap`s into one file, or one link captured twice, are refused (exit 2, both
/// named) before anything is written; the inputs are intact.
#[test]
fn the_command_refuses_to_write_over_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let topo = small_topology_file(d, "summary.json");
    let (t, dd) = (topo.to_str().unwrap(), d.to_str().unwrap());
    let leaf = d.join("leaf.toml");
    let before = (std::fs::read(&topo).unwrap(), std::fs::read(&leaf).unwrap());
    let out = d.join("out");
    let o = out.to_str().unwrap();
    let on_leaf = format!("a-s:0={}", leaf.display());
    let x = format!("{}/x.pcap", o);
    let (ax, bx) = (format!("a-s:0={x}"), format!("b-s:1={x}"));
    let cases: [(&[&str], &str); 4] = [
        (
            &["--topology", t, "--output-dir", o, "--pcap", &on_leaf, "-q"],
            "is the config of switch \"s\"",
        ),
        (&["--topology", t, "--output-dir", dd, "-q"], "is the topology"),
        (
            &["--topology", t, "--output-dir", o, "--pcap", &ax, "--pcap", &bx, "-q"],
            "same file as --pcap a-s:0",
        ),
        (
            &["--topology", t, "--output-dir", o, "--pcap", &ax, "--pcap", &ax, "-q"],
            "given twice",
        ),
    ];
    for (args, want) in cases {
        let (code, err) = rocesw_fabric(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted {want:?}, got {err}");
        assert_eq!(
            before,
            (std::fs::read(&topo).unwrap(), std::fs::read(&leaf).unwrap()),
            "{args:?}: inputs intact"
        );
        assert!(!out.join("x.pcap").exists(), "{args:?}: nothing written");
    }
    // And the same topology into a folder of its own runs.
    let (code, err) = rocesw_fabric(&["--topology", t, "--output-dir", o, "--pcap", &ax, "-q"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.join("summary.json").exists() && out.join("x.pcap").exists());
    // Issue 23 item 12: a link's ends in the other order name the same link.
    let xa = format!("s:0-a={}/y.pcap", o);
    let (code, err) = rocesw_fabric(&["--topology", t, "--output-dir", o, "--pcap", &xa, "-q"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        std::fs::read(out.join("x.pcap")).unwrap(),
        std::fs::read(out.join("y.pcap")).unwrap()
    );
    let (code, err) = rocesw_fabric(&["--topology", t, "--output-dir", o, "--pcap", &ax, "--pcap", &xa, "-q"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("given twice"), "{err}");
}

/// Issue 21 item 17: `rocesw fabric … | true` (a reader that closes early) ends the report
/// quietly with exit 0 and summary.json written; it panicked on the broken pipe (exit 101).
#[test]
fn the_command_into_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let topo = small_topology_file(d, "topology.toml");
    let out = d.join("out");
    let script = format!(
        "{:?} fabric --topology {:?} --output-dir {:?} | true; exit ${{PIPESTATUS[0]}}",
        env!("CARGO_BIN_EXE_rocesw"),
        topo,
        out
    );
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.join("summary.json").exists());
}

/// Issue 21 item 14 capped the switches' buffers together at a fixed 4 GiB, which refused 80
/// switches of an 8 MiB-buffer config (about 55 MiB each). Issue 50: in virtual time a switch
/// touches only its descriptors at start-up and buffers frames as they come, so the cap is
/// what the machine has available: 80 such switches are not refused for memory.
#[test]
fn eighty_switches_are_not_refused_for_memory_in_virtual_time() {
    let leaf = examples().join("leaf.toml");
    let mut text = String::new();
    for s in 0..80 {
        text += &format!("[[switch]]\nname = \"s{s}\"\nconfig = \"{}\"\n", leaf.display());
    }
    text += "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"s0:0\"\n\
             [[link]]\na = \"b\"\nb = \"s0:1\"\n[[traffic]]\npattern = \"incast\"\nto = [\"b\"]\nsize = \"4KiB\"\n";
    match topology::from_str(&text, &examples(), Some(&default_config()), 1) {
        Ok(topo) => {
            let f = controlplane::memory::footprint(&topo.switches[0].config);
            assert!(f.fixed_bytes < f.total_bytes, "{f:?}");
            assert_eq!(topo.memory_bytes(), 80 * f.fixed_bytes);
        }
        Err(e) => {
            let e = format!("{e:#}");
            assert!(!e.contains("at start-up together"), "{e}");
        }
    }
}

/// Issue 21 item 14: reachability visits each switch once per destination instead of following
/// every ECMP path: a ladder of 18 layers of 4 switches, each joined to all 4 of the next, has
/// 4^16 (4.3 billion) shortest paths between its end hosts (a minute and more to enumerate,
/// per flow) and loads at once.
#[test]
fn reachability_does_not_enumerate_ecmp_paths() {
    let (layers, width) = (18, 4);
    // 2 × width ports (down and up) and one for a host, on a small buffer.
    let mut cfg = String::from(
        "[buffer]\nsize = \"1MiB\"\ncell = \"256B\"\n[port_defaults]\nspeed = \"100G\"\ncable = \"10m\"\n",
    );
    for id in 0..=2 * width {
        cfg += &format!("[[port]]\nid = {id}\n");
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sw.toml"), cfg).unwrap();
    let mut text = String::from("duration = \"10us\"\n");
    for l in 0..layers {
        for w in 0..width {
            text += &format!("[[switch]]\nname = \"s{l}_{w}\"\nconfig = \"sw.toml\"\n");
        }
    }
    text += "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n";
    text += &format!("[[link]]\na = \"a\"\nb = \"s0_0:{}\"\n", 2 * width);
    text += &format!("[[link]]\na = \"b\"\nb = \"s{}_0:{}\"\n", layers - 1, 2 * width);
    for l in 0..layers - 1 {
        for w in 0..width {
            for v in 0..width {
                // Up port v of s{l}_{w} to down port w of s{l+1}_{v}.
                text += &format!("[[link]]\na = \"s{l}_{w}:{}\"\nb = \"s{}_{v}:{w}\"\n", width + v, l + 1);
            }
        }
    }
    text += "[[traffic]]\npattern = \"all-to-all\"\nsize = \"4KiB\"\n";
    let started = std::time::Instant::now();
    let topo = topology::from_str(&text, dir.path(), Some(&default_config()), 1).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(topo.flows.len(), 2);
    assert!(started.elapsed().as_secs() < 5, "took {:?}", started.elapsed());
    // A route that loops is still found: s1_0 sends b's traffic back down.
    let looped = format!("{text}[[route]]\nswitch = \"s1_0\"\nto = \"b\"\nports = [0]\n");
    let e = format!(
        "{:#}",
        topology::from_str(&looped, dir.path(), Some(&default_config()), 1).unwrap_err()
    );
    assert!(e.contains("no route from \"a\" to \"b\": the routes loop"), "{e}");
}

/// Issue 21 item 14: the hosts' port clock counted picoseconds (now × 1000) and wrapped after
/// 2^64 ps, 213.5 days of virtual time (a debug build panicked). A flow that starts after that
/// is delivered whole, as one at time 0 is.
#[test]
fn a_flow_after_213_days_of_virtual_time_is_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = small_topology_file(d, "late.toml");
    // 307,446 minutes: just past 2^64 ps.
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("duration = \"100us\"", "duration = \"307447min\"")
        + "start = \"307446min\"\n";
    let topo = topology::from_str(&text, d, Some(&default_config()), 1).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(u128::from(topo.flows[0].start_ns) * 1000 > u128::from(u64::MAX));
    let o = run(&topo, &FabricOptions::default());
    let f = &o.flows[0];
    assert_eq!((f.lost, f.delivered_bytes), (0, 4096), "{f:?}");
    assert!(f.fct_ns.is_some_and(|t| t < 100_000), "{f:?}");
}

/// Issue 23 item 2: a switch without `config` gets the default profile built into the binary
/// when `--default-config` is absent, so `rocesw fabric` runs from any directory (it failed
/// with "configs/default.toml: cannot read" outside the repository); a `--default-config`
/// given is still read.
#[test]
fn a_switch_without_config_gets_the_built_in_profile_from_any_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = "duration = \"100us\"\n[[switch]]\nname = \"s\"\n\
                [[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n\
                [[link]]\na = \"a\"\nb = \"s:0\"\n[[link]]\na = \"b\"\nb = \"s:1\"\n\
                [[traffic]]\npattern = \"incast\"\nto = [\"b\"]\nsize = \"4KiB\"\n";
    std::fs::write(d.join("topology.toml"), text).unwrap();
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
            .args(["fabric", "--topology", "topology.toml", "--output-dir", "out", "-q"])
            .args(extra)
            .current_dir(d)
            .output()
            .unwrap()
    };
    let o = run(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = std::fs::read_to_string(d.join("out/summary.json")).unwrap();
    assert!(summary.contains("\"s\""), "{summary}");
    let o = run(&["--default-config", "missing.toml"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("missing.toml: cannot read"), "{err}");
}

/// Issue 23 item 12: a switch config given as the topology (they sit side by side in
/// examples/fabric/) is named for what it is, instead of the toml crate's "unknown field".
#[test]
fn a_switch_config_given_as_the_topology_is_named_so() {
    let dir = tempfile::tempdir().unwrap();
    let leaf = examples().join("leaf.toml");
    let (code, err) = rocesw_fabric(&[
        "--topology",
        leaf.to_str().unwrap(),
        "--output-dir",
        dir.path().to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("this is a switch config, not a topology") && err.contains("[[switch]]'s `config`"),
        "{err}"
    );
    assert!(!err.contains("unknown field"), "{err}");
}

/// Issue 23 item 12: a run whose stderr is not a terminal (a log, CI) prints a plain progress
/// line at every tenth of its virtual time instead of staying silent, without colour codes.
#[test]
fn a_run_logged_to_a_file_says_how_far_it_got() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let topo = small_topology_file(d, "topology.toml");
    // A long flow: the run lasts its whole 100 µs.
    let text = std::fs::read_to_string(&topo)
        .unwrap()
        .replace("size = \"4KiB\"", "size = \"long\"");
    std::fs::write(&topo, text).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["fabric", "--topology", topo.to_str().unwrap(), "--output-dir"])
        .arg(d.join("out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("fabric: 50% of 100us virtual time run ("), "{err}");
    assert!(err.contains("fabric: 100% of 100us"), "{err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
}

/// Several switches share one process and one log: what a switch's PFC watchdog logs names
/// the switch (the deadlock ring's three storms, one per switch), and a log that is not a
/// terminal carries no colour codes. Each line is stamped with the virtual time it happened
/// at (issue 39 item 6), not the wall clock: the storms 1 ms (the detection time) after the
/// cycle closes (1.408 ms), each restoration at least 1 ms (the restoration time) later.
#[test]
fn log_lines_name_the_switch_they_are_about() {
    let out = tempfile::tempdir().unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["fabric", "--log", "info"])
        .env_remove("RUST_LOG")
        .arg("--topology")
        .arg(examples().join("deadlock.toml"))
        .arg("--output-dir")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let log = String::from_utf8_lossy(&run.stderr);
    let storms: Vec<&str> = log.lines().filter(|l| l.contains("PFC storm detected")).collect();
    let mut named: Vec<&str> = storms
        .iter()
        .filter_map(|l| l.split("switch{name=").nth(1)?.split('}').next())
        .collect();
    named.sort_unstable();
    assert_eq!(named, ["s0", "s1", "s2"], "every storm names its switch:\n{log}");
    let vt = |l: &str| -> f64 {
        let t = l
            .strip_prefix("vt ")
            .and_then(|r| r.split_once("s "))
            .unwrap_or_else(|| panic!("not stamped with virtual time: {l}"));
        t.0.parse().unwrap()
    };
    let restored: Vec<&str> = log.lines().filter(|l| l.contains("PFC storm restored")).collect();
    assert_eq!(restored.len(), 3, "{log}");
    for l in &storms {
        assert!((0.0012..0.0016).contains(&vt(l)), "{l}");
    }
    for l in &restored {
        assert!(vt(l) >= vt(storms[0]) + 0.001 && vt(l) < 0.004, "{l}");
    }
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a log that is not a terminal:\n{log}"
    );
}

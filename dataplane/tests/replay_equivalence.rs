//! `rocesw replay` output, pinned byte for byte: the proof that a refactoring changes nothing a
//! user can see (issue 13, item 3).
//!
//! Each `tests/equivalence/*.toml` is a scenario: a config (a profile from `configs/` or a
//! variant in `tests/equivalence/configs/`), the traffic fed to each port, the replay flags
//! (`seed`, `peer_ignores_pfc`, `schedule`) and `[expect]`, what the scenario must exercise.
//! The traffic is generated here, deterministically, with the repository's own frame builder
//! and `rocesw gen`, or read from a file the repository holds (the bundled incast, the public
//! capture), so no large binary is committed. For every scenario this test
//!
//! 1. writes the input captures and checks their SHA-256 against `expected.toml`: if an input
//!    differs, the generator changed, not the switch, and the test says so;
//! 2. runs the built `rocesw replay` binary on them, in a fresh temporary directory;
//! 3. checks `[expect]` against the run's `summary.json` (e.g. `"ports.3.ecn_marked" = ">0"`),
//!    so a scenario cannot silently stop exercising what it is there for;
//! 4. checks the SHA-256 of every file the run wrote (`port<N>.pcap`, `summary.json`) against
//!    `expected.toml`, naming each scenario and file that differs.
//!
//! Paths: `summary.json` names the output files relative to the output folder, so it is the
//! same wherever the replay wrote. The binary still runs with the temporary directory as its
//! working directory and relative paths only (`--output-dir out`, `--input 0=in/port0.pcap`);
//! should an absolute form of that directory ever appear in the summary, it is replaced by
//! `<tmp>` before hashing. Nothing else is
//! normalised: every other byte is what a user gets.
//!
//! `ROCESW_BLESS=1 cargo test -p rocesw-dataplane --test replay_equivalence` rewrites
//! `expected.toml` from this run (after the `[expect]` checks pass). Blessing is a deliberate
//! change of what users get: only bless when a change of output is intended, and say in the
//! commit message which scenarios changed and why. A refactoring must never need it.
//!
//! The library paths below (`dataplane::tools::gen`, `dataplane::wire`) are only used to build
//! inputs; if a restructuring moves them, update the `use` lines: the recorded input digests
//! then prove the inputs are still the same bytes.

mod common;

use dataplane::tools::gen::{announce, host_ip, host_mac, write_pcap, BASE_NS};
use dataplane::wire::roce::opcode;
use dataplane::wire::{build_cnp, encode_pause, encode_pfc, Ecn, IpPair, RoceFrameBuilder, VlanTag};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const BLESS_VAR: &str = "ROCESW_BLESS";

fn equivalence_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/equivalence")
}

/// One scenario file. Unknown keys are errors, so a misspelt key cannot drop traffic or a
/// check unnoticed. Paths are relative to the repository root.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    /// What the scenario is for (shown when it fails).
    about: String,
    config: String,
    #[serde(default = "one")]
    seed: u64,
    #[serde(default)]
    peer_ignores_pfc: bool,
    /// A `--schedule` file.
    schedule: Option<String>,
    /// Capture files the repository holds, fed to a port as they are.
    #[serde(default)]
    file: Vec<FileInput>,
    /// `rocesw gen incast` run by the built binary; its port<N>.pcap feed ports 0..=senders.
    gen_incast: Option<GenIncast>,
    #[serde(default)]
    flow: Vec<FlowSpec>,
    #[serde(default)]
    cnp: Vec<CnpSpec>,
    #[serde(default)]
    pfc: Vec<PfcSpec>,
    #[serde(default)]
    announce: Vec<AnnounceSpec>,
    /// Path in summary.json → condition; see [`check_expect`].
    expect: BTreeMap<String, toml::Value>,
}

fn one() -> u64 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileInput {
    port: u16,
    path: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GenIncast {
    senders: u16,
    frames: u64,
    size: usize,
    speed: String,
    dscp: u8,
}

/// `count` RoCEv2 RC SEND ONLY frames of `size` bytes from the host on `port` to host `dst`
/// (an address never announced: the switch floods them), every `(size + 24) · 8 / rate_bps`
/// from `start_ns`, PSN counting up from 0 (as `dataplane::tools::gen::Flow`, with more knobs).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowSpec {
    port: u16,
    /// Destination host; `dst_mac = "broadcast"` instead sends to ff:ff:ff:ff:ff:ff.
    dst: u16,
    #[serde(default)]
    dst_mac: Option<String>,
    #[serde(default)]
    dscp: u8,
    /// "not-ect", "ect0" (the default), "ect1" or "ce".
    #[serde(default = "ect0")]
    ecn: String,
    count: u64,
    size: usize,
    rate_bps: u64,
    #[serde(default)]
    start_ns: u64,
    qp: u32,
    #[serde(default)]
    ipv6: bool,
    /// An 802.1Q tag: [pcp, vid].
    #[serde(default)]
    vlan: Option<[u16; 2]>,
    /// Rewrites the UDP destination port: plain UDP instead of RoCEv2.
    #[serde(default)]
    udp_dport: Option<u16>,
    /// Breaks every frame: "runt" (its first 10 bytes), "bad_ihl" (IPv4 IHL 3),
    /// "bad_ip_length" (IPv4 total length past the frame).
    #[serde(default)]
    corrupt: Option<String>,
}

fn ect0() -> String {
    "ect0".into()
}

/// CNPs from the host on `port` to host `dst` (as a notification point would send them).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CnpSpec {
    port: u16,
    dst: u16,
    qp: u32,
    count: u64,
    start_ns: u64,
    every_ns: u64,
}

/// PFC (or 802.3x PAUSE) frames the host on `port` sends to the switch.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PfcSpec {
    port: u16,
    /// Priorities in the enable vector (ignored for PAUSE).
    #[serde(default)]
    priorities: Vec<u8>,
    /// Pause time in quanta; 0 is XON.
    quanta: u16,
    #[serde(default)]
    pause: bool,
    #[serde(default = "one")]
    count: u64,
    start_ns: u64,
    #[serde(default)]
    every_ns: u64,
}

/// A RoCE ACK from the host on `port` to host `to`, so the switch learns where it is.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnnounceSpec {
    port: u16,
    to: u16,
    #[serde(default)]
    at_ns: u64,
}

/// SHA-256 of what one scenario read and wrote, by file name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Digests {
    inputs: BTreeMap<String, String>,
    outputs: BTreeMap<String, String>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn parse_mac(s: &str) -> [u8; 6] {
    if s == "broadcast" {
        return [0xff; 6];
    }
    let v: Vec<u8> = s
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).unwrap_or_else(|_| panic!("bad MAC {s:?}")))
        .collect();
    v.try_into().unwrap_or_else(|_| panic!("bad MAC {s:?}"))
}

/// Host `i`'s IPv6 address: fd00::198:18:0:i+1 (a ULA, the IPv4 plan's twin).
fn host_ip6(i: u16) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[8..12].copy_from_slice(&[0x01, 0x98, 0x00, 0x18]);
    a[14..16].copy_from_slice(&(i + 1).to_be_bytes());
    a
}

fn flow_frames(f: &FlowSpec) -> Vec<(u64, Vec<u8>)> {
    let ecn = match f.ecn.as_str() {
        "not-ect" => Ecn::NotEct,
        "ect0" => Ecn::Ect0,
        "ect1" => Ecn::Ect1,
        "ce" => Ecn::Ce,
        e => panic!("flow ecn {e:?}: not-ect, ect0, ect1 or ce"),
    };
    let dst_mac = f.dst_mac.as_deref().map_or(host_mac(f.dst), parse_mac);
    let mut b = RoceFrameBuilder::new()
        .macs(host_mac(f.port), dst_mac)
        .dscp(f.dscp)
        .ecn(ecn)
        .opcode(opcode::RC_SEND_ONLY)
        .dest_qp(f.qp)
        .udp_sport(49152 + (f.qp as u16 & 0x3fff));
    b = if f.ipv6 {
        b.ipv6(host_ip6(f.port), host_ip6(f.dst))
    } else {
        b.ipv4(host_ip(f.port), host_ip(f.dst))
    };
    if let Some([pcp, vid]) = f.vlan {
        b.vlan = Some(VlanTag {
            pcp: pcp as u8,
            dei: false,
            vid,
        });
    }
    let l3 = 14 + 4 * f.vlan.is_some() as usize;
    let l4 = l3 + if f.ipv6 { 40 } else { 20 };
    let gap_ps = (f.size as u128 + 24) * 8 * 1_000_000_000_000 / f.rate_bps as u128;
    (0..f.count)
        .map(|i| {
            b.bth.set_psn((i & 0xff_ffff) as u32);
            let mut frame = b.build_sized(f.size).expect("flow frame builds");
            if let Some(port) = f.udp_dport {
                frame[l4 + 2..l4 + 4].copy_from_slice(&port.to_be_bytes());
            }
            match f.corrupt.as_deref() {
                None => {}
                Some("runt") => frame.truncate(10),
                Some("bad_ihl") => frame[l3] = 0x43,
                Some("bad_ip_length") => frame[l3 + 2..l3 + 4].copy_from_slice(&9000u16.to_be_bytes()),
                Some(c) => panic!("flow corrupt {c:?}: runt, bad_ihl or bad_ip_length"),
            }
            (f.start_ns + (i as u128 * gap_ps / 1000) as u64, frame)
        })
        .collect()
}

/// Writes the scenario's inputs under `dir/in/` and returns `--input` arguments (relative to
/// `dir`) and the input digests.
fn write_inputs(s: &Scenario, dir: &Path) -> (Vec<String>, BTreeMap<String, String>) {
    let root = common::repo_root();
    let in_dir = dir.join("in");
    std::fs::create_dir_all(&in_dir).unwrap();
    let mut by_port: BTreeMap<u16, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
    for f in &s.flow {
        by_port.entry(f.port).or_default().extend(flow_frames(f));
    }
    for c in &s.cnp {
        let ip = IpPair::V4 {
            src: host_ip(c.port),
            dst: host_ip(c.dst),
        };
        let cnp = build_cnp(host_mac(c.port), host_mac(c.dst), ip, c.qp);
        by_port
            .entry(c.port)
            .or_default()
            .extend((0..c.count).map(|i| (c.start_ns + i * c.every_ns, cnp.clone())));
    }
    for p in &s.pfc {
        let mut buf = [0u8; 64];
        let n = if p.pause {
            encode_pause(&mut buf, host_mac(p.port), p.quanta)
        } else {
            let mut times = [0u16; 8];
            let mut enable = 0u8;
            for &prio in &p.priorities {
                times[prio as usize] = p.quanta;
                enable |= 1 << prio;
            }
            encode_pfc(&mut buf, host_mac(p.port), enable, times)
        };
        by_port
            .entry(p.port)
            .or_default()
            .extend((0..p.count).map(|i| (p.start_ns + i * p.every_ns, buf[..n].to_vec())));
    }
    for a in &s.announce {
        let frame = announce(a.port, a.to).expect("announce builds");
        by_port.entry(a.port).or_default().push((a.at_ns, frame));
    }

    let mut files: BTreeMap<u16, PathBuf> = BTreeMap::new();
    for (port, frames) in by_port {
        let path = in_dir.join(format!("port{port}.pcap"));
        write_pcap(&path, BASE_NS, frames).unwrap();
        files.insert(port, path);
    }
    if let Some(g) = &s.gen_incast {
        let out = Command::new(env!("CARGO_BIN_EXE_rocesw"))
            .current_dir(dir)
            .args(["gen", "incast", "--output-dir", "in"])
            .args(["--senders", &g.senders.to_string(), "--frames", &g.frames.to_string()])
            .args(["--size", &g.size.to_string(), "--speed", &g.speed])
            .args(["--dscp", &g.dscp.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "rocesw gen incast: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for port in 0..=g.senders {
            assert!(
                !files.contains_key(&port),
                "port {port} has generated traffic and gen_incast"
            );
            files.insert(port, in_dir.join(format!("port{port}.pcap")));
        }
    }
    for f in &s.file {
        let dest = in_dir.join(format!("port{}.pcap", f.port));
        assert!(!files.contains_key(&f.port), "port {} has two inputs", f.port);
        std::fs::copy(root.join(&f.path), &dest).unwrap_or_else(|e| panic!("{}: {e}", f.path));
        files.insert(f.port, dest);
    }

    let mut args = Vec::new();
    let mut digests = BTreeMap::new();
    for (port, path) in files {
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        digests.insert(name.clone(), sha256_hex(&std::fs::read(&path).unwrap()));
        args.push(format!("{port}=in/{name}"));
    }
    (args, digests)
}

/// The numbers at `path` in `json`, added up: dot-separated object keys and array indices,
/// `*` for every member. A reason absent from a `drops` map counts 0 (the map lists non-zero
/// reasons only); any other missing key is an error, so a typo cannot pass.
fn sum_at(json: &serde_json::Value, path: &[&str], parent: &str, full: &str) -> u64 {
    let Some((&head, rest)) = path.split_first() else {
        return json
            .as_u64()
            .unwrap_or_else(|| panic!("{full}: {json} is not a number"));
    };
    match (json, head) {
        (serde_json::Value::Array(v), "*") => v.iter().map(|j| sum_at(j, rest, head, full)).sum(),
        (serde_json::Value::Object(m), "*") => m.values().map(|j| sum_at(j, rest, head, full)).sum(),
        (serde_json::Value::Array(v), i) => {
            let i: usize = i.parse().unwrap_or_else(|_| panic!("{full}: {i:?} is not an index"));
            let j = v.get(i).unwrap_or_else(|| panic!("{full}: no element {i}"));
            sum_at(j, rest, head, full)
        }
        (serde_json::Value::Object(m), k) => match m.get(k) {
            Some(j) => sum_at(j, rest, head, full),
            None if parent == "drops" && rest.is_empty() => 0,
            None => panic!("{full}: no key {k:?} in summary.json"),
        },
        (j, k) => panic!("{full}: cannot take {k:?} of {j}"),
    }
}

/// Checks one `[expect]` entry: `path = N` (equal), or a string `"OP X"` with OP one of
/// `== > >= < <=` and X a number or another path.
fn check_expect(summary: &serde_json::Value, path: &str, cond: &toml::Value) -> Result<String, String> {
    let value = |p: &str| sum_at(summary, &p.split('.').collect::<Vec<_>>(), "", p);
    let got = value(path);
    let (op, rhs) = match cond {
        toml::Value::Integer(n) => ("==", n.to_string()),
        toml::Value::String(s) => {
            let s = s.trim();
            let op_len = s.find(|c: char| !"=<>".contains(c)).unwrap_or(s.len());
            (&s[..op_len], s[op_len..].trim().to_string())
        }
        c => panic!("expect.{path}: {c} is neither a number nor a condition string"),
    };
    let want = rhs.parse::<u64>().unwrap_or_else(|_| value(&rhs));
    let ok = match op {
        "==" => got == want,
        ">" => got > want,
        ">=" => got >= want,
        "<" => got < want,
        "<=" => got <= want,
        _ => panic!("expect.{path}: operator {op:?} (use == > >= < <=)"),
    };
    let line = format!(
        "{path} = {got} ({op} {rhs}{})",
        if rhs.parse::<u64>().is_ok() {
            String::new()
        } else {
            format!(" = {want}")
        }
    );
    if ok {
        Ok(line)
    } else {
        Err(line)
    }
}

struct Outcome {
    name: String,
    digests: Digests,
    /// `[expect]` lines that do not hold, and those that do (printed, so a run shows what
    /// each scenario exercised).
    expect_failures: Vec<String>,
    expect_report: Vec<String>,
    secs: f64,
}

fn run_scenario(name: &str, s: &Scenario) -> Outcome {
    let t0 = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (inputs, input_digests) = write_inputs(s, dir);
    let root = common::repo_root();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocesw"));
    cmd.current_dir(dir)
        .args([
            "replay",
            "--quiet",
            "--output-dir",
            "out",
            "--seed",
            &s.seed.to_string(),
        ])
        .arg("--config")
        .arg(root.join(&s.config));
    for i in &inputs {
        cmd.args(["--input", i]);
    }
    if s.peer_ignores_pfc {
        cmd.arg("--peer-ignores-pfc");
    }
    if let Some(schedule) = &s.schedule {
        cmd.arg("--schedule").arg(root.join(schedule));
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "scenario {name}: rocesw replay failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    let mut outputs = BTreeMap::new();
    let mut summary_text = String::new();
    for entry in std::fs::read_dir(dir.join("out")).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        let mut bytes = std::fs::read(&path).unwrap();
        if file == "summary.json" {
            let mut text = String::from_utf8(bytes).expect("summary.json is UTF-8");
            for abs in [dir.to_path_buf(), dir.canonicalize().unwrap()] {
                text = text.replace(abs.to_str().unwrap(), "<tmp>");
            }
            bytes = text.clone().into_bytes();
            summary_text = text;
        }
        outputs.insert(file, sha256_hex(&bytes));
    }
    let summary: serde_json::Value =
        serde_json::from_str(&summary_text).unwrap_or_else(|e| panic!("scenario {name}: summary.json: {e}"));
    let (mut expect_report, mut expect_failures) = (Vec::new(), Vec::new());
    for (path, cond) in &s.expect {
        match check_expect(&summary, path, cond) {
            Ok(line) => expect_report.push(line),
            Err(line) => expect_failures.push(line),
        }
    }
    Outcome {
        name: name.to_string(),
        digests: Digests {
            inputs: input_digests,
            outputs,
        },
        expect_failures,
        expect_report,
        secs: t0.elapsed().as_secs_f64(),
    }
}

fn load_scenarios() -> Vec<(String, Scenario)> {
    let mut v: Vec<(String, Scenario)> = std::fs::read_dir(equivalence_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.file_name().unwrap() != "expected.toml")
        .map(|p| {
            let name = p.file_stem().unwrap().to_str().unwrap().to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            let s: Scenario = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name, s)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn expected_path() -> PathBuf {
    equivalence_dir().join("expected.toml")
}

fn write_expected(outcomes: &[Outcome]) {
    let mut text = String::from(
        "# SHA-256 of every input `rocesw replay` read and every file it wrote, per scenario of\n\
         # tests/equivalence/ (see tests/replay_equivalence.rs). Written by\n\
         #   ROCESW_BLESS=1 cargo test -p rocesw-dataplane --test replay_equivalence\n\
         # Rewriting it changes what users get: say which scenarios changed, and why, in the commit.\n",
    );
    for o in outcomes {
        for (table, map) in [("inputs", &o.digests.inputs), ("outputs", &o.digests.outputs)] {
            let _ = writeln!(text, "\n[{}.{table}]", o.name);
            for (file, digest) in map {
                let _ = writeln!(text, "\"{file}\" = \"{digest}\"");
            }
        }
    }
    std::fs::write(expected_path(), text).unwrap();
}

/// What differs between the recorded and the current digests of one scenario.
fn differences(name: &str, want: Option<&Digests>, got: &Digests) -> Vec<String> {
    let Some(want) = want else {
        return vec![format!("{name}: not in expected.toml (a new scenario: bless it)")];
    };
    let mut out = Vec::new();
    for (kind, w, g) in [
        ("input", &want.inputs, &got.inputs),
        ("output", &want.outputs, &got.outputs),
    ] {
        let files: std::collections::BTreeSet<&String> = w.keys().chain(g.keys()).collect();
        for f in files {
            match (w.get(f), g.get(f)) {
                (Some(a), Some(b)) if a == b => {}
                (Some(a), Some(b)) => out.push(format!("{name}: {kind} {f} differs (expected {a}, got {b})")),
                (Some(_), None) => out.push(format!("{name}: {kind} {f} expected but not there")),
                (None, Some(_)) => out.push(format!("{name}: {kind} {f} is new")),
                (None, None) => unreachable!(),
            }
        }
    }
    if out.iter().any(|l| l.contains(": input ")) {
        out.push(format!(
            "{name}: an input changed, so the generator or a repository file changed, not \
             necessarily the switch"
        ));
    }
    out
}

#[test]
fn replay_outputs_are_byte_identical_to_the_recorded_ones() {
    let t0 = Instant::now();
    let scenarios = load_scenarios();
    assert!(!scenarios.is_empty(), "no scenarios in {}", equivalence_dir().display());
    // Scenarios are independent processes: run as many at once as there are cores.
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(scenarios.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut outcomes: Vec<Outcome> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                sc.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((name, s)) = scenarios.get(i) else { break };
                        mine.push(run_scenario(name, s));
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    outcomes.sort_by(|a, b| a.name.cmp(&b.name));

    let mut failures = Vec::new();
    for (o, (_, s)) in outcomes.iter().zip(&scenarios) {
        eprintln!("{} ({:.1} s): {}", o.name, o.secs, s.about);
        for line in o.expect_failures.iter().chain(&o.expect_report) {
            eprintln!("    {line}");
        }
        for line in &o.expect_failures {
            failures.push(format!("{}: [expect] {line} does not hold ({})", o.name, s.about));
        }
    }
    assert!(
        failures.is_empty(),
        "scenarios no longer exercise what they claim:\n{}",
        failures.join("\n")
    );

    if std::env::var_os(BLESS_VAR).is_some_and(|v| v == "1") {
        write_expected(&outcomes);
        eprintln!(
            "{BLESS_VAR}=1: wrote {} ({} scenarios); state the output change in the commit",
            expected_path().display(),
            outcomes.len()
        );
        return;
    }
    let text = std::fs::read_to_string(expected_path())
        .unwrap_or_else(|e| panic!("{}: {e} (create it with {BLESS_VAR}=1)", expected_path().display()));
    let mut expected: BTreeMap<String, Digests> = toml::from_str(&text).expect("expected.toml parses");
    let mut diffs = Vec::new();
    for o in &outcomes {
        diffs.extend(differences(&o.name, expected.remove(&o.name).as_ref(), &o.digests));
    }
    for gone in expected.keys() {
        diffs.push(format!(
            "{gone}: in expected.toml but there is no tests/equivalence/{gone}.toml"
        ));
    }
    eprintln!("{} scenarios in {:.1} s", outcomes.len(), t0.elapsed().as_secs_f64());
    assert!(
        diffs.is_empty(),
        "`rocesw replay` output changed:\n{}\n(if the change is intended, rerun with {BLESS_VAR}=1 and say \
         why in the commit)",
        diffs.join("\n")
    );
}

//! Issue 37, against a real switch: `rocesw run` on the project's SONiC T1 config
//! (configs/sonic/spectrum1-t1.json, imported with `rocectl sonic import` and given a capture
//! file per port, as a user gives it backends), then `rocectl show` by port name, `show buffer`
//! with each value's SONiC origin, and the daemon's metrics labelled with the names.
//!
//! `rocesw` belongs to another package, so it is built first (as the dataplane's tests build
//! `rocectl`).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The `rocesw` binary, built first.
fn rocesw() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "rocesw-dataplane", "--bin", "rocesw"])
        .current_dir(repo_root())
        .status()
        .unwrap();
    assert!(status.success(), "building rocesw");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo_root().join("target"), Into::into);
    target.join("debug/rocesw")
}

/// A child process killed when the test ends, however it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `rocectl --socket SOCKET ARGS`: (success, stdout, stderr).
fn ctl(socket: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rocectl"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .env_remove("ROCECTL_SWITCH")
        .env("ROCECTL_STATE_DIR", socket.with_extension("state"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `rocectl show ARGS` that must succeed: its output.
fn show(socket: &Path, args: &[&str]) -> String {
    let mut all = vec!["show"];
    all.extend(args);
    let (ok, out, err) = ctl(socket, &all);
    assert!(ok, "rocectl {all:?}: {err}");
    out
}

/// A classic pcap of `n` broadcast frames of an EtherType the switch does not look into, from
/// 02:00:00:00:00:01: each is flooded to every other port's queue 0.
fn broadcasts(path: &Path, n: u32) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = pcap_file::pcap::PcapWriter::new(file).unwrap();
    let mut frame = vec![0xff; 6];
    frame.extend([0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5]);
    frame.resize(128, 0x5a);
    for i in 0..n {
        let ts = Duration::from_micros(100 + u64::from(i));
        w.write_packet(&pcap_file::pcap::PcapPacket::new(ts, frame.len() as u32, &frame))
            .unwrap();
    }
}

/// The rows of a `show` table whose first column is `port`.
fn rows<'a>(table: &'a str, port: &str) -> Vec<&'a str> {
    table
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(port))
        .collect()
}

#[test]
fn a_sonic_switch_is_shown_and_measured_by_port_names() {
    let rocesw = rocesw();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let imported = d.join("imported.toml");
    let json = repo_root().join("configs/sonic/spectrum1-t1.json");
    let out = Command::new(env!("CARGO_BIN_EXE_rocectl"))
        .args([
            "sonic",
            "import",
            json.to_str().unwrap(),
            "-o",
            imported.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Each port a capture-file port; Ethernet0 receives the broadcasts.
    broadcasts(&d.join("in.pcap"), 200);
    let mut text = std::fs::read_to_string(&imported).unwrap();
    for id in [0, 4, 8, 12, 16, 20, 24, 28] {
        let at = format!("[[port]]\nid = {id}\n");
        let input = if id == 0 {
            format!("input = \"{}\", ", d.join("in.pcap").display())
        } else {
            String::new()
        };
        let pcap = format!(
            "{at}pcap = {{ {input}output = \"{}\" }}\n",
            d.join(format!("out{id}.pcap")).display()
        );
        assert!(text.contains(&at), "{at}");
        text = text.replacen(&at, &pcap, 1);
    }
    let config = d.join("switch.toml");
    std::fs::write(&config, &text).unwrap();

    let socket = d.join("sw.sock");
    let _switch = Proc(
        Command::new(&rocesw)
            .args(["run", "--keep-running", "--config"])
            .arg(&config)
            .arg("--control")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("the switch's control socket", || ctl(&socket, &["show", "counters"]).0);
    wait_for("the broadcasts to leave through Ethernet8", || {
        let (ok, out, _) = ctl(&socket, &["show", "queues", "Ethernet8", "--cells"]);
        ok && rows(&out, "Ethernet8")
            .iter()
            .any(|r| r.split_whitespace().nth(2) == Some("200"))
    });

    // `show queues Ethernet8`: that port's rows only, named; the same by id; every port without.
    let by_name = show(&socket, &["queues", "Ethernet8", "--cells"]);
    let body: Vec<&str> = by_name.lines().skip(2).filter(|l| !l.starts_with('(')).collect();
    assert!(!body.is_empty(), "{by_name}");
    assert!(body.iter().all(|l| l.starts_with("Ethernet8 ")), "{by_name}");
    assert!(rows(&by_name, "Ethernet8")[0]
        .split_whitespace()
        .take(3)
        .eq(["Ethernet8", "0", "200"]));
    let by_id = show(&socket, &["queues", "8", "--cells"]);
    assert_eq!(rows(&by_id, "Ethernet8"), rows(&by_name, "Ethernet8"), "{by_id}");
    let all = show(&socket, &["queues", "--cells"]);
    assert!(
        !rows(&all, "Ethernet4").is_empty() && !rows(&all, "Ethernet28").is_empty(),
        "{all}"
    );
    assert!(
        rows(&all, "Ethernet0").is_empty(),
        "a broadcast does not go back: {all}"
    );
    let (ok, _, err) = ctl(&socket, &["show", "queues", "Ethernet9"]);
    assert!(!ok, "an unknown port is refused");
    assert!(
        err.contains("\"Ethernet9\" is not a port of the switch") && err.contains("8 (Ethernet8)"),
        "{err}"
    );
    // The other tables, and the JSON, by name too.
    let counters = show(&socket, &["counters", "Ethernet0", "Ethernet8"]);
    assert_eq!(
        rows(&counters, "Ethernet0")[0].split_whitespace().nth(1),
        Some("200"),
        "{counters}"
    );
    assert!(rows(&counters, "Ethernet4").is_empty(), "{counters}");
    let fdb = show(&socket, &["fdb"]);
    assert!(fdb.contains("02:00:00:00:00:01 Ethernet0"), "{fdb}");
    let j: serde_json::Value = serde_json::from_str(&show(&socket, &["pgs", "Ethernet0", "--json"])).unwrap();
    assert_eq!(j["ports"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(j["ports"][0]["name"], "Ethernet0");

    // `rocectl capture` by name too: a second of Ethernet8 (port 8) into a pcap; an unknown
    // name is refused before anything is captured or written.
    let cap = d.join("eth8.pcap");
    let (ok, _, err) = ctl(
        &socket,
        &[
            "capture",
            "--port",
            "Ethernet8",
            "--tx",
            "--duration",
            "1s",
            "-w",
            cap.to_str().unwrap(),
        ],
    );
    assert!(
        ok && err.contains("capturing Ethernet8 (port 8) "),
        "the name it was given: {err}"
    );
    assert!(cap.exists(), "{err}");
    let never = d.join("never.pcap");
    let (ok, _, err) = ctl(
        &socket,
        &["capture", "--port", "Ethernet9", "-w", never.to_str().unwrap()],
    );
    assert!(
        !ok && err.contains("\"Ethernet9\" is not a port of the switch"),
        "{err}"
    );
    assert!(!never.exists());

    // `show buffer`: the pools by name, and a 5 m port's PG3 xoff from its SONiC profile.
    let buffer = show(&socket, &["buffer"]);
    for pool in ["ingress_lossless_pool", "egress_lossless_pool", "egress_lossy_pool"] {
        assert!(
            buffer.lines().any(|l| l.starts_with(&format!("{pool} "))),
            "{pool}:\n{buffer}"
        );
    }
    let xoff = buffer
        .lines()
        .find(|l| l.starts_with("Ethernet0 ") && l.contains("  3  headroom (xoff) "))
        .unwrap_or_else(|| panic!("no Ethernet0 PG3 xoff row:\n{buffer}"));
    assert!(
        xoff.ends_with(
            "  BUFFER_PROFILE|pg_lossless_100000_5m_profile|xoff × 2: on spectrum1 a PG takes two xoffs of the shared headroom pool"
        ),
        "{xoff}"
    );
    assert!(
        xoff.split_whitespace().nth(4) == Some("47104B"),
        "two of the 5 m profile's 23552 B xoff (Spectrum's shared headroom pool), in bytes: {xoff}"
    );
    // Issue 49 item 5: every value of that PG names the 5 m profile, also those whose value
    // the 40 m profile (the global [pg.3]) shares; sizes in one unit, bytes.
    let pg3: Vec<&str> = buffer
        .lines()
        .filter(|l| l.starts_with("Ethernet0 ") && l.split_whitespace().nth(1) == Some("3"))
        .collect();
    for field in ["min (size)", "limit", "xon_offset"] {
        let row = pg3
            .iter()
            .find(|l| l.contains(&format!("  {field}  ")))
            .unwrap_or_else(|| panic!("no {field} row: {pg3:#?}"));
        assert!(
            row.contains("BUFFER_PROFILE|pg_lossless_100000_5m_profile") && !row.contains("40m"),
            "{row}"
        );
    }
    let min = pg3.iter().find(|l| l.contains("  min (size)  ")).unwrap();
    assert_eq!(min.split_whitespace().nth(4), Some("19456B"), "{min}");
    let pool_row = buffer
        .lines()
        .find(|l| l.starts_with("ingress_lossless_pool "))
        .unwrap();
    let w: Vec<&str> = pool_row.split_whitespace().collect();
    assert_eq!(
        w[3..5],
        ["8719360B", "323520B"],
        "the configured sizes in bytes: {pool_row}"
    );

    // A live change on one port: the keys it changed, and the origin show buffer gives it,
    // by the port's name.
    let (ok, out, err) = ctl(&socket, &["set", "alpha", "--port", "Ethernet4", "--pg", "3", "1/4"]);
    assert!(ok, "{err}");
    assert!(out.contains("changed: Ethernet4.pg.3."), "{out}");
    assert!(!out.contains("changed: port\n"), "{out}");
    let e4 = show(&socket, &["buffer", "Ethernet4"]);
    let limit = e4
        .lines()
        .find(|l| l.starts_with("Ethernet4 ") && l.contains("  3  limit  "))
        .unwrap_or_else(|| panic!("no limit row:\n{e4}"));
    assert!(limit.ends_with("  Ethernet4.pg.3.alpha"), "{limit}");
    let j: serde_json::Value = serde_json::from_str(&show(&socket, &["buffer", "Ethernet0", "--json"])).unwrap();
    assert_eq!(
        j["ports"][0]["pgs"][3]["headroom_bytes"]["origin"],
        "BUFFER_PROFILE|pg_lossless_100000_5m_profile|xoff × 2: on spectrum1 a PG takes two xoffs of the shared headroom pool"
    );
    assert_eq!(j["ports"].as_array().unwrap().len(), 1, "{j}");

    // The daemon's metrics: `port` the id as always, `name` beside it; the pools by name.
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_rocectl"))
        .arg("--socket")
        .arg(&socket)
        .args(["daemon", "--poll-ms", "50", "--metrics", "127.0.0.1:0", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    {
        let (log, err) = (log.clone(), daemon.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                log.lock().unwrap().push(line);
            }
        });
    }
    let _daemon = Proc(daemon);
    let mut addr = String::new();
    wait_for("the metrics address in the daemon's log", || {
        let l = log.lock().unwrap();
        match l.iter().find_map(|l| l.split("metrics on http://").nth(1)) {
            Some(a) => {
                addr = a.trim_end_matches("/metrics").to_string();
                true
            }
            None => false,
        }
    });
    let mut body = String::new();
    wait_for("metrics of the switch", || {
        let Ok(mut s) = std::net::TcpStream::connect(&addr) else {
            return false;
        };
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        body = out;
        body.contains("rocesw_port_rx_packets_total")
    });
    let sample = |series: &str| -> Option<f64> {
        body.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    };
    let rx = r#"rocesw_port_rx_packets_total{switch="sw",port="0",name="Ethernet0"}"#;
    assert_eq!(sample(rx), Some(200.0), "{rx} in:\n{body}");
    let q = r#"rocesw_queue_tx_packets_total{switch="sw",port="8",name="Ethernet8",queue="0"}"#;
    assert_eq!(sample(q), Some(200.0), "{q} in:\n{body}");
    let pool = r#"rocesw_buffer_pool_size_cells{switch="sw",pool="ingress_lossless_pool",type="ingress"}"#;
    assert_eq!(sample(pool), Some(90827.0), "{pool} in:\n{body}");
    assert!(
        !body
            .lines()
            .any(|l| l.starts_with("rocesw_port_") && l.contains("port=") && !l.contains("name=")),
        "every port of the import is named:\n{body}"
    );
}

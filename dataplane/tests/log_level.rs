//! `rocectl log` (issue 39 item 8): the log filter of a real `rocesw run` (capture-file ports,
//! no root), read and changed live as `ovs-appctl vlog/set` does, its effect seen on the
//! switch's standard error; bad levels and targets refused clearly, by rocectl and by the
//! switch itself, and the filter unchanged by them.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

struct Switch {
    child: Child,
    stderr: Receiver<String>,
}

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `rocesw run --log warn` on capture-file ports (the bundled incast in), kept running, its
/// standard error read line by line.
fn start(dir: &Path, socket: &Path) -> Switch {
    let examples = repo_root().join("examples/incast");
    let cfg = ports_config(
        dir,
        |id| {
            format!(
                "pcap = {{ input = {:?}, pace = \"asap\" }}",
                examples.join(format!("port{id}.pcap"))
            )
        },
        "",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["run", "--keep-running", "--log", "warn", "--config"])
        .arg(&cfg)
        .arg("--control")
        .arg(socket)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, stderr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let sw = Switch { child, stderr };
    let t0 = Instant::now();
    while UnixStream::connect(socket).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the control socket never appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sw
}

/// `rocectl --socket SOCKET ARGS`: (exit code, stdout, stderr).
fn rocectl_at(bin: &Path, socket: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin)
        .args(args)
        .arg("--socket")
        .arg(socket)
        .env_remove("ROCECTL_SWITCH")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One request on a fresh connection, its answer.
fn call(socket: &Path, req: Value) -> Value {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("{req}\n").as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

/// The switch's stderr lines that arrive within `wait`.
fn lines_within(sw: &Switch, wait: Duration) -> Vec<String> {
    let t0 = Instant::now();
    let mut out = Vec::new();
    while let Some(left) = wait.checked_sub(t0.elapsed()) {
        match sw.stderr.recv_timeout(left) {
            Ok(l) => out.push(l),
            Err(_) => break,
        }
    }
    out
}

#[test]
fn rocectl_log_reads_and_changes_the_filter_of_a_running_switch() {
    let rocectl = rocectl();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("rocesw.sock");
    let sw = start(dir.path(), &socket);

    // Read: the filter it started with.
    let (code, out, err) = rocectl_at(&rocectl, &socket, &["log"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "log filter: warn\n");

    // One module at debug: the rest stays at warn, and the switch's own info line about the
    // change (from dataplane::runtime::control_server) now shows on its standard error.
    let (code, out, err) = rocectl_at(&rocectl, &socket, &["log", "debug", "dataplane::runtime"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "log filter changed: warn,dataplane::runtime=debug\n");
    let seen = lines_within(&sw, Duration::from_secs(5));
    assert!(
        seen.iter().any(|l| l.contains("INFO")
            && l.contains("dataplane::runtime::control_server")
            && l.contains("log filter changed by a control client")),
        "{seen:#?}"
    );
    // The same target again replaces its directive rather than adding one; LEVEL in any case.
    let (_, out, _) = rocectl_at(&rocectl, &socket, &["log", "INFO", "dataplane::runtime"]);
    assert_eq!(out, "log filter changed: warn,dataplane::runtime=info\n");
    let seen = lines_within(&sw, Duration::from_secs(2));
    assert!(
        seen.iter()
            .any(|l| l.contains("log filter changed by a control client filter=warn,dataplane::runtime=info")),
        "{seen:#?}"
    );

    // Bad input: refused by rocectl before it connects, naming what is accepted...
    let (code, _, err) = rocectl_at(&rocectl, &socket, &["log", "verbose"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("log level \"verbose\" is not one of off, error, warn, info, debug, trace"),
        "{err}"
    );
    let (code, _, err) = rocectl_at(&rocectl, &socket, &["log", "debug", "dataplane=trace"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is not a module path"), "{err}");
    // ...and by the switch, from any client, with the filter unchanged.
    let bad = call(&socket, json!({"v":1,"id":4,"op":"log","level":"loud"}));
    assert_eq!(bad["ok"], false, "{bad}");
    assert!(
        bad["error"].as_str().unwrap().contains("\"loud\" is not one of"),
        "{bad}"
    );
    let bad = call(
        &socket,
        json!({"v":1,"id":5,"op":"log","level":"debug","target":"a,b=trace"}),
    );
    assert!(bad["error"].as_str().unwrap().contains("is not a module path"), "{bad}");
    let bad = call(&socket, json!({"v":1,"id":6,"op":"log","target":"dataplane"}));
    assert!(bad["error"].as_str().unwrap().contains("needs a level"), "{bad}");
    let now = call(&socket, json!({"v":1,"id":7,"op":"log"}));
    assert_eq!(now["data"]["filter"], "warn,dataplane::runtime=info", "{now}");

    // LEVEL alone: every module at it, the target directives gone; info lines stop.
    let (_, out, _) = rocectl_at(&rocectl, &socket, &["log", "warn"]);
    assert_eq!(out, "log filter changed: warn\n");
    let (_, out, _) = rocectl_at(&rocectl, &socket, &["log", "warn"]);
    assert_eq!(out, "log filter changed: warn\n");
    let seen = lines_within(&sw, Duration::from_secs(2));
    assert!(
        seen.iter()
            .all(|l| !l.contains("log filter changed by a control client")),
        "at warn the change is not logged: {seen:#?}"
    );
}

//! Issue 46 item 3: `rocectl daemon` started with its switch. A switch still setting up its
//! data plane answers an `apply` with "the switch did not answer within 2 s" (its workers did
//! not take the change in time). The daemon used to take that as a refusal: it never applied
//! its file, and never turned drift detection on, so a later `rocectl set` was neither said
//! nor undone. Here the switch is a stand-in speaking the control protocol on a Unix socket,
//! its first applies answered as a starting switch answers them, so the test cannot depend
//! on how slowly a real data plane starts on a loaded machine: the daemon must retry with
//! back-off (saying so, with the wait), take the switch once it answers, then see and restore
//! a real `rocectl set` made behind it.

use controlplane::protocol::{ApplyData, ConfigData, Op, Request, Response, NOT_ANSWERED, VERSION_CHANGED};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The stand-in switch's state: its running config and version, the applies it still
/// answers as a starting switch does, and every apply asked (its `if_version`, and whether
/// it was taken).
struct Switch {
    running: (String, u64),
    starting_applies: u32,
    applies: Vec<(Option<u64>, bool)>,
}

fn answer(sw: &Mutex<Switch>, req: Request) -> Response {
    let mut sw = sw.lock().unwrap();
    match req.op {
        Op::GetConfig => Response::ok(
            req.id,
            serde_json::to_value(ConfigData {
                toml: sw.running.0.clone(),
                version: sw.running.1,
            })
            .unwrap(),
        ),
        Op::Apply { toml, if_version } => {
            if sw.starting_applies > 0 {
                sw.starting_applies -= 1;
                sw.applies.push((if_version, false));
                // What dataplane/src/runtime/control_server/running.rs answers when the
                // workers have not taken the change within its reply timeout.
                return Response::err(
                    Some(req.id),
                    format!("{NOT_ANSWERED} 2 s (the change may still apply; check get_config)"),
                );
            }
            if if_version.is_some_and(|v| v != sw.running.1) {
                sw.applies.push((if_version, false));
                return Response::err(
                    Some(req.id),
                    format!("{VERSION_CHANGED} (now version {})", sw.running.1),
                );
            }
            let changed = if toml == sw.running.0 {
                vec![]
            } else {
                vec!["ecn.roce.kmax".to_string()]
            };
            sw.running = (toml, sw.running.1 + 1);
            sw.applies.push((if_version, true));
            let data = ApplyData {
                changed,
                warnings: vec![],
                version: sw.running.1,
                unchanged: false,
            };
            Response::ok(req.id, serde_json::to_value(data).unwrap())
        }
        other => Response::err(Some(req.id), format!("the test's switch does not serve {other:?}")),
    }
}

fn serve(listener: UnixListener, sw: Arc<Mutex<Switch>>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { return };
        let sw = sw.clone();
        std::thread::spawn(move || {
            let mut out = stream.try_clone().unwrap();
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let resp = match Request::parse(&line) {
                    Ok(req) => answer(&sw, req),
                    Err(bad) => Response::err(bad.id, bad.error),
                };
                // `to_line` ends in its newline.
                if out.write_all(resp.to_line().as_bytes()).is_err() {
                    return;
                }
            }
        });
    }
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn kmax(toml: &str) -> String {
    let t: toml::Table = toml.parse().unwrap();
    t["ecn"]["roce"]["kmax"].as_str().unwrap().to_string()
}

fn wait_for(what: &str, limit: Duration, log: &Mutex<Vec<String>>, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < limit,
            "timed out waiting for {what}; the daemon said:\n{}",
            log.lock().unwrap().join("\n")
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn rocectl() -> &'static str {
    env!("CARGO_BIN_EXE_rocectl")
}

fn start_daemon(socket: &Path, config: &Path) -> (Proc, Arc<Mutex<Vec<String>>>) {
    let mut child = Command::new(rocectl())
        .arg("--socket")
        .arg(socket)
        .args([
            "daemon",
            "--no-metrics",
            "--poll-ms",
            "50",
            "--on-drift",
            "restore",
            "--config",
        ])
        .arg(config)
        .env_remove("RUST_LOG")
        .env_remove("ROCECTL_SWITCH")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (l2, err) = (lines.clone(), child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            l2.lock().unwrap().push(line);
        }
    });
    (Proc(child), lines)
}

#[test]
fn a_daemon_started_with_a_starting_switch_waits_for_it_then_restores_a_later_set() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(format!("{}/../configs/default.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    assert_eq!(kmax(&base), "400KB");
    let desired_text = base.replacen("kmax = \"400KB\"", "kmax = \"250KB\"", 1);
    let desired = dir.path().join("desired.toml");
    std::fs::write(&desired, &desired_text).unwrap();
    let socket = dir.path().join("sw.sock");
    let sw = Arc::new(Mutex::new(Switch {
        running: (base.clone(), 1),
        // Four applies answered as a switch still setting up answers them.
        starting_applies: 4,
        applies: Vec::new(),
    }));
    let listener = UnixListener::bind(&socket).unwrap();
    let served = sw.clone();
    std::thread::spawn(move || serve(listener, served));

    let (_daemon, log) = start_daemon(&socket, &desired);
    let t0 = Instant::now();
    wait_for(
        "the daemon to apply its file once the switch answers",
        Duration::from_secs(30),
        &log,
        || kmax(&sw.lock().unwrap().running.0) == "250KB",
    );
    let took = t0.elapsed();
    {
        let s = sw.lock().unwrap();
        let tries: Vec<bool> = s.applies.iter().map(|a| a.1).collect();
        assert_eq!(tries, [false, false, false, false, true], "tried until it answered");
    }
    // Backed off: 250 + 500 + 1000 + 2000 ms between the five tries.
    assert!(
        took >= Duration::from_millis(3500),
        "retried too fast: {took:?}\n{:#?}",
        log.lock().unwrap()
    );
    wait_for(
        "the daemon's line on the applied file",
        Duration::from_secs(10),
        &log,
        || log.lock().unwrap().iter().any(|l| l.contains("drift detection is on")),
    );
    {
        let l = log.lock().unwrap();
        let said = |s: &str| l.iter().filter(|x| x.contains(s)).count();
        assert_eq!(said("waiting for the switch to take"), 1 + 3, "{l:#?}");
        // At info level (the daemon's default filter shows its own info lines).
        assert!(
            l.iter()
                .filter(|x| x.contains("waiting for the switch to take"))
                .all(|x| x.contains("INFO")),
            "{l:#?}"
        );
        for (i, figure) in [
            "first in 250 ms",
            "next try in 500 ms",
            "next try in 1000 ms",
            "next try in 2000 ms",
        ]
        .iter()
        .enumerate()
        {
            assert!(said(figure) == 1, "step {i}: no {figure:?} in {l:#?}");
        }
        assert!(!l.iter().any(|x| x.contains("refused")), "{l:#?}");
    }

    // A `rocectl set` behind the daemon: said and undone.
    let out = Command::new(rocectl())
        .arg("--socket")
        .arg(&socket)
        .args(["set", "ecn", "--profile", "roce", "--kmax", "222KB"])
        .env_remove("ROCECTL_SWITCH")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for("the drift to be said", Duration::from_secs(10), &log, || {
        log.lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("DRIFT") && l.contains("ecn.roce.kmax"))
    });
    wait_for("the drift to be restored", Duration::from_secs(10), &log, || {
        kmax(&sw.lock().unwrap().running.0) == "250KB"
    });
    let s = sw.lock().unwrap();
    let restore = s.applies.last().unwrap();
    assert!(
        restore.1 && restore.0.is_some(),
        "restored against the version it saw: {restore:?}"
    );
}

//! Issue 24 item 1: one way to prepare a config change. The control socket (`patch`, `apply`),
//! `rocesw replay --schedule` and `rocesw tune`'s candidates prepare a change with the same
//! function (`controlplane::change`), so the same bad change gets the same refusal, in the
//! same words, from all three; and the control socket refuses it before it reaches the
//! switch's queue.

mod common;
use common::repo_root;
use dataplane::fabric::topology;
use dataplane::runtime::control_server::ControlServer;
use dataplane::runtime::worker::ControlQueue;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A frame-size change no running switch can take: the shipped profiles run 1518 B frames in
/// 1536 B packet slots, and 9018 B frames do not fit.
const JUMBO: &str = "[port_defaults]\nmtu = 9000\n";
const JUMBO_WHY: &str =
    "port[0].mtu (port 0): frames up to 9018 B exceed the 1536 B packet slots the switch was started with (restart it)";
/// A change that does not validate (Kmin above Kmax).
const INVALID: &str = "[ecn.roce]\nkmin = \"900KB\"\n";
/// One that cannot change live at all.
const BUFFER: &str = "[buffer]\nsize = \"8MiB\"\n";
const BUFFER_WHY: &str = "buffer.size cannot change while the switch runs (restart it)";

fn default_text() -> String {
    std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap()
}

/// One request over the control socket, its answer's error.
fn refused(path: &Path, op: &str, toml: &str) -> String {
    let s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = s.try_clone().unwrap();
    writeln!(w, "{}", json!({"v":1,"id":1,"op":op,"toml":toml})).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    let r: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(r["ok"], false, "{r}");
    r["error"].as_str().unwrap().to_string()
}

/// The control socket's refusal of `fragment` as a `patch` and, merged by hand, as an `apply`.
/// Nobody serves the switch's queue here: a change that reached it would time out instead.
fn by_control(fragment: &str) -> (String, String) {
    let queue: Arc<ControlQueue> = Arc::new(crossbeam_queue::ArrayQueue::new(16));
    let dir = tempfile::tempdir().unwrap();
    let server = ControlServer::spawn(&dir.path().join("ctl.sock"), default_text(), queue.clone()).unwrap();
    let patch = refused(server.path(), "patch", fragment);
    let mut t: toml::Table = default_text().parse().unwrap();
    controlplane::patch::merge(&mut t, fragment.parse().unwrap());
    let apply = refused(server.path(), "apply", &toml::to_string(&t).unwrap());
    assert!(queue.is_empty(), "a refused change reached the switch's queue");
    server.shutdown();
    (patch, apply)
}

/// `rocesw replay --schedule`'s refusal of `fragment` as a schedule's one step.
fn by_schedule(fragment: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let sched = dir.path().join("schedule.toml");
    let mut text = "[[change]]\nat = \"10us\"\n".to_string();
    for line in fragment.lines() {
        // `[x]` becomes `[change.patch.x]`.
        match line.strip_prefix('[') {
            Some(rest) => text += &format!("[change.patch.{rest}\n"),
            None => text += &format!("{line}\n"),
        }
    }
    std::fs::write(&sched, text).unwrap();
    let e = dataplane::replay::schedule::Schedule::load(&repo_root().join("configs/default.toml"), &sched).unwrap_err();
    format!("{e:#}")
}

/// `rocesw tune`'s refusal of `fragment` as a candidate for the shipped fabric's switch (the
/// default profile on eight ports).
fn by_tuner(fragment: &str) -> String {
    let examples = repo_root().join("examples/tune");
    let topo = topology::load(
        &examples.join("topology.toml"),
        Some(&repo_root().join("configs/default.toml")),
        1,
    )
    .unwrap();
    let e = dataplane::tune::space::patch_config(&topo, 0, fragment).unwrap_err();
    format!("{e:#}")
}

#[test]
fn a_frame_size_change_is_refused_alike_by_every_path() {
    let (patch, apply) = by_control(JUMBO);
    let want = format!("the switch refused the change: {JUMBO_WHY}");
    assert_eq!(patch, want);
    assert_eq!(apply, want);
    let s = by_schedule(JUMBO);
    assert!(
        s.ends_with(&format!(
            "change 0 (at 10000 ns) cannot apply to a running switch: {JUMBO_WHY}"
        )),
        "{s}"
    );
    let t = by_tuner(JUMBO);
    assert_eq!(
        t,
        format!("switch \"tor\": a running switch would refuse the patch: {JUMBO_WHY}")
    );
}

#[test]
fn a_change_fixed_at_start_is_refused_alike_by_every_path() {
    let (patch, apply) = by_control(BUFFER);
    let want = format!("the switch refused the change: {BUFFER_WHY}");
    assert_eq!((patch.as_str(), apply.as_str()), (want.as_str(), want.as_str()));
    assert!(by_schedule(BUFFER).ends_with(&format!("cannot apply to a running switch: {BUFFER_WHY}")));
    assert!(by_tuner(BUFFER).ends_with(&format!("a running switch would refuse the patch: {BUFFER_WHY}")));
}

/// An invalid config: every path reports validation's own problem list.
#[test]
fn an_invalid_change_is_refused_alike_by_every_path() {
    let problems = {
        let mut t: toml::Table = default_text().parse().unwrap();
        controlplane::patch::merge(&mut t, INVALID.parse().unwrap());
        controlplane::load_str(&toml::to_string(&t).unwrap())
            .unwrap_err()
            .to_string()
    };
    assert!(problems.contains("ecn.roce.kmin"), "{problems}");
    let (patch, apply) = by_control(INVALID);
    assert_eq!(patch, format!("invalid config: {problems}"));
    assert_eq!(apply, format!("invalid config: {problems}"));
    assert!(by_schedule(INVALID).ends_with(&format!("is invalid:\n{problems}")));
    assert!(by_tuner(INVALID).ends_with(&format!("the patched config is invalid: {problems}")));
}

/// Frames may still grow within the packet slots (1518 → 1536 B in 1536 B slots): taken by the
/// schedule and the tuner as by the switch.
#[test]
fn frames_may_grow_within_the_packet_slots_on_every_path() {
    let fragment = "[port_defaults]\nmtu = 1518\n";
    let dir = tempfile::tempdir().unwrap();
    let sched = dir.path().join("schedule.toml");
    std::fs::write(
        &sched,
        "[[change]]\nat = \"10us\"\n[change.patch.port_defaults]\nmtu = 1518\n",
    )
    .unwrap();
    let schedule =
        dataplane::replay::schedule::Schedule::load(&repo_root().join("configs/default.toml"), &sched).unwrap();
    let config = schedule.player().take().unwrap().unwrap();
    assert_eq!(config.ports[0].max_frame_bytes, 1536);
    assert_eq!(schedule.steps()[0].keys, ["port_defaults.mtu"]);
    let examples = repo_root().join("examples/tune");
    let topo = topology::load(
        &examples.join("topology.toml"),
        Some(&repo_root().join("configs/default.toml")),
        1,
    )
    .unwrap();
    let cfg = dataplane::tune::space::patch_config(&topo, 0, fragment).unwrap();
    assert_eq!(cfg.ports[0].max_frame_bytes, 1536);
}

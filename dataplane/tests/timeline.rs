//! `--timeline` (issue 39 item 1): what the page's data says against what the run counted, the
//! run unchanged by recording it, the output files refused like the others, and the page in a
//! real browser (headless Chromium): every panel drawn, no console message.

mod common;

use common::{default_config, repo_root};
use dataplane::fabric::{self, topology, FabricOptions};
use dataplane::replay::schedule::Schedule;
use dataplane::replay::{self, ReplayOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

fn incast_inputs() -> Vec<(u16, PathBuf)> {
    (0..4)
        .map(|p| (p, repo_root().join(format!("examples/incast/port{p}.pcap"))))
        .collect()
}

fn replay_incast(dir: &Path, timeline: bool) -> replay::ReplayOutcome {
    let opts = ReplayOptions {
        inputs: incast_inputs(),
        output_dir: dir.to_path_buf(),
        seed: 1,
        peer_ignores_pfc: false,
        progress: None,
        schedule: Default::default(),
        timeline,
    };
    replay::run(&default_config(), &opts).expect("replay runs")
}

/// The schedule of the held-queue tests: the receiver's port stops sending at 20 µs and
/// starts again at 3 ms.
const TX_OFF: &str = "[[change]]\nat = \"20us\"\n[change.port.3]\ntx = \"off\"\n\
                      [[change]]\nat = \"3ms\"\n[change.port.3]\ntx = \"on\"\n";
const TX_OFF_FROM: u64 = 20_000;
const TX_OFF_TO: u64 = 3_000_000;

/// The incast with port 3's transmit off from 20 µs to 3 ms (and the senders ignoring PFC
/// when `ignore_pfc`, so their PGs run out of headroom and drop).
fn replay_held(dir: &Path, ignore_pfc: bool) -> replay::ReplayOutcome {
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    let schedule = Schedule::from_text(text, "default.toml", TX_OFF, "schedule.toml").unwrap();
    let opts = ReplayOptions {
        inputs: incast_inputs(),
        output_dir: dir.to_path_buf(),
        seed: 1,
        peer_ignores_pfc: ignore_pfc,
        progress: None,
        schedule,
        timeline: true,
    };
    replay::run(&default_config(), &opts).expect("replay runs")
}

/// Issue 49 item 1: a queue held full while nothing happens reads full in every bucket, not
/// 0 in the buckets where nothing moved; the schedule's changes are in the data, at their
/// times.
#[test]
fn a_held_queue_reads_full_in_every_bucket_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let o = replay_held(dir.path(), false);
    let t = o.timeline.expect("a timeline");
    let q = t
        .queues
        .iter()
        .find(|q| (q.port, q.queue) == (3, 3))
        .expect("port 3's lossless queue built up");
    let w = t.bucket_ns;
    // Buckets wholly inside the pause, once it had filled (200 µs on): all at the level held.
    let held: Vec<u64> = (0..t.buckets)
        .filter(|&i| i as u64 * w >= 200_000 && (i as u64 + 1) * w <= TX_OFF_TO)
        .map(|i| q.depth_bytes[i])
        .collect();
    assert!(held.len() > 100, "{} buckets of {w} ns", held.len());
    let min = *held.iter().min().unwrap();
    assert!(
        min >= q.peak_bytes * 9 / 10,
        "port 3 held its queue from 20 µs to 3 ms (peak {}), yet a bucket reads {min}: {:?}",
        q.peak_bytes,
        &held[..held.len().min(12)]
    );
    // It drains once transmit is back on.
    assert!(*q.depth_bytes.last().unwrap() < q.peak_bytes / 4);
    let at: Vec<u64> = t.changes.iter().map(|c| c.t_ns).collect();
    assert_eq!(at, [TX_OFF_FROM, TX_OFF_TO]);
    let labels: Vec<&str> = t.changes.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["port.3: tx = \"off\"", "port.3: tx = \"on\""]);
}

/// Issue 49 item 1: drops per port and reason, and the ingress PGs' use and headroom, add up
/// to what the switch counted.
#[test]
fn drops_and_headroom_add_up_to_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let o = replay_held(dir.path(), true);
    let t = o.timeline.expect("a timeline");
    let snap = &o.snapshot;
    let mut counted = 0;
    for p in &snap.ports {
        for (reason, n) in p.drops.iter() {
            if n == 0 {
                continue;
            }
            counted += 1;
            let d = t
                .drops
                .iter()
                .find(|d| d.port == p.id && d.reason == reason)
                .unwrap_or_else(|| panic!("port {} {reason}: {n} dropped, not in the timeline", p.id));
            assert_eq!(d.total, n, "{}", d.label);
            assert_eq!(d.frames.iter().sum::<u64>(), n, "{}", d.label);
        }
    }
    assert_eq!(t.drops.len(), counted);
    assert!(
        t.drops.iter().any(|d| d.reason == "headroom_overflow" && d.total > 0),
        "senders ignoring PFC overrun their headroom: {:?}",
        t.drops.iter().map(|d| &d.label).collect::<Vec<_>>()
    );
    let cell = u64::from(default_config().buffer.cell_bytes);
    for p in snap.ports.iter().filter(|p| p.id < 3) {
        let pg = p.pgs.iter().find(|g| g.pg == 3).unwrap();
        let g = t
            .pgs
            .iter()
            .find(|g| (g.port, g.pg) == (p.id, 3))
            .unwrap_or_else(|| panic!("port {}'s PG 3 used headroom", p.id));
        assert_eq!(
            g.peak_headroom_bytes,
            u64::from(pg.peak_headroom_cells) * cell,
            "{}",
            g.label
        );
        assert!(g.peak_headroom_bytes > 0 && g.peak_bytes >= g.peak_headroom_bytes);
        assert_eq!(g.headroom_bytes.len(), t.buckets);
    }
}

/// The bundled 3→1 incast: the receiver's lossless queue builds up and is CE-marked, each
/// sender's port goes in and out of XOFF; the page's figures add up to the summary's.
#[test]
fn replay_timeline_adds_up_to_the_summary_and_changes_nothing() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let with = replay_incast(a.path(), true);
    let without = replay_incast(b.path(), false);
    assert!(without.timeline.is_none());
    // Recording reads, never writes: the same summary and the same captures.
    assert_eq!(
        serde_json::to_string(&with).unwrap(),
        serde_json::to_string(&without).unwrap()
    );
    for p in 0..4 {
        let name = format!("port{p}.pcap");
        assert_eq!(
            std::fs::read(a.path().join(&name)).unwrap(),
            std::fs::read(b.path().join(&name)).unwrap(),
            "{name}"
        );
    }
    let t = with.timeline.expect("a timeline");
    assert!(
        t.buckets <= dataplane::timeline::MAX_BUCKETS && t.buckets > 100,
        "{}",
        t.buckets
    );
    assert!(t.bucket_ns * t.buckets as u64 >= t.end_ns);
    assert_eq!(t.end_ns, with.duration_ns);

    let snap = &with.snapshot;
    let port3 = snap.ports.iter().find(|p| p.id == 3).unwrap();
    let q3 = port3.queues.iter().find(|q| q.queue == 3).unwrap();
    assert_eq!(
        t.queues.len(),
        1,
        "only the receiver's lossless queue builds up: {:?}",
        t.queues
    );
    let q = &t.queues[0];
    assert_eq!((q.port, q.queue), (3, 3));
    assert_eq!(q.peak_bytes, q3.peak_bytes, "the deepest bucket is the queue's peak");
    assert_eq!(q.ce_total, q3.ecn_marked, "every CE mark in some bucket, once");
    assert_eq!(q.ce_marks.iter().sum::<u64>(), q3.ecn_marked);
    assert!(q.ce_total > 1000, "{}", q.ce_total);
    // It builds up, stays up while the senders are held by PFC, and drains to nothing.
    assert!(q.depth_bytes[0] < q.peak_bytes / 4, "{:?}", &q.depth_bytes[..5]);
    assert!(*q.depth_bytes.last().unwrap() < q.peak_bytes / 4);

    assert_eq!(
        t.pfc.len(),
        3,
        "{:?}",
        t.pfc.iter().map(|r| &r.label).collect::<Vec<_>>()
    );
    for row in &t.pfc {
        assert_eq!((row.kind, row.prio), ("xoff", 3), "{}", row.label);
        let port = snap.ports.iter().find(|p| p.id == row.port).unwrap();
        let pg = port.pgs.iter().find(|g| g.pg == 3).unwrap();
        // One bar per XOFF period: each ended by an XON (none is open at the end).
        assert_eq!(row.bars.len() as u64, pg.xon_sent, "{}", row.label);
        assert!(row.bars.len() > 10, "{}: {}", row.label, row.bars.len());
        assert_eq!(row.merged_below_ns, 0);
        for w in row.bars.windows(2) {
            assert!(w[0][0] < w[0][1] && w[0][1] < w[1][0], "{}: {:?}", row.label, w);
        }
    }
    assert!(t.marks.is_empty() && t.flows.is_empty() && t.links.is_empty());
}

fn fabric_run(name: &str, timeline: bool) -> fabric::FabricOutcome {
    let path = repo_root().join("examples/fabric").join(name);
    let topo = topology::load(&path, None, 1).expect("topology loads");
    let opts = FabricOptions {
        seed: 1,
        timeline,
        ..Default::default()
    };
    fabric::run(&topo, &opts).expect("fabric runs")
}

/// The deadlock example with its watchdog: storms and restorations marked as counted, every
/// byte delivered in some bucket, the heat map's pause time the links' own.
#[test]
fn fabric_timeline_adds_up_to_the_summary_and_changes_nothing() {
    let with = fabric_run("deadlock.toml", true);
    let without = fabric_run("deadlock.toml", false);
    assert_eq!(
        serde_json::to_string(&with).unwrap(),
        serde_json::to_string(&without).unwrap()
    );
    let t = with.timeline.as_ref().expect("a timeline");
    assert!(t.buckets <= dataplane::timeline::MAX_BUCKETS);

    let storms: u64 = with
        .switches
        .values()
        .flat_map(|s| &s.ports)
        .map(|p| p.watchdog_storms.iter().sum::<u64>())
        .sum();
    let restores: u64 = with
        .switches
        .values()
        .flat_map(|s| &s.ports)
        .map(|p| p.watchdog_restores.iter().sum::<u64>())
        .sum();
    assert!(storms > 0 && restores > 0, "the example's watchdog fires");
    assert_eq!(t.marks.iter().filter(|m| m.kind == "storm").count() as u64, storms);
    assert_eq!(t.marks.iter().filter(|m| m.kind == "restore").count() as u64, restores);
    for m in &t.marks {
        // A storm is marked on a row of the port it paused.
        assert!(
            t.pfc.iter().any(|r| r.label == format!("{} paused", m.label)),
            "{}",
            m.label
        );
    }
    assert!(t.pfc.iter().any(|r| r.kind == "paused") && t.pfc.iter().any(|r| r.kind == "xoff"));

    assert_eq!(t.flows.len(), with.flows.len());
    for (f, rep) in t.flows.iter().zip(&with.flows) {
        // Rates are whole bits per second: a bucket's bytes to within a bit's rounding.
        let bytes: f64 = f.rate_bps.iter().map(|&r| r as f64 * t.bucket_ns as f64 / 8e9).sum();
        let slack = t.buckets as f64 * t.bucket_ns as f64 / 8e9;
        assert!(
            (bytes - rep.delivered_bytes as f64).abs() <= slack + 1.0,
            "{}: {bytes} in the buckets, {} delivered",
            f.label,
            rep.delivered_bytes
        );
        assert_eq!(f.dcqcn_bps.len(), t.buckets);
    }
    let dirs: Vec<(String, u64)> = with
        .links
        .iter()
        .flat_map(|l| {
            let (a, b) = l.name.split_once('-').unwrap();
            [
                (format!("{a}→{b}"), l.forward.paused_ns.iter().sum::<u64>()),
                (format!("{b}→{a}"), l.reverse.paused_ns.iter().sum::<u64>()),
            ]
        })
        .collect();
    assert_eq!(t.links.len() + t.links_never_paused, dirs.len());
    for (label, want) in &dirs {
        match t.links.iter().find(|l| &l.label == label) {
            Some(l) => {
                assert_eq!(l.paused_ns, *want, "{label}");
                let ns: f64 = l.paused_fraction.iter().map(|x| x * t.bucket_ns as f64).sum();
                let slack = t.buckets as f64 * t.bucket_ns as f64 * 0.5e-4;
                assert!((ns - *want as f64).abs() <= slack, "{label}: {ns} vs {want}");
            }
            None => assert_eq!(*want, 0, "{label} was paused but is not in the heat map"),
        }
    }
    assert!(t.links.iter().any(|l| l.paused_fraction.iter().any(|&x| x > 0.5)));
}

/// A long run stays a page of the same size: the buckets merge, the width doubles.
#[test]
fn a_longer_run_is_not_a_bigger_page() {
    let path = repo_root().join("examples/fabric/incast.toml");
    let topo = topology::load(&path, None, 1).unwrap();
    let mut sizes = Vec::new();
    for ms in [1, 8] {
        let opts = FabricOptions {
            seed: 1,
            timeline: true,
            duration_ns: Some(ms * 1_000_000),
            ..Default::default()
        };
        let t = fabric::run(&topo, &opts).unwrap().timeline.unwrap();
        assert!(t.buckets <= dataplane::timeline::MAX_BUCKETS);
        sizes.push(serde_json::to_string(&t).unwrap().len());
    }
    assert!(sizes[1] < sizes[0] * 2, "{sizes:?}");
}

fn rocesw(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(args)
        .output()
        .expect("rocesw runs")
}

fn incast_args(config: &Path, out: &Path) -> Vec<String> {
    let mut v = vec![
        "replay".to_string(),
        "-q".into(),
        "--config".into(),
        config.display().to_string(),
        "--output-dir".into(),
        out.display().to_string(),
    ];
    for (p, path) in incast_inputs() {
        v.push("--input".into());
        v.push(format!("{p}={}", path.display()));
    }
    v
}

/// The page and its data are outputs like the others: never over an input, never a name the
/// data could not go beside; nothing is written when refused.
#[test]
fn timeline_outputs_over_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    // The page is the config.
    let cfg_html = dir.path().join("cfg.html");
    std::fs::write(&cfg_html, &text).unwrap();
    let mut args = incast_args(&cfg_html, &dir.path().join("o1"));
    args.extend(["--timeline".into(), cfg_html.display().to_string()]);
    let o = rocesw(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("timeline") && err.contains("config"), "{err}");
    assert_eq!(std::fs::read_to_string(&cfg_html).unwrap(), text);
    // The data beside the page is the config.
    let cfg_json = dir.path().join("t.json");
    std::fs::write(&cfg_json, &text).unwrap();
    let mut args = incast_args(&cfg_json, &dir.path().join("o2"));
    args.extend(["--timeline".into(), dir.path().join("t.html").display().to_string()]);
    let o = rocesw(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("timeline's data") && err.contains("config"), "{err}");
    assert_eq!(std::fs::read_to_string(&cfg_json).unwrap(), text);
    // A name that is not .html.
    let mut args = incast_args(&repo_root().join("configs/default.toml"), &dir.path().join("o3"));
    args.extend(["--timeline".into(), dir.path().join("t.svg").display().to_string()]);
    let o = rocesw(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("must end in .html"), "{err}");
    assert!(!dir.path().join("o3").exists(), "nothing written");
    // The fabric: the page over the topology, by another name.
    let real = repo_root().join("examples/fabric/incast.toml");
    let before = std::fs::read(&real).unwrap();
    let topo = dir.path().join("topo.html");
    std::os::unix::fs::symlink(&real, &topo).unwrap();
    let o = rocesw(&[
        "fabric",
        "-q",
        "--topology",
        real.to_str().unwrap(),
        "--output-dir",
        dir.path().join("o4").to_str().unwrap(),
        "--timeline",
        topo.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("timeline") && err.contains("topology"), "{err}");
    assert_eq!(std::fs::read(&real).unwrap(), before);
}

/// Debian's headless Chromium, if installed (`chromium-headless-shell`, or `chromium`).
fn chromium() -> Option<PathBuf> {
    for name in [
        "chromium-headless-shell",
        "/usr/lib/chromium-headless-shell/chromium-headless-shell",
        "chromium",
        "/usr/lib/chromium/headless_shell",
    ] {
        let ok = Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(PathBuf::from(name));
        }
    }
    None
}

/// Loads `page` in headless Chromium: the DOM after its script ran, and every console message.
fn load(browser: &Path, page: &Path) -> (String, Vec<String>) {
    let o = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let console = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (String::from_utf8(o.stdout).unwrap(), console)
}

/// The pages `rocesw replay --timeline` and `rocesw fabric --timeline` write, in a real
/// browser: the script ran, every panel says it drew, nothing went to the console, and no
/// element asks the network for anything.
#[test]
fn the_pages_render_in_a_browser() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install chromium-headless-shell (.ci/install-deps)"
        );
        eprintln!("SKIPPED: no headless Chromium (apt-get install chromium-headless-shell)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // In a folder not there yet: created, as --output-dir is.
    let page = dir.path().join("pages/incast.html");
    let mut args = incast_args(&repo_root().join("configs/default.toml"), &dir.path().join("out"));
    args.extend(["--timeline".into(), page.display().to_string()]);
    let o = rocesw(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fpage = dir.path().join("deadlock.html");
    let o = rocesw(&[
        "fabric",
        "-q",
        "--topology",
        repo_root().join("examples/fabric/deadlock.toml").to_str().unwrap(),
        "--output-dir",
        dir.path().join("fout").to_str().unwrap(),
        "--timeline",
        fpage.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (page, panels) in [
        (&page, &["queues", "pfc"][..]),
        (&fpage, &["queues", "pfc", "flows", "heat"][..]),
    ] {
        let html = std::fs::read_to_string(page).unwrap();
        for remote in ["http://", "https://", "src=", "href="] {
            assert!(
                !html.replace("http://www.w3.org/2000/svg", "").contains(remote),
                "{}: {remote}",
                page.display()
            );
        }
        let data: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(page.with_extension("json")).unwrap()).unwrap();
        assert!(data["buckets"].as_u64().unwrap() > 0);
        let (dom, console) = load(&browser, page);
        assert!(console.is_empty(), "{}: console: {console:#?}", page.display());
        assert!(
            dom.contains(r#"data-rendered="1""#),
            "{}: the script did not finish",
            page.display()
        );
        for id in panels {
            let at = dom
                .find(&format!(r#"id="{id}""#))
                .unwrap_or_else(|| panic!("{}: no panel {id}", page.display()));
            let tag = &dom[dom[..at].rfind('<').unwrap()..at + dom[at..].find('>').unwrap()];
            assert!(tag.contains(r#"data-ok="1""#), "{}: panel {id}: {tag}", page.display());
        }
        assert!(!dom.contains(r#"data-ok="0""#) && !dom.contains(r#"data-ok="pending""#));
        // Drawn, not just flagged: bars, areas and lines in SVG.
        assert!(dom.matches("<polygon").count() >= 1, "{}", page.display());
        assert!(dom.matches("<rect").count() >= 10, "{}", page.display());
    }
}

/// The attributes of every `<tag …>` in `html` (as Chromium's --dump-dom writes them).
fn tags<'a>(html: &'a str, tag: &str) -> Vec<std::collections::HashMap<&'a str, &'a str>> {
    let open = format!("<{tag} ");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        let body = &rest[at + open.len()..];
        let end = body.find('>').unwrap();
        let mut attrs = std::collections::HashMap::new();
        let mut a = &body[..end];
        while let Some(eq) = a.find("=\"") {
            let name = a[..eq].trim();
            let v = &a[eq + 2..];
            let close = v.find('"').unwrap();
            attrs.insert(name, &v[..close]);
            a = &v[close + 1..];
        }
        out.push(attrs);
        rest = &body[end..];
    }
    out
}

/// Panel `id` of a dumped page, up to the next panel.
fn panel<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom
        .find(&format!(r#"id="{id}""#))
        .unwrap_or_else(|| panic!("no panel {id}"));
    let rest = &dom[at..];
    let end = rest[1..]
        .find("<section")
        .map(|e| e + 1)
        .or_else(|| rest.find("<footer"))
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The time charts (`<svg class="time">`) of a panel, each as its text.
fn time_charts(panel: &str) -> Vec<&str> {
    panel
        .split("<svg ")
        .skip(1)
        .filter(|s| s[..s.find('>').unwrap()].contains(r#"class="time""#))
        .map(|s| &s[..s.find("</svg>").unwrap()])
        .collect()
}

fn num(s: &str) -> f64 {
    s.parse().unwrap_or_else(|_| panic!("not a number: {s}"))
}

/// A chart's time axis: each tick's (time, x).
fn ticks(chart: &str) -> Vec<(u64, f64)> {
    tags(chart, "text")
        .into_iter()
        .filter(|a| a.get("class") == Some(&"tick"))
        .map(|a| (a["data-t"].parse().unwrap(), num(a["x"])))
        .collect()
}

/// Where time `t` is on a chart whose ticks are `ticks` (linear between its first and last).
fn x_of(ticks: &[(u64, f64)], t: u64) -> f64 {
    let ((ta, xa), (tb, xb)) = (ticks[0], ticks[ticks.len() - 1]);
    xa + (t as f64 - ta as f64) * (xb - xa) / (tb as f64 - ta as f64)
}

/// A held queue's chart: the depth area's points between `from` and `to` are all near its
/// top (the peak), where the area's first point is its bottom (0 B).
fn assert_drawn_full(chart: &str, from: u64, to: u64, what: &str) {
    let tk = ticks(chart);
    let area = tags(chart, "polygon")
        .into_iter()
        .find(|a| a.get("class") == Some(&"depth"))
        .unwrap_or_else(|| panic!("{what}: no depth area"));
    let pts: Vec<(f64, f64)> = area["points"]
        .split(' ')
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (num(x), num(y))
        })
        .collect();
    let bottom = pts[0].1;
    let top = pts.iter().map(|p| p.1).fold(f64::MAX, f64::min);
    let (xa, xb) = (x_of(&tk, from), x_of(&tk, to));
    let inside: Vec<f64> = pts.iter().filter(|p| p.0 >= xa && p.0 <= xb).map(|p| p.1).collect();
    assert!(inside.len() > 20, "{what}: {} points in the held range", inside.len());
    for y in inside {
        assert!(
            bottom - y >= 0.9 * (bottom - top),
            "{what}: drawn at {y} in the held range, full is {top}, empty {bottom}"
        );
    }
}

/// Issue 49 item 1, in a real browser: the incast with port 3's transmit off from 20 µs to
/// 3 ms and the senders ignoring PFC. The held queue draws full through the pause; drops and
/// the two changes are marked; every panel's time axis is the same one (a time is at the
/// same x in each) with round ticks; and a zoomed view (#t=FROM-TO) draws only that range.
#[test]
fn the_page_draws_held_queues_drops_and_changes_on_one_axis() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install chromium-headless-shell (.ci/install-deps)"
        );
        eprintln!("SKIPPED: no headless Chromium (apt-get install chromium-headless-shell)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sched = dir.path().join("schedule.toml");
    std::fs::write(&sched, TX_OFF).unwrap();
    let page = dir.path().join("held.html");
    let mut args = incast_args(&repo_root().join("configs/default.toml"), &dir.path().join("out"));
    args.extend([
        "--peer-ignores-pfc".into(),
        "--schedule".into(),
        sched.display().to_string(),
        "--timeline".into(),
        page.display().to_string(),
    ]);
    let o = rocesw(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let (dom, console) = load(&browser, &page);
    assert!(console.is_empty(), "console: {console:#?}");
    assert!(dom.contains(r#"data-rendered="1""#));
    assert!(!dom.contains(r#"data-ok="0""#), "a panel failed");
    let ids = ["queues", "pgs", "drops", "pfc"];
    let mut axes = Vec::new();
    for id in ids {
        let p = panel(&dom, id);
        assert!(p.contains(r#"data-ok="1""#), "{id}");
        let charts = time_charts(p);
        assert!(!charts.is_empty(), "{id}: no time chart");
        for c in charts {
            let tk = ticks(c);
            assert!(tk.len() >= 4, "{id}: {} ticks", tk.len());
            // Round ticks: evenly spaced by 1, 2 or 5 times a power of ten.
            let step = tk[1].0 - tk[0].0;
            let mant = step / 10u64.pow(step.ilog10());
            assert!([1, 2, 5].contains(&mant), "{id}: tick step {step} ns");
            assert!(tk.windows(2).all(|w| w[1].0 - w[0].0 == step), "{id}: {tk:?}");
            assert!(tk.iter().all(|(t, _)| t % step == 0), "{id}: {tk:?}");
            // Both changes, each where the axis puts its time.
            let marks: Vec<_> = tags(c, "line")
                .into_iter()
                .filter(|a| a.get("class") == Some(&"change"))
                .collect();
            assert_eq!(marks.len(), 2, "{id}: change marks");
            for m in &marks {
                let t: u64 = m["data-t"].parse().unwrap();
                assert!([TX_OFF_FROM, TX_OFF_TO].contains(&t), "{id}: {t}");
                assert!((num(m["x1"]) - x_of(&tk, t)).abs() < 0.01, "{id}: change at {t}");
            }
            axes.push((id, tk));
        }
    }
    // One axis: the same times at the same x in every chart of every panel.
    let (first, reference) = &axes[0];
    for (id, tk) in &axes[1..] {
        assert_eq!(
            tk.iter().map(|t| t.0).collect::<Vec<_>>(),
            reference.iter().map(|t| t.0).collect::<Vec<_>>(),
            "{id} against {first}"
        );
        for ((t, x), (_, x0)) in tk.iter().zip(reference) {
            assert!((x - x0).abs() < 0.01, "{t} ns is at x {x} in {id}, {x0} in {first}");
        }
    }
    let q = time_charts(panel(&dom, "queues"))
        .into_iter()
        .find(|c| c.contains(r#"data-queue="3/3""#))
        .expect("port 3's queue is drawn");
    assert_drawn_full(q, 300_000, 2_900_000, "port 3 queue 3");
    let drops = panel(&dom, "drops");
    assert!(drops.contains("headroom_overflow"), "drops are named by reason");
    let bars = tags(drops, "rect")
        .into_iter()
        .filter(|a| a.get("class") == Some(&"drop"))
        .count();
    assert!(bars >= 1, "drops are drawn");
    assert!(
        tags(panel(&dom, "pgs"), "polygon")
            .iter()
            .any(|a| a.get("class") == Some(&"headroom")),
        "headroom use is drawn"
    );
    assert!(dom.contains("CE/bkt"), "the CE bars have a scale");

    // Zoomed: 1 ms to 2 ms, inside the pause: ticks only there, the queue still full, the
    // changes (outside) not drawn.
    let zoomed = PathBuf::from(format!("{}#t=1000000-2000000", page.display()));
    let (dom, console) = load(&browser, &zoomed);
    assert!(console.is_empty(), "console: {console:#?}");
    assert!(dom.contains("showing 1 ms – 2 ms"), "the summary says what is shown");
    let q = time_charts(panel(&dom, "queues"))
        .into_iter()
        .find(|c| c.contains(r#"data-queue="3/3""#))
        .unwrap();
    let tk = ticks(q);
    assert_eq!(tk.first().unwrap().0, 1_000_000);
    assert_eq!(tk.last().unwrap().0, 2_000_000);
    assert_drawn_full(q, 1_000_000, 2_000_000, "port 3 queue 3, zoomed");
    assert!(!dom.contains(r#"class="change""#), "no change between 1 and 2 ms");
}

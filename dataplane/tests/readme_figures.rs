//! The figures README.md and docker/README.md give for the bundled incast's replay
//! (`examples/incast` through `configs/default.toml`) are read from the files and compared
//! with a replay of it here, so a change of the switch that moves them fails until the text
//! says the new ones (issue 49 item 8: the READMEs had said 5453 CE marks and 242 PFC frames a
//! sender, 726 in all, after replay had come to give 5455 and 242, 244 and 244).
//!
//! Real-time figures (`rocesw run` on capture files) depend on the build and the machine: the
//! README states them as one machine's runs, with the date, and no test pins them.

mod common;
use common::*;

/// The whole text of a file of the repository, its lines joined by spaces (a figure may be
/// wrapped onto the next line).
fn text(path: &str) -> String {
    let t = std::fs::read_to_string(repo_root().join(path)).unwrap();
    t.lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

/// The words right after `lead` in `text`, up to `len` characters.
fn after<'a>(text: &'a str, lead: &str, file: &str) -> &'a str {
    let at = text
        .find(lead)
        .unwrap_or_else(|| panic!("{file} no longer says {lead:?}: update this test with it"));
    let rest = &text[at + lead.len()..];
    &rest[..rest.len().min(120)]
}

/// The whole numbers in `s`, in order (`5,455` as 5455).
fn numbers(s: &str) -> Vec<u64> {
    s.split(|c: char| !(c.is_ascii_digit() || c == ','))
        .map(|w| w.replace(',', ""))
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect()
}

#[test]
fn the_readmes_replay_figures_are_the_replays() {
    let dir = tempfile::tempdir().unwrap();
    let examples = repo_root().join("examples/incast");
    let inputs: Vec<(u16, std::path::PathBuf)> = (0..4).map(|i| (i, examples.join(format!("port{i}.pcap")))).collect();
    let cfg = default_config();
    let o = replay(&cfg, dir.path(), &inputs, 1, false);
    let s = &o.snapshot;
    assert_eq!(s.totals.drops.total(), 0);
    let ce = s.ports[3].ecn_marked;
    let pfc: Vec<u64> = s.ports[..3].iter().map(|p| p.pfc_tx[3]).collect();
    let delivered = s.ports[3].tx_packets;
    let cell = u64::from(cfg.buffer.cell_bytes);
    let pg3 = |p: usize| s.ports[p].pgs.iter().find(|g| g.pg == 3).unwrap().clone();
    let peak = (0..3).map(|p| u64::from(pg3(p).peak_cells)).max().unwrap() * cell;
    let peak_hr = (0..3).map(|p| u64::from(pg3(p).peak_headroom_cells)).max().unwrap() * cell;
    let xoff: Vec<u64> = (0..3).map(|p| pg3(p).xoff_sent).collect();

    let readme = text("README.md");
    // `rocesw replay`'s timeline paragraph.
    assert_eq!(
        numbers(after(
            &readme,
            "most frames leaving it are CE-marked (red: ",
            "README.md"
        ))[..2],
        [ce, delivered],
        "README.md's CE marks of the timeline"
    );
    let held = numbers(after(&readme, "Each sender's ingress PG 3 holds ", "README.md"));
    assert_eq!(
        held[..2],
        [peak / 1024, peak_hr / 1024],
        "README.md's PG 3 peak and headroom peak, KiB"
    );
    // Capture-file ports against replay.
    let lead = "Replay's figures are exact (dataplane/tests/readme_figures.rs checks these): ";
    let got = numbers(after(&readme, lead, "README.md"));
    assert_eq!(got[..4], [ce, pfc[0], pfc[1], pfc[2]], "README.md's replay CE and PFC");
    let cycles = numbers(after(&readme, "fewer XOFF/XON cycles (", "README.md"));
    let (lo, hi) = (*xoff.iter().min().unwrap(), *xoff.iter().max().unwrap());
    assert_eq!(cycles[2..4], [lo, hi], "README.md's replay XOFF cycles");
    let hr = numbers(after(&readme, "in those runs against replay's ", "README.md"));
    assert_eq!(hr[0] * cell, peak_hr, "README.md's replay headroom peak, cells");

    // docker/README.md: the container's run of the same replay.
    let docker = text("docker/README.md");
    let got = numbers(after(&docker, "all 6000 frames delivered, ", "docker/README.md"));
    assert_eq!(
        got[..2],
        [pfc.iter().sum::<u64>(), ce],
        "docker/README.md's PFC frames and CE marks"
    );
    assert_eq!(delivered, 6000);
}

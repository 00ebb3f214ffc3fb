//! Issue 24 item 5: the switch builds on this config crate alone; the daemon's and the CLI's
//! dependencies (an async runtime, HTTP, Prometheus, a command-line parser) are `ctl`'s, so
//! neither this crate nor the switch carries them.

use std::path::Path;
use std::process::Command;

/// The crates `package` depends on to build (normal dependencies, transitively), by name.
fn normal_dependencies(package: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(env!("CARGO"))
        .args(["tree", "-q", "-p", package, "-e", "normal", "--prefix", "none"])
        .current_dir(&root)
        .output()
        .expect("running cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect();
    assert!(
        names.iter().any(|n| n == package),
        "cargo tree did not list {package}: {text}"
    );
    names
}

const TOOLS_ONLY: [&str; 6] = [
    "tokio",
    "hyper",
    "hyper-util",
    "prometheus-client",
    "signal-hook",
    "tracing-subscriber",
];

#[test]
fn the_config_crate_carries_no_daemon_or_cli_dependencies() {
    let deps = normal_dependencies("rocesw-controlplane");
    for name in TOOLS_ONLY.iter().chain(&["clap", "rocesw-ctl"]) {
        assert!(!deps.iter().any(|d| d == name), "rocesw-controlplane depends on {name}");
    }
}

#[test]
fn the_switch_builds_without_the_daemons_dependencies() {
    let deps = normal_dependencies("rocesw-dataplane");
    // The switch has its own command line and signal handling; what only the daemon and
    // rocectl need must not come with it.
    for name in ["tokio", "hyper", "hyper-util", "prometheus-client", "rocesw-ctl"] {
        assert!(!deps.iter().any(|d| d == name), "rocesw-dataplane depends on {name}");
    }
}

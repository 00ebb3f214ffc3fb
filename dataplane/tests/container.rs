//! rocesw's container image without a registry and a containerlab fabric of containers (issue
//! 22, items 3 and 4). This test runs `docker/with-dockerd.sh` with `docker/test-image.sh` and
//! then `docker/test-fabric.sh` on this build's `rocesw` (with DPDK) and the workspace's
//! `rocectl` and `rocegen`:
//!
//! - `with-dockerd.sh` starts a private dockerd (its own data root, exec root, pidfile and
//!   socket under /tmp, `--iptables=false --bridge=none --ip-forward=false`), runs the test
//!   against it, stops it on every exit, and checks that the host's iptables and ip6tables
//!   rules, `net.ipv4.ip_forward` and the absence of `docker0` are as they were (restoring and
//!   failing if not);
//! - `test-image.sh` makes the base image with debootstrap from Debian's mirror when no registry
//!   answers (`docker/make-base.sh`, the tarball cached in target/docker-base/ for the next run),
//!   builds the image (`docker/build-image.sh`, `docker/Dockerfile.local`), and runs its default
//!   command, the replay of the bundled 3→1 incast as the unprivileged user, without a network:
//!   its output must equal, byte for byte, what the same binary writes on the host, and be
//!   lossless (no drop, every frame delivered, PFC and CE marks);
//! - `test-fabric.sh` deploys `docker/rocesw.clab.yml` with `docker/clab.py` (what containerlab
//!   does for `kind: linux` nodes: one container per node, veth pairs for the links, the nodes'
//!   `exec` commands): the rocesw container switching three host containers on 500M ports. The
//!   hosts' addresses must be those of `docker/clab/incast.lab.json`; a 2→1 RoCEv2 incast at
//!   line rate from h1 and h2 to h0 (`rocegen coordinate` in the hosts' network namespaces) must
//!   lose nothing, with CE marks, CNPs and PFC, and the switch must drop nothing.
//!
//! Needs root, Debian's `docker.io` and `debootstrap` (.ci/install-deps installs them). Without
//! them the test says it is skipped, except under CI (`CI` set), where it fails. Here: the first
//! run (debootstrap) about 3 minutes, later runs (the cached base) about 31 s.
//! `cargo test -p rocesw-dataplane --features dpdk --test container -- --nocapture` shows the
//! steps.

#[cfg(not(feature = "dpdk"))]
#[test]
fn skipped_without_the_dpdk_feature() {
    eprintln!(
        "skipped: built without the `dpdk` feature \
         (cargo test -p rocesw-dataplane --features dpdk --test container)"
    );
}

#[cfg(feature = "dpdk")]
mod common;

/// `rocectl` and `rocegen` of this workspace (debug), built if needed.
#[cfg(feature = "dpdk")]
fn tools() -> (std::path::PathBuf, std::path::PathBuf) {
    let repo = common::repo_root();
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "rocesw-ctl", "--bin", "rocectl"])
        .args(["-p", "rocesw-bench", "--bin", "rocegen"])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(status.success(), "building rocectl and rocegen");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo.join("target"), Into::into);
    (target.join("debug/rocectl"), target.join("debug/rocegen"))
}

/// What is missing to run docker here, if anything.
#[cfg(feature = "dpdk")]
fn missing() -> Option<&'static str> {
    use std::process::Command;
    let runs = |b: &str, arg: &str| Command::new(b).arg(arg).output().is_ok_and(|o| o.status.success());
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        Some("not root (dockerd)")
    } else if !runs("dockerd", "--version") || !runs("docker", "--version") {
        Some("no dockerd/docker (apt-get install docker.io; .ci/install-deps does)")
    } else if !runs("debootstrap", "--version") {
        Some("no debootstrap (apt-get install debootstrap; .ci/install-deps does)")
    } else {
        None
    }
}

#[cfg(feature = "dpdk")]
#[test]
fn the_image_replays_the_bundled_incast_and_a_clab_fabric_runs_a_lossless_incast() {
    use std::process::Command;

    if common::skip_unless_ci_requires("the container test", missing()) {
        return;
    }
    let repo = common::repo_root();
    let (rocectl, rocegen) = tools();
    let t0 = std::time::Instant::now();
    let out = Command::new(repo.join("docker/with-dockerd.sh"))
        .args(["sh", "-c", "\"$0\" && \"$1\""])
        .arg(repo.join("docker/test-image.sh"))
        .arg(repo.join("docker/test-fabric.sh"))
        .env("ROCESW", env!("CARGO_BIN_EXE_rocesw"))
        .env("ROCECTL", &rocectl)
        .env("ROCEGEN", &rocegen)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}{stderr}the image test took {:?}", t0.elapsed());
    assert!(out.status.success(), "the docker tests failed ({})", out.status);
    assert!(
        stdout.contains("image test: passed"),
        "the image test did not report passing"
    );
    assert!(
        stdout.contains("fabric test: passed"),
        "the fabric test did not report passing"
    );
    assert!(stderr.contains("rocesw with DPDK: yes"), "the image's rocesw has DPDK");
    assert!(
        stderr.contains("iptables, ip6tables, ip_forward and docker0 as before"),
        "with-dockerd.sh found the host as it was"
    );
}

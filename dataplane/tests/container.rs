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

/// Issue 41 item 11: `with-dockerd.sh`'s cleanup ended leftover processes with `pgrep -f` on
/// its exec root (a regex over every user's command lines) and unmounted whatever a regex
/// built from `ROCESW_DOCKERD_DIR` matched (`/tmp/d|` matched every mount). Run here with
/// stand-ins for dockerd, containerd, docker, iptables and umount (which only records what it
/// was asked), so no docker is needed: another user's process naming the exec root survives,
/// ours is ended, and nothing outside the two directories is unmounted.
#[test]
fn with_dockerd_ends_only_its_own_processes_and_unmounts_only_its_own_mounts() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the script needs root");
        return;
    }
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = d.join("umount.log");
    let stubs = [
        ("dockerd", "exec sleep 60 </dev/null &>/dev/null".to_string()),
        (
            "containerd",
            "while [ $# -gt 0 ]; do [ \"$1\" = --address ] && a=$2; shift; done\n\
             exec python3 -c 'import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); time.sleep(60)' \"$a\""
                .to_string(),
        ),
        ("docker", "exit 0".to_string()),
        ("runc", "exit 0".to_string()),
        ("iptables-save", "echo '*filter'".to_string()),
        ("ip6tables-save", "echo '*filter'".to_string()),
        ("ip", "exit 1".to_string()),
        ("umount", format!("echo \"$*\" >>{}", log.display())),
    ];
    for (name, body) in stubs {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/bash\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The command, run against the stand-in daemon: a process of nobody's and one of ours,
    // both naming a file in the exec root; their pids are written down for the test.
    let pids = d.join("pids");
    let command = format!(
        "exec_root=${{DOCKER_HOST#unix://}}; exec_root=${{exec_root%/docker.sock}}\n\
         setsid setpriv --reuid=65534 --regid=65534 --clear-groups bash -c 'sleep 60; :' x \"$exec_root/containerd.sock\" </dev/null &>/dev/null &\n\
         echo $! >{0}.other\n\
         setsid bash -c 'sleep 60; :' x -address \"$exec_root/containerd.sock\" </dev/null &>/dev/null &\n\
         echo $! >{0}.ours\n\
         sleep 0.3",
        pids.display()
    );
    // A data directory whose name, read as a regex, matches every mount.
    let data = d.join("data|");
    let out = std::process::Command::new(repo.join("docker/with-dockerd.sh"))
        .args(["bash", "-c", &command])
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()))
        .env("ROCESW_DOCKERD_DIR", &data)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let pid = |which: &str| -> i32 {
        std::fs::read_to_string(format!("{}.{which}", pids.display()))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    // Running, not a zombie waiting for a reaper (SIGKILLed, an orphan stays one for a while).
    let alive = |p: i32| {
        std::fs::read_to_string(format!("/proc/{p}/stat"))
            .is_ok_and(|st| st.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
    };
    let (other, ours) = (pid("other"), pid("ours"));
    let other_alive = alive(other);
    // SAFETY: both are process groups this test started (setsid), ended here with their
    // sleeps whatever the script did.
    unsafe {
        libc::kill(-other, libc::SIGKILL);
        libc::kill(-ours, libc::SIGKILL);
    }
    assert!(out.status.success(), "{err}");
    assert!(
        other_alive && !err.contains(&format!("leftover process {other}")),
        "another user's process was ended:\n{err}"
    );
    assert!(
        err.contains(&format!("leftover process {ours}")),
        "our own process was not ended:\n{err}"
    );
    let unmounted = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(unmounted.is_empty(), "unmounted what is not its own:\n{unmounted}");
}

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

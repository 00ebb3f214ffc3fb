//! Real RoCE clients (issue 22, item 1): two QEMU VMs running Linux's own Soft-RoCE
//! (`rdma_rxe`) and perftest, attached to `rocesw run`'s two `net_vhost` ports. This test runs
//! `vm/run.sh` (which builds the guest from Debian's packages with `vm/build-guest.sh`, boots
//! both guests, and checks the results with `vm/check.py`) on this build's `rocesw`, in its two
//! phases:
//!
//! - normal: ping, `ibv_rc_pingpong -c` and `rping -V` (both verify the data), `ib_send_bw`,
//!   `ib_write_bw`, `ib_read_bw` (its exchange over rdma_cm) and `ib_send_lat` over several sizes, at traffic
//!   class 106 (DSCP 26 = the lossless RoCE class, ECT(0)): every step passes on both guests;
//!   no IP/UDP/TCP checksum error and no ICRC complaint in either guest; each guest's
//!   interface counters equal the switch's for its port; every ECN-capable packet a guest got
//!   left the switch from the RoCE queue; the guests' CE counts equal the switch's marks.
//! - mark-all: the same after `rocectl set ecn --profile roce --kmin 1B --kmax 1B --pmax 1`:
//!   every ECT frame leaves the switch CE-marked (its checksum rewritten), the guests receive
//!   no unmarked ECT packet, and every RDMA test still passes.
//!
//! Guests run under KVM when the machine has a usable one, else under TCG (this machine:
//! TCG, about 135 s a phase). Needs root, `qemu-system-x86` and apt's package lists (the guest
//! is made of Debian packages `apt-get download` fetches, cached in target/vm-guest). Without
//! QEMU or root the test says it is skipped, except under CI (`CI` set), where it fails.
//! `cargo test -p rocesw-dataplane --features dpdk --test vm_rxe -- --nocapture` shows the
//! figures.

#[cfg(not(feature = "dpdk"))]
#[test]
fn skipped_without_the_dpdk_feature() {
    eprintln!(
        "skipped: built without the `dpdk` feature \
         (cargo test -p rocesw-dataplane --features dpdk --test vm_rxe)"
    );
}

#[cfg(feature = "dpdk")]
mod common;

#[cfg(feature = "dpdk")]
#[test]
fn soft_roce_vms_through_the_switch() {
    use std::process::Command;

    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    let missing = if unsafe { libc::geteuid() } != 0 {
        Some("not root (DPDK's vhost ports)")
    } else if Command::new("qemu-system-x86_64").arg("--version").output().is_err() {
        Some("no qemu-system-x86_64 (apt-get install qemu-system-x86; .ci/install-deps does)")
    } else {
        None
    };
    if common::skip_unless_ci_requires("the VM test", missing) {
        return;
    }

    let repo = common::repo_root();
    let rocectl = common::rocectl();
    let t0 = std::time::Instant::now();
    let out = Command::new(repo.join("vm/run.sh"))
        .env("ROCESW", env!("CARGO_BIN_EXE_rocesw"))
        .env("ROCECTL", &rocectl)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}{stderr}vm/run.sh took {:?}", t0.elapsed());
    // CI keeps only the end of a failed test's output: the panic repeats why each failed
    // phase failed (check.py's list) and run.sh's own complaints, so the reason is in it.
    assert!(
        out.status.success(),
        "vm/run.sh failed ({}):\n{}",
        out.status,
        failure_lines(&stdout, &stderr)
    );
    for phase in ["normal", "mark-all"] {
        assert!(
            stdout.contains(&format!("phase {phase}: passed")),
            "phase {phase} did not report passing"
        );
    }
    assert!(
        stdout.contains("guests run under tcg") || stdout.contains("guests run under kvm"),
        "run.sh says which accelerator ran"
    );
}

/// The lines that say why a run failed: each failed phase's list from `vm/check.py` (from
/// "phase NAME: FAILED" to the next blank line or the end) and every `run.sh:` line.
#[cfg(feature = "dpdk")]
fn failure_lines(stdout: &str, stderr: &str) -> String {
    let mut lines = Vec::new();
    let mut in_list = false;
    for line in stdout.lines() {
        if line.starts_with("phase ") && line.ends_with(": FAILED") {
            in_list = true;
        } else if line.trim().is_empty() {
            in_list = false;
        }
        if in_list {
            lines.push(line);
        }
    }
    lines.extend(
        stdout
            .lines()
            .chain(stderr.lines())
            .filter(|l| l.starts_with("run.sh:") && !l.contains("guests run under")),
    );
    if lines.is_empty() {
        "(no phase reported a failure: see the output above)".to_string()
    } else {
        lines.join("\n")
    }
}

#!/usr/bin/env bash
# Two QEMU VMs running Linux's own Soft-RoCE (rdma_rxe) and perftest through rocesw's
# vhost-user ports, in one command (as root):
#
#   vm/run.sh [PHASE...]          # PHASE: normal, mark-all (default: both, in that order)
#
# For each phase: starts rocesw (vm/switch.toml, two `net_vhost` ports; the vhost-user
# server, so it starts first), boots the two guests vm/build-guest.sh builds from Debian's
# packages (server 10.99.0.1 on port 0, client 10.99.0.2 on port 1), lets them run the
# traffic vm/guest-init.sh lists (ping, ibv_rc_pingpong -c and rping -V verifying data,
# ib_send_bw / ib_write_bw / ib_read_bw (exchange over rdma_cm) / ib_send_lat over several sizes, at
# traffic class 106 = DSCP 26 (the RoCE class, lossless) + ECT(0)), then stops the switch and
# checks everything with vm/check.py: every step passed on both guests, no checksum or ICRC
# errors, each guest's interface counters equal the switch's for its port, and the guests'
# ECN counters equal the switch's marks. Phase mark-all first sets the RoCE ECN profile to
# mark every ECT frame CE (`rocectl set ecn --profile roce --kmin 1B --kmax 1B --pmax 1`):
# the guests must then see CE on every ECT frame and the RDMA tests still pass.
#
# Environment: ROCESW, ROCECTL (the binaries; default target/release/, built with
# `cargo build --release -p rocesw-dataplane -p rocesw-ctl --features dpdk` when
# missing), VM_ACCEL=auto|kvm|tcg (auto: KVM when /dev/kvm opens and the CPU has vmx/svm, else
# TCG), VM_GUEST_DIR (guest image cache, default target/vm-guest: new, empty, or made by
# build-guest.sh), VM_TIMEOUT (seconds per phase, default 1500), VM_ITERS (perftest
# iterations, default 500), VM_SIZES (default "64 1024 4096 65536"), VM_STEP_TIMEOUT (an
# attempt's limit in the guests, seconds, default 150), VM_WORK (keep logs there
# instead of a temporary directory; no `,`, `=`, `"` or `\` in it: the sockets' paths go into
# the switch's config).
# QEMU and the switch are stopped on every exit, failure or interrupt included.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PHASES=("$@")
((${#PHASES[@]})) || PHASES=(normal mark-all)
for p in "${PHASES[@]}"; do
    case $p in normal|mark-all) ;; *) echo "run.sh: unknown phase '$p' (normal, mark-all)" >&2; exit 2 ;; esac
done
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (DPDK's vhost ports)" >&2; exit 2; }
command -v qemu-system-x86_64 >/dev/null || { echo "run.sh: needs qemu-system-x86_64 (apt-get install qemu-system-x86)" >&2; exit 2; }

ROCESW=${ROCESW:-$REPO/target/release/rocesw}
ROCECTL=${ROCECTL:-$REPO/target/release/rocectl}
if [ ! -x "$ROCESW" ] || [ ! -x "$ROCECTL" ]; then
    echo "run.sh: building rocesw and rocectl (--features dpdk)"
    (cd "$REPO" && cargo build --release -p rocesw-dataplane -p rocesw-ctl --features rocesw-dataplane/dpdk)
fi
GUEST=${VM_GUEST_DIR:-$REPO/target/vm-guest}
"$REPO/vm/build-guest.sh" "$GUEST"
# The guests' retry logic, on the host in seconds, before minutes of emulation depend on it.
"$REPO/vm/selftest-steps.sh" "$GUEST/root/usr/bin/busybox"
# And check.py's verdicts on made-up runs.
python3 "$REPO/vm/test_check.py"
python3 "$REPO/vm/test_scripts.py"

ACCEL=${VM_ACCEL:-auto}
if [ "$ACCEL" = auto ]; then
    ACCEL=tcg
    if [ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then ACCEL=kvm; fi
fi
case $ACCEL in
kvm) ACCEL_ARGS=(-accel kvm -cpu host) ;;
tcg) ACCEL_ARGS=(-accel tcg) ;;
*) echo "run.sh: VM_ACCEL must be auto, kvm or tcg" >&2; exit 2 ;;
esac
echo "run.sh: guests run under $ACCEL$([ "$ACCEL" = tcg ] && echo ' (emulated CPU: the figures are the emulator'"'"'s, not the switch'"'"'s)')"

if [ -n "${VM_WORK:-}" ]; then WORK=$VM_WORK; mkdir -p "$WORK"; else WORK=$(mktemp -d /tmp/rocesw-vm.XXXXXX); fi
# A directory the switch's config cannot name its sockets in is refused now, not after the build.
python3 "$REPO/vm/switch_config.py" "$WORK" >/dev/null || exit 2
PIDS=()
SWITCH_PID=
cleanup() {
    local rc=$?
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    if [ -n "$SWITCH_PID" ]; then
        kill "$SWITCH_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$SWITCH_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$SWITCH_PID" 2>/dev/null || true
    fi
    wait 2>/dev/null || true
    if [ -z "${VM_WORK:-}" ]; then
        if [ $rc -eq 0 ]; then rm -rf "$WORK"; else echo "run.sh: failed; logs kept in $WORK" >&2; fi
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

MEM=256M
MAC=(52:54:00:00:00:01 52:54:00:00:00:02)
IP=(10.99.0.1 10.99.0.2)
ROLE=(server client)

run_phase() {
    local phase=$1 dir=$WORK/$1 t0=$SECONDS
    mkdir -p "$dir"
    # Not a sed expression made from the path: a `&` or `#` in VM_WORK misplaced the sockets.
    python3 "$REPO/vm/switch_config.py" "$dir" > "$dir/switch.toml"
    "$ROCESW" run --config "$dir/switch.toml" --control "$dir/ctl.sock" --summary "$dir/summary.json" \
        --log info > "$dir/rocesw.log" 2>&1 &
    SWITCH_PID=$!
    for f in vm0.sock vm1.sock ctl.sock; do
        for _ in $(seq 600); do [ -S "$dir/$f" ] && break; kill -0 $SWITCH_PID 2>/dev/null || break; sleep 0.1; done
        [ -S "$dir/$f" ] || { echo "run.sh: rocesw did not start:" >&2; cat "$dir/rocesw.log" >&2; return 1; }
    done
    if [ "$phase" = mark-all ]; then
        "$ROCECTL" set ecn --socket "$dir/ctl.sock" --profile roce --kmin 1B --kmax 1B --pmax 1
    fi
    PIDS=()
    for i in 0 1; do
        local peer=$((1 - i))
        qemu-system-x86_64 "${ACCEL_ARGS[@]}" -machine q35,memory-backend=mem -smp 1 -m $MEM \
            -object memory-backend-memfd,id=mem,size=$MEM,share=on \
            -kernel "$GUEST/vmlinuz" -initrd "$GUEST/initrd.img" \
            -append "console=ttyS0 quiet ipv6.disable=1 panic=-1 rocesw_role=${ROLE[$i]} rocesw_ip=${IP[$i]} rocesw_peer=${IP[$peer]} rocesw_peer_mac=${MAC[$peer]} rocesw_iters=${VM_ITERS:-500} rocesw_step_timeout=${VM_STEP_TIMEOUT:-150} rocesw_sizes=\"${VM_SIZES:-64 1024 4096 65536}\"" \
            -chardev socket,id=c0,path="$dir/vm$i.sock" \
            -netdev vhost-user,id=n0,chardev=c0 \
            -device virtio-net-pci,netdev=n0,mac=${MAC[$i]},vectors=0,romfile= \
            -display none -monitor none -serial file:"$dir/console-vm$i.log" -no-reboot \
            > "$dir/qemu-vm$i.log" 2>&1 &
        PIDS+=($!)
    done
    local deadline=$((SECONDS + ${VM_TIMEOUT:-1500})) timed_out=
    for pid in "${PIDS[@]}"; do
        while kill -0 "$pid" 2>/dev/null; do
            if ((SECONDS > deadline)); then timed_out=1; kill "$pid" 2>/dev/null || true; fi
            sleep 1
        done
        wait "$pid" || true
    done
    PIDS=()
    "$ROCECTL" show counters --socket "$dir/ctl.sock" > "$dir/counters.txt" 2>&1 || true
    kill "$SWITCH_PID"
    wait "$SWITCH_PID" || { echo "run.sh: rocesw exited with an error:" >&2; tail -20 "$dir/rocesw.log" >&2; return 1; }
    SWITCH_PID=
    echo
    echo "==== phase $phase ($ACCEL): guests and switch ran in $((SECONDS - t0)) s"
    [ -z "$timed_out" ] || echo "run.sh: phase $phase: the guests did not finish in ${VM_TIMEOUT:-1500} s" >&2
    python3 "$REPO/vm/check.py" --phase "$phase" "$dir" && [ -z "$timed_out" ]
}

rc=0
for p in "${PHASES[@]}"; do run_phase "$p" || rc=1; done
exit $rc

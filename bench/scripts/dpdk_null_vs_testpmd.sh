#!/bin/bash
# rocesw on two DPDK ports against dpdk-testpmd --forward-mode=io on the same vdevs, alternating
# rounds, at 64 B and 1 KiB (bench/README.md, "rocesw on DPDK ports"). As root, after
# `cargo build --release --features dpdk`. Prints one line per round and size.
#   bench/scripts/dpdk_null_vs_testpmd.sh                       # net_null's all-zero frames
#   FRAMES=roce ROUNDS=3 bench/scripts/dpdk_null_vs_testpmd.sh  # net_pcap replaying RoCEv2 frames
# FRAMES=null|roce and TX=drop|null (roce only): dpdk_frames.sh. BIN=/path/to/rocesw (default
# target/release/rocesw). BEFORE=/path/to/an/older/rocesw adds that binary to every round (a
# before/after comparison).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/target/release/rocesw}
ROUNDS=${ROUNDS:-3}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
. "$ROOT/bench/scripts/dpdk_frames.sh"
# The default config (full QoS pipeline) on two ports of FRAMES: dpdk_frames.sh.
for size in 64 1024; do
  frames_config "$size" "$DIR/$size"
done
for round in $(seq "$ROUNDS"); do
  for size in 64 1024; do
    "$BIN" run --no-control --config "$DIR/$size/switch.toml" --duration 5 --summary "$DIR/r.json" >/dev/null 2>&1
    r=$(rate "$DIR/r.json")
    before=""
    if [ -n "${BEFORE:-}" ]; then
      "$BEFORE" run --no-control --config "$DIR/$size/switch.toml" --duration 5 --summary "$DIR/b.json" >/dev/null 2>&1
      before="  before $(rate "$DIR/b.json") Mpps"
    fi
    mapfile -t vdevs < <(frames_vdevs "$DIR/$size/switch.toml")
    timeout -s INT 11 dpdk-testpmd --no-huge -m 512 --no-pci --no-shconf --no-telemetry \
      --file-prefix=tp$$ "${vdevs[@]}" -l 0,1 -- \
      --forward-mode=io --stats-period 2 --no-lsc-interrupt -a --nb-cores=1 \
      --total-num-mbufs=16384 >"$DIR/tp.log" 2>/dev/null || true
    t=$(python3 - "$DIR/tp.log" <<'PY'
import re, sys, statistics
v = [int(x) for x in re.findall(r'Rx-pps:\s+(\d+)', open(sys.argv[1]).read())]
s = [v[i] + v[i + 1] for i in range(0, len(v) - 1, 2)][1:]   # both ports, first report skipped
print(round(statistics.median(s) / 1e6, 2) if s else 'nan')
PY
)
    echo "round $round  ${size} B  $FRAMES  rocesw ${r} Mpps${before}  testpmd ${t} Mpps  load $(cut -d' ' -f1 /proc/loadavg)"
  done
done

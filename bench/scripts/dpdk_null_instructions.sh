#!/bin/bash
# Instructions per forwarded frame on the DPDK path, counted by callgrind (repeatable whatever
# else the machine is doing), for rocesw on two DPDK ports (the config of
# dpdk_null_vs_testpmd.sh) and for dpdk-testpmd --forward-mode=io on the same vdevs.
#   rocesw:  its worker's loop (ShardWorker::run, inclusive; before, run_pipeline less the mempool's teardown
#            at the end) over the frames it sent, both ports;
#   testpmd: its forwarding lcore's thread (--separate-threads) over the frames it received.
# Valgrind is slow: a run forwards a few hundred thousand frames. As root, after
# `cargo build --release --features dpdk`; needs valgrind. bench/README.md, "rocesw on DPDK ports".
#   SECS=10 bench/scripts/dpdk_null_instructions.sh               # net_null's all-zero frames
#   FRAMES=roce SECS=10 bench/scripts/dpdk_null_instructions.sh   # net_pcap replaying RoCEv2 frames
# FRAMES=null|roce and TX=drop|null (roce only): dpdk_frames.sh. BIN=/path/to/rocesw.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/target/release/rocesw}
SECS=${SECS:-10}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
. "$ROOT/bench/scripts/dpdk_frames.sh"
for size in 64 1024; do
  frames_config "$size" "$DIR/$size"
  valgrind --tool=callgrind --callgrind-out-file="$DIR/rocesw.cg" "$BIN" run --no-control \
    --config "$DIR/$size/switch.toml" --duration "$SECS" --summary "$DIR/r.json" >/dev/null 2>&1
  callgrind_annotate --inclusive=yes "$DIR/rocesw.cg" >"$DIR/rocesw.txt" 2>/dev/null
  r=$(python3 - "$DIR/rocesw.txt" "$DIR/r.json" <<'PY'
import json, re, sys
inc = {}
for line in open(sys.argv[1]):
    m = re.match(r'\s*([\d,]+) \(.*?\)\s+\S+?:(\S+)', line)
    if m:
        inc.setdefault(m.group(2), int(m.group(1).replace(',', '')))
d = json.load(open(sys.argv[2]))
sent = sum(p['tx_packets'] for p in d['switch']['ports'])
# The worker's loop: ShardWorker::run since the workers became shards, whose ports are freed
# after it returns; run_pipeline before, which freed the mempool at its end (not counted).
if 'dataplane::runtime::shard::ShardWorker::run' in inc:
    loop = inc['dataplane::runtime::shard::ShardWorker::run']
else:
    loop = inc['dataplane::runtime::worker::run_pipeline'] - inc.get('rte_mempool_free', 0)
print(f"{loop / sent:.0f} instructions a frame ({sent} frames)")
PY
)
  mapfile -t vdevs < <(frames_vdevs "$DIR/$size/switch.toml")
  timeout -s INT $((SECS * 3)) valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$DIR/tp.cg" dpdk-testpmd --no-huge -m 512 --no-pci --no-shconf \
    --no-telemetry --file-prefix=tpcg$$ "${vdevs[@]}" -l 0,1 -- --forward-mode=io --no-lsc-interrupt -a \
    --nb-cores=1 --total-num-mbufs=16384 \
    >"$DIR/tp.log" 2>&1 || true
  t=$(python3 - "$DIR" <<'PY'
import glob, re, sys
d = sys.argv[1]
log = open(f"{d}/tp.log").read()
stats = log.split('Accumulated forward statistics for all ports')[-1]
frames = int(re.search(r'RX-packets:\s+(\d+)', stats).group(1))
# The forwarding lcore: of the threads but the main one (-01, start-up), the busiest.
ir = max(int(re.search(r'^totals:\s+(\d+)', open(f).read(), re.M).group(1))
         for f in glob.glob(f"{d}/tp.cg-*") if not f.endswith('-01'))
print(f"{ir / frames:.0f} ({frames} frames)")
PY
)
  echo "${size} B $FRAMES: rocesw ${r}, testpmd ${t}"
done

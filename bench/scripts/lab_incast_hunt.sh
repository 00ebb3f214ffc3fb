#!/bin/bash
# Hunts the rare loss of the lab incast (bench/README.md, "Late rounds that fed on themselves"):
# repeats the README's 7->1 incast (8 hosts, 300 Mb/s each into 500 Mb/s ports, 3 s) RUNS
# times through `rocesw run`, idle and loaded (both cores kept busy by busy loops) alternating
# (MODE=alt, or idle / loaded), one line per run, and keeps everything of a run that lost
# frames in OUT/run<N>-<pid>/: the switch's summary (sum.json) and log, rocegen's report
# (gen.json), and `ip -s -j link` of every lab interface and /proc/net/softnet_stat before
# (*0) and after (*1) the run, to find where the frames went. As root, after
# `cargo build --release --bins`; BIN=dir picks the binaries; SLEEP=seconds starts the traffic
# that long after the switch instead of when it says every port is open.
#   sudo RUNS=300 OUT=/tmp/hunt bench/scripts/lab_incast_hunt.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/target/release}
RUNS=${RUNS:-100}
MODE=${MODE:-alt}
OUT=${OUT:-$ROOT/target/lab-hunt}
NAME=hu$$
NAME=${NAME:0:8}
STATE=$(mktemp -d)
BUSY=()
case "$MODE" in alt | idle | loaded) ;; *) echo "MODE must be alt, idle or loaded" >&2; exit 2 ;; esac
mkdir -p "$OUT"
cleanup() {
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null; done
  "$BIN/rocesw" lab down --name "$NAME" --state-dir "$STATE" >/dev/null 2>&1
  rm -rf "$STATE"
}
trap cleanup EXIT
"$BIN/rocesw" lab up --name "$NAME" --hosts 8 --speed 500M --state-dir "$STATE" \
  --config "$ROOT/configs/default.toml" >/dev/null || exit 1
CONFIG="$STATE/$NAME.toml"
counters() { # $1: 0 before the run, 1 after
  ip -s -j link >"$STATE/link$1.json"
  cat /proc/net/softnet_stat >"$STATE/softnet$1"
  for ns in $(ip netns list | awk '{print $1}' | grep "^$NAME"); do
    ip netns exec "$ns" ip -s -j link >"$STATE/ns$1-$ns.json"
  done
}
lossy=0
for i in $(seq "$RUNS"); do
  load=idle
  if [ "$MODE" = loaded ] || { [ "$MODE" = alt ] && [ $((i % 2)) = 0 ]; }; then load=loaded; fi
  if [ "$load" = loaded ]; then
    for _ in $(seq "$(nproc)"); do (while :; do :; done) & BUSY+=($!); done
  fi
  counters 0
  "$BIN/rocesw" run --no-control --config "$CONFIG" --summary "$STATE/sum.json" >"$STATE/switch.log" 2>&1 &
  SW=$!
  # Traffic starts once every port is open (`rocesw: switching ...`). SLEEP=0.5 starts it after
  # a fixed half second instead, as these scripts did before (bench/README.md: on a machine
  # slow to start the switch, the last ports' first frames were lost before their sockets
  # existed).
  if [ -n "${SLEEP:-}" ]; then
    sleep "$SLEEP"
  else
    for _ in $(seq 300); do
      grep -q '^rocesw: switching' "$STATE/switch.log" && break
      kill -0 "$SW" 2>/dev/null || { cat "$STATE/switch.log" >&2; exit 1; }
      sleep 0.1
    done
  fi
  "$BIN/rocegen" coordinate --pattern incast --lab "$STATE/$NAME.json" --rate 300M \
    --link-speed 500M --duration 3 --json >"$STATE/gen.json" 2>"$STATE/gen.err" || true
  kill -INT "$SW"; wait "$SW"
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null; done
  BUSY=()
  counters 1
  lost=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["lost"])' \
    "$STATE/gen.json" 2>/dev/null || echo "no report")
  echo "$(date +%T) run $i $load lost $lost"
  if [ "$lost" != 0 ]; then
    lossy=$((lossy + 1))
    mkdir -p "$OUT/run$i-$$"
    cp "$STATE"/*.json "$STATE"/softnet* "$STATE"/*.log "$STATE"/gen.err "$OUT/run$i-$$/"
  fi
done
if [ "$lossy" -gt 0 ]; then
  echo "$lossy of $RUNS runs lost frames (kept in $OUT)"
else
  echo "none of $RUNS runs lost frames"
fi

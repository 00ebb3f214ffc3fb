#!/bin/bash
# The README's lab incast (HOSTS-1 senders -> 1 receiver, lossless DSCP 26, 300 Mb/s each into
# 500 Mb/s ports, 3 s) through `rocesw run`, with and without both cores kept busy by two
# other processes (busy loops), ROUNDS times each. As root, after `cargo build --release
# --bins`; BIN=dir picks the binaries (to compare two builds). One line per run: lossless
# frames lost at the receivers (of which lost at the receiving host's socket), switch drops,
# goodput, p99 latency, PFC frames received by the senders, frames sent but neither received
# nor seen lost when the receivers stopped, and how far the emulated links fell behind real time. The lab's own config is used
# (interfaces are emulated links, headroom "auto"); PEER=wire runs the lab's old defaults
# instead (wire peers, 512 KiB of headroom per lossless PG).
# (bench/README.md, "Lossless in real time".)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/target/release}
ROUNDS=${ROUNDS:-3}
PEER=${PEER:-}
NAME=${NAME:-ld$$}
NAME=${NAME:0:8}
STATE=$(mktemp -d)
BUSY=()
cleanup() {
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
  "$BIN/rocesw" lab down --name "$NAME" --state-dir "$STATE" >/dev/null 2>&1 || true
  rm -rf "$STATE"
}
trap cleanup EXIT
"$BIN/rocesw" lab up --name "$NAME" --hosts "${HOSTS:-4}" --speed 500M --state-dir "$STATE" \
  --config "$ROOT/configs/default.toml" >/dev/null
CONFIG="$STATE/$NAME.toml"
if [ "$PEER" = wire ]; then
  python3 - "$CONFIG" "$STATE/wire.toml" <<'PY'
import sys, tomllib
src = open(sys.argv[1]).read()
out = src.replace('headroom = "auto"', 'headroom = "512KiB"')
out = out.replace('[[port]]\n', '[[port]]\npeer = "wire"\n')
open(sys.argv[2], 'w').write(out)
tomllib.loads(out)
PY
  CONFIG="$STATE/wire.toml"
fi
for round in $(seq "$ROUNDS"); do
  for load in idle loaded; do
    if [ "$load" = loaded ]; then
      for _ in $(seq "$(nproc)"); do (while :; do :; done) & BUSY+=($!); done
    fi
    "$BIN/rocesw" run --no-control --config "$CONFIG" --summary "$STATE/sum.json" \
      >/dev/null 2>"$STATE/switch.err" &
    SW=$!
    # Traffic starts once every port is open ("rocesw: switching ..."): frames sent before a
    # port's socket exists are lost where nothing counts them.
    for _ in $(seq 300); do
      grep -q '^rocesw: switching' "$STATE/switch.err" && break
      kill -0 "$SW" 2>/dev/null || { cat "$STATE/switch.err" >&2; exit 1; }
      sleep 0.1
    done
    "$BIN/rocegen" coordinate --pattern incast --lab "$STATE/$NAME.json" --rate 300M \
      --link-speed 500M --duration 3 --json >"$STATE/gen.json" 2>/dev/null || true
    kill -INT "$SW"; wait "$SW" || true
    for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
    BUSY=()
    python3 - "$STATE/gen.json" "$STATE/sum.json" "$round" "$load" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["totals"]
s = json.load(open(sys.argv[2]))
drops = sum(s["switch"]["totals"]["drops"].values())
print(f"round {sys.argv[3]} {sys.argv[4]:6}  lost {g['lost']:6} (socket {g.get('rx_socket_drops', '-')})  switch drops {drops:6}  "
      f"goodput {g['throughput_bps']/1e6:6.1f} Mb/s  p99 {g['latency']['p99_ns']/1e6:8.2f} ms  "
      f"PFC at senders {g['pfc_frames']}  in flight at the end {g.get('in_flight_at_end', '-')}  "
      f"links behind {s.get('wires_behind_ns', 0)/1e6:.0f} ms")
PY
  done
done

#!/bin/bash
# The README's lab incast (HOSTS-1 senders -> 1 receiver, lossless DSCP 26, 300 Mb/s each into
# 500 Mb/s ports, 3 s) through `rocesw run`, with and without both cores kept busy by two
# other processes (busy loops), ROUNDS times each. As root, after `cargo build --release
# --bins`; BIN=dir picks the binaries (to compare two builds). One line per run: lossless
# frames lost at the receivers (of which lost at the receiving host's socket), switch drops,
# goodput, p99 latency, PFC frames received by the senders, frames sent but neither received
# nor seen lost when the receivers stopped (they wait for the drain, at most rocegen's --drain,
# 2 s: how long they waited), and how far the emulated links fell behind real time. The lab's
# own config is used
# (interfaces are emulated links, headroom "auto"); PEER=wire runs the lab's old defaults
# instead (wire peers, 512 KiB of headroom per lossless PG).
# KEEP=dir keeps everything of a run that lost frames in dir/round<N>-<load>/: the switch's
# summary and log, rocegen's report, and `ip -s -j link` of every lab interface (both
# namespaces) and /proc/net/softnet_stat before (*0) and after (*1) the run, to find where the
# frames went. Traffic starts when the switch says every port is open; SLEEP=seconds starts it
# that long after the switch instead (as this script did before, which lost the first frames of
# the ports opened last: bench/README.md, "Late rounds that fed on themselves").
#   sudo ROUNDS=150 HOSTS=8 KEEP=/tmp/hunt bench/scripts/lab_incast_load.sh   # 300 runs, 7->1
# (bench/README.md, "Lossless in real time".)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/target/release}
ROUNDS=${ROUNDS:-3}
PEER=${PEER:-}
KEEP=${KEEP:-}
SLEEP=${SLEEP:-}
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
counters() { # $1: 0 before a run, 1 after
  ip -s -j link >"$STATE/link$1.json"
  cat /proc/net/softnet_stat >"$STATE/softnet$1"
  for ns in $(ip netns list | awk '{print $1}' | grep "^$NAME-"); do
    ip netns exec "$ns" ip -s -j link >"$STATE/ns$1-$ns.json"
  done
}
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
    [ -z "$KEEP" ] || counters 0
    "$BIN/rocesw" run --no-control --config "$CONFIG" --summary "$STATE/sum.json" \
      >"$STATE/switch.log" 2>&1 &
    SW=$!
    if [ -n "$SLEEP" ]; then
      sleep "$SLEEP"
    else
      # Traffic starts once every port is open ("rocesw: switching ..."): frames sent before a
      # port's socket exists are lost where nothing counts them.
      for _ in $(seq 300); do
        grep -q '^rocesw: switching' "$STATE/switch.log" && break
        kill -0 "$SW" 2>/dev/null || { cat "$STATE/switch.log" >&2; exit 1; }
        sleep 0.1
      done
    fi
    "$BIN/rocegen" coordinate --pattern incast --lab "$STATE/$NAME.json" --rate 300M \
      --link-speed 500M --duration 3 --json >"$STATE/gen.json" 2>"$STATE/gen.err" || true
    kill -INT "$SW"; wait "$SW" || true
    for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
    BUSY=()
    if [ -n "$KEEP" ]; then
      counters 1
      if ! python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["totals"]["lost"] != 0)' \
        "$STATE/gen.json" 2>/dev/null; then
        mkdir -p "$KEEP/round$round-$load"
        cp "$STATE"/*.json "$STATE"/softnet* "$STATE"/*.log "$STATE"/gen.err "$KEEP/round$round-$load/"
        echo "kept in $KEEP/round$round-$load"
      fi
    fi
    python3 - "$STATE/gen.json" "$STATE/sum.json" "$round" "$load" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g = r["totals"]
d = r.get("drain") or {}
s = json.load(open(sys.argv[2]))
drops = sum(s["switch"]["totals"]["drops"].values())
print(f"round {sys.argv[3]} {sys.argv[4]:6}  lost {g['lost']:6} (socket {g.get('rx_socket_drops', '-')})  switch drops {drops:6}  "
      f"goodput {g['throughput_bps']/1e6:6.1f} Mb/s  p99 {g['latency']['p99_ns']/1e6:8.2f} ms  "
      f"PFC at senders {g['pfc_frames']}  in flight at the end {g.get('in_flight_at_end', '-')} "
      f"(receivers waited {d.get('waited_s', 0):.2f} s{'' if d.get('drained', True) else ', at the bound'})  "
      f"links behind {s.get('wires_behind_ns', 0)/1e6:.0f} ms")
PY
  done
done

#!/bin/bash
# The many-cores benchmark (bench/README.md, "Many cores"): four net_pcap ports replaying 1 KiB
# RoCEv2 frames from memory, pairs that stay on one worker ("local") or all cross ("cross"), on
# 1 worker and on 2 workers pinned to the two cores; alternating rounds; frames sent per second
# of uptime. As root, after `cargo build --release --features dpdk`.
#   ROUNDS=5 SECS=5 bench/scripts/shard_scaling.sh
# SIZE=64 for 64-byte frames; TX=drop for ports that free what they send unread (no tx_pcap).
# BEFORE=/path/to/an/older/rocesw adds that binary's 1- and 2-worker runs to every round.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/target/release/rocesw}
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-5}
SIZE=${SIZE:-1024}
TX=${TX:-null}   # null: tx into /dev/null through libpcap; drop: the driver frees sent frames
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
. "$ROOT/bench/scripts/dpdk_frames.sh"   # rate
for pairs in local cross; do
  for w in 1 2; do
    mkdir -p "$DIR/$pairs$w"
    python3 "$ROOT/bench/scripts/shard_config.py" "$ROOT/configs/default.toml" "$DIR/$pairs$w" "$pairs" "$w" "$SIZE" "$TX"
  done
done
for round in $(seq "$ROUNDS"); do
  for pairs in local cross; do
    line="round $round  $pairs"
    for w in 1 2; do
      "$BIN" run --no-control --config "$DIR/$pairs$w/switch.toml" --duration "$SECS" --summary "$DIR/r.json" >/dev/null 2>&1
      line="$line  ${w}w $(rate "$DIR/r.json") Mpps"
      if [ -n "${BEFORE:-}" ]; then
        "$BEFORE" run --no-control --config "$DIR/$pairs$w/switch.toml" --duration "$SECS" --summary "$DIR/b.json" >/dev/null 2>&1
        line="$line (before $(rate "$DIR/b.json"))"
      fi
    done
    echo "$line  load $(cut -d' ' -f1 /proc/loadavg)"
  done
done

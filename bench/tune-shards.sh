#!/bin/bash
# Wall time of a tune sweep in N shards on this machine: per round the N shards side by side
# (each --threads 1, as an array task with one CPU would run), then the merge; against the
# unsharded run (--threads = the cores) in the same run. The merged files are checked equal to
# the unsharded run's. bench/README.md, "Tuning in shards", has the figures.
#
#   bench/tune-shards.sh ROCESW "1 2 4" -- --topology examples/tune/topology.toml --quick
set -euo pipefail
rocesw=$(realpath "$1")
counts=$2
[ "$3" = -- ] || { echo "usage: $0 ROCESW \"N...\" -- TUNE_ARGS..." >&2; exit 2; }
shift 3
t=$(mktemp -d /tmp/rocesw-shards.XXXXXX)
trap 'rm -rf "$t"' EXIT
ms() { echo $(( $(date +%s%N) / 1000000 )); }
mkdir -p "$t/local"
s=$(ms)
(cd "$t/local" && "$rocesw" tune "$@" --quiet --output-dir out)
echo "unsharded (--threads $(nproc)): $(( $(ms) - s )) ms"
for n in $counts; do
    d=$t/n$n
    mkdir -p "$d"
    s=$(ms)
    rounds=0
    while :; do
        pids=()
        for ((i = 0; i < n; i++)); do
            (cd "$d" && "$rocesw" tune "$@" --threads 1 --quiet --shard "$i/$n" --output-dir parts 2>"$d/log.$i") &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p"; done
        if grep -q "the search is complete" "$d/log.0"; then break; fi
        rounds=$((rounds + 1))
    done
    (cd "$d" && "$rocesw" tune merge parts --quiet --output-dir out)
    echo "$n shards: $(( $(ms) - s )) ms ($rounds rounds, and one more that found the search complete)"
    for f in tune.json tune.svg tuned.toml; do cmp "$t/local/out/$f" "$d/out/$f"; done
done
echo "merged files equal the unsharded run's"

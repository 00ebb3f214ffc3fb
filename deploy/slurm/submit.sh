#!/bin/bash
# Submits a sharded rocesw sweep to Slurm: the shards as array jobs, the merge as a job that
# depends on them (afterok). Prints the merge's job id on stdout (the others on stderr).
#
#   deploy/slurm/submit.sh tune N PARTS_DIR OUT_DIR -- --topology examples/tune/topology.toml --quick
#   deploy/slurm/submit.sh conform N PARTS_DIR OUT_DIR -- --config fleet/ [--junit OUT_DIR/junit.xml]
#
# tune: one array of N tasks per round of the search (ROUNDS, default 4 with --quick and 14
# otherwise: 2 plus the climbing rounds; a round after the search is complete does nothing),
# each depending on the one before; conform: one array. A conform merge's own options
# (--junit FILE, --json) go after the ARGS as MERGE_ARGS="…" (default --junit OUT_DIR/junit.xml).
# Extra sbatch options (a partition, an account): SBATCH_OPTS="…". ROCESW (default rocesw on
# PATH) is passed to the jobs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 5 ] || [ "$5" != -- ]; then
    echo "usage: $0 tune|conform N PARTS_DIR OUT_DIR -- ARGS…" >&2
    exit 2
fi
kind=$1
n=$2
parts=$3
out=$4
shift 5
case $n in '' | *[!0-9]* | 0)
    echo "$0: N must be a positive number of shards" >&2
    exit 2
    ;;
esac
mkdir -p "$parts"
read -r -a opts <<<"${SBATCH_OPTS:-}"
export ROCESW=${ROCESW:-rocesw}
case $kind in
tune)
    rounds=${ROUNDS:-14}
    for a in "$@"; do [ "$a" = --quick ] && rounds=${ROUNDS:-4}; done
    dep=()
    for ((r = 1; r <= rounds; r++)); do
        id=$(sbatch --parsable --export=ALL "${opts[@]}" "${dep[@]}" --array="0-$((n - 1))" \
            "$here/shard.sbatch" tune "$parts" "$@")
        id=${id%%;*}
        echo "round $r: array job $id" >&2
        dep=(--dependency="afterok:$id")
    done
    merge_args=()
    ;;
conform)
    id=$(sbatch --parsable --export=ALL "${opts[@]}" --array="0-$((n - 1))" "$here/shard.sbatch" conform "$parts" "$@")
    id=${id%%;*}
    echo "shards: array job $id" >&2
    dep=(--dependency="afterok:$id")
    read -r -a merge_args <<<"${MERGE_ARGS:---junit $out/junit.xml}"
    ;;
*)
    echo "$0: KIND is tune or conform, not $kind" >&2
    exit 2
    ;;
esac
mid=$(sbatch --parsable --export=ALL "${opts[@]}" "${dep[@]}" "$here/merge.sbatch" "$kind" "$parts" "$out" "${merge_args[@]}")
mid=${mid%%;*}
echo "merge: job $mid (after the shards: afterok)" >&2
echo "$mid"

#!/usr/bin/env bash
# Instructions per packet through the whole pipeline, counted by callgrind: two runs of the
# same workload with different burst counts; the difference divided by the extra packets
# cancels set-up. Repeatable whatever else the machine is doing.
#   bench/instructions.sh            (needs valgrind: apt-get install valgrind; builds into
#                                     $CARGO_TARGET_DIR when set, as cargo does)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p rocesw-bench --bin pipeline_workload
bin=${CARGO_TARGET_DIR:-target}/release/pipeline_workload
ir() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for len in 64 1024; do
    a=$(ir "$len" 2000)
    b=$(ir "$len" 6000)
    echo "frame ${len} B: $(( (b - a) / (4000 * 32) )) instructions per packet"
done

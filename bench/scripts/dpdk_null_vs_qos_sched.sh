#!/bin/bash
# rocesw (configs/default.toml: the full QoS pipeline) on two net_null DPDK ports against DPDK's
# own QoS example, qos_sched (rte_sched: classification into pipes, hierarchical token-bucket
# scheduler, tail drop), on the same two vdevs, alternating rounds, at 64 B and 1 KiB
# (bench/README.md, "rocesw on DPDK ports, against qos_sched").
#
#   cargo build --release -p rocesw-dataplane --features dpdk --bin rocesw
#   sudo bench/scripts/dpdk_null_vs_qos_sched.sh            # ROUNDS=3, DURATION=5 by default
#   sudo ROUNDS=5 FWDS="rocesw qos_sched" bench/scripts/dpdk_null_vs_qos_sched.sh
#
# Debian ships no qos_sched binary, so the first run fetches the source package of the
# installed DPDK with apt (`apt-get source --download-only`, through a private apt state in the
# cache directory built from the system's own `deb` entries as `deb-src`: the machine's apt
# configuration is not changed), unpacks examples/qos_sched from its tarball and builds it
# against the system libdpdk with its own Makefile (pkg-config). Nothing of DPDK's is kept in
# this repository. Cache: $CACHE (default ~/.cache/rocesw-bench), one directory per DPDK
# version; delete it to start from scratch. Installs with apt-get what the build needs.
#
# Per round and size (FWDS): rocesw for DURATION s; qos_sched with the unshaped profile (every
# rate equal to the port rate, see below) for DURATION one-second reports after its first, its
# RX thread on RX_CPU and its worker on WT_CPU; qos_sched_1cpu, the same with both threads on
# WT_CPU (rocesw's CPU budget); qos_sched_shipped, with the profile.cfg qos_sched ships. Prints
# one line per round and size (rates, what was received and dropped, CPUs busy, CPU time a
# frame), then medians and ratios.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/target/release/rocesw}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}          # seconds each forwarder runs (qos_sched: this many reports)
SIZES=${SIZES:-"64 1024"}
FWDS=${FWDS:-"rocesw qos_sched qos_sched_1cpu qos_sched_shipped"}   # in this order, each round and size
RX_CPU=${RX_CPU:-0}              # qos_sched's RX lcore (its main lcore too, which only sleeps)
WT_CPU=${WT_CPU:-1}              # qos_sched's worker (scheduler + TX) lcore; rocesw's one worker
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rocesw-bench}
KEEP=${KEEP:-}                   # copy the logs and summaries here

log() { echo "[qos_sched $(date +%T)] $*" >&2; }
[ "$(id -u)" = 0 ] || { echo "$0: needs root (DPDK's runtime directory, apt-get)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "$0: no $BIN; cargo build --release -p rocesw-dataplane --features dpdk --bin rocesw" >&2; exit 2; }

DIR=$(mktemp -d /tmp/rocesw-qos-sched.XXXXXX)
PREFIXES=()
CHILD=                           # the forwarder running now (rocesw, or timeout around qos_sched)
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then kill -TERM "$CHILD"; wait "$CHILD" || true; fi
  # qos_sched is stopped by a signal (it has no handler: rte_eal_cleanup never runs), so its
  # runtime directory stays behind: remove the ones this script made, and only those.
  for p in "${PREFIXES[@]}"; do rm -rf "/var/run/dpdk/$p"; done
  if [ -n "$KEEP" ]; then { mkdir -p "$KEEP" && cp -r "$DIR"/. "$KEEP"/; } || true; fi
  rm -rf "$DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- qos_sched, fetched and built
need=()
command -v pkg-config >/dev/null || need+=(pkgconf)
command -v make >/dev/null || need+=(make)
command -v cc >/dev/null || need+=(gcc)
command -v xz >/dev/null || need+=(xz-utils)
dpkg-query -W -f='${Status}' libdpdk-dev 2>/dev/null | grep -q 'ok installed' || need+=(libdpdk-dev)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  timeout 600 apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
pkg-config --exists libdpdk || { echo "$0: pkg-config finds no libdpdk" >&2; exit 2; }
SRCPKG=$(dpkg-query -W -f='${source:Package}' libdpdk-dev)   # dpdk
SRCVER=$(dpkg-query -W -f='${source:Version}' libdpdk-dev)   # e.g. 22.11.11-0+deb12u1
C=$CACHE/$SRCPKG-$SRCVER
QS=$C/qos_sched/build/qos_sched
if [ ! -x "$QS" ]; then
  log "fetching the source of $SRCPKG $SRCVER (the installed DPDK) into $C"
  rm -rf "$C"
  mkdir -p "$C/apt/lists/partial" "$C/apt/cache/archives/partial" "$C/apt/sources.list.d" "$C/dl"
  # The archives apt already uses, as source archives: one-line `deb` entries and deb822
  # `Types: deb` stanzas (their Signed-By kept), from the files apt itself reads.
  : > "$C/apt/sources.list"
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && sed -n 's/^[[:space:]]*deb\([[:space:]]\)/deb-src\1/p' "$f" >> "$C/apt/sources.list"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" > "$C/apt/sources.list.d/$(basename "$f")"
  done
  apt_priv=(-o "Dir::Etc::SourceList=$C/apt/sources.list" -o "Dir::Etc::SourceParts=$C/apt/sources.list.d"
            -o "Dir::State::Lists=$C/apt/lists" -o "Dir::Cache=$C/apt/cache" -o "APT::Sandbox::User=root")
  timeout 600 apt-get "${apt_priv[@]}" update -qq
  # Downloads the .dsc, the upstream tarball and Debian's changes, checked against the
  # archive's signed index.
  (cd "$C/dl" && timeout 900 apt-get "${apt_priv[@]}" source --download-only -qq "$SRCPKG=$SRCVER")
  orig=("$C"/dl/"$SRCPKG"_*.orig.tar.*)
  [ -f "${orig[0]}" ] || { echo "$0: apt-get source fetched no upstream tarball of $SRCPKG $SRCVER" >&2; exit 1; }
  # Debian's patches of this version touch the EAL and tests, not the example; say so if
  # that ever changes rather than build a different program silently.
  deb=("$C"/dl/*.debian.tar.*)
  if [ -f "${deb[0]}" ] && tar -xOf "${deb[0]}" --wildcards 'debian/patches/*' 2>/dev/null \
       | grep '^+++ .*examples/qos_sched/' >/dev/null; then
    log "warning: Debian patches examples/qos_sched in $SRCVER; building the upstream example unpatched"
  fi
  mkdir "$C/src"
  tar -xf "${orig[0]}" -C "$C/src" --wildcards '*/examples/qos_sched/*'
  mv "$C"/src/*/examples/qos_sched "$C/qos_sched"
  rm -rf "$C/src" "$C/apt"
  log "building qos_sched against the system libdpdk $(pkg-config --modversion libdpdk)"
  timeout 600 nice -n 10 make -s -C "$C/qos_sched" >&2
  [ -x "$QS" ] || { echo "$0: building qos_sched failed" >&2; exit 1; }
fi

# Profiles. `shipped` is the example's profile.cfg: port rate = the link speed (net_null
# reports 10 Gb/s), 4096 pipes of 1/4096 of it (305175 B/s) each. net_null's frames are all
# zeros, so every one is classified into subport 0, pipe 0, traffic class 0, queue 0: that
# profile shapes all the traffic to one pipe's 2.4 Mb/s and drops the rest. `unshaped` gives the
# pipes the port rate too (every rate in it is then the port rate, 1250000000 B/s): rte_sched
# counts credits in port time, which advances by the bytes it sends, so no shaper then limits
# anything and the rate is what the CPU allows (bench/README.md has the reasoning).
PR=$(awk '/^\[subport profile 0\]/{s=1} s && /^tb rate/{print $4; exit}' "$C/qos_sched/profile.cfg")
sed "s/= *305175\b/= $PR/" "$C/qos_sched/profile.cfg" > "$DIR/unshaped.cfg"
if grep -q 305175 "$DIR/unshaped.cfg" || [ "$PR" != 1250000000 ]; then
  echo "$0: the shipped profile changed (port rate $PR); check the unshaped profile" >&2; exit 1
fi
cp "$C/qos_sched/profile.cfg" "$DIR/shipped.cfg"

# rocesw's config: the default profile on two net_null ports, 400G, learning off, worker on CPU 1.
for size in $SIZES; do
  python3 "$ROOT/bench/scripts/dpdk_null_config.py" "$ROOT/configs/default.toml" "$DIR/bench$size.toml" "$size"
  sed -i "s/^cores = \[1\]$/cores = [$WT_CPU]/" "$DIR/bench$size.toml"
done

# CPU time of every thread of a process, "tid comm ns" (schedstat: time on a CPU, in ns).
cpu_sample() { local t; for t in /proc/"$1"/task/*; do echo "${t##*/} $(cat "$t/comm") $(cut -d' ' -f1 "$t/schedstat")"; done 2>/dev/null; }
# CPUs a process kept busy between two samples, "total worker" (worker: the thread named $4).
cpu_busy() { # sample1 sample2 seconds worker-name
  python3 - "$@" <<'PY'
import sys
a, b, secs, name = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
read = lambda f: {l.split()[0]: (l.split()[1], int(l.split()[2])) for l in open(f) if len(l.split()) == 3}
s1, s2 = read(a), read(b)
d = {tid: (c, ns - s1[tid][1]) for tid, (c, ns) in s2.items() if tid in s1}
total = sum(ns for _, ns in d.values()) / 1e9 / secs
worker = max((ns for c, ns in d.values() if c == name), default=0) / 1e9 / secs
print(f"{total:.2f} {worker:.2f}")
PY
}
# Samples the CPU time of process $1 from $2 s after now for $3 s: prints "total worker".
cpu_window() { # pid delay secs worker-name
  sleep "$2"; cpu_sample "$1" > "$DIR/cpu1"; local t0 t1; t0=$(date +%s.%N)
  sleep "$3"; cpu_sample "$1" > "$DIR/cpu2"; t1=$(date +%s.%N)
  cpu_busy "$DIR/cpu1" "$DIR/cpu2" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}')" "$4"
}

# One rocesw run, its one worker (the main thread, named rocesw) pinned to WT_CPU:
# "tx_pps rx_pps dropped_pps cpus worker_cpus" (frames over its uptime, both ports; CPUs busy
# over the middle of the run).
run_rocesw() { # size tag
  "$BIN" run --no-control --config "$DIR/bench$1.toml" --duration "$DURATION" --summary "$DIR/$2.json" \
    >"$DIR/$2.log" 2>&1 &
  local pid=$! cpu
  CHILD=$pid
  cpu=$(cpu_window "$pid" 1 "$(awk -v d="$DURATION" 'BEGIN{print d - 1.5}')" rocesw)
  wait "$pid"
  python3 - "$DIR/$2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ports, t = d['switch']['ports'], d['uptime_ns'] / 1e9
tx = sum(p['tx_packets'] for p in ports)
rx = sum(p['rx_packets'] for p in ports)
drops = sum(sum(p['drops'].values()) for p in ports)
print(f"{tx / t:.0f} {rx / t:.0f} {drops / t:.0f}", end=" ")
PY
  echo "$cpu"
}

# One qos_sched run: two packet flow configurations (port 0 -> 1 and 1 -> 0), RX lcore 0,
# worker+TX lcore 1 (thread rte-worker-1), main lcore 2 (prints the stats once a second, sleeps
# otherwise) on the CPUs `lcores` maps them to. Prints medians over its once-a-second reports
# (the first skipped), both flows summed, and the CPUs busy over the middle of the run:
# "tx_pps rx_pps ring_drop_pps sched_drop_pps cpus worker_cpus".
N=0
run_qos_sched() { # size profile tag lcores
  N=$((N + 1))
  local prefix="rocesw-qs-$$-$N" pid cpu
  PREFIXES+=("$prefix")
  # stdbuf: qos_sched prints with stdio and only stops when killed (SIGTERM: a background job
  # of a script ignores SIGINT), so unbuffered lines are all it leaves. Lcore ids: the
  # example wants its RX and worker lcores below the number of CPUs and its main lcore
  # (--mnc) apart from both, hence 0, 1 and 2 mapped onto the two CPUs.
  timeout -s TERM $((DURATION + 20)) stdbuf -oL "$QS" --no-huge -m 1024 --no-pci --no-shconf --no-telemetry \
    --file-prefix="$prefix" --lcores "$4" --main-lcore 2 \
    --vdev "net_null0,size=$1" --vdev "net_null1,size=$1" -- \
    --mnc 2 --pfc "0,1,0,1" --pfc "1,0,0,1" --msz 32768 --cfg "$DIR/$2.cfg" >"$DIR/$3.log" 2>&1 &
  pid=$!
  CHILD=$pid
  for _ in $(seq 100); do grep -q '^TX port' "$DIR/$3.log" && break; sleep 0.1; done   # first report
  cpu=$(cpu_window "$(pgrep -P "$pid" | head -1)" 0.5 "$(awk -v d="$DURATION" 'BEGIN{print d - 1.5}')" rte-worker-1)
  # stop it once DURATION reports have followed the first (timeout passes the TERM on)
  while kill -0 "$pid" 2>/dev/null && [ "$(grep -c '^TX port' "$DIR/$3.log")" -lt $((2 * DURATION + 2)) ]; do
    sleep 0.1
  done
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" || true
  rm -rf "/var/run/dpdk/$prefix"
  python3 - "$DIR/$3.log" "$DURATION" <<'PY'
import re, statistics, sys
log, n = open(sys.argv[1]).read(), int(sys.argv[2])
col = lambda pat: [int(x) for x in re.findall(pat, log)]
tx, rx = col(r'TX port \d+: tx: (\d+)'), col(r'RX port \d+: rx: (\d+)')
ring, sched = col(r'RX\s+\|\s+\d+\s+\|\s+(\d+)'), col(r'QOS\+TX\s+\|\s+\d+\s+\|\s+(\d+)')
def med(v):   # one report = one line per flow, two flows; skip the first report
    s = [v[i] + v[i + 1] for i in range(0, len(v) - 1, 2)][1:n + 1]
    return f"{statistics.median(s):.0f}" if s else "nan"
print(med(tx), med(rx), med(ring), med(sched), end=" ")
PY
  echo "$cpu"
}

M() { awk -v x="$1" 'BEGIN{printf "%.2f", x / 1e6}'; }
NS() { awk -v c="$1" -v p="$2" 'BEGIN{printf "%.0f", (p > 0 ? c * 1e9 / p : 0)}'; }   # CPU ns a frame
echo -e "round\tsize\tforwarder\ttx_pps\trx_pps\tdrop_pps\tsched_drop_pps\tcpus\tworker_cpus" > "$DIR/results.tsv"
log "machine: $(nproc) CPUs; $(uptime); qos_sched from $SRCPKG $SRCVER; forwarders: $FWDS"
cd "$DIR"   # nothing the loop runs writes elsewhere
# The run_* functions run in this shell (not in a subshell), so that CHILD and PREFIXES reach
# the cleanup when the script is interrupted.
for round in $(seq "$ROUNDS"); do
  for size in $SIZES; do
    line="round $round  ${size} B"
    for f in $FWDS; do
      case $f in
        rocesw)
          run_rocesw "$size" "$f-$size-$round" > "$DIR/res"; read -r t r d c w < "$DIR/res"; s=
          line+="  rocesw $(M "$t") Mpps (rx $(M "$r"), dropped $(M "$d"); $c CPUs busy, the worker $w: $(NS "$w" "$t") ns a frame)" ;;
        qos_sched|qos_sched_1cpu|qos_sched_shipped)
          prof=unshaped; [ "$f" = qos_sched_shipped ] && prof=shipped
          lc="0@$RX_CPU,1@$WT_CPU,2@$RX_CPU"; [ "$f" = qos_sched_1cpu ] && lc="0@$WT_CPU,1@$WT_CPU,2@$RX_CPU"
          run_qos_sched "$size" "$prof" "$f-$size-$round" "$lc" > "$DIR/res"; read -r t r d s c w < "$DIR/res"
          line+="  $f $(M "$t") Mpps (rx $(M "$r"), ring drops $(M "$d"), scheduler drops $(M "$s");"
          line+=" $c CPUs busy, the worker $w of them: $(NS "$w" "$t") ns a frame)" ;;
        *) echo "$0: unknown forwarder $f (FWDS: rocesw qos_sched qos_sched_1cpu qos_sched_shipped)" >&2; exit 2 ;;
      esac
      echo -e "$round\t$size\t$f\t$t\t$r\t$d\t$s\t$c\t$w" >> "$DIR/results.tsv"
    done
    echo "$line  load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
log "done; $(uptime)"

python3 - "$DIR/results.tsv" <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
fl = lambda x: float(x) if x not in ("", "nan") else float("nan")
runs = {(r["forwarder"], r["size"], r["round"]): {k: fl(v) for k, v in r.items() if k.endswith(("pps", "cpus"))} for r in rows}
metrics = {  # frames a second; and a second of the worker thread's CPU; and of all its threads'
    "rate": lambda m: m["tx_pps"],
    "per_worker_cpu": lambda m: m["tx_pps"] / m["worker_cpus"] if m["worker_cpus"] > 0 else float("nan"),
    "per_cpu": lambda m: m["tx_pps"] / m["cpus"] if m["cpus"] > 0 else float("nan"),
}
def med(v):
    v = [x for x in v if x == x]
    return st.median(v) if v else float("nan")
print(f"\nmedians over {len(set(r['round'] for r in rows))} rounds; Mpps = frames transmitted a second, both ports;"
      " per worker CPU-s / per CPU-s = frames a second of CPU time of the worker thread / of all threads;"
      " ÷ = median over rounds of rocesw's figure / the forwarder's in the same round")
print("| frame | forwarder | Mpps | rocesw ÷ | CPUs busy (worker) | Mpps per worker CPU-s | rocesw ÷ | Mpps per CPU-s | rocesw ÷ |")
print("|---|---|---|---|---|---|---|---|---|")
for s in dict.fromkeys(r["size"] for r in rows):
    for f in dict.fromkeys(r["forwarder"] for r in rows):
        rounds = [k[2] for k in runs if k[:2] == (f, s)]
        cells = [f"{s} B", f]
        for name, fn in metrics.items():
            m = med(fn(runs[(f, s, r)]) for r in rounds) / 1e6
            ratio = med(fn(runs[("rocesw", s, r)]) / fn(runs[(f, s, r)]) for r in rounds if ("rocesw", s, r) in runs)
            cells += [f"{m:.4f}" if m < 0.1 else f"{m:.2f}", "-" if f == "rocesw" or ratio != ratio else f"{ratio:.2f}"]
            if name == "rate":
                cells.append(f'{med(runs[(f, s, r)]["cpus"] for r in rounds):.2f}'
                             f' ({med(runs[(f, s, r)]["worker_cpus"] for r in rounds):.2f})')
        print("| " + " | ".join(cells) + " |")
PY

#!/usr/bin/env bash
# Forwarding comparison on veths: rocesw (full QoS pipeline, one worker) against the Linux
# bridge, dpdk-testpmd (io forwarding on net_af_packet) and Open vSwitch's userspace (netdev)
# datapath. One sender host -> one receiver host, each in its own network namespace with one
# veth to the forwarder. See bench/peers/README.md.
#
#   bench/peers/run.sh                     (root; installs dpdk-dev, openvswitch-switch,
#                                           netsniff-ng with apt-get if missing)
#   ROUNDS=5 FWDS="bridge rocesw" bench/peers/run.sh
#   FWDS="rocesw_busy rocesw_dpdk testpmd" bench/peers/run.sh   (rocesw_dpdk: net_af_packet
#                                           vdevs on the same veths, a --features dpdk build)
#
# Everything it creates (namespaces, veths, bridges, daemons, files) is removed on exit,
# error or Ctrl-C. Bounded: every step has a timeout; a default run takes about 7 minutes.
set -euo pipefail

ROUNDS=${ROUNDS:-3}                       # rounds; each runs every forwarder once, alternating
FWDS=${FWDS:-"bridge rocesw rocesw_busy testpmd ovs"} # forwarders, in order, each round
SIZES=${SIZES:-"64 1024"}                 # frame bytes as handed to the veth (no FCS)
FIXED_PPS=${FIXED_PPS:-150000}            # fixed offered load (trafgen), packets/s
FIXED_SECS=${FIXED_SECS:-3}               # ... for this long
MAX_SECS=${MAX_SECS:-3}                   # unthrottled trafgen ("max rate") for this long
LAT_PPS=${LAT_PPS:-20000}                 # latency run (rocegen), packets/s
LAT_SECS=${LAT_SECS:-2}
GEN_CPU=${GEN_CPU:-0}                     # trafgen / rocegen pinned here
FWD_CPU=${FWD_CPU:-1}                     # the forwarder's polling thread pinned here
PREBUILT=${PREBUILT:-}                    # dir with rocesw + rocegen: skip the cargo build
NAME=${NAME:-pb}                          # lab name: namespaces NAME-h0/1, veths NAMEp0/1
KEEP=${KEEP:-}                            # copy raw results, logs, rocesw summaries here

cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (namespaces, veths, AF_PACKET)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/rocesw-peers.XXXXXX)
RAW=$WORK/results.tsv
BIN=$WORK/bin
FWD_PID=
OVS_DIR=$WORK/ovs

log() { echo "[peers $(date +%T)] $*" >&2; }

# ---------------------------------------------------------------- teardown (always runs)
stop_fwd() {
    if [ -n "$FWD_PID" ] && kill -0 "$FWD_PID" 2>/dev/null; then
        kill -INT "$FWD_PID" 2>/dev/null || true
        for _ in $(seq 30); do kill -0 "$FWD_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$FWD_PID" 2>/dev/null || true
        wait "$FWD_PID" 2>/dev/null || true
    fi
    FWD_PID=
    exec 3>&-
    ip link del "${NAME}br" 2>/dev/null || true
    if [ -d "$OVS_DIR" ]; then
        for d in vswitchd ovsdb; do
            if [ -S "$OVS_DIR/$d.ctl" ]; then
                timeout 5 ovs-appctl -t "$OVS_DIR/$d.ctl" exit >/dev/null 2>&1 || true
            fi
            if [ -f "$OVS_DIR/$d.pid" ]; then
                p=$(cat "$OVS_DIR/$d.pid" 2>/dev/null || true)
                for _ in $(seq 50); do [ -n "$p" ] && kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
                [ -n "$p" ] && kill -0 "$p" 2>/dev/null && { kill -KILL "$p" 2>/dev/null || true; }
            fi
        done
        ip link del "${NAME}ovs" 2>/dev/null || true
        rm -rf "$OVS_DIR"
    fi
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_fwd
    if [ -n "$KEEP" ] && [ -f "$RAW" ]; then
        mkdir -p "$KEEP" && cp "$WORK"/*.tsv "$WORK"/*.log "$WORK"/*.json "$KEEP"/ 2>/dev/null || true
    fi
    if [ -d "$WORK/lab" ]; then
        "$BIN/rocesw" lab down --name "$NAME" --state-dir "$WORK/lab" >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- prerequisites
need=()
command -v dpdk-testpmd >/dev/null || need+=(dpdk-dev dpdk)
command -v ovs-vswitchd >/dev/null || need+=(openvswitch-switch)
command -v trafgen >/dev/null || need+=(netsniff-ng)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian's openvswitch-switch may start its own daemons where systemd runs; this script
# only ever talks to the ones it starts, in its own run directory.

mkdir -p "$BIN"
if [ -n "$PREBUILT" ]; then
    cp "$PREBUILT/rocesw" "$PREBUILT/rocegen" "$BIN/"
else
    log "building rocesw and rocegen"
    features=()
    case " $FWDS " in *" rocesw_dpdk "*) features=(--features rocesw-dataplane/dpdk) ;; esac
    timeout 900 cargo build --release -q --bins "${features[@]}"
    cp target/release/rocesw target/release/rocegen "$BIN/" # a stable copy: others may rebuild
fi

# ---------------------------------------------------------------- lab
log "lab up: $NAME (2 hosts, 100G ports)"
if ip netns list | grep -qE "^$NAME-h[01]( |\$)" || ip link show "${NAME}p0" >/dev/null 2>&1; then
    echo "run.sh: a lab named $NAME already exists; pick another NAME=" >&2; exit 2
fi
mkdir -p "$WORK/lab"
"$BIN/rocesw" lab up --hosts 2 --name "$NAME" --speed 100G --state-dir "$WORK/lab" >/dev/null
LABJSON=$WORK/lab/$NAME.json
LABTOML=$WORK/lab/$NAME.toml
P0=${NAME}p0 P1=${NAME}p1 H0=$NAME-h0 H1=$NAME-h1
MAC0=$(python3 -c "import json;print(json.load(open('$LABJSON'))['hosts'][0]['mac'])")
MAC1=$(python3 -c "import json;print(json.load(open('$LABJSON'))['hosts'][1]['mac'])")
# rocesw: the lab's config as written, plus pinning its one worker like the other forwarders.
sed "s/^\[run\]\$/[run]\ncores = [$FWD_CPU]/" "$LABTOML" > "$WORK/rocesw.toml"
grep -q "^cores = \[$FWD_CPU\]" "$WORK/rocesw.toml" || printf '\n[run]\ncores = [%s]\n' "$FWD_CPU" >> "$WORK/rocesw.toml"
# rocesw_busy: the same, but busy-polling (the lab writes idle = "20us" for shared machines)
sed 's/^idle = .*/idle = "busy"/' "$WORK/rocesw.toml" > "$WORK/rocesw_busy.toml"
# rocesw_dpdk: rocesw_busy with DPDK's net_af_packet on the same veths instead of its own
# AF_PACKET backend (needs a build with --features dpdk): the driver against the native one.
python3 - "$WORK/rocesw_busy.toml" "$WORK/rocesw_dpdk.toml" <<'PY'
import re, sys
n = iter(range(64))
t = re.sub(r'^interface = "([^"]+)"$', lambda m: f'dpdk = "net_af_packet{next(n)},iface={m.group(1)}"',
           open(sys.argv[1]).read(), flags=re.M)
open(sys.argv[2], "w").write(t)
PY

# trafgen packet: RoCEv2 SEND ONLY (UDP 4791, BTH), DSCP 26 + ECT(0) so rocesw classifies it
# into its lossless, ECN-marking queue 3. The destination IP is not the receiver's address, so
# the receiving namespace drops it without answering (no ICMP back through the forwarder).
hexmac() { echo "$1" | sed 's/^/0x/; s/:/, 0x/g'; }
for L in $SIZES; do
    [ "$L" -ge 60 ] || { echo "frame sizes must be >= 60" >&2; exit 2; }
    cat > "$WORK/tg$L.cfg" <<EOF
{
  $(hexmac "$MAC1"),
  $(hexmac "$MAC0"),
  c16(0x0800),
  0x45, 0x6a, c16($((L - 14))), c16(0), c16(0x4000), 64, 17, csumip(14, 33),
  198, 18, 0, 1,  198, 18, 0, 99,
  c16(49152), c16(4791), c16($((L - 34))), c16(0),
  0x04, 0x40, c16(0xffff), 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x00,
  fill(0x00, $((L - 58))),
  0x00, 0x00, 0x00, 0x00
}
EOF
done

cnt() { ip netns exec "$1" cat "/sys/class/net/eth0/statistics/$2"; }

# ---------------------------------------------------------------- forwarders
start_bridge() {
    ip link add "${NAME}br" type bridge stp_state 0
    ip link set "$P0" master "${NAME}br"
    ip link set "$P1" master "${NAME}br"
    ip link set "${NAME}br" up
}
start_rocesw() { # [config name]
    local c=${1:-rocesw}
    "$BIN/rocesw" run --config "$WORK/$c.toml" --summary "$WORK/rocesw-summary.json" \
        > "$WORK/$c.log" 2>&1 &
    FWD_PID=$!
}
start_rocesw_busy() { start_rocesw rocesw_busy; }
start_rocesw_dpdk() { start_rocesw rocesw_dpdk; sleep 2; }
start_testpmd() {
    # lcore 0 = main (idle), lcore 1 = the io forwarding core; ports 0 <-> 1.
    rm -f "$WORK/testpmd.in"
    mkfifo "$WORK/testpmd.in"
    dpdk-testpmd -l "$GEN_CPU,$FWD_CPU" --main-lcore "$GEN_CPU" \
        --no-huge -m 512 --no-pci --no-shconf --no-telemetry --file-prefix="rocesw-peers-$$" \
        --vdev="net_af_packet0,iface=$P0" --vdev="net_af_packet1,iface=$P1" \
        -- --forward-mode=io --auto-start --total-num-mbufs=16384 < "$WORK/testpmd.in" > "$WORK/testpmd.log" 2>&1 &
    FWD_PID=$!
    exec 3> "$WORK/testpmd.in" # testpmd waits on stdin; closing it (or SIGINT) stops it
    sleep 2
    kill -0 "$FWD_PID" 2>/dev/null || { cat "$WORK/testpmd.log" >&2; return 1; }
}
start_ovs() {
    mkdir -p "$OVS_DIR"
    export OVS_RUNDIR=$OVS_DIR OVS_LOGDIR=$OVS_DIR OVS_DBDIR=$OVS_DIR
    ovsdb-tool create "$OVS_DIR/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server "$OVS_DIR/conf.db" --remote="punix:$OVS_DIR/db.sock" \
        --pidfile="$OVS_DIR/ovsdb.pid" --unixctl="$OVS_DIR/ovsdb.ctl" \
        --log-file="$OVS_DIR/ovsdb.log" -vconsole:off --detach
    local V="ovs-vsctl --db=unix:$OVS_DIR/db.sock --timeout=10"
    $V --no-wait init
    taskset -c "$FWD_CPU" ovs-vswitchd "unix:$OVS_DIR/db.sock" \
        --pidfile="$OVS_DIR/vswitchd.pid" --unixctl="$OVS_DIR/vswitchd.ctl" \
        --log-file="$OVS_DIR/vswitchd.log" -vconsole:off --detach
    $V add-br "${NAME}ovs" -- set bridge "${NAME}ovs" datapath_type=netdev \
        -- add-port "${NAME}ovs" "$P0" -- add-port "${NAME}ovs" "$P1"
    # default flow table: one NORMAL (MAC learning) flow
    sleep 1
}
start_fwd() {
    "start_$1" || return 1
    sleep 1
    if [ -n "$FWD_PID" ]; then kill -0 "$FWD_PID" 2>/dev/null || return 1; fi
}

# learn both hosts' MACs in every forwarder, prime OVS's flow cache
warmup() {
    ip netns exec "$H1" ping -c 2 -i 0.2 -W 1 198.18.0.1 >/dev/null 2>&1 || true
    ip netns exec "$H0" timeout 5 taskset -c "$GEN_CPU" trafgen --dev eth0 \
        --conf "$WORK/tg64.cfg" -P1 -C -b 10000pps -n 2000 >/dev/null 2>&1 || true
    sleep 0.3
}

# one trafgen run: prints "offered delivered seconds"
trafgen_run() { # size pps(0 = unthrottled) secs
    local L=$1 pps=$2 secs=$3 tx0 rx0 t0 t1
    tx0=$(cnt "$H0" tx_packets); rx0=$(cnt "$H1" rx_packets); t0=$(date +%s.%N)
    if [ "$pps" -gt 0 ]; then
        ip netns exec "$H0" timeout $((secs + 10)) taskset -c "$GEN_CPU" trafgen --dev eth0 \
            --conf "$WORK/tg$L.cfg" -P1 -C -b "${pps}pps" -n $((pps * secs)) >/dev/null 2>&1 || true
    else
        ip netns exec "$H0" timeout "$secs" taskset -c "$GEN_CPU" trafgen --dev eth0 \
            --conf "$WORK/tg$L.cfg" -P1 -C >/dev/null 2>&1 || true
    fi
    t1=$(date +%s.%N)
    sleep 0.5 # let queues drain
    echo "$(( $(cnt "$H0" tx_packets) - tx0 )) $(( $(cnt "$H1" rx_packets) - rx0 )) $(awk "BEGIN{print $t1 - $t0}")"
}

# one rocegen run: prints "offered delivered p50_ns p99_ns secs"
rocegen_run() { # size pps secs
    local L=$1 pps=$2 secs=$3 msg rate
    msg=$((L - 58)); [ "$msg" -ge 16 ] || msg=16 # 16 B payload header carries the timestamp
    rate=$(( pps * (msg + 58 + 24) * 8 ))         # rocegen's rate is wire bits/s
    timeout $((secs + 20)) taskset -c "$GEN_CPU" "$BIN/rocegen" coordinate --lab "$LABJSON" \
        --pattern one-to-many --op send --msg-size "$msg" --rate "$rate" --duration "$secs" \
        --no-dcqcn --link-speed 100G --json > "$WORK/rocegen.json" 2>/dev/null || { echo "0 0 0 0 $secs"; return; }
    python3 - "$WORK/rocegen.json" "$secs" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
print(t["tx_packets"], t["rx_packets"], t["latency"]["p50_ns"], t["latency"]["p99_ns"], sys.argv[2])
EOF
}

echo -e "round\tfwd\tsize\ttest\toffered\tdelivered\tsecs\tp50_ns\tp99_ns" > "$RAW"
log "machine: $(nproc) CPUs; $(uptime)"
for r in $(seq "$ROUNDS"); do
    for f in $FWDS; do
        log "round $r/$ROUNDS: $f"
        if ! start_fwd "$f"; then log "$f failed to start"; stop_fwd; continue; fi
        warmup
        for L in $SIZES; do
            read -r o d s < <(trafgen_run "$L" "$FIXED_PPS" "$FIXED_SECS")
            echo -e "$r\t$f\t$L\tfixed\t$o\t$d\t$s\t\t" >> "$RAW"
            read -r o d s < <(trafgen_run "$L" 0 "$MAX_SECS")
            echo -e "$r\t$f\t$L\tmax\t$o\t$d\t$s\t\t" >> "$RAW"
            read -r o d p50 p99 s < <(rocegen_run "$L" "$LAT_PPS" "$LAT_SECS")
            echo -e "$r\t$f\t$L\tlatency\t$o\t$d\t$s\t$p50\t$p99" >> "$RAW"
        done
        stop_fwd
        if [ -f "$WORK/rocesw-summary.json" ]; then
            mv "$WORK/rocesw-summary.json" "$WORK/$f-summary.$r.json"
            python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('rocesw counters:', [(p['id'], p['rx_packets'], p['tx_packets'], p['drops']) for p in d['switch']['ports']], 'kernel rx ring drops:', [(i['id'], i['backend']['rx_kernel_drops']) for i in d['interfaces']])" \
                "$WORK/$f-summary.$r.json" >&2 || true
        fi
    done
done
log "done; $(uptime)"

# ---------------------------------------------------------------- table
python3 - "$RAW" "$FIXED_PPS" "$LAT_PPS" <<'EOF'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
fixed_pps, lat_pps = sys.argv[2], sys.argv[3]
med = lambda xs: st.median(xs) if xs else float("nan")
fwds = list(dict.fromkeys(r["fwd"] for r in rows))
sizes = list(dict.fromkeys(r["size"] for r in rows))
def get(f, s, t, r=None):
    return [x for x in rows if x["fwd"] == f and x["size"] == s and x["test"] == t and (r is None or x["round"] == r)]
def pps(x): return int(x["delivered"]) / float(x["secs"])
def loss(x):
    o = int(x["offered"]); return 100.0 * (o - int(x["delivered"])) / o if o else float("nan")
def ratio(f, s, t):  # median over rounds of (fwd / bridge in the same round)
    out = []
    for x in get(f, s, t):
        b = get("bridge", s, t, x["round"])
        if b and pps(b[0]) > 0: out.append(pps(x) / pps(b[0]))
    return med(out)
print()
print(f"medians over {len(set(r['round'] for r in rows))} rounds; ratio = delivered pps / Linux bridge's in the same round")
hdr = ("forwarder", "frame", f"fixed {fixed_pps} pps: delivered", "loss", "ratio",
       "max: offered", "delivered", "loss", "ratio", f"lat @{lat_pps} pps: p50", "p99", "loss")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for s in sizes:
    for f in fwds:
        fx, mx, lt = get(f, s, "fixed"), get(f, s, "max"), get(f, s, "latency")
        offered_max = med([int(x["offered"]) / float(x["secs"]) for x in mx])
        print("| " + " | ".join([
            f, f"{s} B",
            f"{med([pps(x) for x in fx]):,.0f}", f"{med([loss(x) for x in fx]):.2f} %",
            f"{ratio(f, s, 'fixed'):.2f}",
            f"{offered_max:,.0f}", f"{med([pps(x) for x in mx]):,.0f}",
            f"{med([loss(x) for x in mx]):.1f} %", f"{ratio(f, s, 'max'):.2f}",
            f"{med([int(x['p50_ns']) for x in lt]) / 1000:.1f} µs",
            f"{med([int(x['p99_ns']) for x in lt]) / 1000:.1f} µs",
            f"{med([loss(x) for x in lt]):.2f} %",
        ]) + " |")
EOF
[ -z "$KEEP" ] || log "raw results kept in $KEEP"
exit 0

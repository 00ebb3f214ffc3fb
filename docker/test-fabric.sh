#!/usr/bin/env bash
# The containerlab fabric's test (dataplane/tests/container.rs runs it after test-image.sh; so
# can a user, as root): docker/with-dockerd.sh docker/test-fabric.sh
#
# Deploys docker/rocesw.clab.yml with docker/clab.py (the rocesw container switching three host
# containers over veth pairs, as containerlab wires kind: linux nodes; the image rocesw:local
# must exist: docker/build-image.sh), checks that the hosts' addresses are what
# docker/clab/incast.lab.json says, runs a 2->1 RoCEv2 incast at line rate (h1, h2 -> h0, 500M
# ports) with $ROCEGEN from the hosts' network namespaces, stops the switch (docker stop:
# SIGTERM, it drains and writes its summary), and checks: nothing lost end to end, no ICRC or
# order error, CE marks and CNPs at the hosts, PFC sent by the switch and received by the
# senders, no drop in the switch. Destroys the lab on every exit. Prints "fabric test: passed".
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
TOPO=$REPO/docker/rocesw.clab.yml
LABJSON=$REPO/docker/clab/incast.lab.json
ROCEGEN=${ROCEGEN:-$REPO/target/release/rocegen}
SW=clab-incast-rocesw
step() { printf 'fabric test: %s\n' "$*"; }
die() { printf 'fabric test: FAILED: %s\n' "$*" >&2; exit 1; }

# clab.py needs PyYAML: the python3 on PATH if it has it, else Debian's (python3-yaml).
PY=
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import yaml' 2>/dev/null; then PY=$p; break; fi
done
[[ -n $PY ]] || die "no python3 with PyYAML (apt-get install python3-yaml)"
clab() { "$PY" "$REPO/docker/clab.py" "$@"; }

WORK=$(mktemp -d /tmp/rocesw-fabric-test.XXXXXX)
cleanup() {
    local rc=$?
    if ((rc)); then
        echo "--- switch log:" >&2
        docker logs "$SW" 2>&1 | tail -30 >&2 || true
    fi
    clab destroy -t "$TOPO" >/dev/null || true
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
clab destroy -t "$TOPO" >/dev/null # leftovers of an interrupted run

t0=$SECONDS
clab deploy -t "$TOPO"
for _ in $(seq 300); do
    docker exec "$SW" rocectl show counters >/dev/null 2>&1 && break
    [[ $(docker inspect -f '{{.State.Running}}' "$SW") == true ]] || die "the switch exited"
    sleep 0.1
done
docker exec "$SW" rocectl show counters >/dev/null || die "the switch's control socket did not answer in 30 s"
step "deployed, the switch answers rocectl ($((SECONDS - t0)) s)"

clab labjson -t "$TOPO" >"$WORK/lab.json"
python3 - "$WORK/lab.json" "$LABJSON" <<'PY' || die "the deployed hosts differ from docker/clab/incast.lab.json"
import json, sys
live, file = (json.load(open(p)) for p in sys.argv[1:])
if live != file:
    sys.exit(f"deployed: {live}\n{sys.argv[2]}: {file}")
PY
step "the hosts' interfaces match docker/clab/incast.lab.json"

"$ROCEGEN" coordinate --pattern incast --lab "$LABJSON" --rate 500M --link-speed 500M \
    --duration 1.5 --burst-us 50 --json >"$WORK/rocegen.json"
docker stop -t 30 "$SW" >/dev/null
docker cp "$SW:/data/summary.json" "$WORK/switch.json"
python3 - "$WORK/rocegen.json" "$WORK/switch.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["totals"]
run = json.load(open(sys.argv[2]))  # rocesw run --summary: {"switch": snapshot, ...}
s = run["switch"]
ports = {p["id"]: p for p in s["ports"]}
drops = {r: n for p in s["ports"] for r, n in p["drops"].items() if n}
pfc_tx = sum(ports[i]["pfc_tx"][3] for i in (1, 2))
problems = []
for k in ("lost", "bad_icrc", "out_of_order"):
    if g[k] != 0:
        problems.append(f"rocegen {k} = {g[k]}")
if g["rx_packets"] <= 10_000:
    problems.append(f"only {g['rx_packets']} frames received")
for k in ("ce", "cnps_received", "pfc_frames"):
    if g[k] == 0:
        problems.append(f"rocegen {k} = 0")
if run["undrained"]:
    problems.append(f"{run['undrained']} frames undrained at the switch's stop")
if drops:
    problems.append(f"switch drops {drops}")
if pfc_tx == 0:
    problems.append("the switch sent no PFC to h1 or h2")
if ports[0]["ecn_marked"] == 0:
    problems.append("no CE mark on port 0")
if problems:
    sys.exit("fabric test: FAILED: " + "; ".join(problems))
print(f"fabric test: incast 2->1 at 500M: h0 received {g['rx_packets']} frames, lost 0, "
      f"{g['ce']} CE, {g['cnps_received']} CNPs; the switch sent {pfc_tx} PFC frames "
      f"(senders got {g['pfc_frames']}), marked {ports[0]['ecn_marked']}, dropped nothing")
PY
step "passed ($((SECONDS - t0)) s)"

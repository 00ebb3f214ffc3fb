#!/usr/bin/env bash
# The image's test (dataplane/tests/container.rs runs it; so can a user, as root):
#
#   docker/with-dockerd.sh docker/test-image.sh
#
# against the daemon DOCKER_HOST names: makes the base (docker/make-base.sh: debootstrap when no
# registry answers, the tarball cached in target/docker-base), builds the image from $ROCESW,
# $ROCECTL and $ROCEGEN (docker/build-image.sh), then runs the image's default command (replay of
# the bundled 3→1 incast, as the unprivileged user rocesw, without a network) and checks that
# its output is byte for byte what the same binary writes on the host, that the incast was
# lossless (no drop, every frame delivered, PFC sent, CE marks), and that the container ran as
# uid 10001. Prints "image test: passed" at the end.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
TAG=${ROCESW_IMAGE:-rocesw:local}
export ROCESW=${ROCESW:-$REPO/target/release/rocesw}
export ROCECTL=${ROCECTL:-$REPO/target/release/rocectl}
export ROCEGEN=${ROCEGEN:-$REPO/target/release/rocegen}
step() { printf 'image test: %s\n' "$*"; }
die() { printf 'image test: FAILED: %s\n' "$*" >&2; exit 1; }

t0=$SECONDS
"$REPO/docker/make-base.sh"
step "base image ready ($((SECONDS - t0)) s)"
t0=$SECONDS
"$REPO/docker/build-image.sh" "$TAG"
step "image $TAG built ($((SECONDS - t0)) s): $(docker image inspect -f '{{.Size}}' "$TAG") bytes"

WORK=$(mktemp -d /tmp/rocesw-image-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -m 0777 "$WORK/container"
t0=$SECONDS
docker run --rm --network none -v "$WORK/container:/data/out" "$TAG"
step "container replay done ($((SECONDS - t0)) s)"
owner=$(stat -c %u "$WORK/container/summary.json")
[[ $owner == 10001 ]] || die "the container wrote its output as uid $owner, not rocesw (10001)"

ex=$REPO/examples/incast
"$ROCESW" replay --config "$REPO/configs/default.toml" --quiet \
    --input "0=$ex/port0.pcap" --input "1=$ex/port1.pcap" --input "2=$ex/port2.pcap" \
    --input "3=$ex/port3.pcap" --output-dir "$WORK/host"
for f in summary.json port0.pcap port1.pcap port2.pcap port3.pcap; do
    cmp "$WORK/host/$f" "$WORK/container/$f" || die "$f differs between the container and the host"
done
step "the container's summary.json and port{0..3}.pcap equal the host's"

python3 - "$WORK/container/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t = s["totals"]
ports = {p["id"]: p for p in s["ports"]}
sent = sum(ports[i]["rx_packets"] for i in (0, 1, 2))
problems = []
if t["drops"]:
    problems.append(f"drops {t['drops']}")
if ports[3]["tx_packets"] < sent:
    problems.append(f"port 3 sent {ports[3]['tx_packets']} frames of the {sent} the senders sent")
if sum(t["pfc_tx"]) == 0:
    problems.append("no PFC frame sent")
if t["ecn_marked"] == 0:
    problems.append("no CE mark")
if problems:
    sys.exit("image test: FAILED: " + "; ".join(problems))
print(f"image test: incast 3->1: {sent} frames in, port 3 sent {ports[3]['tx_packets']}, "
      f"no drop, {sum(t['pfc_tx'])} PFC frames, {t['ecn_marked']} CE marks")
PY
step "passed"

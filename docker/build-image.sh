#!/usr/bin/env bash
# Build rocesw's image from binaries built on this host, with no registry: docker/Dockerfile.local
# on rocesw-base:bookworm (docker/make-base.sh makes it).
#
#   cargo build --release --bins --features rocesw-dataplane/dpdk   # or without DPDK
#   docker/make-base.sh && docker/build-image.sh [TAG]             # TAG: rocesw:local
#
# Binaries: $ROCESW, $ROCECTL, $ROCEGEN (default target/release/{rocesw,rocectl,rocegen}).
# The build context is a staging directory with only bin/, configs/, examples/incast/ and examples/tune/, not
# the repository (whose target/ is gigabytes). The image is labelled with whether rocesw was
# built with DPDK (org.rocesw.dpdk=yes|no).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
TAG=${1:-rocesw:local}
BASE=${ROCESW_BASE_IMAGE:-rocesw-base:bookworm}
ROCESW=${ROCESW:-$REPO/target/release/rocesw}
ROCECTL=${ROCECTL:-$REPO/target/release/rocectl}
ROCEGEN=${ROCEGEN:-$REPO/target/release/rocegen}

die() { printf 'build-image: error: %s\n' "$*" >&2; exit 1; }
for b in "$ROCESW" "$ROCECTL" "$ROCEGEN"; do
    [[ -x $b ]] || die "$b is not an executable (cargo build --release --bins, or set ROCESW/ROCECTL/ROCEGEN)"
done
docker image inspect "$BASE" >/dev/null 2>&1 || die "no base image $BASE: run docker/make-base.sh"

CTX=$(mktemp -d /tmp/rocesw-image.XXXXXX)
trap 'rm -rf "$CTX"' EXIT
mkdir -p "$CTX/bin" "$CTX/examples"
# Without debug info (a debug build's binaries are about 100 MB each) when strip is there.
strip=()
command -v strip >/dev/null && strip=(-s)
install "${strip[@]}" -m 0755 "$ROCESW" "$CTX/bin/rocesw"
install "${strip[@]}" -m 0755 "$ROCECTL" "$CTX/bin/rocectl"
install "${strip[@]}" -m 0755 "$ROCEGEN" "$CTX/bin/rocegen"
cp -r "$REPO/configs" "$CTX/configs"
cp -r "$REPO/examples/incast" "$CTX/examples/incast"
# The tune sweep's topology and patterns, for the Kubernetes Jobs (deploy/k8s/).
cp -r "$REPO/examples/tune" "$CTX/examples/tune"
dpdk=no
# (Not grep -q: under pipefail, ldd killed by SIGPIPE would make the pipeline fail.)
if ldd "$ROCESW" | grep librte_eal >/dev/null; then dpdk=yes; fi
# --network none: nothing in the build needs a network (and a daemon started with
# --bridge=none has no default one).
DOCKER_BUILDKIT=0 docker build --network none -q -f "$REPO/docker/Dockerfile.local" --build-arg "BASE=$BASE" \
    --label "org.rocesw.dpdk=$dpdk" -t "$TAG" "$CTX" >/dev/null
printf 'build-image: %s (rocesw with DPDK: %s)\n' "$TAG" "$dpdk" >&2

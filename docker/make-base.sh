#!/usr/bin/env bash
# Make the base image rocesw's image builds on: rocesw-base:bookworm, Debian 12 with DPDK's
# runtime libraries (the EAL, ethdev, mbuf/mempool and the usual drivers, which DPDK loads as
# plugins), iproute2 and procps.
#
#   docker/make-base.sh            # auto: debian:bookworm-slim if a registry answers, else debootstrap
#   ROCESW_BASE_FROM=debootstrap docker/make-base.sh   # never ask a registry
#   ROCESW_BASE_FROM=pull docker/make-base.sh          # fail if the registry does not answer
#
# Without a registry (this project's machines): `debootstrap --variant=minbase` from Debian's
# mirror (deb.debian.org, or $DEBIAN_MIRROR) into a temporary directory, packed into a tarball
# that is kept in $ROCESW_DOCKER_CACHE (default target/docker-base/ of the repository) and then
# `docker import`ed. Idempotent: does nothing when the image exists; a new docker daemon (a
# fresh data root, as the container test uses) imports the cached tarball in seconds instead of
# running debootstrap again. The tarball's name carries a digest of the package list, so a
# changed list makes a new one. Needs root (debootstrap), and `docker` talking to a daemon.
set -euo pipefail

IMAGE=${ROCESW_BASE_IMAGE:-rocesw-base:bookworm}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
FROM=${ROCESW_BASE_FROM:-auto}
REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${ROCESW_DOCKER_CACHE:-$REPO/target/docker-base}

# DPDK 22.11 (Debian 12): the libraries `rocesw` built with `--features dpdk` links, and the
# drivers EAL loads from /usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0: the mempool, the virtual
# buses, net_af_packet/net_vhost/net_virtio/net_tap/net_pcap/net_ring/net_null and the common
# NICs' drivers (Intel e1000/ixgbe/i40e/ice, Mellanox mlx5). iproute2 and procps: `ip` and `ps`
# for the containers that are test hosts.
PACKAGES=(
    iproute2 procps
    librte-eal23 librte-ethdev23 librte-mbuf23 librte-mempool23 librte-net23 librte-ring23
    librte-meter23 librte-kvargs23 librte-telemetry23
    librte-mempool-ring23 librte-bus-pci23 librte-bus-vdev23
    librte-net-af-packet23 librte-net-vhost23 librte-net-virtio23 librte-net-tap23
    librte-net-pcap23 librte-net-ring23 librte-net-null23
    librte-net-e1000-23 librte-net-ixgbe23 librte-net-i40e23 librte-net-ice23 librte-net-mlx5-23
)

# Remove a debootstrap root: first what debootstrap mounted in it (proc, sys) if it was
# interrupted, then the files, never crossing into another file system.
rm_root() {
    local r=$1
    [[ -d $r ]] || return 0
    { grep -o -E " $r/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount -l "$m"; done
    rm -rf --one-file-system "$r"
}

log() { printf 'make-base: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $FROM == @(auto|pull|debootstrap) ]] ||
    die "ROCESW_BASE_FROM must be auto, pull or debootstrap, not '$FROM'"
command -v docker >/dev/null || die "no docker client (apt-get install docker.io)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
    die "docker cannot reach a daemon (DOCKER_HOST=${DOCKER_HOST:-unset})"

# The package list's digest: in the cached tarball's name and in the image's label
# org.rocesw.base, so a changed list makes a new base.
SUM=$(printf '%s\n' "$SUITE" "${PACKAGES[@]}" | sha256sum | cut -c1-12)
if have=$(docker image inspect -f '{{index .Config.Labels "org.rocesw.base"}}' "$IMAGE" 2>/dev/null); then
    if [[ $have == "$SUM" ]]; then
        log "$IMAGE exists"
        exit 0
    fi
    log "$IMAGE exists with another package list (${have:-no label}): making it again"
fi

from_registry() {
    log "trying docker pull debian:$SUITE-slim"
    timeout 120 docker pull -q "debian:$SUITE-slim" >/dev/null 2>&1 || return 1
    log "registry reachable: $IMAGE = debian:$SUITE-slim + ${#PACKAGES[@]} packages"
    # --network host: the apt-get needs the mirror even when the daemon runs with --bridge=none.
    docker build --network host -t "$IMAGE" - <<EOF
FROM debian:$SUITE-slim
LABEL org.rocesw.base=$SUM
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${PACKAGES[*]} \\
 && rm -rf /var/lib/apt/lists/*
CMD ["/bin/bash"]
EOF
}

from_debootstrap() {
    local tarball root
    tarball=$CACHE/$SUITE-minbase-$SUM.tar
    if [[ ! -s $tarball ]]; then
        [[ $(id -u) == 0 ]] || die "debootstrap needs root"
        command -v debootstrap >/dev/null || die "no debootstrap (apt-get install debootstrap)"
        mkdir -p "$CACHE"
        root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
        # shellcheck disable=SC2064
        trap "rm_root '$root'; rm -f '$tarball.tmp'" EXIT
        log "debootstrap --variant=minbase $SUITE from $MIRROR (a few minutes)"
        local inc
        inc=$(
            IFS=,
            echo "${PACKAGES[*]}"
        )
        if ! debootstrap --variant=minbase --include="$inc" "$SUITE" "$root" "$MIRROR" \
            >"$CACHE/debootstrap.log" 2>&1; then
            tail -20 "$CACHE/debootstrap.log" >&2
            die "debootstrap failed (log: $CACHE/debootstrap.log)"
        fi
        # What an image does not need: downloaded packages, package lists, logs.
        rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
            "$root"/var/log/* "$root"/debootstrap
        tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
        mv "$tarball.tmp" "$tarball"
        rm_root "$root"
        trap - EXIT
        log "cached $tarball ($(du -h "$tarball" | cut -f1))"
    else
        log "using cached $tarball"
    fi
    docker import -c 'CMD ["/bin/bash"]' -c "LABEL org.rocesw.base=$SUM" \
        -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -m "debootstrap --variant=minbase $SUITE + rocesw's runtime packages" \
        "$tarball" "$IMAGE" >/dev/null
    log "imported $IMAGE from $tarball"
}

case $FROM in
auto) from_registry || {
    log "no registry: making $IMAGE with debootstrap"
    from_debootstrap
} ;;
pull) from_registry || die "docker pull debian:$SUITE-slim failed" ;;
debootstrap) from_debootstrap ;;
*) die "ROCESW_BASE_FROM must be auto, pull or debootstrap, not '$FROM'" ;;
esac
docker image inspect "$IMAGE" >/dev/null

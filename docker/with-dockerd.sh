#!/usr/bin/env bash
# Run a command against a private docker daemon, started for it and stopped after, leaving the
# host as it was found.
#
#   docker/with-dockerd.sh COMMAND [ARG...]
#
# The daemon has its own data root, exec root, pidfile, socket and containerd under a temporary
# directory (or $ROCESW_DOCKERD_DIR; its data root persists there between runs if the directory
# is given), so it cannot clash with a dockerd or containerd already running; COMMAND sees DOCKER_HOST pointing
# at it. It runs with --iptables=false --ip6tables=false --bridge=none --ip-forward=false: no
# firewall chains, no FORWARD policy change, no docker0 and no change to net.ipv4.ip_forward
# (containers get --network none or a network namespace the caller wires itself). Even so, the
# host's iptables and ip6tables rules, ip_forward and the absence of docker0 are saved before
# and checked after: anything changed is restored (and reported on stderr, exit status 3 if the
# command itself succeeded). The daemon is stopped (SIGTERM, then SIGKILL after 20 s) on every
# exit, including a failure or a signal. Needs root and Debian's docker.io (dockerd, containerd,
# runc).
set -euo pipefail

log() { printf 'with-dockerd: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Processes of this user with an argument that names a path under directory $1 (a container
# shim names our containerd's socket after -address): each argument compared with the literal
# prefix. `pgrep -f PATH` read PATH as a regex over whole command lines, of every user's
# processes, and so could kill another user's process that merely mentioned the path.
procs_under() {
    local prefix=${1%/}/ uid p arg
    uid=$(id -u)
    for p in /proc/[0-9]*; do
        [[ $(stat -c %u "$p" 2>/dev/null) == "$uid" ]] || continue
        while IFS= read -r -d '' arg; do
            if [[ $arg == "$prefix"* ]]; then
                echo "${p#/proc/}"
                break
            fi
        done 2>/dev/null <"$p/cmdline" || true
    done
}

# Mount points (from /proc/self/mounts, or $3) under directory $1 or $2, deepest first. The
# directories are compared as literal prefixes: put into a regex, a name such as
# ROCESW_DOCKERD_DIR=/tmp/a.b or one with `|` matched other mounts, which were unmounted.
mounts_under() {
    local a=${1%/} b=${2%/} table=${3:-/proc/self/mounts} mnt
    while read -r _ mnt _; do
        mnt=$(printf '%b' "$mnt") # the table writes a space as \040
        case $mnt in
        "$a"/* | "$b"/*) printf '%s\n' "$mnt" ;;
        esac
    done <"$table" | sort -r
}

# Sourced (by a test): the functions only.
[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0

(($#)) || die "usage: $0 COMMAND [ARG...]"
[[ $(id -u) == 0 ]] || die "needs root (dockerd)"
for b in dockerd containerd runc docker iptables-save ip6tables-save; do
    command -v "$b" >/dev/null || die "no $b (apt-get install docker.io iptables)"
done

# What the host looks like before: compared (and restored) after.
ipt_norm() { "$1" | { grep -v -E '^#' || true; } | sed -E 's/\[[0-9]+:[0-9]+\]/[0:0]/'; }
# Put back the rules saved in $2 with $1 (iptables or ip6tables): tables that did not exist
# before (an empty save: none did) are emptied, with their built-in chains' policies ACCEPT.
fw_restore() {
    local cmd=$1 before=$2 t c
    for t in $("$cmd-save" | sed -n 's/^\*//p'); do
        grep -q "^\*$t\$" <<<"$before" && continue
        "$cmd" -t "$t" -F
        "$cmd" -t "$t" -X
        for c in $("$cmd-save" -t "$t" | sed -n 's/^:\([A-Z]*\) [A-Z]*.*/\1/p'); do
            "$cmd" -t "$t" -P "$c" ACCEPT
        done
    done
    [[ -z $before ]] || printf '%s\n' "$before" | "$cmd-restore"
}
IPT_BEFORE=$(iptables-save)
IP6T_BEFORE=$(ip6tables-save)
IPT_NORM_BEFORE=$(ipt_norm iptables-save)
IP6T_NORM_BEFORE=$(ipt_norm ip6tables-save)
FWD_BEFORE=$(cat /proc/sys/net/ipv4/ip_forward)
DOCKER0_BEFORE=0
ip link show docker0 >/dev/null 2>&1 && DOCKER0_BEFORE=1

if [[ -n ${ROCESW_DOCKERD_DIR:-} ]]; then
    KEEP_DIR=1
    mkdir -p "$ROCESW_DOCKERD_DIR"
    # Absolute, as the mount table writes the mounts under it.
    DIR=$(realpath -e "$ROCESW_DOCKERD_DIR")
else
    DIR=$(mktemp -d /tmp/rocesw-dockerd.XXXXXX)
    KEEP_DIR=0
fi
# The exec root holds the daemon's socket and containerd's: a short path (sun_path is 108 bytes).
EXEC=$(mktemp -d /tmp/rdx.XXXXXX)
SOCK=$EXEC/docker.sock
PIDFILE=$EXEC/dockerd.pid

DPID=
CPID=
host_changed=0
cleanup() {
    local rc=$?
    set +e
    if [[ -n $DPID ]] && kill -0 "$DPID" 2>/dev/null; then
        # Containers still running are killed with the daemon's shutdown.
        kill -TERM "$DPID"
        for _ in $(seq 200); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$DPID" 2>/dev/null; then
            log "dockerd $DPID did not stop in 20 s: SIGKILL"
            kill -KILL "$DPID"
        fi
        wait "$DPID" 2>/dev/null
    fi
    if [[ -n $CPID ]] && kill -0 "$CPID" 2>/dev/null; then
        kill -TERM "$CPID"
        for _ in $(seq 100); do kill -0 "$CPID" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$CPID" 2>/dev/null && kill -KILL "$CPID"
        wait "$CPID" 2>/dev/null
    fi
    # Container shims (their command lines name our containerd's socket), if any survived.
    for p in $(procs_under "$EXEC"); do
        log "stopping leftover process $p ($(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-80))"
        kill -KILL "$p" 2>/dev/null
    done
    # Mounts under our directories (overlay layers, shm, netns) left by a killed daemon.
    mounts_under "$DIR" "$EXEC" | while IFS= read -r m; do
        umount -l "$m" 2>/dev/null
    done
    if [[ $(ipt_norm iptables-save) != "$IPT_NORM_BEFORE" ]]; then
        log "iptables rules changed while dockerd ran: restoring them"
        fw_restore iptables "$IPT_BEFORE"
        host_changed=1
    fi
    if [[ $(ipt_norm ip6tables-save) != "$IP6T_NORM_BEFORE" ]]; then
        log "ip6tables rules changed while dockerd ran: restoring them"
        fw_restore ip6tables "$IP6T_BEFORE"
        host_changed=1
    fi
    if [[ $(cat /proc/sys/net/ipv4/ip_forward) != "$FWD_BEFORE" ]]; then
        log "net.ipv4.ip_forward changed: restoring $FWD_BEFORE"
        echo "$FWD_BEFORE" >/proc/sys/net/ipv4/ip_forward
        host_changed=1
    fi
    if ((!DOCKER0_BEFORE)) && ip link show docker0 >/dev/null 2>&1; then
        log "docker0 appeared: deleting it"
        ip link delete docker0
        host_changed=1
    fi
    rm -rf "$EXEC"
    ((KEEP_DIR)) || rm -rf "$DIR"
    if ((host_changed)); then
        log "the host was changed and has been restored"
        ((rc == 0)) && rc=3
    else
        log "dockerd stopped; iptables, ip6tables, ip_forward and docker0 as before"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A containerd of its own too: left to itself, dockerd would use the system's containerd when
# /run/containerd/containerd.sock exists, and share its state with whatever else uses it.
printf 'version = 2\n' >"$EXEC/containerd.toml"
containerd --config "$EXEC/containerd.toml" --root "$DIR/containerd" --state "$EXEC/containerd" \
    --address "$EXEC/containerd.sock" --log-level warn >"$DIR/containerd.log" 2>&1 &
CPID=$!
for _ in $(seq 300); do
    [[ -S $EXEC/containerd.sock ]] && break
    kill -0 "$CPID" 2>/dev/null || { tail -20 "$DIR/containerd.log" >&2; die "containerd exited"; }
    sleep 0.1
done
[[ -S $EXEC/containerd.sock ]] || die "containerd did not make its socket in 30 s"
dockerd --data-root "$DIR/data" --exec-root "$EXEC" --pidfile "$PIDFILE" \
    -H "unix://$SOCK" --containerd "$EXEC/containerd.sock" \
    --iptables=false --ip6tables=false --ip-forward=false \
    --bridge=none --storage-driver=overlay2 --log-level=warn \
    >"$DIR/dockerd.log" 2>&1 &
DPID=$!
export DOCKER_HOST=unix://$SOCK
for _ in $(seq 300); do
    docker version >/dev/null 2>&1 && break
    kill -0 "$DPID" 2>/dev/null || { tail -20 "$DIR/dockerd.log" >&2; die "dockerd exited"; }
    sleep 0.1
done
docker version >/dev/null 2>&1 || { tail -20 "$DIR/dockerd.log" >&2; die "dockerd did not answer in 30 s"; }
log "dockerd $DPID $(docker version --format '{{.Server.Version}}') at $DOCKER_HOST (data root $DIR/data)"
"$@"

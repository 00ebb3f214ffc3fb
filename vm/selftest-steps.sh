#!/bin/bash
# Checks, on the host and in seconds, the guests' step logic of vm/guest-init.sh (the two
# guests agree over a side channel whether to retry an attempt; they retry only after a process
# died of a signal, never after a failed check). It runs the same shell functions with the
# guest's own busybox (nc, timeout), a server and a client on loopback, and a fake test command
# that crashes or fails on cue. vm/run.sh runs it before booting the guests.
#   vm/selftest-steps.sh [BUSYBOX]   (default: target/vm-guest/root/usr/bin/busybox)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BB=${1:-$REPO/target/vm-guest/root/usr/bin/busybox}
[ -x "$BB" ] || { echo "selftest-steps: no busybox at $BB (run vm/build-guest.sh)" >&2; exit 2; }
T=$(mktemp -d /tmp/rocesw-steps.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir "$T/bin"
for a in nc timeout; do ln -s "$BB" "$T/bin/$a"; done
# The functions under test, cut from the guest's /init.
{ sed -n '/^say()/p' "$REPO/vm/guest-init.sh"
  sed -n '/^# The listening side/,/^# The client waits/p' "$REPO/vm/guest-init.sh"; } > "$T/fns.sh"
grep -q '^step()' "$T/fns.sh" || { echo "selftest-steps: step() not found in guest-init.sh" >&2; exit 2; }
# The fake test: CRASH=role dies of SIGSEGV on its first run (CRASH_ALWAYS on every run),
# CQE=role reports a completion error (as perftest does) and exits 17 on its first run,
# CQE_RPING=role the same as rping words it, exiting 1, FAIL=role exits 1 (a failed check).
# With cm set it plays rdma_cm: the server listens (a file the fake `rdma` below reads) after
# LATE seconds, HANG=server then waits for ever on its first run (a connection it holds that
# its client lost), CONN=client fails to connect on its first run as perftest words it, and a
# client finding no listener is rejected (as the CM does).
cat > "$T/fake.sh" <<'EOF'
#!/bin/sh
if [ -n "$cm" ] && [ "$ROLE" = server ]; then
    sleep "${LATE:-0}"; touch "$DIR/listening-$2"
    if [ "$HANG" = server ] && [ ! -e "$DIR/hung" ]; then touch "$DIR/hung"; exec sleep 1000; fi
fi
if [ -n "$cm" ] && [ "$ROLE" = client ]; then
    [ -e "$DIR/listening-$2" ] || { echo "Unexpected CM event bl blka 8"; exit 1; }
    if [ "$CONN" = client ] && [ ! -e "$DIR/conn" ]; then
        touch "$DIR/conn"; echo "Unexpected CM event bl blka 7"; echo " Unable to perform rdma_client function"; exit 1
    fi
fi
if [ "$ROLE" = "$CRASH_ALWAYS" ] || { [ "$ROLE" = "$CRASH" ] && [ ! -e "$DIR/ran-$ROLE" ]; }; then
    touch "$DIR/ran-$ROLE"; kill -SEGV $$
fi
if [ "$ROLE" = "$CQE" ] && [ ! -e "$DIR/ran-$ROLE" ]; then
    touch "$DIR/ran-$ROLE"; echo " Completion with error at client"; echo " Failed status 12: wr_id 0"; exit 17
fi
if [ "$ROLE" = "$CQE_RPING" ] && [ ! -e "$DIR/ran-$ROLE" ]; then
    touch "$DIR/ran-$ROLE"; echo "cq completion failed status 12"; exit 1
fi
[ "$ROLE" = "$FAIL" ] && exit 1
echo "fake ok $*"
EOF
chmod +x "$T/fake.sh"
# `rdma res show cm_id` as the guest's iproute2 prints a listener.
cat > "$T/bin/rdma" <<'EOF'
#!/bin/sh
for f in "$DIR"/listening-*; do
    [ -e "$f" ] && echo "link rxe0/- cm-idn 0 state LISTEN ps TCP pid 1 comm fake src-addr 0.0.0.0:${f##*-} dst-addr 0.0.0.0:0 "
done
EOF
chmod +x "$T/bin/rdma"
port=$((30000 + $$ % 20000))
failed=0

# scenario SETTINGS EXPECTED: EXPECTED is "server-rc client-rc attempts".
scenario() {
    local settings=$1 want=$2 r
    rm -f "$T"/ran-* "$T"/out-* "$T"/listening-* "$T"/hung "$T"/conn
    port=$((port + 2))
    for r in server client; do
        # The guest's shell (busybox ash), as in the guest.
        env PATH="$T/bin:$PATH" ROLE=$r DIR="$T" CRASH= CRASH_ALWAYS= CQE= CQE_RPING= FAIL= cm= LATE= HANG= CONN= $settings \
            role=$r peer=127.0.0.1 server_ip=127.0.0.1 rocesw_sync_port=$port FNS="$T/fns.sh" FAKE="$T/fake.sh" \
            timeout 120 "$BB" sh -c '. "$FNS"; step s "$FAKE"' \
            </dev/null >"$T/out-$r" 2>&1 &
    done
    wait
    local s c n
    s=$(sed -n 's/^@@ROCESW step s rc //p' "$T/out-server")
    c=$(sed -n 's/^@@ROCESW step s rc //p' "$T/out-client")
    n=$(grep -c '^@@ROCESW attempt s ' "$T/out-client" || true)
    if [ "$s $c $n" = "$want" ]; then
        echo "selftest-steps: ${settings:-no fault}: $n attempt(s), then server rc $s, client rc $c: ok"
    else
        echo "selftest-steps: ${settings:-no fault}: got '$s $c $n', want '$want'" >&2
        sed 's/^/    /' "$T/out-server" "$T/out-client" >&2
        failed=1
    fi
}

scenario "" "0 0 1"
scenario "CRASH=server" "0 0 2"
scenario "CRASH=client" "0 0 2"
scenario "CQE=client" "0 0 2"
scenario "CQE=server" "0 0 2"
scenario "CQE_RPING=client" "0 0 2"
scenario "FAIL=client" "0 1 1"
scenario "FAIL=server" "1 0 1"
scenario "CRASH_ALWAYS=client" "0 139 4"
# rdma_cm: the client waits for the server's listener (no rejection, one attempt); a client
# that lost its connection gets the server stopped and both retry, well inside the 120 s this
# allows (the attempt's own limit is 150 s).
scenario "cm=1" "0 0 1"
scenario "cm=1 LATE=3" "0 0 1"
scenario "cm=1 HANG=server CONN=client" "0 0 2"
scenario "cm=1 CRASH=client" "0 0 2"
exit $failed

#!/bin/sh
# /init of the VM test guest (vm/build-guest.sh puts it in the initramfs): brings up
# virtio-net and Soft-RoCE (rdma_rxe), runs its half of the traffic against the other guest
# and reports on the serial console, between markers the host's vm/run.sh parses:
#   @@ROCESW step NAME rc N       a step's exit status (client: the test's; server: its half)
#   @@ROCESW attempt NAME K rc N peer M  one attempt of a step, with the other guest's status
#   @@ROCESW out NAME <line>      a step's output
#   @@ROCESW counter KEY VALUE    the guest's own counters after the traffic
#   @@ROCESW done                 the guest finished (it then powers off)
# Its settings come from the kernel command line (unknown name=value parameters reach init
# as environment variables):
#   rocesw_role=server|client  rocesw_ip=A.B.C.D  rocesw_peer=A.B.C.D  rocesw_peer_mac=MAC
#   rocesw_tclass=N (the GRH traffic class / IP TOS of the RDMA traffic; 106 = DSCP 26, ECT(0))
#   rocesw_iters=N (perftest's -n; default 500)  rocesw_sizes="64 1024 4096 65536" (the bandwidth tests')
#   rocesw_step_timeout=S (an attempt's time limit, default 150 s)
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t configfs configfs /sys/kernel/config 2>/dev/null
exec </dev/console >/dev/console 2>&1

say() { echo "@@ROCESW $*"; }
fail() { say "fatal $*"; say done; sync; poweroff -f; }

role=${rocesw_role:?}; ip=${rocesw_ip:?}; peer=${rocesw_peer:?}; peer_mac=${rocesw_peer_mac:?}
tclass=${rocesw_tclass:-106}; iters=${rocesw_iters:-500}; sizes=${rocesw_sizes:-64 1024 4096 65536}
server_ip=$ip; [ "$role" = client ] && server_ip=$peer

for m in $(cat /modules/order); do
    insmod /modules/$m.ko || fail "insmod $m"
done
ip link set lo up
ip link set eth0 up || fail "no eth0"
ip addr add "$ip/24" dev eth0
# A static neighbour: no ARP on the wire, so the interface counters are the test's traffic.
ip neigh replace "$peer" lladdr "$peer_mac" dev eth0 nud permanent
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0"
# rdma_cm connections (rping, perftest -R without -T) take this ToS.
mkdir -p /sys/kernel/config/rdma_cm/rxe0 2>/dev/null &&
    echo "$tclass" > /sys/kernel/config/rdma_cm/rxe0/ports/1/default_roce_tos
say "up role $role ip $ip kernel $(uname -r)"
ibv_devinfo -d rxe0 | grep -E 'state|active_mtu' | sed 's/^/@@ROCESW info /'
rdma link show | sed 's/^/@@ROCESW info /'

# One step. Each attempt listens (server) or connects (client) on its own port. A client of
# a TCP side channel (perftest without -R, ibv_rc_pingpong) retries connecting while the server
# is not listening yet (the two guests boot and run at different speeds): TCP's refusal says
# so unambiguously. An rdma_cm client cannot tell "not listening yet" from a connection the
# server took and then lost (under emulation the CM's own timeouts fire: the client saw a
# rejection while the server's perftest held the connection, and the client's retry then
# waited on a server that would never answer), so for rdma_cm steps (cm set) the server says
# when its listener is up (`rdma res show cm_id`) and the client connects once.
# After an attempt the client tells the server how it ended ("RC KIND"), then the server the
# client, over a TCP side channel, so both take the same decision; the server's test runs in
# the background meanwhile, and is stopped 10 s after a client that failed (it would otherwise
# wait out its time limit for a peer that is gone). KIND: ok; crash (rc >= 128: the process
# died of a signal, or the timeout or that stop ended a hang); cqe (a work completion with an
# error status: rxe's transport retries ran out, which a starved emulated vCPU causes); conn
# (the connection failed: an rdma_cm event other than ESTABLISHED, or no server); fail
# (anything else, such as a data check). An attempt is retried (up to 4 in all) only after a
# crash, cqe or conn on either side, never after a fail. The switch itself is judged by
# vm/check.py on what it counted (no drop, guests' counters equal to the switch's, no checksum
# or ICRC error), which a retry cannot hide; check.py lists every retry.
# The listening side reads the line in a child of nc (-e): nc -l with nothing to send on its
# stdin sometimes exits before it prints what it received (busybox 1.35, 3 times in 20 here).
receive_rc() {
    mkdir -p /tmp; rm -f "/tmp/peer-rc-$role"
    timeout 900 nc -l -p "$1" -e sh -c 'read x; echo "$x" > "/tmp/peer-rc-$0"' "$role" </dev/null
    cat "/tmp/peer-rc-$role" 2>/dev/null
}
# send_line HOST PORT LINE: until the peer listens, at most 600 s.
send_line() {
    n=0
    until echo "$3" | nc "$1" "$2" 2>/dev/null; do
        n=$((n + 1)); [ $n -gt 600 ] && return 1; sleep 1
    done
}
sync_port=${rocesw_sync_port:-9001}
# A peer's "RC KIND", or "? none" when it never answered.
checked_rc() {
    case "$1" in [0-9]*" "[a-z]*) echo "$1" ;; *) echo "? none" ;; esac
}
# Whether an rdma_cm listener is up on port $1.
listening() {
    rdma res show cm_id 2>/dev/null | grep -q "state LISTEN .*:$1 "
}
# How an attempt ended (see above): kind RC OUTPUT.
kind() {
    if [ "$1" -eq 0 ]; then echo ok
    elif [ "$1" -ge 128 ]; then echo crash
    else case "$2" in
        # perftest: "Completion with error", "Failed status N"; ibv_rc_pingpong: "Failed status
        # ... for wr_id"; rping: "cq completion failed status N".
        *"Completion with error"*|*"Failed status"*|*"completion failed status"*) echo cqe ;;
        # perftest: "Unexpected CM event bl blka N", "Unable to perform rdma_client function",
        # "Couldn't connect to"; rping: "cma event RDMA_CM_EVENT_REJECTED", "connect error".
        *"Unexpected CM event"*|*"RDMA_CM_EVENT_"*|*"rdma_client"*|*"connect error"*|*"Couldn't connect"*) echo conn ;;
        *) echo fail ;;
        esac
    fi
}
# An attempt's time limit, seconds. The longest steps need about 13 s at the rates measured with
# the host at load 10 (500 x 64 KiB at 2.6 MB/s; 500 round trips of 22 ms); a hang on both
# sides costs this long before the retry, so it is not much longer.
step_timeout=${rocesw_step_timeout:-150}
# Soft-RoCE's own view after each attempt (cumulative): whether a hung attempt moved packets,
# and whether its transport timed out and retried.
rxe_counts() {
    for c in sent_pkts rcvd_pkts completer_retry_err duplicate_request retry_exceeded_err send_rnr_err; do
        printf '%s=%s ' "$c" "$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/$c 2>/dev/null)"
    done
}
# The server's half of an attempt: the test in the background, the client told when an rdma_cm
# listener is up, the client's result awaited, the test stopped if the client failed. Sets rc,
# out and reply (the client's "RC KIND").
server_attempt() {
    mkdir -p /tmp; rm -f /tmp/step-out
    timeout "$step_timeout" "$@" -p "$port" >/tmp/step-out 2>&1 &
    pid=$!
    if [ -n "$cm" ]; then
        n=0
        while kill -0 "$pid" 2>/dev/null && ! listening "$port" && [ $n -lt 120 ]; do
            n=$((n + 1)); sleep 1
        done
        send_line "$peer" $((sync_port + 2)) ready
    fi
    reply=$(checked_rc "$(receive_rc $((sync_port + 1)))")
    case "$reply" in *" ok") ;; *)
        n=0
        while kill -0 "$pid" 2>/dev/null && [ $n -lt 10 ]; do n=$((n + 1)); sleep 1; done
        kill "$pid" 2>/dev/null ;;
    esac
    wait "$pid"; rc=$?
    out=$(cat /tmp/step-out)
}
# The client's half: waits for an rdma_cm server's word, connects (again while a TCP server is
# not listening yet). Sets rc and out.
client_attempt() {
    [ -n "$cm" ] && receive_rc $((sync_port + 2)) >/dev/null
    tries=0
    while :; do
        if [ -n "$no_addr" ]; then out=$(timeout "$step_timeout" "$@" -p "$port" 2>&1); else out=$(timeout "$step_timeout" "$@" -p "$port" -- "$server_ip" 2>&1); fi
        rc=$?
        [ $rc -eq 0 ] || [ -n "$cm" ] && break
        case "$out" in
        *"Couldn't connect"*|*"Connection refused"*)
            tries=$((tries + 1))
            echo "$out" | sed "s/^/@@ROCESW info try $name $attempt $tries rc $rc /"
            [ $tries -lt 90 ] && { sleep 1; continue; } ;;
        esac
        break
    done
}
step() {
    name=$1; shift
    attempt=0
    while :; do
        port=$((20000 + attempt))
        # An attempt near its time limit says what its connection and queue pairs look like
        # (a hang before rdma_cm connects differs from one in the middle of the traffic).
        ( sleep $((step_timeout - 5)) 2>/dev/null || exit 0
          { rdma res show cm_id; rdma res show qp; } 2>&1 | sed "s/^/@@ROCESW info stuck $name $attempt /" ) &
        watcher=$!
        if [ "$role" = server ]; then
            server_attempt "$@"
            k=$(kind "$rc" "$out")
            send_line "$peer" "$sync_port" "$rc $k"
        else
            client_attempt "$@"
            k=$(kind "$rc" "$out")
            send_line "$server_ip" $((sync_port + 1)) "$rc $k"
            reply=$(checked_rc "$(receive_rc "$sync_port")")
        fi
        kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
        echo "$out" | sed "s/^/@@ROCESW out $name /"
        peer_rc=${reply%% *}; peer_kind=${reply#* }
        say "attempt $name $attempt rc $rc kind $k peer $peer_rc $peer_kind"
        say "info rxe after $name $attempt: $(rxe_counts)"
        [ "$k" = ok ] && [ "$peer_kind" = ok ] && break
        case "$k $peer_kind" in *crash*|*cqe*|*conn*) retry=1 ;; *) retry= ;; esac
        [ -n "$retry" ] && [ $attempt -lt 3 ] || break
        attempt=$((attempt + 1))
    done
    say "step $name rc $rc"
}

# The client waits for the server's guest: ping until it answers, then the counted ping.
if [ "$role" = client ]; then
    n=0
    until ping -c 1 -W 1 "$peer" >/dev/null 2>&1; do
        n=$((n + 1)); [ $n -gt 300 ] && break
    done
    out=$(ping -c 5 -i 0.2 -W 2 "$peer" 2>&1); rc=$?
    echo "$out" | sed 's/^/@@ROCESW out ping /'
    say "step ping rc $rc"
fi

# The client's command line is the server's plus "-- SERVER_IP" (perftest and
# ibv_rc_pingpong take the server's address last), unless no_addr is set (rping: -a).
PT="-d rxe0 -i 1 -x 1 -F -n $iters"

step rc_pingpong ibv_rc_pingpong -d rxe0 -g 1 -c -s 4096 -n 100
no_addr=1 cm=1
step rping rping -$([ "$role" = server ] && echo s || echo c) -a "$server_ip" -C 100 -S 64 -V -v
no_addr= cm=
for s in $sizes; do
    step "send_bw_$s" ib_send_bw $PT --tclass=$tclass -s "$s"
    step "write_bw_$s" ib_write_bw $PT --tclass=$tclass -s "$s"
    # -z: perftest's exchange over an rdma_cm connection (the CM's MADs and an rdma_cm RC
    # connection through the switch, with the ToS above), the test's QP its own at --tclass.
    # Not -R: perftest 4.5 then connects the test QP by a second rdma_cm connection that races
    # the server's second listen (the client, rejected, died of SIGSEGV on 3 of 8 attempts in
    # one run here); rping covers traffic on a QP rdma_cm connected.
    cm=1; step "read_bw_rdma_cm_$s" ib_read_bw $PT -z --tclass=$tclass -s "$s"; cm=
done
for s in 64 1024 4096; do
    step "send_lat_$s" ib_send_lat -d rxe0 -i 1 -x 1 -F -n "$iters" --tclass=$tclass -s "$s"
done

# Both guests end here. The counters must hold every frame of the run, the last TCP closes
# of the side channel among them (check.py compares them with the switch's, which counts to
# its exit): after 3 s, wait until the interface's counters have stood still for 3 s in a row
# (a starved emulated vCPU can take seconds to send its last FIN or take in what waits in its
# ring), at most 60 s more.
sleep 3
net_counts() { cat /sys/class/net/eth0/statistics/rx_packets /sys/class/net/eth0/statistics/tx_packets; }
last=$(net_counts); still=0; waited=0
while [ $still -lt 3 ] && [ $waited -lt 60 ]; do
    sleep 1; waited=$((waited + 1))
    now=$(net_counts)
    if [ "$now" = "$last" ]; then still=$((still + 1)); else still=0; last=$now; fi
done
say "info counters settled after $((3 + waited)) s"
for c in rx_packets tx_packets rx_bytes tx_bytes rx_errors rx_dropped tx_dropped; do
    say "counter eth0.$c $(cat /sys/class/net/eth0/statistics/$c)"
done
# IpExt's ECN counters (InNoECTPkts InECT1Pkts InECT0Pkts InCEPkts) and checksum errors.
awk '/^IpExt:/ { if (!h) { for (i = 2; i <= NF; i++) k[i] = $i; h = 1 } else for (i = 2; i <= NF; i++) print "@@ROCESW counter IpExt." k[i], $i }' /proc/net/netstat
awk '/^(Ip|Udp|Tcp|Icmp):/ { t = $1; sub(":", "", t); if (!(t in h)) { for (i = 2; i <= NF; i++) k[t, i] = $i; h[t] = 1 } else for (i = 2; i <= NF; i++) if (k[t, i] ~ /Csum|Errors|Discards/) print "@@ROCESW counter " t "." k[t, i], $i }' /proc/net/snmp
for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
    [ -f "$f" ] && say "counter rxe.$(basename "$f") $(cat "$f")"
done
dmesg | grep -iE 'rxe|icrc|csum|checksum' | sed 's/^/@@ROCESW dmesg /'
say done
sync
poweroff -f

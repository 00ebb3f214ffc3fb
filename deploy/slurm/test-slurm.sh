#!/bin/bash
# A 4-shard Slurm array of a tune sweep and of a conform fleet on a real one-node Slurm, merged
# and compared byte for byte with the unsharded runs. Run as root (dataplane/tests/cluster.rs
# runs it; .ci/install-deps installs slurm-wlm and munge):
#
#   deploy/slurm/test-slurm.sh ROCESW_BINARY
#
# Starts munged, slurmctld and slurmd on localhost with a config, key, sockets, state and logs
# of its own in a temporary directory (ports from the pid, so a Slurm already running is left
# alone), submits through submit.sh, waits for the merges, compares, and on any exit stops the
# three daemons by their pid files and removes the directory. SLURM_TEST_KEEP=1 keeps it.
set -euo pipefail
rocesw=$(realpath "${1:?usage: $0 ROCESW_BINARY}")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
for b in munged slurmctld slurmd sbatch squeue scontrol runuser; do
    command -v "$b" >/dev/null || { echo "test-slurm: $b missing (apt-get install slurm-wlm munge)" >&2; exit 3; }
done
[ "$(id -u)" = 0 ] || { echo "test-slurm: needs root" >&2; exit 3; }

t=$(mktemp -d /tmp/rocesw-slurm.XXXXXX)
chmod 755 "$t"
stop() {
    rc=$?
    for d in slurmd slurmctld munged; do
        f=$t/$d.pid
        [ $d = munged ] && f=$t/munge/munged.pid
        if [ -s "$f" ]; then
            pid=$(cat "$f")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    if [ $rc != 0 ]; then
        echo "test-slurm: failed ($rc); the logs:" >&2
        for f in "$t"/*.log "$t"/munge/*.log "$t"/run/*/*.out; do
            [ -f "$f" ] && { echo "== $f" >&2; tail -n 30 "$f" >&2; }
        done
    fi
    if [ "${SLURM_TEST_KEEP:-}" = 1 ]; then echo "test-slurm: kept $t" >&2; else rm -rf "$t"; fi
    exit $rc
}
trap stop EXIT
trap 'exit 130' INT TERM

# munge: a key of our own, its socket, pid and log in $t/munge (owned by munge, as munged wants).
# The key's directory is munge's alone; the socket's must be searchable by all.
mkdir -p "$t/munge" "$t/munge-sock"
dd if=/dev/urandom of="$t/munge/munge.key" bs=1 count=1024 status=none
chown -R munge:munge "$t/munge" "$t/munge-sock"
chmod 700 "$t/munge"
chmod 755 "$t/munge-sock"
chmod 400 "$t/munge/munge.key"
sock=$t/munge-sock/munge.sock
runuser -u munge -- munged --socket="$sock" --key-file="$t/munge/munge.key" \
    --pid-file="$t/munge/munged.pid" --log-file="$t/munge/munged.log" --seed-file="$t/munge/munged.seed"

# Slurm: one node (this host, its cores), one partition, root as SlurmUser.
host=$(hostname -s)
port=$((20000 + $$ % 20000))
mkdir -p "$t/state" "$t/spool" "$t/run"
cat >"$t/slurm.conf" <<CONF
ClusterName=rocesw$$
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$t/state
SlurmdSpoolDir=$t/spool
SlurmctldPidFile=$t/slurmctld.pid
SlurmdPidFile=$t/slurmd.pid
SlurmctldLogFile=$t/slurmctld.log
SlurmdLogFile=$t/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
MinJobAge=600
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=rocesw Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$t/slurm.conf
slurmctld
slurmd
for i in $(seq 60); do
    state=$(scontrol show node "$host" 2>/dev/null | sed -n 's/.*State=\([A-Z+]*\).*/\1/p' | head -1)
    case $state in IDLE*) break ;; esac
    [ "$i" = 60 ] && { echo "test-slurm: node not idle after 30 s (state ${state:-none})" >&2; exit 1; }
    sleep 0.5
done
echo "test-slurm: slurmctld and slurmd up on $host:$port ($(nproc) CPUs)" >&2

# The inputs: the shipped quick tune sweep on the shipped switch; a fleet of five configs
# (the two bundled ones, a third switch, a file that is no config_db.json) over four shards.
topo=$repo/examples/tune/topology.toml
dflt=$repo/configs/default.toml
fleet=$t/fleet
mkdir -p "$fleet"
cp "$repo/configs/sonic/spectrum1-t1.json" "$fleet/leaf01.json"
cp "$repo/configs/sonic/tomahawk2-t1.json" "$fleet/leaf02.json"
cp "$repo/configs/sonic/spectrum1-t1.json" "$fleet/leaf03.json"
cp "$repo/configs/sonic/tomahawk2-t1.json" "$fleet/spine01.json"
echo '{"not": "a config_db"}' >"$fleet/broken.json"
tune_args=(--topology "$topo" --default-config "$dflt" --quick --threads 1)
conform_args=(--config "$fleet" --only PFCtest,LossyQueueTest,WRRtest)

# The unsharded runs, in $t/local (relative --output-dir: the fragment's header names it).
mkdir -p "$t/local" "$t/run/tune" "$t/run/conform"
start=$(date +%s%N)
(cd "$t/local" && "$rocesw" tune "${tune_args[@]}" --quiet --output-dir out)
local_tune=$(( ($(date +%s%N) - start) / 1000000 ))
set +e
(cd "$t/local" && "$rocesw" conform sonic "${conform_args[@]}" --output-dir fleet-out --junit fleet-out/junit.xml >/dev/null)
rc=$?
set -e
[ $rc = 1 ] || { echo "test-slurm: the unsharded fleet exited $rc, expected 1 (broken.json fails)" >&2; exit 1; }
echo "test-slurm: unsharded runs done (tune ${local_tune} ms)" >&2

# The same as Slurm arrays of 4 shards, the merges after them.
export ROCESW=$rocesw
start=$(date +%s%N)
tmerge=$(cd "$t/run/tune" && SBATCH_OPTS="--chdir=$t/run/tune" "$here/submit.sh" tune 4 parts out -- "${tune_args[@]}")
cmerge=$(cd "$t/run/conform" && SBATCH_OPTS="--chdir=$t/run/conform" MERGE_ARGS="--junit fleet-out/junit.xml" \
    "$here/submit.sh" conform 4 parts fleet-out -- "${conform_args[@]}")
for i in $(seq 600); do
    [ -z "$(squeue -h -o %i)" ] && break
    [ "$i" = 600 ] && { echo "test-slurm: jobs still queued after 300 s:" >&2; squeue >&2; exit 1; }
    sleep 0.5
done
slurm_wall=$(( ($(date +%s%N) - start) / 1000000 ))
job_state() { scontrol show job "$1" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1; }
[ "$(job_state "$tmerge")" = COMPLETED ] || { echo "test-slurm: the tune merge job $tmerge: $(job_state "$tmerge")" >&2; exit 1; }
# The conform merge exits 1 (a switch failed: broken.json): Slurm says FAILED, with the files written.
cstate=$(job_state "$cmerge")
[ "$cstate" = FAILED ] || { echo "test-slurm: the conform merge job $cmerge: $cstate, expected FAILED (exit 1: a switch failed)" >&2; exit 1; }
grep -q "ExitCode=1:0" <(scontrol show job "$cmerge") || { echo "test-slurm: the conform merge's exit code is not 1" >&2; exit 1; }

# Every array task ran, each with its own index.
ls "$t/run/tune/parts" "$t/run/conform/parts" >&2
for i in 0 1 2 3; do
    [ -f "$t/run/conform/parts/conform.part.s${i}of4.json" ] || { echo "test-slurm: conform shard $i wrote no part" >&2; exit 1; }
    [ -f "$t/run/tune/parts/tune.part.r01.s${i}of4.json" ] || { echo "test-slurm: tune shard $i of round 1 wrote no part" >&2; exit 1; }
done

# Byte for byte.
for f in tune.json tune.svg tuned.toml; do
    cmp "$t/local/out/$f" "$t/run/tune/out/$f"
done
for f in fleet.json fleet.txt junit.xml; do
    cmp "$t/local/fleet-out/$f" "$t/run/conform/fleet-out/$f"
done
grep -q '"hosts"' "$t/run/tune/out/shards.json"
grep -q '"hosts"' "$t/run/conform/fleet-out/shards.json"
rounds=$(ls "$t/run/tune/parts" | sed -n 's/^tune\.part\.r\([0-9]*\)\..*/\1/p' | sort -u | wc -l)
echo "test-slurm: OK: tune (quick, $rounds rounds of 4 shards) and conform (5 configs, 4 shards) merged byte-identical to the unsharded runs; Slurm wall time ${slurm_wall} ms (both sweeps), unsharded tune ${local_tune} ms" >&2

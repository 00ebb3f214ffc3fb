# Sourced by the two-port DPDK benchmarks (dpdk_null_vs_testpmd.sh, dpdk_null_instructions.sh)
# and shard_scaling.sh, not run. ROOT must be set. The two-port benchmarks take their frames
# from FRAMES:
#   FRAMES=null (default): two net_null ports of all-zero frames (dpdk_null_config.py): no
#     destination anyone knows, no IP header: flooded, default class;
#   FRAMES=roce: two net_pcap ports, each replaying 256 RoCEv2 RC SEND ONLY frames (DSCP 26,
#     ECT(0)) from memory (infinite_rx=1) to the host on the other port, static FDB, learning
#     off (shard_config.py, PAIRS "one"); TX=drop (default: no tx_pcap, the driver frees what
#     it is sent) or TX=null (tx_pcap=/dev/null).
# Both: configs/default.toml (the full QoS pipeline) at 400G, one worker pinned to CPU 1.
FRAMES=${FRAMES:-null}
case "$FRAMES" in
  null | roce) ;;
  *) echo "FRAMES must be null or roce, not $FRAMES" >&2; exit 2 ;;
esac

# frames_config SIZE DIR: writes DIR/switch.toml (and DIR/port0.pcap, port1.pcap with roce).
frames_config() {
  mkdir -p "$2"
  if [ "$FRAMES" = roce ]; then
    python3 "$ROOT/bench/scripts/shard_config.py" "$ROOT/configs/default.toml" "$2" one 1 "$1" "${TX:-drop}"
  else
    python3 "$ROOT/bench/scripts/dpdk_null_config.py" "$ROOT/configs/default.toml" "$2/switch.toml" "$1"
  fi
}

# frames_vdevs TOML: the config's ports as EAL arguments, "--vdev" and its string a line each,
# so that testpmd runs on the very vdev strings (and captures) rocesw was given.
frames_vdevs() {
  python3 -c 'import re,sys
for v in re.findall(r"^dpdk = \"(.*)\"$", open(sys.argv[1]).read(), re.M):
    print("--vdev"); print(v)' "$1"
}

# rate SUMMARY: frames rocesw sent, all ports, a microsecond of uptime (Mpps).
rate() {
  python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(round(sum(p['tx_packets'] for p in d['switch']['ports'])/d['uptime_ns']*1e3,2))" "$1"
}

"""Writes the inputs of the net_pcap benchmarks: DPDK net_pcap ports, each replaying one
capture of RoCEv2 frames in a loop from memory (infinite_rx=1) to the host on its partner port;
the default QoS pipeline (configs/default.toml) with 400G ports so the line-rate pacer is not
what limits, static FDB entries for the hosts (learning off), and ports assigned to workers.
Used by the many-cores benchmark (bench/README.md, "Many cores": shard_scaling.sh, four ports)
and, with PAIRS "one" (two ports), by the two-port benchmarks on RoCEv2 frames
(dpdk_null_vs_testpmd.sh and dpdk_null_instructions.sh with FRAMES=roce, through
dpdk_frames.sh). dpdk_null_config.py imports base_config from here.

    python3 shard_config.py configs/default.toml DIR PAIRS WORKERS [SIZE] [TX]

PAIRS: "local" (0<->1, 2<->3), "cross" (0<->2, 1<->3), or "one" (two ports only, 0<->1).
WORKERS: 1 (every port on worker 0, pinned to CPU 1) or 2 (the first half of the ports on
worker 0 pinned to CPU 0, the second half on worker 1 pinned to CPU 1: ports 0,1 and 2,3, or
with "one" port 0 and port 1). SIZE: frame length in bytes without FCS (default 1024). TX:
"null" (default: each port writes what it sends into /dev/null, through libpcap, which reads
every byte of the frame with the CPU) or "drop" (no tx_pcap: the driver frees what it is sent
without reading it, as a NIC's DMA would leave the CPU's caches alone). Writes DIR/switch.toml
and DIR/port{0..N-1}.pcap (256 frames each, PSN 0..255).
"""
import struct
import sys
import zlib

PARTNERS = {"local": {0: 1, 1: 0, 2: 3, 3: 2}, "cross": {0: 2, 2: 0, 1: 3, 3: 1}, "one": {0: 1, 1: 0}}
TX_ARGS = {"null": ",tx_pcap=/dev/null", "drop": ""}


def mac(i):
    return bytes([0x02, 0x00, 0x5E, 0x10, 0, i])


def checksum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return (~s) & 0xFFFF


def frame(src, dst, psn, size):
    """A RoCEv2 RC SEND ONLY frame of `size` bytes (no FCS), DSCP 26 (lossless), ECT(0)."""
    payload = bytes(size - 14 - 20 - 8 - 12 - 4)
    bth = struct.pack("!BBHII", 0x04, 0x40, 0xFFFF, 9, psn & 0xFFFFFF)
    udp_len = 8 + len(bth) + len(payload) + 4
    udp = struct.pack("!HHHH", 49152 + src, 4791, udp_len, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, (26 << 2) | 2, 20 + udp_len, 0, 0x4000, 64, 17, 0,
                     bytes([198, 18, 0, src + 1]), bytes([198, 18, 0, dst + 1]))
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    eth = mac(dst) + mac(src) + b"\x08\x00"
    icrc = struct.pack("<I", zlib.crc32(bth + payload) & 0xFFFFFFFF)
    return eth + ip + udp + bth + payload + icrc


def write_pcap(path, src, dst, size):
    """256 frames from the host on port `src` to the host on port `dst`, PSN 0..255."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for psn in range(256):
            fr = frame(src, dst, psn, size)
            f.write(struct.pack("<IIII", 0, psn, len(fr), len(fr)) + fr)


def base_config(default):
    """configs/default.toml without its ports, at 400G, FDB learning off."""
    t = open(default).read()
    chunks = t.split("\n[[port]]\n")
    kept = chunks[0] + "".join(c.split("\n", 1)[1] if "\n" in c else "" for c in chunks[1:])
    return kept.replace('speed = "25G"', 'speed = "400G"').replace("learning = true", "learning = false")


def main(default, out, pairs, workers, size=1024, tx="null"):
    tx_arg = TX_ARGS[tx]
    partner = PARTNERS[pairs]
    ports = len(partner)
    for port in range(ports):
        write_pcap(f"{out}/port{port}.pcap", port, partner[port], size)
    kept = base_config(default)
    statics = ", ".join(f'{{ mac = "02:00:5e:10:00:{i:02x}", port = {i} }}' for i in range(ports))
    kept = kept.replace("[fdb]\n", f"[fdb]\nstatic = [{statics}]\n", 1)
    for i in range(ports):
        w = i * workers // ports
        kept += (f'\n[[port]]\nid = {i}\nworker = {w}\n'
                 f'dpdk = "net_pcap{i},rx_pcap={out}/port{i}.pcap{tx_arg},infinite_rx=1"\n')
    run = f"[run]\nworkers = {workers}\ncores = {[1] if workers == 1 else [0, 1]}"
    kept = kept.replace("[run]", run, 1) if "[run]" in kept else kept + "\n" + run + "\n"
    open(f"{out}/switch.toml", "w").write(kept)


if __name__ == "__main__":
    a = sys.argv
    main(a[1], a[2], a[3], int(a[4]), int(a[5]) if len(a) > 5 else 1024, a[6] if len(a) > 6 else "null")

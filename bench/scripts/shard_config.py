"""Writes the inputs of the many-cores benchmark (bench/README.md, "Many cores"): four DPDK
net_pcap ports, each replaying one capture of 1 KiB RoCEv2 frames in a loop from memory
(infinite_rx=1) to the host on its partner port, transmitting into /dev/null; the default QoS
pipeline (configs/default.toml) with 400G ports so the line-rate pacer is not what limits,
static FDB entries for the four hosts (learning off), and ports assigned to workers.

    python3 shard_config.py configs/default.toml DIR PAIRS WORKERS [SIZE] [TX]

PAIRS: "local" (0<->1, 2<->3) or "cross" (0<->2, 1<->3). WORKERS: 1 (every port on worker 0,
pinned to CPU 1) or 2 (ports 0,1 on worker 0 pinned to CPU 0, ports 2,3 on worker 1 pinned to
CPU 1). TX: "null" (default: each port writes what it sends into /dev/null, through libpcap,
which reads every byte of the frame with the CPU) or "drop" (no tx_pcap: the driver frees what
it is sent without reading it, as a NIC's DMA would leave the CPU's caches alone). Writes
DIR/switch.toml and DIR/port{0..3}.pcap.
"""
import struct
import sys
import zlib

default, out, pairs, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
size = int(sys.argv[5]) if len(sys.argv) > 5 else 1024
tx = sys.argv[6] if len(sys.argv) > 6 else "null"
tx_arg = {"null": ",tx_pcap=/dev/null", "drop": ""}[tx]
partner = {"local": {0: 1, 1: 0, 2: 3, 3: 2}, "cross": {0: 2, 2: 0, 1: 3, 3: 1}}[pairs]


def mac(i):
    return bytes([0x02, 0x00, 0x5E, 0x10, 0, i])


def checksum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return (~s) & 0xFFFF


def frame(src, dst, psn):
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


for port in range(4):
    with open(f"{out}/port{port}.pcap", "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for psn in range(256):
            fr = frame(port, partner[port], psn)
            f.write(struct.pack("<IIII", 0, psn, len(fr), len(fr)) + fr)

t = open(default).read()
chunks = t.split("\n[[port]]\n")
kept = chunks[0] + "".join(c.split("\n", 1)[1] if "\n" in c else "" for c in chunks[1:])
kept = kept.replace('speed = "25G"', 'speed = "400G"').replace("learning = true", "learning = false")
statics = ", ".join(f'{{ mac = "02:00:5e:10:00:{i:02x}", port = {i} }}' for i in range(4))
kept = kept.replace("[fdb]\n", f"[fdb]\nstatic = [{statics}]\n", 1)
for i in range(4):
    w = 0 if workers == 1 else i // 2
    kept += (f'\n[[port]]\nid = {i}\nworker = {w}\n'
             f'dpdk = "net_pcap{i},rx_pcap={out}/port{i}.pcap{tx_arg},infinite_rx=1"\n')
run = f"[run]\nworkers = {workers}\ncores = {[1] if workers == 1 else [0, 1]}"
kept = kept.replace("[run]", run, 1) if "[run]" in kept else kept + "\n" + run + "\n"
open(f"{out}/switch.toml", "w").write(kept)

#!/usr/bin/env python3
"""A switch config the size of today's AI-fabric switches, for the memory and port-count goals
of issue 50 (bench/README.md, "Packet storage by what a frame takes").

configs/default.toml with its [buffer] and ports replaced: PORTS ports named as SONiC names
them (Ethernet0, Ethernet4, ... Ethernet2044 for 512; id = the number in the name), a buffer of
SIZE bytes in CELL-byte cells, at SPEED with MTU 9100. The defaults are an NVIDIA SN5600's
(sonic-buildimage device/mellanox/x86_64-nvidia_sn5600-r0/Mellanox-SN5600-C224O8/
buffers_defaults_t1.j2: ingress_lossless 133,643,264 B + egress_lossless 158,229,504 B, 192 B
cells) with 64 ports:

    bench/scripts/big_config.py > sn5600.toml
    bench/scripts/big_config.py --ports 256 > sn5600-256.toml
    bench/scripts/big_config.py --ports 512 --size 167772160 --cell 256 --speed 100G > th5.toml

With --captures DIR every port is a capture-file port (`rocesw run` with no interface): the first
four read DIR/port0.pcap ... DIR/port3.pcap (examples/incast), the others receive nothing, and
every port writes what it sends to OUT/EthernetN.pcap (--outputs OUT, default out): the
real-time switch's start-up memory, measured.
"""
import argparse
import pathlib
import re

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--ports", type=int, default=64, help="ports (Ethernet0, Ethernet4, ...)")
ap.add_argument("--size", type=int, default=133_643_264 + 158_229_504, help="buffer.size, bytes")
ap.add_argument("--cell", type=int, default=192, help="buffer.cell, bytes")
ap.add_argument("--speed", default="400G", help="port_defaults.speed")
ap.add_argument("--mtu", type=int, default=9100, help="port_defaults.mtu")
ap.add_argument("--captures", help="capture-file ports: the first four read DIR/portN.pcap")
ap.add_argument("--outputs", default="out", help="with --captures: where the ports write")
a = ap.parse_args()

text = (pathlib.Path(__file__).resolve().parents[2] / "configs" / "default.toml").read_text()
text = re.sub(r'(?m)^cell = .*$', f'cell = "{a.cell}B"', text, count=1)
text = re.sub(r'(?m)^size = .*$', f'size = "{a.size}B"', text, count=1)
text = re.sub(r'(?m)^speed = .*$', f'speed = "{a.speed}"', text, count=1)
text = re.sub(r'(?m)^mtu = .*$', f'mtu = {a.mtu}', text, count=1)


def pcap(i):
    if a.captures is None:
        return ""
    out = f'output = "{pathlib.Path(a.outputs).resolve() / f"Ethernet{4 * i}.pcap"}"'
    if i < 4:
        return f'pcap = {{ input = "{pathlib.Path(a.captures).resolve() / f"port{i}.pcap"}", {out} }}\n'
    return f"pcap = {{ {out} }}\n"


ports = "".join(f'[[port]]\nid = {4 * i}\nname = "Ethernet{4 * i}"\n{pcap(i)}\n' for i in range(a.ports))
text = re.sub(r'(?ms)^\[\[port\]\].*?(?=^\[(?!\[port\]\])[a-z])', ports, text, count=1)
print(text, end="")

"""Writes the config of the net_null benchmarks (bench/README.md, "rocesw on DPDK ports"):
configs/default.toml (the full QoS pipeline) with two net_null ports of `size`-byte frames;
port speed 400G so the line rate pacer is not what limits; learning off, so every frame
(net_null's are all zeros: unknown destination) is flooded to the other port; the one worker
pinned to CPU 1.

    python3 dpdk_null_config.py configs/default.toml out.toml 64
"""
import sys

default, out, size = sys.argv[1], sys.argv[2], sys.argv[3]
t = open(default).read()
chunks = t.split('\n[[port]]\n')
kept = chunks[0] + ''.join(c.split('\n', 1)[1] if '\n' in c else '' for c in chunks[1:])
kept = kept.replace('speed = "25G"', 'speed = "400G"').replace('learning = true', 'learning = false')
for i in range(2):
    kept += f'\n[[port]]\nid = {i}\ndpdk = "net_null{i},size={size}"\n'
kept = kept.replace('[run]', '[run]\ncores = [1]', 1) if '[run]' in kept else kept + '\n[run]\ncores = [1]\n'
open(out, 'w').write(kept)

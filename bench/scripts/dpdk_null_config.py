"""Writes the config of the net_null benchmarks (bench/README.md, "rocesw on DPDK ports"):
configs/default.toml (the full QoS pipeline) with two net_null ports of `size`-byte frames;
port speed 400G so the line rate pacer is not what limits; learning off, so every frame
(net_null's are all zeros: unknown destination) is flooded to the other port; the one worker
pinned to CPU 1. The same benchmarks on RoCEv2 frames: shard_config.py's PAIRS "one"
(dpdk_frames.sh chooses between the two with FRAMES=null|roce).

    python3 dpdk_null_config.py configs/default.toml out.toml 64
"""
import os
import sys

sys.dont_write_bytecode = True   # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shard_config import base_config  # noqa: E402

default, out, size = sys.argv[1], sys.argv[2], sys.argv[3]
kept = base_config(default)
for i in range(2):
    kept += f'\n[[port]]\nid = {i}\ndpdk = "net_null{i},size={size}"\n'
kept = kept.replace('[run]', '[run]\ncores = [1]', 1) if '[run]' in kept else kept + '\n[run]\ncores = [1]\n'
open(out, 'w').write(kept)

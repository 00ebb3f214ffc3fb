#!/usr/bin/env python3
"""vm/switch.toml with its sockets in DIR instead of /run/rocesw, on stdout:
   python3 vm/switch_config.py DIR > DIR/switch.toml
vm/run.sh's phases use it. The directory is put in literally (run.sh used a sed expression made
from it, so a `&` or `#` in VM_WORK put the sockets somewhere else), and one that the config
cannot carry is refused with a message naming it: the path goes into TOML strings and into DPDK
device arguments (`net_vhost0,iface=PATH`), where `"`, `\\` or a control character break the
TOML and a `,` or `=` splits the device's arguments."""
import os
import sys

SWITCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "switch.toml")


def config(directory):
    bad = sorted({c for c in directory if c in '",=\\' or ord(c) < 0x20 or ord(c) == 0x7f})
    if bad:
        raise ValueError(f"{directory!r} (VM_WORK): the switch's config cannot name sockets in it "
                         f"(it holds {' '.join(repr(c) for c in bad)}): choose another directory")
    with open(SWITCH) as f:
        text = f.read()
    return text.replace("/run/rocesw/", directory.rstrip("/") + "/")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: vm/switch_config.py DIR")
    try:
        sys.stdout.write(config(sys.argv[1]))
    except (ValueError, OSError) as e:
        sys.exit(f"switch_config.py: {e}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Self-test of what vm/run.sh and vm/build-guest.sh do with the directories the environment
names, in a second, without QEMU or Debian's packages. vm/run.sh runs it before the guests.
   python3 vm/test_scripts.py

- run.sh writes each phase's switch config with the sockets in the phase's directory: the
  very line of run.sh that does it is run here on a directory holding `&` and `#` (a sed
  expression made from the path put the sockets elsewhere), and the config must name exactly
  that directory; a directory the config cannot carry (`,` splits DPDK's device arguments,
  `"` breaks the TOML) is refused.
- build-guest.sh deletes DIR/stage and DIR/root: it must refuse `/` and a non-empty directory
  it did not make (VM_GUEST_DIR=/ deleted /root), and take a new one (it then stops at the
  stand-in apt-cache, which knows no kernel)."""
import os
import re
import subprocess
import sys
import tempfile
import tomllib

VM = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(VM)
failures = []


def check(ok, what):
    print(f"test_scripts: {'ok' if ok else 'FAIL'}: {what}")
    if not ok:
        failures.append(what)


def phase_config(directory):
    """run.sh's own line that writes a phase's switch.toml, run with `dir` set."""
    with open(os.path.join(VM, "run.sh")) as f:
        lines = [l for l in f if re.search(r'> "\$dir/switch\.toml"', l)]
    assert len(lines) == 1, f"run.sh: {len(lines)} lines write $dir/switch.toml"
    p = subprocess.run(["bash", "-c", lines[0]], env={**os.environ, "REPO": REPO, "dir": directory},
                       capture_output=True, text=True)
    return p.returncode, p.stderr


def switch_config_places_the_sockets_literally():
    with tempfile.TemporaryDirectory() as t:
        d = os.path.join(t, "a&b#c")
        os.mkdir(d)
        rc, err = phase_config(d)
        check(rc == 0, f"a phase directory with & and # is taken ({err.strip()})")
        if rc != 0:
            return
        with open(os.path.join(d, "switch.toml"), "rb") as f:
            cfg = tomllib.load(f)
        devices = [p.get("dpdk", "") for p in cfg["port"]]
        want = [f"net_vhost{i},iface={d}/vm{i}.sock" for i in range(2)]
        check(devices == want, f"the sockets are in the phase directory: {devices}")
        for bad in ["a,b", 'a"b']:
            d = os.path.join(t, bad)
            os.mkdir(d)
            rc, err = phase_config(d)
            check(rc != 0 and "VM_WORK" in err and not os.path.getsize(os.path.join(d, "switch.toml")),
                  f"a directory holding {bad[1]!r} is refused by name ({err.strip()})")


def build_guest(directory, stubs):
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"}
    p = subprocess.run([os.path.join(VM, "build-guest.sh"), directory], env=env, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stderr


def build_guest_refuses_a_directory_it_did_not_make():
    with tempfile.TemporaryDirectory() as t:
        stubs = os.path.join(t, "bin")
        os.mkdir(stubs)
        # apt-cache knows no kernel: a directory the guard lets through stops there, before
        # any download or deletion.
        for tool in ["apt-get", "apt-cache", "dpkg-deb", "readelf"]:
            path = os.path.join(stubs, tool)
            with open(path, "w") as f:
                f.write("#!/bin/sh\nexit 0\n")
            os.chmod(path, 0o755)
        foreign = os.path.join(t, "someones")
        os.makedirs(os.path.join(foreign, "root"))
        with open(os.path.join(foreign, "root", "keep"), "w") as f:
            f.write("mine")
        rc, err = build_guest(foreign, stubs)
        check(rc != 0 and "refusing" in err and "VM_GUEST_DIR" in err,
              f"a non-empty directory it did not make is refused ({err.strip()})")
        check(os.path.exists(os.path.join(foreign, "root", "keep")), "and nothing in it deleted")
        rc, err = build_guest("/", stubs)
        check(rc != 0 and "refusing" in err and "in /" in err, f"/ is refused ({err.strip()})")
        rc, err = build_guest(os.path.join(t, "new"), stubs)
        check(rc != 0 and "refusing" not in err and "apt knows no linux-image-amd64" in err,
              f"a new directory is taken ({err.strip()})")
        check(os.path.exists(os.path.join(t, "new", ".rocesw-vm-guest")), "and marked as the guest's")
        rc, err = build_guest(os.path.join(t, "new"), stubs)
        check("refusing" not in err, f"and taken again ({err.strip()})")


switch_config_places_the_sockets_literally()
build_guest_refuses_a_directory_it_did_not_make()
if failures:
    sys.exit(f"test_scripts: {len(failures)} failed")
print("test_scripts: all passed")

#!/usr/bin/env python3
"""Deploy or destroy a containerlab topology's `kind: linux` nodes and veth links with plain
docker and iproute2, as containerlab does, where containerlab itself is not installable.

    docker/clab.py deploy  -t docker/rocesw.clab.yml
    docker/clab.py labjson -t docker/rocesw.clab.yml      # rocegen's --lab file for its hosts
    docker/clab.py destroy -t docker/rocesw.clab.yml

What it does, per containerlab's documented behaviour for kind: linux:
- each node is a container `clab-<name>-<node>` (image, entrypoint, cmd, user, env, binds
  relative to the topology file's directory, cap-add, sysctls, labels), started with no network
  (containerlab would add its management network on eth0; nothing here uses it);
- its network namespace is named after the container (/var/run/netns/clab-<name>-<node>, made
  with `ip netns attach`), so `ip netns exec` and `rocegen --netns` reach it;
- each link is a veth pair, one end moved into each container under the endpoint's name, with
  the link's mtu (containerlab's default 9500), then up;
- then each node's `exec` commands run in it (`docker exec`), in order.
A deploy that fails part way removes what it made (containers, namespace names, veths left on
the host), so a failed deploy leaves the host as it found it; `destroy` removes a lab's
containers, namespace names and any veth of its left on the host (a deploy killed mid-way).
Any key of the file it does not implement is an error, not silently ignored. Needs root.
"""
import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys

import yaml

NODE_KEYS = {"kind", "image", "entrypoint", "cmd", "user", "env", "binds", "cap-add",
             "sysctls", "labels", "exec"}
LINK_KEYS = {"endpoints", "mtu"}


class Error(Exception):
    pass


def run(*argv, check=True, capture=False):
    p = subprocess.run(argv, text=True, stdout=subprocess.PIPE if capture else None,
                       stderr=subprocess.PIPE)
    if check and p.returncode != 0:
        raise Error(f"`{shlex.join(argv)}` failed ({p.returncode}): {p.stderr.strip()}")
    return p


def load(path):
    with open(path) as f:
        topo = yaml.safe_load(f)
    if not isinstance(topo, dict) or "name" not in topo or "topology" not in topo:
        raise Error(f"{path}: expected a containerlab topology (name, topology)")
    t = topo["topology"]
    defaults = t.get("defaults", {}) or {}
    nodes = {}
    for name, node in (t.get("nodes") or {}).items():
        merged = dict(defaults)
        merged.update(node or {})
        unknown = set(merged) - NODE_KEYS
        if unknown:
            raise Error(f"{path}: node {name}: {sorted(unknown)} not implemented by clab.py")
        if merged.get("kind") != "linux":
            raise Error(f"{path}: node {name}: kind {merged.get('kind')!r}: only linux is implemented")
        if "image" not in merged:
            raise Error(f"{path}: node {name}: no image")
        nodes[name] = merged
    links = []
    for i, link in enumerate(t.get("links") or []):
        unknown = set(link) - LINK_KEYS
        if unknown:
            raise Error(f"{path}: link {i}: {sorted(unknown)} not implemented by clab.py")
        eps = link.get("endpoints")
        if not (isinstance(eps, list) and len(eps) == 2):
            raise Error(f"{path}: link {i}: endpoints must be two \"node:interface\"")
        ends = []
        for ep in eps:
            node, _, ifname = str(ep).partition(":")
            if node not in nodes or not ifname:
                raise Error(f"{path}: link {i}: endpoint {ep!r}: unknown node or no interface")
            ends.append((node, ifname))
        links.append((ends, int(link.get("mtu", 9500))))
    return topo["name"], nodes, links, os.path.dirname(os.path.abspath(path))


def cname(lab, node):
    return f"clab-{lab}-{node}"


def veth_prefix(lab):
    """The start of the names a lab's veths have on the host before they move into their
    containers: the lab's own (a hash of its name: a process id, as before, is not something
    `destroy` can know), short enough for two ends of hundreds of links within 15 bytes."""
    return "cl" + hashlib.sha1(lab.encode()).hexdigest()[:6]


def host_veths(lab):
    """The lab's veths still on the host: what a deploy killed mid-way left."""
    out = run("ip", "-j", "link", "show", "type", "veth", capture=True).stdout
    pre = veth_prefix(lab)
    return [l["ifname"] for l in json.loads(out or "[]")
            if l["ifname"].startswith(pre) and l["ifname"][len(pre):len(pre) + 1] in ("a", "b")]


def deploy(path):
    lab, nodes, links, base = load(path)
    made = {"containers": [], "netns": [], "veths": []}
    try:
        _deploy(lab, nodes, links, base, made)
    except BaseException as e:
        # Undo what this deploy made, and only that (a lab already running is not this
        # deploy's to remove): the containers, their namespace names, the veths still here.
        # Also on Ctrl-C; a deploy killed outright leaves it to `destroy`.
        for v in made["veths"]:
            run("ip", "link", "delete", v, check=False, capture=True)
        for ns in made["netns"]:
            run("ip", "netns", "delete", ns, check=False, capture=True)
        for c in made["containers"]:
            run("docker", "rm", "-f", c, check=False, capture=True)
        if isinstance(e, Error):
            raise Error(f"{e}\n(removed what this deploy had made: {len(made['containers'])} "
                        f"container(s), {len(made['netns'])} namespace name(s), its veths)") from None
        raise


def _deploy(lab, nodes, links, base, made):
    pids = {}
    pre = veth_prefix(lab)
    for name, n in nodes.items():
        argv = ["docker", "run", "-d", "--name", cname(lab, name), "--hostname", name,
                "--network", "none", "--label", f"containerlab={lab}",
                "--label", f"clab-node-name={name}"]
        if "user" in n:
            argv += ["--user", str(n["user"])]
        if "entrypoint" in n:
            argv += ["--entrypoint", str(n["entrypoint"])]
        for k, v in (n.get("env") or {}).items():
            argv += ["--env", f"{k}={v}"]
        for b in n.get("binds") or []:
            src, _, rest = str(b).partition(":")
            argv += ["--volume", f"{os.path.join(base, src)}:{rest}"]
        for c in n.get("cap-add") or []:
            argv += ["--cap-add", str(c)]
        for k, v in (n.get("sysctls") or {}).items():
            argv += ["--sysctl", f"{k}={v}"]
        for k, v in (n.get("labels") or {}).items():
            argv += ["--label", f"{k}={v}"]
        argv.append(str(n["image"]))
        if "cmd" in n:
            argv += shlex.split(str(n["cmd"]))
        run(*argv, capture=True)
        made["containers"].append(cname(lab, name))
        pid = run("docker", "inspect", "-f", "{{.State.Pid}}", cname(lab, name),
                  capture=True).stdout.strip()
        if pid in ("", "0"):
            raise Error(f"node {name}: its container is not running")
        pids[name] = pid
        run("ip", "netns", "attach", cname(lab, name), pid)
        made["netns"].append(cname(lab, name))
        print(f"clab.py: node {name}: container {cname(lab, name)} (pid {pid})")
    for i, (((a, aif), (b, bif)), mtu) in enumerate(links):
        # Temporary names in this namespace, renamed as they move into the containers; the
        # lab's own, so that `destroy` finds what a deploy killed here left.
        ta, tb = f"{pre}a{i}", f"{pre}b{i}"
        run("ip", "link", "add", ta, "mtu", str(mtu), "type", "veth", "peer", "name", tb,
            "mtu", str(mtu))
        # Deleting either end deletes the pair: whichever is still here.
        made["veths"] += [ta, tb]
        run("ip", "link", "set", ta, "netns", pids[a], "name", aif)
        run("ip", "link", "set", tb, "netns", pids[b], "name", bif)
        run("ip", "-n", cname(lab, a), "link", "set", aif, "up")
        run("ip", "-n", cname(lab, b), "link", "set", bif, "up")
        print(f"clab.py: link {a}:{aif} <-> {b}:{bif} (mtu {mtu})")
    for name, n in nodes.items():
        for cmd in n.get("exec") or []:
            run("docker", "exec", cname(lab, name), *shlex.split(str(cmd)))
        if n.get("exec"):
            print(f"clab.py: node {name}: {len(n['exec'])} exec command(s) done")


def destroy(path):
    lab, nodes, _, _ = load(path)
    for name in nodes:
        c = cname(lab, name)
        run("docker", "rm", "-f", c, check=False, capture=True)
        if os.path.exists(f"/var/run/netns/{c}"):
            run("ip", "netns", "delete", c, check=False)
    left = host_veths(lab)
    for v in left:
        run("ip", "link", "delete", v, check=False, capture=True)
    print(f"clab.py: lab {lab} destroyed" + (f" ({len(left)} veth(s) left on the host removed)" if left else ""))


def labjson(path):
    """rocegen's lab file for the nodes labelled rocesw.role=host, from their live interfaces:
    each host's first link interface, its MAC and IPv4 address."""
    lab, nodes, links, _ = load(path)
    hosts = []
    for name, n in nodes.items():
        if (n.get("labels") or {}).get("rocesw.role") != "host":
            continue
        ifs = [ifn for ends, _ in links for node, ifn in ends if node == name]
        if not ifs:
            raise Error(f"host {name} has no link")
        out = run("ip", "-n", cname(lab, name), "-j", "address", "show", "dev", ifs[0],
                  capture=True).stdout
        info = json.loads(out)[0]
        v4 = [a["local"] for a in info.get("addr_info", []) if a.get("family") == "inet"]
        if not v4:
            raise Error(f"host {name}: {ifs[0]} has no IPv4 address")
        hosts.append({"name": name, "netns": cname(lab, name), "host_if": ifs[0],
                      "mac": info["address"], "ipv4": v4[0]})
    json.dump({"hosts": hosts}, sys.stdout, indent=2)
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("verb", choices=["deploy", "destroy", "labjson"])
    ap.add_argument("-t", "--topo", required=True, help="the .clab.yml file")
    a = ap.parse_args()
    try:
        {"deploy": deploy, "destroy": destroy, "labjson": labjson}[a.verb](a.topo)
    except (Error, OSError, yaml.YAMLError) as e:
        sys.exit(f"clab.py: error: {e}")


if __name__ == "__main__":
    main()

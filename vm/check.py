#!/usr/bin/env python3
"""Reads one vm/run.sh phase's directory (the guests' serial consoles, rocesw's --summary)
and prints the results; exits 1 if any check fails. Checks: both guests came up and finished;
every step passed on both sides; ping lost nothing; no IP/UDP/TCP checksum errors and no
ICRC complaints from rxe; each guest's interface counters equal the switch's for its port;
each guest's count of CE-marked IP packets equals the switch's marks on its port, and in phase
mark-all no ECT packet reached a guest unmarked. A perftest step whose result row has no
figures (its clock calibration failed under emulation) counts as run and is listed."""
import argparse
import json
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--phase", choices=["normal", "mark-all"], required=True)
ap.add_argument("dir")
args = ap.parse_args()

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def guest(i):
    g = {"steps": {}, "attempts": {}, "out": {}, "counters": {}, "dmesg": [], "fatal": [], "done": False, "up": None}
    try:
        text = open(f"{args.dir}/console-vm{i}.log", errors="replace").read()
    except OSError as e:
        check(False, f"vm{i}: no console log ({e})")
        return g
    for line in text.replace("\r", "").split("\n"):
        at = line.find("@@ROCESW ")
        if at < 0:
            continue
        f = line[at + 9 :].split(" ", 2)
        kind = f[0]
        if kind == "step" and len(f) == 3:
            name, rest = f[1], f[2].split()
            g["steps"][name] = int(rest[1])
        elif kind == "attempt" and len(f) == 3:
            # attempt NAME K rc N kind KIND peer M PEER_KIND
            m = re.fullmatch(r"(\d+) rc (\d+) kind (\w+) peer (\S+) (\S+)", f[2].strip())
            if check(m is not None, f"vm{i}: unreadable line: {line[at:]}"):
                g["attempts"].setdefault(f[1], []).append((int(m.group(2)), m.group(3), m.group(4), m.group(5)))
        elif kind == "out" and len(f) >= 2:
            g["out"].setdefault(f[1], []).append(f[2] if len(f) > 2 else "")
        elif kind == "counter" and len(f) == 3:
            g["counters"][f[1]] = int(f[2].split()[0])
        elif kind == "dmesg":
            g["dmesg"].append(" ".join(f[1:]))
        elif kind == "fatal":
            g["fatal"].append(" ".join(f[1:]))
        elif kind == "done":
            g["done"] = True
        elif kind == "up":
            g["up"] = " ".join(f[1:])
    return g


vms = [guest(0), guest(1)]
for i, g in enumerate(vms):
    check(g["up"] is not None, f"vm{i}: never came up (console-vm{i}.log)")
    check(not g["fatal"], f"vm{i}: {g['fatal']}")
    check(g["done"], f"vm{i}: did not finish its steps")

server, client = vms
steps = list(client["steps"])
for name in steps:
    for role, g in (("client", client), ("server", server)):
        if name == "ping" and role == "server":
            continue
        rc = g["steps"].get(name)
        check(rc == 0, f"{name}: {role} exited {rc}" + ("" if rc == 0 else "\n    " + "\n    ".join(g["out"].get(name, [])[-8:])))
check(len(steps) > 3, f"the client ran only {steps}")

# Retried steps: the guests retry an attempt only after a crash (rc >= 128, or the timeout's
# kill) or a work completion with an error status on either side (vm/guest-init.sh), never
# after a failed check; checked here from the server's own lines, and every retry is listed.
retries = []
for name in steps:
    tried = server["attempts"].get(name, [])
    for k, (rc, kind, peer_rc, peer_kind) in enumerate(tried[:-1]):
        why = {kind, peer_kind} & {"crash", "cqe"}
        check(bool(why), f"{name}: attempt {k} was retried after neither a crash nor a completion error (server {rc} {kind}, client {peer_rc} {peer_kind})")
        retries.append(f"{name} attempt {k}: server rc {rc} ({kind}), client rc {peer_rc} ({peer_kind})")


# A figure in perftest's result row. perftest times with the CPU's cycle counter, calibrated
# against the clock at start; when the calibration's fit is poor (an emulated CPU on a busy
# host: "Correlation coefficient r^2: 0.86 < 0.9") it has no cycles per microsecond and prints
# inf and -nan for every time and rate, though the test itself ran and passed.
NUMBER = r"[0-9.]+"
FIGURE = NUMBER + r"|inf|-?nan"


def table(lines, header):
    """The first data row after perftest's header line starting with `header`."""
    for k, l in enumerate(lines):
        if l.strip().startswith(header):
            for row in lines[k + 1 :]:
                cols = row.split()
                if cols and all(re.fullmatch(FIGURE, c) for c in cols):
                    return cols
    return None


def untimed(row, out):
    """Why a result row has no figures (perftest's clock calibration failed), or None."""
    if all(re.fullmatch(NUMBER, c) for c in row):
        return None
    why = [l.strip() for l in out if "Correlation coefficient" in l]
    return why[0] if why else "no cycles-per-microsecond figure"


untimed_steps = []


print(f"{'step':<24} result")
for name in steps:
    out = client["out"].get(name, [])
    res = "ok" if client["steps"][name] == 0 and server["steps"].get(name, 0) == 0 else "FAILED"
    if name == "ping":
        m = re.search(r"(\d+) packets transmitted, (\d+) (?:packets )?received", "\n".join(out))
        check(m and m.group(1) == m.group(2), "ping lost packets")
        rtt = [l for l in out if "min/avg/max" in l]
        res += f"  {m.group(2) if m else '?'}/{m.group(1) if m else '?'} replies" + (f", {rtt[0].split('=')[1].strip()}" if rtt else "")
    elif "_bw" in name or "_lat" in name:
        row = table(out, "#bytes")
        if check(row is not None and len(row) >= (4 if "_bw" in name else 6), f"{name}: no result row"):
            why = untimed(row, out)
            if why:
                untimed_steps.append(f"{name}: {why}")
                res += f"  {row[0]:>6} B x {row[1]}: ran, no figures (perftest could not calibrate its clock)"
            elif "_bw" in name:
                res += f"  {row[0]:>6} B x {row[1]}: {float(row[3]) * 8 / 1000:.3f} Gb/s ({row[3]} MB/s avg, {row[4] if len(row) > 4 else '?'} Mpps)"
            else:
                res += f"  {row[0]:>6} B x {row[1]}: typical {row[4]} us, avg {row[5]} us (min {row[2]}, max {row[3]})"
    elif name == "rc_pingpong":
        l = [x for x in out if "Mbit/sec" in x]
        res += "  " + (l[-1].strip() if l else "")
    elif name == "rping":
        res += f"  {sum(1 for x in out if 'ping data' in x)} pings, data verified (-V)"
    print(f"{name:<24} {res}")

# Checksums and ICRC.
for i, g in enumerate(vms):
    c = g["counters"]
    for k in ("Ip.InCsumErrors", "Udp.InCsumErrors", "Tcp.InCsumErrors", "Icmp.InCsumErrors"):
        check(c.get(k, 0) == 0, f"vm{i}: {k} = {c.get(k)}")
    check("Udp.InCsumErrors" in c, f"vm{i}: no Udp.InCsumErrors counter reported")
    # rxe drops a frame whose ICRC is wrong with "bad ICRC from <addr>" (rxe_icrc.c).
    bad = [l for l in g["dmesg"] if re.search(r"icrc", l, re.I)]
    check(not bad, f"vm{i}: the kernel complained: {bad}")

# The switch's counters against the guests'.
try:
    s = json.load(open(f"{args.dir}/summary.json"))
except (OSError, ValueError) as e:
    check(False, f"no switch summary ({e})")
    s = None
if s is not None:
    ports = s["switch"]["ports"]
    print(f"\n{'port':<6}{'switch rx':>10}{'guest tx':>10}{'switch tx':>10}{'guest rx':>10}{'PFC tx':>8}{'ECN marked':>12}{'guest CE':>10}{'guest ECT0':>11}{'guest not-ECT':>14}")
    for i, g in enumerate(vms):
        p, c = ports[i], g["counters"]
        pfc = sum(p.get("pfc_tx", [])) if isinstance(p.get("pfc_tx"), list) else 0
        marked = p.get("ecn_marked", 0)
        ce, ect0 = c.get("IpExt.InCEPkts"), c.get("IpExt.InECT0Pkts")
        print(f"{i:<6}{p['rx_packets']:>10}{c.get('eth0.tx_packets', -1):>10}{p['tx_packets']:>10}{c.get('eth0.rx_packets', -1):>10}{pfc:>8}{marked:>12}{ce if ce is not None else '?':>10}{ect0 if ect0 is not None else '?':>11}{c.get('IpExt.InNoECTPkts', '?'):>14}")
        check(p["rx_packets"] == c.get("eth0.tx_packets"), f"port {i}: the switch received {p['rx_packets']} frames, vm{i} sent {c.get('eth0.tx_packets')}")
        # tx_packets counts every frame the port sent, its PFC frames among them (seen once,
        # under a loaded host: 52,047 data + 30 PFC = 52,077 = the guest's rx_packets, the
        # PFC frames also in its rx_dropped: no protocol takes them).
        check(p["tx_packets"] == c.get("eth0.rx_packets"), f"port {i}: the switch sent {p['tx_packets']} frames ({pfc} of them PFC), vm{i} received {c.get('eth0.rx_packets')}")
        check(ce == marked, f"port {i}: the switch marked {marked} frames CE, vm{i} received {ce} CE packets")
        # The RoCE class: every ECT packet the guest received left the switch from queue 3
        # (DSCP 26 -> TC 3, lossless), and the rest (TCP, ICMP, ibv_rc_pingpong at traffic
        # class 0) from queue 0.
        q3 = p["queues"][3]["tx_packets"]
        ect = (ce or 0) + (ect0 or 0) + c.get("IpExt.InECT1Pkts", 0)
        check(q3 == ect and q3 > 0, f"port {i}: queue 3 sent {q3} frames, vm{i} received {ect} ECN-capable packets")
        if args.phase == "mark-all":
            check(ce is not None and ce > 0, f"vm{i}: no CE-marked packet received")
            check(ect0 == 0 and c.get("IpExt.InECT1Pkts") == 0, f"vm{i}: {ect0} ECT(0) packets arrived unmarked")
    for i in range(2):
        print(f"port {i}: queue 3 (RoCE, lossless) sent {ports[i]['queues'][3]['tx_packets']} frames, queue 0 {ports[i]['queues'][0]['tx_packets']}; PG 3 received {ports[i]['pgs'][3]['rx_packets']}; peak buffer use {ports[i]['buffer']['peak_egress_cells']} cells")
    drops = s["switch"]["totals"].get("drops", {})
    check(not drops, f"the switch dropped frames: {drops}")
    for i, g in enumerate(vms):
        rxe = {k[4:]: v for k, v in g["counters"].items() if k.startswith("rxe.") and v}
        print(f"vm{i} rxe counters: {rxe}")

if untimed_steps:
    print(f"\nran and passed without figures, perftest's clock calibration failing under emulation ({len(untimed_steps)}):")
    for u in untimed_steps:
        print("  - " + u)

if retries:
    print(f"\nretried after a crash under emulation ({len(retries)}):")
    for r in retries:
        print("  - " + r)

if failures:
    print(f"\nphase {args.phase}: FAILED")
    for f in failures:
        print("  - " + f)
    sys.exit(1)
print(f"\nphase {args.phase}: passed")

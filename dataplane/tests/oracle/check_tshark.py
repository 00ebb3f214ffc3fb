#!/usr/bin/env python3
"""Second independent oracle: decode pcaps with Wireshark's tshark.

Usage:
    python3 check_tshark.py FILE.pcap [FILE2.pcap ...] [--json] [--pretty]

Prints exactly ONE JSON object on stdout (``--json`` is the default and is
accepted for symmetry with check_pcap.py). Exit 0 when tshark read every file,
exit 2 with a message on stderr when tshark is missing or cannot read a file.

tshark runs with ``--disable-protocol tftp`` (RoCE senders use UDP source
port 69), ``--disable-protocol rpcordma`` (its heuristic claims BTH
payloads and calls a zero-length SEND malformed) and
``-o ip.check_checksum:TRUE``. tshark does not verify the RoCE
ICRC and shows a CNP as opcode 129 (unknown): use check_pcap.py for those.
tshark's "running as root" warning on stderr is ignored.

JSON schema (frame indices are 0-based, like check_pcap.py; histogram keys
are decimal strings):
{
  "tool": "check_tshark", "tshark_version": "4.0.17",
  "files": [ {
    "file": str,
    "frames": int,
    "vlan_tagged": int,
    "bth": int,                         # frames with infiniband.bth
    "opcodes": {"0": n, "129": n},      # infiniband.bth.opcode histogram
    "ipv4": int,
    "ipv4_csum_good": int, "ipv4_csum_bad": int,   # ip.checksum.status 1 / 0
    "ipv4_csum_other": int,             # unverified / not present / illegal
    "ipv6": int,
    "not_ect": int, "ect": int, "ce": int,   # ip.dsfield.ecn / ipv6.tclass.ecn
    "dscp": {"26": n},
    "pfc": [ {"frame": int, "enbv": int, "pause": [c0..c7]} ],  # macc opcode 0x0101
    "pause": [ {"frame": int, "pause_time": int} ],              # macc opcode 0x0001
    "malformed": int,                   # frames with _ws.malformed
    "expert_errors": int,               # frames with an error-severity expert item
    "expert_warnings": int,             # frames with a warning-severity item
    "expert": {"<severity>: <message>": n}  # error and warning items, all frames
  } ],
  "totals": {integer counts summed, histograms merged, pfc/pause as counts}
}
"""

import json
import shutil
import subprocess
import sys

SEV_ERROR = 0x00800000
SEV_WARN = 0x00600000

FIELDS = [
    "frame.number", "vlan.id",
    "ip.checksum.status", "ip.dsfield.dscp", "ip.dsfield.ecn",
    "ipv6.tclass.dscp", "ipv6.tclass.ecn",
    "infiniband.bth", "infiniband.bth.opcode",
    "macc.opcode", "macc.cbfc.enbv", "macc.pause_time",
] + ["macc.cbfc.pause_time.c%d" % i for i in range(8)] + [
    "_ws.malformed", "_ws.expert.severity", "_ws.expert.message",
]


class Unreadable(Exception):
    pass


def tshark_version(exe):
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    first = out.splitlines()[0] if out else ""
    parts = first.split()
    return parts[2] if len(parts) > 2 and parts[0] == "TShark" else first


def clean_stderr(err):
    lines = [ln for ln in err.splitlines()
             if ln.strip() and "This could be dangerous" not in ln]
    return "\n".join(lines)


def num(v):
    return int(v, 0)


PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4",  # classic, microseconds
               b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",  # classic, nanoseconds
               b"\x0a\x0d\x0d\x0a"}                          # pcapng


def run_tshark(exe, path):
    # tshark also opens text and other formats; insist on a capture file.
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise Unreadable("cannot open %s: %s" % (path, e))
    if magic not in PCAP_MAGICS:
        raise Unreadable("%s: not a pcap/pcapng file (magic %s)" % (path, magic.hex()))
    cmd = [exe, "-n", "-r", path, "--disable-protocol", "tftp", "--disable-protocol", "rpcordma",
           "-o", "ip.check_checksum:TRUE", "-T", "ek"]
    for f in FIELDS:
        cmd += ["-e", f]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise Unreadable("tshark could not read %s (exit %d): %s"
                         % (path, r.returncode, clean_stderr(r.stderr)))
    frames = []
    for line in r.stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        doc = json.loads(line)
        if "layers" in doc:
            frames.append(doc["layers"])
    return frames


def inc(h, k, n=1):
    k = str(k)
    h[k] = h.get(k, 0) + n


def count_ecn(rep, ecn, dscp):
    ecn = num(ecn)
    if dscp is not None:
        inc(rep["dscp"], num(dscp))
    if ecn == 0:
        rep["not_ect"] += 1
    elif ecn == 3:
        rep["ce"] += 1
    else:
        rep["ect"] += 1


def check_file(exe, path):
    rep = {"file": path, "frames": 0, "vlan_tagged": 0, "bth": 0, "opcodes": {},
           "ipv4": 0, "ipv4_csum_good": 0, "ipv4_csum_bad": 0, "ipv4_csum_other": 0,
           "ipv6": 0, "not_ect": 0, "ect": 0, "ce": 0, "dscp": {},
           "pfc": [], "pause": [], "malformed": 0,
           "expert_errors": 0, "expert_warnings": 0, "expert": {}}
    for lay in run_tshark(exe, path):
        def first(name):
            v = lay.get(name.replace(".", "_"))
            return v[0] if v else None
        rep["frames"] += 1
        idx = num(first("frame.number")) - 1
        if first("vlan.id") is not None:
            rep["vlan_tagged"] += 1
        st = first("ip.checksum.status")
        if first("ip.dsfield.ecn") is not None:
            rep["ipv4"] += 1
            count_ecn(rep, first("ip.dsfield.ecn"), first("ip.dsfield.dscp"))
            if st == "1":
                rep["ipv4_csum_good"] += 1
            elif st == "0":
                rep["ipv4_csum_bad"] += 1
            else:
                rep["ipv4_csum_other"] += 1
        elif first("ipv6.tclass.ecn") is not None:
            rep["ipv6"] += 1
            count_ecn(rep, first("ipv6.tclass.ecn"), first("ipv6.tclass.dscp"))
        op = first("infiniband.bth.opcode")
        if op is not None or first("infiniband.bth") is not None:
            rep["bth"] += 1
            if op is not None:
                inc(rep["opcodes"], num(op))
        mop = first("macc.opcode")
        if mop is not None and num(mop) == 0x0101:
            pause = []
            for i in range(8):
                v = first("macc.cbfc.pause_time.c%d" % i)
                pause.append(num(v) if v is not None else None)
            enbv = first("macc.cbfc.enbv")
            rep["pfc"].append({"frame": idx, "enbv": num(enbv) if enbv else None,
                               "pause": pause})
        elif mop is not None and num(mop) == 0x0001:
            pt = first("macc.pause_time")
            rep["pause"].append({"frame": idx, "pause_time": num(pt) if pt else None})
        if lay.get("_ws_malformed"):
            rep["malformed"] += 1
        sevs = lay.get("_ws_expert_severity") or []
        msgs = lay.get("_ws_expert_message") or []
        has_err = has_warn = False
        for i, s in enumerate(sevs):
            s = num(s)
            m = msgs[i] if i < len(msgs) else "?"
            if s >= SEV_ERROR:
                has_err = True
                inc(rep["expert"], "error: " + m)
            elif s >= SEV_WARN:
                has_warn = True
                inc(rep["expert"], "warning: " + m)
        rep["expert_errors"] += has_err
        rep["expert_warnings"] += has_warn
    return rep


def totals(reports):
    tot = {}
    for rep in reports:
        for k, v in rep.items():
            if k == "file":
                continue
            if isinstance(v, int):
                tot[k] = tot.get(k, 0) + v
            elif isinstance(v, list):
                tot[k] = tot.get(k, 0) + len(v)
            elif isinstance(v, dict):
                h = tot.setdefault(k, {})
                for hk, hv in v.items():
                    h[hk] = h.get(hk, 0) + hv
    return tot


def main(argv):
    files = [a for a in argv if not a.startswith("--")]
    flags = [a for a in argv if a.startswith("--")]
    unknown = [f for f in flags if f not in ("--json", "--pretty", "--help")]
    if "--help" in flags or not files or unknown:
        sys.stderr.write(__doc__.split("JSON schema")[0])
        return 0 if "--help" in flags and not unknown else 2
    exe = shutil.which("tshark")
    if exe is None:
        sys.stderr.write("check_tshark: tshark not found; run .ci/install-deps\n")
        return 2
    reports = []
    for path in files:
        try:
            reports.append(check_file(exe, path))
        except Unreadable as e:
            sys.stderr.write("check_tshark: %s\n" % e)
            return 2
    out = {"tool": "check_tshark", "tshark_version": tshark_version(exe),
           "files": reports, "totals": totals(reports)}
    try:
        json.dump(out, sys.stdout, indent=2 if "--pretty" in flags else None)
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Self-tests for check_pcap.py: frames crafted with scapy, written to a
nanosecond pcap by hand, must be reported exactly. Also checks the public
capture the repository holds (dataplane/tests/data/public-rocev2-rc-send.pcap),
and that check_tshark.py agrees when tshark is installed.

Run: python3 -m pytest dataplane/tests/oracle   or   python3 test_check_pcap.py
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import logging

logging.getLogger("scapy").setLevel(logging.ERROR)

from scapy.layers.l2 import Ether, Dot1Q  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.packet import Raw  # noqa: E402
from scapy.contrib.roce import BTH, AETH, cnp  # noqa: E402
from scapy.contrib.mac_control import (  # noqa: E402
    MACControlClassBasedFlowControl,
    MACControlPause,
)

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_pcap.py")
TSHARK_CHECKER = os.path.join(HERE, "check_tshark.py")
PUBLIC = os.path.join(HERE, "..", "data", "public-rocev2-rc-send.pcap")
A, B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"


def write_nano_pcap(path, frames, t0=1_700_000_000_123_456_789, step=1_001):
    """Classic pcap, nanosecond magic, linktype 1, as rocesw writes it."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            ts = t0 + i * step
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(fr), len(fr)))
            f.write(fr)


def run_checker(*paths):
    r = subprocess.run([sys.executable, CHECKER, *paths, "--json"],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def roce4(tos=(26 << 2) | 2, sport=49152, opcode=4, payload=b"\xab" * 64, vlan=None):
    l2 = Ether(src=A, dst=B)
    if vlan is not None:
        l2 = l2 / Dot1Q(vlan=vlan[0], prio=vlan[1])
    p = (l2 / IP(src="10.0.0.1", dst="10.0.0.2", tos=tos, ttl=64, flags="DF")
         / UDP(sport=sport, dport=4791, chksum=0)
         / BTH(opcode=opcode, dqpn=0x11, psn=7, ackreq=1))
    if payload:
        p = p / Raw(payload)
    return bytes(p)


def roce6(tc=(26 << 2) | 1):
    p = (Ether(src=A, dst=B) / IPv6(src="fd00::1", dst="fd00::2", tc=tc, fl=0x12345, hlim=64)
         / UDP(sport=49153, dport=4791, chksum=0)
         / BTH(opcode=0x0A, dqpn=0x22, psn=9) / Raw(b"\x00" * 16 + b"\xcd" * 100))
    return bytes(p)


def mark_ce(frame):
    """Rewrite ECN to CE the way a switch does, after the ICRC was computed."""
    p = Ether(frame)
    if IP in p:
        p[IP].tos |= 3
        p[IP].chksum = None
    else:
        p[IPv6].tc |= 3
    return bytes(p)


def crafted():
    frames, expect = [], {}
    frames.append(roce4())                                          # 0 ECT(0) v4
    frames.append(mark_ce(roce4()))                                 # 1 CE v4, ICRC intact
    frames.append(roce6())                                          # 2 ECT(1) v6
    frames.append(mark_ce(roce6()))                                 # 3 CE v6, ICRC intact
    frames.append(bytes(Ether(src=A, dst=B)                         # 4 CNP, DSCP 48
                        / IP(src="10.0.0.2", dst="10.0.0.1", tos=(48 << 2) | 2)
                        / UDP(sport=49154, dport=4791, chksum=0) / cnp(0x11)))
    frames.append(bytes(Ether(src=A, dst="01:80:c2:00:00:01")      # 5 PFC XOFF c3
                        / MACControlClassBasedFlowControl(c3_enabled=1, c3_pause_time=0xFFFF)))
    frames.append(bytes(Ether(src=A, dst="01:80:c2:00:00:01")      # 6 PFC XON c3,c4
                        / MACControlClassBasedFlowControl(c3_enabled=1, c4_enabled=1,
                                                          c4_pause_time=0)))
    frames.append(bytes(Ether(src=A, dst="01:80:c2:00:00:01")      # 7 802.3x PAUSE
                        / MACControlPause(pause_time=100)))
    bad_icrc = bytearray(roce4())
    bad_icrc[-10] ^= 0x01                                           # 8 payload bit flip
    frames.append(bytes(bad_icrc))
    bad_csum = bytearray(roce4(opcode=0x11, payload=bytes(AETH(syndrome=0, msn=1))))
    bad_csum[14 + 10] ^= 0xFF                                       # 9 IPv4 checksum broken
    frames.append(bytes(bad_csum))
    frames.append(roce4(vlan=(100, 3)))                             # 10 802.1Q PCP 3
    frames.append(roce4(sport=69))                                  # 11 UDP sport 69 (TFTP)
    small = roce4(opcode=0x04, payload=b"")                         # 12 58 B -> padded to 60
    frames.append(small + b"\x00" * (60 - len(small)))
    expect = dict(frames=13, roce=10, roce_v6=2, icrc_ok=9, icrc_bad=1, icrc_bad_frames=[8],
                  ipv4=8, ipv6=2, ipv4_csum_ok=7, ipv4_csum_bad=1, ce=2, ect=8, ect0=7,
                  ect1=1, not_ect=0, cnp=1, becn=1, vlan_tagged=1, pcp={"3": 1},
                  dscp={"26": 9, "48": 1}, mac_control_other=0,
                  opcodes={"4": 6, "10": 2, "129": 1, "17": 1}, bad=[])
    return frames, expect


def test_crafted_frames():
    frames, expect = crafted()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "port0.pcap")
        write_nano_pcap(path, frames)
        rc, out, err = run_checker(path)
        assert rc == 0, err
        rep = json.loads(out)["files"][0]
        assert rep["nanosecond"] is True and rep["linktype"] == 1
        assert rep["ts_first_ns"] == 1_700_000_000_123_456_789
        assert rep["ts_last_ns"] == 1_700_000_000_123_456_789 + 12 * 1_001
        for k, v in expect.items():
            assert rep[k] == v, (k, rep[k], v)
        assert rep["pfc"] == [
            {"frame": 5, "ts_ns": 1_700_000_000_123_456_789 + 5 * 1_001,
             "dst": "01:80:c2:00:00:01", "vlan": False, "enbv": 0x08,
             "pause": [0, 0, 0, 0xFFFF, 0, 0, 0, 0], "len": 60},
            {"frame": 6, "ts_ns": 1_700_000_000_123_456_789 + 6 * 1_001,
             "dst": "01:80:c2:00:00:01", "vlan": False, "enbv": 0x18,
             "pause": [0] * 8, "len": 60},
        ]
        assert [p["pause_time"] for p in rep["pause"]] == [100]


def test_two_files_and_unreadable():
    frames, _ = crafted()
    with tempfile.TemporaryDirectory() as d:
        p0, p1 = os.path.join(d, "port0.pcap"), os.path.join(d, "port1.pcap")
        write_nano_pcap(p0, frames[:2])
        write_nano_pcap(p1, frames[4:6])
        rc, out, _ = run_checker(p0, p1)
        assert rc == 0
        doc = json.loads(out)
        assert [f["frames"] for f in doc["files"]] == [2, 2]
        assert doc["totals"]["frames"] == 4 and doc["totals"]["pfc"] == 1
        assert doc["totals"]["cnp"] == 1 and doc["totals"]["ce"] == 1
        junk = os.path.join(d, "junk.pcap")
        with open(junk, "wb") as f:
            f.write(b"not a pcap at all, sorry")
        rc, out, err = run_checker(p0, junk)
        assert rc == 2 and "not a classic pcap" in err
        rc, _, err = run_checker(os.path.join(d, "missing.pcap"))
        assert rc == 2 and "cannot open" in err


def test_tshark_agrees():
    """check_tshark.py sees the same counts (skipped when tshark is absent)."""
    if shutil.which("tshark") is None:
        print("skip: tshark not installed")
        return
    frames, expect = crafted()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "port0.pcap")
        write_nano_pcap(path, frames)
        r = subprocess.run([sys.executable, TSHARK_CHECKER, path], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)["files"][0]
    assert rep["frames"] == 13 and rep["bth"] == expect["roce"]
    assert rep["opcodes"] == expect["opcodes"]
    assert (rep["ipv4_csum_good"], rep["ipv4_csum_bad"]) == (7, 1)
    assert (rep["ce"], rep["ect"], rep["vlan_tagged"]) == (2, 8, 1)
    assert [(p["enbv"], p["pause"][3]) for p in rep["pfc"]] == [(0x08, 0xFFFF), (0x18, 0)]
    assert rep["pause"] == [{"frame": 7, "pause_time": 100}]
    assert rep["malformed"] == 0
    # tshark flags UDP checksum 0 over IPv6 (RFC 8200); nothing else is an error
    assert rep["expert"] == {"error: Illegal checksum value (0)": 2,
                             "error: Bad checksum [should be 0x2650]": 1}, rep["expert"]
    r = subprocess.run([sys.executable, TSHARK_CHECKER, PUBLIC], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)["files"][0]
    assert rep["frames"] == 123 and rep["bth"] == 105
    assert rep["opcodes"] == {"0": 33, "3": 33, "5": 2, "17": 37}
    assert rep["ipv4_csum_good"] == 115 and rep["expert_errors"] == 0


def test_public_capture():
    rc, out, err = run_checker(PUBLIC)
    assert rc == 0, err
    rep = json.loads(out)["files"][0]
    assert rep["nanosecond"] is False
    assert rep["frames"] == 123 and rep["roce"] == 105
    assert rep["icrc_ok"] == 105 and rep["icrc_bad"] == 0
    assert rep["opcodes"] == {"0": 33, "3": 33, "5": 2, "17": 37}
    assert rep["ipv4_csum_bad"] == 0 and rep["ect0"] == 105 and rep["ce"] == 0
    assert rep["pfc"] == [] and rep["cnp"] == 0 and rep["bad"] == []


if __name__ == "__main__":
    tests = [v for k, v in sorted(globals().items()) if k.startswith("test_")]
    failed = 0
    for t in tests:
        try:
            t()
            print("ok   %s" % t.__name__)
        except Exception as e:  # noqa: BLE001
            failed += 1
            print("FAIL %s: %r" % (t.__name__, e))
    print("%d passed, %d failed" % (len(tests) - failed, failed))
    sys.exit(1 if failed else 0)

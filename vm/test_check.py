#!/usr/bin/env python3
"""Self-test of vm/check.py on made-up phase directories, in a second: a run whose every check
holds passes; perftest's result row without figures (its clock calibration failed, printing
inf and -nan) passes and is listed; a row with anything else in it, a missing row, or a guest
that received a frame fewer than the switch sent, fails. vm/run.sh runs it before the guests.
   python3 vm/test_check.py"""
import json
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check.py")
# (step, client output lines): perftest's header and result row as it prints them.
STEPS = [
    ("rc_pingpong", ["819200 bytes in 1.08 seconds = 6.06 Mbit/sec"]),
    ("rping", ["ping data: rdma-ping-0: ABC"]),
    ("send_bw_64", [" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]",
                    " 64         500              0.21               0.20   \t\t   0.003315"]),
    ("send_lat_64", [" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]",
                     " 64      500          703.80        9845.75      3931.26  \t       3646.18     \t1000.00"]),
]
# What each guest sent (port i's switch rx) and received (port i's switch tx), ECT(0) all.
SENT, RECEIVED = [100, 200], [200, 100]


def phase(d, steps, guest_rx=RECEIVED):
    for i, role in enumerate(["server", "client"]):
        lines = [f"@@ROCESW up role {role} ip 10.99.0.{i + 1} kernel 6.1"]
        if role == "client":
            lines += ["@@ROCESW out ping 5 packets transmitted, 5 packets received, 0% packet loss",
                      "@@ROCESW step ping rc 0"]
        for name, out in steps:
            if role == "client":
                lines += [f"@@ROCESW out {name} {l}" for l in out]
            lines += [f"@@ROCESW attempt {name} 0 rc 0 kind ok peer 0 ok", f"@@ROCESW step {name} rc 0"]
        counters = {"eth0.tx_packets": SENT[i], "eth0.rx_packets": guest_rx[i], "IpExt.InCEPkts": 0,
                    "IpExt.InECT0Pkts": RECEIVED[i], "IpExt.InECT1Pkts": 0, "IpExt.InNoECTPkts": 0,
                    "Udp.InCsumErrors": 0}
        lines += [f"@@ROCESW counter {k} {v}" for k, v in counters.items()] + ["@@ROCESW done"]
        with open(os.path.join(d, f"console-vm{i}.log"), "w") as f:
            f.write("\n".join(lines) + "\n")
    ports = [{"rx_packets": SENT[i], "tx_packets": RECEIVED[i], "ecn_marked": 0, "pfc_tx": [0] * 8,
              "queues": [{"tx_packets": RECEIVED[i] if q == 3 else 0} for q in range(8)],
              "pgs": [{"rx_packets": SENT[i] if g == 3 else 0} for g in range(8)],
              "buffer": {"peak_egress_cells": 1}} for i in range(2)]
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump({"switch": {"ports": ports, "totals": {}}}, f)


def with_lat_row(row, before=()):
    return [(n, list(before) + [out[0], row] if n == "send_lat_64" else out) for n, out in STEPS]


CASES = [
    ("every check holds", STEPS, RECEIVED, 0, ["phase normal: passed", "typical 3931.26 us"]),
    ("perftest could not time the step",
     with_lat_row(" 64      500          inf            inf          inf      \t       inf         \t-nan",
                  ["Correlation coefficient r^2: 0.861311 < 0.9"]),
     RECEIVED, 0, ["ran, no figures", "send_lat_64: Correlation coefficient r^2: 0.861311 < 0.9", "phase normal: passed"]),
    ("a word in the result row", with_lat_row(" 64      500          abc        9845.75      3931.26  1.0  1.0"),
     RECEIVED, 1, ["send_lat_64: no result row"]),
    ("no result row", [(n, out[:1]) if n == "send_bw_64" else (n, out) for n, out in STEPS],
     RECEIVED, 1, ["send_bw_64: no result row"]),
    ("a guest received a frame fewer", STEPS, [RECEIVED[0] - 1, RECEIVED[1]], 1,
     ["port 0: the switch sent 200 frames (0 of them PFC), vm0 received 199"]),
]

failed = 0
for what, steps, guest_rx, want_rc, want_lines in CASES:
    with tempfile.TemporaryDirectory(prefix="rocesw-check.") as d:
        phase(d, steps, guest_rx)
        r = subprocess.run([sys.executable, CHECK, "--phase", "normal", d], capture_output=True, text=True)
        missing = [l for l in want_lines if l not in r.stdout]
        if r.returncode != want_rc or missing:
            failed = 1
            print(f"test_check: {what}: exit {r.returncode} (want {want_rc}), missing {missing}\n{r.stdout}{r.stderr}", file=sys.stderr)
        else:
            print(f"test_check: {what}: exit {r.returncode}: ok")
sys.exit(failed)

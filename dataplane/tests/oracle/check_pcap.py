#!/usr/bin/env python3
"""Independent oracle for the frames rocesw writes: decode pcaps with scapy.

Usage:
    python3 check_pcap.py FILE.pcap [FILE2.pcap ...] [--json] [--pretty]

Always prints exactly ONE JSON object on stdout (``--json`` is accepted and is
the default; ``--pretty`` indents it). Exit 0 when every file could be read,
even if checks inside fail (the caller asserts on the JSON); exit 2 with a
message on stderr if a file is missing or is not a classic pcap.

Nothing here uses rocesw code: IPv4 checksums, ECN/DSCP, the RoCEv2 BTH and
ICRC (``scapy.contrib.roce.BTH.compute_icrc``), PFC and 802.3x PAUSE
(``scapy.contrib.mac_control``) are all decoded by scapy. The ICRC is also
recomputed a second way, straight from the frame bytes with zlib.crc32 and the
RoCEv2 mask, and any disagreement between the two is reported in ``bad``.
The pcap file header and record framing are parsed here by hand and compared
with what scapy's reader returned (nanosecond pcaps included).

JSON schema (counts are ints, histogram keys are decimal strings):
{
  "tool": "check_pcap", "scapy_version": "2.6.1",
  "files": [ {                     # one entry per FILE, in argument order
    "file": str,
    "nanosecond": bool,           # magic 0xa1b23c4d (True) or 0xa1b2c3d4
    "linktype": int,              # 1 = Ethernet
    "frames": int, "bytes": int,  # records, sum of captured lengths
    "ts_first_ns": int|null, "ts_last_ns": int|null,
    "ts_monotonic": bool,         # timestamps never go backwards
    "truncated": int,             # records with caplen < orig len
    "ethertypes": {"0x0800": n, ...},   # innermost ethertype
    "vlan_tagged": int, "pcp": {"3": n},  # 802.1Q/802.1ad tagged frames
    "ipv4": int, "ipv6": int,
    "ipv4_csum_ok": int, "ipv4_csum_bad": int,
    "not_ect": int, "ect": int, "ce": int,     # ECN over all IP frames
    "ect0": int, "ect1": int,
    "dscp": {"26": n, ...},                    # over all IP frames
    "roce": int,                  # UDP dst port 4791 frames (v4 + v6)
    "roce_v6": int,
    "icrc_ok": int, "icrc_bad": int,
    "icrc_bad_frames": [int],     # 0-based frame indices (first 50)
    "udp_csum_zero": int, "udp_csum_ok": int, "udp_csum_bad": int,  # RoCE
    "opcodes": {"0": n, "17": n, "129": n},  # BTH opcode histogram
    "cnp": int,                   # BTH opcode 0x81
    "fecn": int, "becn": int,     # BTH FECN / BECN bits set
    "pfc": [ {"frame": int, "ts_ns": int, "dst": str, "vlan": bool,
              "enbv": int,        # class-enable vector (bit i = class i)
              "pause": [c0..c7],  # pause times in quanta
              "len": int} ],
    "pause": [ {"frame": int, "ts_ns": int, "dst": str, "pause_time": int} ],
    "mac_control_other": int,     # 0x8808 frames that are neither
    "bad": [str],                 # "frame N: what failed" (first 200)
    "bad_total": int
  } ],
  "totals": {every integer count above summed over files,
             histograms merged, "pfc"/"pause" are counts}
}
"""

import json
import logging
import struct
import sys
import zlib

logging.getLogger("scapy").setLevel(logging.ERROR)
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

try:
    import scapy
    from scapy.layers.l2 import Ether, Dot1Q, Dot1AD
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import bind_layers
    from scapy.utils import RawPcapReader, checksum
    from scapy.contrib.roce import BTH
    from scapy.contrib.mac_control import (
        MACControl,
        MACControlPause,
        MACControlClassBasedFlowControl,
    )
except ImportError as e:  # pragma: no cover
    sys.stderr.write("check_pcap: scapy is not installed (%s); run .ci/install-deps\n" % e)
    sys.exit(2)

ROCE_PORT = 4791
CNP_OPCODE = 0x81
PFC_DST = "01:80:c2:00:00:01"
MAX_BAD = 200
MAX_ICRC_FRAMES = 50

# scapy >= 2.5 already binds it; be explicit so older versions and source
# port 69 (TFTP) never hide the BTH. We also re-dissect from raw UDP bytes.
bind_layers(UDP, BTH, dport=ROCE_PORT)


class Unreadable(Exception):
    pass


def read_pcap_framing(path):
    """Parse the classic pcap header and records by hand.

    Returns (nanosecond, linktype, records) with records a list of
    (ts_ns, caplen, origlen, data) plus a list of framing problems.
    Raises Unreadable for anything that is not a classic pcap.
    """
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        raise Unreadable("cannot open %s: %s" % (path, e))
    if len(buf) < 24:
        raise Unreadable("%s: too short for a pcap header (%d bytes)" % (path, len(buf)))
    magic_le = struct.unpack("<I", buf[:4])[0]
    magics = {0xA1B2C3D4: False, 0xA1B23C4D: True}
    if magic_le in magics:
        endian = "<"
    elif struct.unpack(">I", buf[:4])[0] in magics:
        endian = ">"
    else:
        raise Unreadable("%s: not a classic pcap (magic %s)" % (path, buf[:4].hex()))
    magic, _vmaj, _vmin, _zone, _sig, _snap, linktype = struct.unpack(endian + "IHHiIII", buf[:24])
    nano = magics[magic]
    recs, problems = [], []
    off = 24
    while off < len(buf):
        if off + 16 > len(buf):
            problems.append("truncated record header at end of file (offset %d)" % off)
            break
        sec, frac, caplen, origlen = struct.unpack(endian + "IIII", buf[off:off + 16])
        off += 16
        if off + caplen > len(buf):
            problems.append("truncated record data at end of file (offset %d)" % off)
            break
        if frac >= (1_000_000_000 if nano else 1_000_000):
            problems.append("record %d: sub-second field %d out of range" % (len(recs), frac))
        ts_ns = sec * 1_000_000_000 + (frac if nano else frac * 1000)
        recs.append((ts_ns, caplen, origlen, buf[off:off + caplen]))
        off += caplen
    return nano, linktype & 0x0FFFFFFF, recs, problems


def read_with_scapy(path):
    """Read records with scapy's own reader: (ts_ns, data) list."""
    out = []
    with RawPcapReader(path) as rd:
        nano = bool(getattr(rd, "nano", False))
        for data, meta in rd:
            sec = meta.sec
            if nano:
                frac_ns = getattr(meta, "usec", 0)  # scapy stores ns in usec when nano
            else:
                frac_ns = getattr(meta, "usec", 0) * 1000
            out.append((sec * 1_000_000_000 + frac_ns, bytes(data)))
    return nano, out


def roce_icrc_raw(l3_bytes, is_v6, udp_len):
    """RoCEv2 ICRC computed straight from bytes (no scapy), as Linux rxe does.

    l3_bytes: the IP header onward (exactly IP header + UDP segment).
    Returns the 4 ICRC bytes as they appear on the wire (LSB first).
    """
    if is_v6:
        ihl = 40
        ip = bytearray(l3_bytes[:40])
        ip[0] |= 0x0F  # low nibble of version byte = TC high nibble
        ip[1] = 0xFF   # TC low nibble + flow label high nibble
        ip[2] = 0xFF
        ip[3] = 0xFF
        ip[7] = 0xFF   # hop limit
    else:
        ihl = (l3_bytes[0] & 0x0F) * 4
        ip = bytearray(l3_bytes[:ihl])
        ip[1] = 0xFF   # TOS
        ip[8] = 0xFF   # TTL
        ip[10] = 0xFF  # checksum
        ip[11] = 0xFF
    seg = bytearray(l3_bytes[ihl:ihl + udp_len])
    seg[6] = 0xFF      # UDP checksum
    seg[7] = 0xFF
    seg[8 + 4] = 0xFF  # BTH byte 4: FECN/BECN/reserved
    data = b"\xff" * 8 + bytes(ip) + bytes(seg[:-4])
    return struct.pack("<I", zlib.crc32(data) & 0xFFFFFFFF)


def new_report(path, nano, linktype):
    return {
        "file": path, "nanosecond": nano, "linktype": linktype,
        "frames": 0, "bytes": 0, "ts_first_ns": None, "ts_last_ns": None,
        "ts_monotonic": True, "truncated": 0,
        "ethertypes": {}, "vlan_tagged": 0, "pcp": {},
        "ipv4": 0, "ipv6": 0, "ipv4_csum_ok": 0, "ipv4_csum_bad": 0,
        "not_ect": 0, "ect": 0, "ce": 0, "ect0": 0, "ect1": 0, "dscp": {},
        "roce": 0, "roce_v6": 0, "icrc_ok": 0, "icrc_bad": 0, "icrc_bad_frames": [],
        "udp_csum_zero": 0, "udp_csum_ok": 0, "udp_csum_bad": 0,
        "opcodes": {}, "cnp": 0, "fecn": 0, "becn": 0,
        "pfc": [], "pause": [], "mac_control_other": 0,
        "bad": [], "bad_total": 0,
    }


def inc(hist, key):
    key = str(key)
    hist[key] = hist.get(key, 0) + 1


def add_bad(rep, idx, msg):
    rep["bad_total"] += 1
    if len(rep["bad"]) < MAX_BAD:
        rep["bad"].append(("frame %d: %s" % (idx, msg)) if idx is not None else msg)


def check_ipv4(rep, idx, ip):
    rep["ipv4"] += 1
    if ip.ihl is None or ip.ihl < 5:
        add_bad(rep, idx, "IPv4 ihl %s < 5" % ip.ihl)
        return
    # scapy recomputation: rebuild the header alone with chksum unset.
    raw_hdr = bytes(ip)[: ip.ihl * 4]
    hdr = IP(raw_hdr)  # the header alone: copying the whole chain is slow
    hdr.remove_payload()
    hdr.chksum = None
    recomputed = IP(bytes(hdr)).chksum
    # and the ones'-complement sum over the header as received must be 0
    raw_ok = checksum(raw_hdr) == 0
    if recomputed == ip.chksum and raw_ok:
        rep["ipv4_csum_ok"] += 1
    else:
        rep["ipv4_csum_bad"] += 1


def count_ecn(rep, tos):
    ecn = tos & 3
    inc(rep["dscp"], tos >> 2)
    if ecn == 0:
        rep["not_ect"] += 1
    elif ecn == 3:
        rep["ce"] += 1
    else:
        rep["ect"] += 1
        rep["ect0" if ecn == 2 else "ect1"] += 1


def check_roce(rep, idx, ip, udp, is_v6):
    rep["roce"] += 1
    if is_v6:
        rep["roce_v6"] += 1
    udp_len = udp.len
    ip_bytes = bytes(ip)  # IP header + payload as dissected (padding excluded below)
    ihl = 40 if is_v6 else ip.ihl * 4
    if udp_len is None or udp_len < 8 or ihl + udp_len > len(ip_bytes):
        add_bad(rep, idx, "RoCE UDP length %s does not fit the frame" % udp_len)
        return
    payload = ip_bytes[ihl + 8: ihl + udp_len]
    if len(payload) < 12 + 4:
        add_bad(rep, idx, "RoCE payload %d bytes: too short for BTH + ICRC" % len(payload))
        return
    # Always re-dissect the BTH from the exact UDP payload: this works whatever
    # the UDP source port (69 = TFTP would otherwise win) and drops any
    # Ethernet padding that scapy would chain after the BTH payload.
    bth = BTH(payload)
    udp.remove_payload()
    udp.add_payload(bth)
    op = bth.opcode
    inc(rep["opcodes"], op)
    if op == CNP_OPCODE:
        rep["cnp"] += 1
    if bth.fecn:
        rep["fecn"] += 1
    if bth.becn:
        rep["becn"] += 1
    wire_icrc = payload[-4:]
    try:
        scapy_icrc = bytes(bth.compute_icrc(None))
    except Exception as e:  # noqa: BLE001
        add_bad(rep, idx, "scapy compute_icrc failed: %r" % e)
        return
    raw_icrc = roce_icrc_raw(ip_bytes, is_v6, udp_len)
    if scapy_icrc != raw_icrc:
        add_bad(rep, idx, "ICRC: scapy %s != raw recomputation %s"
                % (scapy_icrc.hex(), raw_icrc.hex()))
    if scapy_icrc == wire_icrc:
        rep["icrc_ok"] += 1
    else:
        rep["icrc_bad"] += 1
        if len(rep["icrc_bad_frames"]) < MAX_ICRC_FRAMES:
            rep["icrc_bad_frames"].append(idx)
    # UDP checksum (RoCEv2 senders usually send 0)
    if udp.chksum == 0:
        rep["udp_csum_zero"] += 1
    else:
        seg = ip_bytes[ihl: ihl + udp_len]
        u = UDP(seg)
        u.chksum = None
        if is_v6:
            fresh = IPv6(src=ip.src, dst=ip.dst, nh=17) / u
        else:
            fresh = IP(src=ip.src, dst=ip.dst, proto=17) / u
        if fresh.__class__(bytes(fresh))[UDP].chksum == udp.chksum:
            rep["udp_csum_ok"] += 1
        else:
            rep["udp_csum_bad"] += 1


def check_mac_control(rep, idx, ts, pkt, tagged, frame_len):
    # scapy quirk: Ether binds to the empty MACControl base class, whose
    # guess_payload_class then chains the real opcode class *after* it
    # (Ether / MACControl / MACControlClassBasedFlowControl), so look the
    # concrete classes up instead of taking the first MACControl layer.
    mc = pkt.getlayer(MACControlClassBasedFlowControl) or pkt.getlayer(MACControlPause)
    dst = pkt[Ether].dst.lower()
    if isinstance(mc, MACControlClassBasedFlowControl):
        enbv = 0
        for i in range(8):
            if getattr(mc, "c%d_enabled" % i):
                enbv |= 1 << i
        pause = [int(getattr(mc, "c%d_pause_time" % i)) for i in range(8)]
        rep["pfc"].append({"frame": idx, "ts_ns": ts, "dst": dst, "vlan": tagged,
                           "enbv": enbv, "pause": pause, "len": frame_len})
        if dst != PFC_DST:
            add_bad(rep, idx, "PFC to %s, not %s" % (dst, PFC_DST))
        if mc._reserved != 0:
            add_bad(rep, idx, "PFC class-enable vector upper byte 0x%02x != 0" % mc._reserved)
        if frame_len < 60:
            add_bad(rep, idx, "PFC frame %d bytes < 60 (without FCS)" % frame_len)
    elif isinstance(mc, MACControlPause):
        rep["pause"].append({"frame": idx, "ts_ns": ts, "dst": dst,
                             "pause_time": int(mc.pause_time)})
        if dst != PFC_DST:
            add_bad(rep, idx, "PAUSE to %s, not %s" % (dst, PFC_DST))
    else:
        rep["mac_control_other"] += 1
        add_bad(rep, idx, "MAC control frame with unknown opcode")


def check_frame(rep, idx, ts, data):
    if len(data) < 14:
        add_bad(rep, idx, "runt frame %d bytes" % len(data))
        return
    pkt = Ether(data)
    tagged = False
    etype = pkt[Ether].type
    layer = pkt[Ether].payload
    while isinstance(layer, (Dot1Q, Dot1AD)):
        if not tagged:
            rep["vlan_tagged"] += 1
            inc(rep["pcp"], layer.prio)
            tagged = True
        etype = layer.type
        layer = layer.payload
    inc(rep["ethertypes"], "0x%04x" % etype)
    if etype == 0x8808:
        if not isinstance(layer, MACControl):
            add_bad(rep, idx, "EtherType 0x8808 did not decode as MAC control")
            return
        check_mac_control(rep, idx, ts, pkt, tagged, len(data))
        return
    if etype == 0x0800:
        if not isinstance(layer, IP):
            add_bad(rep, idx, "EtherType 0x0800 did not decode as IPv4")
            return
        ip = layer
        check_ipv4(rep, idx, ip)
        count_ecn(rep, ip.tos)
        if ip.len is not None and ip.len > len(bytes(ip)):
            add_bad(rep, idx, "IPv4 total length %d > %d bytes present" % (ip.len, len(bytes(ip))))
            return
        is_v6 = False
        if ip.frag != 0 or ip.flags.MF:
            return
    elif etype == 0x86DD:
        if not isinstance(layer, IPv6):
            add_bad(rep, idx, "EtherType 0x86dd did not decode as IPv6")
            return
        ip = layer
        rep["ipv6"] += 1
        count_ecn(rep, ip.tc)
        is_v6 = True
    else:
        return
    udp = ip.payload
    if isinstance(udp, UDP) and udp.dport == ROCE_PORT:
        # check_roce slices the UDP payload by UDP length (drops Ethernet padding)
        check_roce(rep, idx, ip, udp, is_v6)
    elif (not is_v6 and ip.proto == 17 or is_v6 and ip.nh == 17) and not isinstance(udp, UDP):
        add_bad(rep, idx, "UDP did not decode")


def check_file(path):
    nano, linktype, recs, problems = read_pcap_framing(path)
    rep = new_report(path, nano, linktype)
    for p in problems:
        add_bad(rep, None, p)
    try:
        s_nano, s_recs = read_with_scapy(path)
    except Exception as e:  # noqa: BLE001
        add_bad(rep, None, "scapy could not read the file: %r" % e)
        s_nano, s_recs = nano, None
    if s_recs is not None:
        if s_nano != nano:
            add_bad(rep, None, "scapy nanosecond flag %s != header %s" % (s_nano, nano))
        if len(s_recs) != len(recs):
            add_bad(rep, None, "scapy read %d records, framing has %d" % (len(s_recs), len(recs)))
        else:
            for i, ((ts, _c, _o, d), (sts, sd)) in enumerate(zip(recs, s_recs)):
                if ts != sts or d != sd:
                    add_bad(rep, i, "scapy reader disagrees (ts %d vs %d)" % (sts, ts))
                    break
    if linktype != 1:
        add_bad(rep, None, "linktype %d is not Ethernet (1)" % linktype)
    prev = None
    for idx, (ts, caplen, origlen, data) in enumerate(recs):
        rep["frames"] += 1
        rep["bytes"] += caplen
        if rep["ts_first_ns"] is None:
            rep["ts_first_ns"] = ts
        rep["ts_last_ns"] = ts
        if prev is not None and ts < prev:
            rep["ts_monotonic"] = False  # a field, not a decode failure
        prev = ts
        if caplen < origlen:
            rep["truncated"] += 1
            add_bad(rep, idx, "captured %d of %d bytes" % (caplen, origlen))
            continue
        if linktype != 1:
            continue
        try:
            check_frame(rep, idx, ts, data)
        except Exception as e:  # noqa: BLE001  a decode crash is a finding, not a crash
            add_bad(rep, idx, "decode error: %r" % e)
    return rep


def totals(reports):
    tot = {}
    for rep in reports:
        for k, v in rep.items():
            if k in ("file", "nanosecond", "linktype", "ts_first_ns", "ts_last_ns",
                     "ts_monotonic", "bad", "icrc_bad_frames"):
                continue
            if isinstance(v, bool):
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
        if unknown:
            sys.stderr.write("unknown option(s): %s\n" % " ".join(unknown))
        return 0 if "--help" in flags and not unknown else 2
    reports = []
    for path in files:
        try:
            reports.append(check_file(path))
        except Unreadable as e:
            sys.stderr.write("check_pcap: %s\n" % e)
            return 2
    out = {"tool": "check_pcap", "scapy_version": scapy.VERSION,
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

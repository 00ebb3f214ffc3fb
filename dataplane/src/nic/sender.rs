//! The sender: RoCEv2 RC SEND / RDMA WRITE messages cut into MTU packets (FIRST/MIDDLE/LAST/
//! ONLY) from per-QP frame templates patched in place, token-bucket pacing on wire bytes,
//! PFC/PAUSE honouring and a DCQCN reaction point per QP.
//!
//! Where frames go and what time it is are the caller's: [`Sender::poll`] takes `now`, a clock
//! for the timestamp each packet carries, and a function that sends a frame. rocegen passes the
//! monotonic clock and an AF_PACKET socket; the fabric passes virtual time and its link.

use super::dcqcn::{Dcqcn, DcqcnParams};
use super::pause::PauseRx;
use super::{Op, PayloadHeader, PrioMap, WIRE_OVERHEAD_BYTES};
use crate::wire::build::{reth, RoceFrameBuilder};
use crate::wire::roce::opcode;
use crate::wire::{parse, write_icrc, Ecn, FrameInfo};
use anyhow::{bail, Context, Result};

/// DCQCN parameter overrides (`None`: the default of [`DcqcnParams::for_max_rate`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DcqcnOverrides {
    /// α gain g.
    pub g: Option<f64>,
    /// α update period K, ns.
    pub alpha_timer_ns: Option<u64>,
    /// Rate increase timer T, ns.
    pub rate_timer_ns: Option<u64>,
    /// Byte counter B, bytes.
    pub byte_counter: Option<u64>,
    /// Fast recovery stages F.
    pub fast_recovery_stages: Option<u32>,
    /// Additive increase step R_AI, bits/s (R_HAI follows at 10 × unless set).
    pub rai_bps: Option<f64>,
    /// Hyper increase step R_HAI, bits/s.
    pub rhai_bps: Option<f64>,
    /// Rate floor, bits/s (capped at the QP's maximum).
    pub min_rate_bps: Option<f64>,
}

impl DcqcnOverrides {
    /// The defaults for a QP of `max_rate_bps` with these overrides applied.
    pub fn params(&self, max_rate_bps: f64) -> DcqcnParams {
        let mut p = DcqcnParams::for_max_rate(max_rate_bps);
        if let Some(v) = self.g {
            p.g = v;
        }
        if let Some(v) = self.alpha_timer_ns {
            p.alpha_timer_ns = v;
        }
        if let Some(v) = self.rate_timer_ns {
            p.rate_timer_ns = v;
        }
        if let Some(v) = self.byte_counter {
            p.byte_counter = v;
        }
        if let Some(v) = self.fast_recovery_stages {
            p.fast_recovery_stages = v;
        }
        if let Some(v) = self.rai_bps {
            p.rai_bps = v;
            if self.rhai_bps.is_none() {
                p.rhai_bps = 10.0 * v;
            }
        }
        if let Some(v) = self.rhai_bps {
            p.rhai_bps = v;
        }
        if let Some(v) = self.min_rate_bps {
            p.min_rate_bps = v.min(max_rate_bps);
        }
        p
    }
}

/// What every sender of a run sends.
#[derive(Debug, Clone)]
pub struct TrafficConfig {
    /// SEND or RDMA WRITE messages.
    pub op: Op,
    /// Message size in bytes.
    pub msg_size: u64,
    /// Path MTU: payload bytes per packet (256, 512, 1024, 2048 or 4096).
    pub mtu: usize,
    /// DSCP of the data frames; the priority they travel in is `prio_map`'s for it.
    pub dscp: u8,
    /// Tag frames with this VLAN id, PCP = the DSCP's priority.
    pub vlan: Option<u16>,
    /// Target rate of each sender → destination connection (all its QPs), wire bits/s.
    pub rate_bps: u64,
    /// Link speed: PFC quanta and the DCQCN ceiling.
    pub link_bps: u64,
    /// QPs per connection, served round robin.
    pub qps: u32,
    /// How long senders send.
    pub duration_ns: u64,
    /// Honour received PFC/PAUSE.
    pub pfc: bool,
    /// DSCP → priority, to know which PFC pauses stop this sender.
    pub prio_map: PrioMap,
    /// DCQCN reaction point (senders) and notification point (receivers).
    pub dcqcn: bool,
    /// DCQCN parameters set instead of the defaults.
    pub dcqcn_overrides: DcqcnOverrides,
    /// Notification point: at most one CNP per QP per this interval.
    pub cnp_interval_ns: u64,
    /// Token bucket depth, as time at the current rate.
    pub burst_ns: u64,
}

impl Default for TrafficConfig {
    fn default() -> Self {
        TrafficConfig {
            op: Op::Write,
            msg_size: 65536,
            mtu: 1024,
            dscp: 26,
            vlan: None,
            rate_bps: 1_000_000_000,
            link_bps: 25_000_000_000,
            qps: 1,
            duration_ns: 1_000_000_000,
            pfc: true,
            prio_map: PrioMap::default(),
            dcqcn: true,
            dcqcn_overrides: DcqcnOverrides::default(),
            cnp_interval_ns: super::dcqcn::CnpPacer::DEFAULT_INTERVAL_NS,
            burst_ns: 200_000,
        }
    }
}

impl TrafficConfig {
    /// Refuses settings the sender cannot build frames for (MTU, message size, QPs, DSCP, zero
    /// rates).
    pub fn validate(&self) -> Result<()> {
        if ![256, 512, 1024, 2048, 4096].contains(&self.mtu) {
            bail!("path MTU must be 256, 512, 1024, 2048 or 4096 (got {})", self.mtu);
        }
        if self.msg_size == 0 || self.msg_size > u64::from(u32::MAX) {
            bail!("message size must be 1 B ..= 4 GiB");
        }
        if self.qps == 0 || self.qps > 4096 {
            bail!("QPs must be 1..=4096");
        }
        if self.dscp > 63 {
            bail!("DSCP must be 0..=63");
        }
        if self.rate_bps == 0 || self.link_bps == 0 {
            bail!("rates must be positive");
        }
        Ok(())
    }

    /// The priority the sender's data frames travel in.
    pub fn priority(&self) -> u8 {
        self.prio_map.get(self.dscp)
    }

    /// Per-QP rate ceiling: the connection's target split over its QPs, at most the link.
    pub fn qp_max_rate(&self) -> f64 {
        (self.rate_bps as f64 / f64::from(self.qps)).min(self.link_bps as f64)
    }
}

/// One destination of a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    /// Its MAC, the data frames' destination.
    pub mac: [u8; 6],
    /// Its IPv4 address (also what its CNPs come from).
    pub ip: [u8; 4],
}

/// One pre-built frame and where to patch it.
struct Template {
    frame: Vec<u8>,
    info: FrameInfo,
    psn_off: usize,
    payload_off: usize,
    payload_len: usize,
    wire_bits: f64,
}

/// What one QP sent.
#[derive(Debug, Clone, Default)]
pub struct QpTxStats {
    /// Data packets sent.
    pub packets: u64,
    /// Frame bytes sent (no preamble, gap or FCS).
    pub bytes: u64,
    /// Bytes sent plus each frame's preamble, gap and FCS: what pacing counts.
    pub wire_bytes: u64,
    /// Whole messages sent.
    pub messages: u64,
    /// CNPs that arrived for this QP.
    pub cnps_received: u64,
    /// When the first packet left, ns (the caller's clock).
    pub first_tx_ns: u64,
    /// When the latest packet left, ns.
    pub last_tx_ns: u64,
    /// Sending time the token bucket forfeited because this thread ran later than the bucket
    /// depth allows (descheduled, or the CPU too slow): the rate falls short by this much.
    pub late_ns: u64,
}

/// One QP's transmit state.
pub struct QpTx {
    /// Index of the destination in the sender's list.
    pub dest: usize,
    /// The destination's IPv4 address (a CNP is matched to the QP by it and the QPN).
    pub dst_ip: [u8; 4],
    /// This QP's number (see [`qpn_base`]).
    pub qpn: u32,
    templates: Vec<Template>,
    /// Packets per message.
    npk: u64,
    /// Index of the next packet within its message.
    pos: u64,
    psn: u32,
    seq: u32,
    /// Earliest departure of the next packet (token bucket), ns.
    next_ns: f64,
    max_rate: f64,
    /// The reaction point, when DCQCN is on.
    pub dcqcn: Option<Dcqcn>,
    /// What this QP sent.
    pub stats: QpTxStats,
    /// Messages to send in all (`None`: no end).
    limit: Option<u64>,
}

impl QpTx {
    /// Current pacing rate, bits/s.
    pub fn rate(&self) -> f64 {
        self.dcqcn
            .as_ref()
            .map_or(self.max_rate, |d| d.rate().min(self.max_rate))
    }

    /// Sent every message its limit allows.
    pub fn is_done(&self) -> bool {
        self.limit.is_some_and(|l| self.stats.messages >= l)
    }
}

/// A sender: its QPs (destinations × QPs per connection) and their pacing.
pub struct Sender {
    /// What it sends and how; fixed for the run.
    pub cfg: TrafficConfig,
    /// Destinations × QPs per connection, served round robin.
    pub qps: Vec<QpTx>,
    prio: u8,
    rr: usize,
    /// Sends that failed (the error is also returned by [`Sender::poll`]).
    pub tx_errors: u64,
    /// CNPs that matched none of this sender's QPs (ignored).
    pub cnps_unknown_qp: u64,
}

/// First QP number of destination `d`'s connection: QPs are `base(d) .. base(d) + qps`.
pub fn qpn_base(dest_index: usize, qps: u32) -> u32 {
    0x100 + dest_index as u32 * qps
}

impl Sender {
    /// Builds the templates of every QP. `src_mac`/`src_ip` address this host.
    pub fn new(cfg: TrafficConfig, src_mac: [u8; 6], src_ip: [u8; 4], dests: &[Dest]) -> Result<Sender> {
        let qps = cfg.qps;
        Sender::with_qpns(cfg, src_mac, src_ip, dests, |d, q| qpn_base(d, qps) + q)
    }

    /// As [`Sender::new`], with QP numbers from `qpn(destination index, QP index)` (the
    /// fabric numbers QPs by flow, so a CNP finds its flow). They must be unique.
    pub fn with_qpns(
        cfg: TrafficConfig,
        src_mac: [u8; 6],
        src_ip: [u8; 4],
        dests: &[Dest],
        qpn: impl Fn(usize, u32) -> u32,
    ) -> Result<Sender> {
        cfg.validate()?;
        let prio = cfg.priority();
        let max_rate = cfg.qp_max_rate();
        let mut qps = Vec::new();
        for (d, dest) in dests.iter().enumerate() {
            for q in 0..cfg.qps {
                let qpn = qpn(d, q);
                let templates = build_templates(&cfg, src_mac, src_ip, dest, qpn, prio)?;
                let npk = cfg.msg_size.div_ceil(cfg.mtu as u64);
                qps.push(QpTx {
                    dest: d,
                    dst_ip: dest.ip,
                    qpn,
                    templates,
                    npk,
                    pos: 0,
                    psn: 0,
                    seq: 0,
                    next_ns: 0.0,
                    max_rate,
                    dcqcn: cfg.dcqcn.then(|| Dcqcn::new(cfg.dcqcn_overrides.params(max_rate))),
                    stats: QpTxStats::default(),
                    limit: None,
                });
            }
        }
        Ok(Sender {
            cfg,
            qps,
            prio,
            rr: 0,
            tx_errors: 0,
            cnps_unknown_qp: 0,
        })
    }

    /// The priority of the sender's data frames.
    pub fn priority(&self) -> u8 {
        self.prio
    }

    /// Starts pacing at `start` (every QP may send its first packet then).
    pub fn start(&mut self, start: u64) {
        for q in &mut self.qps {
            q.next_ns = start as f64;
            if let Some(d) = &mut q.dcqcn {
                *d = Dcqcn::new(*d.params());
            }
        }
    }

    /// A CNP from `src_ip` for QP `qpn` arrived.
    pub fn on_cnp(&mut self, src_ip: [u8; 4], qpn: u32, now: u64) {
        match self.qps.iter_mut().find(|q| q.qpn == qpn && q.dst_ip == src_ip) {
            Some(q) => {
                q.stats.cnps_received += 1;
                if let Some(d) = &mut q.dcqcn {
                    d.on_cnp(now);
                }
            }
            None => self.cnps_unknown_qp += 1,
        }
    }

    /// Sends up to `burst` due packets through `send`, each stamped with `clock()` (the send
    /// time its payload header carries). `send` returns `Ok(false)` when it has no room now:
    /// that QP is retried on the next poll. Returns when the next packet is due (ns), the end
    /// of a pause, or `u64::MAX` when every QP has sent all its messages.
    pub fn poll<E>(
        &mut self,
        pause: &mut PauseRx,
        now: u64,
        burst: usize,
        clock: impl Fn() -> u64,
        mut send: impl FnMut(&[u8]) -> std::result::Result<bool, E>,
    ) -> std::result::Result<u64, E> {
        if self.cfg.pfc && pause.is_paused(self.prio, now) {
            // Paused time is not lateness: the bucket just stays full.
            let floor = now as f64 - self.cfg.burst_ns as f64;
            for q in &mut self.qps {
                q.next_ns = q.next_ns.max(floor);
            }
            return Ok(pause.until(self.prio));
        }
        let n = self.qps.len();
        let burst_ns = self.cfg.burst_ns as f64;
        let nowf = now as f64;
        let mut sent = 0;
        let mut idle_scans = 0;
        while sent < burst && idle_scans < n {
            let i = self.rr;
            self.rr = (self.rr + 1) % n;
            let q = &mut self.qps[i];
            if q.next_ns > nowf || q.is_done() {
                idle_scans += 1;
                continue;
            }
            idle_scans = 0;
            let t = match (q.npk, q.pos) {
                (1, _) => 0,
                (_, 0) => 0,
                (k, p) if p + 1 == k => 2,
                _ => 1,
            };
            let tpl = &mut q.templates[t];
            let psn = q.psn.to_be_bytes();
            tpl.frame[tpl.psn_off..tpl.psn_off + 3].copy_from_slice(&psn[1..]);
            let ts = clock();
            let hdr = PayloadHeader { ts_ns: ts, seq: q.seq };
            hdr.write(&mut tpl.frame[tpl.payload_off..tpl.payload_off + tpl.payload_len]);
            write_icrc(&mut tpl.frame, &tpl.info);
            match send(&tpl.frame) {
                Ok(true) => {}
                Ok(false) => {
                    // No room: retry this QP on the next poll.
                    self.rr = i;
                    return Ok(now + 10_000);
                }
                Err(e) => {
                    self.tx_errors += 1;
                    return Err(e);
                }
            }
            sent += 1;
            let len = tpl.frame.len() as u64;
            let wire_bits = tpl.wire_bits;
            q.psn = (q.psn + 1) & 0x00ff_ffff;
            q.seq = q.seq.wrapping_add(1);
            q.pos += 1;
            if q.pos == q.npk {
                q.pos = 0;
                q.stats.messages += 1;
            }
            if q.stats.packets == 0 {
                q.stats.first_tx_ns = ts;
            }
            q.stats.last_tx_ns = ts;
            q.stats.packets += 1;
            q.stats.bytes += len;
            q.stats.wire_bytes += len + WIRE_OVERHEAD_BYTES;
            if let Some(d) = &mut q.dcqcn {
                d.on_sent(len + WIRE_OVERHEAD_BYTES, now);
            }
            let rate = q.rate().max(1.0);
            if q.next_ns < nowf - burst_ns {
                q.stats.late_ns += (nowf - burst_ns - q.next_ns) as u64;
                q.next_ns = nowf - burst_ns;
            }
            q.next_ns += wire_bits * 1e9 / rate;
        }
        let next = self
            .qps
            .iter()
            .filter(|q| !q.is_done())
            .map(|q| q.next_ns)
            .fold(f64::INFINITY, f64::min);
        // Rounded up: a caller in virtual time that wakes at the returned nanosecond finds the
        // packet due (rounded down, it would wake a fraction early and send nothing).
        Ok(if next.is_finite() {
            next.max(0.0).ceil() as u64
        } else {
            u64::MAX
        })
    }

    /// Stops each QP after `messages` messages (`None`: sends for as long as it is polled,
    /// rocegen's way). The fabric's finite flows are one QP with a message limit.
    pub fn limit_messages(&mut self, messages: Option<u64>) {
        for q in &mut self.qps {
            q.limit = messages;
        }
    }

    /// Every QP has sent all its messages (never, without a limit).
    pub fn is_done(&self) -> bool {
        self.qps.iter().all(QpTx::is_done)
    }

    /// Closes the books at `now` (DCQCN timers up to date).
    pub fn finish(&mut self, now: u64) {
        for q in &mut self.qps {
            if let Some(d) = &mut q.dcqcn {
                d.poll(now);
            }
        }
    }
}

fn build_templates(
    cfg: &TrafficConfig,
    src_mac: [u8; 6],
    src_ip: [u8; 4],
    dest: &Dest,
    qpn: u32,
    prio: u8,
) -> Result<Vec<Template>> {
    let mtu = cfg.mtu as u64;
    let msg = cfg.msg_size;
    let npk = msg.div_ceil(mtu);
    let last_len = msg - (npk - 1) * mtu;
    let (first, middle, last, only) = match cfg.op {
        Op::Send => (
            opcode::RC_SEND_FIRST,
            opcode::RC_SEND_MIDDLE,
            opcode::RC_SEND_LAST,
            opcode::RC_SEND_ONLY,
        ),
        Op::Write => (
            opcode::RC_RDMA_WRITE_FIRST,
            opcode::RC_RDMA_WRITE_MIDDLE,
            opcode::RC_RDMA_WRITE_LAST,
            opcode::RC_RDMA_WRITE_ONLY,
        ),
    };
    // (opcode, payload length, RETH?, AckReq?)
    let kinds: Vec<(u8, u64, bool, bool)> = if npk == 1 {
        vec![(only, msg, cfg.op == Op::Write, true)]
    } else {
        vec![
            (first, mtu, cfg.op == Op::Write, false),
            (middle, mtu, false, false),
            (last, last_len, false, true),
        ]
    };
    let reth_bytes = reth(0x1000_0000_0000 | (u64::from(qpn) << 24), qpn, msg as u32);
    let mut out = Vec::new();
    for (op, plen, has_reth, ack) in kinds {
        let mut b = RoceFrameBuilder::new()
            .macs(src_mac, dest.mac)
            .ipv4(src_ip, dest.ip)
            .dscp(cfg.dscp)
            .ecn(Ecn::Ect0)
            .udp_sport(0xc000 | (qpn as u16 & 0x3fff))
            .opcode(op)
            .dest_qp(qpn)
            .psn(0)
            .payload(&vec![0u8; plen as usize]);
        b.bth.set_ack_req(ack);
        if has_reth {
            b = b.ext(&reth_bytes);
        }
        if let Some(vid) = cfg.vlan {
            b = b.vlan(prio, vid);
        }
        let frame = b.build().context("building a frame template")?;
        let info = parse(&frame, usize::MAX).map_err(|e| anyhow::anyhow!("template does not parse: {e}"))?;
        let bth_off = info.bth_offset().context("template has no BTH")?;
        let payload_off = bth_off + 12 + if has_reth { 16 } else { 0 };
        out.push(Template {
            wire_bits: ((frame.len() as u64 + WIRE_OVERHEAD_BYTES) * 8) as f64,
            psn_off: bth_off + 9,
            payload_off,
            payload_len: plen as usize,
            info,
            frame,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MacControl;

    fn sender(msg_size: u64, pfc: bool) -> Sender {
        let cfg = TrafficConfig {
            msg_size,
            mtu: 1024,
            rate_bps: 100_000_000_000,
            link_bps: 100_000_000_000,
            pfc,
            dcqcn: false,
            ..TrafficConfig::default()
        };
        let dest = Dest {
            mac: [2, 0, 0, 0, 0, 2],
            ip: [10, 0, 0, 2],
        };
        Sender::new(cfg, [2, 0, 0, 0, 0, 1], [10, 0, 0, 1], &[dest]).unwrap()
    }

    /// A message is cut into FIRST, MIDDLE…, LAST with consecutive PSNs, the send time the
    /// caller's clock gives, and the limit stops the QP after its messages.
    #[test]
    fn segments_messages_in_virtual_time_and_stops_at_the_limit() {
        let mut s = sender(3000, true);
        s.limit_messages(Some(2));
        s.start(1000);
        let mut pause = PauseRx::default();
        let mut seen = Vec::new();
        let mut now = 1000;
        while !s.is_done() {
            let next = s
                .poll(
                    &mut pause,
                    now,
                    1,
                    || now,
                    |f| {
                        let info = parse(f, usize::MAX).unwrap();
                        let bth = info.bth(f).unwrap();
                        let off = info.bth_offset().unwrap()
                            + 12
                            + if bth.opcode() == opcode::RC_RDMA_WRITE_FIRST {
                                16
                            } else {
                                0
                            };
                        let hdr = PayloadHeader::read(&f[off..]).unwrap();
                        assert!(crate::wire::verify_icrc(f, &info));
                        seen.push((bth.opcode(), bth.psn(), hdr.ts_ns, f.len()));
                        Ok::<_, ()>(true)
                    },
                )
                .unwrap();
            assert!(next > now, "paced: the next packet is due later");
            now = next;
        }
        let ops: Vec<u8> = seen.iter().map(|s| s.0).collect();
        use opcode::*;
        assert_eq!(
            ops,
            [
                RC_RDMA_WRITE_FIRST,
                RC_RDMA_WRITE_MIDDLE,
                RC_RDMA_WRITE_LAST,
                RC_RDMA_WRITE_FIRST,
                RC_RDMA_WRITE_MIDDLE,
                RC_RDMA_WRITE_LAST
            ]
        );
        assert_eq!(seen.iter().map(|s| s.1).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5]);
        // Stamped with the virtual clock, spaced by the wire time at 100G (~90 ns).
        assert_eq!(seen[0].2, 1000);
        assert!(seen.windows(2).all(|w| w[1].2 > w[0].2 && w[1].2 - w[0].2 < 200));
        // 3000 B = 1024 + 1024 + 952.
        assert_eq!(seen[2].3 + 72, seen[1].3);
        assert_eq!(s.poll(&mut pause, now, 1, || now, |_| Ok::<_, ()>(true)), Ok(u64::MAX));
    }

    /// A PFC XOFF for the sender's priority holds it until the pause ends; without PFC
    /// honouring it keeps sending.
    #[test]
    fn honours_pfc_for_its_priority() {
        for pfc in [true, false] {
            let mut s = sender(1 << 20, pfc);
            s.start(0);
            let mut pause = PauseRx::default();
            let xoff = MacControl::Pfc {
                enable: 1 << 3,
                times: [0, 0, 0, 100, 0, 0, 0, 0],
            };
            pause.on_mac_control(xoff, 0, 100_000_000_000);
            let mut sent = 0;
            let next = s
                .poll(
                    &mut pause,
                    10,
                    1,
                    || 10,
                    |_| {
                        sent += 1;
                        Ok::<_, ()>(true)
                    },
                )
                .unwrap();
            if pfc {
                // 100 quanta × 512 bit times at 100G = 512 ns.
                assert_eq!((sent, next), (0, 512));
            } else {
                assert_eq!(sent, 1);
            }
        }
    }
}

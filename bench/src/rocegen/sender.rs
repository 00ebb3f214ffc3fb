//! The sender: RoCEv2 RC SEND / RDMA WRITE messages, per-QP frame templates patched in place,
//! token-bucket pacing on wire bytes, PFC/PAUSE honouring and a DCQCN reaction point per QP.

use super::dcqcn::{Dcqcn, DcqcnParams};
use super::wire::{now_ns, RawSocket};
use super::{Op, PayloadHeader, PrioMap, WIRE_OVERHEAD_BYTES};
use anyhow::{bail, Context, Result};
use dataplane::wire::build::{reth, RoceFrameBuilder};
use dataplane::wire::pfc::quanta_to_ns;
use dataplane::wire::roce::opcode;
use dataplane::wire::{parse, write_icrc, Ecn, FrameInfo, MacControl};

/// DCQCN parameter overrides (`None`: the default of [`DcqcnParams::for_max_rate`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DcqcnOverrides {
    pub g: Option<f64>,
    pub alpha_timer_ns: Option<u64>,
    pub rate_timer_ns: Option<u64>,
    pub byte_counter: Option<u64>,
    pub fast_recovery_stages: Option<u32>,
    pub rai_bps: Option<f64>,
    pub rhai_bps: Option<f64>,
    pub min_rate_bps: Option<f64>,
}

impl DcqcnOverrides {
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
    pub op: Op,
    /// Message size in bytes.
    pub msg_size: u64,
    /// Path MTU: payload bytes per packet (256, 512, 1024, 2048 or 4096).
    pub mtu: usize,
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
    pub prio_map: PrioMap,
    /// DCQCN reaction point (senders) and notification point (receivers).
    pub dcqcn: bool,
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
    pub mac: [u8; 6],
    pub ip: [u8; 4],
}

/// Received PFC/PAUSE: which priorities are paused until when, and for how long in total.
#[derive(Debug, Clone, Default)]
pub struct PauseRx {
    until: [u64; 8],
    since: [Option<u64>; 8],
    /// Time paused per priority (closed intervals, plus the open one at `finish`).
    pub paused_ns: [u64; 8],
    pub pfc_frames: u64,
    pub pause_frames: u64,
    /// PFC XOFF (non-zero time) per priority.
    pub xoff: [u64; 8],
    /// PFC XON (zero time) per priority.
    pub xon: [u64; 8],
}

impl PauseRx {
    /// A decoded MAC control frame arrived at `now`; quanta are 512 bit times at `link_bps`.
    pub fn on_mac_control(&mut self, mc: MacControl, now: u64, link_bps: u64) {
        match mc {
            MacControl::Pfc { enable, times } => {
                self.pfc_frames += 1;
                for (p, &t) in times.iter().enumerate() {
                    if enable & (1 << p) != 0 {
                        if t == 0 {
                            self.xon[p] += 1;
                        } else {
                            self.xoff[p] += 1;
                        }
                        self.set(p, t, now, link_bps);
                    }
                }
            }
            MacControl::Pause { time } => {
                self.pause_frames += 1;
                for p in 0..8 {
                    self.set(p, time, now, link_bps);
                }
            }
            MacControl::Other { .. } => {}
        }
    }

    fn set(&mut self, p: usize, quanta: u16, now: u64, link_bps: u64) {
        self.settle(p, now);
        if quanta == 0 {
            if let Some(s) = self.since[p].take() {
                self.paused_ns[p] += now.saturating_sub(s);
            }
            self.until[p] = 0;
        } else {
            if self.since[p].is_none() {
                self.since[p] = Some(now);
            }
            self.until[p] = now + quanta_to_ns(quanta, link_bps);
        }
    }

    /// Closes an expired pause.
    fn settle(&mut self, p: usize, now: u64) {
        if let Some(s) = self.since[p] {
            if now >= self.until[p] {
                self.paused_ns[p] += self.until[p].saturating_sub(s);
                self.since[p] = None;
            }
        }
    }

    /// Whether priority `p` is paused at `now`.
    #[inline]
    pub fn is_paused(&mut self, p: u8, now: u64) -> bool {
        let p = usize::from(p & 7);
        self.settle(p, now);
        self.since[p].is_some()
    }

    /// When priority `p`'s pause expires (0 if not paused).
    pub fn until(&self, p: u8) -> u64 {
        self.until[usize::from(p & 7)]
    }

    /// Closes every pause still open at `now` (end of run).
    pub fn finish(&mut self, now: u64) {
        for p in 0..8 {
            self.settle(p, now);
            if let Some(s) = self.since[p].take() {
                self.paused_ns[p] += now.saturating_sub(s);
            }
        }
    }
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
    pub packets: u64,
    pub bytes: u64,
    pub wire_bytes: u64,
    pub messages: u64,
    pub cnps_received: u64,
    pub first_tx_ns: u64,
    pub last_tx_ns: u64,
    /// Sending time the token bucket forfeited because this thread ran later than the bucket
    /// depth allows (descheduled, or the CPU too slow): the rate falls short by this much.
    pub late_ns: u64,
}

/// One QP's transmit state.
pub struct QpTx {
    pub dest: usize,
    pub dst_ip: [u8; 4],
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
    pub dcqcn: Option<Dcqcn>,
    pub stats: QpTxStats,
}

impl QpTx {
    /// Current pacing rate, bits/s.
    pub fn rate(&self) -> f64 {
        self.dcqcn
            .as_ref()
            .map_or(self.max_rate, |d| d.rate().min(self.max_rate))
    }
}

/// A sender: its QPs (destinations × QPs per connection) and their pacing.
pub struct Sender {
    pub cfg: TrafficConfig,
    pub qps: Vec<QpTx>,
    prio: u8,
    rr: usize,
    pub tx_errors: u64,
    pub cnps_unknown_qp: u64,
}

/// First QP number of destination `d`'s connection: QPs are `base(d) .. base(d) + qps`.
pub fn qpn_base(dest_index: usize, qps: u32) -> u32 {
    0x100 + dest_index as u32 * qps
}

impl Sender {
    /// Builds the templates of every QP. `src_mac`/`src_ip` address this host.
    pub fn new(cfg: TrafficConfig, src_mac: [u8; 6], src_ip: [u8; 4], dests: &[Dest]) -> Result<Sender> {
        cfg.validate()?;
        let prio = cfg.priority();
        let max_rate = cfg.qp_max_rate();
        let mut qps = Vec::new();
        for (d, dest) in dests.iter().enumerate() {
            for q in 0..cfg.qps {
                let qpn = qpn_base(d, cfg.qps) + q;
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

    /// Sends up to `burst` due packets. Returns when the next one is due (ns), or `None` if
    /// this sender waits for nothing but a pause or has nothing left.
    pub fn poll(&mut self, sock: &RawSocket, pause: &mut PauseRx, now: u64, burst: usize) -> Result<u64> {
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
            if q.next_ns > nowf {
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
            let ts = now_ns();
            let hdr = PayloadHeader { ts_ns: ts, seq: q.seq };
            hdr.write(&mut tpl.frame[tpl.payload_off..tpl.payload_off + tpl.payload_len]);
            write_icrc(&mut tpl.frame, &tpl.info);
            match sock.send(&tpl.frame) {
                Ok(true) => {}
                Ok(false) => {
                    // No room in the kernel: retry this QP on the next poll.
                    self.rr = i;
                    return Ok(now + 10_000);
                }
                Err(e) => {
                    self.tx_errors += 1;
                    return Err(e).with_context(|| format!("send on {}", sock.iface()));
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
        let next = self.qps.iter().map(|q| q.next_ns).fold(f64::INFINITY, f64::min);
        Ok(if next.is_finite() {
            next.max(0.0) as u64
        } else {
            u64::MAX
        })
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

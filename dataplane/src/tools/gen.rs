//! Synthetic RoCEv2 traffic written as one pcap per switch port: the bundled example, the
//! replay tests' inputs, and a quick way for users to make their own (`rocesw gen`).
//!
//! Hosts use the RFC 2544 benchmarking range (198.18.0.0/15) and locally administered MACs, so
//! generated captures can never be mistaken for real traffic.

use crate::replay::PcapOutput;
use crate::switch::WIRE_OVERHEAD_BYTES;
use crate::wire::build::RoceFrameBuilder;
use crate::wire::roce::opcode;
use crate::wire::Ecn;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// Test host `i`: the host cabled to switch port `i`.
pub fn host_mac(i: u16) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, 0x00, 0x5e, 0x10, b[0], b[1]]
}

/// Test host `i`'s IPv4 address, 198.18.x.y from i + 1.
pub fn host_ip(i: u16) -> [u8; 4] {
    let b = (i + 1).to_be_bytes();
    [198, 18, b[0], b[1]]
}

/// One RoCEv2 RC flow: `count` SEND ONLY frames of `frame_len` bytes from host `src` to host
/// `dst`, starting at `start_ns`, paced at `rate_bps` (on-wire, preamble and gap included).
#[derive(Debug, Clone)]
pub struct Flow {
    /// Sending host (and the port its capture is for).
    pub src: u16,
    /// Receiving host.
    pub dst: u16,
    /// DSCP of every frame (0..=63), which the switch maps to a priority.
    pub dscp: u8,
    /// ECN codepoint every frame carries.
    pub ecn: Ecn,
    /// Destination QP of the BTH (also picks the UDP source port).
    pub qp: u32,
    /// Frame length in bytes, FCS not included.
    pub frame_len: usize,
    /// Frames to send.
    pub count: u64,
    /// Timestamp of the first frame, ns from the capture start.
    pub start_ns: u64,
    /// Pacing rate, wire bits per second.
    pub rate_bps: u64,
}

impl Flow {
    /// The frames of this flow with their timestamps (ns from the capture start).
    pub fn frames(&self) -> Result<Vec<(u64, Vec<u8>)>> {
        let mut b = RoceFrameBuilder::new()
            .macs(host_mac(self.src), host_mac(self.dst))
            .ipv4(host_ip(self.src), host_ip(self.dst))
            .dscp(self.dscp)
            .ecn(self.ecn)
            .opcode(opcode::RC_SEND_ONLY)
            .dest_qp(self.qp);
        b.udp_sport = 49152 + (self.qp as u16 & 0x3fff);
        let gap_ps = (self.frame_len as u64 + WIRE_OVERHEAD_BYTES) as u128 * 8 * 1_000_000_000_000
            / self.rate_bps.max(1) as u128;
        let mut out = Vec::with_capacity(self.count as usize);
        for i in 0..self.count {
            b.bth.set_psn((i & 0xff_ffff) as u32);
            let ts = self.start_ns + (i as u128 * gap_ps / 1000) as u64;
            out.push((ts, b.build_sized(self.frame_len)?));
        }
        Ok(out)
    }
}

/// A frame from host `i` that lets the switch learn where it is (a RoCE ACK to host `to`), as a
/// receiver's first ACK would.
pub fn announce(i: u16, to: u16) -> Result<Vec<u8>> {
    let b = RoceFrameBuilder::new()
        .macs(host_mac(i), host_mac(to))
        .ipv4(host_ip(i), host_ip(to))
        .opcode(opcode::RC_ACK)
        .ext(&crate::wire::build::aeth(0, 0))
        .dscp(26);
    Ok(b.build()?)
}

/// Writes `frames` (any order) as a pcap, sorted by time, stamped from `base_ns`.
pub fn write_pcap(path: &Path, base_ns: u64, mut frames: Vec<(u64, Vec<u8>)>) -> Result<()> {
    frames.sort_by_key(|(ts, _)| *ts);
    let mut out = PcapOutput::create(path)?;
    for (ts, f) in &frames {
        out.write(base_ns + ts, f)?;
    }
    out.finish()
}

/// An N→1 incast: hosts 0..senders each send `frames` lossless frames at line rate to host
/// `senders` (which announces itself first). Returns the pcap paths, one per port 0..=senders.
#[derive(Debug, Clone)]
pub struct Incast {
    /// Sending hosts (ports 0..senders); the receiver is port `senders`.
    pub senders: u16,
    /// Frames per sender.
    pub frames: u64,
    /// Frame length in bytes, FCS not included.
    pub frame_len: usize,
    /// Each sender's rate: its port's line rate, bits per second.
    pub speed_bps: u64,
    /// DSCP of the senders' frames.
    pub dscp: u8,
}

/// The shortest frame `rocesw gen` writes: the Ethernet minimum without FCS (an IPv4 RoCEv2
/// SEND's headers and ICRC take 58 bytes; the rest is payload or padding).
pub const MIN_FRAME_LEN: usize = 60;
/// The longest: the largest frame any port may take (mtu 9216, plus an Ethernet header, an
/// 802.1Q tag... as `controlplane` counts it).
pub const MAX_FRAME_LEN: usize =
    controlplane::validate::MAX_MTU as usize + controlplane::headroom::L2_OVERHEAD_BYTES as usize;

/// `--size` of `rocesw gen`: a size as configs write it (`1024`, `1KiB`, `4k`), within
/// [`MIN_FRAME_LEN`] ..= [`MAX_FRAME_LEN`].
pub fn parse_frame_len(text: &str) -> Result<usize, String> {
    let n = controlplane::units::parse_size(text).map_err(|e| e.to_string())?;
    if n < MIN_FRAME_LEN as u64 {
        return Err(format!(
            "{n} bytes is below the Ethernet minimum of {MIN_FRAME_LEN} (without FCS; an IPv4 RoCEv2 \
             frame's headers and ICRC alone take 58)"
        ));
    }
    if n > MAX_FRAME_LEN as u64 {
        return Err(format!(
            "{n} bytes is above the largest frame a port can take, {MAX_FRAME_LEN} (mtu {} plus {} bytes of \
             Ethernet header and tag)",
            controlplane::validate::MAX_MTU,
            controlplane::headroom::L2_OVERHEAD_BYTES
        ));
    }
    Ok(n as usize)
}

/// Capture timestamps start here (2026-01-01T00:00:00Z), so outputs have plausible dates.
pub const BASE_NS: u64 = 1_767_225_600_000_000_000;

impl Incast {
    /// What is wrong with this incast for the switch config `cfg` (called `name` in messages),
    /// which is not an error of the captures themselves: a sending port the config lacks, or
    /// frames longer than a sending port takes (the switch would drop every one as `oversize`).
    pub fn warnings(&self, cfg: &controlplane::Config, name: &str) -> Vec<String> {
        self.warnings_on(cfg, name, &self.default_ports())
    }

    /// Ports 0..=senders: the senders' ids, then the receiver's.
    pub fn default_ports(&self) -> Vec<u16> {
        (0..=self.senders).collect()
    }

    /// As [`Incast::warnings`], for the incast on `ports` (the senders' ids, then the
    /// receiver's: [`incast_ports`]).
    pub fn warnings_on(&self, cfg: &controlplane::Config, name: &str, ports: &[u16]) -> Vec<String> {
        let mut out = Vec::new();
        for (i, &id) in ports.iter().enumerate() {
            let sender = i < ports.len() - 1;
            match cfg.ports.iter().find(|p| p.id == id) {
                None => out.push(format!(
                    "{name} has no port {id}: the incast writes port{id}.pcap for it"
                )),
                Some(p) if sender && self.frame_len > p.max_frame_bytes as usize => out.push(format!(
                    "--size {} is above the largest frame port {id} of {name} takes ({} bytes: mtu {} + {}): \
                     the switch drops every one of its frames as oversize; use --size {} or less, or a \
                     config with a larger mtu",
                    self.frame_len,
                    p.max_frame_bytes,
                    p.max_frame_bytes - controlplane::headroom::L2_OVERHEAD_BYTES,
                    controlplane::headroom::L2_OVERHEAD_BYTES,
                    p.max_frame_bytes
                )),
                Some(_) => {}
            }
        }
        out
    }

    /// Writes `port<i>.pcap` for every port into `dir` (created if missing) and returns their
    /// paths; an error if there are no senders.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        self.write_on(dir, &self.default_ports())
    }

    /// As [`Incast::write`], for the incast on `ports` (`senders` + 1 port ids: the senders',
    /// then the receiver's): `port<id>.pcap` for each, the frames of host i (its MAC and
    /// address, [`host_mac`]`(i)`) in the i-th port's.
    pub fn write_on(&self, dir: &Path, ports: &[u16]) -> Result<Vec<PathBuf>> {
        if self.senders == 0 {
            bail!("an incast needs at least one sender");
        }
        if ports.len() != usize::from(self.senders) + 1 {
            bail!(
                "an incast of {} senders needs {} ports, not {}",
                self.senders,
                self.senders + 1,
                ports.len()
            );
        }
        std::fs::create_dir_all(dir)?;
        let receiver = self.senders;
        let mut paths = Vec::new();
        for s in 0..self.senders {
            let flow = Flow {
                src: s,
                dst: receiver,
                dscp: self.dscp,
                ecn: Ecn::Ect0,
                qp: 0x100 + s as u32,
                frame_len: self.frame_len,
                count: self.frames,
                start_ns: 1_000,
                rate_bps: self.speed_bps,
            };
            let path = dir.join(format!("port{}.pcap", ports[usize::from(s)]));
            write_pcap(&path, BASE_NS, flow.frames()?)?;
            paths.push(path);
        }
        let path = dir.join(format!("port{}.pcap", ports[usize::from(receiver)]));
        write_pcap(&path, BASE_NS, vec![(0, announce(receiver, 0)?)])?;
        paths.push(path);
        Ok(paths)
    }
}

/// The ports an incast of `senders` senders feeds in `cfg`, senders first, the receiver last, as
/// ids: `asked` (`--ports`: names or ids of the config's ports), else the config's first
/// `senders` + 1 ports in its order (a config_db.json's Ethernet0, Ethernet4, ...), else, for a
/// config with fewer ports, ids 0..=senders (whose missing ports [`Incast::warnings_on`] names).
pub fn incast_ports(
    cfg: &controlplane::Config,
    name: &str,
    senders: u16,
    asked: Option<&[String]>,
) -> Result<Vec<u16>> {
    let want = usize::from(senders) + 1;
    let Some(asked) = asked else {
        if cfg.ports.len() >= want {
            return Ok(cfg.ports.iter().take(want).map(|p| p.id).collect());
        }
        return Ok((0..=senders).collect());
    };
    if asked.len() != want {
        bail!(
            "--ports names {} port(s); an incast of {senders} sender(s) needs {want} (the senders, then the receiver)",
            asked.len()
        );
    }
    let mut ids = Vec::with_capacity(want);
    for a in asked {
        let by_name = cfg.ports.iter().find(|p| p.name.as_deref() == Some(a.as_str()));
        let by_id = || {
            a.parse::<u16>()
                .ok()
                .and_then(|id| cfg.ports.iter().find(|p| p.id == id))
        };
        let Some(p) = by_name.or_else(by_id) else {
            let have: Vec<String> = cfg
                .ports
                .iter()
                .map(|p| match &p.name {
                    Some(n) => format!("{n} ({})", p.id),
                    None => p.id.to_string(),
                })
                .collect();
            bail!("--ports: {name} has no port {a:?} (its ports: {})", have.join(", "));
        };
        if ids.contains(&p.id) {
            bail!("--ports: port {a:?} is named twice");
        }
        ids.push(p.id);
    }
    Ok(ids)
}

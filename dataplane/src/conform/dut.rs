//! The device under test of `rocesw conform`: one switch in virtual time, driven as sonic-mgmt's
//! PTF host drives a DUT. A test host sits on every port (host i on port index i, its MAC
//! learnt before the first test); it sends at its port's line rate and, like a PTF host, never
//! obeys the PFC frames the switch sends it: every frame sent arrives. A port's transmit can be
//! turned off and on (SAI's PKT_TX_ENABLE), a port can be flooded with PFC frames (a storm), and
//! what a port transmits can be captured in order.
//!
//! Where the suite sleeps 8 s for the counters to settle, [`Dut::settle`] runs virtual time until
//! nothing but PFC refreshes can happen: every frame sent has arrived and every frame that can
//! leave has left.

use crate::egress::TxSink;
use crate::switch::Switch;
use crate::switch::WIRE_OVERHEAD_BYTES;
use crate::tools::gen::{announce, Flow};
use crate::wire::Ecn;
use anyhow::{anyhow, bail, Result};
use controlplane::snapshot::Snapshot;
use controlplane::Config;
use std::collections::VecDeque;

/// Virtual time with no data frame moving after which [`Dut::settle`] calls the switch settled.
pub const QUIET_NS: u64 = 1_000_000;

/// What the hosts saw leave the switch.
#[derive(Default)]
struct Hosts {
    /// Per port index: the TOS byte (DSCP and ECN) of each data frame received, in order,
    /// while capturing (0xff: not IPv4).
    captured: Vec<Option<Vec<u8>>>,
    /// Per port index: data frames received (PFC frames not counted).
    data: Vec<u64>,
    /// Data frames moved in total (for the quiet check).
    moved: u64,
}

impl TxSink for Hosts {
    fn transmit(&mut self, port: usize, frame: &[u8], _at_ns: u64) {
        if frame.get(12..14) == Some(&[0x88, 0x08]) {
            return;
        }
        self.moved += 1;
        if let Some(n) = self.data.get_mut(port) {
            *n += 1;
        }
        if let Some(Some(c)) = self.captured.get_mut(port) {
            c.push(frame.get(15).copied().unwrap_or(0xff));
        }
    }
}

/// A PFC storm a host sends into the switch: one frame every `every_ns`, pausing `prios`.
#[derive(Debug, Clone, Copy)]
struct Storm {
    prios: u8,
    every_ns: u64,
    next_ns: u64,
}

/// One switch in virtual time with a host on every port.
pub struct Dut {
    sw: Switch,
    now: u64,
    /// Per port index: frames the host still has to send, with their arrival times.
    pending: Vec<VecDeque<(u64, Vec<u8>)>>,
    /// Per port index: when the host's link is free to start its next frame, in ps (frames
    /// follow each other at line rate to the picosecond, as the emulated wire does).
    link_free_ps: Vec<u128>,
    storms: Vec<Option<Storm>>,
    hosts: Hosts,
}

impl Dut {
    /// The switch `cfg` describes, every host's MAC learnt (each host sends one frame, which
    /// the switch floods, and the switch settles).
    pub fn new(cfg: &Config) -> Result<Dut> {
        let n = cfg.ports.len();
        if n < 2 {
            bail!("the switch has {n} port(s): the QoS tests need at least 2");
        }
        let mut d = Dut {
            sw: Switch::new(cfg, 1),
            now: 0,
            pending: vec![VecDeque::new(); n],
            link_free_ps: vec![0; n],
            storms: vec![None; n],
            hosts: Hosts {
                captured: vec![None; n],
                data: vec![0; n],
                moved: 0,
            },
        };
        for i in 0..n {
            let frame = announce(i as u16, ((i + 1) % n) as u16)?;
            d.queue_frame(i, frame);
        }
        d.settle()?;
        if d.sw.fdb().len() < n {
            bail!(
                "the switch learnt {} of its {n} hosts' addresses (is learning off in [fdb]?)",
                d.sw.fdb().len()
            );
        }
        Ok(d)
    }

    /// The config the switch runs now.
    pub fn config(&self) -> &Config {
        self.sw.config()
    }

    /// The switch itself (its accounting, for watermarks).
    pub fn switch(&self) -> &Switch {
        &self.sw
    }

    /// The index of the port named `name` (or with that id).
    pub fn port(&self, name: &str) -> Result<usize> {
        let id = self.sw.config().port_id_of(name).map_err(|e| anyhow!(e))?;
        Ok(self.sw.port_index(id).expect("a port of the config"))
    }

    /// A port's name as the config gives it (its id where it has none).
    pub fn name(&self, port: usize) -> String {
        let p = &self.sw.config().ports[port];
        p.name.clone().unwrap_or_else(|| p.id.to_string())
    }

    /// Host `src` sends `count` frames of `len` bytes with `dscp` (ECN ECT(1), as the PTF
    /// tests send) to host `dst`, back to back at its line rate after what it already sends.
    pub fn send(&mut self, src: usize, dst: usize, dscp: u8, count: u64, len: usize) -> Result<()> {
        self.send_ecn(src, dst, dscp, Ecn::Ect1, count, len)
    }

    /// [`Dut::send`] with the ECN field `ecn` (DscpEcnSend sends Not-ECT or ECT(1)).
    pub fn send_ecn(&mut self, src: usize, dst: usize, dscp: u8, ecn: Ecn, count: u64, len: usize) -> Result<()> {
        let flow = Flow {
            src: src as u16,
            dst: dst as u16,
            dscp,
            ecn,
            qp: 0x100 + dst as u32,
            frame_len: len,
            count: 1,
            start_ns: 0,
            rate_bps: 1,
        };
        let frame = flow
            .frames()?
            .pop()
            .map(|(_, f)| f)
            .ok_or_else(|| anyhow!("no frame"))?;
        for _ in 0..count {
            self.queue_frame(src, frame.clone());
        }
        self.settle()
    }

    fn queue_frame(&mut self, port: usize, frame: Vec<u8>) {
        let speed = self.sw.config().ports[port].speed_bps.max(1);
        let start_ps = self.link_free_ps[port].max(u128::from(self.now) * 1000);
        let wire_ps =
            (frame.len() as u128 + u128::from(WIRE_OVERHEAD_BYTES)) * 8 * 1_000_000_000_000 / u128::from(speed);
        self.link_free_ps[port] = start_ps + wire_ps;
        let start = (start_ps / 1000) as u64;
        self.pending[port].push_back((start, frame));
    }

    /// Turns a port's transmit off or on, as the suite's "tx disable" does.
    pub fn set_tx(&mut self, port: usize, on: bool) -> Result<()> {
        let mut cfg = self.sw.config().clone();
        cfg.ports[port].tx_enabled = on;
        self.sw.reconfigure(&cfg).map_err(|e| anyhow!(e))?;
        self.settle()
    }

    /// Starts or stops capturing what `port` transmits; returns what was captured (the DSCP of
    /// each data frame, in order).
    pub fn capture(&mut self, port: usize, on: bool) -> Vec<u8> {
        // IPv4's DSCP: the upper six bits of the TOS byte.
        self.capture_tos(port, on)
            .into_iter()
            .map(|tos| if tos == 0xff { tos } else { tos >> 2 })
            .collect()
    }

    /// As [`Dut::capture`], the whole TOS byte of each frame (its low two bits: ECN).
    pub fn capture_tos(&mut self, port: usize, on: bool) -> Vec<u8> {
        let was = std::mem::replace(&mut self.hosts.captured[port], on.then(Vec::new));
        was.unwrap_or_default()
    }

    /// Runs `cfg` from now on, as a change written to CONFIG_DB is (what is queued stays).
    pub fn reconfigure(&mut self, cfg: &Config) -> Result<()> {
        self.sw.reconfigure(cfg).map_err(|e| anyhow!(e))?;
        self.settle()
    }

    /// Starts a PFC storm from the host on `port`: PFC frames pausing `prios` (a bit mask) for
    /// the longest time, `per_second` of them.
    pub fn start_storm(&mut self, port: usize, prios: u8, per_second: u64) {
        let every_ns = 1_000_000_000 / per_second.max(1);
        self.storms[port] = Some(Storm {
            prios,
            every_ns,
            next_ns: self.now,
        });
    }

    /// Stops the storm from `port`'s host.
    pub fn stop_storm(&mut self, port: usize) {
        self.storms[port] = None;
    }

    /// Virtual ns since the switch started.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Every counter now.
    pub fn snapshot(&self) -> Snapshot {
        self.sw.snapshot(self.now)
    }

    /// Clears the watermarks (peaks restart from the current use), as `sonic-clear` does.
    pub fn clear_watermarks(&mut self) {
        self.sw.restart_peaks();
    }

    /// Runs until every frame sent has arrived and nothing has moved for [`QUIET_NS`] (what
    /// is left waits behind a transmit that is off, or a pause).
    pub fn settle(&mut self) -> Result<()> {
        let mut last_moved = (self.hosts.moved, self.now);
        loop {
            let end = if self.pending.iter().all(VecDeque::is_empty) {
                if self.sw.is_idle() {
                    return Ok(());
                }
                if self.hosts.moved != last_moved.0 {
                    last_moved = (self.hosts.moved, self.now);
                }
                if self.now >= last_moved.1 + QUIET_NS {
                    return Ok(());
                }
                last_moved.1 + QUIET_NS
            } else {
                u64::MAX
            };
            self.step(end)?;
        }
    }

    /// Runs `ns` of virtual time (the suite's waits: a watchdog's detection, an XON's delay).
    pub fn wait(&mut self, ns: u64) -> Result<()> {
        let end = self.now + ns;
        while self.now < end {
            self.step(end)?;
        }
        Ok(())
    }

    /// One round of the event loop: what is due now happens, then time moves to the next event
    /// (at most `end`).
    fn step(&mut self, end: u64) -> Result<()> {
        let n = self.pending.len();
        let mut progressed = false;
        for port in 0..n {
            if let Some(storm) = self.storms[port].as_mut() {
                while storm.next_ns <= self.now {
                    let mut frame = [0u8; 64];
                    let len = crate::wire::pfc::encode_pfc(&mut frame, host_mac(port), storm.prios, [0xffff; 8]);
                    self.sw.receive(port, &frame[..len], storm.next_ns);
                    storm.next_ns += storm.every_ns;
                    progressed = true;
                }
            }
            while self.pending[port].front().is_some_and(|(at, _)| *at <= self.now) {
                let (at, frame) = self.pending[port].pop_front().expect("checked");
                self.sw.receive(port, &frame, at);
                progressed = true;
            }
        }
        self.sw.poll(self.now);
        for port in 0..n {
            progressed |= self.sw.transmit(port, self.now, &mut self.hosts) > 0;
        }
        let next = self
            .pending
            .iter()
            .filter_map(|q| q.front().map(|(at, _)| *at))
            .chain(self.storms.iter().flatten().map(|s| s.next_ns))
            .chain(self.sw.next_event(self.now))
            .min();
        match next {
            Some(t) if t > self.now => self.now = t.min(end.max(self.now + 1)),
            Some(_) if !progressed => self.now += 1,
            Some(_) => {}
            None if end != u64::MAX => self.now = end,
            // What was due has happened; the caller looks again.
            None if progressed => {}
            None => bail!(
                "the switch stalled at {} ns with frames queued (a bug: please report it)",
                self.now
            ),
        }
        Ok(())
    }
}

fn host_mac(port: usize) -> [u8; 6] {
    crate::tools::gen::host_mac(port as u16)
}

//! The VL arbitration sweep: two backlogged queues through a real switch's egress path, one in
//! the high-priority table (VL 0 with weight H) and one in the low-priority table (VL 1 with
//! weight L), under LimitOfHighPriority Q; the bandwidth ratio high/low for each (Q, H, L).
//!
//! One `Switch` serves the whole grid: each point is a live config change
//! (`Switch::reconfigure`, as `rocectl apply` makes it), a warm-up of a few low-priority
//! packets so the arbiter's place left by the previous point does not count, then a window
//! that ends just after a low-priority packet, `cycles` low packets long. Both queues are
//! topped up between transmit calls, so they never run empty (the switch sends at most a
//! burst of 32 per call; each queue holds at least 64).

use anyhow::{bail, Context, Result};
use controlplane::Config;
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::Ecn;
use dataplane::Switch;
use std::fmt::Write;

/// The DSCP of the high-priority VL's frames (queue 0) and of the low-priority VL's (queue 1).
const DSCP_HIGH: u8 = 0;
const DSCP_LOW: u8 = 8;
/// Frames kept queued in each queue at least, before every transmit call.
const BACKLOG: usize = 64;
const SPEED_BPS: u64 = 100_000_000_000;

/// One grid point's measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// LimitOfHighPriority Q of the point.
    pub q: u8,
    /// Weight H of the high-priority table's VL.
    pub h: u8,
    /// Weight L of the low-priority table's VL.
    pub l: u8,
    /// High-priority packets sent in the measured window.
    pub high_packets: u64,
    /// Low-priority packets sent in the measured window.
    pub low_packets: u64,
    /// High-priority bytes sent in the measured window.
    pub high_bytes: u64,
    /// Low-priority bytes sent in the measured window.
    pub low_bytes: u64,
}

impl Point {
    /// High-priority bytes per low-priority byte; infinite when the low VL never sent.
    pub fn ratio(&self) -> f64 {
        if self.low_bytes == 0 {
            f64::INFINITY
        } else {
            self.high_bytes as f64 / self.low_bytes as f64
        }
    }
}

/// What the arbitration semantics predict for this setup (module doc of
/// `dataplane::egress::sched::vlarb`): between two low-priority packets the high VL sends
/// until the limit is reached, at least one packet; with one entry per table the weights
/// only decide when an entry's turn ends and the same entry starts again, so H and L play no
/// part. High packets per low packet: max(1, ceil(64·Q / c)) with c = ceil(frame / 64) the
/// frame's credits; None (unbounded) for Q = 255.
pub fn predicted_ratio(q: u8, frame: usize) -> Option<u64> {
    (q != controlplane::VLARB_UNBOUNDED).then(|| {
        let unit = u64::from(controlplane::VLARB_WEIGHT_BYTES);
        let limit = u64::from(q) * u64::from(controlplane::VLARB_LIMIT_BYTES) / unit;
        limit.div_ceil((frame as u64).div_ceil(unit)).max(1)
    })
}

/// The sweep's switch: two 100G ports, port 0 feeding port 1, DSCP 0 → queue 0 and DSCP 8 →
/// queue 1, no PFC, frames of exactly `frame` bytes allowed.
pub struct Sweep {
    sw: Switch,
    text: String,
    frame: usize,
    high: Vec<u8>,
    low: Vec<u8>,
    now: u64,
    /// Frames received and sent per queue (0 high, 1 low): what is queued is the difference.
    received: [u64; 2],
    sent: [u64; 2],
    step_ns: u64,
}

fn frame_of(dscp: u8, qp: u32, frame: usize) -> Result<Vec<u8>> {
    let flow = Flow {
        src: 0,
        dst: 1,
        dscp,
        ecn: Ecn::NotEct,
        qp,
        frame_len: frame,
        count: 1,
        start_ns: 0,
        rate_bps: SPEED_BPS,
    };
    Ok(flow.frames()?.remove(0).1)
}

impl Sweep {
    /// `frame`: the length of every frame, Ethernet without FCS (86 … 9234 bytes).
    pub fn new(frame: usize) -> Result<Sweep> {
        if !(86..=9234).contains(&frame) {
            bail!("--frame {frame}: a RoCEv2 frame here is 86 to 9234 bytes (an IP MTU of 68 to 9216)");
        }
        let mtu = frame - 18;
        let text = format!(
            "[buffer]\ncell = \"256B\"\nsize = \"4MiB\"\n\
             [port_defaults]\nspeed = \"100G\"\ncable = \"1m\"\nmtu = {mtu}\nscheduler = \"vlarb\"\n\
             vlarb = {{ high = [[0, VLARB_H]], low = [[1, VLARB_L]], high_limit = VLARB_Q }}\n\
             [[port]]\nid = 0\n[[port]]\nid = 1\n\
             [classify]\ntrust = \"dscp\"\ndefault_tc = 2\ndscp_to_tc = {{ {DSCP_HIGH} = 0, {DSCP_LOW} = 1 }}\n\
             [cnp]\nqueue = 6\n"
        );
        let mut sweep = Sweep {
            sw: Switch::new(&Self::config_text(&text, 2, 16, 16)?, 1),
            text,
            frame,
            high: frame_of(DSCP_HIGH, 1, frame)?,
            low: frame_of(DSCP_LOW, 2, frame)?,
            now: 1_000,
            received: [0; 2],
            sent: [0; 2],
            step_ns: (frame as u64 + 24) * 8 * 32 * 1_000_000_000 / SPEED_BPS,
        };
        // Host 1 announces itself on port 1, so the data is unicast there.
        sweep.sw.receive(1, &announce(1, 0)?, 0);
        Ok(sweep)
    }

    fn config_text(text: &str, q: u8, h: u8, l: u8) -> Result<Config> {
        let t = text
            .replace("VLARB_H", &h.to_string())
            .replace("VLARB_L", &l.to_string())
            .replace("VLARB_Q", &q.to_string());
        Ok(controlplane::load_str(&t).context("the sweep's config")?.config)
    }

    /// Tops both queues up, lets port 1 send one burst, and returns the queues of the frames
    /// it sent in order (0 high, 1 low), into `order`.
    fn round(&mut self, order: &mut Vec<u8>) {
        for (q, f) in [(0, &self.high), (1, &self.low)] {
            let queued = (self.received[q] - self.sent[q]) as usize;
            if queued < BACKLOG {
                let n = BACKLOG - queued;
                self.sw.receive_burst(0, std::iter::repeat_n(f.as_slice(), n), self.now);
                self.received[q] += n as u64;
            }
        }
        order.clear();
        let mut sink = |port: usize, f: &[u8], _: u64| {
            // The DSCP of an untagged IPv4 frame: the TOS byte right after the Ethernet header.
            if port == 1 && f.len() > 15 {
                order.push(u8::from(f[15] >> 2 == DSCP_LOW));
            }
        };
        self.sw.transmit(1, self.now, &mut sink);
        for &q in order.iter() {
            self.sent[usize::from(q)] += 1;
        }
        self.now += self.step_ns;
    }

    /// Measures one point: `warmup` low packets, then a window of `cycles` low packets.
    /// Q = 255 (unbounded) starves the low VL: measured over a fixed number of frames instead.
    pub fn point(&mut self, q: u8, h: u8, l: u8, warmup: u64, cycles: u64) -> Result<Point> {
        let cfg = Self::config_text(&self.text, q, h, l)?;
        // Unbounded: the low VL never sends, so there is nothing to wait for.
        let warmup = if q == controlplane::VLARB_UNBOUNDED { 0 } else { warmup };
        self.sw.reconfigure(&cfg).map_err(anyhow::Error::msg)?;
        let mut order = Vec::with_capacity(32);
        let (mut lows, mut pkts) = (0u64, [0u64; 2]);
        // A bound: the limit at 255 entries' worth of frames per low packet, and then some.
        let cap = (warmup + cycles + 2) * (predicted_ratio(q, self.frame).unwrap_or(0) + 2) + 100_000;
        let mut total = 0u64;
        'run: loop {
            self.round(&mut order);
            if order.is_empty() {
                bail!("Q={q} H={h} L={l}: the port sent nothing with both queues backlogged");
            }
            for &o in &order {
                total += 1;
                if lows >= warmup {
                    pkts[usize::from(o)] += 1;
                }
                if o == 1 {
                    lows += 1;
                    if lows == warmup + cycles {
                        break 'run;
                    }
                }
                if total >= cap {
                    break 'run;
                }
            }
        }
        let s = self.sw.snapshot(self.now);
        let drops = s.totals.drops.total();
        if drops > 0 {
            bail!("Q={q} H={h} L={l}: {drops} frames dropped; the sweep needs lossless backlogs");
        }
        let f = self.frame as u64;
        Ok(Point {
            q,
            h,
            l,
            high_packets: pkts[0],
            low_packets: pkts[1],
            high_bytes: pkts[0] * f,
            low_bytes: pkts[1] * f,
        })
    }
}

/// The table as CSV, one line per point.
pub fn csv(points: &[Point], frame: usize) -> String {
    let mut o = String::from("q,h,l,frame_bytes,high_packets,low_packets,ratio\n");
    for p in points {
        let _ = writeln!(
            o,
            "{},{},{},{frame},{},{},{:.6}",
            p.q,
            p.h,
            p.l,
            p.high_packets,
            p.low_packets,
            p.ratio()
        );
    }
    o
}

/// Ratio against L, one curve per H, one panel per Q (in the order given), three panels a row.
pub fn svg(points: &[Point], qs: &[u8], hs: &[u8], frame: usize) -> String {
    const COLOURS: [&str; 8] = [
        "#1f5fbf", "#d0600e", "#2a9d3a", "#c0262d", "#7b4fb5", "#8c564b", "#d6479c", "#5a5a5a",
    ];
    let (pw, ph, gap, top) = (340.0, 250.0, 30.0, 60.0);
    let (ml, mr, mt, mb) = (50.0, 12.0, 28.0, 38.0);
    let cols = 3usize.min(qs.len().max(1));
    let rows = qs.len().div_ceil(cols);
    let (w, h) = (cols as f64 * (pw + gap) + gap, top + rows as f64 * (ph + gap) + 30.0);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{gap}" y="24" font-size="14">rocesw VL arbitration: bandwidth ratio high/low vs low weight L ({frame} B frames; one curve per high weight H; equal curves overlap)</text>"#
    );
    let lmin = points.iter().map(|p| p.l).min().unwrap_or(1) as f64;
    let lmax = (points.iter().map(|p| p.l).max().unwrap_or(255) as f64).max(lmin + 1.0);
    // Legend.
    for (i, hv) in hs.iter().enumerate() {
        let x = gap + i as f64 * 70.0;
        let c = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            o,
            r#"<line x1="{x}" x2="{:.0}" y1="42" y2="42" stroke="{c}" stroke-width="2"/><text x="{:.0}" y="46">H = {hv}</text>"#,
            x + 18.0,
            x + 22.0
        );
    }
    for (k, &qv) in qs.iter().enumerate() {
        let (px, py) = (
            gap + (k % cols) as f64 * (pw + gap),
            top + (k / cols) as f64 * (ph + gap),
        );
        let mine: Vec<&Point> = points.iter().filter(|p| p.q == qv && p.ratio().is_finite()).collect();
        let ymax = mine.iter().map(|p| p.ratio()).fold(0.0, f64::max);
        let ymax = nice_ceiling(ymax * 1.1);
        let (x0, x1, y0, y1) = (px + ml, px + pw - mr, py + ph - mb, py + mt);
        let x = |l: f64| x0 + (x1 - x0) * (l - lmin) / (lmax - lmin);
        let y = |r: f64| y0 - (y0 - y1) * r / ymax;
        let limit = if qv == controlplane::VLARB_UNBOUNDED {
            "unbounded".to_string()
        } else {
            format!("{} KiB", u32::from(qv) * 4)
        };
        let _ = writeln!(
            o,
            r#"<text x="{:.0}" y="{:.0}" font-size="12">Q = {qv} ({limit})</text>"#,
            x0,
            py + 16.0
        );
        let _ = writeln!(
            o,
            r##"<rect x="{x0:.1}" y="{y1:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#999"/>"##,
            x1 - x0,
            y0 - y1
        );
        for i in 0..=4 {
            let v = ymax * f64::from(i) / 4.0;
            let _ = writeln!(
                o,
                r##"<line x1="{x0:.1}" x2="{x1:.1}" y1="{0:.1}" y2="{0:.1}" stroke="#eee"/><text x="{1:.1}" y="{2:.1}" text-anchor="end">{3}</text>"##,
                y(v),
                x0 - 4.0,
                y(v) + 4.0,
                trim(v)
            );
        }
        for i in 0..=4 {
            let l = lmin + (lmax - lmin) * f64::from(i) / 4.0;
            let _ = writeln!(
                o,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                x(l),
                y0 + 14.0,
                l.round()
            );
        }
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">L (low weight, 64 B units)</text>"#,
            (x0 + x1) / 2.0,
            y0 + 30.0
        );
        if mine.is_empty() {
            let _ = writeln!(
                o,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">low VL starved (ratio infinite)</text>"#,
                (x0 + x1) / 2.0,
                (y0 + y1) / 2.0
            );
        }
        for (i, &hv) in hs.iter().enumerate() {
            let mut curve: Vec<&&Point> = mine.iter().filter(|p| p.h == hv).collect();
            curve.sort_by_key(|p| p.l);
            let pts: Vec<String> = curve
                .iter()
                .map(|p| format!("{:.1},{:.1}", x(f64::from(p.l)), y(p.ratio())))
                .collect();
            // Curves that coincide are drawn thinner on top, so each stays visible.
            let width = 1.0 + 2.0 * (hs.len() - 1 - i) as f64 / hs.len().max(1) as f64;
            let _ = writeln!(
                o,
                r#"<polyline fill="none" stroke="{}" stroke-width="{width:.2}" points="{}"/>"#,
                COLOURS[i % COLOURS.len()],
                pts.join(" ")
            );
        }
    }
    o.push_str("</svg>\n");
    o
}

/// 1, 2, 5 × 10^n at or above `v` (at least 1).
fn nice_ceiling(v: f64) -> f64 {
    if v <= 1.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * mag)
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

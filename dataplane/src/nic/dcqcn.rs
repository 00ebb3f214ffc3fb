//! DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015):
//! the reaction point's rate state machine ([`Dcqcn`]) and the notification point's CNP
//! spacing ([`CnpPacer`]), as pure functions of the time the caller passes.
//!
//! Reaction point, per QP:
//! * CNP: `Rt = Rc; Rc = Rc·(1 − α/2); α = (1 − g)·α + g`; the timer, the byte counter and
//!   both stage counts restart.
//! * Every K (55 µs) without a CNP: `α = (1 − g)·α`. The α timer starts at the QP's first
//!   CNP (before it the QP is not rate limited and α stays at its initial 1), as in NICs and
//!   ns-3's Mellanox DCQCN model; otherwise a long uncongested start would leave α ≈ 0 and
//!   the first cut would do nothing.
//! * Rate increase events: the timer (T, 55 µs) expiring, and every B bytes sent (byte
//!   counter). With the stage counts `t`, `bc` (events of each kind since the last CNP, not
//!   counting this one) and `F` = 5: `max(t, bc) < F`: fast recovery (so the first F events
//!   are fast recovery); `min(t, bc) > F`: hyper increase (`Rt += i·R_HAI`,
//!   `i = min(t, bc) − F`); otherwise additive increase (`Rt += R_AI`); always
//!   `Rc = (Rt + Rc) / 2`; then the event's own count goes up.
//! * The rate stays within `[min_rate, max_rate]`; once fully recovered (`Rc = Rt = max`)
//!   the increase timer stops until the next CNP.
//!
//! Parameters default to the paper's (g = 1/256, K = T = 55 µs, F = 5) except where a
//! link-relative value suits short runs on emulated links: R_AI = 0.5 % of the maximum rate
//! (the paper's 40 Mb/s is 0.1 % of 40 Gb/s; Mellanox's 5 Mb/s), R_HAI = 10 × R_AI, and a byte
//! counter of 150 KB (the paper's 10 MB takes seconds to expire at a few hundred Mb/s).

use serde::Serialize;

/// DCQCN parameters (rates in bits per second, times in nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DcqcnParams {
    /// α gain g.
    pub g: f64,
    /// α after the first CNP's update starts from this (the paper: 1).
    pub alpha_init: f64,
    /// α update period K without CNP.
    pub alpha_timer_ns: u64,
    /// Rate increase timer T.
    pub rate_timer_ns: u64,
    /// Byte counter B.
    pub byte_counter: u64,
    /// Fast recovery stages F.
    pub fast_recovery_stages: u32,
    /// Additive increase step R_AI.
    pub rai_bps: f64,
    /// Hyper increase step R_HAI.
    pub rhai_bps: f64,
    /// Floor of the rate.
    pub min_rate_bps: f64,
    /// Ceiling of the rate (the line rate, or the QP's target rate if lower); the start rate.
    pub max_rate_bps: f64,
}

impl DcqcnParams {
    /// The defaults for a QP whose rate may reach `max_rate_bps`.
    pub fn for_max_rate(max_rate_bps: f64) -> DcqcnParams {
        let rai = max_rate_bps * 0.005;
        DcqcnParams {
            g: 1.0 / 256.0,
            alpha_init: 1.0,
            alpha_timer_ns: 55_000,
            rate_timer_ns: 55_000,
            byte_counter: 150_000,
            fast_recovery_stages: 5,
            rai_bps: rai,
            rhai_bps: 10.0 * rai,
            min_rate_bps: (max_rate_bps / 1000.0).max(1e3).min(max_rate_bps),
            max_rate_bps,
        }
    }
}

/// Which increase a rate increase event applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Increase {
    /// Both stage counts below F: Rc moves halfway back to Rt, which stays.
    FastRecovery,
    /// A stage count has reached F: Rt grows by R_AI and Rc moves halfway to it.
    Additive,
    /// Both stage counts past F: Rt grows by R_HAI per stage beyond F.
    Hyper,
}

/// The reaction point of one QP.
#[derive(Debug, Clone)]
pub struct Dcqcn {
    p: DcqcnParams,
    /// Current rate Rc.
    rc: f64,
    /// Target rate Rt.
    rt: f64,
    alpha: f64,
    /// Timer stage count (T).
    t: u32,
    /// Byte counter stage count (BC).
    bc: u32,
    /// Bytes sent since the byte counter last expired.
    bytes: u64,
    /// Next α update; `None` until the first CNP.
    alpha_deadline: Option<u64>,
    /// Next increase timer expiry; `None` while at the maximum rate.
    rate_deadline: Option<u64>,
    /// CNPs acted on.
    pub cnps: u64,
    /// Increase events by kind.
    pub fast_recoveries: u64,
    /// Additive increase events.
    pub additive_increases: u64,
    /// Hyper increase events.
    pub hyper_increases: u64,
    /// Lowest Rc reached.
    pub min_rc: f64,
}

impl Dcqcn {
    /// At the maximum rate, α = `alpha_init`.
    pub fn new(p: DcqcnParams) -> Dcqcn {
        Dcqcn {
            p,
            rc: p.max_rate_bps,
            rt: p.max_rate_bps,
            alpha: p.alpha_init,
            t: 0,
            bc: 0,
            bytes: 0,
            alpha_deadline: None,
            rate_deadline: None,
            cnps: 0,
            fast_recoveries: 0,
            additive_increases: 0,
            hyper_increases: 0,
            min_rc: p.max_rate_bps,
        }
    }

    /// The parameters this reaction point runs with (a restart keeps them).
    pub fn params(&self) -> &DcqcnParams {
        &self.p
    }
    /// Current rate Rc (bits/s).
    pub fn rate(&self) -> f64 {
        self.rc
    }
    /// Target rate Rt (bits/s).
    pub fn target(&self) -> f64 {
        self.rt
    }
    /// The congestion estimate α (0..=1): the next CNP cuts Rc by α/2.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    /// (timer stage, byte counter stage).
    pub fn stages(&self) -> (u32, u32) {
        (self.t, self.bc)
    }

    /// A CNP arrived for this QP.
    pub fn on_cnp(&mut self, now: u64) {
        self.poll(now);
        self.cnps += 1;
        self.rt = self.rc;
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(self.p.min_rate_bps);
        self.min_rc = self.min_rc.min(self.rc);
        self.alpha = (1.0 - self.p.g) * self.alpha + self.p.g;
        self.t = 0;
        self.bc = 0;
        self.bytes = 0;
        self.alpha_deadline = Some(now + self.p.alpha_timer_ns);
        self.rate_deadline = Some(now + self.p.rate_timer_ns);
    }

    /// `bytes` were sent: advances the byte counter (only while recovering).
    pub fn on_sent(&mut self, bytes: u64, now: u64) {
        self.poll(now);
        if self.rate_deadline.is_none() || self.p.byte_counter == 0 {
            return;
        }
        self.bytes += bytes;
        while self.bytes >= self.p.byte_counter && self.rate_deadline.is_some() {
            self.bytes -= self.p.byte_counter;
            self.increase(false);
        }
    }

    /// Runs the α timer and the increase timer up to `now`.
    pub fn poll(&mut self, now: u64) {
        if let Some(ad) = self.alpha_deadline.filter(|&ad| now >= ad) {
            let k = self.p.alpha_timer_ns.max(1);
            let n = (now - ad) / k + 1;
            self.alpha *= (1.0 - self.p.g).powi(n.min(i32::MAX as u64) as i32);
            self.alpha_deadline = Some(ad + n * k);
        }
        let t = self.p.rate_timer_ns.max(1);
        // Bounded: each event at least halves the gap to the maximum, so a long idle period
        // converges in a few hundred events; past that the rate is at its ceiling anyway.
        let mut budget = 10_000;
        while let Some(d) = self.rate_deadline {
            if now < d || budget == 0 {
                break;
            }
            budget -= 1;
            self.rate_deadline = Some(d + t);
            self.increase(true);
        }
        if budget == 0 {
            if let Some(d) = self.rate_deadline {
                if d <= now {
                    self.rate_deadline = Some(now + t);
                }
            }
        }
    }

    /// The next time [`poll`](Self::poll) would change something.
    pub fn next_deadline(&self) -> u64 {
        let a = self.alpha_deadline.unwrap_or(u64::MAX);
        self.rate_deadline.map_or(a, |d| d.min(a))
    }

    /// One rate increase event, from the timer (`timer`) or the byte counter.
    fn increase(&mut self, timer: bool) -> Increase {
        let f = self.p.fast_recovery_stages;
        let kind = if self.t.max(self.bc) < f {
            self.fast_recoveries += 1;
            Increase::FastRecovery
        } else if self.t.min(self.bc) > f {
            let i = f64::from(self.t.min(self.bc) - f);
            self.rt += i * self.p.rhai_bps;
            self.hyper_increases += 1;
            Increase::Hyper
        } else {
            self.rt += self.p.rai_bps;
            self.additive_increases += 1;
            Increase::Additive
        };
        if timer {
            self.t = self.t.saturating_add(1);
        } else {
            self.bc = self.bc.saturating_add(1);
        }
        self.rt = self.rt.min(self.p.max_rate_bps);
        self.rc = ((self.rt + self.rc) / 2.0).clamp(self.p.min_rate_bps, self.p.max_rate_bps);
        // Within a millionth of the ceiling counts as recovered: stop the timer.
        if self.rt >= self.p.max_rate_bps && self.rc >= self.p.max_rate_bps * (1.0 - 1e-6) {
            self.rc = self.p.max_rate_bps;
            self.rate_deadline = None;
            self.t = 0;
            self.bc = 0;
            self.bytes = 0;
        }
        kind
    }

    /// One increase event as if the timer (`timer = true`) or the byte counter expired (for
    /// tests; normally [`poll`](Self::poll) and [`on_sent`](Self::on_sent) drive them).
    pub fn increase_event(&mut self, timer: bool) -> Increase {
        self.increase(timer)
    }
}

/// The notification point's CNP spacing for one QP: at most one CNP per `interval_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CnpPacer {
    /// Least time between two CNPs, ns.
    pub interval_ns: u64,
    last: Option<u64>,
}

impl CnpPacer {
    /// The DCQCN default interval: 50 µs.
    pub const DEFAULT_INTERVAL_NS: u64 = 50_000;

    /// A pacer that lets the first CE mark through at once.
    pub fn new(interval_ns: u64) -> CnpPacer {
        CnpPacer {
            interval_ns,
            last: None,
        }
    }

    /// A CE-marked packet of this QP arrived at `now`: whether to send a CNP (and if so, the
    /// interval restarts).
    pub fn on_ce(&mut self, now: u64) -> bool {
        match self.last {
            Some(l) if now < l.saturating_add(self.interval_ns) => false,
            _ => {
                self.last = Some(now);
                true
            }
        }
    }
}

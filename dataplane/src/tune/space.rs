//! What the tuner may change (Kmin, Kmax, Pmax of the lossless queues' ECN profiles and alpha
//! of the lossless PGs), on fixed ladders, and how a setting becomes a config fragment. Every
//! candidate reaches the simulated switches the way `rocectl patch` would reach a live one:
//! the fragment merged into the config's text, written over it, validated whole, and checked
//! to be a change a running switch takes.

use crate::fabric::topology::Topology;
use anyhow::{anyhow, bail, Result};
use controlplane::change::{ChangeError, Edit, Running};
use controlplane::Config;
use serde::Serialize;
use std::collections::BTreeSet;

/// Kmin and Kmax, KiB: powers of two from 4 KiB to 2 MiB.
pub const K_KIB: [u64; 10] = [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048];
/// Pmax, the marking probability at Kmax: from 1% to always.
pub const PMAX: [f64; 7] = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0];
/// alpha as (numerator, denominator): 2^−6 … 2^2.
pub const ALPHA: [(u32, u32); 9] = [
    (1, 64),
    (1, 32),
    (1, 16),
    (1, 8),
    (1, 4),
    (1, 2),
    (1, 1),
    (2, 1),
    (4, 1),
];

/// DCQCN's additive increase, as multiples of the NIC model's default (0.5% of line rate),
/// with hyper increase kept at ten times it.
pub const RAI_FACTOR: [f64; 7] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0];
/// DCQCN's byte counter, bytes (150 KB is the model's default).
pub const BYTE_COUNTER: [u64; 5] = [37_500, 75_000, 150_000, 300_000, 600_000];
/// The notification point's least time between two CNPs for one QP, µs (50 µs is the
/// DCQCN paper's and the NIC model's default; newer NICs go down to a few).
pub const CNP_INTERVAL_US: [u64; 4] = [4, 10, 25, 50];
/// The model's defaults on those ladders: (RAI, byte counter, CNP interval).
pub const DCQCN_DEFAULT: (usize, usize, usize) = (2, 2, 3);

/// Indices into the ladders; Kmax's never below Kmin's. `dcqcn` (RAI, byte counter, CNP
/// interval) only when the hosts' DCQCN is searched too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct Setting {
    /// Index into [`K_KIB`].
    pub kmin: usize,
    /// Index into [`K_KIB`], at least `kmin`.
    pub kmax: usize,
    /// Index into [`PMAX`].
    pub pmax: usize,
    /// Index into [`ALPHA`].
    pub alpha: usize,
    /// Indices into [`RAI_FACTOR`], [`BYTE_COUNTER`] and [`CNP_INTERVAL_US`].
    pub dcqcn: Option<(usize, usize, usize)>,
}

/// A setting as people read it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SettingView {
    /// Kmin with its unit (`8KiB`).
    pub kmin: String,
    /// Kmax with its unit.
    pub kmax: String,
    /// Pmax, a probability.
    pub pmax: f64,
    /// alpha as a fraction (`1/16`).
    pub alpha: String,
    /// The hosts' DCQCN, as the topology's `[nic]` keys, when searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic: Option<NicView>,
}

/// The hosts' DCQCN part of a setting, as the topology's `[nic]` keys spell it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NicView {
    /// Multiple of the model's default additive increase (0.5% of line rate).
    pub rai_factor: f64,
    /// Additive increase as a rate (`125Mbps`); empty until [`Setting::view_at`] knows the line
    /// rate.
    pub dcqcn_rai: String,
    /// Byte counter with its unit (`150000B`).
    pub dcqcn_byte_counter: String,
    /// CNP interval with its unit (`50us`).
    pub cnp_interval: String,
}

impl Setting {
    /// The values behind the indices; the RAI as a rate needs [`Setting::view_at`].
    pub fn view(self) -> SettingView {
        SettingView {
            kmin: format!("{}KiB", K_KIB[self.kmin]),
            kmax: format!("{}KiB", K_KIB[self.kmax]),
            pmax: PMAX[self.pmax],
            alpha: alpha_text(self.alpha),
            nic: self.dcqcn.map(|(r, b, c)| NicView {
                rai_factor: RAI_FACTOR[r],
                dcqcn_rai: String::new(),
                dcqcn_byte_counter: format!("{}B", BYTE_COUNTER[b]),
                cnp_interval: format!("{}us", CNP_INTERVAL_US[c]),
            }),
        }
    }

    /// The view with the RAI in bits per second for hosts at `line_bps`.
    pub fn view_at(self, line_bps: u64) -> SettingView {
        let mut v = self.view();
        if let (Some(n), Some((r, _, _))) = (v.nic.as_mut(), self.dcqcn) {
            n.dcqcn_rai = controlplane::units::format_rate(rai_bps(r, line_bps).round() as u64);
        }
        v
    }

    /// The setting as one line, as reports and `Evaluated::label` show it.
    pub fn label(self) -> String {
        let v = self.view();
        let mut l = format!("Kmin {} Kmax {} Pmax {} alpha {}", v.kmin, v.kmax, v.pmax, v.alpha);
        if let Some(n) = v.nic {
            l += &format!(
                " RAI x{} BC {} CNP {}",
                n.rai_factor, n.dcqcn_byte_counter, n.cnp_interval
            );
        }
        l
    }

    /// How aggressive a setting is, as a key that sorts the least aggressive first: the
    /// tuner's choice among settings that meet the targets on as many patterns (a tie).
    ///
    /// Least aggressive means the one that intervenes least in the traffic, so a tie never
    /// buys a harsher setting than the targets need: the lowest marking probability (Pmax:
    /// fewest CE marks, so DCQCN cuts rates least), then marking that starts latest and ramps
    /// slowest (the largest Kmin, then the largest Kmax), then the smallest alpha (each PG
    /// may take the least of the shared buffer, leaving the most to the others: the
    /// conservative buffer setting); with the hosts' DCQCN searched, the gentlest NIC last
    /// (the smallest additive increase, the largest byte counter, the longest CNP interval:
    /// the fewest rate changes). A total order: two different settings never compare equal.
    pub fn aggressiveness(self) -> impl Ord {
        use std::cmp::Reverse;
        (
            self.pmax,
            Reverse(self.kmin),
            Reverse(self.kmax),
            self.alpha,
            self.dcqcn.map(|(r, b, c)| (r, Reverse(b), Reverse(c))),
        )
    }

    /// Every setting one step away on one ladder, in a fixed order.
    pub fn neighbours(self) -> Vec<Setting> {
        let mut out = Vec::new();
        let step = |i: usize, up: bool, len: usize| -> Option<usize> {
            if up {
                (i + 1 < len).then_some(i + 1)
            } else {
                i.checked_sub(1)
            }
        };
        for up in [false, true] {
            if let Some(k) = step(self.kmin, up, K_KIB.len()) {
                out.push(Setting { kmin: k, ..self });
            }
            if let Some(k) = step(self.kmax, up, K_KIB.len()) {
                out.push(Setting { kmax: k, ..self });
            }
            if let Some(k) = step(self.pmax, up, PMAX.len()) {
                out.push(Setting { pmax: k, ..self });
            }
            if let Some(k) = step(self.alpha, up, ALPHA.len()) {
                out.push(Setting { alpha: k, ..self });
            }
            if let Some((r, b, c)) = self.dcqcn {
                if let Some(k) = step(r, up, RAI_FACTOR.len()) {
                    out.push(Setting {
                        dcqcn: Some((k, b, c)),
                        ..self
                    });
                }
                if let Some(k) = step(b, up, BYTE_COUNTER.len()) {
                    out.push(Setting {
                        dcqcn: Some((r, k, c)),
                        ..self
                    });
                }
                if let Some(k) = step(c, up, CNP_INTERVAL_US.len()) {
                    out.push(Setting {
                        dcqcn: Some((r, b, k)),
                        ..self
                    });
                }
            }
        }
        out.retain(|s| s.kmin <= s.kmax);
        out
    }
}

/// RAI in bits per second for hosts at `line_bps`.
pub fn rai_bps(i: usize, line_bps: u64) -> f64 {
    RAI_FACTOR[i] * 0.005 * line_bps as f64
}

/// The hosts' NIC model with a setting's DCQCN (unchanged without one).
pub fn apply_nic(topo: &mut Topology, s: Setting) {
    if let Some((r, b, c)) = s.dcqcn {
        let line = topo.links[topo.hosts[0].link].speed_bps;
        let o = &mut topo.nic.dcqcn_overrides;
        o.rai_bps = Some(rai_bps(r, line));
        o.rhai_bps = Some(10.0 * rai_bps(r, line));
        o.byte_counter = Some(BYTE_COUNTER[b]);
        topo.nic.cnp_interval_ns = CNP_INTERVAL_US[c] * 1000;
    }
}

fn alpha_text(i: usize) -> String {
    let (n, d) = ALPHA[i];
    if d == 1 {
        n.to_string()
    } else {
        format!("{n}/{d}")
    }
}

/// The nearest ladder index of a value (ties to the lower).
fn nearest(values: impl Iterator<Item = f64>, x: f64) -> usize {
    let mut best = (0, f64::INFINITY);
    for (i, v) in values.enumerate() {
        // Compared on a log scale: the ladders are geometric.
        let d = (v.ln() - x.max(1e-12).ln()).abs();
        if d < best.1 {
            best = (i, d);
        }
    }
    best.0
}

/// Which tables of the switches' configs a fragment sets: the ECN profiles of every lossless
/// queue and every lossless PG, over all switches.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// Names of the ECN profiles to set.
    pub profiles: BTreeSet<String>,
    /// Numbers of the PGs whose alpha to set.
    pub pgs: BTreeSet<u8>,
    /// The switches write those PGs' limit as `dynamic_th` (log2 α, as a config imported from
    /// SONiC does), so the fragment must too: a fragment merges keys and cannot remove one, and
    /// `alpha` beside `dynamic_th` is refused. Every value of the alpha ladder is a power of two.
    pub dynamic_th: bool,
}

impl Knobs {
    /// Finds the knobs over every switch; an error if a lossless queue has no ECN profile or no
    /// priority is lossless.
    pub fn of(topo: &Topology) -> Result<Knobs> {
        let mut profiles = BTreeSet::new();
        let mut pgs = BTreeSet::new();
        for sw in &topo.switches {
            let c = &sw.config;
            for tc in 0..c.pfc.enabled.len() {
                if !c.pfc.enabled[tc] {
                    continue;
                }
                let q = usize::from(c.classify.tc_to_queue[tc]);
                pgs.insert(c.classify.tc_to_pg[tc]);
                match &c.queues[q].ecn {
                    Some(e) => {
                        profiles.insert(e.name.clone());
                    }
                    None => bail!(
                        "switch {:?}: lossless queue {q} has no ECN profile, so there is no Kmin/Kmax to tune (set queue.{q}.ecn)",
                        sw.name
                    ),
                }
            }
        }
        if pgs.is_empty() {
            bail!("no switch has a lossless priority ([pfc] priorities): nothing to tune");
        }
        // How each switch's text writes the PGs' limit: `alpha` (or nothing), or `dynamic_th`.
        let mut writes_dynamic_th = BTreeSet::new();
        for sw in &topo.switches {
            let text = controlplane::config_toml(&sw.config_text).map_err(|e| anyhow!("switch {:?}: {e}", sw.name))?;
            let table: toml::Table = text.parse().unwrap_or_default();
            for pg in &pgs {
                let written = table
                    .get("pg")
                    .and_then(|t| t.get(pg.to_string()))
                    .is_some_and(|t| t.get("dynamic_th").is_some());
                writes_dynamic_th.insert(written);
            }
        }
        if writes_dynamic_th.len() > 1 {
            bail!(
                "the switches set the lossless PGs' ({pgs:?}) limit both as `alpha` and as `dynamic_th`: \
                 one fragment cannot tune both (write the same key in every config)"
            );
        }
        let dynamic_th = writes_dynamic_th.contains(&true);
        Ok(Knobs {
            profiles,
            pgs,
            dynamic_th,
        })
    }

    /// The fragment for a setting: the same values for every switch.
    pub fn fragment(&self, s: Setting) -> String {
        let v = s.view();
        let mut out = String::new();
        for p in &self.profiles {
            out += &format!(
                "[ecn.{p}]\nkmin = \"{}\"\nkmax = \"{}\"\npmax = {}\n\n",
                v.kmin, v.kmax, v.pmax
            );
        }
        for pg in &self.pgs {
            if self.dynamic_th {
                let (n, d) = ALPHA[s.alpha];
                let log2 = f64::from(n).log2() - f64::from(d).log2();
                out += &format!("[pg.{pg}]\ndynamic_th = {}\n\n", log2.round() as i64);
            } else {
                out += &format!("[pg.{pg}]\nalpha = \"{}\"\n\n", v.alpha);
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    }

    /// The setting nearest to what the first switch runs (where the search starts from, and
    /// what "before" is compared with is the configs themselves, not this).
    pub fn current(&self, topo: &Topology) -> Setting {
        let c = &topo.switches[0].config;
        let e = c
            .queues
            .iter()
            .find_map(|q| q.ecn.as_ref().filter(|e| self.profiles.contains(&e.name)))
            .expect("Knobs::of found a profile");
        let pg = usize::from(*self.pgs.first().expect("non-empty"));
        let alpha = match c.pgs[pg].shared {
            controlplane::Threshold::Dynamic { alpha } => alpha,
            _ => 1.0 / 8.0,
        };
        let kmin = nearest(K_KIB.iter().map(|k| (k * 1024) as f64), e.kmin_bytes as f64);
        let kmax = nearest(K_KIB.iter().map(|k| (k * 1024) as f64), e.kmax_bytes as f64).max(kmin);
        Setting {
            kmin,
            kmax,
            pmax: nearest(PMAX.iter().copied(), e.pmax),
            alpha: nearest(ALPHA.iter().map(|(n, d)| f64::from(*n) / f64::from(*d)), alpha),
            dcqcn: None,
        }
    }
}

/// Applies `fragment` to switch `i`'s config as `rocectl patch` does (the control socket's
/// own preparation, `controlplane::change`): merged into its text, written over it, validated
/// whole, and refused if a running switch could not take it.
pub fn patch_config(topo: &Topology, i: usize, fragment: &str) -> Result<Config> {
    let sw = &topo.switches[i];
    let what = format!("switch {:?}", sw.name);
    let running = Running::started(sw.config_text.clone(), sw.config.clone());
    match running.prepare(Edit::Fragment(fragment)) {
        Ok(change) => Ok(change.config),
        Err(ChangeError::Fragment(e)) => bail!("the fragment is not a config patch: {e}"),
        Err(ChangeError::Invalid(e)) => bail!("{what}: the patched config is invalid: {e}"),
        Err(ChangeError::Refused(why)) => bail!("{what}: a running switch would refuse the patch: {why}"),
        Err(ChangeError::Write(e)) => bail!("{what}: {e}"),
    }
}

/// Every switch's config with `fragment` applied.
pub fn patch_all(topo: &Topology, fragment: &str) -> Result<Vec<Config>> {
    (0..topo.switches.len())
        .map(|i| patch_config(topo, i, fragment))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hill climbing walks the ladders one step at a time and never leaves them, never puts
    /// Kmax below Kmin, and a corner has fewer neighbours than the middle.
    #[test]
    fn neighbours_stay_on_the_ladders() {
        let mid = Setting {
            kmin: 3,
            kmax: 5,
            pmax: 3,
            alpha: 4,
            dcqcn: None,
        };
        assert_eq!(mid.neighbours().len(), 8);
        let corner = Setting {
            kmin: 0,
            kmax: 0,
            pmax: 0,
            alpha: 0,
            dcqcn: Some((0, 0, 0)),
        };
        let n = corner.neighbours();
        assert_eq!(n.len(), 6, "{n:?}");
        for s in n.iter().chain(&mid.neighbours()) {
            assert!(s.kmin <= s.kmax && s.kmax < K_KIB.len() && s.pmax < PMAX.len() && s.alpha < ALPHA.len());
        }
        assert!(!mid.neighbours().contains(&mid));
    }

    #[test]
    fn nearest_is_on_a_log_scale() {
        let k = || K_KIB.iter().map(|k| (k * 1024) as f64);
        // 100 KB is nearer 128 KiB than 64 KiB by ratio; 400 KB nearer 512 KiB.
        assert_eq!(K_KIB[nearest(k(), 100_000.0)], 128);
        assert_eq!(K_KIB[nearest(k(), 400_000.0)], 512);
        assert_eq!(PMAX[nearest(PMAX.iter().copied(), 0.2)], 0.2);
        assert_eq!(
            alpha_text(nearest(ALPHA.iter().map(|(n, d)| f64::from(*n) / f64::from(*d)), 0.125)),
            "1/8"
        );
    }
}

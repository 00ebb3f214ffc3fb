//! `--params`: a sonic-mgmt `tests/qos/files/qos_params.<asic>.yaml`, in the suite's own
//! shape: `qos_params → <asic> → <topology> →` a `<speed>_<cable>` section (`xoff_1`,
//! `wm_pg_headroom`, `hdrm_pool_size`, …) beside the speed-independent ones (`xon_1`,
//! `lossy_queue_1`, `wrr`, `wm_*`). The section is the one keyed by the source port's lossless
//! profile, `pg_lossless_<speed>_<cable>_profile`, as the suite finds it.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// The largest parameters file read (the suite's own are under 200 KB).
const MAX_BYTES: usize = 4 << 20;

/// The parameter sets of one topology, for one `<speed>_<cable>`.
#[derive(Debug, Clone)]
pub struct Params {
    /// `qos_params.<asic>.<topology>`, as found.
    pub path: String,
    topo: Value,
    speed_cable: String,
}

impl Params {
    /// Reads `text` (called `name`) and picks the topology holding `speed_cable` (the first in
    /// file order, `topo-any` preferred).
    pub fn parse(text: &str, name: &str, speed_cable: &str) -> Result<Params> {
        if text.len() > MAX_BYTES {
            bail!(
                "{name}: {} bytes, more than a parameters file holds ({MAX_BYTES})",
                text.len()
            );
        }
        let doc: Value = serde_yaml_ng::from_str(text).with_context(|| format!("{name}: not YAML"))?;
        let asics = doc
            .get("qos_params")
            .and_then(Value::as_object)
            .ok_or_else(|| anyhow!("{name}: no `qos_params` mapping (sonic-mgmt's qos_params.<asic>.yaml shape)"))?;
        let mut found = Vec::new();
        for (asic, topos) in asics {
            let Some(topos) = topos.as_object() else { continue };
            for (topo, sections) in topos {
                if sections.get(speed_cable).is_some_and(Value::is_object) {
                    found.push((
                        format!("qos_params.{asic}.{topo}"),
                        topo == "topo-any",
                        sections.clone(),
                    ));
                }
            }
        }
        found.sort_by_key(|(_, any, _)| !*any);
        let (path, _, topo) = found.into_iter().next().ok_or_else(|| {
            anyhow!("{name}: no topology has a `{speed_cable}` section (the source port's lossless profile is for {speed_cable})")
        })?;
        Ok(Params {
            path,
            topo,
            speed_cable: speed_cable.to_string(),
        })
    }

    /// Parameter set `name` (`xoff_1`, `wrr`, …): from the `<speed>_<cable>` section, else the
    /// topology's speed-independent one.
    pub fn set(&self, name: &str) -> Option<&Value> {
        self.topo
            .get(&self.speed_cable)
            .and_then(|s| s.get(name))
            .or_else(|| self.topo.get(name))
            .filter(|v| v.is_object())
    }

    /// An integer field of set `name`.
    pub fn int(&self, name: &str, field: &str) -> Option<i64> {
        let v = self.set(name)?.get(field)?;
        v.as_i64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    }

    /// An integer list field of set `name` (`pkts_num_trig_pfc_multi: [..]`).
    pub fn ints(&self, name: &str, field: &str) -> Option<Vec<i64>> {
        let items = self.set(name)?.get(field)?.as_array()?;
        items
            .iter()
            .map(|v| v.as_i64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok())))
            .collect()
    }

    /// A count of set `name` (in cells of its `cell_size`, as the suite keeps them) as frames
    /// of `len` bytes, divided as the suite divides it; without `cell_size`, frames already.
    pub fn frames(&self, name: &str, field: &str, len: usize) -> Option<u64> {
        Some(self.cells_as_frames(name, self.int(name, field)?, len))
    }

    /// `cells` of set `name` as frames of `len` bytes (see [`Params::frames`]).
    pub fn cells_as_frames(&self, name: &str, cells: i64, len: usize) -> u64 {
        let occ = match self.int(name, "cell_size") {
            Some(cell) if cell > 0 => (len as i64 + cell - 1) / cell,
            _ => 1,
        };
        (cells.max(0) / occ.max(1)) as u64
    }

    /// A required integer field, or an error naming it.
    pub fn need(&self, name: &str, field: &str) -> Result<i64> {
        self.int(name, field)
            .ok_or_else(|| anyhow!("{}.{name}.{field}: missing or not an integer", self.path))
    }
}

/// What `--write-params` writes: the counts the rules give for one config, in the suite's
/// shape (counts in cells of `cell_size`, as the suite keeps them), so that a changed config can
/// be checked against the numbers of the one it replaces (`--params`).
pub struct Written {
    /// `qos_params.<asic>`.
    pub asic: String,
    /// `<speed>_<cable>` of the source port's lossless profile.
    pub speed_cable: String,
    /// The sets of the `<speed>_<cable>` section.
    pub by_speed: serde_json::Map<String, Value>,
    /// The speed-independent sets.
    pub common: serde_json::Map<String, Value>,
}

impl Written {
    /// The YAML text, with a header saying where it came from.
    pub fn text(self, source: &str) -> Result<String> {
        let mut topo = self.common;
        topo.insert(self.speed_cable, Value::Object(self.by_speed));
        let doc = serde_json::json!({ "qos_params": { self.asic: { "topo-any": topo } } });
        let body = serde_yaml_ng::to_string(&doc).context("writing the parameters")?;
        Ok(format!(
            "# sonic-mgmt qos_params, written by `rocesw conform sonic --write-params` from {source}:\n\
             # the counts rocesw's rules give for it. `dscp_mapping` is rocesw's own (the frames each\n\
             # queue gets from one frame per DSCP); sonic-mgmt reads it from the switch's maps.\n{body}"
        ))
    }
}

/// `100000_5m` from `pg_lossless_100000_5m_profile`, as the suite reads a PG's profile name.
pub fn speed_cable(profile: &str) -> Option<String> {
    profile
        .strip_prefix("pg_lossless_")?
        .strip_suffix("_profile")
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_by_speed_and_cable_then_topology_wide() {
        let text = "qos_params:\n  th2:\n    topo-t1:\n      100000_5m:\n        xoff_1: {dscp: 3, pkts_num_trig_pfc: 100}\n      \
                    xon_1: {dscp: 3, pkts_num_dismiss_pfc: \"12\"}\n";
        let p = Params::parse(text, "p.yaml", "100000_5m").unwrap();
        assert_eq!(p.path, "qos_params.th2.topo-t1");
        assert_eq!(p.int("xoff_1", "pkts_num_trig_pfc"), Some(100));
        assert_eq!(p.int("xon_1", "pkts_num_dismiss_pfc"), Some(12));
        assert!(p
            .need("xoff_1", "pkts_num_trig_ingr_drp")
            .unwrap_err()
            .to_string()
            .contains("xoff_1.pkts_num_trig_ingr_drp"));
        let e = Params::parse(text, "p.yaml", "100000_40m").unwrap_err().to_string();
        assert!(e.contains("no topology has a `100000_40m` section"), "{e}");
        assert!(Params::parse("a: [", "p.yaml", "x").is_err());
        assert!(Params::parse("qos: 1", "p.yaml", "x")
            .unwrap_err()
            .to_string()
            .contains("no `qos_params`"));
        assert_eq!(
            speed_cable("pg_lossless_100000_300m_profile").as_deref(),
            Some("100000_300m")
        );
        assert_eq!(speed_cable("ingress_lossy_profile"), None);
    }
}

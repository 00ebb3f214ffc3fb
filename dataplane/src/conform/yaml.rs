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
    /// Reads `text` (called `name`) and picks the topology: `topo` (`t1-64-lag` or
    /// `topo-t1-64-lag`, as sonic-mgmt's testbed names it), else the first holding
    /// `speed_cable` in file order (`topo-any` preferred). The topology must have a
    /// `speed_cable` section; an unknown one is refused with the file's topologies listed.
    pub fn parse(text: &str, name: &str, speed_cable: &str, topo: Option<&str>) -> Result<Params> {
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
        // Every topology, in file order: (asic, topology, its sections).
        let all: Vec<(&String, &String, &Value)> = asics
            .iter()
            .filter_map(|(asic, topos)| Some((asic, topos.as_object()?)))
            .flat_map(|(asic, topos)| topos.iter().map(move |(t, v)| (asic, t, v)))
            .collect();
        let holds = |v: &Value| v.get(speed_cable).is_some_and(Value::is_object);
        let listed = |only_holding: bool| -> String {
            let names: Vec<String> = all
                .iter()
                .filter(|(_, _, v)| !only_holding || holds(v))
                .map(|(_, t, v)| {
                    let speeds: Vec<&String> = v
                        .as_object()
                        .into_iter()
                        .flat_map(|o| o.iter())
                        .filter(|(k, x)| k.starts_with(|c: char| c.is_ascii_digit()) && x.is_object())
                        .map(|(k, _)| k)
                        .collect();
                    let speeds: Vec<&str> = speeds.iter().map(|s| s.as_str()).collect();
                    format!("{} ({})", t.trim_start_matches("topo-"), speeds.join(", "))
                })
                .collect();
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join("; ")
            }
        };
        let (asic, t, sections) = match topo {
            Some(want) => {
                let want = want.trim();
                let full = if want.starts_with("topo-") {
                    want.to_string()
                } else {
                    format!("topo-{want}")
                };
                let found = all.iter().find(|(_, t, _)| **t == full).ok_or_else(|| {
                    anyhow!(
                        "{name}: --topo {want}: no such topology; the file has: {}",
                        listed(false)
                    )
                })?;
                if !holds(found.2) {
                    bail!(
                        "{name}: --topo {want}: {full} has no `{speed_cable}` section (the source port's lossless profile is for {speed_cable}); \
                         topologies with one: {}",
                        listed(true)
                    );
                }
                *found
            }
            None => {
                let mut found: Vec<&(&String, &String, &Value)> = all.iter().filter(|(_, _, v)| holds(v)).collect();
                found.sort_by_key(|(_, t, _)| *t != "topo-any");
                **found.first().ok_or_else(|| {
                    anyhow!("{name}: no topology has a `{speed_cable}` section (the source port's lossless profile is for {speed_cable})")
                })?
            }
        };
        Ok(Params {
            path: format!("qos_params.{asic}.{t}"),
            topo: sections.clone(),
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
        let p = Params::parse(text, "p.yaml", "100000_5m", None).unwrap();
        assert_eq!(p.path, "qos_params.th2.topo-t1");
        assert_eq!(p.int("xoff_1", "pkts_num_trig_pfc"), Some(100));
        assert_eq!(p.int("xon_1", "pkts_num_dismiss_pfc"), Some(12));
        assert!(p
            .need("xoff_1", "pkts_num_trig_ingr_drp")
            .unwrap_err()
            .to_string()
            .contains("xoff_1.pkts_num_trig_ingr_drp"));
        let e = Params::parse(text, "p.yaml", "100000_40m", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no topology has a `100000_40m` section"), "{e}");
        assert!(Params::parse("a: [", "p.yaml", "x", None).is_err());
        assert!(Params::parse("qos: 1", "p.yaml", "x", None)
            .unwrap_err()
            .to_string()
            .contains("no `qos_params`"));
        assert_eq!(
            speed_cable("pg_lossless_100000_300m_profile").as_deref(),
            Some("100000_300m")
        );
        assert_eq!(speed_cable("ingress_lossy_profile"), None);
    }

    /// `--topo` picks a topology by sonic-mgmt's testbed name, with or without `topo-`; an
    /// unknown one, or one without the port's section, is refused with the topologies listed.
    #[test]
    fn topology_by_name() {
        let text = "qos_params:\n  th5:\n    topo-a:\n      100000_5m:\n        xoff_1: {pkts_num_trig_pfc: 1}\n    \
                    topo-b:\n      100000_5m:\n        xoff_1: {pkts_num_trig_pfc: 2}\n    topo-c:\n      400000_40m: {}\n";
        let first = Params::parse(text, "p.yaml", "100000_5m", None).unwrap();
        assert_eq!(first.path, "qos_params.th5.topo-a");
        for name in ["b", "topo-b"] {
            let p = Params::parse(text, "p.yaml", "100000_5m", Some(name)).unwrap();
            assert_eq!(
                (p.path.as_str(), p.int("xoff_1", "pkts_num_trig_pfc")),
                ("qos_params.th5.topo-b", Some(2))
            );
        }
        let e = Params::parse(text, "p.yaml", "100000_5m", Some("t1"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--topo t1: no such topology; the file has: a (100000_5m); b (100000_5m); c (400000_40m)"),
            "{e}"
        );
        let e = Params::parse(text, "p.yaml", "100000_5m", Some("c"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("topo-c has no `100000_5m` section") && e.contains("with one: a (100000_5m); b (100000_5m)"),
            "{e}"
        );
    }
}

//! Benchmarks and the workloads they share: a switch with the default profile, in-memory
//! ports, and pre-built RoCEv2 frames, so the benches measure the pipeline and nothing else.

pub mod edf;
pub mod rocegen;
pub mod vlarb_sweep;

use controlplane::Config;
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::Ecn;
use dataplane::Switch;

/// The repository's configs/default.toml, parsed and validated; panics if it does not load (a
/// broken checkout).
pub fn default_config() -> Config {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml");
    controlplane::load_file(std::path::Path::new(path))
        .expect("configs/default.toml loads")
        .config
}

/// Line rate of the default profile's ports.
pub const LINE_BPS: u64 = 25_000_000_000;

/// A burst of `n` lossless RoCEv2 frames of `len` bytes from host 0 to host 1.
pub fn burst(len: usize, n: usize) -> Vec<Vec<u8>> {
    Flow {
        src: 0,
        dst: 1,
        dscp: 26,
        ecn: Ecn::Ect0,
        qp: 7,
        frame_len: len,
        count: n as u64,
        start_ns: 0,
        rate_bps: LINE_BPS,
    }
    .frames()
    .expect("frames build")
    .into_iter()
    .map(|(_, f)| f)
    .collect()
}

/// A switch on the default profile that has learnt host 1 on port 1 and host 0 on port 0.
pub fn switch() -> Switch {
    let mut sw = Switch::new(&default_config(), 1);
    sw.receive(1, &announce(1, 0).expect("announce"), 0);
    sw.receive(0, &announce(0, 1).expect("announce"), 0);
    let mut sink = |_: usize, _: &[u8], _: u64| {};
    for p in 0..sw.num_ports() {
        sw.transmit(p, 1_000, &mut sink);
    }
    sw
}

/// Virtual time one burst takes on the wire at line rate, so the egress link keeps up.
pub fn burst_time_ns(len: usize, n: usize) -> u64 {
    (dataplane::switch::ser_ps(len, LINE_BPS) * n as u64).div_ceil(1000) + 1
}

/// The project's Spectrum-1 T1 config_db.json (configs/sonic/spectrum1-t1.json) grown to
/// `ports` ports (Ethernet0, Ethernet4, ...): every entry keyed by Ethernet0 is copied for each
/// new port, the 5 m, 40 m and 300 m cables in turn. For the import benchmark and its test.
pub fn sonic_ports(ports: usize) -> String {
    let text = include_str!("../../configs/sonic/spectrum1-t1.json");
    let mut v: serde_json::Value = serde_json::from_str(text).expect("the shipped file is JSON");
    let cables = ["5m", "40m", "300m"];
    let obj = v.as_object_mut().expect("an object of tables");
    for (table, entries) in obj.iter_mut() {
        let Some(entries) = entries.as_object_mut() else {
            continue;
        };
        if table == "CABLE_LENGTH" {
            for (_, by_port) in entries.iter_mut() {
                let by_port = by_port.as_object_mut().expect("cables by port");
                by_port.clear();
                for i in 0..ports {
                    by_port.insert(format!("Ethernet{}", 4 * i), cables[i % 3].into());
                }
            }
            continue;
        }
        // Entries of the first port, by the rest of their key ("" for the port itself, "|3-4").
        let firsts: Vec<(String, serde_json::Value)> = entries
            .iter()
            .filter_map(|(k, f)| {
                let rest = k.strip_prefix("Ethernet0")?;
                (rest.is_empty() || rest.starts_with('|')).then(|| (rest.to_string(), f.clone()))
            })
            .collect();
        if firsts.is_empty() {
            continue;
        }
        entries.retain(|k, _| !k.starts_with("Ethernet"));
        for i in 0..ports {
            for (rest, f) in &firsts {
                let mut f = f.clone();
                if table == "PORT" {
                    f["index"] = (i + 1).to_string().into();
                    f["lanes"] = (4 * i..4 * i + 4)
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                        .into();
                    f["alias"] = format!("etp{}", i + 1).into();
                }
                if table == "BUFFER_PG" && rest == "|3-4" {
                    let profile = format!("pg_lossless_100000_{}_profile", cables[i % 3]);
                    f["profile"] = profile.into();
                }
                entries.insert(format!("Ethernet{}{rest}", 4 * i), f);
            }
        }
    }
    serde_json::to_string_pretty(&v).expect("JSON")
}

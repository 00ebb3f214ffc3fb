//! The 64-port config_db.json the import benchmark runs (`rocesw_bench::sonic_ports`) is a
//! valid switch of 64 ports: the benchmark measures a real import, not an error path.

#[test]
fn the_benchmarks_64_port_config_imports_and_validates() {
    for n in [8, 64] {
        let json = rocesw_bench::sonic_ports(n);
        let c = controlplane::load_str(&json)
            .unwrap_or_else(|e| panic!("{n} ports: {e}"))
            .config;
        assert_eq!(c.ports.len(), n);
        assert_eq!(
            c.ports[n - 1].name.as_deref(),
            Some(format!("Ethernet{}", 4 * (n - 1)).as_str())
        );
        assert!(c.ports.iter().all(|p| p.pgs[3].lossless && p.headroom_bytes[3] > 0));
    }
}

//! Importing and validating a SONiC config_db.json of 64 ports (issue 37's goal: under 100 ms):
//! the project's Spectrum-1 T1 config (configs/sonic/spectrum1-t1.json) grown to 64 ports,
//! every port-keyed table with it. `cargo bench -p rocesw-bench --bench sonic_import`.

use rocesw_bench::sonic_ports;

fn main() {
    divan::main();
}

/// config_db.json text → rocesw TOML → validated config, as `rocesw replay --config x.json`
/// and `rocectl check` do it.
#[divan::bench(args = [8, 64], sample_count = 30, sample_size = 1)]
fn import_and_validate(bencher: divan::Bencher, ports: usize) {
    let json = sonic_ports(ports);
    bencher.bench(|| {
        let loaded = controlplane::load_str(divan::black_box(&json)).expect("imports and validates");
        assert_eq!(loaded.config.ports.len(), ports);
        loaded
    });
}

/// The import alone (the TOML it writes), without validation.
#[divan::bench(args = [64], sample_count = 30, sample_size = 1)]
fn import_only(bencher: divan::Bencher, ports: usize) {
    let json = sonic_ports(ports);
    let opts = controlplane::sonic::ImportOptions::default();
    bencher.bench(|| controlplane::sonic::import_text(divan::black_box(&json), &opts).expect("imports"));
}

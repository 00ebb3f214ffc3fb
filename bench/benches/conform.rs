//! `rocesw conform sonic`: sonic-mgmt's whole QoS suite (18 tests) on one 8-port config
//! (issue 38's goal: under 10 s on this machine), on each of the project's two T1 configs.
//! `cargo bench -p rocesw-bench --bench conform`.

use dataplane::conform::{self, Options};

fn main() {
    divan::main();
}

fn config(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs/sonic")
        .join(file);
    std::fs::read_to_string(path).expect("the project's config")
}

/// The whole suite, config text to report, as `rocesw conform sonic --config FILE` runs it.
#[divan::bench(args = ["spectrum1-t1.json", "tomahawk2-t1.json"], sample_count = 5, sample_size = 1)]
fn whole_suite(bencher: divan::Bencher, file: &str) {
    let json = config(file);
    bencher.bench(|| {
        let (report, _) =
            conform::run(divan::black_box(&json), file, &Options::default(), &mut |_| {}).expect("the suite runs");
        assert!(report.passed(), "{}", report.text(false, false));
        report
    });
}

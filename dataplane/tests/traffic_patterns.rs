//! The topology file's traffic patterns beyond one flow per pair: all-to-all, and messages
//! from a size distribution arriving as a Poisson process (dataplane/src/fabric/topology.rs).

use dataplane::fabric::topology::{self, FlowSize, Topology};
use dataplane::fabric::{self, FabricOptions};
use std::path::{Path, PathBuf};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tune")
}

fn default_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/default.toml")
}

/// The shipped 8-host tuning topology with its [[traffic]] replaced.
fn topo(traffic: &str, seed: u64) -> anyhow::Result<Topology> {
    let text = std::fs::read_to_string(examples().join("topology.toml")).unwrap();
    let cut = text.rfind("[[traffic]]").unwrap();
    let cut = text[..cut].rfind("\n#").unwrap_or(cut);
    let text = format!("{}\n{traffic}", &text[..cut]);
    topology::from_str(&text, &examples(), Some(&default_config()), seed)
}

#[test]
fn all_to_all_sends_from_every_host_to_every_other() {
    let t = topo("[[traffic]]\npattern = \"all-to-all\"\nsize = \"64KiB\"\n", 1).unwrap();
    assert_eq!(t.flows.len(), 8 * 7);
    let mut pairs: Vec<(usize, usize)> = t.flows.iter().map(|f| (f.src, f.dst)).collect();
    pairs.sort_unstable();
    pairs.dedup();
    assert_eq!(pairs.len(), 56, "every ordered pair once");
    assert!(pairs.iter().all(|(s, d)| s != d));
    // A subset, to another subset.
    let t = topo(
        "[[traffic]]\npattern = \"all-to-all\"\nfrom = [\"h0\", \"h1\"]\nto = [\"h1\", \"h2\", \"h3\"]\nsize = \"long\"\n",
        1,
    )
    .unwrap();
    let pairs: Vec<(usize, usize)> = t.flows.iter().map(|f| (f.src, f.dst)).collect();
    assert_eq!(pairs, vec![(0, 1), (0, 2), (0, 3), (1, 2), (1, 3)]);
    assert!(t.flows.iter().all(|f| f.size == FlowSize::Long));
}

const MESSAGES: &str = r#"
[[traffic]]
pattern = "all-to-all"
sizes = [["4KiB", 50], [65536, 30], ["1MiB", 20]]
load = 0.5
"#;

/// Poisson messages: the sizes drawn are the distribution's, the bytes offered are about the
/// load asked for (over 20 ms of arrivals, about a thousand messages, as the 1 MiB ones make
/// a short stretch vary a lot), the same seed gives the same arrivals and another seed others.
#[test]
fn messages_follow_the_distribution_and_the_load() {
    let long = format!("{MESSAGES}stop = \"20ms\"\n");
    let t = topo(&long, 1).unwrap();
    let sizes: Vec<u64> = t
        .flows
        .iter()
        .map(|f| match f.size {
            FlowSize::Bytes(b) => b,
            FlowSize::Long => panic!("messages are finite"),
        })
        .collect();
    assert!(sizes.iter().all(|s| [4096, 65536, 1 << 20].contains(s)), "{sizes:?}");
    // 8 senders × 0.5 × 25 Gb/s × 20 ms, in bytes.
    let offered = 8.0 * 0.5 * 25e9 * 20e-3 / 8.0;
    let sent: u64 = sizes.iter().sum();
    let ratio = sent as f64 / offered;
    assert!(
        (0.85..1.15).contains(&ratio),
        "offered {sent} B, expected about {offered} B"
    );
    let small = sizes.iter().filter(|&&s| s == 4096).count() as f64 / sizes.len() as f64;
    assert!((0.45..0.55).contains(&small), "4KiB share {small}");
    assert!(t.flows.iter().all(|f| f.start_ns < 20_000_000 && f.src != f.dst));
    // Without `stop`, arrivals end with the run.
    let t1 = topo(MESSAGES, 1).unwrap();
    assert!(t1.flows.iter().all(|f| f.start_ns < t1.duration_ns));
    // Each host is offered its share of the others' load: 7 × 0.5 × 25G / 7.
    for o in &t.offered_bps {
        assert!((o - 12.5e9).abs() < 1.0, "{o}");
    }
    let key =
        |t: &Topology| -> Vec<(usize, usize, u64)> { t.flows.iter().map(|f| (f.src, f.dst, f.start_ns)).collect() };
    assert_eq!(key(&t1), key(&topo(MESSAGES, 1).unwrap()));
    assert_ne!(key(&t1), key(&topo(MESSAGES, 2).unwrap()));
}

/// Short messages over long flows run, and the finished ones report a completion time.
#[test]
fn messages_mixed_with_long_flows_complete() {
    let t = topo(
        &format!("{MESSAGES}\n[[traffic]]\npattern = \"flows\"\nfrom = [\"h0\"]\nto = [\"h7\"]\nsize = \"long\"\n"),
        1,
    )
    .unwrap();
    let o = fabric::run(
        &t,
        &FabricOptions {
            seed: 1,
            duration_ns: Some(300_000),
            ..Default::default()
        },
    )
    .unwrap();
    let done = o.flows.iter().filter(|f| f.fct_ns.is_some()).count();
    assert!(done > 10, "{done} messages completed");
    // Completion times per size: one bucket per size of the distribution, every finite flow
    // in one, small messages done sooner than large ones.
    let buckets: Vec<u64> = o.fct_by_size.iter().map(|b| b.up_to_bytes).collect();
    assert_eq!(buckets, vec![4096, 65536, 1 << 20]);
    let finite = o.flows.iter().filter(|f| f.size.is_some()).count() as u64;
    assert_eq!(o.fct_by_size.iter().map(|b| b.messages).sum::<u64>(), finite);
    assert_eq!(o.fct_by_size.iter().map(|b| b.completed).sum::<u64>(), done as u64);
    for b in &o.fct_by_size {
        if let (Some(p50), Some(p99), Some(max)) = (b.fct_p50_ns, b.fct_p99_ns, b.fct_max_ns) {
            assert!(p50 <= p99 && p99 <= max, "{b:?}");
        }
    }
    let p50 = |k: usize| o.fct_by_size[k].fct_p50_ns.unwrap();
    assert!(p50(0) < p50(1), "4 KiB {} ns, 64 KiB {} ns", p50(0), p50(1));
    let long = o.flows.iter().find(|f| f.size.is_none()).unwrap();
    assert!(long.goodput_bps > 1e9, "the long flow ran: {}", long.goodput_bps);
    assert_eq!(o.drops, 0);
}

#[test]
fn bad_traffic_gets_errors_naming_the_entry_and_field() {
    let cases = [
        (
            "[[traffic]]\npattern = \"all-to-all\"\nsizes = [[\"4KiB\", 1]]\n",
            "traffic 1 (all-to-all): sizes needs load",
        ),
        (
            "[[traffic]]\npattern = \"all-to-all\"\nload = 0.5\n",
            "traffic 1 (all-to-all): load applies to `sizes`",
        ),
        (
            "[[traffic]]\npattern = \"all-to-all\"\nsizes = [[\"4KiB\", 1]]\nload = 1.5\n",
            "traffic 1 (all-to-all): load must be above 0 and at most 1",
        ),
        (
            "[[traffic]]\npattern = \"all-to-all\"\nsizes = [[\"4KiB\", 0]]\nload = 0.5\n",
            "traffic 1 (all-to-all): sizes: entry 1: weight must be a positive number",
        ),
        (
            "[[traffic]]\npattern = \"all-to-all\"\nsizes = [[\"4KiB\", 1], [\"lots\", 1]]\nload = 0.5\n",
            "traffic 1 (all-to-all): sizes: entry 2:",
        ),
        (
            "[[traffic]]\npattern = \"all-to-all\"\nsizes = []\nload = 0.5\n",
            "traffic 1 (all-to-all): sizes: empty",
        ),
        (
            "[[traffic]]\npattern = \"all-to-all\"\nsize = \"4KiB\"\nsizes = [[\"4KiB\", 1]]\nload = 0.5\n",
            "traffic 1 (all-to-all): give `size`",
        ),
        (
            "[[traffic]]\npattern = \"all-to-all\"\nfrom = [\"h0\"]\n",
            "traffic 1 (all-to-all): all-to-all needs at least two distinct hosts",
        ),
        (
            "[[traffic]]\npattern = \"all-to-all\"\nfrom = [\"tor\"]\n",
            "traffic 1 (all-to-all): \"tor\" is a switch, not a host",
        ),
        (
            "[[traffic]]\npattern = \"all-to-all\"\nsizes = [[\"4KiB\", 1]]\nload = 0.5\nstart = \"2ms\"\nstop = \"1ms\"\n",
            "traffic 1 (all-to-all): stop (1000000 ns) must be after start",
        ),
        (
            "[[traffic]]\npattern = \"all-to-all\"\nsizes = [[1, 1]]\nload = 1\nstop = \"1s\"\n",
            "traffic 1 (all-to-all): more than 200000 messages",
        ),
        ("[[traffic]]\npattern = \"fan-out\"\n", "unknown pattern \"fan-out\" (incast, all-to-all"),
    ];
    for (traffic, want) in cases {
        let e = format!("{:#}", topo(traffic, 1).expect_err(traffic));
        assert!(e.contains(want), "{traffic}\nwanted: {want}\ngot: {e}");
    }
}

//! Unit parsing: every accepted spelling, the rejected ones, and round trips.

use controlplane::units::*;
use proptest::prelude::*;

#[test]
fn sizes() {
    let cases: &[(&str, u64)] = &[
        ("256", 256),
        ("256B", 256),
        ("256b", 256),
        ("100KB", 100_000),
        ("100kb", 100_000),
        ("100KiB", 102_400),
        ("100kib", 102_400),
        ("4MB", 4_000_000),
        ("4MiB", 4 << 20),
        ("1GB", 1_000_000_000),
        ("1GiB", 1 << 30),
        ("3 KiB", 3072),
        (" 3 KiB ", 3072),
        ("1.5KB", 1500),
        ("0.5MiB", 512 << 10),
        ("0B", 0),
        ("2TiB", 2 << 40),
        // A prefix alone, as tc and GNU tools read it: a power of 1024 (issue 23 item 7).
        ("4M", 4 << 20),
        ("4 M", 4 << 20),
        ("50k", 50 << 10),
        ("50Ki", 50 << 10),
        ("1.5m", 3 << 19),
        ("1G", 1 << 30),
        ("1t", 1 << 40),
    ];
    for (text, want) in cases {
        assert_eq!(parse_size(text), Ok(*want), "{text}");
    }
    for bad in [
        "",
        "B",
        "4XB",
        "4X",
        "4Mbit",
        "4kbps",
        "-1B",
        "1e3B",
        "1.5B",
        "KiB4",
        "4 Ki B",
        "99999999999999999999GiB",
    ] {
        let e = parse_size(bad).expect_err(bad);
        assert!(e.to_string().starts_with(&format!("{bad:?} is not a size")), "{e}");
    }
    assert_eq!(
        parse_size("4XB").unwrap_err().to_string(),
        r#""4XB" is not a size (try 4MiB or 4MB)"#
    );
}

#[test]
fn rates() {
    let cases: &[(&str, u64)] = &[
        ("25G", 25_000_000_000),
        ("25Gbps", 25_000_000_000),
        ("25gbps", 25_000_000_000),
        ("100M", 100_000_000),
        ("400Mbps", 400_000_000),
        ("1.5G", 1_500_000_000),
        ("1.25G", 1_250_000_000),
        ("10K", 10_000),
        ("1T", 1_000_000_000_000),
        ("9600", 9600),
        ("9600bps", 9600),
        ("100 G", 100_000_000_000),
        // tc's spellings.
        ("100mbit", 100_000_000),
        ("25Gbit", 25_000_000_000),
        ("800kbit", 800_000),
        ("9600bit", 9600),
    ];
    for (text, want) in cases {
        assert_eq!(parse_rate(text), Ok(*want), "{text}");
    }
    for bad in ["", "G", "25GB", "25GiB", "fast", "0.5", "25Gb/s", "-1G"] {
        let e = parse_rate(bad).expect_err(bad);
        assert!(e.to_string().contains("is not a rate"), "{e}");
    }
}

#[test]
fn lengths() {
    assert_eq!(parse_length("15m"), Ok(15.0));
    assert_eq!(parse_length("100m"), Ok(100.0));
    assert_eq!(parse_length("0.5m"), Ok(0.5));
    assert_eq!(parse_length("2km"), Ok(2000.0));
    assert_eq!(parse_length("50cm"), Ok(0.5));
    assert_eq!(parse_length("15"), Ok(15.0));
    assert_eq!(parse_length("15 m"), Ok(15.0));
    for bad in ["", "m", "15ft", "-3m", "1e3m", "15mm"] {
        assert!(parse_length(bad).is_err(), "{bad}");
    }
}

#[test]
fn durations() {
    let cases: &[(&str, u64)] = &[
        ("200ms", 200_000_000),
        ("10us", 10_000),
        ("10µs", 10_000),
        ("1.5s", 1_500_000_000),
        ("500ns", 500),
        ("300s", 300_000_000_000),
        ("2min", 120_000_000_000),
        ("0.5ms", 500_000),
    ];
    for (text, want) in cases {
        assert_eq!(parse_duration(text), Ok(*want), "{text}");
    }
    // No bare numbers, no metres-or-minutes ambiguity, no sub-nanosecond.
    for bad in ["200", "1m", "0.5ns", "ms", "5h", ""] {
        let e = parse_duration(bad).expect_err(bad);
        assert!(e.to_string().contains("is not a duration"), "{e}");
    }
}

#[test]
fn alphas() {
    assert_eq!(parse_alpha("1/8"), Ok(0.125));
    assert_eq!(parse_alpha(" 1 / 8 "), Ok(0.125));
    assert_eq!(parse_alpha("0.125"), Ok(0.125));
    assert_eq!(parse_alpha("2"), Ok(2.0));
    assert_eq!(parse_alpha("3/2"), Ok(1.5));
    for bad in ["", "1/0", "a/b", "-1", "1/8/2", "1//8", "/8"] {
        assert!(parse_alpha(bad).is_err(), "{bad}");
    }
}

#[test]
fn dynamic_th_is_a_power_of_two() {
    assert_eq!(alpha_from_dynamic_th(-3), Some(0.125));
    assert_eq!(alpha_from_dynamic_th(0), Some(1.0));
    assert_eq!(alpha_from_dynamic_th(6), Some(64.0));
    assert_eq!(alpha_from_dynamic_th(-7), Some(1.0 / 128.0));
    assert_eq!(alpha_from_dynamic_th(-8), Some(0.0));
    assert_eq!(alpha_from_dynamic_th(-100), Some(0.0));
    assert_eq!(alpha_from_dynamic_th(7), None);
    assert_eq!(alpha_from_dynamic_th(i64::MAX), None);
}

#[test]
fn formatting_picks_the_largest_exact_unit() {
    assert_eq!(format_size(0), "0B");
    assert_eq!(format_size(256), "256B");
    assert_eq!(format_size(102_400), "100KiB");
    assert_eq!(format_size(100_000), "100KB");
    assert_eq!(format_size(4 << 20), "4MiB");
    assert_eq!(format_rate(25_000_000_000), "25G");
    assert_eq!(format_rate(1_250_000_000), "1250M");
    assert_eq!(format_rate(7), "7bps");
    assert_eq!(format_duration(200_000_000), "200ms");
    assert_eq!(format_duration(1_500), "1500ns");
    assert_eq!(format_length(0.5), "0.5m");
}

const SIZE_UNITS: [(&str, u64); 10] = [
    ("", 1),
    ("B", 1),
    ("KB", 1_000),
    ("KiB", 1 << 10),
    ("MB", 1_000_000),
    ("MiB", 1 << 20),
    ("GB", 1_000_000_000),
    ("GiB", 1 << 30),
    ("kib", 1 << 10),
    ("mb", 1_000_000),
];

proptest! {
    #[test]
    fn size_round_trip(n in any::<u64>()) {
        prop_assert_eq!(parse_size(&format_size(n)), Ok(n));
    }

    #[test]
    fn size_number_times_unit(n in 0u64..1_000_000, u in 0usize..SIZE_UNITS.len(), space in any::<bool>()) {
        let (unit, mult) = SIZE_UNITS[u];
        let text = format!("{n}{}{unit}", if space { " " } else { "" });
        prop_assert_eq!(parse_size(&text), Ok(n * mult));
    }

    #[test]
    fn rate_round_trip(n in any::<u64>()) {
        prop_assert_eq!(parse_rate(&format_rate(n)), Ok(n));
    }

    #[test]
    fn duration_round_trip(n in any::<u64>()) {
        prop_assert_eq!(parse_duration(&format_duration(n)), Ok(n));
    }

    #[test]
    fn length_round_trip(m in 0.0f64..1.0e6) {
        prop_assert_eq!(parse_length(&format_length(m)), Ok(m));
    }

    #[test]
    fn alpha_fraction(num in 0u32..1000, den in 1u32..1000) {
        let a = parse_alpha(&format!("{num}/{den}")).unwrap();
        prop_assert_eq!(a, f64::from(num) / f64::from(den));
    }

    #[test]
    fn parsers_never_panic(s in ".{0,40}") {
        let _ = parse_size(&s);
        let _ = parse_rate(&s);
        let _ = parse_length(&s);
        let _ = parse_duration(&s);
        let _ = parse_alpha(&s);
    }

    #[test]
    fn parsers_never_panic_on_unit_like_text(s in "[0-9. /]{0,30}[a-zA-Zµ/]{0,5}") {
        let _ = parse_size(&s);
        let _ = parse_rate(&s);
        let _ = parse_length(&s);
        let _ = parse_duration(&s);
        let _ = parse_alpha(&s);
    }
}

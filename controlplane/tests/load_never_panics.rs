//! `load_str` must answer every input with a config or an error, never a panic: mutate the
//! shipped profile (bytes, lines, numbers) and throw arbitrary text at it.

use controlplane::load_str;
use proptest::prelude::*;

const DEFAULT: &str = include_str!("../../configs/default.toml");
const UCLOUD: &str = include_str!("../../configs/ucloud-tor.toml");

/// Values that stress conversions and arithmetic when spliced in place of a number or string.
const NASTY: &[&str] = &[
    "0",
    "-1",
    "9223372036854775807",
    "-9223372036854775808",
    "1e308",
    "-1e308",
    "nan",
    "inf",
    "0.0",
    "\"0B\"",
    "\"18446744073709551615B\"",
    "\"99999999TiB\"",
    "\"1/0\"",
    "\"0/0\"",
    "\"-3\"",
    "\"\"",
    "\"auto\"",
    "\"1e400\"",
    "64",
    "4096",
    "7",
    "-8",
    "true",
    "[]",
    "{}",
];

#[derive(Debug, Clone)]
enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    FlipByte(usize, u8),
    ReplaceValue(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::FlipByte(i, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, v)| Mutation::ReplaceValue(i, v)),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let n = lines.len();
    match *m {
        Mutation::DeleteLine(i) => {
            lines.remove(i % n);
        }
        Mutation::DuplicateLine(i) => {
            let l = lines[i % n].clone();
            lines.insert(i % n, l);
        }
        Mutation::FlipByte(i, b) => {
            let mut bytes = lines.join("\n").into_bytes();
            let len = bytes.len();
            bytes[i % len] = b;
            return String::from_utf8_lossy(&bytes).into_owned();
        }
        Mutation::ReplaceValue(i, v) => {
            let assignments: Vec<usize> = (0..n).filter(|&j| lines[j].contains(" = ")).collect();
            let j = assignments[i % assignments.len()];
            let key = lines[j].split(" = ").next().unwrap_or("").to_string();
            lines[j] = format!("{key} = {}", NASTY[v % NASTY.len()]);
        }
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn mutated_profiles_never_panic(ms in prop::collection::vec(mutation(), 1..6), which in any::<bool>()) {
        let mut text = if which { DEFAULT } else { UCLOUD }.to_string();
        for m in &ms {
            text = apply(&text, m);
        }
        let _ = load_str(&text).map(|l| l.config.ports.len());
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
        let _ = load_str(&s);
    }

}

/// Replaces each assignment of both profiles in turn with each nasty value.
#[test]
fn every_value_everywhere() {
    for profile in [DEFAULT, UCLOUD] {
        let lines: Vec<&str> = profile.lines().collect();
        for (j, line) in lines.iter().enumerate().filter(|(_, l)| l.contains(" = ")) {
            let key = line.split(" = ").next().unwrap_or("");
            for v in NASTY {
                let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                edited[j] = format!("{key} = {v}");
                let _ = load_str(&edited.join("\n"));
            }
        }
    }
}

/// Sizes at the top of u64 everywhere at once: the budget must saturate, not overflow.
#[test]
fn huge_sizes_saturate() {
    let mut text = DEFAULT.to_string();
    for g in [0, 1, 2, 4, 5, 6, 7] {
        text.push_str(&format!("\n[pg.{g}]\nmin = \"16777215TiB\"\n"));
    }
    let huge = "\"18446744073709551615B\"";
    let text = text
        .replace("min = \"0B\"", &format!("min = {huge}"))
        .replace("size = \"4MiB\"", &format!("size = {huge}"))
        .replace("headroom = \"auto\"", &format!("headroom = {huge}"));
    let e = load_str(&text).expect_err("cannot fit");
    assert!(e.to_string().contains("cells short"), "{e}");
}

#[test]
fn huge_sizes_are_reported_as_too_big_for_the_buffer() {
    let text = DEFAULT.replace("min = \"0B\"", "min = \"18446744073709551615B\"");
    let e = load_str(&text).expect_err("cannot fit");
    assert!(e.to_string().contains("buffer.size (4MiB"), "{e}");
}

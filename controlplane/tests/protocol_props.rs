//! The request decoder against arbitrary input (the stable-toolchain half of the fuzzing; the
//! cargo-fuzz target is controlplane/fuzz): it never panics, whatever parses round-trips, and
//! whatever does not says why, with the id when one could be read.

use controlplane::protocol::{Op, Request, WatermarkKind};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Arbitrary JSON, biased toward the shapes of real requests.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z_]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("hello"),
            Just("apply"),
            Just("patch"),
            Just("subscribe"),
            Just("watermarks"),
            Just("clear_watermarks"),
            Just("user"),
            Just("persistent")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("v".to_string()),
                    Just("id".to_string()),
                    Just("op".to_string()),
                    Just("toml".to_string()),
                    Just("interval_ms".to_string()),
                    Just("kind".to_string()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn check(line: &str) {
    match Request::parse(line) {
        Ok(r) => assert_eq!(Request::parse(&r.to_line()), Ok(r)),
        Err(bad) => assert!(!bad.error.is_empty()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn arbitrary_json(v in any_json()) {
        check(&v.to_string());
    }

    /// A valid request with one field replaced by anything: refused or still meaningful.
    #[test]
    fn mutated_requests(field in prop_oneof![Just("v"), Just("id"), Just("op"), Just("kind"), Just("interval_ms"), Just("toml")],
                        value in any_json(), id in any::<u64>()) {
        for op in [Op::Subscribe { interval_ms: 500 }, Op::Watermarks { kind: WatermarkKind::Persistent },
                   Op::Apply { toml: "x = 1".into(), if_version: None }] {
            let mut v: Value = serde_json::from_str(&Request { id, op }.to_line()).unwrap();
            v[field] = value.clone();
            let line = v.to_string();
            check(&line);
            if field != "id" {
                if let Err(bad) = Request::parse(&line) {
                    prop_assert_eq!(bad.id, Some(id), "the id is echoed when it was readable: {}", bad.error);
                }
            }
        }
    }
}

#[test]
fn out_of_range_and_oversized_values_are_refused() {
    let e = |s: &str| Request::parse(s).unwrap_err().error;
    assert!(e(r#"{"v":1,"id":-1,"op":"hello"}"#).contains("id"));
    assert!(e(r#"{"v":1,"id":1.5,"op":"hello"}"#).contains("id"));
    assert!(e(r#"{"v":1,"id":1,"op":"subscribe","interval_ms":99}"#).contains("at least 100"));
    assert!(e(r#"{"v":1,"id":1,"op":"subscribe","interval_ms":18446744073709551616}"#).contains("bad request"));
    assert!(e(r#"{"v":1,"id":1,"op":"watermarks","kind":"max"}"#).contains("max"));
    assert!(e(r#"{"v":1,"id":1,"op":"apply","toml":7}"#).contains("bad request"));
}

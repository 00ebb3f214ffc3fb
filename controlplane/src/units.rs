//! The quantities a config is written in: sizes, rates, lengths, durations and alphas.
//!
//! Hand-written rather than pulled from a crate because switch configs mix SI and IEC prefixes
//! (`100KB` is 100 000 bytes, `100KiB` is 102 400), rates are *bits* per second while sizes are
//! *bytes*, and every mistake must be reported with the exact text the user wrote. Decimal
//! mantissas are parsed exactly (as an integer over a power of ten), so `1.5KB` is exactly
//! 1500 bytes and no result depends on float rounding.
//!
//! Grammar (ASCII case is ignored in units; a space may separate number and unit):
//! - size: `256`, `256B`, `100KB`, `100KiB`, `4MB`, `4MiB`, `1GB`, `1GiB`, `1TB`, `1TiB`, and a
//!   prefix alone as tc and GNU tools write it, a power of 1024: `50k` (51 200), `4M`, `1G`, `1T`
//!   (also `Ki`, `Mi`...). One parser for config files and every command line (`rocectl set`,
//!   `rocesw gen`, `rocegen`).
//! - rate (bits/s, SI): `25G`, `25Gbps`, `400M`, `400Mbps`, `1.5G`, `10K`, `1T`, `100bps`, and
//!   tc's `kbit`, `mbit`, `gbit`, `tbit`, `bit`
//! - length: `15m`, `0.5m`, `2km`, `50cm` (a bare number is metres)
//! - duration: `500ns`, `10us` (or `µs`), `200ms`, `1.5s`, `2min` (a unit is required)
//! - alpha: `0.125` or a fraction `1/8`

use std::fmt;

/// A string that is not the quantity it should be. Displays as
/// `"4XB" is not a size (try 4MiB or 4MB)`; the caller prefixes the field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError {
    /// The text as written.
    pub text: String,
    /// What was expected, with its article: "a size", "a rate", ...
    pub what: &'static str,
    /// What would be accepted or what was wrong, e.g. "try 4MiB or 4MB"; shown in parentheses.
    pub hint: String,
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not {} ({})", self.text, self.what, self.hint)
    }
}

impl std::error::Error for UnitError {}

const SIZE_HINT: &str = "try 4MiB or 4MB";
const RATE_HINT: &str = "try 25G or 400Mbps; rates are bits per second";
const LENGTH_HINT: &str = "try 15m or 2km";
const DURATION_HINT: &str = "try 200ms, 10us, 500ns or 1.5s";
const ALPHA_HINT: &str = "try 0.125 or 1/8";

fn unit_error(text: &str, what: &'static str, hint: &str) -> UnitError {
    UnitError {
        text: text.to_string(),
        what,
        hint: hint.to_string(),
    }
}

/// An exact non-negative decimal: `digits / 10^scale`.
#[derive(Debug, Clone, Copy)]
struct Decimal {
    digits: u128,
    scale: u32,
}

/// More digits than this could overflow u128 once multiplied by a unit; nobody writes them.
const MAX_DIGITS: usize = 24;

/// Splits `text` into a decimal number and the unit after it (spaces allowed between them).
/// Returns the number's own text too, for callers that want an f64.
fn split_number(text: &str) -> Option<(Decimal, &str, &str)> {
    let s = text.trim();
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut digits: u128 = 0;
    let mut count = 0usize;
    let mut scale = 0u32;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        digits = digits * 10 + u128::from(bytes[i] - b'0');
        count += 1;
        i += 1;
        if count > MAX_DIGITS {
            return None;
        }
    }
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            digits = digits * 10 + u128::from(bytes[i] - b'0');
            count += 1;
            scale += 1;
            i += 1;
            if count > MAX_DIGITS {
                return None;
            }
        }
    }
    if count == 0 {
        return None;
    }
    let number = &s[..i];
    let unit = s[i..].trim_start();
    Some((Decimal { digits, scale }, number, unit))
}

/// `dec × mult` if it is a whole number that fits a u64.
fn exact(dec: Decimal, mult: u128) -> Option<u64> {
    let pow = 10u128.checked_pow(dec.scale)?;
    let product = dec.digits.checked_mul(mult)?;
    if product % pow != 0 {
        return None;
    }
    u64::try_from(product / pow).ok()
}

/// A size in bytes. `KB`/`MB`/`GB`/`TB` are powers of 1000; `KiB`/`MiB`/`GiB`/`TiB` powers of
/// 1024, and so is a prefix alone (`K`, `Ki`, `M`...), as tc and GNU tools read `50k`. A bare
/// number is bytes.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let err = |hint: &str| unit_error(text, "a size", hint);
    let (dec, _, unit) = split_number(text).ok_or_else(|| err(SIZE_HINT))?;
    let unit = unit.to_ascii_lowercase();
    let mult: u128 = match unit.as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "k" | "ki" | "kib" => 1 << 10,
        "mb" => 1_000_000,
        "m" | "mi" | "mib" => 1 << 20,
        "gb" => 1_000_000_000,
        "g" | "gi" | "gib" => 1 << 30,
        "tb" => 1_000_000_000_000,
        "t" | "ti" | "tib" => 1 << 40,
        u if u.ends_with("bit") || u.ends_with("bps") => {
            return Err(err("a size is in bytes, not bits: try 50k, 50KB or 50KiB"))
        }
        _ => return Err(err(SIZE_HINT)),
    };
    exact(dec, mult).ok_or_else(|| err("sizes are whole bytes below 2^64"))
}

/// A rate in bits per second, SI prefixes (`25G` = 25 000 000 000).
pub fn parse_rate(text: &str) -> Result<u64, UnitError> {
    let err = |hint: &str| unit_error(text, "a rate", hint);
    let (dec, _, unit) = split_number(text).ok_or_else(|| err(RATE_HINT))?;
    let mult: u128 = match unit.to_ascii_lowercase().as_str() {
        "" | "bps" | "bit" => 1,
        "k" | "kbps" | "kbit" => 1_000,
        "m" | "mbps" | "mbit" => 1_000_000,
        "g" | "gbps" | "gbit" => 1_000_000_000,
        "t" | "tbps" | "tbit" => 1_000_000_000_000,
        _ => return Err(err(RATE_HINT)),
    };
    exact(dec, mult).ok_or_else(|| err("rates are whole bits per second"))
}

/// A length in metres.
pub fn parse_length(text: &str) -> Result<f64, UnitError> {
    let err = || unit_error(text, "a length", LENGTH_HINT);
    let (_, number, unit) = split_number(text).ok_or_else(err)?;
    let value: f64 = number.parse().map_err(|_| err())?;
    let metres = match unit.to_ascii_lowercase().as_str() {
        "" | "m" => value,
        "km" => value * 1000.0,
        "cm" => value / 100.0,
        _ => return Err(err()),
    };
    if metres.is_finite() {
        Ok(metres)
    } else {
        Err(err())
    }
}

/// A duration in nanoseconds. A unit is required: a bare `200` could be any of them.
pub fn parse_duration(text: &str) -> Result<u64, UnitError> {
    let err = |hint: &str| unit_error(text, "a duration", hint);
    let (dec, _, unit) = split_number(text).ok_or_else(|| err(DURATION_HINT))?;
    let mult: u128 = match unit.to_ascii_lowercase().as_str() {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        _ => return Err(err(DURATION_HINT)),
    };
    exact(dec, mult).ok_or_else(|| err("durations are whole nanoseconds"))
}

/// A shared-buffer alpha: a decimal (`0.125`) or a fraction (`1/8`). Never negative.
pub fn parse_alpha(text: &str) -> Result<f64, UnitError> {
    let err = || unit_error(text, "an alpha", ALPHA_HINT);
    let number = |s: &str| -> Result<f64, UnitError> {
        match split_number(s) {
            Some((_, n, "")) => n.parse::<f64>().map_err(|_| err()),
            _ => Err(err()),
        }
    };
    let value = match text.split_once('/') {
        Some((num, den)) => {
            let den = number(den)?;
            if den == 0.0 {
                return Err(err());
            }
            number(num)? / den
        }
        None => number(text)?,
    };
    if value.is_finite() {
        Ok(value)
    } else {
        Err(err())
    }
}

/// The alpha SAI and SONiC encode as `dynamic_th`: `2^th` for −7..=6. `None` means unlimited
/// (th ≥ 7); th ≤ −8 means 0, no use of the shared pool at all.
pub fn alpha_from_dynamic_th(th: i64) -> Option<f64> {
    if th >= 7 {
        None
    } else if th <= -8 {
        Some(0.0)
    } else {
        // th is in −7..=6 here, so the cast is lossless.
        Some(2f64.powi(th as i32))
    }
}

/// `n` is a whole number of `unit`s (`is_multiple_of` is newer than our minimum Rust).
fn divides(unit: u64, n: u64) -> bool {
    n.checked_rem(unit) == Some(0)
}

/// Formats a size with the largest unit that divides it exactly (binary first): the result
/// parses back to the same number.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 8] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
        (1_000_000_000_000, "TB"),
        (1_000_000_000, "GB"),
        (1_000_000, "MB"),
        (1_000, "KB"),
    ];
    for (mult, unit) in UNITS {
        if bytes >= mult && divides(mult, bytes) {
            return format!("{}{unit}", bytes / mult);
        }
    }
    format!("{bytes}B")
}

/// Formats a rate with the largest SI prefix that divides it exactly.
pub fn format_rate(bps: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "T"),
        (1_000_000_000, "G"),
        (1_000_000, "M"),
        (1_000, "K"),
    ];
    for (mult, unit) in UNITS {
        if bps >= mult && divides(mult, bps) {
            return format!("{}{unit}", bps / mult);
        }
    }
    format!("{bps}bps")
}

/// Formats a duration with the largest unit that divides it exactly.
pub fn format_duration(ns: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")];
    for (mult, unit) in UNITS {
        if ns >= mult && divides(mult, ns) {
            return format!("{}{unit}", ns / mult);
        }
    }
    format!("{ns}ns")
}

/// Formats a length in metres; Rust's shortest round-trip float text keeps it exact.
pub fn format_length(metres: f64) -> String {
    format!("{metres}m")
}

/// A buffer level or watermark for people: bytes below 1 KiB, else KiB, MiB or GiB with one
/// decimal (`512B`, `12.5KiB`, `3.0MiB`), no space, so a table cell stays one word. The one
/// byte format of `rocectl show`, `rocectl watch` and `rocesw --stats` (README: "Units").
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (mult, unit) in UNITS {
        if bytes >= mult {
            return format!("{:.1}{unit}", bytes as f64 / mult as f64);
        }
    }
    format!("{bytes}B")
}

/// A measured bit rate for people: `1.234Gb/s`, below that `262.1Mb/s` or `12.5kb/s` (so a
/// 10M lab port's traffic does not read 0.000Gb/s), `0` for none; one word, for a table cell.
/// `rocesw run --stats` and `rocectl show interfaces` (README: "Units").
pub fn human_bit_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3}Gb/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1}Mb/s", bps / 1e6)
    } else if bps > 0.0 {
        format!("{:.1}kb/s", bps / 1e3)
    } else {
        "0".into()
    }
}

/// The time of day of `t` in UTC, `HH:MM:SS UTC`: the header of `rocectl show` and `watch`.
pub fn utc_clock(t: std::time::SystemTime) -> String {
    let s = t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 86_400;
    format!("{:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_clock_read_as_people_write_them() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(1024), "1.0KiB");
        assert_eq!(human_bytes(90 * 256), "22.5KiB");
        assert_eq!(human_bytes(3 << 20), "3.0MiB");
        assert_eq!(human_bytes(5 << 30), "5.0GiB");
        assert_eq!(human_bit_rate(0.0), "0");
        assert_eq!(human_bit_rate(253_900.0), "253.9kb/s");
        assert_eq!(human_bit_rate(312e6), "312.0Mb/s");
        assert_eq!(human_bit_rate(2.5e9), "2.500Gb/s");
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(20_000 * 86_400 + 7 * 3600 + 31 * 60 + 2);
        assert_eq!(utc_clock(t), "07:31:02 UTC");
    }

    #[test]
    fn decimal_is_exact() {
        assert_eq!(parse_size("1.5KB"), Ok(1500));
        assert_eq!(parse_size("0.5KiB"), Ok(512));
        assert!(parse_size("0.5B").is_err());
        assert_eq!(parse_rate("1.5G"), Ok(1_500_000_000));
    }

    /// Issue 23 item 7: the suffixes users type on a command line (`50k`, as tc and GNU tools
    /// read it, a power of 1024) are sizes, in config files and on every command line alike;
    /// bits are not bytes.
    #[test]
    fn a_prefix_alone_is_a_binary_multiple() {
        assert_eq!(parse_size("50k"), Ok(50 << 10));
        assert_eq!(parse_size("50K"), Ok(50 << 10));
        assert_eq!(parse_size("50Ki"), Ok(50 << 10));
        assert_eq!(parse_size("1.5m"), Ok(3 << 19));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("50KB"), Ok(50_000), "KB stays SI");
        assert_eq!(parse_size("5000"), Ok(5000), "a bare number is bytes");
        let e = parse_size("50kbit").unwrap_err().to_string();
        assert!(e.contains("not bits"), "{e}");
        assert_eq!(parse_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("25gbit"), Ok(25_000_000_000));
        assert_eq!(parse_rate("800kbit"), Ok(800_000));
    }

    #[test]
    fn error_text_names_the_input() {
        let e = parse_size("4XB").unwrap_err();
        assert_eq!(e.to_string(), r#""4XB" is not a size (try 4MiB or 4MB)"#);
    }
}

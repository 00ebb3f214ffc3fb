//! The one place problems are collected and scalars converted: every section's resolver records
//! an error here and carries on with a default, which is how one `rocectl check` lists every
//! problem of a file.

use crate::schema::Scalar;
use crate::units::{self, UnitError};

/// Collects problems and converts scalars, recording an error (and returning `None`) when a
/// value is bad so resolution can carry on with a default.
#[derive(Default)]
pub(super) struct Ctx {
    pub(super) errors: Vec<String>,
    pub(super) warnings: Vec<String>,
}

fn not_a(text: String, what: &'static str, hint: &str) -> UnitError {
    UnitError {
        text,
        what,
        hint: hint.to_string(),
    }
}

impl Ctx {
    pub(super) fn error(&mut self, msg: String) {
        self.errors.push(msg);
    }

    pub(super) fn warn(&mut self, msg: String) {
        self.warnings.push(msg);
    }

    fn unit<T>(&mut self, path: &str, r: Result<T, UnitError>) -> Option<T> {
        r.map_err(|e| self.error(format!("{path}: {e}"))).ok()
    }

    pub(super) fn size(&mut self, path: &str, v: &Scalar) -> Option<u64> {
        let r = match v {
            Scalar::Int(n) if *n >= 0 => Ok(n.unsigned_abs()),
            Scalar::Str(s) => units::parse_size(s),
            other => Err(not_a(other.to_string(), "a size", "try 4MiB or 4MB")),
        };
        self.unit(path, r)
    }

    pub(super) fn rate(&mut self, path: &str, v: &Scalar) -> Option<u64> {
        let r = match v {
            Scalar::Int(n) if *n >= 0 => Ok(n.unsigned_abs()),
            // An integral float such as 25e9 is a fine way to write bits per second.
            Scalar::Float(f) if *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19 => Ok(*f as u64),
            Scalar::Str(s) => units::parse_rate(s),
            other => Err(not_a(other.to_string(), "a rate", "try 25G or 400Mbps")),
        };
        self.unit(path, r)
    }

    pub(super) fn length(&mut self, path: &str, v: &Scalar) -> Option<f64> {
        let r = match v {
            Scalar::Int(n) => Ok(*n as f64),
            Scalar::Float(f) => Ok(*f),
            Scalar::Str(s) => units::parse_length(s),
        };
        self.unit(path, r)
    }

    pub(super) fn duration(&mut self, path: &str, v: &Scalar) -> Option<u64> {
        let r = match v {
            Scalar::Str(s) => units::parse_duration(s),
            other => Err(not_a(
                other.to_string(),
                "a duration",
                "give a unit: 200ms, 10us, 500ns or 1.5s",
            )),
        };
        self.unit(path, r)
    }

    /// A non-negative real: an alpha, a probability, a fraction. Strings may be fractions.
    pub(super) fn real(&mut self, path: &str, v: &Scalar) -> Option<f64> {
        let r = match v {
            Scalar::Int(n) if *n >= 0 => Ok(*n as f64),
            Scalar::Float(f) if *f >= 0.0 && f.is_finite() => Ok(*f),
            Scalar::Str(s) => units::parse_alpha(s),
            other => Err(not_a(other.to_string(), "a number", "try 0.125 or 1/8")),
        };
        self.unit(path, r)
    }

    pub(super) fn int_in(&mut self, path: &str, v: i64, lo: i64, hi: i64) -> Option<i64> {
        if (lo..=hi).contains(&v) {
            Some(v)
        } else {
            self.error(format!("{path}: {v} is out of range {lo}..={hi}"));
            None
        }
    }

    /// A small index (tc, queue, PG, DSCP, PCP) as u8.
    pub(super) fn idx(&mut self, path: &str, v: i64, hi: u8, what: &str) -> Option<u8> {
        if (0..=i64::from(hi)).contains(&v) {
            u8::try_from(v).ok()
        } else {
            self.error(format!("{path}: {what} {v} is out of range 0..={hi}"));
            None
        }
    }

    /// A table key that must be a small index: `dscp_to_tc.26`, `pg.3`.
    pub(super) fn key(&mut self, path: &str, key: &str, hi: u8, what: &str) -> Option<u8> {
        match key.trim().parse::<i64>() {
            Ok(v) => self.idx(path, v, hi, what),
            Err(_) => {
                self.error(format!("{path}: {key:?} is not a {what} number (0..={hi})"));
                None
            }
        }
    }

    /// One of a fixed set of words.
    pub(super) fn word<T: Copy>(&mut self, path: &str, v: &str, choices: &[(&str, T)]) -> Option<T> {
        let found = choices
            .iter()
            .find(|(w, _)| w.eq_ignore_ascii_case(v.trim()))
            .map(|(_, t)| *t);
        if found.is_none() {
            let names: Vec<&str> = choices.iter().map(|(w, _)| *w).collect();
            self.error(format!("{path}: {v:?} is not one of {}", names.join(", ")));
        }
        found
    }
}

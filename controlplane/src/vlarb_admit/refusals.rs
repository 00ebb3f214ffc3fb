//! Why a request is refused, in words that name the field, and the figures those words show.

use std::fmt;

/// A latency for reading: ns below 1 µs, else µs or ms with two decimals.
pub fn show_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.2}us", ns as f64 / 1e3),
        _ => format!("{:.2}ms", ns as f64 / 1e6),
    }
}

/// A rate for reading, to a few digits (the exact figure is in the JSON).
pub fn show_bps(bps: u64) -> String {
    let b = bps as f64;
    match bps {
        0..=999_999 => format!("{:.1}K", b / 1e3),
        1_000_000..=999_999_999 => format!("{:.1}M", b / 1e6),
        _ => format!("{:.2}G", b / 1e9),
    }
}

/// Why a request is refused (or a release cannot be done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    DuplicateName(String),
    ZeroBandwidth,
    AboveLink {
        bw_bps: u64,
        speed_bps: u64,
    },
    /// More credits per cycle than 64 entries of weight 255 hold (in whole frames).
    AboveTable {
        credits: u64,
        max_bps: u64,
    },
    FrameSize {
        frame: u32,
        min_frame: u32,
        max_frame: u32,
    },
    BadDistance(u32),
    /// Even the smallest distance does not meet the latency.
    LatencyTooLow {
        asked_ns: u64,
        best_ns: u64,
    },
    VlNotAllowed {
        vl: u8,
        allowed: Vec<u8>,
    },
    /// The VL is used by sequences of another size, or the size's VL is another.
    VlTaken {
        vl: u8,
        detail: String,
    },
    NoFreeVl {
        entries: u32,
        allowed: Vec<u8>,
    },
    NotEnoughEntries {
        need: u32,
        free: u32,
        distance: u32,
    },
    UnknownName(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::units::{format_duration, format_rate};
        match self {
            Refusal::DuplicateName(n) => write!(f, "name: {n:?} is already admitted (release it first)"),
            Refusal::ZeroBandwidth => write!(
                f,
                "bw: must be above 0 (give the smallest rate needed: any rate gets at least one frame per entry)"
            ),
            Refusal::AboveLink { bw_bps, speed_bps } => write!(
                f,
                "bw: {} is above the port's {}",
                format_rate(*bw_bps),
                format_rate(*speed_bps)
            ),
            Refusal::AboveTable { credits, max_bps } => write!(
                f,
                "bw: needs {credits} credits per table cycle, more than 64 entries of weight 255 hold in whole frames (at most {} of these frames)",
                show_bps(*max_bps)
            ),
            Refusal::FrameSize {
                frame,
                min_frame,
                max_frame,
            } => write!(
                f,
                "mtu/frame: a {frame} B frame is outside the port's {min_frame}..={max_frame} B (smallest and largest frame)"
            ),
            Refusal::BadDistance(d) => {
                write!(f, "distance: {d} is not one of 2, 4, 8, 16, 32, 64")
            }
            Refusal::LatencyTooLow { asked_ns, best_ns } => write!(
                f,
                "latency: {} is below what any distance guarantees (distance 2: {})",
                format_duration(*asked_ns),
                show_ns(*best_ns)
            ),
            Refusal::VlNotAllowed { vl, allowed } => write!(f, "vl: {vl} is not among the allowed VLs {allowed:?}"),
            Refusal::VlTaken { vl, detail } => write!(f, "vl: {vl} {detail}"),
            Refusal::NoFreeVl { entries, allowed } => write!(
                f,
                "no free VL for a new {entries}-entry sequence: every allowed VL {allowed:?} serves another size (allow more VLs)"
            ),
            Refusal::NotEnoughEntries { need, free, distance } => write!(
                f,
                "not enough free entries: needs {need} (distance {distance}), {free} free"
            ),
            Refusal::UnknownName(n) => write!(f, "release: no connection named {n:?}"),
        }
    }
}

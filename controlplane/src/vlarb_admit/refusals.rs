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
    /// `name` is already admitted.
    DuplicateName(String),
    /// `bw` is 0.
    ZeroBandwidth,
    /// `bw` is above the port's speed.
    AboveLink {
        /// Asked, bits per second.
        bw_bps: u64,
        /// The port's speed, bits per second.
        speed_bps: u64,
    },
    /// More credits per cycle than 64 entries of weight 255 hold (in whole frames).
    AboveTable {
        /// Credits per cycle the bandwidth needs.
        credits: u64,
        /// The most a connection of this frame size can have, bits per second.
        max_bps: u64,
    },
    /// The request's frame is outside the port's frame sizes.
    FrameSize {
        /// The request's frame, bytes without FCS.
        frame: u32,
        /// The port's smallest frame.
        min_frame: u32,
        /// The port's largest frame.
        max_frame: u32,
    },
    /// `distance` is not a power of two in 2..=64 (0: neither distance nor latency given).
    BadDistance(u32),
    /// Even the smallest distance does not meet the latency.
    LatencyTooLow {
        /// The latency asked for, ns.
        asked_ns: u64,
        /// What distance 2 guarantees, ns.
        best_ns: u64,
    },
    /// The request names a VL the port does not allow (`--vls`).
    VlNotAllowed {
        /// The VL asked for.
        vl: u8,
        /// The port's allowed VLs.
        allowed: Vec<u8>,
    },
    /// The VL is used by sequences of another size, or the size's VL is another.
    VlTaken {
        /// The VL asked for.
        vl: u8,
        /// Which size holds it, as a phrase following the VL.
        detail: String,
    },
    /// A new sequence size needs a VL and every allowed one serves another size.
    NoFreeVl {
        /// The new sequence's size.
        entries: u32,
        /// The port's allowed VLs.
        allowed: Vec<u8>,
    },
    /// Fewer entries are free than a new sequence needs.
    NotEnoughEntries {
        /// Entries the sequence needs.
        need: u32,
        /// Entries free.
        free: u32,
        /// The distance between its entries.
        distance: u32,
    },
    /// A release names no admitted connection.
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

//! Admission control for the high-priority table of InfiniBand VL arbitration: which entries a
//! connection with a bandwidth and a latency requirement gets, and what it is then guaranteed
//! (`rocectl vlarb admit`). Pure arithmetic on the table; no switch is involved.
//!
//! # The fill-in method (Alfaro, Sánchez and Duato)
//!
//! A connection that must be served at least every `d` entries (`d` = 2, 4, …, 64) of the
//! 64-entry high-priority table gets an entry *sequence* E(i, j) = {j, j + d, j + 2d, …}
//! (d = 2^i, 0 ≤ j < d): `64 / d` entries exactly `d` apart, wrap-around included. Candidate sets
//! are tried in the bit-reversal order of j over i bits (d = 8: j = 0, 4, 2, 6, 1, 5, 3, 7).
//! Read an entry index k backwards as a 6-bit number a = rev(k): E(i, j) is then the aligned
//! block of `64 / d` addresses starting at rev_i(j) · 64/d, and the bit-reversal order is the
//! address order, so this is a buddy allocator that takes the first (lowest) free aligned block.
//! Starting from an empty table and never freeing, first fit in address order keeps the free
//! space a set of aligned blocks of distinct sizes, larger ones at higher addresses (splitting
//! the smallest block that fits leaves blocks of the sizes just below it, which none had). A
//! sum of distinct powers of two holds a block of every power of two up to the sum, so **a
//! request for n entries fits whenever n entries are free**. A release would break that (free
//! two blocks of 16 that are not buddies: 32 free entries, no E(1, j) free), so the table is
//! never edited in place: it is always the placement of the list of sequences, in the order
//! they were made, onto an empty table ([`Admission::table`]). A release removes a connection
//! (and its sequence, once empty) from the list, and the next placement is the defragmented
//! table; the sequences keep their members, VL and weights, and only their positions move.
//! Re-admitting the remaining *connections* one by one is not used: joining is first fit, and
//! first fit is not monotone (removing one item can need more bins), so it could refuse a
//! connection that the kept grouping still holds.
//!
//! A connection joins an existing sequence of its size (and so its VL) when every entry of it
//! has weight left for the connection's share; otherwise it makes a new sequence.
//!
//! # Rate: bits per second to credits per table cycle
//!
//! A weight is in credits of 64 bytes; the arbiter (IBA 1.2.1 §7.6.9) lets an entry send while
//! its counter, loaded with 64 · weight bytes, is above zero, charging each frame whole, so a
//! visit sends at least its weight when its VL is backlogged and overdraws by less than one
//! frame. Frames are counted as the switch holds them (no FCS); on the wire each also costs
//! [`WIRE_OVERHEAD_BYTES`]. Sizes here are frames: a request's `mtu` is the IP MTU (frame =
//! mtu + 18, as in the config), or it gives `frame` directly.
//!
//! The mapping is the paper's: a full table (64 entries of weight 255) is the whole link. Made
//! safe: the cycle of a full table is taken at its worst, [`Admission::full_cycle_line_bytes`]:
//! every entry overdrawing by a largest frame, every frame's wire overhead, and the low-priority
//! frames `LimitOfHighPriority` lets in. A connection of rate B then needs
//! w = ceil(B · full cycle / (64 · link rate)) credits per cycle. No table's cycle is longer
//! (weights ≤ 255, frames ≤ the largest), so a connection that gets w credits per cycle gets at
//! least B, whatever is admitted after it ([`Admission::rate_floor_bps`] computes the floor for
//! the current table, which is higher while the table is not full).
//!
//! Entries: a sequence of n entries carries, per entry, the connection's *share*: a whole
//! number of its frames, k = ceil(w / (n · p)) frames of p = ceil(frame / 64) credits, so
//! share = k · p. A share below one frame per visit would not give the bandwidth it stands
//! for: the frame goes whole and the cycle is longer than its weights say. n is the smallest
//! power of two ≥ 64 / d whose share fits in 255 (the paper's max(64/d, w/255), with whole
//! frames); needing more than 64 entries is refused.
//!
//! # Latency: what bounds a connection's wait
//!
//! Model, and its assumptions:
//! * The bound is for a frame at the head of its VL's queue, or behind no more than one visit's
//!   share of its sequence (connections send within their rate, policed at the source, as the
//!   paper assumes: the arbiter serves VLs, not connections). It runs from the frame's arrival
//!   to its last bit on the wire.
//! * Worst case: the frame arrives just after its sequence's entry stopped. Then go: a frame in
//!   transmission (a largest frame, high or low); every entry up to the sequence's next one, each
//!   at most 64 · weight + a largest frame of its VL (the overdraw), with the wire overhead of
//!   every frame in it (at most ceil(64 · weight / min frame) frames; the min frame is 60 bytes,
//!   a minimum Ethernet frame, unless the port's high-priority traffic is known to be larger); the
//!   sequence's own next entry, in which the frame goes; and the low-priority frames let in
//!   meanwhile, each a largest frame: with `high_limit` Q in 1..254, one after every 4096 · Q
//!   high bytes, so at most floor(high bytes / 4096Q) + 1; with Q = 0 one after every high
//!   frame, so at most (high frames + 1); with Q = 255 (unbounded) none beyond the one in
//!   transmission. Empty VLs are passed over (the frame's own VL is never empty), which is why
//!   nothing else enters the wait.
//! * Two figures per connection: **guaranteed**, with every other entry at weight 255 and
//!   largest frames (true whatever is admitted later: [`Admission::guaranteed_bound_ns`]); and
//!   **now**, with the table as it is ([`Admission::latency_bound_ns`], for a replay of exactly
//!   this table). A latency requirement picks the largest distance whose *guaranteed* bound
//!   meets it, so a later admission never breaks an earlier promise. Link time is the port's
//!   speed; store-and-forward and the cable are not included.
//!
//! # VLs
//!
//! One VL per sequence size: sequences of the same size share a VL, different sizes never do
//! (a VL's queue is a FIFO: a connection of distance 2 queued behind one of distance 64 in the
//! same VL would wait on the other's entries too, which its bound does not count). A new size
//! takes the request's `vl` if it names one, else the first of the allowed VLs (`--vls`) not in
//! use; a request naming a VL another size uses is refused.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Entries in the high-priority table.
pub const ENTRIES: u32 = 64;
/// The largest weight of one entry.
pub const MAX_WEIGHT: u32 = 255;
/// Bytes per weight unit.
pub const CREDIT_BYTES: u64 = 64;
/// `LimitOfHighPriority` is in units of this many bytes.
pub const LIMIT_UNIT_BYTES: u64 = 4096;
/// The `LimitOfHighPriority` that never lets a low-priority frame in while high waits.
pub const UNBOUNDED_LIMIT: u8 = 255;
/// Preamble and start delimiter (8), FCS (4) and inter-frame gap (12): the dataplane's link
/// charges each frame this on top of its stored length (`crate::wire_timing`).
pub use crate::wire_timing::{L2_OVERHEAD_BYTES, WIRE_OVERHEAD_BYTES};
/// The smallest frame as stored (a 64-byte Ethernet frame without its FCS).
pub const MIN_FRAME_BYTES: u32 = crate::wire_timing::MIN_STORED_FRAME_BYTES as u32;
/// The largest frame an entry of weight 255 covers in one visit.
pub const MAX_FRAME_BYTES: u32 = MAX_WEIGHT * CREDIT_BYTES as u32;
/// Queues a port has, which play the VLs.
pub const NUM_VLS: u8 = crate::NUM_TC as u8;

/// `j` with its lowest `bits` bits in reverse order.
pub fn bit_reverse(j: u32, bits: u32) -> u32 {
    if bits == 0 {
        return 0;
    }
    (j & ((1 << bits) - 1)).reverse_bits() >> (32 - bits)
}

/// The starting entries j of the candidate sets E(i, j) for `distance` = 2^i, in the order they
/// are tried. `distance` must be a power of two ≤ 64.
pub fn candidate_order(distance: u32) -> Vec<u32> {
    let bits = distance.trailing_zeros();
    (0..distance).map(|m| bit_reverse(m, bits)).collect()
}

/// The entries of E(i, j) for `distance` = 2^i.
pub fn entry_set(distance: u32, j: u32) -> impl Iterator<Item = u32> {
    (j..ENTRIES).step_by(distance.max(1) as usize)
}

fn mask(distance: u32, j: u32) -> u64 {
    entry_set(distance, j).fold(0, |m, k| m | 1 << k)
}

fn default_min_frame() -> u32 {
    MIN_FRAME_BYTES
}

/// The port the table is for: what the model needs from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortParams {
    /// Line rate, bits per second.
    pub speed_bps: u64,
    /// LimitOfHighPriority: 4 KiB units of high-priority bytes before a waiting low-priority
    /// frame goes; 255 = unbounded, 0 = one high frame at a time.
    pub high_limit: u8,
    /// The largest frame any VL sends on the port (stored bytes, no FCS).
    pub max_frame: u32,
    /// The smallest frame a high-priority VL sends: how many frames, each with its wire
    /// overhead, a visit can hold. 60 (a minimum Ethernet frame) unless the traffic is known.
    #[serde(default = "default_min_frame")]
    pub min_frame: u32,
    /// The VLs (queues) admission may give to sequences.
    pub vls: Vec<u8>,
}

impl PortParams {
    /// Every problem, each naming its field.
    pub fn check(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.speed_bps == 0 {
            problems.push("speed: must be above 0".to_string());
        }
        if !(MIN_FRAME_BYTES..=self.max_frame).contains(&self.min_frame) {
            problems.push(format!(
                "min frame: {} B is outside {MIN_FRAME_BYTES}..={} B (the largest frame)",
                self.min_frame, self.max_frame
            ));
        }
        if !(MIN_FRAME_BYTES..=MAX_FRAME_BYTES).contains(&self.max_frame) {
            problems.push(format!(
                "max frame: {} B is outside {MIN_FRAME_BYTES}..={MAX_FRAME_BYTES} B (a weight of 255 covers {MAX_FRAME_BYTES} B)",
                self.max_frame
            ));
        }
        if self.vls.is_empty() {
            problems.push("vls: none allowed".to_string());
        }
        for (n, vl) in self.vls.iter().enumerate() {
            if *vl >= NUM_VLS {
                problems.push(format!("vls: {vl} is not a VL (0..={})", NUM_VLS - 1));
            }
            if self.vls[..n].contains(vl) {
                problems.push(format!("vls: {vl} given twice"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// A connection asking for entries: a name, a mean rate, a latency or a distance, a frame size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub name: String,
    /// Mean bandwidth, bits of frames per second.
    pub bw_bps: u64,
    /// The latency it tolerates at this port, ns (exclusive with `distance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<u64>,
    /// The largest distance between its entries it tolerates (exclusive with `latency_ns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<u32>,
    /// Its largest frame, stored bytes; `None`: the port's largest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<u32>,
    /// The VL it wants; `None`: its size's VL, or the first free allowed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vl: Option<u8>,
}

/// The keys a request is written with (`--request`, a requests file).
pub const REQUEST_KEYS: &str = "name, bw, latency or distance, mtu or frame, vl";

impl Request {
    /// From `key=value` pairs as written: `name=a,bw=2G,latency=20us,mtu=1024`.
    pub fn parse_spec(spec: &str) -> Result<Request, String> {
        let mut fields = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not key=value (keys: {REQUEST_KEYS})"))?;
            fields.push((k.trim().to_string(), v.trim().to_string()));
        }
        Request::from_fields(&fields)
    }

    /// From (key, value) pairs; errors name the key.
    pub fn from_fields(fields: &[(String, String)]) -> Result<Request, String> {
        let mut seen: Vec<&str> = Vec::new();
        let (mut name, mut bw, mut latency, mut distance, mut frame, mut vl) = (None, None, None, None, None, None);
        for (k, v) in fields {
            if seen.contains(&k.as_str()) {
                return Err(format!("{k}: given twice"));
            }
            seen.push(k);
            let int = |max: u64| -> Result<u64, String> {
                v.parse::<u64>()
                    .ok()
                    .filter(|n| *n <= max)
                    .ok_or_else(|| format!("{k}: {v:?} is not a whole number up to {max}"))
            };
            match k.as_str() {
                "name" => {
                    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c == '=' || c == ',') {
                        return Err(format!("name: {v:?} must be non-empty, without spaces, '=' or ','"));
                    }
                    name = Some(v.clone());
                }
                "bw" => bw = Some(crate::units::parse_rate(v).map_err(|e| format!("bw: {e}"))?),
                "latency" => latency = Some(crate::units::parse_duration(v).map_err(|e| format!("latency: {e}"))?),
                "distance" => distance = Some(int(u64::from(u32::MAX))? as u32),
                "mtu" => {
                    if frame.is_some() {
                        return Err("mtu: give mtu or frame, not both".into());
                    }
                    frame = Some(int(u64::from(u32::MAX - L2_OVERHEAD_BYTES))? as u32 + L2_OVERHEAD_BYTES);
                }
                "frame" => {
                    if frame.is_some() {
                        return Err("frame: give mtu or frame, not both".into());
                    }
                    frame = Some(int(u64::from(u32::MAX))? as u32);
                }
                "vl" => vl = Some(int(u64::from(NUM_VLS - 1))? as u8),
                _ => return Err(format!("{k}: not a request key (keys: {REQUEST_KEYS})")),
            }
        }
        let name = name.ok_or("name: missing")?;
        let named = |e: String| format!("{name}: {e}");
        let bw_bps = bw.ok_or_else(|| named("bw: missing".into()))?;
        if latency.is_some() == distance.is_some() {
            return Err(named("give latency or distance (one of them)".into()));
        }
        Ok(Request {
            name,
            bw_bps,
            latency_ns: latency,
            distance,
            frame,
            vl,
        })
    }

    /// The request written back as a spec.
    pub fn spec(&self) -> String {
        let mut s = format!("name={},bw={}", self.name, crate::units::format_rate(self.bw_bps));
        if let Some(l) = self.latency_ns {
            s += &format!(",latency={}", crate::units::format_duration(l));
        }
        if let Some(d) = self.distance {
            s += &format!(",distance={d}");
        }
        if let Some(f) = self.frame {
            s += &format!(",frame={f}");
        }
        if let Some(v) = self.vl {
            s += &format!(",vl={v}");
        }
        s
    }
}

/// Requests from a file: TOML (`[[request]]` tables) or, with `json`, a JSON array of objects
/// (or `{"request": [...]}`); the keys are those of `--request`. Errors name the request.
pub fn parse_requests(text: &str, json: bool) -> Result<Vec<Request>, String> {
    let list: Vec<Vec<(String, String)>> = if json {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let arr = match &v {
            serde_json::Value::Array(a) => a,
            serde_json::Value::Object(o) if o.len() == 1 && o.contains_key("request") => {
                o["request"].as_array().ok_or("request: not an array")?
            }
            _ => return Err("expected an array of requests, or {\"request\": [...]}".into()),
        };
        arr.iter()
            .enumerate()
            .map(|(i, r)| {
                let o = r.as_object().ok_or(format!("request {}: not an object", i + 1))?;
                o.iter()
                    .map(|(k, v)| match v {
                        serde_json::Value::String(s) => Ok((k.clone(), s.clone())),
                        serde_json::Value::Number(n) => Ok((k.clone(), n.to_string())),
                        _ => Err(format!("request {}: {k}: not a string or number", i + 1)),
                    })
                    .collect()
            })
            .collect::<Result<_, String>>()?
    } else {
        let t: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| e.to_string().trim_end().to_string())?;
        if let Some(k) = t.keys().find(|k| *k != "request") {
            return Err(format!("{k}: not a key of a requests file (write [[request]] tables)"));
        }
        let arr = match t.get("request") {
            None => return Ok(Vec::new()),
            Some(toml::Value::Array(a)) => a,
            Some(_) => return Err("request: write [[request]] tables".into()),
        };
        arr.iter()
            .enumerate()
            .map(|(i, r)| {
                let o = r.as_table().ok_or(format!("request {}: not a table", i + 1))?;
                o.iter()
                    .map(|(k, v)| match v {
                        toml::Value::String(s) => Ok((k.clone(), s.clone())),
                        toml::Value::Integer(n) => Ok((k.clone(), n.to_string())),
                        _ => Err(format!("request {}: {k}: not a string or integer", i + 1)),
                    })
                    .collect()
            })
            .collect::<Result<_, String>>()?
    };
    list.iter()
        .enumerate()
        .map(|(i, f)| Request::from_fields(f).map_err(|e| format!("request {}: {e}", i + 1)))
        .collect()
}

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

/// What a request needs, before it is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Entries of its sequence: 64 / its effective distance.
    pub entries: u32,
    /// The distance its latency (or its own `distance`) asks for.
    pub distance: u32,
    /// Credits per entry: whole frames.
    pub share: u32,
    /// Credits per cycle its bandwidth needs (before rounding to whole frames).
    pub credits: u64,
    /// Its largest frame.
    pub frame: u32,
}

impl Plan {
    /// The distance between its entries.
    pub fn effective_distance(&self) -> u32 {
        ENTRIES / self.entries
    }
}

/// A sequence: `entries` entries exactly 64 / `entries` apart, one VL, the connections sharing
/// them (each entry's weight is the sum of their shares).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sequence {
    pub entries: u32,
    pub vl: u8,
    pub members: Vec<Request>,
}

/// One entry of the high-priority table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry {
    pub vl: u8,
    pub weight: u32,
    /// The largest frame of the connections it serves (0 when free).
    pub max_frame: u32,
    /// Index of its sequence in [`Admission::sequences`].
    pub sequence: Option<usize>,
}

/// An admitted connection, as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    pub request: Request,
    pub plan: Plan,
    pub vl: u8,
    /// Its entries, ascending.
    pub entries: Vec<u32>,
    pub latency_now_ns: u64,
    pub latency_guaranteed_ns: u64,
    pub rate_floor_bps: u64,
}

/// The state file: the port and the sequences in the order they were made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub version: u32,
    pub port: PortParams,
    pub sequences: Vec<Sequence>,
}

/// The state's format version.
pub const STATE_VERSION: u32 = 1;

/// The admitted connections of one port and the table they make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    params: PortParams,
    sequences: Vec<Sequence>,
    /// Where each sequence sits (its j), kept equal to `place(sequences)`.
    starts: Vec<u32>,
}

/// Each sequence's starting entry, placing them in order on an empty table (first free
/// candidate set in bit-reversal order); `None` if one does not fit.
fn place(sequences: &[Sequence]) -> Option<Vec<u32>> {
    let mut used = 0u64;
    let mut out = Vec::with_capacity(sequences.len());
    for s in sequences {
        let d = ENTRIES / s.entries;
        let j = candidate_order(d).into_iter().find(|&j| used & mask(d, j) == 0)?;
        used |= mask(d, j);
        out.push(j);
    }
    Some(out)
}

fn ceil_div(a: u128, b: u128) -> u128 {
    a.div_ceil(b.max(1))
}

impl Admission {
    /// An empty table for `params`.
    pub fn new(params: PortParams) -> Result<Admission, String> {
        params.check()?;
        Ok(Admission {
            params,
            sequences: Vec::new(),
            starts: Vec::new(),
        })
    }

    /// From a state file's content, checked: every member re-planned under the port, sizes,
    /// VLs, weights and names consistent. Errors name the sequence and member.
    pub fn from_state(state: State) -> Result<Admission, String> {
        if state.version != STATE_VERSION {
            return Err(format!(
                "version: {} (this rocectl reads version {STATE_VERSION})",
                state.version
            ));
        }
        let mut a = Admission::new(state.port).map_err(|e| format!("port: {e}"))?;
        let mut names: Vec<&str> = Vec::new();
        for (i, s) in state.sequences.iter().enumerate() {
            let at = |e: String| format!("sequences[{i}]: {e}");
            if s.members.is_empty() {
                return Err(at("no members".into()));
            }
            if let Some(m) = s
                .members
                .iter()
                .find(|m| m.latency_ns.is_some() == m.distance.is_some())
            {
                return Err(at(format!("{}: give latency_ns or distance (one of them)", m.name)));
            }
            if !s.entries.is_power_of_two() || s.entries > ENTRIES {
                return Err(at(format!("entries: {} is not a power of two up to 64", s.entries)));
            }
            if state.sequences[..i]
                .iter()
                .any(|o| (o.vl == s.vl) != (o.entries == s.entries))
            {
                return Err(at(format!(
                    "vl {}: one VL per sequence size (another sequence disagrees)",
                    s.vl
                )));
            }
            if !a.params.vls.contains(&s.vl) {
                return Err(at(format!(
                    "vl: {} is not among the port's VLs {:?}",
                    s.vl, a.params.vls
                )));
            }
            let mut weight = 0u32;
            for m in &s.members {
                let plan = a.plan(m).map_err(|e| at(format!("{}: {e}", m.name)))?;
                if plan.entries != s.entries {
                    return Err(at(format!(
                        "{}: needs a {}-entry sequence, not {}",
                        m.name, plan.entries, s.entries
                    )));
                }
                if m.vl.is_some_and(|v| v != s.vl) {
                    return Err(at(format!(
                        "{}: asks for VL {:?}, sequence is on {}",
                        m.name, m.vl, s.vl
                    )));
                }
                if names.contains(&m.name.as_str()) {
                    return Err(at(format!("{}: name given twice", m.name)));
                }
                names.push(&m.name);
                weight = weight.saturating_add(plan.share);
            }
            if weight > MAX_WEIGHT {
                return Err(at(format!("weight per entry {weight} is above {MAX_WEIGHT}")));
            }
        }
        let starts = place(&state.sequences).ok_or("sequences: more entries than the table has")?;
        a.sequences = state.sequences;
        a.starts = starts;
        Ok(a)
    }

    /// The state to write back.
    pub fn state(&self) -> State {
        State {
            version: STATE_VERSION,
            port: self.params.clone(),
            sequences: self.sequences.clone(),
        }
    }

    pub fn params(&self) -> &PortParams {
        &self.params
    }

    /// The sequences, in the order they were made (their placement order).
    pub fn sequences(&self) -> &[Sequence] {
        &self.sequences
    }

    /// Where sequence `i` starts (its j).
    pub fn start(&self, i: usize) -> u32 {
        self.starts[i]
    }

    /// Entries used by all sequences.
    pub fn used_entries(&self) -> u32 {
        self.sequences.iter().map(|s| s.entries).sum()
    }

    pub fn free_entries(&self) -> u32 {
        ENTRIES - self.used_entries()
    }

    fn share_sum(&self, s: &Sequence) -> u32 {
        s.members
            .iter()
            .fold(0, |w, m| w.saturating_add(self.plan(m).map_or(0, |p| p.share)))
    }

    fn frame_of(&self, r: &Request) -> u32 {
        r.frame.unwrap_or(self.params.max_frame)
    }

    /// The 64 entries.
    pub fn table(&self) -> Vec<Entry> {
        let mut t = vec![Entry::default(); ENTRIES as usize];
        for (i, (s, &j)) in self.sequences.iter().zip(&self.starts).enumerate() {
            let weight = self.share_sum(s);
            let max_frame = s.members.iter().map(|m| self.frame_of(m)).max().unwrap_or(0);
            for k in entry_set(ENTRIES / s.entries, j) {
                t[k as usize] = Entry {
                    vl: s.vl,
                    weight,
                    max_frame,
                    sequence: Some(i),
                };
            }
        }
        t
    }

    /// The high-priority table as `[VL, weight]` pairs in table order, free entries as
    /// `[0, 0]` (weight 0 is skipped), all 64 so every position and the wrap-around stay.
    pub fn high_pairs(&self) -> Vec<[u32; 2]> {
        self.table()
            .iter()
            .map(|e| {
                if e.weight == 0 {
                    [0, 0]
                } else {
                    [u32::from(e.vl), e.weight]
                }
            })
            .collect()
    }

    fn line(&self, bytes: u64) -> u64 {
        ceil_div(u128::from(bytes) * 8 * 1_000_000_000, u128::from(self.params.speed_bps)) as u64
    }

    /// Low-priority frames that can go among `high_bytes` of high-priority line time made of at
    /// most `high_frames` frames.
    fn lows(&self, high_bytes: u64, high_frames: u64) -> u64 {
        match self.params.high_limit {
            UNBOUNDED_LIMIT => 0,
            0 => high_frames + 1,
            q => high_bytes / (LIMIT_UNIT_BYTES * u64::from(q)) + 1,
        }
    }

    /// Line bytes and frames of one visit of an entry at its worst: its weight plus an overdraw
    /// of one of its largest frames, every frame with its wire overhead.
    fn visit(&self, weight: u32, max_frame: u32) -> (u64, u64) {
        if weight == 0 {
            return (0, 0);
        }
        let frames = (u64::from(weight) * CREDIT_BYTES).div_ceil(u64::from(self.params.min_frame));
        (
            u64::from(weight) * CREDIT_BYTES + u64::from(max_frame) + frames * WIRE_OVERHEAD_BYTES,
            frames,
        )
    }

    /// Line bytes from a frame's arrival to its departure, given the visits in between and
    /// its own entry's visit: a frame in transmission, those visits, the low frames let in.
    fn window(&self, visits: impl Iterator<Item = (u32, u32)>) -> u64 {
        let big = u64::from(self.params.max_frame) + WIRE_OVERHEAD_BYTES;
        let (mut bytes, mut frames) = (big, 1);
        for (w, f) in visits {
            let (b, n) = self.visit(w, f);
            bytes += b;
            frames += n;
        }
        bytes + self.lows(bytes, frames) * big
    }

    /// The worst cycle of a full table (64 entries of weight 255, largest frames) in line
    /// bytes: what the rate mapping takes the whole link to be.
    pub fn full_cycle_line_bytes(&self) -> u64 {
        self.window((0..ENTRIES).map(|_| (MAX_WEIGHT, self.params.max_frame)))
    }

    /// Credits per table cycle a rate needs (bits of frames per second).
    pub fn credits_per_cycle(&self, bw_bps: u64) -> u64 {
        ceil_div(
            u128::from(bw_bps) * u128::from(self.full_cycle_line_bytes()) * 8,
            u128::from(self.params.speed_bps) * u128::from(CREDIT_BYTES) * 8,
        ) as u64
    }

    /// The latency bound of distance `distance` (entries `distance` apart) whatever the rest
    /// of the table holds, ns.
    pub fn guaranteed_bound_ns(&self, distance: u32) -> u64 {
        let f = self.params.max_frame;
        self.line(self.window((0..distance).map(|_| (MAX_WEIGHT, f))))
    }

    /// What `req` needs, or why it cannot be had on this port at all (entries and VLs aside).
    pub fn plan(&self, req: &Request) -> Result<Plan, Refusal> {
        if req.bw_bps == 0 {
            return Err(Refusal::ZeroBandwidth);
        }
        if req.bw_bps > self.params.speed_bps {
            return Err(Refusal::AboveLink {
                bw_bps: req.bw_bps,
                speed_bps: self.params.speed_bps,
            });
        }
        let frame = self.frame_of(req);
        if !(self.params.min_frame..=self.params.max_frame).contains(&frame) {
            return Err(Refusal::FrameSize {
                frame,
                min_frame: self.params.min_frame,
                max_frame: self.params.max_frame,
            });
        }
        let distance = match (req.distance, req.latency_ns) {
            (Some(d), _) => {
                if !(d.is_power_of_two() && (2..=ENTRIES).contains(&d)) {
                    return Err(Refusal::BadDistance(d));
                }
                d
            }
            (None, Some(lat)) => {
                let mut d = ENTRIES;
                while self.guaranteed_bound_ns(d) > lat {
                    if d == 2 {
                        return Err(Refusal::LatencyTooLow {
                            asked_ns: lat,
                            best_ns: self.guaranteed_bound_ns(2),
                        });
                    }
                    d /= 2;
                }
                d
            }
            (None, None) => return Err(Refusal::BadDistance(0)),
        };
        let credits = self.credits_per_cycle(req.bw_bps);
        let p = u64::from(frame).div_ceil(CREDIT_BYTES);
        let mut entries = ENTRIES / distance;
        loop {
            let share = credits.div_ceil(u64::from(entries) * p).max(1) * p;
            if share <= u64::from(MAX_WEIGHT) {
                return Ok(Plan {
                    entries,
                    distance,
                    share: share as u32,
                    credits,
                    frame,
                });
            }
            if entries == ENTRIES {
                let frames = u64::from(MAX_WEIGHT) / p * u64::from(ENTRIES);
                let max = ceil_div(
                    u128::from(frames * p * CREDIT_BYTES) * u128::from(self.params.speed_bps),
                    u128::from(self.full_cycle_line_bytes()),
                );
                return Err(Refusal::AboveTable {
                    credits,
                    max_bps: max.min(u128::from(u64::MAX)) as u64,
                });
            }
            entries *= 2;
        }
    }

    /// Admits `req`: joins the first sequence of its size with weight left, else makes a new
    /// one on the first free candidate set. Returns the index of its sequence.
    pub fn admit(&mut self, req: Request) -> Result<usize, Refusal> {
        if self.connection_index(&req.name).is_some() {
            return Err(Refusal::DuplicateName(req.name));
        }
        let plan = self.plan(&req)?;
        let vl = self.vl_for(&req, plan.entries)?;
        if let Some(i) = self
            .sequences
            .iter()
            .position(|s| s.entries == plan.entries && self.share_sum(s) + plan.share <= MAX_WEIGHT)
        {
            self.sequences[i].members.push(req);
            return Ok(i);
        }
        if self.free_entries() < plan.entries {
            return Err(Refusal::NotEnoughEntries {
                need: plan.entries,
                free: self.free_entries(),
                distance: plan.effective_distance(),
            });
        }
        self.sequences.push(Sequence {
            entries: plan.entries,
            vl,
            members: vec![req],
        });
        match place(&self.sequences) {
            Some(starts) => {
                self.starts = starts;
                Ok(self.sequences.len() - 1)
            }
            None => {
                // Cannot happen (see the module doc); refused rather than trusted.
                let s = self.sequences.pop().expect("just pushed");
                Err(Refusal::NotEnoughEntries {
                    need: s.entries,
                    free: self.free_entries(),
                    distance: ENTRIES / s.entries,
                })
            }
        }
    }

    fn vl_for(&self, req: &Request, entries: u32) -> Result<u8, Refusal> {
        let allowed = &self.params.vls;
        let own = self.sequences.iter().find(|s| s.entries == entries).map(|s| s.vl);
        if let Some(vl) = req.vl {
            if !allowed.contains(&vl) {
                return Err(Refusal::VlNotAllowed {
                    vl,
                    allowed: allowed.clone(),
                });
            }
            if let Some(own) = own.filter(|o| *o != vl) {
                return Err(Refusal::VlTaken {
                    vl,
                    detail: format!("is not the VL of {entries}-entry sequences (VL {own})"),
                });
            }
            if let Some(other) = self.sequences.iter().find(|s| s.vl == vl && s.entries != entries) {
                return Err(Refusal::VlTaken {
                    vl,
                    detail: format!(
                        "serves {}-entry sequences; this request needs {entries} entries",
                        other.entries
                    ),
                });
            }
            return Ok(vl);
        }
        if let Some(own) = own {
            return Ok(own);
        }
        allowed
            .iter()
            .copied()
            .find(|v| self.sequences.iter().all(|s| s.vl != *v))
            .ok_or(Refusal::NoFreeVl {
                entries,
                allowed: allowed.clone(),
            })
    }

    fn connection_index(&self, name: &str) -> Option<(usize, usize)> {
        self.sequences
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.members.iter().position(|m| m.name == name).map(|k| (i, k)))
    }

    /// Releases a connection; its sequence goes when empty, and every sequence is placed again
    /// (defragmented).
    pub fn release(&mut self, name: &str) -> Result<(), Refusal> {
        let (i, k) = self
            .connection_index(name)
            .ok_or_else(|| Refusal::UnknownName(name.to_string()))?;
        self.sequences[i].members.remove(k);
        if self.sequences[i].members.is_empty() {
            self.sequences.remove(i);
        }
        // Placing a prefix-closed list on an empty table always fits (module doc).
        self.starts = place(&self.sequences).unwrap_or_default();
        Ok(())
    }

    /// The latency bound of connection `name` on the table as it is, ns.
    pub fn latency_bound_ns(&self, name: &str) -> Option<u64> {
        let (i, _) = self.connection_index(name)?;
        let table = self.table();
        let s = &self.sequences[i];
        let d = ENTRIES / s.entries;
        let j = self.starts[i];
        let at = |k: u32| {
            let e = table[(k % ENTRIES) as usize];
            (e.weight, e.max_frame)
        };
        entry_set(d, j)
            .map(|start| self.line(self.window((start + 1..=start + d).map(at))))
            .max()
    }

    /// The rate connection `name` is sure of on the table as it is: its credits per cycle over
    /// the table's worst cycle, bits per second.
    pub fn rate_floor_bps(&self, name: &str) -> Option<u64> {
        let (i, _) = self.connection_index(name)?;
        let s = &self.sequences[i];
        let share = self.plan(&s.members[self.connection_index(name)?.1]).ok()?.share;
        let cycle = self.window(self.table().iter().map(|e| (e.weight, e.max_frame)));
        let bits =
            u128::from(s.entries) * u128::from(share) * u128::from(CREDIT_BYTES) * u128::from(self.params.speed_bps);
        Some((bits / u128::from(cycle.max(1))).min(u128::from(u64::MAX)) as u64)
    }

    /// Every admitted connection with its place and bounds, in admission-list order.
    pub fn connections(&self) -> Vec<Connection> {
        let mut out = Vec::new();
        for (i, s) in self.sequences.iter().enumerate() {
            let d = ENTRIES / s.entries;
            for m in &s.members {
                let Ok(plan) = self.plan(m) else { continue };
                out.push(Connection {
                    request: m.clone(),
                    plan,
                    vl: s.vl,
                    entries: entry_set(d, self.starts[i]).collect(),
                    latency_now_ns: self.latency_bound_ns(&m.name).unwrap_or(0),
                    latency_guaranteed_ns: self.guaranteed_bound_ns(d),
                    rate_floor_bps: self.rate_floor_bps(&m.name).unwrap_or(0),
                });
            }
        }
        out
    }
}

/// What a `--config` file says about the port(s) a table is for.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigPort {
    /// The port's speed (the slowest port's without a port id: the defaults apply to all).
    pub speed_bps: u64,
    /// The port's largest frame (the largest of all without a port id).
    pub max_frame: u32,
    /// `high_limit` from the port's `vlarb`, else from `[port_defaults.vlarb]`.
    pub high_limit: Option<u8>,
    /// The config as written, for a per-port fragment.
    pub raw: toml::Table,
}

/// Reads a config for the table's port: `port` = a `[[port]]` id, or `None` for the defaults.
/// The `scheduler` and `vlarb` keys are set aside before validation: the command only needs the
/// ports' speeds and frame sizes, and the tables it is about to replace may be incomplete (a
/// `vlarb` port with no weighted entry yet is refused by validation).
pub fn read_config(text: &str, port: Option<u16>) -> Result<ConfigPort, String> {
    let raw: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.to_string().trim_end().to_string())?;
    let mut stripped = raw.clone();
    let strip = |t: &mut toml::Table| {
        t.remove("scheduler");
        t.remove("vlarb");
    };
    if let Some(toml::Value::Table(d)) = stripped.get_mut("port_defaults") {
        strip(d);
    }
    if let Some(toml::Value::Array(ports)) = stripped.get_mut("port") {
        for p in ports.iter_mut() {
            if let toml::Value::Table(t) = p {
                strip(t);
            }
        }
    }
    let text = toml::to_string(&stripped).map_err(|e| e.to_string())?;
    let loaded = crate::load_str(&text).map_err(|e| e.problems().join("; "))?;
    let ports = &loaded.config.ports;
    let limit = |t: Option<&toml::Value>, at: &str| -> Result<Option<u8>, String> {
        match t.and_then(|v| v.get("vlarb")).and_then(|v| v.get("high_limit")) {
            None => Ok(None),
            Some(toml::Value::Integer(q)) if (0..=255).contains(q) => Ok(Some(*q as u8)),
            Some(v) => Err(format!("{at}.vlarb.high_limit: {v} is not 0..=255")),
        }
    };
    let defaults = limit(raw.get("port_defaults"), "port_defaults")?;
    match port {
        Some(id) => {
            let p = ports
                .iter()
                .find(|p| p.id == id)
                .ok_or_else(|| format!("port: the config has no port {id}"))?;
            let raw_port = raw.get("port").and_then(|v| v.as_array()).and_then(|a| {
                a.iter()
                    .find(|p| p.get("id").and_then(|i| i.as_integer()) == Some(i64::from(id)))
            });
            Ok(ConfigPort {
                speed_bps: p.speed_bps,
                max_frame: p.max_frame_bytes,
                high_limit: limit(raw_port, &format!("port[{id}]"))?.or(defaults),
                raw,
            })
        }
        None => Ok(ConfigPort {
            speed_bps: ports
                .iter()
                .map(|p| p.speed_bps)
                .min()
                .ok_or("the config has no ports")?,
            max_frame: ports.iter().map(|p| p.max_frame_bytes).max().unwrap_or(0),
            high_limit: defaults,
            raw,
        }),
    }
}

/// The config fragment that puts the table on a switch (`rocectl patch FILE`). Without a port,
/// `[port_defaults]`: `scheduler = "vlarb"` and `vlarb.high` and `vlarb.high_limit`; a patch
/// merges tables key by key, so the running `low` table stays. With a port, the whole
/// `[[port]]` array of `config` (a patch replaces arrays whole) with that port's `scheduler`
/// and `vlarb.high`/`high_limit` set and everything else as written.
pub fn fragment(a: &Admission, port: Option<(u16, &toml::Table)>) -> Result<String, String> {
    use toml::Value;
    let high = Value::Array(
        a.high_pairs()
            .iter()
            .map(|[vl, w]| Value::Array(vec![Value::Integer(i64::from(*vl)), Value::Integer(i64::from(*w))]))
            .collect(),
    );
    let set = |t: &mut toml::Table| {
        t.insert("scheduler".into(), Value::String("vlarb".into()));
        let v = t.entry("vlarb").or_insert_with(|| Value::Table(toml::Table::new()));
        if !v.is_table() {
            *v = Value::Table(toml::Table::new());
        }
        if let Value::Table(v) = v {
            v.insert("high".into(), high.clone());
            v.insert("high_limit".into(), Value::Integer(i64::from(a.params().high_limit)));
        }
    };
    let mut out = toml::Table::new();
    let what = match port {
        None => {
            let mut d = toml::Table::new();
            set(&mut d);
            out.insert("port_defaults".into(), Value::Table(d));
            "[port_defaults]".to_string()
        }
        Some((id, config)) => {
            let mut ports = config
                .get("port")
                .and_then(|p| p.as_array())
                .cloned()
                .ok_or("the config has no [[port]] array")?;
            let p = ports
                .iter_mut()
                .find(|p| p.get("id").and_then(|i| i.as_integer()) == Some(i64::from(id)))
                .and_then(|p| p.as_table_mut())
                .ok_or_else(|| format!("port: the config has no port {id}"))?;
            set(p);
            out.insert("port".into(), Value::Array(ports));
            format!("port {id} (the whole [[port]] array: a patch replaces arrays)")
        }
    };
    let body = toml::to_string(&out).map_err(|e| e.to_string())?;
    // 64 pairs on one line are unreadable: eight a line, so a row is eight entries.
    let body: String = body
        .lines()
        .map(|l| match l.starts_with("high = ").then(|| l.parse::<toml::Table>()) {
            Some(Ok(mut t)) if t.get("high").and_then(Value::as_array).is_some_and(|a| a.len() > 8) => {
                let Some(Value::Array(pairs)) = t.remove("high") else {
                    return format!("{l}\n");
                };
                let rows: Vec<String> = pairs
                    .chunks(8)
                    .map(|row| {
                        let cells: Vec<String> = row.iter().map(ToString::to_string).collect();
                        format!("  {},", cells.join(", "))
                    })
                    .collect();
                format!("high = [\n{}\n]\n", rows.join("\n"))
            }
            _ => format!("{l}\n"),
        })
        .collect();
    Ok(format!(
        "# rocectl vlarb admit: {} connection(s) on {} of {ENTRIES} high-priority entries, for {what}.\n# Apply live with `rocectl patch FILE`.\n{body}",
        a.connections().len(),
        a.used_entries()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(speed: &str) -> Admission {
        Admission::new(PortParams {
            speed_bps: crate::units::parse_rate(speed).unwrap(),
            high_limit: UNBOUNDED_LIMIT,
            max_frame: 1518,
            min_frame: MIN_FRAME_BYTES,
            vls: (1..8).collect(),
        })
        .unwrap()
    }

    fn req(spec: &str) -> Request {
        Request::parse_spec(spec).unwrap()
    }

    #[test]
    fn bit_reversal_order() {
        assert_eq!(candidate_order(8), [0, 4, 2, 6, 1, 5, 3, 7]);
        assert_eq!(candidate_order(2), [0, 1]);
        assert_eq!(candidate_order(1), [0]);
        assert_eq!(candidate_order(4), [0, 2, 1, 3]);
        let mut all = candidate_order(64);
        assert_eq!(&all[..4], [0, 32, 16, 48]);
        all.sort();
        assert_eq!(all, (0..64).collect::<Vec<_>>(), "a permutation");
        assert_eq!(entry_set(16, 3).collect::<Vec<_>>(), [3, 19, 35, 51]);
    }

    /// Four distance-8 sequences take j = 0, 4, 2, 6; what is left is the odd entries, E(1, 1),
    /// so a distance-2 request for 32 entries still fits. Trying j in plain order
    /// (0, 1, 2, 3) would leave entries ≡ 4..7 mod 8, which hold no set of distance 2.
    #[test]
    fn bit_reversal_keeps_room_for_the_smallest_distance() {
        let mut a = port("100G");
        for n in 0..4 {
            // Each too big to share a sequence: 192 credits per entry.
            let i = a.admit(req(&format!("name=c{n},bw=6G,distance=8,frame=1024"))).unwrap();
            assert_eq!(a.sequences()[i].members.len(), 1, "c{n} joined");
        }
        let starts: Vec<u32> = (0..4).map(|i| a.start(i)).collect();
        assert_eq!(starts, [0, 4, 2, 6]);
        let i = a.admit(req("name=fast,bw=1G,distance=2,frame=1024")).unwrap();
        assert_eq!(a.start(i), 1);
        assert_eq!(a.free_entries(), 0);
        // The plain order, for contrast.
        let used: u64 = (0..4).map(|j| mask(8, j)).fold(0, |m, x| m | x);
        assert!((0..2).all(|j| used & mask(2, j) != 0), "plain order leaves no E(1, j)");
    }

    #[test]
    fn whole_frames_and_entries_for_bandwidth() {
        let a = port("100G");
        // A tiny rate still gets one whole frame per entry: 1024 B = 16 credits.
        let p = a.plan(&req("name=a,bw=1M,distance=8,frame=1024")).unwrap();
        assert_eq!((p.entries, p.share), (8, 16));
        // A 1025 B frame is charged 17 credits.
        let p = a.plan(&req("name=a,bw=1M,distance=8,frame=1025")).unwrap();
        assert_eq!(p.share, 17);
        // max(64/d, w/255): 40G needs more than 1 entry of 255 at distance 64.
        let p = a.plan(&req("name=a,bw=40G,distance=64,frame=1024")).unwrap();
        let min = p.credits.div_ceil(255);
        assert!(u64::from(p.entries) >= min && p.entries >= 1 && p.entries.is_power_of_two());
        assert!(
            u64::from(p.entries / 2) * 240 < p.credits,
            "no smaller power of two holds it"
        );
        assert_eq!(p.share % 16, 0, "whole 1024 B frames");
        assert!(u64::from(p.share) * u64::from(p.entries) >= p.credits);
    }

    #[test]
    fn rate_maps_to_credits_through_the_full_cycle() {
        let a = port("100G");
        // Unbounded limit, 1518 B frames: a full cycle is 64 visits of 16320 + 1518 + 24·272
        // line bytes, plus the frame in transmission.
        let visit = 16320 + 1518 + 24 * (16320u64.div_ceil(60));
        assert_eq!(a.full_cycle_line_bytes(), 1542 + 64 * visit);
        // The whole link needs more credits than a table holds (overheads): refused.
        assert!(matches!(
            a.plan(&req("name=a,bw=100G,distance=64")),
            Err(Refusal::AboveTable { .. })
        ));
        // Half the link: about half the table.
        let w = a.credits_per_cycle(50_000_000_000);
        assert_eq!(w, (50 * a.full_cycle_line_bytes()).div_ceil(100 * 64));
        assert!(w > 64 * 255 / 2 && w < 64 * 255, "{w}");
    }

    #[test]
    fn latency_picks_the_largest_distance_that_meets_it() {
        let a = port("100G");
        for d in [2, 4, 8, 16, 32] {
            assert!(a.guaranteed_bound_ns(d) < a.guaranteed_bound_ns(d * 2));
        }
        let l8 = a.guaranteed_bound_ns(8);
        let p = a.plan(&req(&format!("name=a,bw=1G,latency={l8}ns"))).unwrap();
        assert_eq!(p.distance, 8);
        let p = a.plan(&req(&format!("name=a,bw=1G,latency={}ns", l8 - 1))).unwrap();
        assert_eq!(p.distance, 4);
        let best = a.guaranteed_bound_ns(2);
        assert_eq!(
            a.plan(&req(&format!("name=a,bw=1G,latency={}ns", best - 1))),
            Err(Refusal::LatencyTooLow {
                asked_ns: best - 1,
                best_ns: best
            })
        );
        // Distance 8 at 100G, unbounded limit: frame in flight + 8 visits.
        let visit = 16320 + 1518 + 24 * 272u64;
        assert_eq!(l8, ((1542 + 8 * visit) * 8).div_ceil(100));
    }

    #[test]
    fn the_low_priority_limit_adds_low_frames() {
        let mut params = port("100G").params().clone();
        let unbounded = Admission::new(params.clone()).unwrap().guaranteed_bound_ns(4);
        params.high_limit = 6;
        let limited = Admission::new(params.clone()).unwrap();
        let high = 1542 + 4 * (16320 + 1518 + 24 * 272u64);
        let lows = high / (6 * 4096) + 1;
        assert_eq!(limited.guaranteed_bound_ns(4), ((high + lows * 1542) * 8).div_ceil(100));
        assert!(limited.guaranteed_bound_ns(4) > unbounded);
        params.high_limit = 0;
        let one = Admission::new(params).unwrap();
        let frames = 1 + 4 * 272u64;
        assert_eq!(
            one.guaranteed_bound_ns(4),
            ((high + (frames + 1) * 1542) * 8).div_ceil(100)
        );
    }

    #[test]
    fn a_connection_joins_its_sizes_sequence_while_weight_is_left() {
        let mut a = port("100G");
        let s0 = a.admit(req("name=a,bw=100M,distance=8,frame=1024")).unwrap();
        let s1 = a.admit(req("name=b,bw=100M,distance=8,frame=1024")).unwrap();
        assert_eq!(s0, s1, "joined");
        assert_eq!(a.table()[a.start(s0) as usize].weight, 32);
        // A different size gets its own sequence and VL.
        let s2 = a.admit(req("name=c,bw=100M,distance=4,frame=1024")).unwrap();
        assert_ne!(s2, s0);
        assert_ne!(a.sequences()[s2].vl, a.sequences()[s0].vl);
        assert_eq!(a.used_entries(), 8 + 16);
    }

    #[test]
    fn refusals_name_the_reason() {
        let mut a = port("100G");
        assert_eq!(a.admit(req("name=z,bw=0,distance=8")), Err(Refusal::ZeroBandwidth));
        assert!(matches!(
            a.admit(req("name=z,bw=101G,distance=8")),
            Err(Refusal::AboveLink { .. })
        ));
        assert_eq!(a.admit(req("name=z,bw=1G,distance=1")), Err(Refusal::BadDistance(1)));
        assert_eq!(
            a.admit(req("name=z,bw=1G,distance=128")),
            Err(Refusal::BadDistance(128))
        );
        assert!(matches!(
            a.admit(req("name=z,bw=1G,distance=8,frame=9000")),
            Err(Refusal::FrameSize { .. })
        ));
        a.admit(req("name=big,bw=30G,distance=2,frame=1024")).unwrap();
        assert!(matches!(
            a.admit(req("name=big,bw=1G,distance=2")),
            Err(Refusal::DuplicateName(_))
        ));
        a.admit(req("name=more,bw=30G,distance=2,frame=1024")).unwrap();
        assert_eq!(
            a.admit(req("name=x,bw=100M,distance=64,frame=1024")),
            Err(Refusal::NotEnoughEntries {
                need: 1,
                free: 0,
                distance: 64
            })
        );
        assert_eq!(a.release("nobody"), Err(Refusal::UnknownName("nobody".into())));
        assert!(matches!(
            a.admit(req("name=v,bw=1G,distance=8,vl=0")),
            Err(Refusal::VlNotAllowed { vl: 0, .. })
        ));
        let msg = Refusal::NotEnoughEntries {
            need: 16,
            free: 8,
            distance: 4,
        }
        .to_string();
        assert!(msg.contains("needs 16") && msg.contains("8 free"), "{msg}");
    }

    #[test]
    fn one_vl_per_size() {
        let mut a = port("100G");
        a.admit(req("name=a,bw=1G,distance=8,vl=3")).unwrap();
        assert!(matches!(
            a.admit(req("name=b,bw=1G,distance=4,vl=3")),
            Err(Refusal::VlTaken { vl: 3, .. })
        ));
        assert!(matches!(
            a.admit(req("name=b,bw=1G,distance=8,vl=4")),
            Err(Refusal::VlTaken { vl: 4, .. })
        ));
        let mut few = Admission::new(PortParams {
            vls: vec![1],
            ..a.params().clone()
        })
        .unwrap();
        few.admit(req("name=a,bw=1G,distance=8")).unwrap();
        assert!(matches!(
            few.admit(req("name=b,bw=1G,distance=4")),
            Err(Refusal::NoFreeVl { .. })
        ));
    }

    #[test]
    fn release_defragments() {
        let mut a = port("100G");
        for n in 0..4 {
            a.admit(req(&format!("name=c{n},bw=6G,distance=8,frame=1024"))).unwrap();
        }
        // Free two distance-8 sets that are not buddies (j = 0 and 2). Left in place, c1 and
        // c3 would keep j = 4 and 6: after a distance-2 set on the odd entries, no E(2, j) is
        // free although 16 entries are.
        let in_place = mask(8, 4) | mask(8, 6) | mask(2, 1);
        assert!((0..4).all(|j| in_place & mask(4, j) != 0));
        a.release("c0").unwrap();
        a.release("c2").unwrap();
        assert_eq!(a.free_entries(), 48);
        assert_eq!((a.start(0), a.start(1)), (0, 4), "re-packed");
        a.admit(req("name=d4,bw=1G,distance=2,frame=1024")).unwrap();
        a.admit(req("name=d16,bw=1G,distance=4,frame=1024")).unwrap();
        assert_eq!(a.free_entries(), 0);
    }

    #[test]
    fn requests_parse_and_name_bad_fields() {
        let r = req("name=a, bw=2G, latency=20us, mtu=1024");
        assert_eq!(
            r,
            Request {
                name: "a".into(),
                bw_bps: 2_000_000_000,
                latency_ns: Some(20_000),
                distance: None,
                frame: Some(1042),
                vl: None
            }
        );
        assert_eq!(Request::parse_spec(&r.spec()).unwrap(), r);
        for (spec, field) in [
            ("name=a,bw=2X,distance=8", "bw:"),
            ("name=a,bw=2G,latency=20", "latency:"),
            ("name=a,bw=2G,distance=x", "distance:"),
            ("name=a,bw=2G,distance=8,vl=8", "vl:"),
            ("name=a,bw=2G,distance=8,mtu=1,frame=2", "frame:"),
            ("name=a,bw=2G,distance=8,speed=1", "speed:"),
            ("bw=2G,distance=8", "name:"),
            ("name=a,distance=8", "bw:"),
            ("name=a,bw=1G", "latency or distance"),
            ("name=a,bw=1G,latency=1us,distance=8", "latency or distance"),
            ("name=a,name=b,bw=1G", "given twice"),
            ("name=a,bw", "key=value"),
            ("name=a,bw=1G,distance=8,mtu=99999999999", "mtu:"),
        ] {
            let e = Request::parse_spec(spec).unwrap_err();
            assert!(e.contains(field), "{spec}: {e}");
        }
    }

    #[test]
    fn the_state_round_trips_and_is_checked() {
        let mut a = port("25G");
        a.admit(req("name=a,bw=100M,distance=8,frame=1024")).unwrap();
        a.admit(req("name=b,bw=100M,distance=8,frame=1024")).unwrap();
        let json = serde_json::to_string(&a.state()).unwrap();
        let back = Admission::from_state(serde_json::from_str(&json).unwrap()).unwrap();
        assert_eq!(back, a);
        let mut bad = a.state();
        bad.sequences[0].entries = 16;
        let e = Admission::from_state(bad).unwrap_err();
        assert!(e.contains("sequences[0]") && e.contains("a:"), "{e}");
        let mut bad = a.state();
        bad.sequences[0].members[1].name = "a".into();
        assert!(Admission::from_state(bad).unwrap_err().contains("twice"));
        // 65 entries: nine sequences of 8 (each member alone, so each is a valid sequence).
        let mut bad = a.state();
        let one = bad.sequences[0].members[0].clone();
        bad.sequences = (0..9)
            .map(|n| Sequence {
                entries: 8,
                vl: 1,
                members: vec![Request {
                    name: format!("m{n}"),
                    ..one.clone()
                }],
            })
            .collect();
        let e = Admission::from_state(bad).unwrap_err();
        assert!(e.contains("more entries than the table has"), "{e}");
    }

    #[test]
    fn the_fragment_is_the_form_the_scheduler_reads() {
        let mut a = port("100G");
        a.admit(req("name=a,bw=100M,distance=32,frame=1024")).unwrap();
        let text = fragment(&a, None).unwrap();
        let t: toml::Table = text.parse().unwrap();
        let d = &t["port_defaults"];
        assert_eq!(d["scheduler"].as_str(), Some("vlarb"));
        let high = d["vlarb"]["high"].as_array().unwrap();
        assert_eq!(high.len(), 64);
        assert_eq!(
            high[0].as_array().unwrap(),
            &[toml::Value::Integer(1), toml::Value::Integer(16)]
        );
        assert_eq!(high[32].as_array().unwrap()[1].as_integer(), Some(16));
        assert_eq!(high[1].as_array().unwrap()[1].as_integer(), Some(0));
        assert_eq!(d["vlarb"]["high_limit"].as_integer(), Some(255));
        assert!(d["vlarb"].get("low").is_none(), "the running low table is left alone");
    }

    /// A config's vlarb keys are read (and set aside for validation, so this works before and
    /// after the scheduler's keys exist): the port's own high_limit over the defaults'.
    #[test]
    fn a_config_gives_speed_frame_and_high_limit() {
        let base = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml")).unwrap();
        let text = base
            .replacen(
                "\n[[port]]\nid = 0\n",
                "\n[port_defaults.vlarb]\nhigh = [[1, 8]]\nlow = [[0, 64]]\nhigh_limit = 6\n\n[[port]]\nid = 0\n",
                1,
            )
            .replacen(
                "\n[[port]]\nid = 2\n",
                "\n[[port]]\nid = 2\nspeed = \"100G\"\nmtu = 9000\nscheduler = \"vlarb\"\nvlarb = { high_limit = 2 }\n",
                1,
            );
        let all = read_config(&text, None).unwrap();
        assert_eq!(
            (all.speed_bps, all.max_frame, all.high_limit),
            (25_000_000_000, 9018, Some(6))
        );
        let two = read_config(&text, Some(2)).unwrap();
        assert_eq!(
            (two.speed_bps, two.max_frame, two.high_limit),
            (100_000_000_000, 9018, Some(2))
        );
        let zero = read_config(&text, Some(0)).unwrap();
        assert_eq!(
            (zero.speed_bps, zero.max_frame, zero.high_limit),
            (25_000_000_000, 1518, Some(6))
        );
        let e = read_config(&text.replace("high_limit = 6", "high_limit = 300"), None).unwrap_err();
        assert!(e.contains("port_defaults.vlarb.high_limit") && e.contains("300"), "{e}");
        assert!(read_config(&text, Some(7)).unwrap_err().contains("no port 7"));
        let e = read_config(&text.replace("speed = \"25G\"", "speed = \"fast\""), None).unwrap_err();
        assert!(e.contains("speed"), "{e}");
    }
}

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

mod config_io;
mod model;
mod refusals;
mod requests;
#[cfg(test)]
mod tests;

pub use config_io::{fragment, read_config, ConfigPort};
pub use model::{Admission, Connection, Entry, Plan, Sequence, State, STATE_VERSION};
pub use refusals::{show_bps, show_ns, Refusal};
pub use requests::{parse_requests, PortParams, Request, REQUEST_KEYS};

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

//! What an Ethernet frame costs on the wire beyond the bytes the switch stores, in one place:
//! the headroom formula, VL arbitration admission, the dataplane's link pacing and the NIC
//! model all count line time from these, and PFC's pause times their quantum.
//!
//! A frame as the switch stores it (and as a pcap holds it) has no FCS. On the wire it is
//! preceded by preamble and start-of-frame delimiter, followed by its FCS, and separated from
//! the next by the minimum inter-frame gap:
//!
//! ```text
//! | preamble+SFD 8 | frame as stored (≥ 60) | FCS 4 | IFG 12 |
//!  \____________ PREAMBLE_SFD_IFG_BYTES: 20, occupies no buffer ___/ (8 + 12)
//!  \__________________ WIRE_OVERHEAD_BYTES: 24 on top of the stored length ______/ (8 + 4 + 12)
//! ```

/// Preamble (7) and start-of-frame delimiter (1).
pub const PREAMBLE_SFD_BYTES: u64 = 8;
/// The minimum inter-frame gap, 96 bit times.
pub const IFG_BYTES: u64 = 12;
/// The frame check sequence, which the wire carries and the switch does not store.
pub const FCS_BYTES: u64 = 4;

/// Line time around a frame that no buffer holds: preamble, SFD and inter-frame gap (20).
/// Add it to a frame counted with its FCS (the headroom formula's frames).
pub const PREAMBLE_SFD_IFG_BYTES: u64 = PREAMBLE_SFD_BYTES + IFG_BYTES;
/// Line time a frame costs beyond its stored length (no FCS): preamble, SFD, FCS and
/// inter-frame gap (24). Add it to a frame as stored or captured (pacing, admission, the NIC).
pub const WIRE_OVERHEAD_BYTES: u64 = PREAMBLE_SFD_IFG_BYTES + FCS_BYTES;

/// A minimum Ethernet frame with its FCS, which is also the size of a PFC frame (64).
pub const MIN_FRAME_BYTES: u64 = 64;
/// The smallest frame as stored: a minimum Ethernet frame without its FCS (60).
pub const MIN_STORED_FRAME_BYTES: u64 = MIN_FRAME_BYTES - FCS_BYTES;
/// Ethernet header (14) and an 802.1Q tag (4): frame = IP MTU + this (as `[[port]] mtu`).
pub const L2_OVERHEAD_BYTES: u32 = 18;
/// Bit times in one pause quantum (802.1Qbb and 802.3x): what a PFC frame's times count in.
pub const BITS_PER_QUANTUM: u64 = 512;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sums_are_their_parts() {
        assert_eq!((PREAMBLE_SFD_BYTES, IFG_BYTES, FCS_BYTES), (8, 12, 4));
        assert_eq!(PREAMBLE_SFD_IFG_BYTES, 20);
        assert_eq!(WIRE_OVERHEAD_BYTES, 24);
        // The two ways a minimum frame is counted cost the same line time: with its FCS plus
        // the gap, or as stored plus the whole overhead.
        assert_eq!(
            MIN_FRAME_BYTES + PREAMBLE_SFD_IFG_BYTES,
            MIN_STORED_FRAME_BYTES + WIRE_OVERHEAD_BYTES
        );
        assert_eq!(MIN_STORED_FRAME_BYTES, 60);
        assert_eq!(L2_OVERHEAD_BYTES, 18);
    }
}

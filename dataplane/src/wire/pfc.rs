//! MAC control frames on the wire: 802.1Qbb priority flow control (PFC) and 802.3x PAUSE.
//!
//! Why: PFC is what makes the fabric lossless. The switch emits PFC XOFF/XON for its ingress
//! priority groups and obeys the PFC (and PAUSE) its peers send. This module is only the wire
//! format; timing and state live in `crate::pfc`.
//!
//! ```text
//! dst 01:80:c2:00:00:01 | src | 0x8808 | opcode (2) | ...
//!   PFC   opcode 0x0101: class-enable vector (2, upper byte 0), time[0..8] (8 × 2)
//!   PAUSE opcode 0x0001: time (2)
//! padded with zeros to the 60-byte minimum (no FCS here)
//! ```
//!
//! Times are in quanta of 512 bit times at the port's speed; 0 means resume (XON).
//! A receiver ignores the time of a class whose enable bit is clear; [`decode_mac_control`]
//! returns the times as they are on the wire.

use super::parse::{Malformed, ETHERTYPE_MAC_CONTROL, ETH_HEADER_LEN};
use etherparse::{EtherType, Ethernet2Header, Ethernet2HeaderSlice};

/// Destination of PFC and PAUSE frames (the reserved MAC control group address).
pub const MAC_CONTROL_DST: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x01];
/// MAC control opcode of 802.3x PAUSE.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// MAC control opcode of 802.1Qbb PFC.
pub const OPCODE_PFC: u16 = 0x0101;
/// Length of an encoded MAC control frame without FCS (the Ethernet minimum).
pub const MAC_CONTROL_FRAME_LEN: usize = 60;
/// Bit times per pause quantum: the one definition, with the rest of the link's timing.
pub use controlplane::wire_timing::BITS_PER_QUANTUM;

/// A decoded MAC control frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MacControl {
    /// Priority flow control: bit `i` of `enable` says `times[i]` applies to priority `i`.
    Pfc {
        /// Class-enable vector: bit `i` set when `times[i]` applies.
        enable: u8,
        /// Pause time per priority, in quanta (0: XON).
        times: [u16; 8],
    },
    /// 802.3x PAUSE: the whole link.
    Pause {
        /// Pause time, in quanta (0: resume).
        time: u16,
    },
    /// Another MAC control opcode (e.g. 802.3 EPON GATE/REPORT): not acted on.
    Other {
        /// The MAC control opcode.
        opcode: u16,
    },
}

fn encode_header(buf: &mut [u8], src_mac: [u8; 6], opcode: u16) {
    assert!(
        buf.len() >= MAC_CONTROL_FRAME_LEN,
        "a MAC control frame needs a {MAC_CONTROL_FRAME_LEN}-byte buffer"
    );
    let eth = Ethernet2Header {
        source: src_mac,
        destination: MAC_CONTROL_DST,
        ether_type: EtherType(ETHERTYPE_MAC_CONTROL),
    };
    buf[..ETH_HEADER_LEN].copy_from_slice(&eth.to_bytes());
    buf[ETH_HEADER_LEN..ETH_HEADER_LEN + 2].copy_from_slice(&opcode.to_be_bytes());
    buf[ETH_HEADER_LEN + 2..MAC_CONTROL_FRAME_LEN].fill(0);
}

/// Writes a 60-byte PFC frame (padded, no FCS) into `buf` and returns 60.
///
/// Panics if `buf` is shorter than 60 bytes (a caller bug, not input).
pub fn encode_pfc(buf: &mut [u8], src_mac: [u8; 6], enable_vector: u8, times: [u16; 8]) -> usize {
    encode_header(buf, src_mac, OPCODE_PFC);
    let p = ETH_HEADER_LEN + 2;
    buf[p..p + 2].copy_from_slice(&u16::from(enable_vector).to_be_bytes());
    for (i, t) in times.iter().enumerate() {
        buf[p + 2 + 2 * i..p + 4 + 2 * i].copy_from_slice(&t.to_be_bytes());
    }
    MAC_CONTROL_FRAME_LEN
}

/// Writes a 60-byte 802.3x PAUSE frame (padded, no FCS) into `buf` and returns 60.
///
/// Panics if `buf` is shorter than 60 bytes (a caller bug, not input).
pub fn encode_pause(buf: &mut [u8], src_mac: [u8; 6], time: u16) -> usize {
    encode_header(buf, src_mac, OPCODE_PAUSE);
    let p = ETH_HEADER_LEN + 2;
    buf[p..p + 2].copy_from_slice(&time.to_be_bytes());
    MAC_CONTROL_FRAME_LEN
}

/// Decodes an untagged MAC control frame (without FCS). The destination address is not
/// checked (PAUSE may also be sent to the port's own address).
///
/// Errors: `runt` (< 14 bytes), `not_mac_control` (EtherType not 0x8808),
/// `truncated_mac_control` (no opcode), `bad_pfc` (shorter than 34 bytes, or the upper byte of
/// the class-enable vector not zero), `bad_pause` (shorter than 18 bytes).
pub fn decode_mac_control(frame: &[u8]) -> Result<MacControl, Malformed> {
    let eth = Ethernet2HeaderSlice::from_slice(frame).map_err(|_| Malformed::Runt)?;
    if eth.ether_type().0 != ETHERTYPE_MAC_CONTROL {
        return Err(Malformed::NotMacControl);
    }
    let body = &frame[ETH_HEADER_LEN..];
    let be16 = |i: usize| u16::from_be_bytes([body[i], body[i + 1]]);
    if body.len() < 2 {
        return Err(Malformed::TruncatedMacControl);
    }
    match be16(0) {
        OPCODE_PFC => {
            if body.len() < 2 + 2 + 16 || body[2] != 0 {
                return Err(Malformed::BadPfc);
            }
            let mut times = [0u16; 8];
            for (i, t) in times.iter_mut().enumerate() {
                *t = be16(4 + 2 * i);
            }
            Ok(MacControl::Pfc { enable: body[3], times })
        }
        OPCODE_PAUSE => {
            if body.len() < 4 {
                return Err(Malformed::BadPause);
            }
            Ok(MacControl::Pause { time: be16(2) })
        }
        opcode => Ok(MacControl::Other { opcode }),
    }
}

/// Duration of `quanta` pause quanta (512 bit times each) at `speed_bps`, in nanoseconds,
/// rounded down. 0 when `speed_bps` is 0 (a misconfigured, speedless port pauses nothing).
pub fn quanta_to_ns(quanta: u16, speed_bps: u64) -> u64 {
    if speed_bps == 0 {
        return 0;
    }
    // At most 65535 × 512 × 1e9 ≈ 3.4e16: no overflow in u64.
    u64::from(quanta) * BITS_PER_QUANTUM * 1_000_000_000 / speed_bps
}

/// The number of quanta covering `ns` nanoseconds at `speed_bps`, rounded up and saturating
/// at 0xFFFF (the largest pause a PFC frame can ask for): a pause of the result lasts at least
/// `ns`. The inverse of [`quanta_to_ns`] at any speed below 512 Gb/s (where a quantum lasts at
/// least 1 ns): `ns_to_quanta(quanta_to_ns(q, s), s) == q`.
pub fn ns_to_quanta(ns: u64, speed_bps: u64) -> u16 {
    let bits = u128::from(ns) * u128::from(speed_bps);
    let q = bits.div_ceil(u128::from(BITS_PER_QUANTUM) * 1_000_000_000);
    q.min(0xffff) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_at_common_speeds() {
        // 512 bits at 100 Gb/s = 5.12 ns; 65535 quanta ≈ 335.5 µs.
        assert_eq!(quanta_to_ns(1, 100_000_000_000), 5);
        assert_eq!(quanta_to_ns(65535, 100_000_000_000), 335_539);
        assert_eq!(quanta_to_ns(1, 10_000_000_000), 51);
        assert_eq!(quanta_to_ns(100, 25_000_000_000), 2048);
        assert_eq!(quanta_to_ns(0, 25_000_000_000), 0);
        assert_eq!(quanta_to_ns(5, 0), 0);
        assert_eq!(ns_to_quanta(2048, 25_000_000_000), 100);
        assert_eq!(ns_to_quanta(2049, 25_000_000_000), 101);
        assert_eq!(ns_to_quanta(u64::MAX, 400_000_000_000), 0xffff);
        assert_eq!(ns_to_quanta(0, 400_000_000_000), 0);
        for speed in [
            1_000_000_000u64,
            10_000_000_000,
            25_000_000_000,
            40_000_000_000,
            100_000_000_000,
            400_000_000_000,
        ] {
            for q in [0u16, 1, 2, 3, 67, 394, 905, 0x7fff, 0xffff] {
                assert_eq!(ns_to_quanta(quanta_to_ns(q, speed), speed), q, "q {q} speed {speed}");
            }
        }
    }
}

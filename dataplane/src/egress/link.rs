//! A port's line rate: how long a frame occupies the wire. The egress side paces transmission
//! with it; replay's peers pace their captures with it too.

/// Ethernet preamble + start delimiter (8), FCS (4) and minimum inter-frame gap (12): what a
/// frame costs on the wire beyond the bytes a pcap holds.
pub use controlplane::wire_timing::WIRE_OVERHEAD_BYTES;

/// A port's line rate as picoseconds per byte in 16.16 fixed point: serialisation time is then
/// a multiply and a shift on the packet path instead of a 128-bit division.
#[derive(Debug, Clone, Copy)]
pub struct LinkRate {
    ps_per_byte_q16: u64,
}

impl LinkRate {
    /// The rate of a port of `speed_bps` bits per second (0 is taken as 1).
    pub fn new(speed_bps: u64) -> Self {
        let q = ((8u128 * 1_000_000_000_000) << 16) / speed_bps.max(1) as u128;
        LinkRate {
            ps_per_byte_q16: q.min(u64::MAX as u128 >> 16) as u64,
        }
    }

    /// Picoseconds a frame of `len` bytes (without FCS) occupies the wire, overhead included.
    #[inline]
    pub fn ser_ps(self, len: usize) -> u64 {
        ((len as u64 + WIRE_OVERHEAD_BYTES) * self.ps_per_byte_q16) >> 16
    }
}

/// Serialisation time in picoseconds of a `len`-byte frame at `speed_bps` (see `LinkRate`).
pub fn ser_ps(len: usize, speed_bps: u64) -> u64 {
    LinkRate::new(speed_bps).ser_ps(len)
}

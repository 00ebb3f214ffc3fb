//! A PFC frame the ingress side asks its port to send: the message from the side that decides
//! flow control (the ingress PG) to the side that owns the link (the egress port).

use controlplane::NUM_TC;

/// Priorities (class-enable vector) and their pause times; all-zero times is an XON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PfcRequest {
    /// Class-enable vector: bit p set for each priority p the frame speaks for.
    pub prios: u8,
    /// Pause time per priority, in quanta (0 for XON or priorities not enabled).
    pub times: [u16; NUM_TC],
}

impl PfcRequest {
    /// XOFF for `prios`, each paused for `quanta`.
    pub fn xoff(prios: u8, quanta: u16) -> Self {
        PfcRequest {
            prios,
            times: std::array::from_fn(|i| if prios & (1 << i) != 0 { quanta } else { 0 }),
        }
    }

    /// XON for `prios`: their pauses end now.
    pub fn xon(prios: u8) -> Self {
        PfcRequest {
            prios,
            times: [0; NUM_TC],
        }
    }
}

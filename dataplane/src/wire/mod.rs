//! Wire views over frame bytes: parse without copying, rewrite in place.
//!
//! Why this shape: the pipeline touches every frame at tens of Mpps, so it parses once into a
//! small `Copy` [`FrameInfo`] of offsets and decision fields (smoltcp's view pattern, with
//! etherparse's sliced headers doing the slicing), and later stages rewrite the original bytes
//! in place. Nothing here allocates, locks or panics on input, except the test/bench frame
//! builder in [`build`].
//!
//! * [`parse`](mod@parse): Ethernet, 802.1Q, IPv4/IPv6, UDP, RoCEv2 BTH → [`FrameInfo`] or a
//!   named [`Malformed`] reason.
//! * [`roce`]: the RoCEv2 BTH, its opcodes and constants.
//! * [`icrc`]: the ICRC exactly as Linux rxe computes it (needs the parse result, so apart
//!   from the BTH, which the parser itself uses).
//! * [`ecn`]: CE marking and DSCP rewrite with the RFC 1624 IPv4 checksum update.
//! * [`pfc`]: 802.1Qbb PFC and 802.3x PAUSE encode/decode, pause quanta.
//! * [`build`]: complete, valid RoCEv2 frames (and CNPs) for tests, benches and generators.

pub mod build;
pub mod ecn;
pub mod icrc;
#[doc(hidden)]
pub mod invariants;
pub mod parse;
pub mod pfc;
pub mod roce;

pub use build::{build_cnp, BuildError, IpPair, RoceFrameBuilder};
pub use ecn::{mark_ce, set_dscp, MarkOutcome};
pub use icrc::{compute_icrc, verify_icrc, write_icrc};
pub use parse::{parse, parse_into, Ecn, FrameInfo, L3Kind, Malformed, UdpPorts, VlanTag};
pub use pfc::{decode_mac_control, encode_pause, encode_pfc, MacControl};
pub use roce::Bth;

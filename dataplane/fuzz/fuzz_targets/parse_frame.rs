//! Arbitrary bytes as an L2 frame: parse must never panic or read out of bounds, and every
//! invariant of a successful parse (offsets inside the frame, padding-independence, CE
//! marking and DSCP rewrite changing only the TOS and keeping the IPv4 checksum and the ICRC
//! verdicts) must hold. See `dataplane::wire::invariants`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = dataplane::wire::invariants::check(data);
});

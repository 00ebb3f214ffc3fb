#![no_main]
use controlplane::protocol::Request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    match Request::parse(&line) {
        Ok(r) => assert_eq!(Request::parse(&r.to_line()).as_ref(), Ok(&r)),
        Err(bad) => assert!(!bad.error.is_empty()),
    }
});

//! An EAL that will not start, in a process of its own (the EAL starts once per process).

use dpdk::{Eal, EalArgs, ErrorKind, EthPort, Mempool};

#[test]
fn eal_that_will_not_start_says_why() {
    // Nothing works before the EAL, and the errors say so.
    let e = Mempool::new("p", 63, 0, 2048).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EalState);
    assert!(e.to_string().contains("call Eal::init first"), "{e}");
    let e = EthPort::by_name("net_ring0").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EalState);
    assert!(e.to_string().contains("port net_ring0"), "{e}");
    assert!(Eal::get().is_none());

    // PCI ports without hugepages are refused before DPDK runs (so this is not final).
    let e = Eal::init(&["rocesw".into(), "--no-huge".into(), "-a".into(), "0000:3b:00.0".into()]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Hugepages);
    assert!(e.to_string().contains("[run.dpdk] hugepages"), "{e}");

    // An argument DPDK does not know: refused, with the arguments and a hint.
    let mut bad = EalArgs::default_for_vdevs(&["net_null0"]).unwrap();
    bad.push("--no-such-eal-option");
    let bad = bad.into_vec();
    let e = Eal::init(&bad).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Eal);
    assert_eq!(e.errno(), Some(libc::EINVAL));
    let m = e.to_string();
    assert!(m.contains("--no-such-eal-option"), "{m}");
    assert!(m.contains("an EAL argument is invalid"), "{m}");
    assert!(Eal::get().is_none());

    // DPDK cannot start its EAL after a failed start: the first error is final, and quoted.
    let good = EalArgs::default_for_vdevs(&["net_null0"]).unwrap().into_vec();
    let e = Eal::init(&good).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EalState);
    let m = e.to_string();
    assert!(
        m.contains("restart the program") && m.contains("--no-such-eal-option"),
        "{m}"
    );
    assert!(Eal::get().is_none());
}

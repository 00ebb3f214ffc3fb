//! The headroom calculator against the UCloud design's figures and its own working.

use controlplane::headroom::{headroom, headroom_with, peer_response_quanta, response_quanta, HeadroomParams};

const G: u64 = 1_000_000_000;

/// UCloud: 25G over 15 m needs about 98 cells of 256 B. We give 100 (+2, see headroom.rs).
#[test]
fn ucloud_25g_15m() {
    let h = headroom(25 * G, 15.0, 1500, 256);
    assert_eq!(h.cells, 100, "{h}");
    assert!(h.cells.abs_diff(98) <= 2, "{h}");
    assert_eq!(h.bytes, h.cells * 256);
    assert_eq!(h.pause_quanta, 80);
}

/// UCloud: 100G over 100 m needs about 408 cells of 256 B. We give 413 (+5, +1.2 %).
#[test]
fn ucloud_100g_100m() {
    let h = headroom(100 * G, 100.0, 1500, 256);
    assert_eq!(h.cells, 413, "{h}");
    assert!(h.cells.abs_diff(408) <= 5, "{h}");
    assert_eq!(h.pause_quanta, 394);
}

/// The implied calibration: 49 % small frames lands within one cell of both figures.
#[test]
fn calibrated_share_hits_both_figures() {
    let p = HeadroomParams {
        small_frame_percent: 49.0,
        ..HeadroomParams::default()
    };
    let a = headroom_with(&p, 25 * G, 15.0, 1500, 256);
    let b = headroom_with(&p, 100 * G, 100.0, 1500, 256);
    assert!((a.raw_bytes / 256.0 - 98.0).abs() < 0.1 && a.cells == 99, "{a}");
    assert!((b.raw_bytes / 256.0 - 408.0).abs() < 0.1 && b.cells == 409, "{b}");
}

#[test]
fn working_adds_up() {
    let h = headroom(25 * G, 15.0, 1500, 256);
    let t = h.terms;
    assert_eq!(t.xoff_frame, 1518.0);
    assert_eq!(t.local_frame, 1538.0);
    assert_eq!(t.pfc_frame, 84.0);
    assert_eq!(t.peer_response, 80.0 * 64.0);
    assert!(
        (t.cable - 468.75).abs() < 1e-9,
        "30 m at 5 ns/m is 150 ns = 468.75 B at 25G"
    );
    let sum = t.local_frame + t.pfc_frame + t.mac_phy + t.cable + t.peer_response + t.peer_frame;
    assert!((h.in_flight_bytes - sum).abs() < 1e-9);
    assert_eq!(h.occupancy, 2.5);
    assert!((h.raw_bytes - (t.xoff_frame + 2.5 * sum)).abs() < 1e-6);
    assert!(h.cells as f64 * 256.0 >= h.raw_bytes && (h.cells - 1) as f64 * 256.0 < h.raw_bytes);
    let shown = h.to_string();
    assert!(shown.contains("80 quanta") && shown.contains("100 cells"), "{shown}");
}

#[test]
fn quanta_table_and_in_between_speeds() {
    assert_eq!(response_quanta(10 * G), 67);
    assert_eq!(response_quanta(25 * G), 80);
    assert_eq!(response_quanta(40 * G), 118);
    assert_eq!(response_quanta(50 * G), 147);
    assert_eq!(response_quanta(100 * G), 394);
    assert_eq!(response_quanta(200 * G), 453);
    assert_eq!(response_quanta(400 * G), 905);
    // Next higher listed speed in between, proportional beyond the table.
    assert_eq!(response_quanta(20 * G), 80);
    assert_eq!(response_quanta(60 * G), 394);
    assert_eq!(response_quanta(800 * G), 1810);
    assert_eq!(response_quanta(1), 1);
    assert_eq!(peer_response_quanta(25 * G), 80);
    assert_eq!(peer_response_quanta(u64::MAX), u16::MAX);
}

#[test]
fn monotone_in_speed_cable_and_mtu() {
    let base = headroom(25 * G, 15.0, 1500, 256).bytes;
    assert!(headroom(100 * G, 15.0, 1500, 256).bytes > base);
    assert!(headroom(25 * G, 100.0, 1500, 256).bytes > base);
    assert!(headroom(25 * G, 15.0, 9000, 256).bytes > base);
    assert!(headroom(25 * G, 0.0, 1500, 256).bytes < base);
}

#[test]
fn small_cells_use_the_cell_plus_one_worst_case() {
    let h = headroom(25 * G, 15.0, 1500, 128);
    // 2·128/129 ≈ 1.98 worst case, half of the bytes: occupancy ≈ 1.496.
    assert!((h.occupancy - (1.0 + 2.0 * 128.0 / 129.0) / 2.0).abs() < 1e-12);
    assert_eq!(h.bytes, h.cells * 128);
}

#[test]
fn nonsense_inputs_do_not_panic() {
    for (s, c, m, cell) in [
        (0, 0.0, 0, 0),
        (u64::MAX, f64::INFINITY, u32::MAX, u32::MAX),
        (1, f64::NAN, 68, 1),
        (u64::MAX, -5.0, 9216, 64),
    ] {
        let _ = headroom(s, c, m, cell).to_string();
    }
}

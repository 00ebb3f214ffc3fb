//! The EDF comparison's qualitative result (issue 11, bench/README.md "EDF"), asserted on the
//! real switch in virtual time with the repository's generator: with the take-over list, EDF
//! makes far fewer order errors than with one FIFO, and the most demanding class's latency
//! comes close to the exact (heap) EDF's, while no flow is ever reordered.

use rocesw_bench::edf::{input, run, Outcome, Params};

fn compare(budgets_us: &[u64], ms: u64) -> [Outcome; 3] {
    let p = Params {
        duration_ns: ms * 1_000_000,
        budgets_ns: budgets_us.iter().map(|b| b * 1000).collect(),
        ..Params::default()
    };
    let frames = input(&p).unwrap();
    ["ideal", "fifo2", "take-over"].map(|m| run(m, &p, &frames).unwrap())
}

fn common(outcomes: &[Outcome; 3]) {
    for o in outcomes {
        assert_eq!(o.reordered, 0, "{}: a flow was reordered", o.mode);
        assert!(
            o.classes.iter().all(|c| c.frames > 1000),
            "{}: too little traffic to judge",
            o.mode
        );
        assert!(o.best_effort_sent > 1000, "{}: best effort starved", o.mode);
    }
    let [ideal, fifo2, _] = outcomes;
    assert_eq!(
        (ideal.order_errors, ideal.order_errors_full),
        (0, 0),
        "the heap is exact EDF"
    );
    assert!(
        fifo2.order_errors > 300,
        "one FIFO makes order errors: {}",
        fifo2.order_errors
    );
}

/// Three latency-bound classes (20 µs, 200 µs, 2 ms): the take-over list removes most order
/// errors, and brings the 20 µs class's mean latency most of the way from fifo2's to ideal's.
#[test]
fn take_over_has_far_fewer_order_errors_and_near_ideal_latency() {
    let outcomes = compare(&[20, 200, 2000], 5);
    common(&outcomes);
    let [ideal, fifo2, take_over] = &outcomes;
    assert!(
        take_over.order_errors * 3 < fifo2.order_errors && take_over.order_errors_full * 3 < fifo2.order_errors_full,
        "order errors: take-over {} ({} full), fifo2 {} ({} full)",
        take_over.order_errors,
        take_over.order_errors_full,
        fifo2.order_errors,
        fifo2.order_errors_full
    );
    let (i, f, t) = (
        ideal.classes[0].mean_ns,
        fifo2.classes[0].mean_ns,
        take_over.classes[0].mean_ns,
    );
    assert!(
        f > 2 * i,
        "fifo2 should hurt the most demanding class: {f} ns vs ideal {i} ns"
    );
    assert!(
        t - i < (f - i) / 3,
        "take-over's 20 µs class: {t} ns, ideal {i} ns, fifo2 {f} ns"
    );
    assert!(take_over.deadline_misses * 5 < fifo2.deadline_misses);
}

/// Two latency-bound classes far apart (20 µs and 2 ms): an urgent frame always goes to the
/// take-over list when a lax one is last in the ordered list, and the take-over list stays
/// sorted, so take-over is exactly EDF here.
#[test]
fn with_two_classes_take_over_is_exact() {
    let outcomes = compare(&[20, 2000], 3);
    common(&outcomes);
    let [ideal, _, take_over] = &outcomes;
    assert_eq!((take_over.order_errors, take_over.order_errors_full), (0, 0));
    assert_eq!(take_over.classes[0].mean_ns, ideal.classes[0].mean_ns);
}

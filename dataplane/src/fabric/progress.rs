//! A progress bar on stderr for long fabric runs, in virtual time; when stderr is not a
//! terminal (a log file, CI), a plain line at every tenth of the run instead, so a long run
//! is not silent.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

static BAR: OnceLock<ProgressBar> = OnceLock::new();
/// Not a terminal: when the run started, and the last tenth a line was printed for.
static PLAIN: OnceLock<Option<Instant>> = OnceLock::new();
static TENTHS: AtomicU64 = AtomicU64::new(0);

/// `done` of `total` virtual nanoseconds run.
pub fn report(done: u64, total: u64) {
    if let Some(started) = PLAIN.get_or_init(|| (!std::io::stderr().is_terminal()).then(Instant::now)) {
        let tenths = (u128::from(done) * 10 / u128::from(total.max(1))).min(10) as u64;
        if tenths > TENTHS.fetch_max(tenths, Ordering::Relaxed) {
            eprintln!(
                "fabric: {}% of {} virtual time run ({:.1} s)",
                tenths * 10,
                controlplane::units::format_duration(total),
                started.elapsed().as_secs_f64()
            );
        }
        return;
    }
    let bar = BAR.get_or_init(|| {
        let b = ProgressBar::new(total / 1000);
        b.set_style(
            ProgressStyle::with_template("fabric {bar:40} {pos}/{len} µs virtual time ({eta})")
                .expect("static template"),
        );
        b
    });
    bar.set_position((done / 1000).min(total / 1000));
}

/// Clears the progress bar when the run ends (nothing if it never showed).
pub fn finish() {
    if let Some(b) = BAR.get() {
        b.finish_and_clear();
    }
}

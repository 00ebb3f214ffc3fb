//! A progress bar on stderr for long fabric runs, in virtual time (hidden when stderr is not a
//! terminal).

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::OnceLock;

static BAR: OnceLock<ProgressBar> = OnceLock::new();

/// `done` of `total` virtual nanoseconds run.
pub fn report(done: u64, total: u64) {
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

pub fn finish() {
    if let Some(b) = BAR.get() {
        b.finish_and_clear();
    }
}

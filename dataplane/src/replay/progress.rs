//! A progress bar on stderr for long replays (hidden when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::OnceLock;

static BAR: OnceLock<ProgressBar> = OnceLock::new();

/// Shows `done` of `total` input bytes consumed.
pub fn report(done: u64, total: u64) {
    let bar = BAR.get_or_init(|| {
        let b = ProgressBar::new(total);
        b.set_style(
            ProgressStyle::with_template("replay {bar:40} {bytes}/{total_bytes} input ({eta})")
                .expect("static template"),
        );
        b
    });
    bar.set_position(done.min(total));
}

/// Clears the progress bar when the replay ends (nothing if it never showed).
pub fn finish() {
    if let Some(b) = BAR.get() {
        b.finish_and_clear();
    }
}

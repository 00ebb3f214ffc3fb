//! The simulated switch's own log during a procedure. A procedure provokes what the switch
//! warns of on purpose (PfcWdTest's storm: `PFC storm detected`), and those lines, stamped
//! with the wall clock by the process's log, would land in the middle of the report. While a
//! procedure runs they go to a subscriber of this thread instead, which keeps each distinct
//! line once with how often it came; the report shows them under the test (`--explain`,
//! `--verbose`, JSON), where they say what the switch saw without interrupting the report.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// The most distinct lines kept per procedure: a misbehaving switch cannot fill the report.
const MAX_LINES: usize = 32;

/// Distinct lines in arrival order, each with its count.
#[derive(Default)]
struct Lines(Vec<(String, u64)>);

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Lines>>);

/// Writes an event's message first, then its other fields as `name=value`.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        let mut text = Text::default();
        event.record(&mut text);
        let line = format!("{} {}: {}{}", meta.level(), meta.target(), text.message, text.fields);
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(seen) = lines.0.iter_mut().find(|(l, _)| *l == line) {
            seen.1 += 1;
        } else if lines.0.len() < MAX_LINES {
            lines.0.push((line, 1));
        }
    }
}

/// Runs `f` with this thread's warnings and errors kept from the process's log; returns what
/// `f` returned and those lines (`WARN dataplane::egress: PFC storm detected port=8 queue=3
/// (×2)`).
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(
        capture
            .clone()
            .with_filter(tracing_subscriber::filter::LevelFilter::from_level(Level::WARN)),
    );
    let out = tracing::subscriber::with_default(subscriber, f);
    let lines = std::mem::take(&mut capture.0.lock().unwrap_or_else(|e| e.into_inner()).0);
    let lines = lines
        .into_iter()
        .map(|(l, n)| if n > 1 { format!("{l} (×{n})") } else { l })
        .collect();
    (out, lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_kept_once_with_their_count_and_info_is_not() {
        let (v, lines) = capture(|| {
            for _ in 0..3 {
                tracing::warn!(port = 8u16, queue = 3usize, "PFC storm detected");
            }
            tracing::info!("not kept");
            tracing::error!("lost");
            7
        });
        assert_eq!(v, 7);
        assert_eq!(
            lines,
            vec![
                "WARN dataplane::conform::simlog::tests: PFC storm detected port=8 queue=3 (×3)".to_string(),
                "ERROR dataplane::conform::simlog::tests: lost".to_string()
            ]
        );
    }
}

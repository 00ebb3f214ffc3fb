//! The process's log: the one tracing subscriber every `rocesw` command installs ([`init`]),
//! whose filter a running switch changes on request (`rocectl log`, the control protocol's
//! `log` op: [`filter`], [`set_level`]), and whose time stamp is virtual time on a thread that
//! runs in virtual time ([`VirtualClock`]: `rocesw fabric`, `replay`, `tune`), wall-clock time
//! elsewhere.

use std::cell::Cell;
use std::sync::{Mutex, OnceLock};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::prelude::*;
use tracing_subscriber::{reload, EnvFilter, Registry};

type Handle = reload::Handle<EnvFilter, Registry>;

/// The installed filter's handle, and the filter's text (kept, not re-read: `EnvFilter`'s own
/// text is its directives in its order, not the user's).
static FILTER: OnceLock<(Handle, Mutex<String>)> = OnceLock::new();

/// Installs the subscriber: lines on standard error (colour only for a terminal), filtered by
/// `RUST_LOG` if set and valid, else by `default` (`--log`), time-stamped by [`Timer`].
/// A second call (or another subscriber already installed) changes nothing.
pub fn init(default: &str) {
    let text = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| EnvFilter::try_new(v).is_ok())
        .unwrap_or_else(|| default.to_string());
    let (layer, handle) = reload::Layer::new(EnvFilter::new(&text));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_timer(Timer);
    if tracing_subscriber::registry().with(layer).with(fmt).try_init().is_ok() {
        let _ = FILTER.set((handle, Mutex::new(text)));
    }
}

/// The filter in force, as directives (`warn,dataplane::runtime=debug`); `None` when this
/// process did not install its log with [`init`] (a library user's switch).
pub fn filter() -> Option<String> {
    FILTER
        .get()
        .map(|(_, text)| text.lock().unwrap_or_else(|e| e.into_inner()).clone())
}

/// Sets the log level (`controlplane::protocol::check_log` checks it first), as
/// `ovs-appctl vlog/set`: without `target` the whole filter becomes `level`; with it, that
/// target's directive is replaced (or added) and the others stay ([`next_filter`]). The filter
/// now in force.
pub fn set_level(level: &str, target: Option<&str>) -> Result<String, String> {
    let Some((handle, text)) = FILTER.get() else {
        controlplane::protocol::check_log(level, target)?;
        return Err("this switch's log filter cannot change (its process did not start it through rocesw)".into());
    };
    let mut text = text.lock().unwrap_or_else(|e| e.into_inner());
    let next = next_filter(&text, level, target)?;
    let filter = EnvFilter::try_new(&next).map_err(|e| format!("log filter {next:?}: {e}"))?;
    handle
        .reload(filter)
        .map_err(|e| format!("the log filter could not change: {e}"))?;
    *text = next;
    Ok(text.clone())
}

/// The filter `current` becomes when `target` (all of them if `None`) is set to `level`: one
/// directive per target, a target's new level replacing its old directive where it stood,
/// the others kept in their order; refused, with `current` left as it is, if the result would
/// be longer than [`controlplane::protocol::MAX_LOG_FILTER`] bytes.
pub fn next_filter(current: &str, level: &str, target: Option<&str>) -> Result<String, String> {
    let level = controlplane::protocol::check_log(level, target)?;
    let next = match target {
        None => level,
        Some(t) => {
            let new = format!("{t}={level}");
            let mut out: Vec<&str> = Vec::new();
            let mut placed = false;
            for d in current.split(',').map(str::trim).filter(|d| !d.is_empty()) {
                if directive_target(d) != Some(t) {
                    out.push(d);
                } else if !placed {
                    out.push(&new);
                    placed = true;
                }
            }
            if !placed {
                out.push(&new);
            }
            out.join(",")
        }
    };
    let max = controlplane::protocol::MAX_LOG_FILTER;
    if next.len() > max {
        return Err(format!(
            "the log filter would be {} bytes, more than the {max} a switch keeps; the filter stays \
             {current:?} (set a level for all targets, `rocectl log LEVEL`, to start it again)",
            next.len()
        ));
    }
    Ok(next)
}

/// The target a directive names (`dataplane::runtime[span]=debug` → `dataplane::runtime`);
/// `None` for a bare level (`warn`), which names none.
fn directive_target(d: &str) -> Option<&str> {
    let head = d.split('=').next().unwrap_or(d);
    let head = head.split('[').next().unwrap_or(head).trim();
    let bare_level =
        !d.contains('=') && controlplane::protocol::LOG_LEVELS.contains(&head.to_ascii_lowercase().as_str());
    (!head.is_empty() && !bare_level).then_some(head)
}

thread_local! {
    static VIRTUAL_NS: Cell<Option<u64>> = const { Cell::new(None) };
}

/// While alive, log lines from this thread carry virtual time (`vt 1.234567890s`) instead of
/// the wall clock: the loop of a run in virtual time holds one and [`VirtualClock::set`]s each
/// event's time, so a line says when in the run it happened. Per thread, so `rocesw tune`'s
/// runs on several threads each stamp their own.
pub struct VirtualClock(());

impl VirtualClock {
    /// Starts stamping this thread's lines with virtual time, from 0.
    pub fn start() -> Self {
        VIRTUAL_NS.with(|c| c.set(Some(0)));
        VirtualClock(())
    }

    /// The virtual time now, in ns.
    #[inline]
    pub fn set(&self, now_ns: u64) {
        VIRTUAL_NS.with(|c| c.set(Some(now_ns)));
    }
}

impl Drop for VirtualClock {
    fn drop(&mut self) {
        VIRTUAL_NS.with(|c| c.set(None));
    }
}

/// The log's time stamp: `vt 0.001234567s` (seconds of virtual time, to the ns) on a thread
/// holding a [`VirtualClock`], the wall clock (RFC 3339, UTC) elsewhere.
pub struct Timer;

impl FormatTime for Timer {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        match VIRTUAL_NS.with(Cell::get) {
            Some(ns) => write!(w, "vt {}.{:09}s", ns / 1_000_000_000, ns % 1_000_000_000),
            None => SystemTime.format_time(w),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 46 item 6: a target's directive is replaced where it stood, never added again;
    /// the filter never grows past its cap, and a change that would is refused clearly with
    /// the filter unchanged.
    #[test]
    fn the_filter_keeps_one_directive_per_target_and_is_capped() {
        let mut f = "warn".to_string();
        for level in ["debug", "info", "trace", "DEBUG"] {
            f = next_filter(&f, level, Some("dataplane::runtime")).unwrap();
            f = next_filter(&f, level, Some("mio")).unwrap();
        }
        assert_eq!(f, "warn,dataplane::runtime=debug,mio=debug");
        // A directive with a span filter names the same target: replaced, not duplicated.
        let f = next_filter(
            "info,dataplane::runtime[run]=trace,mio=warn",
            "off",
            Some("dataplane::runtime"),
        )
        .unwrap();
        assert_eq!(f, "info,dataplane::runtime=off,mio=warn");
        // Target after target: refused at the cap, the filter as it was.
        let max = controlplane::protocol::MAX_LOG_FILTER;
        let mut f = "warn".to_string();
        let mut refused = None;
        for i in 0..10_000 {
            match next_filter(&f, "debug", Some(&format!("module_number_{i}"))) {
                Ok(next) => f = next,
                Err(e) => {
                    refused = Some((i, e));
                    break;
                }
            }
        }
        let (i, e) = refused.expect("the filter grew without bound");
        assert!(f.len() <= max && f.len() > max - 40, "{} bytes", f.len());
        assert!(i > 20, "room for dozens of targets, refused at {i}");
        assert!(
            e.contains(&format!("more than the {max}")) && e.contains("stays"),
            "{e}"
        );
        // Those already there still change, and a level for all starts it again.
        let again = next_filter(&f, "off", Some("module_number_0")).unwrap();
        assert_eq!(again.len(), f.len() - "debug".len() + "off".len());
        assert_eq!(next_filter(&f, "info", None).unwrap(), "info");
        // A target longer than the whole filter may be is refused as such.
        let e = next_filter("warn", "info", Some(&"a".repeat(max))).unwrap_err();
        assert!(e.contains("too long"), "{e}");
    }

    #[test]
    fn directives_name_their_targets() {
        assert_eq!(directive_target("warn"), None);
        assert_eq!(directive_target("dataplane=debug"), Some("dataplane"));
        assert_eq!(
            directive_target("dataplane::runtime[run]=info"),
            Some("dataplane::runtime")
        );
        // A bare word that is not a level is a target at every level.
        assert_eq!(directive_target("mio"), Some("mio"));
    }

    #[test]
    fn virtual_time_stamps_this_thread_only_while_held() {
        let stamp = || {
            let mut s = String::new();
            Timer.format_time(&mut Writer::new(&mut s)).unwrap();
            s
        };
        assert!(!stamp().starts_with("vt "), "{}", stamp());
        let clock = VirtualClock::start();
        clock.set(1_234_567_890);
        assert_eq!(stamp(), "vt 1.234567890s");
        assert!(!std::thread::spawn(stamp).join().unwrap().starts_with("vt "));
        drop(clock);
        assert!(!stamp().starts_with("vt "));
    }
}

//! How the switch is read, never on the packet path: snapshots of every counter and buffer
//! figure for summary.json and the control protocol ([`snapshot`]), the watermarks the control
//! thread keeps from the switch's peaks ([`watermarks`]), the `--stats` lines ([`live`]) and
//! what `rocesw run` prints and writes when it stops ([`run_end`]).
//! The counters themselves are [`crate::counters`], written by the sides that own them.

pub mod live;
pub mod run_end;
pub mod snapshot;
pub mod watermarks;

pub use snapshot::*;

/// Writes `text` to standard output. A reader that went away (`rocesw replay … | head`) ends
/// the output quietly, as for any Unix tool (`print!` would panic on the broken pipe, exit 101);
/// any other failure is an error that says it was a write.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(anyhow::anyhow!("writing to standard output: {e}")),
    }
}

//! `rocectl capture`: a live capture of one port of a running switch, written as a pcap.
//!
//! The switch copies the port's frames into a bounded ring and its control server streams them
//! over this connection (`capture` in controlplane/PROTOCOL.md), so the file is written here,
//! on the machine rocectl runs on, even when the switch is reached over `--tcp`.
//!
//! The file: refused if it exists (unless `--force`), then written under its own name as the
//! frames arrive, flushed after every batch (as `tcpdump -U` does): a classic pcap has no
//! trailer, so the file is a valid capture of everything received at any moment, and whatever
//! ends the capture (its count or duration, Ctrl-C, the switch stopping) leaves a complete
//! file. Only a rocectl killed outright (SIGKILL) may leave a last record cut short.

use crate::target::{connect, err};
use controlplane::protocol::{
    CaptureData, CaptureDirection, CaptureEnd, CaptureStarted, ClientError, Endpoint, Op, Response,
};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `rocectl capture` was asked.
pub struct CaptureOptions {
    /// A port's name or id, as the user gave it.
    pub port: String,
    pub direction: CaptureDirection,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub file: PathBuf,
    pub force: bool,
    pub snaplen: Option<u32>,
    pub ring: Option<u32>,
    pub quiet: bool,
}

/// How long after Ctrl-C the switch may take to send what it still holds and end the capture.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// The switch pushes at least once a second while a capture runs: this long without a word
/// and it is taken for gone.
const SILENCE: Duration = Duration::from_secs(15);

/// The pcap file behind a shared handle: `PcapWriter` owns its writer, and the buffer must be
/// flushed after each batch.
#[derive(Clone)]
struct Shared(Rc<RefCell<BufWriter<File>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

pub fn capture(ep: &Endpoint, o: CaptureOptions) -> Result<(), String> {
    // Before bothering the switch.
    if o.file.exists() && !o.force {
        return Err(format!(
            "{}: the file exists; give --force to overwrite it",
            o.file.display()
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
    }
    let mut c = connect(ep)?;
    c.set_timeout(Some(SILENCE)).map_err(err)?;
    let (port, name) = crate::commands::port_named(&mut c, &o.port)?;
    let id = c
        .send(Op::Capture {
            port,
            direction: o.direction,
            snaplen: o.snaplen,
            ring: o.ring,
            count: o.count,
            duration_ms: o.duration.map(|d| (d.as_millis() as u64).max(1)),
        })
        .map_err(err)?;
    let started: CaptureStarted = loop {
        let r = c.read().map_err(err)?;
        if r.id == Some(id) || r.id.is_none() {
            let data = answer(r).map_err(err)?;
            break serde_json::from_value(data).map_err(|e| format!("unexpected answer from the switch: {e}"))?;
        }
    };
    let stop_id = id + 1;
    let mut sender = c.sender().map_err(err)?;
    let mut pcap = match create(&o, started.snaplen) {
        Ok(w) => w,
        Err(e) => {
            let _ = sender.send(stop_id, Op::CaptureStop);
            return Err(e);
        }
    };
    eprintln!(
        "rocectl: capturing {} ({}, up to {} B a frame, a ring of {} frames in the switch) into {}; Ctrl-C stops",
        // By the name the config gives it, as `show` names it, with its id.
        match name {
            Some(n) => format!("{n} (port {})", started.port),
            None => format!("port {}", started.port),
        },
        started.direction,
        started.snaplen,
        started.ring,
        o.file.display()
    );
    // Responses are read on their own thread, so Ctrl-C is seen while waiting for frames.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Response, ClientError>>(64);
    std::thread::spawn(move || loop {
        let r = c.read();
        let failed = r.is_err();
        if tx.send(r).is_err() || failed {
            return;
        }
    });
    let progress = !o.quiet && std::io::stderr().is_terminal();
    let mut written = 0u64;
    let mut dropped = 0u64;
    let mut ended: Option<CaptureEnd> = None;
    let mut stop_sent: Option<Instant> = None;
    let mut next_progress = Instant::now() + Duration::from_secs(1);
    let outcome: Result<(), String> = loop {
        if stop.load(Ordering::Relaxed) && stop_sent.is_none() {
            stop_sent = Some(Instant::now());
            if let Err(e) = sender.send(stop_id, Op::CaptureStop) {
                break Err(format!("could not ask the switch to stop: {e}"));
            }
        }
        if stop_sent.is_some_and(|t| t.elapsed() > STOP_GRACE) {
            break Err(format!(
                "the switch did not end the capture within {} s of Ctrl-C",
                STOP_GRACE.as_secs()
            ));
        }
        if progress && Instant::now() >= next_progress {
            next_progress += Duration::from_secs(1);
            eprint!("\r{written} frames captured, {dropped} dropped   ");
        }
        let r = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => break Err(format!("{e}")),
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break Err("the connection to the switch ended".into()),
        };
        if r.id == Some(stop_id) {
            // Answered after the capture's last push: nothing more will come.
            break Ok(());
        }
        if r.id != Some(id) {
            continue;
        }
        let data: CaptureData = match answer(r)
            .map_err(err)
            .and_then(|v| serde_json::from_value(v).map_err(|e| format!("unexpected push from the switch: {e}")))
        {
            Ok(d) => d,
            Err(e) => break Err(e),
        };
        if let Err(e) = write_batch(&mut pcap, &data, o.count, &mut written) {
            break Err(e);
        }
        dropped = data.dropped;
        if let Some(end) = data.end {
            ended = Some(end);
            if stop_sent.is_none() {
                break Ok(());
            }
            // Ctrl-C's `capture_stop` is answered next; wait for it rather than leave it unread.
        }
    };
    if progress {
        eprint!("\r{:60}\r", "");
    }
    let flushed = pcap.flush().map_err(|e| format!("{}: {e}", o.file.display()));
    let how = match ended {
        Some(end) => format!("ended: {end}"),
        None => "ended early".to_string(),
    };
    eprintln!(
        "rocectl: port {} ({}): {written} frames written to {}, {dropped} dropped ({how})",
        started.port,
        started.direction,
        o.file.display()
    );
    if dropped > 0 {
        eprintln!(
            "rocectl: warning: {dropped} frames were not captured: the switch's capture ring was full \
             (this reader fell behind); a larger --ring or a smaller --snaplen helps"
        );
    }
    flushed?;
    outcome.map_err(|e| format!("{e} (the file holds the {written} frames received before)"))
}

/// The data of a response, or its error.
fn answer(r: Response) -> Result<serde_json::Value, ClientError> {
    if r.ok {
        Ok(r.data.unwrap_or(serde_json::Value::Null))
    } else {
        Err(ClientError::Refused(r.error.unwrap_or_else(|| "refused".into())))
    }
}

/// A pcap writer (nanosecond timestamps, Ethernet) on a new file, or on the old one with
/// `--force`.
fn create(o: &CaptureOptions, snaplen: u32) -> Result<Pcap, String> {
    let mut open = std::fs::OpenOptions::new();
    open.write(true);
    if o.force {
        open.create(true).truncate(true);
    } else {
        open.create_new(true);
    }
    let file = open.open(&o.file).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            format!("{}: the file exists; give --force to overwrite it", o.file.display())
        } else {
            format!("{}: {e}", o.file.display())
        }
    })?;
    let shared = Shared(Rc::new(RefCell::new(BufWriter::with_capacity(1 << 16, file))));
    let header = PcapHeader {
        snaplen,
        datalink: pcap_file::DataLink::ETHERNET,
        ts_resolution: pcap_file::TsResolution::NanoSecond,
        ..Default::default()
    };
    let writer = PcapWriter::with_header(shared.clone(), header)
        .map_err(|e| format!("{}: {}", o.file.display(), controlplane::files::pcap_io_error(e)))?;
    let mut pcap = Pcap { writer, file: shared };
    pcap.flush().map_err(|e| format!("{}: {e}", o.file.display()))?;
    Ok(pcap)
}

struct Pcap {
    writer: PcapWriter<Shared>,
    file: Shared,
}

impl Pcap {
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Appends a push's frames (up to `count` in all) and flushes, so the file on disk is a valid
/// capture after every batch.
fn write_batch(pcap: &mut Pcap, data: &CaptureData, count: Option<u64>, written: &mut u64) -> Result<(), String> {
    for f in &data.frames {
        if count.is_some_and(|c| *written >= c) {
            break;
        }
        let bytes = f.bytes()?;
        let packet = PcapPacket::new(Duration::from_nanos(f.ns), f.len.max(bytes.len() as u32), &bytes);
        pcap.writer
            .write_packet(&packet)
            .map_err(|e| format!("writing the capture: {}", controlplane::files::pcap_io_error(e)))?;
        *written += 1;
    }
    pcap.flush().map_err(|e| format!("writing the capture: {e}"))
}

//! A port backed by capture files, for `rocesw run` where no interface is available (CI,
//! laptops without root) or to push a recorded workload through the real-time path, workers and
//! control socket included. Replay (`rocesw replay`) is the tool for exact, virtual-time
//! results; this backend runs in wall-clock time, so its outputs depend on the machine.
//!
//! Reading and writing are buffered (64 KiB): the system calls come per buffer, not per frame,
//! and the frame bytes are copied into one reused buffer, so a steady run does not allocate.

use super::{PortBackend, PortError, PortStats};
use crate::replay::pcapio::decode_record;
use crate::replay::pcapio::PcapOutput;
use controlplane::model::{PcapPace, PcapPortConfig};
use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;
use std::fs::File;
use std::io::{self, BufReader};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Largest frame a capture may hand the switch (jumbo frames included); longer records are
/// skipped and counted as oversize, like a frame the kernel truncated.
const MAX_FRAME: usize = 16 * 1024;

/// The time base every capture-paced port shares, so captures taken on different hosts keep
/// their relative timing: the earliest first-frame timestamp of all inputs (each port lowers
/// it as it opens, from the frame it reads ahead, so no input is opened twice: a pipe could
/// not be) is delivered when the first port is first polled (not when the run is set up, which
/// would make the first frames late and the first gaps short).
#[derive(Clone, Debug)]
pub struct PcapClock {
    start: Arc<OnceLock<Instant>>,
    base_ts_ns: Arc<AtomicU64>,
}

impl Default for PcapClock {
    fn default() -> Self {
        PcapClock {
            start: Arc::default(),
            base_ts_ns: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }
}

impl PcapClock {
    /// A clock whose base the ports set as they open (every port opens before any is polled).
    pub fn new() -> PcapClock {
        PcapClock::default()
    }

    /// The capture instant delivered at the first reading (0 when no input has a frame).
    pub fn base_ts_ns(&self) -> u64 {
        match self.base_ts_ns.load(Ordering::Acquire) {
            u64::MAX => 0,
            t => t,
        }
    }

    /// The capture time due now (the clock starts at its first reading).
    fn now_ts(&self) -> u64 {
        let since = self.start.get_or_init(Instant::now).elapsed().as_nanos() as u64;
        self.base_ts_ns().saturating_add(since)
    }
}

/// Counts the inputs not yet read to their end, so the caller can stop a run whose every
/// port is a finished capture (a capture-file port's, or a DPDK `net_pcap` port's `rx_pcap`).
/// Start it at the number of ports with an input; each port takes one off when its input ends
/// (or when it is dropped first).
#[derive(Clone, Debug, Default)]
pub struct InputsLeft(Arc<AtomicUsize>);

impl InputsLeft {
    /// A count starting at `inputs`, the ports with an input capture.
    pub fn new(inputs: usize) -> InputsLeft {
        InputsLeft(Arc::new(AtomicUsize::new(inputs)))
    }

    /// Inputs not yet read to their end; 0 means every capture is done.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// One input has ended: called once by the port that read it.
    pub(crate) fn one_done(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The records in a classic pcap file (nanosecond or microsecond, either byte order): what a
/// DPDK `net_pcap` port with this `rx_pcap` will receive before its input ends. Reads only the
/// record headers.
pub fn count_records(path: &std::path::Path) -> io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let mut f = BufReader::new(File::open(path).map_err(named)?);
    let mut header = [0u8; 24];
    f.read_exact(&mut header).map_err(named)?;
    let little = match u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        m => {
            return Err(invalid(format!(
                "{}: not a classic pcap file (magic {m:#010x}; a pcapng file? `editcap -F pcap` converts it)",
                path.display()
            )))
        }
    };
    let mut records = 0u64;
    let mut rec = [0u8; 16];
    loop {
        match f.read_exact(&mut rec) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(records),
            Err(e) => return Err(named(e)),
        }
        let b: [u8; 4] = rec[8..12].try_into().expect("4 bytes");
        let caplen = if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        };
        f.seek(SeekFrom::Current(i64::from(caplen))).map_err(named)?;
        records += 1;
    }
}

/// A port whose received frames come from a capture file and whose sent frames go to one, in
/// wall-clock time.
pub struct PcapPort {
    name: String,
    input: Option<Input>,
    output: Option<PcapOutput>,
    pace: PcapPace,
    clock: PcapClock,
    /// When the port opened, as an `Instant` and in ns since the Unix epoch: the output's
    /// timestamps.
    opened: (Instant, u64),
    left: InputsLeft,
    stats: PortStats,
}

struct Input {
    reader: PcapReader<BufReader<File>>,
    /// The next frame, read ahead to learn when it is due: (capture ns, length in `frame`).
    next: Option<(u64, usize)>,
    frame: Box<[u8; MAX_FRAME]>,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl PcapPort {
    /// Opens the input (checked to be an Ethernet pcap) and creates the output. `left` is
    /// decremented when the input ends.
    pub fn open(name: &str, cfg: &PcapPortConfig, clock: PcapClock, left: &InputsLeft) -> Result<PcapPort, PortError> {
        let io_err = |context, source| PortError::Io {
            iface: name.to_string(),
            context,
            source,
        };
        let input = match &cfg.input {
            None => None,
            Some(path) => {
                let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
                let f = File::open(path).map_err(|e| io_err("opening the input capture", named(e)))?;
                let reader = PcapReader::new(BufReader::with_capacity(1 << 16, f)).map_err(|e| {
                    io_err(
                        "reading the input capture",
                        invalid(format!(
                            "{} is not a classic pcap file ({e}); convert pcapng with `editcap -F pcap`",
                            path.display()
                        )),
                    )
                })?;
                if reader.header().datalink != DataLink::ETHERNET {
                    return Err(io_err(
                        "reading the input capture",
                        invalid(format!(
                            "{}: link type {:?} is not Ethernet",
                            path.display(),
                            reader.header().datalink
                        )),
                    ));
                }
                Some(Input {
                    reader,
                    next: None,
                    frame: Box::new([0; MAX_FRAME]),
                })
            }
        };
        let output = match &cfg.output {
            None => None,
            Some(path) => Some(
                PcapOutput::create(path)
                    .map_err(|e| io_err("creating the output capture", io::Error::other(format!("{e:#}"))))?,
            ),
        };
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let mut port = PcapPort {
            name: name.to_string(),
            input,
            output,
            pace: cfg.pace,
            clock,
            opened: (Instant::now(), since_epoch.as_nanos() as u64),
            left: left.clone(),
            stats: PortStats::default(),
        };
        port.read_ahead();
        if let Some((ts, _)) = port.input.as_ref().and_then(|i| i.next) {
            port.clock.base_ts_ns.fetch_min(ts, Ordering::AcqRel);
        }
        Ok(port)
    }

    /// Loads the next usable frame into `next`, or ends the input (end of file, or a damaged
    /// record: what was read stays delivered, the rest is reported once).
    fn read_ahead(&mut self) {
        let Some(inp) = self.input.as_mut() else { return };
        inp.next = None;
        let res = inp.reader.header().ts_resolution;
        loop {
            let record = match inp.reader.next_raw_packet() {
                None => break,
                Some(Ok(raw)) => decode_record(raw, res),
                Some(Err(e)) => Err(e.to_string()),
            };
            match record {
                Ok(r) => {
                    let len = r.data.len();
                    if (len as u32) < r.orig_len || !(14..=MAX_FRAME).contains(&len) {
                        // Cut by the capture's snap length, too long or not even a header: the
                        // frame as it was on the wire is not in the file.
                        self.stats.rx_oversize += 1;
                        continue;
                    }
                    inp.frame[..len].copy_from_slice(&r.data);
                    inp.next = Some((r.ts_ns, len));
                    return;
                }
                Err(e) => {
                    tracing::warn!(port = %self.name, "input capture damaged after {} frames: {e}", self.stats.rx_frames);
                    break;
                }
            }
        }
        self.input = None;
        self.left.one_done();
    }

    /// Capture time (ns) up to which frames are due now: one clock read per burst.
    fn due_until(&self) -> u64 {
        match self.pace {
            PcapPace::Asap => u64::MAX,
            PcapPace::Capture => self.clock.now_ts(),
        }
    }

    fn write_error(&self, e: impl std::fmt::Display) -> PortError {
        PortError::Io {
            iface: self.name.clone(),
            context: "writing the output capture",
            source: io::Error::other(e.to_string()),
        }
    }
}

impl PortBackend for PcapPort {
    fn recv_burst(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        let due_until = self.due_until();
        let mut n = 0;
        while n < max {
            let Some((ts, len)) = self.input.as_ref().and_then(|i| i.next) else {
                break;
            };
            if ts > due_until {
                break;
            }
            f(&self.input.as_ref().expect("input present").frame[..len]);
            n += 1;
            self.read_ahead();
        }
        self.stats.rx_frames += n as u64;
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
        let Some(w) = self.output.as_mut() else {
            // No output file: the frame leaves into nothing, like a cable to nowhere.
            self.stats.tx_frames += 1;
            return Ok(true);
        };
        let ts = self.opened.1 + self.opened.0.elapsed().as_nanos() as u64;
        if let Err(e) = w.write(ts, frame) {
            return Err(self.write_error(format!("{e:#}")));
        }
        self.stats.tx_frames += 1;
        Ok(true)
    }

    /// A file always has room (a full disk is an error, not back-pressure).
    fn tx_room(&mut self) -> usize {
        usize::MAX
    }

    /// Frames reach the file when the 64 KiB buffer fills and when the port is dropped; a flush
    /// per poll round would be a system call per round for no reader's benefit.
    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn link_up(&mut self) -> bool {
        true
    }

    fn has_link(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn driver(&self) -> &str {
        "pcap"
    }

    fn stats(&mut self) -> PortStats {
        self.stats
    }
}

impl Drop for PcapPort {
    /// The output is complete on disk once the port is dropped (the end of `worker::run`).
    fn drop(&mut self) {
        if let Some(w) = self.output.take() {
            if let Err(e) = w.finish() {
                tracing::warn!(port = %self.name, "flushing the output capture: {e}");
            }
        }
        if self.input.take().is_some() {
            self.left.one_done();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count_records` counts what a `net_pcap` port will read, in either byte order, and
    /// refuses a file that is not a classic pcap, naming it.
    #[test]
    fn records_are_counted_in_either_byte_order() {
        let dir = tempfile::tempdir().unwrap();
        for little in [true, false] {
            let u32b = |v: u32| if little { v.to_le_bytes() } else { v.to_be_bytes() };
            let mut bytes = u32b(0xa1b2_3c4d).to_vec();
            bytes.extend_from_slice(&[0; 20]);
            for len in [60u32, 0, 1514] {
                bytes.extend_from_slice(&[0; 8]);
                bytes.extend_from_slice(&u32b(len));
                bytes.extend_from_slice(&u32b(len));
                bytes.extend(std::iter::repeat_n(0u8, len as usize));
            }
            let p = dir.path().join(format!("{little}.pcap"));
            std::fs::write(&p, &bytes).unwrap();
            assert_eq!(count_records(&p).unwrap(), 3);
        }
        let p = dir.path().join("x.pcapng");
        std::fs::write(&p, [0x0a, 0x0d, 0x0d, 0x0a].repeat(8)).unwrap();
        let e = count_records(&p).unwrap_err().to_string();
        assert!(e.contains("x.pcapng: not a classic pcap file"), "{e}");
    }
}

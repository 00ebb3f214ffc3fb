//! Streaming pcap input and output for replay (and the records `rocesw run`'s capture ports
//! read). Inputs are read one frame at a time, so memory follows the switch buffer and the
//! peers' queues, not the size of the capture.
//!
//! Every input is opened exactly once: a pipe (`<(zcat x.pcap.gz)`) cannot be reopened, so
//! the first timestamp replay needs before it starts is read ahead and kept. Every I/O error
//! names the file and what was being done to it.

use anyhow::{bail, Context, Result};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter, RawPcapPacket};
use pcap_file::{DataLink, TsResolution};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

/// One frame of an input capture.
pub struct InputFrame {
    /// Capture timestamp in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    pub data: Vec<u8>,
}

/// A capture record as the file holds it, checked for what makes it unreadable but not
/// against the file's snap length: tcpdump's `-s 128` writes records whose wire length
/// exceeds the snap length, and those must be counted as snapped, not end the capture.
pub(crate) struct Record<'a> {
    pub ts_ns: u64,
    pub orig_len: u32,
    pub data: std::borrow::Cow<'a, [u8]>,
}

/// Decodes a raw record: the timestamp in ns, and the lengths checked for consistency.
pub(crate) fn decode_record(raw: RawPcapPacket<'_>, res: TsResolution) -> Result<Record<'_>, String> {
    let frac_ns = match res {
        TsResolution::MicroSecond => raw.ts_frac as u64 * 1000,
        TsResolution::NanoSecond => raw.ts_frac as u64,
    };
    if frac_ns >= 1_000_000_000 {
        return Err(format!("record timestamp fraction {} out of range", raw.ts_frac));
    }
    if raw.incl_len > raw.orig_len {
        return Err(format!(
            "record holds {} bytes of a {}-byte frame",
            raw.incl_len, raw.orig_len
        ));
    }
    Ok(Record {
        ts_ns: raw.ts_sec as u64 * 1_000_000_000 + frac_ns,
        orig_len: raw.orig_len,
        data: raw.data,
    })
}

/// One input capture (classic pcap, Ethernet, µs or ns timestamps), read a frame at a time.
pub struct PcapInput {
    path: PathBuf,
    reader: PcapReader<BufReader<File>>,
    /// The frame read ahead by `first_ts`, handed out first by `next_frame`.
    peeked: Option<InputFrame>,
    frames_read: u64,
    /// Frames shorter on file than on the wire (snap length): not replayable, skipped.
    pub skipped_snapped: u64,
    /// A damaged record ended the input early (a warning was logged; what came before is replayed).
    pub truncated_tail: bool,
}

impl PcapInput {
    /// Opens a capture; an error if it is not classic pcap or not Ethernet.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).with_context(|| format!("cannot open input pcap {}", path.display()))?;
        let reader = PcapReader::new(BufReader::with_capacity(1 << 16, file)).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a readable pcap file ({e}); rocesw reads classic pcap (convert pcapng with `editcap -F pcap`)",
                path.display()
            )
        })?;
        if reader.header().datalink != DataLink::ETHERNET {
            bail!(
                "{}: link type {:?} is not Ethernet",
                path.display(),
                reader.header().datalink
            );
        }
        Ok(PcapInput {
            path: path.to_path_buf(),
            reader,
            peeked: None,
            frames_read: 0,
            skipped_snapped: 0,
            truncated_tail: false,
        })
    }

    /// The timestamp of the first replayable frame (read ahead and kept for `next_frame`), or
    /// None if there is none.
    pub fn first_ts(&mut self) -> Option<u64> {
        if self.peeked.is_none() {
            self.peeked = self.read_frame();
        }
        self.peeked.as_ref().map(|f| f.ts_ns)
    }

    /// The next complete frame, or None at the end. A damaged record ends the input with a
    /// warning (a capture cut short by a killed tcpdump is common); what was read is replayed.
    pub fn next_frame(&mut self) -> Option<InputFrame> {
        self.peeked.take().or_else(|| self.read_frame())
    }

    fn read_frame(&mut self) -> Option<InputFrame> {
        let res = self.reader.header().ts_resolution;
        loop {
            let record = match self.reader.next_raw_packet()? {
                Ok(raw) => decode_record(raw, res),
                Err(e) => Err(e.to_string()),
            };
            match record {
                Ok(r) => {
                    self.frames_read += 1;
                    if (r.data.len() as u32) < r.orig_len {
                        self.skipped_snapped += 1;
                        continue;
                    }
                    return Some(InputFrame {
                        ts_ns: r.ts_ns,
                        data: r.data.into_owned(),
                    });
                }
                Err(e) => {
                    tracing::warn!(
                        "{}: stopped reading after {} frames: {e}",
                        self.path.display(),
                        self.frames_read
                    );
                    self.truncated_tail = true;
                    return None;
                }
            }
        }
    }

    /// The file it reads, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A nanosecond pcap written as the switch transmits.
pub struct PcapOutput {
    path: PathBuf,
    writer: PcapWriter<BufWriter<File>>,
}

impl PcapOutput {
    /// Creates (or truncates) `path` and writes the pcap header.
    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            snaplen: 65535,
            ..Default::default()
        };
        let writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 16, file), header)
            .map_err(controlplane::files::pcap_io_error)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(PcapOutput {
            path: path.to_path_buf(),
            writer,
        })
    }

    /// Appends one frame stamped `ts_ns` (absolute ns); buffered, so an I/O error may only show at
    /// [`Self::finish`].
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> Result<()> {
        let ts = std::time::Duration::from_nanos(ts_ns);
        self.writer
            .write_packet(&PcapPacket::new(ts, frame.len() as u32, frame))
            // pcap-file calls a failed write (a full disk) "Error reading bytes".
            .map_err(controlplane::files::pcap_io_error)
            .with_context(|| format!("writing {}", self.path.display()))?;
        Ok(())
    }

    /// Flushes the buffer: call it, or a full disk's last error goes unseen.
    pub fn finish(self) -> Result<()> {
        use std::io::Write;
        let path = self.path;
        self.writer
            .into_writer()
            .flush()
            .with_context(|| format!("writing {} (flushing)", path.display()))?;
        Ok(())
    }

    /// The file it writes, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Refuses, before anything is written, any output that is (or aliases, through symlinks,
/// hard links or `..`) an input or another output: the one check every command that writes
/// files shares ([`controlplane::files::refuse_aliased_outputs`]). Each entry is (what it is
/// for, e.g. "port 1 input", path).
pub fn refuse_aliased_outputs(inputs: &[(String, &Path)], outputs: &[(String, &Path)]) -> Result<()> {
    controlplane::files::refuse_aliased_outputs(inputs, outputs).map_err(anyhow::Error::msg)
}

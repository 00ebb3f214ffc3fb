//! Streaming pcap input and output for replay. Inputs are read one frame at a time, so memory
//! follows the switch buffer and the peers' queues, not the size of the capture.

use anyhow::{bail, Context, Result};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
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

pub struct PcapInput {
    path: PathBuf,
    reader: PcapReader<BufReader<File>>,
    frames_read: u64,
    /// Frames shorter on file than on the wire (snap length): not replayable, skipped.
    pub skipped_snapped: u64,
    pub truncated_tail: bool,
}

impl PcapInput {
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
            frames_read: 0,
            skipped_snapped: 0,
            truncated_tail: false,
        })
    }

    /// The next complete frame, or None at the end. A damaged record ends the input with a
    /// warning (a capture cut short by a killed tcpdump is common); what was read is replayed.
    pub fn next_frame(&mut self) -> Option<InputFrame> {
        loop {
            match self.reader.next_packet()? {
                Ok(p) => {
                    self.frames_read += 1;
                    if (p.data.len() as u32) < p.orig_len {
                        self.skipped_snapped += 1;
                        continue;
                    }
                    return Some(InputFrame {
                        ts_ns: p.timestamp.as_nanos() as u64,
                        data: p.data.into_owned(),
                    });
                }
                Err(e) => {
                    tracing::warn!(
                        "{}: stopped after {} frames: {e}",
                        self.path.display(),
                        self.frames_read
                    );
                    self.truncated_tail = true;
                    return None;
                }
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A nanosecond pcap written as the switch transmits.
pub struct PcapOutput {
    writer: PcapWriter<BufWriter<File>>,
}

impl PcapOutput {
    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            snaplen: 65535,
            ..Default::default()
        };
        let writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 16, file), header)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(PcapOutput { writer })
    }

    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> Result<()> {
        let ts = std::time::Duration::from_nanos(ts_ns);
        self.writer
            .write_packet(&PcapPacket::new(ts, frame.len() as u32, frame))?;
        Ok(())
    }

    pub fn finish(self) -> Result<()> {
        use std::io::Write;
        self.writer.into_writer().flush()?;
        Ok(())
    }
}

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

pub struct PcapInput {
    path: PathBuf,
    reader: PcapReader<BufReader<File>>,
    /// The frame read ahead by `first_ts`, handed out first by `next_frame`.
    peeked: Option<InputFrame>,
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
    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            snaplen: 65535,
            ..Default::default()
        };
        let writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 16, file), header)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(PcapOutput {
            path: path.to_path_buf(),
            writer,
        })
    }

    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> Result<()> {
        let ts = std::time::Duration::from_nanos(ts_ns);
        self.writer
            .write_packet(&PcapPacket::new(ts, frame.len() as u32, frame))
            .with_context(|| format!("writing {}", self.path.display()))?;
        Ok(())
    }

    pub fn finish(self) -> Result<()> {
        use std::io::Write;
        let path = self.path;
        self.writer
            .into_writer()
            .flush()
            .with_context(|| format!("writing {} (flushing)", path.display()))?;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What a path names, for telling whether two paths are one file: the device and inode of
/// an existing file (through any symlinks and hard links), else the canonical parent folder
/// joined with the name, with a dangling symlink followed to where it would create the file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileId {
    Inode(u64, u64),
    Path(PathBuf),
}

fn file_id(path: &Path) -> Result<FileId> {
    use std::os::unix::fs::MetadataExt;
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        if let Ok(m) = std::fs::metadata(&path) {
            return Ok(FileId::Inode(m.dev(), m.ino()));
        }
        match std::fs::read_link(&path) {
            // A dangling symlink: the file it would create is its target's.
            Ok(target) => path = path.parent().unwrap_or(Path::new(".")).join(target),
            Err(_) => {
                let name = path
                    .file_name()
                    .with_context(|| format!("{}: not a file name", path.display()))?;
                let parent = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                let parent = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
                return Ok(FileId::Path(parent.join(name)));
            }
        }
    }
    bail!("{}: too many levels of symbolic links", path.display())
}

/// Refuses, before anything is written, any output that is (or aliases, through symlinks,
/// hard links or `..`) an input or another output: writing it would truncate a capture still
/// to be read, or interleave two ports' frames in one file. Each entry is (what it is for,
/// e.g. "port 1 input", path).
pub fn refuse_aliased_outputs(inputs: &[(String, &Path)], outputs: &[(String, &Path)]) -> Result<()> {
    let ids = |list: &[(String, &Path)]| -> Result<Vec<FileId>> { list.iter().map(|(_, p)| file_id(p)).collect() };
    let (in_ids, out_ids) = (ids(inputs)?, ids(outputs)?);
    for (i, (what, path)) in outputs.iter().enumerate() {
        if let Some(j) = in_ids.iter().position(|id| *id == out_ids[i]) {
            bail!(
                "{what} {} is the {} {}: writing it would destroy the input (choose another output)",
                path.display(),
                inputs[j].0,
                inputs[j].1.display()
            );
        }
        if let Some(j) = out_ids[..i].iter().position(|id| *id == out_ids[i]) {
            bail!(
                "{what} {} is the same file as {} {}: two ports cannot write one capture",
                path.display(),
                outputs[j].0,
                outputs[j].1.display()
            );
        }
    }
    Ok(())
}

//! The files a command reads and writes, checked the one way every command shares: no output
//! may be an input or another output (compared by device and inode, so symlinks, hard links
//! and `..` cannot hide it), and text inputs (configs, topologies, schedules, patterns) are
//! read with a bound on their size. Used by `rocesw replay`, `run`, `fabric`, `tune`, `gen`
//! and `lab up`, and by `rocectl check` and `vlarb admit`; a config's port files (`pcap`
//! tables and DPDK `net_pcap` devices alike) are listed once, by [`PortFiles`].

use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest config-like text file read (a switch config, a topology, a schedule, a
/// patterns or requests file): far above any real one (the shipped ones are a few KiB), and a
/// path such as /dev/zero or a huge file is refused instead of read without bound.
pub const MAX_TEXT_BYTES: u64 = 4 << 20;

/// Reads a config-like text file whole, refusing one above [`MAX_TEXT_BYTES`] (read no
/// further than that). The error names the path.
pub fn read_text(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    read_bounded(file, path)
}

/// [`read_text`] for a file watched or read unattended (`rocectl daemon`'s config): only a
/// regular file, opened without blocking. A FIFO put in its place would otherwise block the
/// open until some writer opened it (the daemon then applied nothing and sent no heartbeat),
/// and a device would be read as if it were the config. Symlinks to a regular file are fine.
pub fn read_regular_text(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "{}: not a regular file (a FIFO, a device or a directory): not read",
            path.display()
        ));
    }
    read_bounded(file, path)
}

/// Reads a config-like text file whole, refusing one above [`MAX_TEXT_BYTES`] (read no
/// further than that). The error names the path.
fn read_bounded(file: std::fs::File, path: &Path) -> Result<String, String> {
    let mut bytes = Vec::new();
    file.take(MAX_TEXT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        return Err(format!(
            "{}: larger than {} MiB, far more than any config or topology (is it the right file?)",
            path.display(),
            MAX_TEXT_BYTES >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{}: cannot read: not UTF-8 text", path.display()))
}

/// What a path names, for telling whether two paths are one file: the device and inode of an
/// existing file (through any symlinks and hard links), else the canonical parent folder joined
/// with the name, with a dangling symlink followed to where it would create the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileId {
    /// An existing file: its device and inode numbers.
    Inode(u64, u64),
    /// A file not there yet: its canonical parent folder joined with its name.
    Path(PathBuf),
}

/// The [`FileId`] of `path`, whether or not the file exists yet.
pub fn file_id(path: &Path) -> Result<FileId, String> {
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
                    .ok_or_else(|| format!("{}: not a file name", path.display()))?;
                let parent = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                let parent = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
                return Ok(FileId::Path(parent.join(name)));
            }
        }
    }
    Err(format!("{}: too many levels of symbolic links", path.display()))
}

/// Whether `path` is a character device (`/dev/null`, `/dev/full`, a terminal): writing one
/// destroys no file, so any number of outputs may name it (the benchmarks send every port's
/// `tx_pcap` to /dev/null).
fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

/// Refuses, before anything is written, any output that is (or aliases, through symlinks, hard
/// links or `..`) an input or another output: writing it would destroy a file still to be read
/// (a capture, a config, a topology, admitted connections), or interleave two writers in one
/// file. Each entry is (what it is for, e.g. "port 1 input" or "the topology", path). An
/// output that is a character device (/dev/null) is never refused.
pub fn refuse_aliased_outputs(inputs: &[(String, &Path)], outputs: &[(String, &Path)]) -> Result<(), String> {
    let ids =
        |list: &[(String, &Path)]| -> Result<Vec<FileId>, String> { list.iter().map(|(_, p)| file_id(p)).collect() };
    let (in_ids, out_ids) = (ids(inputs)?, ids(outputs)?);
    for (i, (what, path)) in outputs.iter().enumerate() {
        if is_char_device(path) {
            continue;
        }
        if let Some(j) = in_ids.iter().position(|id| *id == out_ids[i]) {
            return Err(format!(
                "{what} {} is the {} {}: writing it would destroy the input (choose another output)",
                path.display(),
                inputs[j].0,
                inputs[j].1.display()
            ));
        }
        if let Some(j) = out_ids[..i].iter().position(|id| *id == out_ids[i]) {
            return Err(format!(
                "{what} {} is the same file as {} {}: two outputs cannot share one file (choose another)",
                path.display(),
                outputs[j].0,
                outputs[j].1.display()
            ));
        }
    }
    Ok(())
}

/// The files a config's ports read and write once `rocesw run` opens them, labelled for
/// messages: a `pcap` table's `input` and `output`, and a DPDK `net_pcap` device's `rx_pcap`
/// and `tx_pcap` (which DPDK creates, truncating it, when the port opens). Every command that
/// checks a config's files against each other goes through this one list, so no kind of port
/// escapes [`refuse_aliased_outputs`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PortFiles {
    /// (what it is, e.g. "port 1 dpdk rx_pcap", path) of every file read.
    pub inputs: Vec<(String, PathBuf)>,
    /// (what it is, path) of every file written.
    pub outputs: Vec<(String, PathBuf)>,
}

impl PortFiles {
    /// The files of `cfg`'s ports, in port order.
    pub fn of(cfg: &crate::model::Config) -> PortFiles {
        let mut files = PortFiles::default();
        for p in &cfg.ports {
            if let Some(pc) = &p.pcap {
                if let Some(i) = &pc.input {
                    files.inputs.push((format!("port {} pcap input", p.id), i.clone()));
                }
                if let Some(o) = &pc.output {
                    files.outputs.push((format!("port {} pcap output", p.id), o.clone()));
                }
            }
            let Some(spec) = p.dpdk.as_deref().and_then(|d| dpdk::DeviceSpec::parse(d).ok()) else {
                continue;
            };
            if spec.canonical_name().trim_end_matches(|c: char| c.is_ascii_digit()) != "net_pcap" {
                continue;
            }
            for (k, v) in spec.args() {
                let what = format!("port {} dpdk {k}", p.id);
                match k {
                    "rx_pcap" => files.inputs.push((what, PathBuf::from(v))),
                    "tx_pcap" => files.outputs.push((what, PathBuf::from(v))),
                    _ => {}
                }
            }
        }
        files
    }

    /// [`refuse_aliased_outputs`] over these files and the `extra` ones (the config itself,
    /// a summary, a token file).
    pub fn refuse_aliases(
        &self,
        extra_inputs: &[(String, &Path)],
        extra_outputs: &[(String, &Path)],
    ) -> Result<(), String> {
        fn borrow(v: &[(String, PathBuf)]) -> Vec<(String, &Path)> {
            v.iter().map(|(w, p)| (w.clone(), p.as_path())).collect()
        }
        let mut ins = borrow(&self.inputs);
        ins.extend(extra_inputs.iter().cloned());
        let mut outs = borrow(&self.outputs);
        outs.extend(extra_outputs.iter().cloned());
        refuse_aliased_outputs(&ins, &outs)
    }
}

/// Refuses, when a command starts, an output file it would write only when it ends (`rocesw
/// run --summary`): a directory, or a file in a folder that does not exist, would otherwise be
/// found after the whole run, with its final counters lost.
pub fn refuse_unwritable_output(what: &str, path: &Path) -> Result<(), String> {
    if path.is_dir() {
        return Err(format!("{what} {} is a directory: give a file name", path.display()));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(format!(
            "{what} {}: the folder {} does not exist (create it first)",
            path.display(),
            parent.display()
        ));
    }
    Ok(())
}

/// Refuses an output directory that is one of the inputs (a file): named for the user rather
/// than left to "cannot create directory".
pub fn refuse_dir_is_input(flag: &str, dir: &Path, inputs: &[(String, &Path)]) -> Result<(), String> {
    let d = file_id(dir)?;
    for (what, p) in inputs {
        if file_id(p)? == d {
            return Err(format!(
                "{flag} {} is {what}, a file: choose a directory",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// What went wrong in a pcap writer, as the I/O error it was: pcap-file calls every I/O error
/// "Error reading bytes", also a failed write (a full disk), and keeps the cause as its source
/// only.
pub fn pcap_io_error(e: pcap_file::PcapError) -> std::io::Error {
    match e {
        pcap_file::PcapError::IoError(io) => io,
        other => std::io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own<'a>(v: &[(&str, &'a Path)]) -> Vec<(String, &'a Path)> {
        v.iter().map(|(w, p)| (w.to_string(), *p)).collect()
    }

    fn check(inputs: &[(&str, &Path)], outputs: &[(&str, &Path)]) -> Result<(), String> {
        refuse_aliased_outputs(&own(inputs), &own(outputs))
    }

    /// A hard link to an input is the input: same device and inode, whatever the paths say
    /// (issue 21 item 9: `rocesw tune` compared canonical paths and overwrote it).
    #[test]
    fn a_hard_link_symlink_or_dotdot_to_an_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let input = d.join("switch.toml");
        std::fs::write(&input, "x").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::hard_link(&input, d.join("hard.toml")).unwrap();
        std::os::unix::fs::symlink(&input, d.join("soft.toml")).unwrap();
        for out in [d.join("hard.toml"), d.join("soft.toml"), d.join("sub/../switch.toml")] {
            let e = check(&[("config", &input)], &[("the fragment", &out)]).unwrap_err();
            assert!(
                e.contains("the fragment") && e.contains("config") && e.contains("destroy"),
                "{e}"
            );
        }
        // Two outputs into one file (one not yet existing), through a dangling symlink.
        std::os::unix::fs::symlink(d.join("new.pcap"), d.join("dangling.pcap")).unwrap();
        let e = check(&[], &[("a", &d.join("new.pcap")), ("b", &d.join("dangling.pcap"))]).unwrap_err();
        assert!(e.contains("same file as a"), "{e}");
        assert_eq!(check(&[("config", &input)], &[("out", &d.join("other.toml"))]), Ok(()));
    }

    /// The default profile with `lines[i]` added to port i.
    fn with_ports(lines: &[String]) -> crate::Config {
        let mut text = crate::DEFAULT_PROFILE.to_string();
        for (i, l) in lines.iter().enumerate() {
            text = text.replacen(&format!("id = {i}\n"), &format!("id = {i}\n{l}\n"), 1);
        }
        crate::load_str(&text).unwrap().config
    }

    /// Issue 41 item 7: DPDK `net_pcap` files go through the one alias check every other
    /// output does. A `tx_pcap` that is another port's `rx_pcap` truncated that input, one
    /// that is the config replaced it, and two through a symlink interleaved, all accepted.
    #[test]
    fn dpdk_pcap_files_are_checked_like_every_other_output() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (input, config) = (d.join("in.pcap"), d.join("switch.toml"));
        std::fs::write(&input, "x").unwrap();
        std::fs::write(&config, "x").unwrap();
        std::os::unix::fs::symlink(d.join("out.pcap"), d.join("link.pcap")).unwrap();
        let dev = |i: usize, rx: &Path, tx: &Path| {
            format!(
                "dpdk = \"net_pcap{i},rx_pcap={},tx_pcap={}\"",
                rx.display(),
                tx.display()
            )
        };
        let check = |cfg: &crate::Config| {
            PortFiles::of(cfg).refuse_aliases(&[("the config".to_string(), config.as_path())], &[])
        };
        let other = d.join("other.pcap");
        for (lines, want) in [
            (
                vec![dev(0, &input, &d.join("a.pcap")), dev(1, &other, &input)],
                "port 1 dpdk tx_pcap",
            ),
            (vec![dev(0, &input, &config)], "the config"),
            (
                vec![
                    dev(0, &input, &d.join("out.pcap")),
                    dev(1, &input, &d.join("link.pcap")),
                ],
                "same file as port 0 dpdk tx_pcap",
            ),
            (
                vec![
                    format!("pcap = {{ input = {:?} }}", other.to_str().unwrap()),
                    dev(1, &input, &other),
                ],
                "port 0 pcap input",
            ),
        ] {
            let e = check(&with_ports(&lines)).unwrap_err();
            assert!(e.contains(want), "{lines:?}: wanted {want:?} in {e}");
        }
        // Any number of ports may write /dev/null, and read one capture.
        let null = Path::new("/dev/null");
        let cfg = with_ports(&[
            dev(0, &input, null),
            dev(1, &input, null),
            dev(2, &input, &d.join("c.pcap")),
        ]);
        assert_eq!(check(&cfg), Ok(()));
        assert_eq!(PortFiles::of(&cfg).inputs.len(), 3);
    }

    /// `--summary` naming a folder, or a file in a missing folder, is refused before the run.
    #[test]
    fn an_output_that_cannot_be_created_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let e = refuse_unwritable_output("--summary", d).unwrap_err();
        assert!(e.contains("--summary") && e.contains("is a directory"), "{e}");
        let e = refuse_unwritable_output("--summary", &d.join("missing/s.json")).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        assert_eq!(refuse_unwritable_output("--summary", &d.join("s.json")), Ok(()));
        assert_eq!(refuse_unwritable_output("--summary", Path::new("s.json")), Ok(()));
    }

    /// A config path of /dev/zero (or any huge file) is refused after a bounded read.
    #[test]
    fn text_inputs_are_read_with_a_bound() {
        let e = read_text(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("/dev/zero") && e.contains("larger than 4 MiB"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ok.toml");
        std::fs::write(&p, "a = 1\n").unwrap();
        assert_eq!(read_text(&p).unwrap(), "a = 1\n");
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(read_text(&p).unwrap_err().contains("UTF-8"));
    }

    /// Issue 41 item 8: a FIFO in place of the daemon's config blocked its open until a writer
    /// came. Read as a watched file, it is refused at once, as are devices; a symlink to a
    /// regular file reads through.
    #[test]
    fn a_watched_file_must_be_regular_and_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.toml");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let t0 = std::time::Instant::now();
        let e = read_regular_text(&fifo).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(t0.elapsed() < std::time::Duration::from_secs(1));
        assert!(read_regular_text(Path::new("/dev/zero"))
            .unwrap_err()
            .contains("not a regular file"));
        let p = dir.path().join("ok.toml");
        std::fs::write(&p, "a = 1\n").unwrap();
        std::os::unix::fs::symlink(&p, dir.path().join("link.toml")).unwrap();
        assert_eq!(read_regular_text(&dir.path().join("link.toml")).unwrap(), "a = 1\n");
    }
}

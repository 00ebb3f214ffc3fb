//! Part files: what one shard of work split over machines writes (`rocesw tune --shard I/N`,
//! `rocesw conform sonic --shard I/N`) and a merge reads back. The two commands split
//! different work (a search's rounds, a fleet's configs) but share how a shard is named, how
//! its file is written so that a reader never sees half of it, and how a set of files is
//! read and checked: those live here, once.

use anyhow::{anyhow, bail, Context, Result};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// A kind of part file: what a reader needs to know of it before the merge's own checks.
pub trait PartFile: DeserializeOwned {
    /// The `format` string this build writes and reads.
    const FORMAT: &'static str;
    /// The file-name prefix of this kind (`tune.part.`), and its name in errors (`tune`).
    const PREFIX: &'static str;
    /// What the file's `format` says.
    fn format(&self) -> &str;
    /// This part's shard index.
    fn shard(&self) -> usize;
    /// The shard count it was run with.
    fn shards(&self) -> usize;

    /// Whether a file name is this kind's (`PREFIX*.json`).
    fn is_name(name: &str) -> bool {
        name.starts_with(Self::PREFIX) && name.ends_with(".json")
    }
}

/// `I/N` as `--shard` takes it: shard I (from 0) of N.
pub fn parse_spec(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?}: expected I/N (shard I of N, I from 0), such as 0/4"))?;
    let i: usize = i
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: {i:?} is not a shard index"))?;
    let n: usize = n
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: {n:?} is not a shard count"))?;
    if n == 0 {
        return Err(format!("{s:?}: the shard count must be at least 1"));
    }
    if i >= n {
        return Err(format!(
            "{s:?}: shard indices run from 0 to {} (I/N with I below N)",
            n - 1
        ));
    }
    Ok((i, n))
}

/// The part files among `paths`: each a part file, or a directory whose files of this kind
/// are taken (sorted by name). Unreadable or malformed parts, another format, and a shard
/// index out of its own count are errors naming the file.
pub fn read_parts<P: PartFile>(paths: &[PathBuf]) -> Result<Vec<(PathBuf, P)>> {
    let kind = P::PREFIX.trim_end_matches(".part.");
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut here: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("{}: cannot list", p.display()))?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|f| f.file_name().and_then(|n| n.to_str()).is_some_and(P::is_name))
                .collect();
            here.sort();
            files.extend(here);
        } else {
            files.push(p.clone());
        }
    }
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let text = controlplane::files::read_text(&f).map_err(|e| anyhow!(e))?;
        let part: P =
            serde_json::from_str(&text).with_context(|| format!("{}: not a {kind} part file", f.display()))?;
        if part.format() != P::FORMAT {
            bail!("{}: format {:?}, expected {:?}", f.display(), part.format(), P::FORMAT);
        }
        if part.shards() == 0 || part.shard() >= part.shards() {
            bail!(
                "{}: shard {} of {}: out of range",
                f.display(),
                part.shard(),
                part.shards()
            );
        }
        out.push((f, part));
    }
    Ok(out)
}

/// Writes `text` to `path` through a temporary file in the same directory, so a reader (a
/// shard of the next round, a merge) never sees half a part.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("part"),
        std::process::id()
    ));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
}

/// This machine's name (the kernel's), for the shards' table.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Toy {
        format: String,
        shard: usize,
        shards: usize,
    }

    impl PartFile for Toy {
        const FORMAT: &'static str = "toy 1";
        const PREFIX: &'static str = "toy.part.";
        fn format(&self) -> &str {
            &self.format
        }
        fn shard(&self) -> usize {
            self.shard
        }
        fn shards(&self) -> usize {
            self.shards
        }
    }

    #[test]
    fn shard_specs_are_checked() {
        assert_eq!(parse_spec("0/4"), Ok((0, 4)));
        assert_eq!(parse_spec("3/4"), Ok((3, 4)));
        assert!(parse_spec("4/4").unwrap_err().contains("from 0 to 3"));
        assert!(parse_spec("0/0").unwrap_err().contains("at least 1"));
        assert!(parse_spec("1").unwrap_err().contains("I/N"));
        assert!(parse_spec("a/2").unwrap_err().contains("not a shard index"));
    }

    #[test]
    fn a_directory_gives_its_parts_of_this_kind_sorted_and_checked() {
        let dir = std::env::temp_dir().join(format!("rocesw-parts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let write = |name: &str, text: &str| write_atomic(&dir.join(name), text).unwrap();
        write("toy.part.s1of2.json", r#"{"format":"toy 1","shard":1,"shards":2}"#);
        write("toy.part.s0of2.json", r#"{"format":"toy 1","shard":0,"shards":2}"#);
        write("other.part.s0of2.json", "not even json");
        let parts = read_parts::<Toy>(std::slice::from_ref(&dir)).unwrap();
        let shards: Vec<usize> = parts.iter().map(|(_, p)| p.shard).collect();
        assert_eq!(shards, [0, 1], "sorted by name, other kinds left out");

        write("toy.part.s2of2.json", r#"{"format":"toy 1","shard":2,"shards":2}"#);
        let e = read_parts::<Toy>(std::slice::from_ref(&dir)).unwrap_err().to_string();
        assert!(e.contains("s2of2.json") && e.contains("out of range"), "{e}");
        std::fs::remove_file(dir.join("toy.part.s2of2.json")).unwrap();

        write("toy.part.s9.json", r#"{"format":"toy 0","shard":0,"shards":1}"#);
        let e = read_parts::<Toy>(std::slice::from_ref(&dir)).unwrap_err().to_string();
        assert!(e.contains("expected \"toy 1\""), "{e}");
        write("toy.part.s9.json", "{half");
        let e = format!("{:#}", read_parts::<Toy>(std::slice::from_ref(&dir)).unwrap_err());
        assert!(e.contains("not a toy part file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

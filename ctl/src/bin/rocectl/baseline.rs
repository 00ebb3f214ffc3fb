//! `rocectl clear counters`: a baseline of a switch's counters that `show` subtracts, as SONiC's
//! `sonic-clear` does. The switch itself never resets a counter, so its totals, `summary.json`
//! and the Prometheus metrics (whose `rate()` needs monotonic counters) are untouched; each
//! user's baseline is theirs, in a file named after the switch it is of.
//!
//! A baseline belongs to a switch, not to how its address was typed: the key is the socket's
//! canonical path (symlinks, `.`, `..` and the working directory resolved) or the TCP address
//! as resolved, and the file's name is a digest of that key (a readable part beside it), with
//! the key itself inside the file, checked when it is read. A name made by replacing every
//! character outside `[A-Za-z0-9.-]` with `_` gave `x/a_b.sock` and `x/a/b.sock` one file, and
//! `./ctl.sock` the same file from every directory: one switch's clear then showed on another
//! as counters since the clear, or deleted the other's baseline as "of an earlier run".
//!
//! The state directory is written by whoever runs rocectl, root included (a cron job, a
//! service), so it is handled as hostile ground unless proven the caller's own: it never falls
//! back to a shared base such as `/tmp` (anyone can create `/tmp/.local/state/rocectl` first);
//! it is created 0700, and one the caller does not own, or that others may write, is refused;
//! every file in it is reached through the directory's descriptor once checked (`openat`), so
//! the checked directory cannot be swapped for another under rocectl; files are created
//! exclusively and without following links, then renamed into place; and a baseline is read
//! only if it is a regular file, opened without blocking (a FIFO would wait for a writer for
//! ever) and no larger than [`MAX_BASELINE_BYTES`] (a link to `/dev/zero` would never end).

use controlplane::protocol::Endpoint;
use controlplane::snapshot::Snapshot;
use serde::{Deserialize, Serialize};
use std::ffi::{CString, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a baseline file holds.
#[derive(Serialize, Deserialize)]
pub struct Baseline {
    /// The switch it is of ([`identity`]): the file name is a digest of it, so this, not the
    /// name, decides.
    pub switch: String,
    /// When it was taken, seconds since the Unix epoch.
    pub taken_unix_s: u64,
    pub snapshot: Snapshot,
}

/// The largest baseline file read: a snapshot of a thousand ports is a few MiB of JSON.
pub const MAX_BASELINE_BYTES: u64 = 32 << 20;

/// Where baselines live: `$ROCECTL_STATE_DIR`, else `$XDG_STATE_HOME/rocectl`, else
/// `$HOME/.local/state/rocectl`, with the home directory from the password database when HOME
/// is unset (a cron job, `env -i`, a service without `User=`). Never a shared temporary
/// directory: see the module doc.
pub fn dir() -> Result<PathBuf, String> {
    dir_from(|k| std::env::var_os(k), passwd_home)
}

/// [`dir`] with the environment and the password database as parameters (for tests). Relative
/// XDG_STATE_HOME and HOME are ignored, as the XDG spec says: they would depend on the
/// working directory.
fn dir_from(
    env: impl Fn(&str) -> Option<OsString>,
    passwd_home: impl FnOnce() -> Option<PathBuf>,
) -> Result<PathBuf, String> {
    if let Some(d) = env("ROCECTL_STATE_DIR").filter(|d| !d.is_empty()) {
        return Ok(d.into());
    }
    if let Some(d) = env("XDG_STATE_HOME").map(PathBuf::from).filter(|d| d.is_absolute()) {
        return Ok(d.join("rocectl"));
    }
    let home = env("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .or_else(passwd_home)
        .ok_or_else(|| {
            "no directory for counter baselines: HOME is unset and the password database names no home \
             directory; set ROCECTL_STATE_DIR to a directory of yours"
                .to_string()
        })?;
    Ok(home.join(".local/state/rocectl"))
}

/// The effective user's home directory in the password database.
fn passwd_home() -> Option<PathBuf> {
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: all-zero is a valid `passwd` (null pointers and zero ids); getpwuid_r fills it.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: `pw`, `buf` (of the length passed) and `found` outlive the call, which writes the
    // strings it points `pw` at into `buf` only.
    let rc = unsafe { libc::getpwuid_r(euid(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() || pw.pw_dir.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded, so `pw_dir` is a NUL-terminated string inside `buf`.
    let d = unsafe { std::ffi::CStr::from_ptr(pw.pw_dir) };
    let p = PathBuf::from(std::ffi::OsStr::from_bytes(d.to_bytes()));
    p.is_absolute().then_some(p)
}

fn euid() -> libc::uid_t {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn cstr(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{}: contains a NUL byte", p.display()))
}

/// The state directory, open and checked: every file operation goes through its descriptor.
struct StateDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl StateDir {
    /// Opens `path`, creating it (0700, its missing parents too) if `create`; `None` if it is
    /// not there and not to be created. Refuses a directory the caller does not own, or that
    /// its group or others may write: they could plant files in it.
    fn open(path: &Path, create: bool) -> Result<Option<StateDir>, String> {
        use std::os::unix::fs::DirBuilderExt;
        if create {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|e| format!("{}: cannot create: {e}", path.display()))?;
        }
        let c = cstr(path)?;
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            if !create && e.kind() == std::io::ErrorKind::NotFound {
                return Ok(None);
            }
            return Err(format!("{}: cannot open: {e}", path.display()));
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let st = fstat(&fd).map_err(|e| format!("{}: {e}", path.display()))?;
        let me = euid();
        if st.st_uid != me {
            return Err(format!(
                "{}: owned by uid {}, not by you (uid {me}): refusing to keep counter baselines there \
                 (another user could swap them for links); remove it, or set ROCECTL_STATE_DIR",
                path.display(),
                st.st_uid
            ));
        }
        if st.st_mode & 0o022 != 0 {
            return Err(format!(
                "{}: its group or others may write to it (mode {:o}): refusing to keep counter baselines \
                 there; `chmod 700` it, or set ROCECTL_STATE_DIR",
                path.display(),
                st.st_mode & 0o7777
            ));
        }
        Ok(Some(StateDir {
            fd,
            path: path.to_path_buf(),
        }))
    }

    /// `text` as the file `name`, whole or not at all: written to a new file created
    /// exclusively (never through a link or into an existing file), then renamed over `name`
    /// (which replaces whatever `name` was, a planted link included, not what it points to).
    fn replace(&self, name: &str, text: &[u8]) -> Result<PathBuf, String> {
        let target = self.path.join(name);
        let mut last = None;
        for attempt in 0..16u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.subsec_nanos());
            let tmp = format!(".{name}.{}.{nanos:x}.{attempt}", std::process::id());
            let ctmp = CString::new(tmp.as_str()).map_err(|_| format!("{name}: contains a NUL byte"))?;
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: the directory descriptor is open and `ctmp` is NUL-terminated.
            let fd = unsafe { libc::openat(self.fd.as_raw_fd(), ctmp.as_ptr(), flags, 0o600 as libc::c_uint) };
            if fd < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    last = Some(e);
                    continue;
                }
                return Err(format!("{}: cannot write: {e}", self.path.join(&tmp).display()));
            }
            // SAFETY: `fd` was just created and is owned by nothing else.
            let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
            let written = file.write_all(text).and_then(|()| {
                let cname = CString::new(name).map_err(std::io::Error::other)?;
                // SAFETY: both names are NUL-terminated and relative to the open directory.
                let rc =
                    unsafe { libc::renameat(self.fd.as_raw_fd(), ctmp.as_ptr(), self.fd.as_raw_fd(), cname.as_ptr()) };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
            return match written {
                Ok(()) => Ok(target),
                Err(e) => {
                    self.remove(&tmp);
                    Err(format!("{}: cannot write: {e}", target.display()))
                }
            };
        }
        Err(format!(
            "{}: cannot create a temporary file beside it: {}",
            target.display(),
            last.map_or_else(String::new, |e| e.to_string())
        ))
    }

    /// The content of the regular file `name`, if there is one; an error for anything else
    /// there (a link, a FIFO, a device, a file over [`MAX_BASELINE_BYTES`]), which is left
    /// alone. Never blocks: a FIFO is opened non-blocking and then refused.
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        let path = self.path.join(name);
        let cname = CString::new(name).map_err(|_| format!("{name}: contains a NUL byte"))?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
        // SAFETY: the directory descriptor is open and `cname` is NUL-terminated.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), cname.as_ptr(), flags) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT) => Ok(None),
                Some(libc::ELOOP) => Err(format!("{}: a symbolic link, not a baseline: ignored", path.display())),
                _ => Err(format!("{}: cannot read: {e}", path.display())),
            };
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let st = fstat(&fd).map_err(|e| format!("{}: {e}", path.display()))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(format!("{}: not a regular file: ignored", path.display()));
        }
        if st.st_size as u64 > MAX_BASELINE_BYTES {
            return Err(format!(
                "{}: larger than {} MiB, not a baseline: ignored",
                path.display(),
                MAX_BASELINE_BYTES >> 20
            ));
        }
        let mut bytes = Vec::new();
        std::fs::File::from(fd)
            .take(MAX_BASELINE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        if bytes.len() as u64 > MAX_BASELINE_BYTES {
            return Err(format!(
                "{}: grew past {} MiB while read: ignored",
                path.display(),
                MAX_BASELINE_BYTES >> 20
            ));
        }
        Ok(Some(bytes))
    }

    /// Removes the entry `name` itself (a link, not what it points to).
    fn remove(&self, name: &str) {
        if let Ok(c) = CString::new(name) {
            // SAFETY: the directory descriptor is open and `c` is NUL-terminated.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
        }
    }
}

fn fstat(fd: &OwnedFd) -> Result<libc::stat, std::io::Error> {
    // SAFETY: all-zero is a valid `stat`; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` is a valid place to write.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// Which switch `ep` reaches, however its address was spelt: `unix:` and the socket's
/// canonical path (through symlinks, `.`, `..` and the working directory), or `tcp:` and the
/// first address the name resolves to. Bytes that are not printable ASCII are escaped, so two
/// paths never share a key.
pub fn identity(ep: &Endpoint) -> String {
    match ep {
        Endpoint::Unix(p) => {
            // The socket exists (rocectl just talked to it); should it have gone meanwhile,
            // the absolute path is the next best thing.
            let c = std::fs::canonicalize(p)
                .or_else(|_| std::path::absolute(p))
                .unwrap_or_else(|_| p.clone());
            let mut key = String::from("unix:");
            for &b in c.as_os_str().as_bytes() {
                if b.is_ascii_graphic() && b != b'\\' || b == b' ' {
                    key.push(char::from(b));
                } else {
                    key += &format!("\\x{b:02x}");
                }
            }
            key
        }
        Endpoint::Tcp { addr, .. } => {
            use std::net::ToSocketAddrs;
            let resolved = addr.to_socket_addrs().ok().and_then(|mut a| a.next());
            format!("tcp:{}", resolved.map_or_else(|| addr.clone(), |a| a.to_string()))
        }
    }
}

/// The baseline file's name for the switch `key` ([`identity`]): a readable part (the socket's
/// file name or the port, as the user would recognise it) and a digest of the whole key, which
/// is what keeps two switches apart.
pub fn file_name(key: &str) -> String {
    let tail = key.rsplit(['/', ':']).next().unwrap_or_default();
    let readable: String = tail
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(40)
        .collect();
    format!("counters-{readable}-{:016x}.json", fnv1a(key.as_bytes()))
}

/// FNV-1a, 64 bits: a digest that stays the same across builds and Rust versions (std's
/// hasher promises neither), for file names only; the key inside the file is the check.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Keeps `snapshot` as the baseline of the switch at `ep` (written whole, then renamed into
/// place, so a reader never sees half a file).
pub fn save(ep: &Endpoint, snapshot: Snapshot) -> Result<PathBuf, String> {
    let d = dir()?;
    let state = StateDir::open(&d, true)?.ok_or_else(|| format!("{}: cannot create", d.display()))?;
    let switch = identity(ep);
    let name = file_name(&switch);
    let b = Baseline {
        switch,
        taken_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_secs()),
        snapshot,
    };
    let text = serde_json::to_string(&b).map_err(|e| e.to_string())?;
    state.replace(&name, text.as_bytes())
}

/// The baseline of the switch at `ep`, if one was kept, with the directory it is in and its
/// file's name. A file that does not read back (from another version, or damaged) is said
/// once and removed; a state directory that cannot be trusted, something other than a
/// baseline where it should be, or another switch's baseline (two keys of one digest) is said
/// and left alone.
fn load(ep: &Endpoint) -> Option<(StateDir, String, Baseline)> {
    // No directory yet (nothing was ever cleared): nothing to say.
    let d = dir().ok()?;
    let state = match StateDir::open(&d, false) {
        Ok(s) => s?,
        Err(e) => {
            eprintln!("rocectl: counters baseline not used: {e}");
            return None;
        }
    };
    let key = identity(ep);
    let name = file_name(&key);
    let bytes = match state.read(&name) {
        Ok(b) => b?,
        Err(e) => {
            eprintln!("rocectl: counters baseline not used: {e}");
            return None;
        }
    };
    match serde_json::from_slice::<Baseline>(&bytes) {
        Ok(b) if b.switch != key => {
            eprintln!(
                "rocectl: {}: the counters baseline of {}, not of {key}: not used",
                state.path.join(&name).display(),
                b.switch
            );
            None
        }
        Ok(b) => Some((state, name, b)),
        Err(e) => {
            eprintln!(
                "rocectl: {}: not a counters baseline ({e}); removed",
                state.path.join(&name).display()
            );
            state.remove(&name);
            None
        }
    }
}

/// `now` less the baseline of the switch at `ep`, with a line saying since when; `now` as it
/// is when there is no baseline. A baseline of an earlier run of the switch (a counter went
/// backwards) is removed, and said.
pub fn apply(ep: &Endpoint, now: Snapshot) -> (Snapshot, Option<String>) {
    let Some((state, name, b)) = load(ep) else {
        return (now, None);
    };
    match now.since(&b.snapshot) {
        Some(d) => {
            let ago = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_secs())
                .saturating_sub(b.taken_unix_s);
            (
                d,
                Some(format!(
                    "counters since `rocectl clear counters` {ago} s ago (the switch's totals: --json)"
                )),
            )
        }
        None => {
            state.remove(&name);
            (
                now,
                Some("the counters baseline was of an earlier run of this switch: removed; totals since start".into()),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let m: HashMap<String, OsString> = vars.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
        move |k| m.get(k).cloned()
    }

    /// Issue 41 item 3: with HOME unset the directory came from `$TMPDIR` or `/tmp`, where any
    /// user can create it first. Now it is the password database's home, or an error; never
    /// the temporary directory, whatever TMPDIR says.
    #[test]
    fn the_state_directory_never_falls_back_to_a_shared_one() {
        let tmp = [("TMPDIR", "/tmp")];
        let d = dir_from(env(&tmp), || Some("/root".into())).unwrap();
        assert_eq!(d, Path::new("/root/.local/state/rocectl"));
        let e = dir_from(env(&tmp), || None).unwrap_err();
        assert!(e.contains("ROCECTL_STATE_DIR") && e.contains("HOME"), "{e}");
        // A relative HOME or XDG_STATE_HOME would depend on the working directory: ignored.
        let d = dir_from(env(&[("HOME", "."), ("XDG_STATE_HOME", "state")]), || {
            Some("/home/u".into())
        })
        .unwrap();
        assert_eq!(d, Path::new("/home/u/.local/state/rocectl"));
        let d = dir_from(env(&[("HOME", "/home/a"), ("XDG_STATE_HOME", "/x/state")]), || None).unwrap();
        assert_eq!(d, Path::new("/x/state/rocectl"));
        let d = dir_from(env(&[("HOME", "/home/a"), ("ROCECTL_STATE_DIR", "/s")]), || None).unwrap();
        assert_eq!(d, Path::new("/s"));
        assert_eq!(
            dir_from(env(&[("HOME", "/home/a")]), || None).unwrap(),
            Path::new("/home/a/.local/state/rocectl")
        );
    }

    /// Issue 41 item 5: the old names mapped `x/a_b.sock` and `x/a/b.sock` to one file. The key
    /// is the canonical path, so one socket spelt two ways is one key, and two sockets are two.
    #[test]
    fn a_baseline_is_keyed_by_the_switch_not_its_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(d.join("a")).unwrap();
        for f in ["a_b.sock", "a/b.sock"] {
            std::fs::write(d.join(f), "").unwrap();
        }
        std::os::unix::fs::symlink(d.join("a/b.sock"), d.join("link.sock")).unwrap();
        let key = |p: &Path| identity(&Endpoint::Unix(p.to_path_buf()));
        let (ab, a_b) = (key(&d.join("a_b.sock")), key(&d.join("a/b.sock")));
        assert_ne!(ab, a_b);
        assert_ne!(file_name(&ab), file_name(&a_b));
        assert_eq!(a_b, format!("unix:{}/a/b.sock", d.display()));
        for same in ["a/../a/b.sock", "link.sock", "./a/b.sock"] {
            assert_eq!(key(&d.join(same)), a_b, "{same}");
        }
        assert!(file_name(&a_b).starts_with("counters-b.sock-"), "{}", file_name(&a_b));
        // Bytes that are not printable ASCII are escaped, never merged.
        let raw = d.join(std::ffi::OsStr::from_bytes(b"\xff"));
        let literal = PathBuf::from(format!("{}/\\xff", d.display()));
        assert_ne!(key(&raw), key(&literal));
        let tcp = |a: &str| {
            identity(&Endpoint::Tcp {
                addr: a.into(),
                token: String::new(),
            })
        };
        assert_eq!(tcp("127.0.0.1:7000"), "tcp:127.0.0.1:7000");
        assert_ne!(tcp("127.0.0.1:7000"), tcp("127.0.0.1:7001"));
    }
}

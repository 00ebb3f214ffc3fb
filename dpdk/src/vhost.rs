//! The vhost-user server socket of a `net_vhost` port, before and after DPDK creates it. Needs
//! no DPDK.
//!
//! The driver creates the socket when the port starts: its directory must exist and nothing
//! may sit at its path, or DPDK fails with a message about configuring queues. A socket left
//! by a switch that did not exit cleanly (nobody answers it) should not stop the next start;
//! but a socket nobody answers may as well be another service's, stopped for now, and deleting
//! it would break that service. So the switch records each socket it created in a file beside
//! it (`SOCKET.rocesw`: the socket's device, inode and change time) and removes a silent
//! socket only when that record matches it.

use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Where the record of a socket this switch created is kept: `SOCKET.rocesw` beside it.
pub fn record_path(socket: &Path) -> PathBuf {
    let mut p = socket.as_os_str().to_owned();
    p.push(".rocesw");
    PathBuf::from(p)
}

/// What identifies one socket file: another socket later made at the same path differs.
fn identity(socket: &Path) -> std::io::Result<String> {
    let m = socket.symlink_metadata()?;
    Ok(format!(
        "rocesw vhost-user socket {} {} {}.{:09}\n",
        m.dev(),
        m.ino(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

/// Records that this switch created the socket at `socket` (call once the port started).
pub fn record_created(socket: &Path) -> std::io::Result<()> {
    std::fs::write(record_path(socket), identity(socket)?)
}

/// Whether the socket at `socket` is one this switch recorded creating.
pub fn created_by_rocesw(socket: &Path) -> bool {
    match (std::fs::read_to_string(record_path(socket)), identity(socket)) {
        (Ok(recorded), Ok(now)) => recorded == now,
        _ => false,
    }
}

/// Removes the record (after a clean stop, when the driver has removed the socket).
pub fn forget(socket: &Path) {
    let _ = std::fs::remove_file(record_path(socket));
}

/// Makes `iface` ready for the driver to create a server socket there: its directory must
/// exist; nothing but a socket may be there; a socket that answers belongs to a running
/// process; a silent one is removed only if this switch recorded creating it. `Ok(true)` when
/// a stale socket of ours was removed.
pub fn prepare_server_socket(iface: &str) -> Result<bool, String> {
    let path = Path::new(iface);
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(format!(
            "the vhost-user socket's directory {} does not exist: create it (rocesw creates the \
             socket, not its directory)",
            dir.display()
        ));
    }
    let meta = match path.symlink_metadata() {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            forget(path); // the record of a socket the driver removed at a clean exit
            return Ok(false);
        }
        Err(e) => return Err(format!("{iface}: {e}")),
    };
    if !meta.file_type().is_socket() {
        return Err(format!(
            "{iface} already exists and is not a socket: choose another path"
        ));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(format!(
            "{iface} is served by another process (another rocesw?): stop it or choose another path"
        ));
    }
    if !created_by_rocesw(path) {
        return Err(format!(
            "{iface} is a socket nobody answers that this switch did not create (another \
             service's, stopped?): rocesw removes only sockets it made; remove it yourself if it \
             is stale, or choose another path"
        ));
    }
    std::fs::remove_file(path).map_err(|e| format!("cannot remove the stale socket {iface}: {e}"))?;
    forget(path);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A socket file nobody answers (its listener closed; the file stays).
    fn silent_socket(path: &Path) {
        drop(UnixListener::bind(path).unwrap());
        assert!(path.symlink_metadata().unwrap().file_type().is_socket());
    }

    /// Issue 21 item 15: a silent socket this switch did not create (another service's,
    /// stopped) is refused and left in place; one it recorded creating (a switch that crashed)
    /// is removed; one that answers, or a plain file, is refused.
    #[test]
    fn only_a_silent_socket_of_ours_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("vm0.sock");
        let s = sock.to_str().unwrap();
        assert_eq!(prepare_server_socket(s), Ok(false), "nothing there");

        silent_socket(&sock);
        let e = prepare_server_socket(s).unwrap_err();
        assert!(e.contains("did not create") && e.contains("vm0.sock"), "{e}");
        assert!(sock.exists(), "another service's socket stays");

        record_created(&sock).unwrap();
        assert!(created_by_rocesw(&sock));
        assert_eq!(prepare_server_socket(s), Ok(true));
        assert!(
            !sock.exists() && !record_path(&sock).exists(),
            "ours is removed, with its record"
        );

        // A record of an earlier socket does not cover a new one at the same path.
        silent_socket(&sock);
        record_created(&sock).unwrap();
        std::fs::remove_file(&sock).unwrap();
        silent_socket(&sock);
        assert!(!created_by_rocesw(&sock));
        assert!(prepare_server_socket(s).is_err());
        std::fs::remove_file(&sock).unwrap();

        let _live = UnixListener::bind(&sock).unwrap();
        assert!(prepare_server_socket(s)
            .unwrap_err()
            .contains("served by another process"));

        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        assert!(prepare_server_socket(file.to_str().unwrap())
            .unwrap_err()
            .contains("not a socket"));
        let e = prepare_server_socket(dir.path().join("no/such.sock").to_str().unwrap()).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
    }
}

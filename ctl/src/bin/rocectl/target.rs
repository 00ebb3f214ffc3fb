//! Which switches a command talks to (`--socket`, `--switch`, `--all`, `--tcp`, given before or
//! after the command), finding them (`rocectl switches`), and running a command against each
//! with rocectl's error and exit conventions.

use crate::cli::{Command, ConnectionArgs};
use controlplane::protocol::{self, Client, ClientError, Endpoint, Op};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The connection options `command` runs with. They may follow the command or, the order
/// rocectl always took, precede it, but not both: a pair given in two places is refused rather
/// than one silently winning. With none given, `ROCECTL_SWITCH` (`env`) names the switches,
/// else the default socket. `None` for a command that talks to no switch it is told of
/// (`check`, `headroom`, `switches`), which refuses connection options given before it (after
/// it, clap already refuses them as unknown).
pub fn connection(
    before: &ConnectionArgs,
    command: &Command,
    env: Option<&str>,
) -> Result<Option<ConnectionArgs>, String> {
    let name = command.name();
    let Some(after) = command.connection() else {
        let given = before.given();
        if given.is_empty() {
            return Ok(None);
        }
        let why = match command {
            Command::Switches => format!("lists every switch socket in {}", protocol::SOCKET_DIR),
            _ => "works offline".to_string(),
        };
        return Err(format!(
            "`{name}` {why} and talks to no switch you name: remove {}",
            given.join(", ")
        ));
    };
    let (b, a) = (before.given(), after.given());
    match (b.is_empty(), a.is_empty()) {
        (false, false) => Err(format!(
            "connection options before `{name}` ({}) and after it ({}): give them in one place",
            b.join(", "),
            a.join(", ")
        )),
        (false, true) => Ok(Some(before.clone())),
        (true, false) => Ok(Some(after.clone())),
        (true, true) => Ok(Some(ConnectionArgs {
            switches: env
                .unwrap_or_default()
                .split(',')
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect(),
            ..ConnectionArgs::default()
        })),
    }
}

/// The switches the connection options address, each with a label for multi-switch output.
pub fn targets(conn: &ConnectionArgs) -> Result<Vec<(String, Endpoint)>, String> {
    if let (Some(addr), Some(file)) = (&conn.tcp, &conn.token_file) {
        let token = protocol::read_token_file(file)?;
        return Ok(vec![(
            format!("tcp://{addr}"),
            Endpoint::Tcp {
                addr: addr.clone(),
                token,
            },
        )]);
    }
    if conn.all {
        let found = socket_files()?;
        if found.is_empty() {
            return Err(format!("--all: no switch sockets in {}", protocol::SOCKET_DIR));
        }
        return Ok(found.into_iter().map(|(n, p)| (n, Endpoint::Unix(p))).collect());
    }
    if conn.switches.is_empty() {
        let socket = conn
            .socket
            .clone()
            .unwrap_or_else(|| PathBuf::from(protocol::DEFAULT_SOCKET));
        return Ok(vec![(socket.display().to_string(), Endpoint::Unix(socket))]);
    }
    conn.switches
        .iter()
        .map(|n| {
            protocol::check_name(n)?;
            Ok((n.clone(), Endpoint::Unix(protocol::socket_of(n))))
        })
        .collect()
}

/// `*.sock` in the socket directory, by name.
fn socket_files() -> Result<Vec<(String, PathBuf)>, String> {
    let dir = Path::new(protocol::SOCKET_DIR);
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let p = e.path();
            let stem = p.file_stem()?.to_str()?.to_string();
            (p.extension()? == "sock").then_some((stem, p))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// `rocectl switches`.
pub fn switches() -> Result<(), String> {
    let found = socket_files()?;
    if found.is_empty() {
        println!("no switch sockets in {}", protocol::SOCKET_DIR);
        return Ok(());
    }
    println!("{:<16} {:<16} {:>12}  socket", "name", "server", "uptime");
    for (stem, path) in found {
        let hello = Client::connect(&path).and_then(|mut c| {
            c.set_timeout(Some(Duration::from_secs(2)))?;
            c.call_as::<protocol::HelloData>(Op::Hello)
        });
        match hello {
            Ok(h) => println!(
                "{:<16} {:<16} {:>12}  {}",
                h.name.unwrap_or(stem),
                h.server,
                h.uptime_ms.map_or("-".into(), |ms| format!("{:.1} s", ms as f64 / 1e3)),
                path.display()
            ),
            Err(e) => println!(
                "{stem:<16} {:<16} {:>12}  {} ({e})",
                "not answering",
                "-",
                path.display()
            ),
        }
    }
    Ok(())
}

/// Runs a command against each switch in turn (with a heading when there are several); exit
/// 1 if any failed.
pub fn each(targets: &[(String, Endpoint)], mut f: impl FnMut(&Endpoint) -> Result<(), String>) -> ExitCode {
    let mut failed = false;
    for (label, socket) in targets {
        if targets.len() > 1 {
            println!("== {label} ==");
        }
        if let Err(e) = f(socket) {
            eprintln!(
                "rocectl: {}{e}",
                if targets.len() > 1 {
                    format!("{label}: ")
                } else {
                    String::new()
                }
            );
            failed = true;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs a command against the switch: errors on stderr, exit 1.
pub fn live(f: impl FnOnce() -> Result<(), String>) -> ExitCode {
    match f() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocectl: {e}");
            ExitCode::FAILURE
        }
    }
}

pub fn connect(ep: &Endpoint) -> Result<Client, String> {
    let mut c = Client::connect_to(ep).map_err(|e| e.to_string())?;
    c.set_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    Ok(c)
}

pub fn err(e: ClientError) -> String {
    e.to_string()
}

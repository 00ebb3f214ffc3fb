//! `rocectl`: rocesw's control-plane command line. Offline: validate a config (`check`) and the
//! PFC headroom calculator (`headroom`). Against a running switch, over its control socket
//! (`controlplane/PROTOCOL.md`): `show`, `apply`, `set`, `watch`, and `daemon`, which keeps a
//! switch on a config file and serves Prometheus metrics (`controlplane/src/daemon.rs`).

use clap::{Parser, Subcommand, ValueEnum};
use controlplane::protocol::{self, ApplyData, Client, ClientError, Endpoint, Op};
use controlplane::{headroom, units};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(name = "rocectl", version, about = "Configure and inspect rocesw switches")]
struct Cli {
    /// The running switch's control socket (`rocesw run --control`).
    #[arg(long, global = true, value_name = "PATH", default_value = protocol::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Address switches by name (`rocesw run --name NAME` listens on /run/rocesw/NAME.sock):
    /// repeat or separate with commas. `show`, `apply` and `set` then act on each in turn.
    #[arg(
        long = "switch",
        short = 's',
        global = true,
        value_name = "NAME",
        value_delimiter = ',',
        env = "ROCECTL_SWITCH",
        conflicts_with = "socket"
    )]
    switches: Vec<String>,
    /// Every switch with a socket in /run/rocesw (see `rocectl switches`).
    #[arg(long, global = true, conflicts_with_all = ["socket", "switches"])]
    all: bool,
    /// Talk to a switch over TCP instead (`rocesw run --control-tcp`): its loopback address.
    #[arg(long, global = true, value_name = "ADDR", requires = "token_file", conflicts_with_all = ["socket", "switches", "all"])]
    tcp: Option<String>,
    /// The token file for --tcp (private to its owner, as the switch's).
    #[arg(long, global = true, value_name = "FILE", requires = "tcp")]
    token_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a config file offline: every error with its field, then the budget warnings.
    /// Exit 0 when valid (warnings allowed), 1 when invalid.
    Check {
        /// The TOML config to check.
        file: PathBuf,
        /// Also print the resolved buffer figures (cells, headroom per port and PG).
        #[arg(long, short)]
        verbose: bool,
    },
    /// PFC headroom for a lossless PG: what still arrives after XOFF, with the working shown.
    #[command(
        after_help = "Examples (the UCloud figures: about 98 and 408 cells):\n  rocectl headroom --speed 25G --cable 15m\n  rocectl headroom --speed 100G --cable 100m"
    )]
    Headroom {
        /// Port speed, e.g. 25G, 100G, 400G.
        #[arg(long, value_parser = rate)]
        speed: u64,
        /// Cable length, e.g. 15m, 100m, 2km.
        #[arg(long, value_parser = length)]
        cable: f64,
        /// IP MTU in bytes (the largest frame is MTU + 18).
        #[arg(long, default_value_t = 1500)]
        mtu: u32,
        /// Buffer cell size, e.g. 256 or 256B.
        #[arg(long, default_value = "256B", value_parser = size)]
        cell: u64,
    },
    /// Show a running switch's counters, queues, PGs, PFC, buffer, watermarks, MAC table or config.
    #[command(
        after_help = "Examples:\n  rocectl show pfc\n  rocectl show watermarks --persistent\n  rocectl --switch leaf1 show config > leaf1.toml"
    )]
    Show {
        what: Show,
        /// The switch's answer as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// With `watermarks`: the persistent watermarks instead of the user ones.
        #[arg(long)]
        persistent: bool,
    },
    /// Clear watermarks: the user ones (what `show watermarks` shows), or with `--persistent`
    /// the persistent ones; the other kind is untouched. Peaks restart from the current use.
    Clear {
        what: ClearWhat,
        #[arg(long)]
        persistent: bool,
    },
    /// Replace the running switch's config with FILE (validated whole; all or nothing).
    Apply { file: PathBuf },
    /// Change one live knob of the running switch (ECN, alpha, PG, queue, policer, PFC,
    /// watchdog, DSCP), globally or with --port on one port; applied whole, all or nothing.
    #[command(subcommand)]
    Set(controlplane::set::Set),
    /// Merge a TOML fragment into the running config (FILE, or - for stdin): anything `set`
    /// has no subcommand for, e.g. classification rules. Tables merge key by key; arrays replace.
    #[command(after_help = "Example:\n  printf '[fdb]\\naging = \"60s\"\\n' | rocectl patch -")]
    Patch { file: PathBuf },
    /// The switches listening in /run/rocesw: name, version, uptime (or why one does not answer).
    Switches,
    /// Keep the switch on the config in FILE: apply it now, after every valid edit of the
    /// file, and whenever the switch restarts; refuse bad edits with the reason (the running
    /// config stays). Serves Prometheus metrics of every counter on a loopback address.
    #[command(
        after_help = "Examples:\n  rocectl daemon --config /etc/rocesw/switch.toml\n  rocectl --socket /run/rocesw/leaf1.sock daemon --config leaf1.toml --metrics 127.0.0.1:9465\n  curl -s localhost:9464/metrics | grep rocesw_queue_ecn_marked"
    )]
    Daemon {
        /// The desired config (TOML); it must be valid for the daemon to start.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Where to serve Prometheus metrics (loopback only; port 0 picks a free one).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
        metrics: std::net::SocketAddr,
        /// Do not serve metrics.
        #[arg(long)]
        no_metrics: bool,
        /// How often the file is checked and the switch is heartbeated.
        #[arg(long, value_name = "MS", default_value_t = 250, value_parser = clap::value_parser!(u64).range(20..=60_000))]
        poll_ms: u64,
        /// The `switch` label of the metrics (default: the socket's file name).
        #[arg(long)]
        name: Option<String>,
    },
    /// Live view until interrupted: per port rates, ECN marks, PFC sent and received, drops,
    /// time paused and buffer use; per busy queue its rate, marks, drops and depth.
    Watch {
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..))]
        interval_ms: u64,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Show {
    /// Per port: packets and bytes each way, ECN marks, drops by reason.
    Counters,
    /// Per egress queue: transmitted, dropped, ECN-marked, depth and peak.
    Queues,
    /// Per ingress priority group: received, dropped, XOFF/XON sent, cells in use and peaks.
    Pgs,
    /// PFC frames sent and received per priority, and the time paused.
    Pfc,
    /// The shared buffer pool and per-port watermarks.
    Buffer,
    /// The MAC table.
    Fdb,
    /// Peak buffer use per PG, queue, port and pool since the watermarks were last cleared
    /// (user watermarks; `--persistent` for the persistent ones).
    Watermarks,
    /// The running config (TOML).
    Config,
}

#[derive(Clone, Copy, ValueEnum)]
enum ClearWhat {
    /// Buffer watermarks (peaks) of every PG, queue, port and the pool.
    Watermarks,
}

fn rate(s: &str) -> Result<u64, String> {
    units::parse_rate(s).map_err(|e| e.to_string())
}

fn length(s: &str) -> Result<f64, String> {
    units::parse_length(s).map_err(|e| e.to_string())
}

fn size(s: &str) -> Result<u64, String> {
    units::parse_size(s).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let targets = match targets(&cli) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("rocectl: {e}");
            return ExitCode::from(2);
        }
    };
    let socket = targets[0].1.clone();
    // Commands that talk to one switch at a time.
    let single = |what: &str| -> Result<(), String> {
        if targets.len() > 1 {
            return Err(format!("{what} works on one switch at a time (got {})", targets.len()));
        }
        Ok(())
    };
    match cli.command {
        Command::Check { file, verbose } => match controlplane::load_file(&file) {
            Ok(loaded) => {
                for w in &loaded.warnings {
                    println!("warning: {w}");
                }
                let c = &loaded.config;
                println!(
                    "{}: valid ({} ports, {} buffer in {} B cells, {} warning{})",
                    file.display(),
                    c.ports.len(),
                    units::format_size(c.buffer.total_bytes),
                    c.buffer.cell_bytes,
                    loaded.warnings.len(),
                    if loaded.warnings.len() == 1 { "" } else { "s" }
                );
                if verbose {
                    for p in &c.ports {
                        let hr: Vec<String> = (0..controlplane::NUM_TC)
                            .filter(|&pg| c.pgs[pg].lossless)
                            .map(|pg| format!("PG{pg} headroom {}", units::format_size(p.headroom_bytes[pg])))
                            .collect();
                        println!(
                            "  port {}: {} {} cable, max frame {} B{}{}",
                            p.id,
                            units::format_rate(p.speed_bps),
                            units::format_length(p.cable_m),
                            p.max_frame_bytes,
                            if hr.is_empty() { "" } else { ", " },
                            hr.join(", ")
                        );
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: invalid:", file.display());
                for p in e.problems() {
                    eprintln!("  {p}");
                }
                ExitCode::FAILURE
            }
        },
        Command::Headroom {
            speed,
            cable,
            mtu,
            cell,
        } => {
            if !(64..=65536).contains(&cell) {
                eprintln!("rocectl: --cell must be between 64 B and 64 KiB");
                return ExitCode::from(2);
            }
            println!("{}", headroom::headroom(speed, cable, mtu, cell as u32));
            ExitCode::SUCCESS
        }
        Command::Show { what, json, persistent } => each(&targets, |s| show(s, what, json, kind(persistent))),
        Command::Clear {
            what: ClearWhat::Watermarks,
            persistent,
        } => each(&targets, |s| {
            let mut c = connect(s)?;
            c.call(Op::ClearWatermarks { kind: kind(persistent) }).map_err(err)?;
            println!("cleared the {} watermarks", kind(persistent));
            Ok(())
        }),
        Command::Apply { file } => match std::fs::read_to_string(&file) {
            Ok(text) => each(&targets, |s| {
                change(
                    s,
                    Op::Apply {
                        toml: text.clone(),
                        if_version: None,
                    },
                )
            }),
            Err(e) => live(|| Err(format!("{}: cannot read: {e}", file.display()))),
        },
        Command::Set(set) => each(&targets, |s| set_knob(s, &set)),
        Command::Patch { file } => {
            let text = if file.as_os_str() == "-" {
                let mut t = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut t).map(|_| t)
            } else {
                std::fs::read_to_string(&file)
            };
            match text {
                Ok(text) => each(&targets, |s| {
                    change(
                        s,
                        Op::Patch {
                            toml: text.clone(),
                            if_version: None,
                        },
                    )
                }),
                Err(e) => live(|| Err(format!("{}: cannot read: {e}", file.display()))),
            }
        }
        Command::Watch { interval_ms } => live(|| {
            single("watch")?;
            watch(&socket, interval_ms)
        }),
        Command::Switches => live(switches),
        Command::Daemon {
            config,
            metrics,
            no_metrics,
            poll_ms,
            name,
        } => live(|| {
            single("daemon")?;
            let _ = tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
                )
                .with_writer(std::io::stderr)
                .try_init();
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
            }
            let name = name.unwrap_or_else(|| match &socket {
                Endpoint::Unix(p) => p
                    .file_stem()
                    .map_or_else(|| "rocesw".into(), |s| s.to_string_lossy().into_owned()),
                Endpoint::Tcp { addr, .. } => addr.clone(),
            });
            controlplane::daemon::run(
                controlplane::daemon::DaemonOptions {
                    config,
                    socket: socket.clone(),
                    name,
                    metrics: (!no_metrics).then_some(metrics),
                    poll: Duration::from_millis(poll_ms),
                },
                stop,
            )
        }),
    }
}

/// The switches a command addresses, each with a label for multi-switch output.
fn targets(cli: &Cli) -> Result<Vec<(String, Endpoint)>, String> {
    if let (Some(addr), Some(file)) = (&cli.tcp, &cli.token_file) {
        let token = protocol::read_token_file(file)?;
        return Ok(vec![(
            format!("tcp://{addr}"),
            Endpoint::Tcp {
                addr: addr.clone(),
                token,
            },
        )]);
    }
    if cli.all {
        let found = socket_files()?;
        if found.is_empty() {
            return Err(format!("--all: no switch sockets in {}", protocol::SOCKET_DIR));
        }
        return Ok(found.into_iter().map(|(n, p)| (n, Endpoint::Unix(p))).collect());
    }
    if cli.switches.is_empty() {
        return Ok(vec![(
            cli.socket.display().to_string(),
            Endpoint::Unix(cli.socket.clone()),
        )]);
    }
    cli.switches
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
fn switches() -> Result<(), String> {
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
fn each(targets: &[(String, Endpoint)], mut f: impl FnMut(&Endpoint) -> Result<(), String>) -> ExitCode {
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
fn live(f: impl FnOnce() -> Result<(), String>) -> ExitCode {
    match f() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocectl: {e}");
            ExitCode::FAILURE
        }
    }
}

fn connect(ep: &Endpoint) -> Result<Client, String> {
    let mut c = Client::connect_to(ep).map_err(|e| e.to_string())?;
    c.set_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    Ok(c)
}

fn err(e: ClientError) -> String {
    e.to_string()
}

fn kind(persistent: bool) -> protocol::WatermarkKind {
    if persistent {
        protocol::WatermarkKind::Persistent
    } else {
        protocol::WatermarkKind::User
    }
}

fn show(socket: &Endpoint, what: Show, json: bool, kind: protocol::WatermarkKind) -> Result<(), String> {
    let mut c = connect(socket)?;
    let op = match what {
        Show::Fdb => Op::Fdb,
        Show::Watermarks => Op::Watermarks { kind },
        Show::Config => Op::GetConfig,
        _ => Op::Counters,
    };
    let data = c.call(op).map_err(err)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&data).map_err(|e| e.to_string())?);
        return Ok(());
    }
    print!("{}", render(what, &data)?);
    Ok(())
}

fn render(what: Show, data: &serde_json::Value) -> Result<String, String> {
    let bad = |e: serde_json::Error| format!("unexpected answer from the switch: {e}");
    match what {
        Show::Fdb => {
            let rows: Vec<FdbRow> = serde_json::from_value(data.clone()).map_err(bad)?;
            return Ok(render_fdb(&rows));
        }
        Show::Config => return Ok(data["toml"].as_str().unwrap_or_default().to_string()),
        Show::Watermarks => {
            let w: protocol::WatermarksData = serde_json::from_value(data.clone()).map_err(bad)?;
            return render_watermarks(&w).map_err(bad);
        }
        _ => {}
    }
    let s: Snapshot = serde_json::from_value(data.clone()).map_err(bad)?;
    Ok(match what {
        Show::Counters => render_counters(&s),
        Show::Queues => render_queues(&s),
        Show::Pgs => render_pgs(&s),
        Show::Pfc => render_pfc(&s),
        Show::Buffer => render_buffer(&s),
        Show::Fdb | Show::Config | Show::Watermarks => unreachable!(),
    })
}

/// Like SONiC's `show priority-group watermark` and `show queue watermark`: one row per port,
/// one column per PG or queue, in cells.
fn render_watermarks(w: &protocol::WatermarksData) -> Result<String, serde_json::Error> {
    let ports: Vec<Port> = serde_json::from_value(w.ports.clone())?;
    let pool: Pool = serde_json::from_value(w.buffer.clone()).unwrap_or_default();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} watermarks, in cells, since {:.1} s ago (rocectl clear watermarks{})",
        w.kind,
        w.since_ms as f64 / 1e3,
        if w.kind == protocol::WatermarkKind::Persistent {
            " --persistent"
        } else {
            ""
        }
    );
    let grid = |o: &mut String, title: &str, label: &str, row: &dyn Fn(&Port) -> Vec<(u8, u32)>| {
        let _ = writeln!(o, "\n{title}");
        let _ = write!(o, "{:>4}", "port");
        for i in 0..8 {
            let _ = write!(o, " {:>8}", format!("{label}{i}"));
        }
        let _ = writeln!(o);
        for p in &ports {
            let mut cells = [None; 8];
            for (i, v) in row(p) {
                if let Some(c) = cells.get_mut(i as usize) {
                    *c = Some(v);
                }
            }
            let _ = write!(o, "{:>4}", p.id);
            for c in cells {
                let _ = write!(o, " {:>8}", c.map_or("-".into(), |v| v.to_string()));
            }
            let _ = writeln!(o);
        }
    };
    grid(&mut o, "Ingress PG shared+min (peak cells):", "PG", &|p| {
        p.pgs.iter().map(|g| (g.pg, g.peak_cells)).collect()
    });
    grid(&mut o, "Ingress PG headroom (peak cells):", "PG", &|p| {
        p.pgs.iter().map(|g| (g.pg, g.peak_headroom_cells)).collect()
    });
    grid(&mut o, "Egress queues (peak cells):", "Q", &|p| {
        p.queues.iter().map(|q| (q.queue, q.peak_cells)).collect()
    });
    let _ = writeln!(o, "\n{:>4} {:>14} {:>14}", "port", "ingress peak", "egress peak");
    for p in &ports {
        let _ = writeln!(
            o,
            "{:>4} {:>14} {:>14}",
            p.id, p.buffer.peak_ingress_cells, p.buffer.peak_egress_cells
        );
    }
    let _ = writeln!(
        o,
        "\npool: used {} cells, ingress shared {}, egress shared {} (peaks)",
        pool.peak_used_cells, pool.peak_ingress_shared_cells, pool.peak_egress_shared_cells
    );
    Ok(o)
}

fn change(socket: &Endpoint, op: Op) -> Result<(), String> {
    let mut c = connect(socket)?;
    let answer: ApplyData = c.call_as(op).map_err(err)?;
    report_change(&answer);
    Ok(())
}

fn report_change(answer: &ApplyData) {
    for w in &answer.warnings {
        println!("warning: {w}");
    }
    if answer.changed.is_empty() {
        println!("applied: nothing changed");
    } else {
        println!("applied; changed: {}", answer.changed.join(", "));
    }
}

/// `rocectl set`: reads the running config, edits it and applies the whole result, but only if
/// nobody changed the config in between (`if_version`); if somebody did, reads it again and
/// redoes the edit on top of their change, so concurrent `set`s all take effect.
fn set_knob(socket: &Endpoint, set: &controlplane::set::Set) -> Result<(), String> {
    const ATTEMPTS: u32 = 20;
    let mut c = connect(socket)?;
    for attempt in 1..=ATTEMPTS {
        let running: protocol::ConfigData = c.call_as(Op::GetConfig).map_err(err)?;
        let mut table: toml::Table = running
            .toml
            .parse()
            .map_err(|e| format!("the switch's running config does not parse: {e}"))?;
        controlplane::set::edit(&mut table, set)?;
        let toml = controlplane::retext::rewrite(&running.toml, &table)?;
        let op = Op::Apply {
            toml,
            if_version: Some(running.version),
        };
        match c.call_as::<ApplyData>(op) {
            Ok(answer) => {
                report_change(&answer);
                return Ok(());
            }
            Err(protocol::ClientError::Refused(e))
                if e.starts_with(protocol::VERSION_CHANGED) && attempt < ATTEMPTS =>
            {
                // Somebody else's change landed first: back off a little, then redo ours on it.
                std::thread::sleep(Duration::from_millis(u64::from(attempt) * 2));
            }
            Err(e) => return Err(err(e)),
        }
    }
    Err(format!(
        "the running config kept changing; gave up after {ATTEMPTS} attempts"
    ))
}

fn watch(socket: &Endpoint, interval_ms: u64) -> Result<(), String> {
    use std::io::IsTerminal;
    let mut c = connect(socket)?;
    c.set_timeout(Some(Duration::from_millis(interval_ms) + Duration::from_secs(10)))
        .map_err(err)?;
    c.call(Op::Subscribe { interval_ms }).map_err(err)?;
    let tty = std::io::stdout().is_terminal();
    let mut prev: Option<(Instant, Snapshot)> = None;
    loop {
        let data = c.read_data().map_err(err)?;
        let s: Snapshot = serde_json::from_value(data).map_err(|e| format!("unexpected answer: {e}"))?;
        let now = Instant::now();
        let secs = prev.as_ref().map_or(0.0, |(t, _)| now.duration_since(*t).as_secs_f64());
        let table = render_rates(prev.as_ref().map(|(_, p)| p), &s, secs);
        if tty {
            print!("\x1b[H\x1b[2J{table}");
        } else {
            print!("{table}");
        }
        prev = Some((now, s));
    }
}

// What the switch sends (dataplane's report::Snapshot), as far as rocectl reads it. Fields it
// does not know are ignored; missing ones read as zero.

#[derive(Deserialize, Default)]
#[serde(default)]
struct Snapshot {
    ports: Vec<Port>,
    buffer: Pool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Port {
    id: u16,
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
    drops: BTreeMap<String, u64>,
    ecn_marked: u64,
    pfc_tx: Vec<u64>,
    pfc_rx: Vec<u64>,
    pause_rx: u64,
    paused_ns: Vec<u64>,
    watchdog_storms: Vec<u64>,
    buffer: PortUse,
    queues: Vec<Queue>,
    pgs: Vec<Pg>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PortUse {
    ingress_cells: u32,
    peak_ingress_cells: u32,
    egress_cells: u32,
    peak_egress_cells: u32,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Pool {
    total_cells: u32,
    shared_cells: u32,
    used_cells: u32,
    peak_used_cells: u32,
    ingress_shared_cells: u32,
    peak_ingress_shared_cells: u32,
    egress_shared_cells: u32,
    peak_egress_shared_cells: u32,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Queue {
    queue: u8,
    tx_packets: u64,
    tx_bytes: u64,
    dropped_packets: u64,
    ecn_marked: u64,
    depth_packets: u64,
    depth_cells: u32,
    peak_cells: u32,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Pg {
    pg: u8,
    rx_packets: u64,
    dropped_packets: u64,
    xoff_sent: u64,
    xon_sent: u64,
    min_cells: u32,
    shared_cells: u32,
    headroom_cells: u32,
    peak_cells: u32,
    peak_headroom_cells: u32,
}

#[derive(Deserialize)]
struct FdbRow {
    mac: String,
    port: u16,
    is_static: bool,
    age_ns: u64,
}

fn drops(d: &BTreeMap<String, u64>) -> String {
    if d.is_empty() {
        "-".into()
    } else {
        d.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }
}

fn render_counters(s: &Snapshot) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:>4} {:>12} {:>14} {:>12} {:>14} {:>10}  drops",
        "port", "rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes", "ecn_ce"
    );
    for p in &s.ports {
        let _ = writeln!(
            o,
            "{:>4} {:>12} {:>14} {:>12} {:>14} {:>10}  {}",
            p.id,
            p.rx_packets,
            p.rx_bytes,
            p.tx_packets,
            p.tx_bytes,
            p.ecn_marked,
            drops(&p.drops)
        );
    }
    o
}

fn render_queues(s: &Snapshot) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:>4} {:>5} {:>12} {:>14} {:>10} {:>10} {:>8} {:>8} {:>8}",
        "port", "queue", "tx_pkts", "tx_bytes", "dropped", "ecn_ce", "depth", "cells", "peak"
    );
    let mut idle = 0;
    for p in &s.ports {
        for q in &p.queues {
            if q.tx_packets + q.dropped_packets + q.depth_packets + q.peak_cells as u64 == 0 {
                idle += 1;
                continue;
            }
            let _ = writeln!(
                o,
                "{:>4} {:>5} {:>12} {:>14} {:>10} {:>10} {:>8} {:>8} {:>8}",
                p.id,
                q.queue,
                q.tx_packets,
                q.tx_bytes,
                q.dropped_packets,
                q.ecn_marked,
                q.depth_packets,
                q.depth_cells,
                q.peak_cells
            );
        }
    }
    if idle > 0 {
        let _ = writeln!(
            o,
            "({idle} queues that never held a packet not shown; depth in packets, cells of the buffer)"
        );
    }
    o
}

fn render_pgs(s: &Snapshot) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:>4} {:>3} {:>12} {:>10} {:>8} {:>8} {:>6} {:>7} {:>9} {:>6} {:>8}",
        "port", "pg", "rx_pkts", "dropped", "xoff", "xon", "min", "shared", "headroom", "peak", "peak_hr"
    );
    let mut idle = 0;
    for p in &s.ports {
        for g in &p.pgs {
            if g.rx_packets + g.dropped_packets + g.peak_cells as u64 == 0 {
                idle += 1;
                continue;
            }
            let _ = writeln!(
                o,
                "{:>4} {:>3} {:>12} {:>10} {:>8} {:>8} {:>6} {:>7} {:>9} {:>6} {:>8}",
                p.id,
                g.pg,
                g.rx_packets,
                g.dropped_packets,
                g.xoff_sent,
                g.xon_sent,
                g.min_cells,
                g.shared_cells,
                g.headroom_cells,
                g.peak_cells,
                g.peak_headroom_cells
            );
        }
    }
    if idle > 0 {
        let _ = writeln!(
            o,
            "({idle} PGs that never received a packet not shown; min/shared/headroom in cells)"
        );
    }
    o
}

fn render_pfc(s: &Snapshot) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:>4} {:>4} {:>10} {:>10} {:>12} {:>8}",
        "port", "prio", "pfc_tx", "pfc_rx", "paused_ms", "storms"
    );
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    let mut pauses = Vec::new();
    for p in &s.ports {
        let n = p.pfc_tx.len().max(p.pfc_rx.len()).max(p.paused_ns.len());
        for prio in 0..n {
            let (tx, rx, paused, storms) = (
                at(&p.pfc_tx, prio),
                at(&p.pfc_rx, prio),
                at(&p.paused_ns, prio),
                at(&p.watchdog_storms, prio),
            );
            if tx + rx + paused + storms == 0 {
                continue;
            }
            let _ = writeln!(
                o,
                "{:>4} {:>4} {:>10} {:>10} {:>12.3} {:>8}",
                p.id,
                prio,
                tx,
                rx,
                paused as f64 / 1e6,
                storms
            );
        }
        if p.pause_rx > 0 {
            pauses.push(format!("port {}: {}", p.id, p.pause_rx));
        }
    }
    if !pauses.is_empty() {
        let _ = writeln!(o, "802.3x PAUSE received: {}", pauses.join(", "));
    }
    o
}

fn render_buffer(s: &Snapshot) -> String {
    let b = &s.buffer;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "pool: {} cells, {} shared; used {} (peak {}); ingress shared {} (peak {}); egress shared {} (peak {})",
        b.total_cells,
        b.shared_cells,
        b.used_cells,
        b.peak_used_cells,
        b.ingress_shared_cells,
        b.peak_ingress_shared_cells,
        b.egress_shared_cells,
        b.peak_egress_shared_cells
    );
    let _ = writeln!(
        o,
        "{:>4} {:>12} {:>12} {:>12} {:>12}",
        "port", "ingress", "peak_in", "egress", "peak_out"
    );
    for p in &s.ports {
        let u = &p.buffer;
        let _ = writeln!(
            o,
            "{:>4} {:>12} {:>12} {:>12} {:>12}",
            p.id, u.ingress_cells, u.peak_ingress_cells, u.egress_cells, u.peak_egress_cells
        );
    }
    o
}

fn render_fdb(rows: &[FdbRow]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{:<17} {:>4} {:>7} {:>9}", "mac", "port", "type", "age_s");
    for r in rows {
        let _ = writeln!(
            o,
            "{:<17} {:>4} {:>7} {:>9.1}",
            r.mac,
            r.port,
            if r.is_static { "static" } else { "learnt" },
            r.age_ns as f64 / 1e9
        );
    }
    let _ = writeln!(o, "{} entries", rows.len());
    o
}

/// `watch`'s table: per-port rates since the previous update (totals on the first).
fn render_rates(prev: Option<&Snapshot>, s: &Snapshot, secs: f64) -> String {
    let mut o = String::new();
    let rate = |now: u64, then: Option<u64>| match then {
        Some(t) if secs > 0.0 => now.saturating_sub(t) as f64 / secs,
        _ => 0.0,
    };
    let _ = writeln!(
        o,
        "{:>4} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7}  cells in/out",
        "port", "rx_pps", "rx_Mbps", "tx_pps", "tx_Mbps", "ecn/s", "pfc_tx/s", "pfc_rx/s", "drops/s", "paused"
    );
    for p in &s.ports {
        let before = prev.and_then(|q| q.ports.iter().find(|x| x.id == p.id));
        let drops_now: u64 = p.drops.values().sum();
        let pfc_tx = |x: &Port| x.pfc_tx.iter().sum::<u64>();
        let pfc_rx = |x: &Port| x.pfc_rx.iter().sum::<u64>() + x.pause_rx;
        // Share of the interval some priority of this port was paused by its peer (the busiest
        // priority's paused time; priorities pause independently).
        let paused = |x: &Port, i: usize| x.paused_ns.get(i).copied().unwrap_or(0);
        let paused_frac = (0..p.paused_ns.len())
            .map(|i| rate(paused(p, i), before.map(|b| paused(b, i))) / 1e9)
            .fold(0.0, f64::max);
        let _ = writeln!(
            o,
            "{:>4} {:>10.0} {:>10.1} {:>10.0} {:>10.1} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>6.0}%  {}/{}",
            p.id,
            rate(p.rx_packets, before.map(|b| b.rx_packets)),
            rate(p.rx_bytes, before.map(|b| b.rx_bytes)) * 8.0 / 1e6,
            rate(p.tx_packets, before.map(|b| b.tx_packets)),
            rate(p.tx_bytes, before.map(|b| b.tx_bytes)) * 8.0 / 1e6,
            rate(p.ecn_marked, before.map(|b| b.ecn_marked)),
            rate(pfc_tx(p), before.map(pfc_tx)),
            rate(pfc_rx(p), before.map(pfc_rx)),
            rate(drops_now, before.map(|b| b.drops.values().sum())),
            paused_frac.min(1.0) * 100.0,
            p.buffer.ingress_cells,
            p.buffer.egress_cells
        );
    }
    // Queues that hold frames or moved any in the interval: where congestion is, and what ECN
    // and the scheduler do about it.
    let mut rows = String::new();
    for p in &s.ports {
        let before = prev.and_then(|q| q.ports.iter().find(|x| x.id == p.id));
        for q in &p.queues {
            let b = before.and_then(|b| b.queues.iter().find(|x| x.queue == q.queue));
            let tx = rate(q.tx_packets, b.map(|b| b.tx_packets));
            let drops = rate(q.dropped_packets, b.map(|b| b.dropped_packets));
            if q.depth_packets == 0 && tx == 0.0 && drops == 0.0 {
                continue;
            }
            let _ = writeln!(
                rows,
                "{:>4} {:>5} {:>10.0} {:>10.1} {:>8.0} {:>8.0} {:>9} {:>8} {:>8}",
                p.id,
                q.queue,
                tx,
                rate(q.tx_bytes, b.map(|b| b.tx_bytes)) * 8.0 / 1e6,
                rate(q.ecn_marked, b.map(|b| b.ecn_marked)),
                drops,
                q.depth_packets,
                q.depth_cells,
                q.peak_cells
            );
        }
    }
    if !rows.is_empty() {
        let _ = writeln!(
            o,
            "\n{:>4} {:>5} {:>10} {:>10} {:>8} {:>8} {:>9} {:>8} {:>8}",
            "port", "queue", "tx_pps", "tx_Mbps", "ecn/s", "drops/s", "depth_pkt", "cells", "peak"
        );
        o.push_str(&rows);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canned() -> serde_json::Value {
        let q = |i: u8, tx: u64| {
            serde_json::json!({"queue": i, "tx_packets": tx, "tx_bytes": tx * 1000, "dropped_packets": 2,
                "dropped_bytes": 2000, "ecn_marked": 5, "depth_packets": 1, "depth_cells": 4, "depth_bytes": 1000,
                "peak_cells": 40, "peak_bytes": 10000})
        };
        let idle_q = |i: u8| serde_json::json!({"queue": i, "tx_packets": 0, "dropped_packets": 0, "depth_packets": 0, "peak_cells": 0});
        let pg = |i: u8| {
            serde_json::json!({"pg": i, "rx_packets": 100, "rx_bytes": 100000, "dropped_packets": 0, "xoff_sent": 3,
                "xon_sent": 3, "min_cells": 0, "shared_cells": 12, "headroom_cells": 7, "peak_cells": 90,
                "peak_headroom_cells": 20})
        };
        let port = |id: u16| {
            serde_json::json!({"id": id, "rx_packets": 100 + id as u64, "rx_bytes": 123456, "tx_packets": 99,
                "tx_bytes": 654321, "drops": {"no_route": 1, "egress_limit": 4}, "ecn_marked": 5,
                "pfc_tx": [0,0,0,3,0,0,0,0], "pfc_rx": [0,0,0,0,0,0,0,0], "pause_rx": 0,
                "paused_ns": [0,0,0,2500000,0,0,0,0], "unknown_ethertype": 0,
                "watchdog_storms": [0,0,0,0,0,0,0,0], "watchdog_restores": [0,0,0,0,0,0,0,0],
                "buffer": {"ingress_cells": 11, "peak_ingress_cells": 22, "egress_cells": 33, "peak_egress_cells": 44},
                "queues": [q(3, 90), idle_q(0)], "pgs": [pg(3)]})
        };
        serde_json::json!({"ports": [port(0), port(1)],
            "totals": {"rx_packets": 201},
            "buffer": {"total_cells": 16384, "shared_cells": 15000, "used_cells": 44, "peak_used_cells": 500,
                "ingress_shared_cells": 12, "peak_ingress_shared_cells": 90, "egress_shared_cells": 0,
                "peak_egress_shared_cells": 0}})
    }

    #[test]
    fn tables_render_the_switch_answer() {
        let data = canned();
        let c = render(Show::Counters, &data).unwrap();
        assert!(c.lines().next().unwrap().contains("rx_bytes"), "{c}");
        assert!(c.contains("egress_limit=4 no_route=1"), "{c}");
        assert_eq!(c.lines().count(), 3, "{c}");
        let q = render(Show::Queues, &data).unwrap();
        assert!(
            q.lines()
                .nth(1)
                .unwrap()
                .split_whitespace()
                .eq(["0", "3", "90", "90000", "2", "5", "1", "4", "40"]),
            "{q}"
        );
        assert!(q.contains("2 queues that never held a packet"), "{q}");
        let g = render(Show::Pgs, &data).unwrap();
        assert!(
            g.lines()
                .nth(1)
                .unwrap()
                .split_whitespace()
                .eq(["0", "3", "100", "0", "3", "3", "0", "12", "7", "90", "20"]),
            "{g}"
        );
        let p = render(Show::Pfc, &data).unwrap();
        assert!(
            p.lines()
                .nth(1)
                .unwrap()
                .split_whitespace()
                .eq(["0", "3", "3", "0", "2.500", "0"]),
            "{p}"
        );
        let b = render(Show::Buffer, &data).unwrap();
        assert!(
            b.starts_with("pool: 16384 cells, 15000 shared; used 44 (peak 500)"),
            "{b}"
        );
        assert!(
            b.lines()
                .nth(2)
                .unwrap()
                .split_whitespace()
                .eq(["0", "11", "22", "33", "44"]),
            "{b}"
        );
        let f = render(
            Show::Fdb,
            &serde_json::json!([{"mac": "02:00:00:00:00:01", "port": 1, "is_static": false, "age_ns": 1500000000u64}]),
        )
        .unwrap();
        assert!(f.contains("02:00:00:00:00:01    1  learnt       1.5"), "{f}");
        assert!(render(Show::Counters, &serde_json::json!([1]))
            .unwrap_err()
            .contains("unexpected"));
    }

    #[test]
    fn watch_shows_rates_between_updates() {
        let a: Snapshot = serde_json::from_value(canned()).unwrap();
        let mut later = canned();
        later["ports"][0]["rx_packets"] = 300.into();
        later["ports"][0]["rx_bytes"] = (123456 + 250_000).into();
        let b: Snapshot = serde_json::from_value(later).unwrap();
        let t = render_rates(Some(&a), &b, 2.0);
        let row: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(&row[..3], ["0", "100", "1.0"], "{t}");
        assert!(render_rates(None, &b, 0.0).lines().nth(1).unwrap().contains(" 0 "));

        // Paused half the interval on priority 3, PFC received, a queue draining with marks.
        let mut later = canned();
        later["ports"][0]["paused_ns"] = serde_json::json!([0, 0, 0, 1_000_000_000u64, 0, 0, 0, 0]);
        later["ports"][0]["pfc_rx"] = serde_json::json!([0, 0, 0, 10, 0, 0, 0, 0]);
        later["ports"][0]["queues"][0]["tx_packets"] = 390.into();
        later["ports"][0]["queues"][0]["ecn_marked"] = 205.into();
        let c: Snapshot = serde_json::from_value(later).unwrap();
        let t = render_rates(Some(&a), &c, 2.0);
        let row: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row[0], "0", "{t}");
        assert!(row.contains(&"50%"), "{t}");
        let q3 = t
            .lines()
            .skip_while(|l| !l.contains("queue"))
            .find(|l| l.split_whitespace().take(2).eq(["0", "3"]))
            .unwrap_or_else(|| panic!("no row for port 0 queue 3: {t}"));
        let q3: Vec<&str> = q3.split_whitespace().collect();
        assert_eq!(q3[2], "150", "tx pps of queue 3: {t}");
        assert_eq!(q3[4], "100", "marks per second of queue 3: {t}");
    }
}

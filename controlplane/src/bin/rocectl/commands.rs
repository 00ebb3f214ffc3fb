//! What each command does, apart from choosing switches (`target`) and drawing tables
//! (`render`).

use crate::cli::Show;
use crate::render::{render, render_rates};
use crate::target::{connect, err};
use controlplane::protocol::{self, ApplyData, Endpoint, Op};
use controlplane::snapshot::Snapshot;
use controlplane::units;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// `rocectl check`.
pub fn check(file: &Path, verbose: bool) -> ExitCode {
    match controlplane::load_file(file) {
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
                    // An emulated peer's headroom includes its catch-up step: say so, or the
                    // figure looks wrong beside a wire port's.
                    let peer = match p.peer {
                        controlplane::model::PeerKind::Emulated => format!(
                            " (emulated peer: + a {} catch-up step)",
                            units::format_size(controlplane::headroom::EMULATED_STEP_BYTES)
                        ),
                        controlplane::model::PeerKind::Wire => String::new(),
                    };
                    println!(
                        "  port {}: {} {} cable, max frame {} B{}{}{peer}, scheduler {}",
                        p.id,
                        units::format_rate(p.speed_bps),
                        units::format_length(p.cable_m),
                        p.max_frame_bytes,
                        if hr.is_empty() { "" } else { ", " },
                        hr.join(", "),
                        scheduler(&p.scheduler)
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
    }
}

/// A port's scheduler in a line: its kind and, for VL arbitration, the tables as OpenSM
/// writes them (`VL:weight,...`) and the limit in bytes.
fn scheduler(s: &controlplane::SchedulerConfig) -> String {
    use controlplane::{SchedulerConfig, VlArbEntry, VLARB_LIMIT_BYTES, VLARB_UNBOUNDED};
    match s {
        SchedulerConfig::SpWdrr => "sp_wdrr".to_string(),
        SchedulerConfig::VlArb(v) => {
            let t = |e: &[VlArbEntry]| {
                let items: Vec<String> = e.iter().map(|e| format!("{}:{}", e.vl, e.weight)).collect();
                if items.is_empty() {
                    "-".to_string()
                } else {
                    items.join(",")
                }
            };
            let limit = match v.high_limit {
                VLARB_UNBOUNDED => "unbounded".to_string(),
                0 => "one packet".to_string(),
                l => units::format_size(u64::from(l) * u64::from(VLARB_LIMIT_BYTES)),
            };
            format!("vlarb (high {}, low {}, high limit {limit})", t(&v.high), t(&v.low))
        }
    }
}

/// `rocectl daemon`: logging and signals for the foreground process, then `daemon::run`.
pub fn daemon(
    socket: &Endpoint,
    config: PathBuf,
    metrics: Option<std::net::SocketAddr>,
    poll_ms: u64,
    name: Option<String>,
) -> Result<(), String> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .try_init();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
    }
    let name = name.unwrap_or_else(|| match socket {
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
            metrics,
            poll: Duration::from_millis(poll_ms),
        },
        stop,
    )
}

pub fn kind(persistent: bool) -> protocol::WatermarkKind {
    if persistent {
        protocol::WatermarkKind::Persistent
    } else {
        protocol::WatermarkKind::User
    }
}

pub fn show(socket: &Endpoint, what: Show, json: bool, kind: protocol::WatermarkKind) -> Result<(), String> {
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

pub fn change(socket: &Endpoint, op: Op) -> Result<(), String> {
    let mut c = connect(socket)?;
    let answer: ApplyData = c.call_as(op).map_err(err)?;
    report_change(&answer);
    Ok(())
}

fn report_change(answer: &ApplyData) {
    for w in &answer.warnings {
        println!("warning: {w}");
    }
    if answer.unchanged {
        println!("unchanged: nothing to apply (version {})", answer.version);
    } else if answer.changed.is_empty() {
        println!("applied: nothing changed");
    } else {
        println!("applied; changed: {}", answer.changed.join(", "));
    }
}

/// `rocectl set`: reads the running config, edits it and applies the whole result, but only if
/// nobody changed the config in between (`if_version`); if somebody did, reads it again and
/// redoes the edit on top of their change, so concurrent `set`s all take effect.
pub fn set_knob(socket: &Endpoint, set: &controlplane::set::Set) -> Result<(), String> {
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

pub fn watch(socket: &Endpoint, interval_ms: u64) -> Result<(), String> {
    use std::io::{IsTerminal, Write};
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
        let clear = if tty { "\x1b[H\x1b[2J" } else { "" };
        // A reader that went away (`rocectl watch | head`) ends the watch, quietly, as for any
        // Unix tool; `print!` would panic on the broken pipe.
        let mut out = std::io::stdout().lock();
        match write!(out, "{clear}{table}").and_then(|()| out.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(format!("writing to standard output: {e}")),
        }
        prev = Some((now, s));
    }
}

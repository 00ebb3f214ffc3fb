//! What each command does, apart from choosing switches (`target`) and drawing tables
//! (`render`).

use crate::cli::Show;
use crate::render::{
    has_levels, header, interface_rows, render, render_buffer, render_interfaces, render_pfc, render_queues,
    render_rates, Levels, PfcInfo, PortNames,
};
use crate::target::{connect, err};
use controlplane::protocol::{self, ApplyData, Endpoint, Op};
use controlplane::snapshot::Snapshot;
use controlplane::units;
use controlplane::vlarb_admit;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// `rocectl check`.
/// `file` loaded as `check` reads it: a config_db.json with `--platform` / `--pg-lookup` as
/// `sonic import` takes them; either flag on a TOML config is refused.
/// Also the TOML it ran as (an import's, for a config_db.json), whose comments name the
/// origins of an import's values.
fn load_checked(
    file: &Path,
    sonic: &crate::cli::SonicArgs,
) -> Result<(controlplane::Loaded, String), controlplane::ConfigError> {
    use controlplane::{ConfigError, ConfigErrorKind};
    let io = |e: String| ConfigError::new(ConfigErrorKind::Io, vec![e]);
    if sonic.platform.is_none() && sonic.pg_lookup.is_none() {
        let loaded = controlplane::load_file(file)?;
        // Read again only for the origins (load_file said why it could not read it).
        let text = controlplane::files::read_text(file).map_err(io)?;
        let toml = controlplane::config_toml(&text)?.into_owned();
        return Ok((loaded, toml));
    }
    let text = controlplane::files::read_text(file).map_err(io)?;
    if !controlplane::sonic::looks_like_config_db(&text) {
        return Err(io(format!(
            "{}: --platform and --pg-lookup are for a SONiC config_db.json; this is a rocesw TOML",
            file.display()
        )));
    }
    let opts = crate::sonic::options(file, sonic).map_err(io)?;
    let imported = controlplane::sonic::import_text(&text, &opts).map_err(|mut problems| {
        problems.insert(0, "a SONiC config_db.json that cannot be imported:".to_string());
        ConfigError::new(ConfigErrorKind::Invalid, problems)
    })?;
    let loaded = controlplane::load_str(&imported.toml)?;
    Ok((loaded, imported.toml))
}

pub fn check(file: &Path, verbose: bool, sonic: &crate::cli::SonicArgs) -> ExitCode {
    match load_checked(file, sonic) {
        Ok((loaded, toml)) => {
            // A config whose ports would write over what they or the config read cannot run:
            // `rocesw run` refuses it, so `check` must not call it valid.
            let ins = [("the config".to_string(), file)];
            if let Err(e) = controlplane::files::PortFiles::of(&loaded.config).refuse_aliases(&ins, &[]) {
                eprintln!("{}: invalid:\n  {e}", file.display());
                return ExitCode::FAILURE;
            }
            // What `rocesw run` allocates at start-up: refused here, as there, only when the
            // machine has less available.
            if let Some(why) = controlplane::memory::machine_available()
                .and_then(|avail| controlplane::memory::machine_refusal(&loaded.config, avail))
            {
                eprintln!("{}: invalid:\n  {why}", file.display());
                return ExitCode::FAILURE;
            }
            for w in &loaded.warnings {
                println!("warning: {}", crate::buffer::with_origin(&toml, w));
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
            println!("memory: rocesw run {}", controlplane::memory::statement(c));
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
/// writes them (`VL:weight,...`) and the limit in bytes; for EDF, the mode and the budgets.
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
        SchedulerConfig::Edf(e) => {
            let budgets = |b: &[Option<u64>], what: &str| -> Vec<String> {
                b.iter()
                    .enumerate()
                    .filter_map(|(i, ns)| ns.map(|ns| format!("{what} {i} {}", units::format_duration(ns))))
                    .collect()
            };
            let mut parts = budgets(&e.queue_budget_ns, "queue");
            parts.extend(budgets(&e.dscp_budget_ns, "DSCP"));
            if let Some(unit) = e.tag_unit_ns {
                parts.push(format!("flow-label tags in {}", units::format_duration(unit)));
            }
            format!("edf {} ({})", e.mode.name(), parts.join(", "))
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
    on_drift: ctl::daemon::DriftAction,
) -> Result<(), String> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,ctl=info".into()),
        )
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
    ctl::daemon::run(
        ctl::daemon::DaemonOptions {
            config,
            socket: socket.clone(),
            name,
            metrics,
            poll: Duration::from_millis(poll_ms),
            on_drift,
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

/// The unit of buffer levels: cells with `--cells`, else bytes at the running config's cell
/// size (asked of the switch; cells, said on stderr, if its config does not load here).
fn levels(c: &mut protocol::Client, cells: bool) -> Result<Levels, String> {
    if cells {
        return Ok(Levels::Cells);
    }
    let running: protocol::ConfigData = c.call_as(Op::GetConfig).map_err(err)?;
    match controlplane::load_str(&running.toml) {
        Ok(l) => Ok(Levels::Bytes {
            cell: u64::from(l.config.buffer.cell_bytes),
        }),
        Err(e) => {
            eprintln!(
                "rocectl: levels in cells: the running config does not load here, so its cell size is unknown: {e}"
            );
            Ok(Levels::Cells)
        }
    }
}

/// "since start 12.3 s": the switch's uptime, as its `hello` says.
fn since_start(c: &mut protocol::Client) -> Result<String, String> {
    let hello: protocol::HelloData = c.call_as(Op::Hello).map_err(err)?;
    Ok(match hello.uptime_ms {
        Some(ms) => format!("since start {:.1} s", ms as f64 / 1e3),
        None => "since start".to_string(),
    })
}

/// The ids of the ports a user named (`Ethernet8` or `8`) among `known` (id, name), in the
/// order named; `None` when none is named (every port). An unknown one is an error listing the
/// ports.
fn port_filter(known: &[(u16, Option<&str>)], wanted: &[String]) -> Result<Option<Vec<u16>>, String> {
    if wanted.is_empty() {
        return Ok(None);
    }
    let ids = wanted
        .iter()
        .map(|w| controlplane::model::find_port(known, w, "the switch"))
        .collect::<Result<Vec<u16>, String>>()?;
    Ok(Some(ids))
}

/// The id of the port a user named (`Ethernet8` or `8`) on the switch behind `c`; an unknown
/// one is an error listing the ports; with its name where the switch's config gives one.
pub fn port_named(c: &mut protocol::Client, wanted: &str) -> Result<(u16, Option<String>), String> {
    let snap: Snapshot = c.call_as(Op::Counters).map_err(err)?;
    let id = controlplane::model::find_port(&ports_of(&snap), wanted, "the switch")?;
    let name = snap.ports.iter().find(|p| p.id == id).and_then(|p| p.name.clone());
    Ok((id, name))
}

fn ports_of(s: &Snapshot) -> Vec<(u16, Option<&str>)> {
    s.ports.iter().map(|p| (p.id, p.name.as_deref())).collect()
}

fn unexpected(e: serde_json::Error) -> String {
    format!("unexpected answer from the switch: {e}")
}

fn print_json(v: &impl serde::Serialize) -> Result<(), String> {
    println!("{}", serde_json::to_string_pretty(v).map_err(|e| e.to_string())?);
    Ok(())
}

/// `rocectl show WHAT [PORT...]`: the switch's answer as a table, or as JSON. PORTs (names or
/// ids) keep only those ports' rows, in the tables and in the JSON (totals, the pool and the
/// pools stay the switch's).
/// `show config --against FILE`: the running config, after a comment per key where it differs
/// from FILE (its value there and here); `--json`: `{toml, version, differs: [{key, file,
/// running}]}`.
pub fn show_config_against(socket: &Endpoint, file: &std::path::Path, json: bool) -> Result<(), String> {
    let text = controlplane::files::read_text(file)?;
    let table = |text: &str, what: &str| -> Result<toml::Table, String> {
        controlplane::config_toml(text)
            .map_err(|e| format!("{what}: {e}"))?
            .parse::<toml::Table>()
            .map_err(|e| format!("{what}: not TOML: {e}"))
    };
    let want = table(&text, &file.display().to_string())?;
    let mut c = connect(socket)?;
    let running: protocol::ConfigData = c.call_as(Op::GetConfig).map_err(err)?;
    let have = table(&running.toml, "the running config")?;
    let value = |t: &toml::Table, key: &str| -> String {
        let mut v: Option<&toml::Value> = None;
        let mut here = Some(t);
        for part in key.split('.') {
            v = here.and_then(|t| t.get(part));
            here = v.and_then(toml::Value::as_table);
        }
        match v {
            None => "(not set)".into(),
            Some(v) if v.is_array() || v.is_table() => "(differs)".into(),
            Some(v) => v.to_string(),
        }
    };
    let differs: Vec<serde_json::Value> = controlplane::patch::changed_keys(&want, &have)
        .into_iter()
        .map(|k| serde_json::json!({"file": value(&want, &k), "running": value(&have, &k), "key": k}))
        .collect();
    if json {
        return print_json(&serde_json::json!({
            "toml": running.toml, "version": running.version, "against": file.display().to_string(), "differs": differs
        }));
    }
    let mut out = String::new();
    if differs.is_empty() {
        out += &format!(
            "# the running config (version {}) says what {} says\n",
            running.version,
            file.display()
        );
    } else {
        out += &format!(
            "# the running config (version {}) differs from {} in {} key(s):\n",
            running.version,
            file.display(),
            differs.len()
        );
        for d in &differs {
            out += &format!(
                "#   {}: {} in the file, {} running\n",
                d["key"].as_str().unwrap_or_default(),
                d["file"].as_str().unwrap_or_default(),
                d["running"].as_str().unwrap_or_default()
            );
        }
    }
    out += &running.toml;
    print!("{out}");
    Ok(())
}

pub fn show(
    socket: &Endpoint,
    what: Show,
    ports: &[String],
    json: bool,
    kind: protocol::WatermarkKind,
    cells: bool,
    interval_ms: u64,
) -> Result<(), String> {
    if matches!(what, Show::Config) && !ports.is_empty() {
        return Err("show config prints the whole switch's config: it takes no PORT".into());
    }
    let mut c = connect(socket)?;
    if matches!(what, Show::Buffer) {
        return show_buffer(&mut c, ports, json, cells);
    }
    if matches!(what, Show::Interfaces) {
        return show_interfaces(&mut c, ports, json, interval_ms);
    }
    let op = match what {
        Show::Fdb => Op::Fdb,
        Show::Watermarks => Op::Watermarks { kind },
        Show::Config => Op::GetConfig,
        _ => Op::Counters,
    };
    let data = c.call(op).map_err(err)?;
    let at = std::time::SystemTime::now();
    match what {
        Show::Config => {
            if json {
                return print_json(&data);
            }
            // The TOML as it runs (to save and apply again).
            print!("{}", render(what, &data, Levels::Cells, &PortNames::new())?);
            Ok(())
        }
        Show::Fdb => {
            // The MAC table speaks port ids: the counters name them (and resolve PORTs).
            let snap: Snapshot = c.call_as(Op::Counters).map_err(err)?;
            let mut rows: Vec<protocol::FdbRow> = serde_json::from_value(data.clone()).map_err(unexpected)?;
            let filter = port_filter(&ports_of(&snap), ports)?;
            if let Some(ids) = &filter {
                rows.retain(|r| ids.contains(&r.port));
            }
            if json {
                return match filter {
                    Some(_) => print_json(&rows),
                    None => print_json(&data),
                };
            }
            let names: PortNames = snap
                .ports
                .iter()
                .filter_map(|p| Some((p.id, p.name.clone()?)))
                .collect();
            let rows = serde_json::to_value(&rows).map_err(|e| e.to_string())?;
            print!("{}", render(what, &rows, Levels::Cells, &names)?);
            Ok(())
        }
        Show::Watermarks => {
            let mut w: protocol::WatermarksData = serde_json::from_value(data.clone()).map_err(unexpected)?;
            let known: Vec<(u16, Option<&str>)> = w.ports.iter().map(|p| (p.id, p.name.as_deref())).collect();
            let data = match port_filter(&known, ports)? {
                Some(ids) => {
                    w.ports.retain(|p| ids.contains(&p.id));
                    serde_json::to_value(&w).map_err(|e| e.to_string())?
                }
                None => data,
            };
            if json {
                return print_json(&data);
            }
            let levels = levels(&mut c, cells)?;
            println!("{}", header(at, &since_start(&mut c)?, Some(levels)));
            print!("{}", render(what, &data, levels, &PortNames::new())?);
            Ok(())
        }
        Show::Counters | Show::Queues | Show::Pgs | Show::Pfc | Show::Buffer | Show::Interfaces => {
            let now: Snapshot = serde_json::from_value(data.clone()).map_err(unexpected)?;
            let filter = port_filter(&ports_of(&now), ports)?;
            let only = |mut s: Snapshot| {
                if let Some(ids) = &filter {
                    s.ports.retain(|p| ids.contains(&p.id));
                }
                s
            };
            if json {
                // The switch's own figures (no baseline), as it sent them unless PORTs were given.
                return match filter {
                    Some(_) => print_json(&only(now)),
                    None => print_json(&data),
                };
            }
            // `show queues`: a second snapshot `interval_ms` later, for the rates.
            let (first, now, at) = match what {
                Show::Queues if interval_ms > 0 => {
                    let (later, secs) = second_snapshot(&mut c, interval_ms)?;
                    // The counters over the interval (none if the switch restarted meanwhile).
                    let delta = later.since(&now).map(|d| (d, secs));
                    (delta, later, std::time::SystemTime::now())
                }
                _ => (None, now, at),
            };
            let levels = levels(&mut c, cells)?;
            println!(
                "{}",
                header(at, &since_start(&mut c)?, has_levels(what).then_some(levels))
            );
            let (shown, note) = crate::baseline::apply(socket, now);
            if let Some(note) = note {
                println!("({note})");
            }
            match what {
                Show::Queues => {
                    let rates = first.as_ref().map(|(s, secs)| (s, *secs));
                    print!("{}", render_queues(&only(shown), levels, rates));
                }
                Show::Pfc => {
                    let info = running_config(&mut c)?.map(|cfg| PfcInfo::of(&cfg));
                    print!("{}", render_pfc(&only(shown), info.as_ref()));
                }
                _ => {
                    let data = serde_json::to_value(only(shown)).map_err(|e| e.to_string())?;
                    print!("{}", render(what, &data, levels, &PortNames::new())?);
                }
            }
            Ok(())
        }
    }
}

/// Waits `interval_ms`, then takes another snapshot: it and the seconds since the call.
fn second_snapshot(c: &mut protocol::Client, interval_ms: u64) -> Result<(Snapshot, f64), String> {
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(interval_ms));
    let later: Snapshot = c.call_as(Op::Counters).map_err(err)?;
    Ok((later, t0.elapsed().as_secs_f64()))
}

/// The switch's running config as this rocectl loads it, or `None` (said on stderr) if it
/// does not load here (a newer switch).
fn running_config(c: &mut protocol::Client) -> Result<Option<controlplane::Config>, String> {
    let running: protocol::ConfigData = c.call_as(Op::GetConfig).map_err(err)?;
    Ok(match controlplane::load_str(&running.toml) {
        Ok(l) => Some(l.config),
        Err(e) => {
            eprintln!("rocectl: the running config does not load here, so what it says is left out: {e}");
            None
        }
    })
}

/// `rocectl show interfaces`: each port's link, backend, speed, MTU, peer and rates, from two
/// snapshots `interval_ms` apart (one, and no rates, with 0) and the running config.
fn show_interfaces(c: &mut protocol::Client, ports: &[String], json: bool, interval_ms: u64) -> Result<(), String> {
    let first: Snapshot = c.call_as(Op::Counters).map_err(err)?;
    let (prev, now) = if interval_ms > 0 {
        let (later, secs) = second_snapshot(c, interval_ms)?;
        (Some((first, secs)), later)
    } else {
        (None, first)
    };
    let at = std::time::SystemTime::now();
    let cfg = running_config(c)?;
    let mut rows = interface_rows(prev.as_ref().map(|(s, secs)| (s, *secs)), &now, cfg.as_ref());
    if let Some(ids) = port_filter(&ports_of(&now), ports)? {
        rows.retain(|r| ids.contains(&r.id));
    }
    if json {
        return print_json(&rows);
    }
    let span = match &prev {
        Some((_, secs)) => format!("{}, rates over {secs:.1} s", since_start(c)?),
        None => since_start(c)?,
    };
    println!("{}", header(at, &span, None));
    print!("{}", render_interfaces(&rows));
    Ok(())
}

/// `rocectl show buffer`: the counters and the running config together (`buffer.rs`).
fn show_buffer(c: &mut protocol::Client, ports: &[String], json: bool, cells: bool) -> Result<(), String> {
    let snap: Snapshot = c.call_as(Op::Counters).map_err(err)?;
    let at = std::time::SystemTime::now();
    let running: protocol::ConfigData = c.call_as(Op::GetConfig).map_err(err)?;
    let loaded = controlplane::load_str(&running.toml).map_err(|e| {
        format!(
            "the running config does not load in this rocectl (a newer switch?), so the values in force are \
             unknown (`rocectl show counters --json` has the buffer figures): {e}"
        )
    })?;
    let mut view = crate::buffer::BufferView::new(&snap, &loaded.config, &running.toml);
    if let Some(ids) = port_filter(&ports_of(&snap), ports)? {
        view.keep_ports(&ids);
    }
    if json {
        return print_json(&view);
    }
    let levels = if cells {
        Levels::Cells
    } else {
        Levels::Bytes {
            cell: u64::from(loaded.config.buffer.cell_bytes),
        }
    };
    println!("{}", header(at, &since_start(c)?, Some(levels)));
    print!("{}", render_buffer(&view, levels));
    Ok(())
}

pub fn change(socket: &Endpoint, op: Op) -> Result<(), String> {
    let mut c = connect(socket)?;
    let answer: ApplyData = c.call_as(op).map_err(err)?;
    // The config now running, for its ports' names (a changed key names its port by them).
    let running: Option<toml::Table> = match answer.changed.iter().any(|k| k.starts_with("port[")) {
        true => c
            .call_as::<protocol::ConfigData>(Op::GetConfig)
            .ok()
            .and_then(|d| d.toml.parse().ok()),
        false => None,
    };
    report_change(&answer, running.as_ref());
    Ok(())
}

/// What a change did: its new warnings, and the keys it changed (a port's by its name, from
/// `root`, the config now running, where it has one).
fn report_change(answer: &ApplyData, root: Option<&toml::Table>) {
    for w in &answer.warnings {
        println!("warning: {w}");
    }
    if answer.unchanged {
        println!("unchanged: nothing to apply (version {})", answer.version);
    } else if answer.changed.is_empty() {
        println!("applied: nothing changed");
    } else {
        let keys: Vec<String> = match root {
            Some(r) => (answer.changed.iter())
                .map(|k| controlplane::patch::key_by_port_name(r, k))
                .collect(),
            None => answer.changed.clone(),
        };
        println!("applied; changed: {}", keys.join(", "));
    }
}

/// `rocectl log [LEVEL [TARGET]]`: the switch's log filter, changed first if LEVEL is given
/// (clap checked both).
pub fn log(socket: &Endpoint, level: Option<&str>, target: Option<&str>) -> Result<(), String> {
    let mut c = connect(socket)?;
    let op = Op::Log {
        level: level.map(str::to_string),
        target: target.map(str::to_string),
    };
    let data: protocol::LogData = c.call_as(op).map_err(err)?;
    if level.is_some() {
        println!("log filter changed: {}", data.filter);
    } else {
        println!("log filter: {}", data.filter);
    }
    Ok(())
}

/// `rocectl set`: reads the running config, edits it and applies the whole result, but only if
/// nobody changed the config in between (`if_version`); if somebody did, reads it again and
/// redoes the edit on top of their change, so concurrent `set`s all take effect.
pub fn set_knob(socket: &Endpoint, set: &ctl::set::Set) -> Result<(), String> {
    const ATTEMPTS: u32 = 20;
    let mut c = connect(socket)?;
    for attempt in 1..=ATTEMPTS {
        let running: protocol::ConfigData = c.call_as(Op::GetConfig).map_err(err)?;
        let mut table: toml::Table = running
            .toml
            .parse()
            .map_err(|e| format!("the switch's running config does not parse: {e}"))?;
        ctl::set::edit(&mut table, set)?;
        let toml = controlplane::retext::rewrite(&running.toml, &table)?;
        let op = Op::Apply {
            toml,
            if_version: Some(running.version),
        };
        match c.call_as::<ApplyData>(op) {
            Ok(answer) => {
                report_change(&answer, Some(&table));
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

pub fn watch(socket: &Endpoint, interval_ms: u64, cells: bool) -> Result<(), String> {
    use std::io::{IsTerminal, Write};
    let mut c = connect(socket)?;
    let levels = levels(&mut c, cells)?;
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
        let table = render_rates(prev.as_ref().map(|(_, p)| p), &s, secs, levels);
        let span = if prev.is_some() {
            format!("interval {secs:.1} s")
        } else {
            "first update: rates from the next".to_string()
        };
        let head = header(std::time::SystemTime::now(), &span, Some(levels));
        let clear = if tty { "\x1b[H\x1b[2J" } else { "" };
        // A reader that went away (`rocectl watch | head`) ends the watch, quietly, as for any
        // Unix tool; `print!` would panic on the broken pipe.
        let mut out = std::io::stdout().lock();
        match write!(out, "{clear}{head}\n{table}").and_then(|()| out.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(format!("writing to standard output: {e}")),
        }
        prev = Some((now, s));
    }
}

/// `rocectl vlarb admit`: exit 0 when every request was admitted, 1 when some were refused, 2
/// on bad input (then nothing is written).
pub fn vlarb_admit(args: &crate::cli::AdmitArgs) -> ExitCode {
    match admit(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rocectl vlarb admit: {e}");
            ExitCode::from(2)
        }
    }
}

fn read_text(file: &Path) -> Result<String, String> {
    controlplane::files::read_text(file)
}

/// Writes `text` to a temporary file beside `file`, then renames it over: a reader never sees
/// half a state or fragment.
fn write_whole(file: &Path, text: &str) -> Result<(), String> {
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, file))
        .map_err(|e| format!("{}: cannot write: {e}", file.display()))
}

/// Every request, parsed (`--request` first, then the files), names unique.
fn admit_requests(args: &crate::cli::AdmitArgs) -> Result<Vec<vlarb_admit::Request>, String> {
    let mut requests = Vec::new();
    for (i, spec) in args.requests.iter().enumerate() {
        requests
            .push(vlarb_admit::Request::parse_spec(spec).map_err(|e| format!("--request {} ({spec:?}): {e}", i + 1))?);
    }
    for file in &args.request_files {
        let json = file.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        requests.extend(
            vlarb_admit::parse_requests(&read_text(file)?, json).map_err(|e| format!("{}: {e}", file.display()))?,
        );
    }
    for (i, r) in requests.iter().enumerate() {
        if requests[..i].iter().any(|o| o.name == r.name) {
            return Err(format!("name: {:?} is requested twice", r.name));
        }
    }
    Ok(requests)
}

/// The port's parameters: from the state when it has them (a flag or config that disagrees is
/// an error, since the state's connections were admitted under them), else from the flags and
/// the config.
fn admit_table(
    args: &crate::cli::AdmitArgs,
    config: Option<&vlarb_admit::ConfigPort>,
) -> Result<vlarb_admit::Admission, String> {
    use vlarb_admit::{Admission, PortParams, L2_OVERHEAD_BYTES, MIN_FRAME_BYTES, UNBOUNDED_LIMIT};
    let frame = match args.mtu {
        Some(m) => Some((m.checked_add(L2_OVERHEAD_BYTES).ok_or("--mtu: too large")?, "--mtu")),
        None => config.map(|c| (c.max_frame, "--config")),
    };
    let speed = args
        .speed
        .map(|s| (s, "--speed"))
        .or(config.map(|c| (c.speed_bps, "--config")));
    let limit = args
        .high_limit
        .map(|q| (q, "--high-limit"))
        .or(config.and_then(|c| c.high_limit).map(|q| (q, "--config")));
    let min_frame = args.min_frame.map(|m| (m, "--min-frame"));
    let vls = args.vls.clone().map(|v| (v, "--vls"));
    let existing = match &args.state {
        Some(file) if file.exists() => {
            let state: vlarb_admit::State = serde_json::from_str(&read_text(file)?)
                .map_err(|e| format!("{}: not a state file: {e}", file.display()))?;
            Some((
                Admission::from_state(state).map_err(|e| format!("{}: {e}", file.display()))?,
                file,
            ))
        }
        _ => None,
    };
    if let Some((a, file)) = existing {
        let p = a.params();
        let differs = |what: &str, src: &str, given: String, have: String| {
            Err(format!(
                "{src} gives {what} {given}, but {} was made for {have}: its connections were admitted under it (give the same, or start a new state file)",
                file.display()
            ))
        };
        if let Some((s, src)) = speed.filter(|(s, _)| *s != p.speed_bps) {
            return differs("speed", src, units::format_rate(s), units::format_rate(p.speed_bps));
        }
        if let Some((f, src)) = frame.filter(|(f, _)| *f != p.max_frame) {
            return differs(
                "a largest frame of",
                src,
                format!("{f} B"),
                format!("{} B", p.max_frame),
            );
        }
        if let Some((q, src)) = limit.filter(|(q, _)| *q != p.high_limit) {
            return differs("high_limit", src, q.to_string(), p.high_limit.to_string());
        }
        if let Some((m, src)) = min_frame.filter(|(m, _)| *m != p.min_frame) {
            return differs(
                "a smallest frame of",
                src,
                format!("{m} B"),
                format!("{} B", p.min_frame),
            );
        }
        if let Some((v, src)) = vls.filter(|(v, _)| *v != p.vls) {
            return differs("VLs", src, format!("{v:?}"), format!("{:?}", p.vls));
        }
        return Ok(a);
    }
    let params = PortParams {
        speed_bps: speed.ok_or("the port's speed is unknown: give --speed or --config")?.0,
        high_limit: limit.map_or(UNBOUNDED_LIMIT, |l| l.0),
        max_frame: frame.map_or(1500 + L2_OVERHEAD_BYTES, |f| f.0),
        min_frame: min_frame.map_or(MIN_FRAME_BYTES, |m| m.0),
        vls: vls.map_or_else(|| (1..vlarb_admit::NUM_VLS).collect(), |v| v.0),
    };
    Admission::new(params)
}

/// Refuses `-o` or `--state` naming a file the command reads (`--config`, `--requests`), or
/// `-o` naming the state: writing it would replace the switch's config with a fragment, or the
/// admitted connections with one. (The state is read and written back: that is its purpose.)
fn refuse_aliased_outputs(args: &crate::cli::AdmitArgs) -> Result<(), String> {
    let mut inputs: Vec<(String, &Path)> = Vec::new();
    if let Some(c) = &args.config {
        inputs.push(("--config".to_string(), c));
    }
    inputs.extend(
        args.request_files
            .iter()
            .map(|f| ("--requests".to_string(), f.as_path())),
    );
    let mut outputs: Vec<(String, &Path)> = Vec::new();
    if let Some(s) = &args.state {
        outputs.push(("--state".to_string(), s));
    }
    if let Some(o) = &args.output {
        outputs.push(("-o".to_string(), o));
    }
    controlplane::files::refuse_aliased_outputs(&inputs, &outputs)
}

fn admit(args: &crate::cli::AdmitArgs) -> Result<bool, String> {
    refuse_aliased_outputs(args)?;
    let requests = admit_requests(args)?;
    if requests.is_empty() && args.release.is_empty() && args.state.is_none() {
        return Err("nothing to admit: give --request, --requests, or --state (to show or --release)".into());
    }
    let config = match &args.config {
        Some(file) => Some(
            vlarb_admit::read_config(&read_text(file)?, args.port).map_err(|e| format!("{}: {e}", file.display()))?,
        ),
        None => None,
    };
    let mut table = admit_table(args, config.as_ref())?;
    for name in &args.release {
        table.release(name).map_err(|e| e.to_string())?;
    }
    let mut refused = Vec::new();
    for r in requests {
        let name = r.name.clone();
        if let Err(e) = table.admit(r) {
            refused.push((name, e));
        }
    }
    let fragment = match &args.output {
        Some(_) => Some(vlarb_admit::fragment(
            &table,
            args.port.zip(config.as_ref().map(|c| &c.raw)),
        )?),
        None => None,
    };
    if args.json {
        let out = crate::render::admission_json(&table, &refused);
        println!("{}", serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?);
    } else {
        print!("{}", crate::render::render_admission(&table, &refused));
    }
    if let Some(file) = &args.state {
        let text = serde_json::to_string_pretty(&table.state()).map_err(|e| e.to_string())?;
        write_whole(file, &(text + "\n"))?;
    }
    if let (Some(file), Some(text)) = (&args.output, fragment) {
        write_whole(file, &text)?;
        if !args.json {
            println!(
                "fragment written to {} (apply with `rocectl patch {}`)",
                file.display(),
                file.display()
            );
        }
    }
    Ok(refused.is_empty())
}

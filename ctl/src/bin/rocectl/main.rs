//! `rocectl`: rocesw's control-plane command line. Offline: validate a config (`check`), the
//! PFC headroom calculator (`headroom`) and VL arbitration admission control (`vlarb admit`).
//! Against a running switch, over its control socket (`controlplane/PROTOCOL.md`): `show`,
//! `apply`, `set`, `watch`, `capture` (a port's frames live into a pcap), and `daemon`, which keeps a
//! switch on a config file and serves Prometheus metrics (`ctl/src/daemon.rs`).
//!
//! The binary is a folder of modules, one job each: `cli` (what it accepts), `target` (which
//! switches, and running a command on each), `commands` (what each command does), `capture`
//! (the live capture client and its pcap) and `render` (the tables). They stay in the binary rather than the library because only rocectl's users
//! see them: the library is what the dataplane and the daemon build on, and a table layout or
//! a flag is not an interface they should depend on.

mod baseline;
mod buffer;
mod capture;
mod cli;
mod commands;
mod render;
mod sonic;
mod target;

use clap::Parser;
use cli::{ClearWhat, Cli, Command};
use commands::{change, kind, set_knob, show, watch};
use controlplane::headroom;
use controlplane::protocol::{Endpoint, Op};
use std::path::Path;
use std::process::ExitCode;
use target::{connect, each, err, live, switches, targets};

fn main() -> ExitCode {
    // `rocectl check FILE | head` must end as `cat` would, quietly, when the reader goes away:
    // Rust ignores SIGPIPE, so `println!` would panic on the broken pipe (exit 101). Socket
    // writes stay signal-free (`MSG_NOSIGNAL`: TCP in std, the Unix socket in
    // `controlplane::protocol`), so a switch that hangs up is still an error message.
    set_sigpipe(libc::SIG_DFL);
    let cli = Cli::parse();
    if matches!(cli.command, Command::Daemon { .. } | Command::Watch { .. }) {
        // A service logs to whatever it was given; a reader of its log going away is no
        // reason for it to die. `watch` ends with success when its reader goes (`rocectl
        // watch | head`), which it can only see as EPIPE.
        set_sigpipe(libc::SIG_IGN);
    }
    let env = std::env::var("ROCECTL_SWITCH").ok();
    let targets = match target::connection(&cli.connection, &cli.command, env.as_deref())
        .and_then(|c| c.as_ref().map(targets).transpose())
    {
        Ok(t) => t.unwrap_or_default(),
        Err(e) => {
            eprintln!("rocectl: {e}");
            return ExitCode::from(2);
        }
    };
    // Commands that talk to one switch at a time.
    let single = |what: &str| single(&targets, what);
    match cli.command {
        Command::Check { file, verbose, sonic } => commands::check(&file, verbose, &sonic),
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
        Command::Show {
            what,
            ports,
            json,
            persistent,
            cells,
            against,
            interval_ms,
            ..
        } => match against {
            Some(file) if matches!(what, cli::Show::Config) => {
                each(&targets, |s| commands::show_config_against(s, &file, json))
            }
            Some(_) => {
                eprintln!("rocectl: --against is for `show config`");
                ExitCode::from(2)
            }
            None => each(&targets, |s| {
                show(s, what, &ports, json, kind(persistent), cells, interval_ms)
            }),
        },
        Command::Clear {
            what: ClearWhat::Counters,
            persistent,
            ..
        } => {
            if persistent {
                eprintln!("rocectl: --persistent is for watermarks; counters have one baseline per user");
                return ExitCode::from(2);
            }
            each(&targets, |s| {
                let mut c = connect(s)?;
                let snap = c.call_as(Op::Counters).map_err(err)?;
                let path = baseline::save(s, snap)?;
                println!(
                    "cleared the counters `rocectl show` prints (baseline {}; the switch's totals, summary and metrics are unchanged)",
                    path.display()
                );
                Ok(())
            })
        }
        Command::Clear {
            what: ClearWhat::Watermarks,
            persistent,
            ..
        } => each(&targets, |s| {
            let mut c = connect(s)?;
            c.call(Op::ClearWatermarks { kind: kind(persistent) }).map_err(err)?;
            println!("cleared the {} watermarks", kind(persistent));
            Ok(())
        }),
        Command::Apply { file, .. } => match controlplane::files::read_text(&file) {
            Ok(text) => each(&targets, |s| {
                change(
                    s,
                    Op::Apply {
                        toml: text.clone(),
                        if_version: None,
                    },
                )
            }),
            Err(e) => live(|| Err(e.clone())),
        },
        Command::Set(set) => each(&targets, |s| set_knob(s, &set.knob)),
        Command::Patch { file, .. } => {
            let text = if file.as_os_str() == "-" {
                controlplane::files::read_text(Path::new("/dev/stdin"))
            } else {
                controlplane::files::read_text(&file)
            };
            // A mistake in the fragment's keys or types, at its own line, before any switch
            // is asked.
            let text = text.and_then(|t| {
                controlplane::patch::check_fragment(&t)
                    .map(|()| t)
                    .map_err(|e| format!("{}: {e}", file.display()))
            });
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
                Err(e) => live(|| Err(e.clone())),
            }
        }
        Command::Watch { interval_ms, cells, .. } => live(|| watch(single("watch")?, interval_ms, cells)),
        Command::Capture {
            port,
            rx,
            tx,
            count,
            duration,
            file,
            force,
            snaplen,
            ring,
            quiet,
            ..
        } => live(|| {
            let direction = match (rx, tx) {
                (true, false) => controlplane::protocol::CaptureDirection::Rx,
                (false, true) => controlplane::protocol::CaptureDirection::Tx,
                _ => controlplane::protocol::CaptureDirection::Both,
            };
            capture::capture(
                single("capture")?,
                capture::CaptureOptions {
                    port,
                    direction,
                    count,
                    duration,
                    file,
                    force,
                    snaplen,
                    ring,
                    quiet,
                },
            )
        }),
        Command::Switches => live(switches),
        Command::Log { level, target, .. } => each(&targets, |s| commands::log(s, level.as_deref(), target.as_deref())),
        Command::Vlarb(cli::Vlarb::Admit(args)) => commands::vlarb_admit(&args),
        Command::Sonic(cmd) => sonic::run(cmd, &targets),
        Command::Daemon {
            config,
            metrics,
            no_metrics,
            poll_ms,
            name,
            on_drift,
            ..
        } => live(|| {
            let socket = single("daemon")?;
            let on_drift = match on_drift.as_str() {
                "restore" => ctl::daemon::DriftAction::Restore,
                "adopt" => ctl::daemon::DriftAction::Adopt,
                _ => ctl::daemon::DriftAction::Warn,
            };
            commands::daemon(
                socket,
                config,
                (!no_metrics).then_some(metrics),
                poll_ms,
                name,
                on_drift,
            )
        }),
    }
}

/// The one switch of a command that talks to one at a time.
fn single<'a>(targets: &'a [(String, Endpoint)], what: &str) -> Result<&'a Endpoint, String> {
    match targets {
        [(_, one)] => Ok(one),
        _ => Err(format!("{what} works on one switch at a time (got {})", targets.len())),
    }
}

fn set_sigpipe(action: libc::sighandler_t) {
    // SAFETY: setting SIGPIPE's disposition to the default or to ignore, before any other
    // thread exists (main's first lines, and `daemon` before it starts any), installs no
    // handler code.
    unsafe { libc::signal(libc::SIGPIPE, action) };
}

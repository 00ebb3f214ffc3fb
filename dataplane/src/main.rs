//! `rocesw`: the command line. Each subcommand is a thin shell over the library.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use dataplane::replay::{self, ReplayOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "rocesw",
    version,
    about = "A userspace, poll-mode soft switch for RoCEv2 lossless Ethernet"
)]
struct Cli {
    /// Log filter (error, warn, info, debug, trace, or tracing directives); also RUST_LOG.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay captures through the switch in virtual time and write what it transmits.
    ///
    /// Frames enter their port at their capture timestamps (relative to the earliest input),
    /// never faster than the port's line rate. Each input link ends at a peer that honours the
    /// PFC the switch sends. Writes DIR/port<N>.pcap for every port (nanosecond pcap, frames
    /// stamped at departure, PFC frames included) and DIR/summary.json. Same inputs, config and
    /// seed give byte-identical outputs.
    #[command(
        after_help = "Example:\n  rocesw replay --config configs/default.toml \\\n    --input 0=host0.pcap --input 1=host1.pcap --output-dir out/"
    )]
    Replay {
        /// Switch configuration (TOML), validated before anything runs.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// A capture to feed into a port, as PORT=PCAP (repeatable; port ids from the config).
        #[arg(long = "input", value_name = "PORT=PCAP", required = true, value_parser = parse_input)]
        inputs: Vec<(u16, PathBuf)>,
        /// Directory for port<N>.pcap and summary.json (created if missing).
        #[arg(long, value_name = "DIR")]
        output_dir: PathBuf,
        /// Seed for WRED's random marking decisions.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Peers keep sending when paused: shows what happens without flow control.
        #[arg(long)]
        peer_ignores_pfc: bool,
        /// Config patches to apply at virtual times (TOML: [[change]] at = "500us" plus a
        /// [change.patch] table merged into the config), to replay a live-tuning experiment.
        #[arg(long, value_name = "FILE")]
        schedule: Option<PathBuf>,
        /// No progress bar and no human summary (summary.json is still written).
        #[arg(long, short)]
        quiet: bool,
    },
    /// Run the switch on real interfaces (AF_PACKET on veth/tap) until SIGINT/SIGTERM.
    ///
    /// Every port in the config needs an `interface`. Poll-mode workers as `[run]` says; the
    /// egress scheduler enforces each port's configured speed, so a veth behaves like a 25G
    /// (or 1G...) link and queues, ECN and PFC happen for real. On stop it drains the queues
    /// (bounded by run.drain_timeout) and prints the final counters.
    #[command(after_help = "Example:\n  rocesw lab up --hosts 4 && rocesw run --config /run/rocesw/lab/lab.toml")]
    Run {
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Seed for WRED's random marking decisions.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print per-port rates, queue depths, PFC and marks every second (to stderr).
        #[arg(long)]
        stats: bool,
        /// Write the final counters as JSON here on exit.
        #[arg(long, value_name = "FILE")]
        summary: Option<PathBuf>,
        /// Stop by itself after this many seconds (tests, demos).
        #[arg(long, value_name = "SECONDS")]
        duration: Option<f64>,
        /// Control socket for `rocectl` (mode 0600; see controlplane/PROTOCOL.md). Default:
        /// /run/rocesw/NAME.sock with --name, else /run/rocesw/rocesw.sock.
        #[arg(long, value_name = "PATH")]
        control: Option<PathBuf>,
        /// This switch's name: reported to `rocectl`, and its socket is /run/rocesw/NAME.sock
        /// (so `rocectl --switch NAME` finds it). Lets one host run a small fabric.
        #[arg(long, value_parser = switch_name)]
        name: Option<String>,
        /// Also serve the control protocol over TCP on this loopback address (e.g.
        /// 127.0.0.1:7700), for a control plane in another network namespace or container;
        /// every connection must first send the token of --control-token-file.
        #[arg(long, value_name = "ADDR", requires = "control_token_file")]
        control_tcp: Option<std::net::SocketAddr>,
        /// File holding the TCP token (at least 16 characters; mode 0600 or 0400).
        #[arg(long, value_name = "FILE", requires = "control_tcp")]
        control_token_file: Option<PathBuf>,
        /// Do not open a control socket.
        #[arg(long, conflicts_with_all = ["control", "control_tcp"])]
        no_control: bool,
        /// When every port is a capture-file port: keep running after the inputs end (by
        /// default the run drains and stops then), e.g. to inspect it with `rocectl`.
        #[arg(long)]
        keep_running: bool,
    },
    /// A live tour (needs root): 4 test hosts, the switch on their ports, a 3→1 RoCEv2 incast
    /// with PFC and DCQCN, live per-port figures, then the generator's report and the switch's
    /// counters. Everything it creates is removed at the end, also when interrupted.
    Demo {
        /// Switch profile (its ports are replaced by the lab's).
        #[arg(long, default_value = "configs/default.toml")]
        config: PathBuf,
        /// Seconds of traffic.
        #[arg(long, default_value_t = 4.0)]
        duration: f64,
        /// Line rate of the switch ports (the congested port is one of them).
        #[arg(long, default_value = "500M")]
        speed: String,
        /// Offered load per sender.
        #[arg(long, default_value = "300M")]
        rate: String,
    },
    /// Write synthetic RoCEv2 traffic as one pcap per port, ready for `replay`.
    #[command(subcommand)]
    Gen(GenCommand),
    /// Test hosts for the real switch: network namespaces, each with a veth to a switch port
    /// (needs root).
    #[command(subcommand)]
    Lab(LabCommand),
}

#[derive(Subcommand)]
enum LabCommand {
    /// Create N hosts and write the matching switch config (STATE_DIR/NAME.toml).
    Up {
        /// Number of hosts (one switch port each).
        #[arg(long, default_value_t = 4)]
        hosts: usize,
        /// Lab name: 1-8 characters of a-z0-9; prefixes every namespace and interface.
        #[arg(long, default_value = "lab")]
        name: String,
        /// Switch profile the lab config starts from (its ports are replaced).
        #[arg(long, default_value = "configs/default.toml")]
        config: PathBuf,
        /// Port speed written into the lab config.
        #[arg(long, default_value = "25G")]
        speed: String,
        /// MTU of the hosts and the switch ports.
        #[arg(long, default_value_t = 1500)]
        mtu: u32,
        #[arg(long, default_value = dataplane::lab::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// Remove everything `lab up` created for NAME, and only that.
    Down {
        #[arg(long, default_value = "lab")]
        name: String,
        #[arg(long, default_value = dataplane::lab::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// Show a lab's hosts and config path.
    Show {
        #[arg(long, default_value = "lab")]
        name: String,
        #[arg(long, default_value = dataplane::lab::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum GenCommand {
    /// An N→1 incast: ports 0..N each send lossless RoCEv2 SEND frames at line rate to the
    /// host on port N (which announces itself first so the switch learns it).
    #[command(
        after_help = "Example (how examples/incast was made):\n  rocesw gen incast --senders 3 --frames 2000 --size 1024 --output-dir examples/incast"
    )]
    Incast {
        /// Number of senders (ports 0..N); the receiver is port N.
        #[arg(long, default_value_t = 3)]
        senders: u16,
        /// Frames per sender.
        #[arg(long, default_value_t = 2000)]
        frames: u64,
        /// L2 frame length in bytes, without FCS (at least 78 for IPv4 RoCEv2 with a BTH).
        #[arg(long, default_value_t = 1024)]
        size: usize,
        /// Senders' line rate (e.g. 25G, 100G).
        #[arg(long, default_value = "25G", value_parser = parse_rate)]
        speed: u64,
        /// DSCP of the frames (26 = the default profile's lossless class).
        #[arg(long, default_value_t = 26, value_parser = clap::value_parser!(u8).range(0..64))]
        dscp: u8,
        #[arg(long, value_name = "DIR")]
        output_dir: PathBuf,
    },
}

fn parse_rate(s: &str) -> Result<u64, String> {
    controlplane::units::parse_rate(s).map_err(|e| e.to_string())
}

fn switch_name(s: &str) -> Result<String, String> {
    controlplane::protocol::check_name(s).map(|()| s.to_string())
}

fn parse_input(s: &str) -> Result<(u16, PathBuf), String> {
    let (port, path) = s
        .split_once('=')
        .ok_or_else(|| format!("expected PORT=PCAP, got {s:?}"))?;
    let port = port
        .trim()
        .parse::<u16>()
        .map_err(|_| format!("{port:?} is not a port id (0-65535)"))?;
    if path.is_empty() {
        return Err(format!("no capture file after {port}="));
    }
    Ok((port, PathBuf::from(path)))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&cli.log));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocesw: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn load_config(path: &std::path::Path) -> Result<controlplane::Config> {
    let loaded =
        controlplane::load_file(path).map_err(|e| anyhow::anyhow!("{}: invalid config:\n{e}", path.display()))?;
    for w in &loaded.warnings {
        eprintln!("rocesw: warning: {w}");
    }
    Ok(loaded.config)
}

fn run(cmd: Command) -> Result<()> {
    match cmd {
        Command::Replay {
            config,
            inputs,
            output_dir,
            seed,
            peer_ignores_pfc,
            schedule,
            quiet,
        } => {
            let cfg = load_config(&config)?;
            let schedule = match schedule {
                Some(path) => schedule::load(&config, &path)?,
                None => Vec::new(),
            };
            let opts = ReplayOptions {
                inputs,
                output_dir: output_dir.clone(),
                seed,
                peer_ignores_pfc,
                progress: if quiet { None } else { Some(progress::report) },
                schedule,
            };
            let outcome = replay::run(&cfg, &opts)?;
            progress::finish();
            let summary = output_dir.join("summary.json");
            let json = serde_json::to_string_pretty(&outcome)?;
            std::fs::write(&summary, json + "\n").with_context(|| format!("cannot write {}", summary.display()))?;
            if !quiet {
                print!(
                    "{}",
                    dataplane::report::human_summary(&outcome.snapshot, "virtual time", outcome.duration_ns)
                );
                println!(
                    "wrote {} and {} port captures",
                    summary.display(),
                    outcome.outputs.len()
                );
            }
            Ok(())
        }
        Command::Run {
            config,
            seed,
            stats,
            summary,
            duration,
            control,
            name,
            control_tcp,
            control_token_file,
            no_control,
            keep_running,
        } => {
            let tcp = match (control_tcp, control_token_file) {
                (Some(addr), Some(file)) => Some(dataplane::control::TcpControl {
                    addr,
                    token: controlplane::protocol::read_token_file(&file).map_err(|e| anyhow::anyhow!(e))?,
                }),
                _ => None,
            };
            let control = control.unwrap_or_else(|| match &name {
                Some(n) => controlplane::protocol::socket_of(n),
                None => PathBuf::from(controlplane::protocol::DEFAULT_SOCKET),
            });
            let cfg = load_config(&config)?;
            if let Some(p) = cfg.ports.iter().find(|p| p.interface.is_none() && p.pcap.is_none()) {
                anyhow::bail!(
                    "port {} has neither an interface nor a pcap table: rocesw run needs `interface = \"...\"` \
                     or `pcap = {{ input = \"...\", output = \"...\" }}` on every [[port]]",
                    p.id
                );
            }
            let stop = Arc::new(AtomicBool::new(false));
            for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                signal_hook::flag::register(sig, stop.clone())?;
            }
            let inputs: Vec<&std::path::Path> = cfg
                .ports
                .iter()
                .filter_map(|p| p.pcap.as_ref()?.input.as_deref())
                .collect();
            let pcap_clock = dataplane::port::PcapClock::for_inputs(inputs.iter().copied());
            let inputs_left = dataplane::port::InputsLeft::new(inputs.len());
            if !keep_running && !inputs.is_empty() && cfg.ports.iter().all(|p| p.pcap.is_some()) {
                // Nothing but captures feeds this switch: once they are all read, stop (and drain).
                let (stop, left) = (stop.clone(), inputs_left.clone());
                std::thread::spawn(move || {
                    while left.get() > 0 && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    stop.store(true, Ordering::Relaxed);
                });
            }
            if let Some(secs) = duration {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_secs_f64(secs));
                    stop.store(true, Ordering::Relaxed);
                });
            }
            let queue = Arc::new(crossbeam_queue::ArrayQueue::new(16));
            // Dropped when the arm ends: stops the control thread and removes the socket.
            let _server = if no_control {
                None
            } else {
                let text =
                    std::fs::read_to_string(&config).with_context(|| format!("cannot read {}", config.display()))?;
                Some(
                    dataplane::control::ControlServer::spawn_with(
                        &control,
                        text,
                        queue.clone(),
                        dataplane::control::ControlOptions {
                            name: name.clone(),
                            tcp,
                        },
                    )
                    .with_context(|| format!("control socket {}", control.display()))?,
                )
            };
            let opts = dataplane::worker::RunOptions {
                seed,
                control: (!no_control).then_some(queue),
                open: Box::new(move |p: &controlplane::PortConfig| {
                    if let Some(pc) = &p.pcap {
                        let name = p.name.clone().unwrap_or_else(|| format!("pcap{}", p.id));
                        let port = dataplane::port::PcapPort::open(&name, pc, pcap_clock.clone(), &inputs_left)?;
                        return Ok(Box::new(port) as Box<dyn dataplane::port::PortBackend + Send>);
                    }
                    let ifname = p.interface.as_deref().unwrap_or_default();
                    let port = dataplane::port::AfPacket::open(ifname, Default::default())?;
                    Ok(Box::new(port) as Box<dyn dataplane::port::PortBackend + Send>)
                }),
            };
            eprintln!(
                "rocesw: switching {} ports ({}) on {} worker(s); Ctrl-C stops",
                cfg.ports.len(),
                cfg.ports
                    .iter()
                    .map(|p| match (&p.interface, &p.pcap) {
                        (Some(i), _) => i.clone(),
                        (None, _) => format!("pcap{}", p.id),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                cfg.run.workers
            );
            let mut printer = live::Printer::new(&cfg);
            let mut hook = |s: &dataplane::report::Snapshot, now: u64| printer.print(s, now);
            let outcome = dataplane::worker::run(&cfg, opts, stop, if stats { Some(&mut hook) } else { None })?;
            print!(
                "{}",
                dataplane::report::human_summary(&outcome.snapshot, "uptime", outcome.uptime_ns)
            );
            if outcome.undrained > 0 {
                println!("drain timed out: {} frames were still queued", outcome.undrained);
            }
            if outcome.tx_dropped > 0 {
                println!(
                    "{} frames could not be handed to the interfaces (TX ring full or link down)",
                    outcome.tx_dropped
                );
            }
            for (i, st) in &outcome.backends {
                if st.rx_kernel_drops > 0 || st.tx_ring_full > 0 || st.rx_oversize > 0 {
                    println!(
                        "port {}: kernel dropped {} received frames (receive ring full: the switch polled too slowly), \
                         {} sends found the TX ring full, {} oversize frames skipped",
                        cfg.ports[*i].id, st.rx_kernel_drops, st.tx_ring_full, st.rx_oversize
                    );
                }
            }
            if let Some(path) = summary {
                let ports: Vec<serde_json::Value> = outcome
                    .backends
                    .iter()
                    .map(|(i, st)| serde_json::json!({"id": cfg.ports[*i].id, "backend": st}))
                    .collect();
                let json = serde_json::json!({"switch": outcome.snapshot, "interfaces": ports, "uptime_ns": outcome.uptime_ns, "undrained": outcome.undrained});
                std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            Ok(())
        }
        Command::Demo {
            config,
            duration,
            speed,
            rate,
        } => demo::run(&config, duration, &speed, &rate),
        Command::Lab(LabCommand::Up {
            hosts,
            name,
            config,
            speed,
            mtu,
            state_dir,
        }) => {
            let spec = dataplane::lab::LabSpec {
                name,
                hosts,
                speed,
                mtu,
            };
            let lab = dataplane::lab::up(&spec, &config, &state_dir)?;
            println!("{lab}");
            Ok(())
        }
        Command::Lab(LabCommand::Down { name, state_dir }) => {
            println!("{}", dataplane::lab::down(&name, &state_dir)?);
            Ok(())
        }
        Command::Lab(LabCommand::Show { name, state_dir }) => {
            println!("{}", dataplane::lab::load(&name, &state_dir)?);
            Ok(())
        }
        Command::Gen(GenCommand::Incast {
            senders,
            frames,
            size,
            speed,
            dscp,
            output_dir,
        }) => {
            let incast = dataplane::gen::Incast {
                senders,
                frames,
                frame_len: size,
                speed_bps: speed,
                dscp,
            };
            for p in incast.write(&output_dir)? {
                println!("wrote {}", p.display());
            }
            Ok(())
        }
    }
}

/// `rocesw replay --schedule`: timed config patches, each validated (cumulatively, in time
/// order) before the replay starts, so a bad step fails the run up front.
mod schedule {
    use anyhow::{anyhow, bail, Context, Result};
    use std::path::Path;

    pub fn load(config: &Path, path: &Path) -> Result<Vec<(u64, controlplane::Config)>> {
        let base_text = std::fs::read_to_string(config).with_context(|| format!("cannot read {}", config.display()))?;
        let mut running: toml::Table = base_text
            .parse()
            .with_context(|| format!("{}: not TOML", config.display()))?;
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let file: toml::Table = text.parse().with_context(|| format!("{}: not TOML", path.display()))?;
        let Some(changes) = file.get("change").and_then(toml::Value::as_array) else {
            bail!("{}: no [[change]] entries", path.display());
        };
        let mut steps: Vec<(u64, toml::Table)> = Vec::new();
        for (i, c) in changes.iter().enumerate() {
            let c = c
                .as_table()
                .ok_or_else(|| anyhow!("{}: change[{i}] is not a table", path.display()))?;
            if let Some(k) = c.keys().find(|k| *k != "at" && *k != "patch") {
                bail!(
                    "{}: change[{i}].{k}: unknown key (expected `at` and `patch`)",
                    path.display()
                );
            }
            let at = c
                .get("at")
                .and_then(toml::Value::as_str)
                .ok_or_else(|| anyhow!("{}: change[{i}].at: missing (a time such as \"500us\")", path.display()))?;
            let at = controlplane::units::parse_duration(at)
                .map_err(|e| anyhow!("{}: change[{i}].at: {e}", path.display()))?;
            let patch = c
                .get("patch")
                .and_then(toml::Value::as_table)
                .ok_or_else(|| anyhow!("{}: change[{i}].patch: missing table", path.display()))?;
            steps.push((at, patch.clone()));
        }
        steps.sort_by_key(|(at, _)| *at);
        let mut out = Vec::with_capacity(steps.len());
        for (i, (at, patch)) in steps.into_iter().enumerate() {
            controlplane::patch::merge(&mut running, patch);
            let text = toml::to_string(&running)?;
            let loaded = controlplane::load_str(&text).map_err(|e| {
                anyhow!(
                    "{}: the config after change {i} (at {at} ns) is invalid:\n{e}",
                    path.display()
                )
            })?;
            out.push((at, loaded.config));
        }
        Ok(out)
    }
}

/// `rocesw demo`: lab, switch, generator, report, teardown.
mod demo {
    use anyhow::{bail, Context, Result};
    use dataplane::lab::{self, LabSpec};
    use dataplane::port::{AfPacket, PortBackend};
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Removes the lab whatever happens after it was created.
    struct Teardown<'a> {
        name: &'a str,
        state: &'a Path,
    }

    impl Drop for Teardown<'_> {
        fn drop(&mut self) {
            match lab::down(self.name, self.state) {
                Ok(r) => println!("{r}"),
                Err(e) => eprintln!("rocesw demo: teardown: {e:#}"),
            }
            let _ = std::fs::remove_dir(self.state);
        }
    }

    pub fn run(config: &Path, duration: f64, speed: &str, rate: &str) -> Result<()> {
        lab::require_root()?;
        let rocegen = std::env::current_exe()?.with_file_name("rocegen");
        if !rocegen.exists() {
            bail!(
                "{} not found: build both binaries with `cargo build --release --bins`",
                rocegen.display()
            );
        }
        let state = tempfile_dir()?;
        let name = format!("demo{}", std::process::id() % 10_000);
        let spec = LabSpec {
            name: name.clone(),
            hosts: 4,
            speed: speed.into(),
            mtu: 1500,
        };
        let lab = lab::up(&spec, config, &state).context("creating the demo lab")?;
        let _teardown = Teardown {
            name: &name,
            state: &state,
        };
        println!("{lab}\n");
        let cfg = controlplane::load_file(&lab.config_path)
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .config;

        let stop = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, stop.clone())?;
        }
        let sw_stop = Arc::new(AtomicBool::new(false));
        let s2 = sw_stop.clone();
        let switch = std::thread::spawn(move || {
            let opts = dataplane::worker::RunOptions {
                seed: 1,
                control: None,
                open: Box::new(|p: &controlplane::PortConfig| {
                    let port = AfPacket::open(p.interface.as_deref().unwrap_or_default(), Default::default())?;
                    Ok(Box::new(port) as Box<dyn PortBackend + Send>)
                }),
            };
            let mut printer = super::live::Printer::new(&cfg);
            let mut hook = |s: &dataplane::report::Snapshot, now: u64| printer.print(s, now);
            dataplane::worker::run(&cfg, opts, s2, Some(&mut hook))
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        println!("3→1 incast: hosts 1-3 send lossless RoCEv2 (DSCP 26) at {rate} each to host 0 for {duration} s; port 0 runs at {speed}\n");
        let mut gen = std::process::Command::new(&rocegen)
            .args(["coordinate", "--pattern", "incast", "--lab"])
            .arg(lab.state_path())
            .args([
                "--rate",
                rate,
                "--link-speed",
                speed,
                "--duration",
                &duration.to_string(),
                "--burst-us",
                "50",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("starting rocegen")?;
        loop {
            if let Some(status) = gen.try_wait()? {
                let mut out = String::new();
                use std::io::Read;
                if let Some(mut o) = gen.stdout.take() {
                    o.read_to_string(&mut out)?;
                }
                println!("\n== rocegen ==\n{out}");
                if !status.success() {
                    eprintln!("rocesw demo: rocegen exited with {status}");
                }
                break;
            }
            if stop.load(Ordering::Relaxed) {
                let _ = gen.kill();
                println!("interrupted");
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        sw_stop.store(true, Ordering::Relaxed);
        let outcome = switch.join().map_err(|_| anyhow::anyhow!("switch thread panicked"))??;
        println!("== switch ==");
        print!(
            "{}",
            dataplane::report::human_summary(&outcome.snapshot, "uptime", outcome.uptime_ns)
        );
        Ok(())
    }

    fn tempfile_dir() -> Result<std::path::PathBuf> {
        let dir = std::env::temp_dir().join(format!("rocesw-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}

/// Once-a-second figures while `rocesw run --stats` switches.
mod live {
    use dataplane::report::Snapshot;

    /// Per port: bytes received, bytes sent, CE marks, frames sent from the CNP queue.
    type PortTotals = Vec<(u64, u64, u64, u64)>;

    pub struct Printer {
        cnp_queue: usize,
        last: Option<(u64, PortTotals)>,
    }

    impl Printer {
        pub fn new(cfg: &controlplane::Config) -> Self {
            Printer {
                cnp_queue: cfg.cnp.queue as usize & 7,
                last: None,
            }
        }

        /// One line per second: per port the rates, the depth of every non-empty queue, CE
        /// marks and CNPs sent in the last interval, and PFC frames sent so far.
        pub fn print(&mut self, s: &Snapshot, now: u64) {
            let cur: PortTotals = s
                .ports
                .iter()
                .map(|p| {
                    (
                        p.rx_bytes,
                        p.tx_bytes,
                        p.ecn_marked,
                        p.queues[self.cnp_queue].tx_packets,
                    )
                })
                .collect();
            if let Some((t0, prev)) = &self.last {
                let dt = (now - t0) as f64 / 1e9;
                let mut line = String::new();
                for (p, (c, o)) in s.ports.iter().zip(cur.iter().zip(prev)) {
                    let queues: Vec<String> = p
                        .queues
                        .iter()
                        .filter(|q| q.depth_bytes > 0)
                        .map(|q| format!("q{}:{}KB", q.queue, q.depth_bytes / 1000))
                        .collect();
                    line += &format!(
                        " | p{} rx {:.2}G tx {:.2}G {} ce {} cnp {} pfc {}",
                        p.id,
                        (c.0 - o.0) as f64 * 8.0 / dt / 1e9,
                        (c.1 - o.1) as f64 * 8.0 / dt / 1e9,
                        if queues.is_empty() {
                            "q -".to_string()
                        } else {
                            queues.join(",")
                        },
                        c.2 - o.2,
                        c.3 - o.3,
                        p.pfc_tx.iter().sum::<u64>()
                    );
                }
                eprintln!("{:>7.1}s{line}", now as f64 / 1e9);
            }
            self.last = Some((now, cur));
        }
    }
}

/// A progress bar on stderr for long replays (hidden when stderr is not a terminal).
mod progress {
    use indicatif::{ProgressBar, ProgressStyle};
    use std::sync::OnceLock;

    static BAR: OnceLock<ProgressBar> = OnceLock::new();

    pub fn report(done: u64, total: u64) {
        let bar = BAR.get_or_init(|| {
            let b = ProgressBar::new(total);
            b.set_style(
                ProgressStyle::with_template("replay {bar:40} {bytes}/{total_bytes} input ({eta})")
                    .expect("static template"),
            );
            b
        });
        bar.set_position(done.min(total));
    }

    pub fn finish() {
        if let Some(b) = BAR.get() {
            b.finish_and_clear();
        }
    }
}

//! `rocesw`: the command line. Each subcommand is a thin shell over the library.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use dataplane::replay::{self, ReplayOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "rocesw",
    version,
    about = "A userspace, poll-mode soft switch for RoCEv2 lossless Ethernet"
)]
struct Cli {
    /// Log filter (error, warn, info, debug, trace, or tracing directives); RUST_LOG, when set,
    /// wins. A running switch's changes live: `rocectl log LEVEL [TARGET]`.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

/// `rocesw conform`'s suites.
#[derive(Subcommand)]
enum ConformCommand {
    /// SONiC's QoS tests (sonic-mgmt tests/qos, tests/pfcwd) against a config_db.json: each
    /// test's traffic through the switch the file describes, its counters checked as the PTF
    /// test checks them; a report per test and step.
    #[command(
        after_help = "Examples:\n  rocesw conform sonic --config configs/sonic/spectrum1-t1.json\n  rocesw conform sonic --config config_db.json --only PFCtest,PFCXonTest --explain\n  rocesw conform sonic --config config_db.json --params qos_params.th2.yaml --topo t1-64-lag --json"
    )]
    Sonic(Box<dataplane::conform::cli::SonicArgs>),
    /// Merge the part files of a fleet run in shards (`rocesw conform sonic --config DIR
    /// --shard I/N --output-dir D`) into the fleet report the unsharded run writes, byte for
    /// byte (fleet.json, fleet.txt, --junit), plus shards.json (each shard's host and wall
    /// time). Missing shards are named. Exit status 0 when every switch passed, 1 when one
    /// failed, 2 for bad input or an incomplete set.
    #[command(
        after_help = "Example (a fleet in 4 shards, e.g. a Slurm array; deploy/slurm/README.md):\n  for i in 0 1 2 3; do rocesw conform sonic --config fleet/ --shard $i/4 --output-dir parts; done\n  rocesw conform merge parts --output-dir report --junit report/junit.xml"
    )]
    Merge(dataplane::conform::fleet::MergeArgs),
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
        /// Switch configuration: rocesw's TOML or a SONiC config_db.json (told apart by its
        /// content), validated before anything runs.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// A capture to feed into a port, as PORT=PCAP (repeatable): the port's id from the
        /// config, or its name (`Ethernet8=a.pcap` for a config imported from SONiC).
        #[arg(long = "input", value_name = "PORT=PCAP", required = true, value_parser = parse_input)]
        inputs: Vec<(String, PathBuf)>,
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
        /// [change.patch] table merged into the config, or [change.port.Ethernet8] keys merged
        /// into one port, e.g. tx = "off"), to replay a live-tuning experiment.
        #[arg(long, value_name = "FILE")]
        schedule: Option<PathBuf>,
        /// Also write a timeline page, FILE.html (one self-contained file: open it in a
        /// browser, no network needed) and its data beside it as FILE.json: queue depths and
        /// CE marks over time, PFC per port and priority (XOFF and pause as bars, watchdog
        /// storms and restorations). Bounded: at most 400 time buckets, however long the run.
        #[arg(long, value_name = "FILE.html")]
        timeline: Option<PathBuf>,
        /// No progress bar and no human summary (summary.json is still written).
        #[arg(long, short)]
        quiet: bool,
    },
    /// Run several switches, hosts with a RoCE NIC model and the links between them in virtual
    /// time, from one topology file; writes a JSON summary per switch, flow, link and host and
    /// prints a short report.
    ///
    /// Each switch is the real switch with its own config; each host runs rocegen's NIC model
    /// (RC segmentation, PFC honouring, DCQCN); links have a speed and a cable delay. The same
    /// topology, configs and seed give byte-identical outputs. The topology file's format is
    /// shown in examples/fabric/leaf-spine.toml.
    #[command(
        after_help = "Example:\n  rocesw fabric --topology examples/fabric/leaf-spine.toml --output-dir out/ \\\n    --pcap h7-leaf1:3=out/h7.pcap"
    )]
    Fabric {
        /// The topology (TOML): [[switch]] (name, config), [[host]], [[link]] (a, b: a host
        /// name or SWITCH:PORT, the port's id or its name in the switch's config, e.g.
        /// tor:Ethernet0; optional speed and cable, which must agree with the switch port's
        /// config), optional [[route]] (switch, to = host, ports by id or name) overriding
        /// the default shortest-path ECMP, [nic] and [[traffic]] (pattern = incast |
        /// all-to-all | permutation | flows; from, to, start, and size = bytes or "long", or
        /// sizes = [[bytes, weight], ...] with load = a fraction of line rate for Poisson
        /// messages until stop), duration.
        #[arg(long, value_name = "FILE")]
        topology: PathBuf,
        /// Where summary.json goes (created if missing).
        #[arg(long, value_name = "DIR")]
        output_dir: PathBuf,
        /// Seed of everything random: WRED marking, ECMP hashing, permutations.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Virtual time to run (e.g. 2ms, more than 0), instead of the topology's `duration`.
        #[arg(long, value_name = "TIME", value_parser = parse_positive_duration)]
        duration: Option<u64>,
        /// Turn DCQCN off (no CNPs, no rate cuts) whatever the topology's [nic] says: to see
        /// a fabric with PFC alone.
        #[arg(long)]
        no_dcqcn: bool,
        /// Run every switch without its PFC watchdog, whatever its config says: to see a
        /// deadlock (examples/fabric/deadlock.toml) stay stuck.
        #[arg(long)]
        no_watchdog: bool,
        /// Capture a link into a pcap (both directions, stamped when each frame starts on the
        /// wire). LINK is the link's name: its two ends joined by '-', in either order, e.g.
        /// h7-leaf1:3 (or leaf1:3-h7) or leaf0:4-spine0:0. May be repeated.
        #[arg(long = "pcap", value_name = "LINK=FILE", value_parser = parse_pcap)]
        pcaps: Vec<(String, PathBuf)>,
        /// Switch config for [[switch]] entries without `config`. Default: the built-in
        /// profile (configs/default.toml as shipped), so fabric runs from any directory.
        #[arg(long, value_name = "FILE")]
        default_config: Option<PathBuf>,
        /// Also write a timeline page, FILE.html (one self-contained file: open it in a
        /// browser, no network needed) and its data beside it as FILE.json: queue depths and
        /// CE marks, PFC per switch port and priority with watchdog marks, each flow's rate
        /// (and DCQCN's) with a fairness index, and a heat map of pause time per link.
        /// Bounded: at most 400 time buckets, however long the run.
        #[arg(long, value_name = "FILE.html")]
        timeline: Option<PathBuf>,
        /// No progress bar and no report on stdout (summary.json is still written).
        #[arg(long, short)]
        quiet: bool,
    },
    /// Search Kmin, Kmax, Pmax and alpha for the setting under which the most traffic
    /// patterns meet three targets, by running the fabric (`rocesw fabric`'s simulation) once
    /// per setting and pattern; writes the winning config fragment for `rocectl patch`.
    ///
    /// The targets (UCloud's; change them with --target): goodput ≥ 95% of line rate on the
    /// links a pattern can fill (a host's receiving link that a long flow ends on, that
    /// messages sent all at once keep busy for at least 100 µs, or that Poisson messages offer
    /// at least its line rate on average; wire bytes over line rate from the pattern's start to
    /// its last delivery there; "n/a" when no link qualifies); PFC rarely: ≤ 5 pause frames per second
    /// in 99% of the run's time windows (100 windows: in practice at most one window with a
    /// pause frame); latency ≤ 80 µs with 90% under 40 µs (every packet's one-way latency: p99
    /// ≤ 80 µs, p90 ≤ 40 µs, and no drop).
    ///
    /// The search is deterministic for a seed, whatever the thread count: the configs as given
    /// on every pattern (the "before"), a 54-setting grid screened on every 2nd pattern, the
    /// best 4 on every pattern, then hill climbing one ladder step at a time (Kmin, Kmax 4 KiB
    /// … 2 MiB by doubling; Pmax 0.01 … 1; alpha 1/64 … 4) on every pattern, up to --budget
    /// simulations. Settings are ranked by patterns meeting all three targets, then targets
    /// met; of settings equal on both (a tie, which the report names with the knobs that made
    /// no difference), the least aggressive wins: the lowest Pmax, then the largest Kmin and
    /// Kmax, then the smallest alpha (the fewest marks and rate cuts, the least buffer per PG).
    /// The fragment sets the ECN profile of every lossless
    /// queue and the alpha of every lossless PG, the same on every switch, and is checked to
    /// apply as `rocectl patch` applies it (merged, validated, taken live).
    #[command(
        after_help = "Example (the shipped 50 patterns on the shipped 8-host switch, about 2 minutes on 2 cores):\n  rocesw tune --topology examples/tune/topology.toml --output-dir out/tune\n  rocectl patch out/tune/tuned.toml\nA quick look (under 20 seconds):\n  rocesw tune --topology examples/tune/topology.toml --output-dir out/tune --quick\nIn 4 shards (each round: the 4 shards, anywhere that sees parts/; deploy/ runs them on Slurm or Kubernetes):\n  for i in 0 1 2 3; do rocesw tune --topology examples/tune/topology.toml --quick --shard $i/4 --output-dir parts; done\n  rocesw tune merge parts --output-dir out/tune"
    )]
    Tune(dataplane::tune::cli::TuneArgs),
    /// Run a test suite's procedures against a config in virtual time: `conform sonic` runs
    /// SONiC's QoS tests (sonic-mgmt's PFC, XON, lossy queue, DWRR, DSCP mapping, headroom
    /// pool, watermark and PFC watchdog procedures) on a config_db.json in seconds. Exit status
    /// 0 when every test passes, 1 when one fails, 2 for bad input.
    #[command(subcommand)]
    Conform(ConformCommand),
    /// Run the switch in real time on interfaces (AF_PACKET on veth/tap), capture files or DPDK
    /// devices until SIGINT/SIGTERM.
    ///
    /// Every port in the config needs an `interface`, a `pcap = { input, output }` table or a
    /// `dpdk = "<device>"` (a rocesw built with `--features dpdk`); see configs/README.md.
    /// Capture files need no root with `--control PATH` or `--no-control`. Poll-mode workers as `[run]` says; the
    /// egress scheduler enforces each port's configured speed, so a veth behaves like a 25G
    /// (or 1G...) link and queues, ECN and PFC happen for real. On stop it drains the queues
    /// (bounded by run.drain_timeout) and prints the final counters.
    #[command(after_help = "Example:\n  rocesw lab up --hosts 4 && rocesw run --config /run/rocesw/lab/lab.toml")]
    Run(dataplane::runtime::run::RunArgs),
    /// A live tour (needs root): 4 test hosts, the switch on their ports, a 3→1 RoCEv2 incast
    /// with PFC and DCQCN, live per-port figures, then the generator's report and the switch's
    /// counters. Everything it creates is removed at the end, also when interrupted.
    Demo {
        /// Switch profile (its ports are replaced by the lab's). Default: the built-in profile
        /// (configs/default.toml as shipped), so the demo runs from any directory.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
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
        /// Switch profile the lab config starts from (TOML: its ports are replaced by the
        /// hosts'; a SONiC config_db.json keeps its own: host i on its i-th port, by the
        /// port's name and id, at the file's MTU). Default: the built-in profile
        /// (configs/default.toml as shipped).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Port speed written into the lab config.
        #[arg(long, default_value = "25G")]
        speed: String,
        /// MTU of the hosts and the switch ports (1280-9216). Default: a config_db.json's own
        /// (each port's PORT mtu, 9100 in most), else 1500.
        #[arg(long)]
        mtu: Option<u32>,
        /// Where labs keep their state file and switch config (NAME.json, NAME.toml).
        #[arg(long, default_value = dataplane::tools::lab::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// Remove everything `lab up` created for NAME, and only that.
    Down {
        /// The lab to remove (as given to `lab up --name`).
        #[arg(long, default_value = "lab")]
        name: String,
        /// Where labs keep their state file and switch config (NAME.json, NAME.toml).
        #[arg(long, default_value = dataplane::tools::lab::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
    /// Show a lab's hosts and config path.
    Show {
        /// The lab to show (as given to `lab up --name`).
        #[arg(long, default_value = "lab")]
        name: String,
        /// Where labs keep their state file and switch config (NAME.json, NAME.toml).
        #[arg(long, default_value = dataplane::tools::lab::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum GenCommand {
    /// An N→1 incast: the config's first N ports (ids 0..N in the default profile; Ethernet0,
    /// Ethernet4, ... in a config_db.json) each send lossless RoCEv2 SEND frames at line rate to
    /// the host on the next port (which announces itself first so the switch learns it). One
    /// capture per port, port<ID>.pcap by the port's id.
    #[command(
        after_help = "Example (how examples/incast was made):\n  rocesw gen incast --senders 3 --frames 2000 --size 1024 --output-dir examples/incast\nFor a SONiC switch (DSCP 3, its lossless class; port0/4/8.pcap into port12.pcap):\n  rocesw gen incast --config config_db.json --output-dir in\n  rocesw replay --config config_db.json --input Ethernet0=in/port0.pcap --input Ethernet4=in/port4.pcap \\\n    --input Ethernet8=in/port8.pcap --input Ethernet12=in/port12.pcap --output-dir out"
    )]
    Incast {
        /// Number of senders (the config's first N ports); the receiver is the next port.
        #[arg(long, default_value_t = 3)]
        senders: u16,
        /// The ports by name or id, senders first, then the receiver (e.g.
        /// Ethernet8,Ethernet12,Ethernet0); their number, less one, is then --senders.
        /// Default: the config's first N + 1.
        #[arg(long, value_delimiter = ',', value_name = "PORT,...")]
        ports: Option<Vec<String>>,
        /// Frames per sender.
        #[arg(long, default_value_t = 2000)]
        frames: u64,
        /// L2 frame length, without FCS: bytes or a size such as 4KiB (60 ..= 9234; a port
        /// takes frames up to its mtu + 18, 1518 in the default profile: see --config).
        #[arg(long, default_value = "1024", value_parser = dataplane::tools::gen::parse_frame_len)]
        size: usize,
        /// Senders' line rate (e.g. 25G, 100G).
        #[arg(long, default_value = "25G", value_parser = parse_rate)]
        speed: u64,
        /// DSCP of the frames. Default: the config's lowest lossless DSCP on the incast's ports
        /// (26 in the default profile, 3 in SONiC's AZURE maps), 26 if it has none.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..64))]
        dscp: Option<u8>,
        /// Directory for port<N>.pcap (created if missing).
        #[arg(long, value_name = "DIR")]
        output_dir: PathBuf,
        /// The switch config the captures are for (TOML or a config_db.json): it picks the
        /// ports and the DSCP, and a warning says if it lacks one of the ports, would drop the
        /// frames as oversize or carries the DSCP lossy. Default: the built-in profile
        /// (configs/default.toml as shipped).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

fn parse_rate(s: &str) -> Result<u64, String> {
    controlplane::units::parse_rate(s).map_err(|e| e.to_string())
}

fn parse_duration(s: &str) -> Result<u64, String> {
    controlplane::units::parse_duration(s).map_err(|e| e.to_string())
}

/// A duration that must be more than zero, as the topology file's `duration` must: a run of
/// no time measures nothing (and was taken here while the file refused it).
fn parse_positive_duration(s: &str) -> Result<u64, String> {
    match parse_duration(s)? {
        0 => Err("must be positive (a run of no time measures nothing)".to_string()),
        ns => Ok(ns),
    }
}

fn parse_pcap(s: &str) -> Result<(String, PathBuf), String> {
    let (link, path) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("expected LINK=FILE, got {s:?}"))?;
    if link.is_empty() || path.is_empty() {
        return Err(format!("expected LINK=FILE, got {s:?}"));
    }
    Ok((link.to_string(), PathBuf::from(path)))
}

fn parse_input(s: &str) -> Result<(String, PathBuf), String> {
    let (port, path) = s
        .split_once('=')
        .ok_or_else(|| format!("expected PORT=PCAP, got {s:?}"))?;
    if port.trim().is_empty() {
        return Err(format!("no port before ={path} (a port id or name)"));
    }
    if path.is_empty() {
        return Err(format!("no capture file after {port}="));
    }
    Ok((port.trim().to_string(), PathBuf::from(path)))
}

/// `--input`s with their ports named by id or by name, as port ids of `cfg`.
fn resolve_inputs(cfg: &controlplane::Config, inputs: Vec<(String, PathBuf)>) -> Result<Vec<(u16, PathBuf)>> {
    inputs
        .into_iter()
        .map(|(port, path)| {
            cfg.port_id_of(&port)
                .map(|id| (id, path))
                .map_err(|e| anyhow::anyhow!("--input {port}=…: {e}"))
        })
        .collect()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // RUST_LOG, else --log; `rocectl log` changes it in a running switch; virtual time in the
    // lines of a run in virtual time.
    dataplane::logging::init(&cli.log);
    let result = match cli.command {
        Command::Conform(ConformCommand::Sonic(args)) => {
            dataplane::conform::cli::run(*args).map(|passed| if passed { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Conform(ConformCommand::Merge(args)) => {
            dataplane::conform::fleet::merge(args)
                .map(|passed| if passed { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        other => run(other).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rocesw: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

use dataplane::report::print_stdout as out;
use dataplane::runtime::run::load_config;

fn run(cmd: Command) -> Result<()> {
    match cmd {
        Command::Replay {
            config,
            inputs,
            output_dir,
            seed,
            peer_ignores_pfc,
            schedule,
            timeline,
            quiet,
        } => {
            let cfg = load_config(&config)?;
            let inputs = resolve_inputs(&cfg, inputs)?;
            let summary = output_dir.join("summary.json");
            let timeline_data = timeline.as_deref().map(dataplane::timeline::data_path).transpose()?;
            {
                // Every file written (the summary, a capture per port) against every file read
                // (the config, the schedule, the captures), before anything is written.
                let mut ins: Vec<(String, &std::path::Path)> = vec![("config".to_string(), &config)];
                if let Some(s) = &schedule {
                    ins.push(("schedule".to_string(), s));
                }
                ins.extend(inputs.iter().map(|(id, p)| (format!("port {id} input"), p.as_path())));
                let ports: Vec<PathBuf> = cfg
                    .ports
                    .iter()
                    .map(|p| output_dir.join(format!("port{}.pcap", p.id)))
                    .collect();
                let mut outs: Vec<(String, &std::path::Path)> = vec![("the summary".to_string(), &summary)];
                outs.extend(
                    cfg.ports
                        .iter()
                        .zip(&ports)
                        .map(|(p, o)| (format!("port {} output", p.id), o.as_path())),
                );
                if let (Some(page), Some(data)) = (&timeline, &timeline_data) {
                    outs.push(("the timeline (--timeline)".to_string(), page));
                    outs.push(("the timeline's data".to_string(), data));
                }
                controlplane::files::refuse_aliased_outputs(&ins, &outs).map_err(anyhow::Error::msg)?;
            }
            let schedule = match schedule {
                Some(path) => dataplane::replay::schedule::Schedule::load(&config, &path)?,
                None => Default::default(),
            };
            let opts = ReplayOptions {
                inputs,
                output_dir: output_dir.clone(),
                seed,
                peer_ignores_pfc,
                progress: if quiet {
                    None
                } else {
                    Some(dataplane::replay::progress::report)
                },
                schedule,
                timeline: timeline.is_some(),
            };
            let outcome = replay::run(&cfg, &opts)?;
            dataplane::replay::progress::finish();
            let json = serde_json::to_string_pretty(&outcome)?;
            std::fs::write(&summary, json + "\n").with_context(|| format!("cannot write {}", summary.display()))?;
            let mut wrote_timeline = String::new();
            if let (Some(page), Some(t)) = (&timeline, &outcome.timeline) {
                t.write(page)?;
                wrote_timeline = format!(", the timeline {}", page.display());
            }
            if !quiet {
                let changes: String = outcome
                    .schedule
                    .iter()
                    .map(|c| {
                        format!(
                            "schedule: at {} {}: {}\n",
                            controlplane::units::format_duration(c.at_ns),
                            if c.applied {
                                "applied"
                            } else {
                                "NOT applied (after the end)"
                            },
                            c.keys.join(", ")
                        )
                    })
                    .collect();
                out(&format!(
                    "{changes}{}wrote {}{wrote_timeline} and {} port captures\n",
                    dataplane::report::human_summary(&outcome.snapshot, "virtual time", outcome.duration_ns),
                    summary.display(),
                    outcome.outputs.len()
                ))?;
            }
            Ok(())
        }
        Command::Fabric {
            topology,
            output_dir,
            seed,
            duration,
            no_dcqcn,
            no_watchdog,
            pcaps,
            default_config,
            timeline,
            quiet,
        } => {
            let topo = dataplane::fabric::topology::load(&topology, default_config.as_deref(), seed)?;
            let summary = output_dir.join("summary.json");
            dataplane::fabric::refuse_aliased_outputs(&topology, &topo, Some(&summary), &pcaps, timeline.as_deref())?;
            let opts = dataplane::fabric::FabricOptions {
                seed,
                duration_ns: duration,
                dcqcn: no_dcqcn.then_some(false),
                watchdog: no_watchdog.then_some(false),
                pcaps: pcaps.clone(),
                timeline: timeline.is_some(),
                progress: if quiet {
                    None
                } else {
                    Some(dataplane::fabric::progress::report)
                },
            };
            std::fs::create_dir_all(&output_dir)
                .with_context(|| format!("cannot create output directory {}", output_dir.display()))?;
            let outcome = dataplane::fabric::run(&topo, &opts)?;
            dataplane::fabric::progress::finish();
            let json = serde_json::to_string_pretty(&outcome)?;
            std::fs::write(&summary, json + "\n").with_context(|| format!("cannot write {}", summary.display()))?;
            let mut wrote_timeline = String::new();
            if let (Some(page), Some(t)) = (&timeline, &outcome.timeline) {
                t.write(page)?;
                wrote_timeline = format!(" and the timeline {}", page.display());
            }
            if !quiet {
                out(&format!(
                    "{}wrote {}{wrote_timeline}\n{}",
                    dataplane::fabric::human_report(&outcome),
                    summary.display(),
                    dataplane::fabric::pcaps_written(&topo, &outcome, &pcaps)?
                ))?;
            }
            Ok(())
        }
        Command::Run(args) => dataplane::runtime::run::run(args),
        Command::Tune(args) => dataplane::tune::cli::run(args),
        Command::Conform(_) => unreachable!("run by main"),
        Command::Demo {
            config,
            duration,
            speed,
            rate,
        } => dataplane::tools::demo::run(config.as_deref(), duration, &speed, &rate),
        Command::Lab(LabCommand::Up {
            hosts,
            name,
            config,
            speed,
            mtu,
            state_dir,
        }) => {
            let spec = dataplane::tools::lab::LabSpec {
                name,
                hosts,
                speed,
                mtu,
            };
            let lab = dataplane::tools::lab::up(&spec, config.as_deref(), &state_dir)?;
            out(&format!("{lab}\n"))
        }
        Command::Lab(LabCommand::Down { name, state_dir }) => {
            out(&format!("{}\n", dataplane::tools::lab::down(&name, &state_dir)?))
        }
        Command::Lab(LabCommand::Show { name, state_dir }) => {
            out(&format!("{}\n", dataplane::tools::lab::load(&name, &state_dir)?))
        }
        Command::Gen(GenCommand::Incast {
            senders,
            ports,
            frames,
            size,
            speed,
            dscp,
            output_dir,
            config,
        }) => {
            let (cfg, name) = match &config {
                Some(path) => (load_config(path)?, path.display().to_string()),
                None => (
                    controlplane::load_str(controlplane::DEFAULT_PROFILE)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", controlplane::DEFAULT_PROFILE_NAME))?
                        .config,
                    controlplane::DEFAULT_PROFILE_NAME.to_string(),
                ),
            };
            let senders = match &ports {
                Some(p) if p.len() >= 2 => u16::try_from(p.len() - 1).unwrap_or(u16::MAX),
                _ => senders,
            };
            let ids = dataplane::tools::gen::incast_ports(&cfg, &name, senders, ports.as_deref())?;
            let classes = dataplane::tools::lab::LabClasses::of(&cfg, &ids);
            let incast = dataplane::tools::gen::Incast {
                senders,
                frames,
                frame_len: size,
                speed_bps: speed,
                dscp: dscp.or(classes.default_dscp()).unwrap_or(26),
            };
            let mut warnings = incast.warnings_on(&cfg, &name, &ids);
            if !classes.lossless_dscps.is_empty() && !classes.lossless_dscps.contains(&incast.dscp) {
                warnings.push(format!(
                    "DSCP {} is not lossless in {name} on these ports (its lossless DSCPs: {})",
                    incast.dscp,
                    classes
                        .lossless_dscps
                        .iter()
                        .map(u8::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            for w in warnings {
                eprintln!("rocesw: warning: {w}");
            }
            // A capture written over the config it was made for (a symlink or hard link in
            // the output folder) would leave the user neither.
            let ins: Vec<(String, &std::path::Path)> = config
                .iter()
                .map(|c| ("the config (--config)".to_string(), c.as_path()))
                .collect();
            let outs: Vec<(String, PathBuf)> = ids
                .iter()
                .map(|i| (format!("port {i} capture"), output_dir.join(format!("port{i}.pcap"))))
                .collect();
            let outs: Vec<(String, &std::path::Path)> = outs.iter().map(|(w, p)| (w.clone(), p.as_path())).collect();
            controlplane::files::refuse_aliased_outputs(&ins, &outs).map_err(anyhow::Error::msg)?;
            let label = |id: u16| match cfg.ports.iter().find(|p| p.id == id).and_then(|p| p.name.clone()) {
                Some(n) => format!("{n}, port {id}"),
                None => format!("port {id}"),
            };
            let wrote: String = incast
                .write_on(&output_dir, &ids)?
                .iter()
                .zip(&ids)
                .enumerate()
                .map(|(i, (p, &id))| {
                    let role = if i < ids.len() - 1 { "sender" } else { "receiver" };
                    format!("wrote {} ({}: {role})\n", p.display(), label(id))
                })
                .collect();
            out(&format!("{wrote}DSCP {}\n", incast.dscp))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every option and argument of every subcommand says what it is for: a newcomer's `-h`
    /// never shows a bare flag.
    #[test]
    fn every_option_has_help() {
        let missing = ctl::help::undocumented_args(&Cli::command());
        assert!(missing.is_empty(), "options without help: {missing:?}");
    }

    /// `run --help` names every kind of port `run` accepts (issue 10 once found it naming
    /// only interfaces).
    #[test]
    fn run_help_names_every_port_kind() {
        let cli = Cli::command();
        let run = cli.find_subcommand("run").unwrap();
        let help = run.get_long_about().unwrap().to_string();
        for kind in ["`interface`", "`pcap = { input, output }`", "`dpdk = \"<device>\"`"] {
            assert!(help.contains(kind), "{kind} missing from:\n{help}");
        }
    }
}

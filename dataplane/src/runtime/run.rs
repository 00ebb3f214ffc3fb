//! `rocesw run`: wires a config to ports, workers, the control server and the live printer,
//! runs until stopped, and reports. The binary's argument parsing stays in main.rs.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What `rocesw run` was asked to do: its command-line options.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The switch config (TOML; see configs/README.md), validated whole before the start.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Seed for WRED's random marking decisions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print to stderr, when something changes (checked every second; every 10 s while traffic
    /// flows, and whenever frames are lost): a line per busy port with its rates, queue depths,
    /// PFC, marks, drops and the priorities paused now, and how far the emulated wires are
    /// behind real time.
    #[arg(long)]
    pub stats: bool,
    /// Write the final counters as JSON here on exit.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Stop by itself after this many seconds (tests, demos).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Control socket for `rocectl` (mode 0600; see controlplane/PROTOCOL.md). Default:
    /// /run/rocesw/NAME.sock with --name, else /run/rocesw/rocesw.sock.
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// This switch's name: reported to `rocectl`, and its socket is /run/rocesw/NAME.sock
    /// (so `rocectl --switch NAME` finds it). Lets one host run a small fabric.
    #[arg(long, value_parser = switch_name)]
    pub name: Option<String>,
    /// Also serve the control protocol over TCP on this loopback address (e.g.
    /// 127.0.0.1:7700), for a control plane in another network namespace or container;
    /// every connection must first send the token of --control-token-file.
    #[arg(long, value_name = "ADDR", requires = "control_token_file")]
    pub control_tcp: Option<std::net::SocketAddr>,
    /// File holding the TCP token (mode 0600 or 0400): at least 16 characters, at least 10 of
    /// them different; make one with `head -c 24 /dev/urandom | base64 > FILE && chmod 600 FILE`.
    #[arg(long, value_name = "FILE", requires = "control_tcp")]
    pub control_token_file: Option<PathBuf>,
    /// Do not open a control socket.
    #[arg(long, conflicts_with_all = ["control", "control_tcp"])]
    pub no_control: bool,
    /// When every port's input is a capture (a capture-file port, or a DPDK `net_pcap` with an
    /// `rx_pcap` and no `infinite_rx=1`): keep running after the inputs end (by default the run
    /// drains and stops then), e.g. to inspect it with `rocectl`.
    #[arg(long)]
    pub keep_running: bool,
}

/// A switch name as `--name` takes it (the socket path is made from it).
fn switch_name(s: &str) -> Result<String, String> {
    controlplane::protocol::check_name(s).map(|()| s.to_string())
}

/// Loads and validates a config file. Its warnings are counted in one line that points at
/// `rocectl check`, which says them in full: every replay, gen and run of the same file
/// repeating them buried what each command had to say.
pub fn load_config(path: &Path) -> Result<controlplane::Config> {
    let loaded =
        controlplane::load_file(path).map_err(|e| anyhow::anyhow!("{}: invalid config:\n{e}", path.display()))?;
    if let Some(line) = loaded.warnings_pointer(&path.display().to_string()) {
        eprintln!("rocesw: {line}");
    }
    Ok(loaded.config)
}

/// A control socket that cannot be created stops the run; the message says how to run anyway,
/// since capture-file ports need no root but the default socket under /run/rocesw does.
fn control_socket_error(path: &Path, e: anyhow::Error) -> anyhow::Error {
    let msg = format!("{e:#}");
    if msg.contains("another switch") {
        return e.context(format!("control socket {}", path.display()));
    }
    let root = if path.starts_with("/run") {
        " (the default under /run/rocesw needs root)"
    } else {
        ""
    };
    anyhow::anyhow!(
        "control socket {}: {msg}\n  to run anyway, give --control PATH (somewhere you may write, e.g. \
         --control ./rocesw.sock{root}) or --no-control",
        path.display()
    )
}

/// `rocesw run`: loads the config, opens the ports and the control socket, switches until SIGINT,
/// SIGTERM or `--duration`, then reports.
pub fn run(args: RunArgs) -> Result<()> {
    // First of all, before the EAL starts: a SIGINT or SIGTERM during start-up (a script's
    // cleanup) would otherwise kill the process inside `rte_eal_init`, with no summary and
    // DPDK's runtime directory left behind. Caught here, it only sets the flag, and the run
    // ends as any stop does, once its ports are open.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let RunArgs {
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
    } = args;
    let tcp = match (control_tcp, &control_token_file) {
        (Some(addr), Some(file)) => Some(crate::runtime::control_server::TcpControl {
            addr,
            token: controlplane::protocol::read_token_file(file).map_err(|e| anyhow::anyhow!(e))?,
        }),
        _ => None,
    };
    let control = control.unwrap_or_else(|| match &name {
        Some(n) => controlplane::protocol::socket_of(n),
        None => PathBuf::from(controlplane::protocol::DEFAULT_SOCKET),
    });
    let cfg = crate::runtime::run::load_config(&config)?;
    if let Some(p) = cfg
        .ports
        .iter()
        .find(|p| p.interface.is_none() && p.pcap.is_none() && p.dpdk.is_none())
    {
        anyhow::bail!(
            "port {} has neither an interface nor a pcap table: rocesw run needs `interface = \"...\"`, \
             `pcap = {{ input = \"...\", output = \"...\" }}` or `dpdk = \"<device>\"` on every [[port]]",
            p.id
        );
    }
    // The buffers are allocated and faulted in at start-up: refused before anything starts
    // when the machine (or its cgroup) has less available, with the figures.
    if let Some(why) =
        controlplane::memory::machine_available().and_then(|avail| controlplane::memory::machine_refusal(&cfg, avail))
    {
        anyhow::bail!("{why}");
    }
    // Before any port opens (a `pcap` output is created when its port opens, a DPDK
    // `tx_pcap` when the EAL probes the device): no output may be an input or another output,
    // however the paths are spelt, whatever kind of port writes it.
    {
        let mut ins = vec![("the config".to_string(), config.as_path())];
        ins.extend(control_token_file.as_deref().map(|f| ("the token file".to_string(), f)));
        // The summary, written at exit, must not replace the config, the token file or a capture.
        let outs: Vec<_> = summary
            .as_deref()
            .map(|f| ("the summary (--summary)".to_string(), f))
            .into_iter()
            .collect();
        controlplane::files::PortFiles::of(&cfg)
            .refuse_aliases(&ins, &outs)
            .map_err(anyhow::Error::msg)?;
        if let Some(f) = &summary {
            controlplane::files::refuse_unwritable_output("--summary", f).map_err(anyhow::Error::msg)?;
        }
    }
    // What feeds each port, and whether it ends: a capture file does (a capture-file port's
    // input, a DPDK net_pcap's rx_pcap), a device or an interface does not.
    let feeds: Vec<Feed> = cfg.ports.iter().map(feed_of).collect();
    let inputs = feeds
        .iter()
        .filter(|f| matches!(f, Feed::Capture | Feed::DpdkFile(_)))
        .count();
    let endless = feeds.iter().find_map(|f| match f {
        Feed::Endless(why) => Some(why.clone()),
        _ => None,
    });
    let dpdk_ends: std::collections::BTreeMap<u16, u64> = cfg
        .ports
        .iter()
        .zip(&feeds)
        .filter_map(|(p, f)| match f {
            Feed::DpdkFile(n) => Some((p.id, *n)),
            _ => None,
        })
        .collect();
    let pcap_clock = crate::io::PcapClock::new();
    let inputs_left = crate::io::InputsLeft::new(inputs);
    let dpdk_ports = open_dpdk_ports(&cfg, &dpdk_ends, &inputs_left)?;
    match (&endless, keep_running, duration) {
        (_, _, Some(_)) => {}
        (Some(why), _, None) => eprintln!(
            "rocesw: this run does not end by itself ({why}): Ctrl-C or SIGTERM stops it \
             (--duration SECS bounds it)"
        ),
        (None, true, None) => {
            eprintln!("rocesw: --keep-running: the run goes on after its inputs end; Ctrl-C or SIGTERM stops it")
        }
        (None, false, None) if inputs > 0 => {
            eprintln!("rocesw: the run ends once every input is read and the queues have drained")
        }
        (None, false, None) => {}
    }
    if !keep_running && inputs > 0 && endless.is_none() {
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
        let text = std::fs::read_to_string(&config).with_context(|| format!("cannot read {}", config.display()))?;
        Some(
            crate::runtime::control_server::ControlServer::spawn_with(
                &control,
                text,
                queue.clone(),
                crate::runtime::control_server::ControlOptions {
                    name: name.clone(),
                    tcp,
                },
            )
            .map_err(|e| control_socket_error(&control, e))?,
        )
    };
    // Said once every port is open (RunOptions::ready), not before: scripts start their
    // traffic on this line, and a frame sent before a port's socket exists is lost uncounted.
    let switching = format!(
        "rocesw: switching {} ports ({}) on {} worker(s); Ctrl-C stops",
        cfg.ports.len(),
        cfg.ports
            .iter()
            .map(|p| match (&p.interface, &p.pcap, &p.dpdk) {
                (Some(i), _, _) => i.clone(),
                (None, None, Some(d)) => d.split(',').next().unwrap_or(d).to_string(),
                (None, _, _) => format!("pcap{}", p.id),
            })
            .collect::<Vec<_>>()
            .join(", "),
        cfg.run.workers
    );
    let opts = crate::runtime::worker::RunOptions {
        seed,
        control: (!no_control).then_some(queue),
        ready: Some(Box::new(move || eprintln!("{switching}"))),
        open: Box::new(move |p: &controlplane::PortConfig| {
            if let Some(port) = dpdk_ports.borrow_mut().remove(&p.id) {
                return Ok(port);
            }
            if let Some(pc) = &p.pcap {
                let name = p.name.clone().unwrap_or_else(|| format!("pcap{}", p.id));
                let port = crate::io::PcapPort::open(&name, pc, pcap_clock.clone(), &inputs_left)?;
                return Ok(Box::new(port) as Box<dyn crate::io::PortBackend + Send>);
            }
            let ifname = p.interface.as_deref().unwrap_or_default();
            let port = crate::io::AfPacket::open(ifname, crate::io::AfPacketOptions::for_port(p))?;
            Ok(Box::new(port) as Box<dyn crate::io::PortBackend + Send>)
        }),
    };
    let mut printer = crate::report::live::Printer::new(&cfg);
    let mut hook = |s: &crate::report::Snapshot, now: u64| printer.print(s, now);
    let outcome = crate::runtime::worker::run(&cfg, opts, stop, if stats { Some(&mut hook) } else { None })?;
    // A reader gone away (`rocesw run … | head`) must not keep the summary from being written.
    let printed = crate::report::print_stdout(&crate::report::run_end::text(&outcome, &cfg));
    if let Some(path) = summary {
        let json = crate::report::run_end::summary_json(&outcome, &cfg);
        std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    printed
}

/// What feeds a port, for whether the run ends by itself.
#[derive(Debug, Clone, PartialEq)]
enum Feed {
    /// A capture-file port's input (`pcap.input`), read to its end.
    Capture,
    /// A DPDK port's `rx_pcap`, read once: that many frames.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    DpdkFile(u64),
    /// Nothing: no frames come in (an output-only capture port or `net_pcap`).
    Nothing,
    /// Frames with no end the switch can see, and why, for the start-up line.
    Endless(String),
}

fn feed_of(p: &controlplane::PortConfig) -> Feed {
    if let Some(pc) = &p.pcap {
        return if pc.input.is_some() {
            Feed::Capture
        } else {
            Feed::Nothing
        };
    }
    if let Some(device) = &p.dpdk {
        #[cfg(feature = "dpdk")]
        {
            use dpdk::RxSource;
            return match dpdk::DeviceSpec::parse(device).map(|s| s.rx_source()) {
                Ok(RxSource::File(f)) => match crate::io::pcap::count_records(&f) {
                    Ok(n) => Feed::DpdkFile(n),
                    Err(e) => Feed::Endless(format!("port {}: cannot count the frames of its rx_pcap: {e}", p.id)),
                },
                Ok(RxSource::Nothing) => Feed::Nothing,
                Ok(RxSource::Endless(why)) => Feed::Endless(format!("port {}: {why}", p.id)),
                Err(e) => Feed::Endless(format!("port {}: {e}", p.id)),
            };
        }
        #[cfg(not(feature = "dpdk"))]
        return Feed::Endless(format!("port {}: DPDK device {device}", p.id));
    }
    Feed::Endless(format!(
        "port {} receives from interface {}",
        p.id,
        p.interface.as_deref().unwrap_or("?")
    ))
}

/// The backends of a config's DPDK ports, by port id, opened before anything else starts.
type DpdkPorts = std::cell::RefCell<std::collections::BTreeMap<u16, Box<dyn crate::io::PortBackend + Send>>>;

/// Starts DPDK (once) and opens every DPDK port of `cfg`, reporting each one's driver and link;
/// without the `dpdk` feature, refuses a config that has any. A port in `ends` (id → frames
/// of its `rx_pcap`) takes one off `left` once it has read them.
#[cfg_attr(not(feature = "dpdk"), allow(unused_variables))]
fn open_dpdk_ports(
    cfg: &controlplane::Config,
    ends: &std::collections::BTreeMap<u16, u64>,
    left: &crate::io::InputsLeft,
) -> Result<DpdkPorts> {
    let ports = DpdkPorts::default();
    let Some(first) = cfg.ports.iter().find(|p| p.dpdk.is_some()) else {
        return Ok(ports);
    };
    if !cfg!(feature = "dpdk") {
        anyhow::bail!(
            "port {} (dpdk = {:?}): this rocesw was built without DPDK support: cargo build --release \
             --features dpdk",
            first.id,
            first.dpdk.as_deref().unwrap_or_default()
        );
    }
    #[cfg(feature = "dpdk")]
    {
        let Some(rt) = crate::io::dpdk::DpdkRuntime::start(cfg)? else {
            return Ok(ports);
        };
        let pool = rt.pool();
        eprintln!(
            "rocesw: DPDK mempool: {} mbufs of {} B, handler {}",
            pool.size(),
            pool.frame_room(),
            pool.ops()
        );
        for p in cfg.ports.iter().filter(|p| p.dpdk.is_some()) {
            let device = p.dpdk.as_deref().unwrap_or_default();
            let mut port = rt
                .open(p)
                .map_err(|e| anyhow::anyhow!("port {} (dpdk = {device:?}): {e}", p.id))?;
            if let Some(&records) = ends.get(&p.id) {
                port.end_input_after(records, left);
            }
            // The configured speed is the one the switch sends at (and times PFC with); a
            // virtual device's driver reports a nominal one (net_vhost: 10 Gb/s), said second.
            eprintln!(
                "rocesw: port {}: DPDK {} (driver {}), speed {} as configured; the driver reports {}",
                p.id,
                crate::io::PortBackend::name(&port),
                port.driver(),
                controlplane::units::format_rate(p.speed_bps),
                port.link_text()
            );
            ports.borrow_mut().insert(p.id, Box::new(port));
        }
    }
    Ok(ports)
}

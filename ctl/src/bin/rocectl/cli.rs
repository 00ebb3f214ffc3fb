//! What `rocectl` accepts: the clap definitions, and the unit parsers its flags use.

use clap::{ArgMatches, Args, FromArgMatches, Parser, Subcommand, ValueEnum};
use controlplane::units;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "rocectl",
    version,
    about = "Configure and inspect rocesw switches",
    after_help = "Connection options (--socket, --switch, --all, --tcp, --token-file) belong to the commands \
                  that talk to a switch (show, clear, apply, set, patch, watch, capture, daemon): after the \
                  command (`rocectl show pfc --switch leaf1`) or, as before, ahead of it (`rocectl \
                  --switch leaf1 show pfc`), in one place. `check`, `headroom`, `switches` and `vlarb` take none."
)]
pub struct Cli {
    // Connection options given before the command (`rocectl --socket PATH show counters`).
    #[command(flatten)]
    pub connection: ConnectionArgs,
    #[command(subcommand)]
    pub command: Command,
}

// Which switch a command talks to: flattened into every command that contacts one (and into
// each `set` knob), so the offline commands do not list them. `Cli` takes them too, so the
// order rocectl always accepted (`rocectl --socket PATH show counters`) keeps working;
// `target::connection` merges the two places. A plain comment, not a doc comment: clap makes
// a flattened struct's doc comment the description of every command it is flattened into
// (it was each `set` knob's).
#[derive(Args, Clone, Debug, Default, PartialEq)]
#[command(next_help_heading = "Connection")]
pub struct ConnectionArgs {
    /// The running switch's control socket (`rocesw run --control`); default
    /// /run/rocesw/rocesw.sock.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Address switches by name (`rocesw run --name NAME` listens on /run/rocesw/NAME.sock):
    /// repeat or separate with commas; `show`, `clear`, `apply`, `set` and `patch` act on each
    /// in turn. With no connection option given, ROCECTL_SWITCH (if set) names them.
    #[arg(
        long = "switch",
        short = 's',
        value_name = "NAME",
        value_delimiter = ',',
        conflicts_with = "socket"
    )]
    pub switches: Vec<String>,
    /// Every switch with a socket in /run/rocesw (see `rocectl switches`).
    #[arg(long, conflicts_with_all = ["socket", "switches"])]
    pub all: bool,
    /// Talk to a switch over TCP instead (`rocesw run --control-tcp`): its loopback address.
    #[arg(long, value_name = "ADDR", requires = "token_file", conflicts_with_all = ["socket", "switches", "all"])]
    pub tcp: Option<String>,
    /// The token file for --tcp (private to its owner, as the switch's).
    #[arg(long, value_name = "FILE", requires = "tcp")]
    pub token_file: Option<PathBuf>,
}

impl ConnectionArgs {
    /// The options given, as the user spelt them (for messages).
    pub fn given(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.socket.is_some() {
            out.push("--socket");
        }
        if !self.switches.is_empty() {
            out.push("--switch");
        }
        if self.all {
            out.push("--all");
        }
        if self.tcp.is_some() {
            out.push("--tcp");
        }
        if self.token_file.is_some() {
            out.push("--token-file");
        }
        out
    }
}

/// `rocectl set KNOB …`: the knob (the library's `set::Set`, shared with its tests) and the
/// connection options given after it. Written by hand because the options are added to each
/// knob's subcommand (`rocectl set ecn --kmax 10KB --switch leaf1`), which the library's enum
/// does not know about.
#[derive(Clone, Debug)]
pub struct SetCommand {
    pub knob: ctl::set::Set,
    pub connection: ConnectionArgs,
}

impl FromArgMatches for SetCommand {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Self::from_arg_matches_mut(&mut m.clone())
    }

    fn from_arg_matches_mut(m: &mut ArgMatches) -> Result<Self, clap::Error> {
        let connection = match m.subcommand() {
            Some((_, knob)) => ConnectionArgs::from_arg_matches(knob)?,
            None => ConnectionArgs::default(),
        };
        let knob = ctl::set::Set::from_arg_matches_mut(m)?;
        Ok(Self { knob, connection })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Subcommand for SetCommand {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        ctl::set::Set::augment_subcommands(cmd).mut_subcommands(ConnectionArgs::augment_args)
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        ctl::set::Set::augment_subcommands_for_update(cmd).mut_subcommands(ConnectionArgs::augment_args)
    }

    fn has_subcommand(name: &str) -> bool {
        ctl::set::Set::has_subcommand(name)
    }
}

#[derive(Subcommand)]
pub enum Command {
    /// Validate a config file offline: every error with its field, then the budget warnings,
    /// and the memory `rocesw run` allocates at start-up for it (refused when this machine, or
    /// its cgroup, has less available). Exit 0 when valid (warnings allowed), 1 when invalid.
    Check {
        /// The config to check: rocesw's TOML, or a SONiC config_db.json (told by its content).
        file: PathBuf,
        /// Also print the resolved buffer figures (cells, headroom per port and PG).
        #[arg(long, short)]
        verbose: bool,
        /// For a config_db.json: the platform and lookup table, as `sonic import` takes them.
        #[command(flatten)]
        sonic: SonicArgs,
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
    /// Show a running switch's counters, interfaces, queues, PGs, PFC, buffer, watermarks, MAC table or config.
    #[command(
        after_help = "Examples:\n  rocectl show pfc\n  rocectl show interfaces --interval-ms 500\n  rocectl show queues Ethernet8 Ethernet12\n  rocectl show buffer Ethernet0\n  rocectl show watermarks --persistent\n  rocectl show config --switch leaf1 > leaf1.toml"
    )]
    Show {
        /// What to show.
        what: Show,
        /// Only these ports, by name (`Ethernet8`, as the config names them) or id (`8`); every
        /// port by default. Not for `config`.
        #[arg(value_name = "PORT")]
        ports: Vec<String>,
        /// The switch's answer as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// With `watermarks`: the persistent watermarks instead of the user ones.
        #[arg(long)]
        persistent: bool,
        /// Buffer levels and watermarks in cells (default: bytes, cells × the cell size).
        #[arg(long)]
        cells: bool,
        /// With `config`: also say where the running config differs from FILE (e.g. the file
        /// `rocectl daemon` keeps the switch on: a change behind its back shows here).
        #[arg(long, value_name = "FILE")]
        against: Option<PathBuf>,
        /// With `interfaces` and `queues`: the rates are over this many milliseconds, between
        /// two snapshots taken that far apart (so the command takes that long); 0 for no rates
        /// (one snapshot). `--json` takes one snapshot and has no rates, except `interfaces`.
        #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=60_000))]
        interval_ms: u64,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
    /// Clear watermarks (the user ones, or with `--persistent` the persistent ones; peaks restart
    /// from the current use), or counters (a baseline `show` subtracts, kept per user and
    /// switch; the switch's totals and metrics stay monotonic, as SONiC's `sonic-clear`).
    Clear {
        /// What to clear.
        what: ClearWhat,
        /// The persistent watermarks instead of the user ones.
        #[arg(long)]
        persistent: bool,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
    /// Replace the running switch's config with FILE (validated whole; all or nothing).
    Apply {
        /// The whole config (TOML).
        file: PathBuf,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
    /// Change one live knob of the running switch (ECN, alpha, PG, queue, policer, PFC,
    /// watchdog, DSCP), globally or with --port on one port; applied whole, all or nothing.
    #[command(subcommand)]
    Set(SetCommand),
    /// Merge a TOML fragment into the running config (FILE, or - for stdin): anything `set`
    /// has no subcommand for, e.g. classification rules. Tables merge key by key; arrays replace.
    #[command(after_help = "Example:\n  printf '[fdb]\\naging = \"60s\"\\n' | rocectl patch -")]
    Patch {
        /// The TOML fragment, or - for standard input.
        file: PathBuf,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
    /// The switches listening in /run/rocesw: name, version, uptime (or why one does not answer).
    Switches,
    /// Keep the switch on the config in FILE: apply it now, after every valid edit of the
    /// file, and whenever the switch restarts; refuse bad edits with the reason (the running
    /// config stays). Serves Prometheus metrics of every counter on a loopback address.
    #[command(
        after_help = "Examples:\n  rocectl daemon --config /etc/rocesw/switch.toml\n  rocectl daemon --config leaf1.toml --socket /run/rocesw/leaf1.sock --metrics 127.0.0.1:9465\n  curl -s localhost:9464/metrics | grep rocesw_queue_ecn_marked"
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
        /// What to do when the switch's running config drifts from the file (a `rocectl set`
        /// behind the daemon): `warn` says it (log, the rocectl_daemon_drift metric) and leaves
        /// both; `restore` puts the file's config back (SONiC's `config reload`); `adopt` writes
        /// the running config into the file (SONiC's `config save`; not for a config_db.json).
        #[arg(long, value_name = "ACTION", default_value = "warn", value_parser = ["warn", "restore", "adopt"])]
        on_drift: String,
        /// How often the file is checked and the switch's running config compared with it.
        #[arg(long, value_name = "MS", default_value_t = 250, value_parser = clap::value_parser!(u64).range(20..=60_000))]
        poll_ms: u64,
        /// The `switch` label of the metrics (default: the socket's file name).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
    /// InfiniBand VL arbitration, offline: admission control for a port's high-priority table.
    #[command(subcommand)]
    Vlarb(Vlarb),
    /// SONiC's config_db.json, offline: import it as a rocesw config (every value with its
    /// origin), or send tuned values back to the switch as a JSON Patch.
    #[command(subcommand)]
    Sonic(Sonic),
    /// Capture a port of the running switch live into a pcap file: the frames it receives (as
    /// they arrived, malformed ones too) and/or sends (as sent: CE marks and DSCP rewrites
    /// applied, PFC and CNP frames included). Both directions unless --rx or --tx. Runs until
    /// --count, --duration, Ctrl-C or the switch stops; the file is valid at every moment.
    #[command(
        after_help = "The switch never waits for a capture: frames its ring cannot hold (this reader fell behind) are \
                      counted as dropped and reported at the end (and in `show counters --json`, ports[].capture).\n\n\
                      Examples:\n  rocectl capture --port 3 --tx -w port3-tx.pcap\n  \
                      rocectl capture --port 0 --rx --count 1000 -w port0-rx.pcap\n  \
                      rocectl capture --port Ethernet8 --duration 5s -w eth8.pcap      # by name (a SONiC config's)\n  \
                      rocectl capture --port 3 --duration 10s -w port3.pcap --tcp 127.0.0.1:7700 --token-file token\n  \
                      tshark -r port3-tx.pcap -Y 'ip.dsfield.ecn == 3'      # CE-marked frames\n  \
                      tshark -r port0.pcap -Y 'macc.opcode == 0x0101 || infiniband.bth.opcode == 129'   # PFC, CNPs"
    )]
    Capture {
        /// The port to capture: its name (`Ethernet8`, as the config names it) or its id (`8`).
        #[arg(long, value_name = "PORT")]
        port: String,
        /// Only the frames the port receives.
        #[arg(long, conflicts_with = "tx")]
        rx: bool,
        /// Only the frames the port sends.
        #[arg(long)]
        tx: bool,
        /// Stop after this many frames.
        #[arg(long, short = 'c', value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
        /// Stop after this long, e.g. 10s, 500ms.
        #[arg(long, value_parser = duration)]
        duration: Option<std::time::Duration>,
        /// The pcap file to write (classic pcap, nanosecond wall-clock timestamps, Ethernet).
        #[arg(short = 'w', long = "write", value_name = "FILE")]
        file: PathBuf,
        /// Overwrite FILE if it exists (by default an existing file is refused).
        #[arg(long)]
        force: bool,
        /// Bytes kept of each frame (at least 64); default: the port's largest frame (whole frames).
        #[arg(long, value_name = "BYTES")]
        snaplen: Option<u32>,
        /// Frames the switch holds for this capture while this reader catches up: 1 to 65536, at
        /// most 64 MiB with the snap length (default: 32 MiB worth, between 256 and 8192); beyond
        /// it frames are dropped and counted. All captures together hold at most 256 MiB.
        #[arg(long, value_name = "FRAMES")]
        ring: Option<u32>,
        /// No progress line (it is printed only when standard error is a terminal).
        #[arg(long, short = 'q')]
        quiet: bool,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
    /// The running switch's log filter, or a change of it that takes effect at once (as
    /// `ovs-appctl vlog/set`): LEVEL alone sets every target to it; LEVEL TARGET sets that
    /// module only (its one directive replaced), the rest of the filter unchanged. Without
    /// arguments it shows the filter. The filter is at most 1,024 bytes; a change that would
    /// make it longer is refused and changes nothing.
    #[command(
        after_help = "Examples:\n  rocectl log                              # the filter now, e.g. warn\n  \
                      rocectl log debug dataplane::runtime     # that module at debug, the rest as it was\n  \
                      rocectl log warn                         # back to warn everywhere\n\n\
                      The switch logs on its standard error (`rocesw run --log` sets the filter at start)."
    )]
    Log {
        /// off, error, warn, info, debug or trace (any case).
        #[arg(value_parser = log_level)]
        level: Option<String>,
        /// The module whose level changes (a Rust module path, e.g. dataplane::runtime,
        /// dataplane::runtime::control_server); default: all of them.
        #[arg(requires = "level", value_parser = log_target)]
        target: Option<String>,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
    /// Live view until interrupted: per port rates, ECN marks, PFC sent and received, drops,
    /// time paused and buffer use; per busy queue its rate, marks, drops and depth.
    Watch {
        /// How often the view refreshes, in milliseconds.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..))]
        interval_ms: u64,
        /// Buffer levels in cells (default: bytes, cells × the cell size).
        #[arg(long)]
        cells: bool,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
}

impl Command {
    /// The command's name, as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Check { .. } => "check",
            Command::Headroom { .. } => "headroom",
            Command::Show { .. } => "show",
            Command::Clear { .. } => "clear",
            Command::Apply { .. } => "apply",
            Command::Set(_) => "set",
            Command::Patch { .. } => "patch",
            Command::Switches => "switches",
            Command::Daemon { .. } => "daemon",
            Command::Watch { .. } => "watch",
            Command::Vlarb(_) => "vlarb",
            Command::Sonic(_) => "sonic",
            Command::Capture { .. } => "capture",
            Command::Log { .. } => "log",
        }
    }

    /// The connection options given after the command; `None` for the commands that talk to
    /// no switch named by them (`check`, `headroom`, `switches`).
    pub fn connection(&self) -> Option<&ConnectionArgs> {
        match self {
            // `sonic export --running` asks the switch for its config; the rest is offline.
            Command::Sonic(Sonic::Export {
                running: true,
                connection,
                ..
            }) => Some(connection),
            Command::Check { .. }
            | Command::Headroom { .. }
            | Command::Switches
            | Command::Vlarb(_)
            | Command::Sonic(_) => None,
            Command::Show { connection, .. }
            | Command::Clear { connection, .. }
            | Command::Apply { connection, .. }
            | Command::Patch { connection, .. }
            | Command::Daemon { connection, .. }
            | Command::Watch { connection, .. }
            | Command::Capture { connection, .. }
            | Command::Log { connection, .. } => Some(connection),
            Command::Set(set) => Some(&set.connection),
        }
    }
}

/// `rocectl sonic …`: a SONiC config_db.json in and out.
#[derive(Subcommand)]
pub enum Sonic {
    /// Write the rocesw config a config_db.json runs as: TOML with each value's SONiC origin
    /// (TABLE|key|field) in a comment. `rocesw replay`, `run`, `fabric`, `tune` and `rocectl
    /// check` take the config_db.json itself too; this is for reading and editing it.
    #[command(after_help = concat!(
        "Examples:
",
        "  rocectl sonic import config_db.json -o switch.toml
",
        "  rocectl sonic import config_db.json --platform spectrum2 -o -
",
        "  rocectl sonic import config_db.json --pg-lookup pg_profile_lookup.ini -o switch.toml
",
        "
",
        "Take the file from the switch: `show runningconfiguration all > config_db.json`, or
",
        "/etc/sonic/config_db.json. Platforms: spectrum1, spectrum2, spectrum3, spectrum4,
",
        "tomahawk1, tomahawk2, tomahawk5 (from DEVICE_METADATA's platform unless --platform)."
    ))]
    Import {
        /// The config_db.json (nested tables, flat TABLE|key entries, or both).
        file: PathBuf,
        /// Where to write the TOML (- for standard output); never over the input.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: PathBuf,
        #[command(flatten)]
        sonic: SonicArgs,
    },
    /// The changes a rocesw config makes to an imported config_db.json (each PG's and queue's
    /// buffer profile, the WRED thresholds, the schedulers, the DSCP/TC maps), as an RFC 6902
    /// JSON Patch for SONiC's `config apply-patch`, with a readable diff on standard error.
    #[command(after_help = concat!(
        "Examples:
",
        "  rocectl sonic export config_db.json --running -o tuned.patch.json   # the switch running now
",
        "  rocectl sonic export config_db.json --fragment tuned.toml -o tuned.patch.json
",
        "  rocectl show config > running.toml && rocectl sonic export config_db.json --config running.toml
",
        "  sudo config apply-patch tuned.patch.json        # on the switch
",
        "
",
        "--running: the running switch's config (over its control socket, as `rocectl show config`
",
        "prints it) against the file: only the keys that differ. --config: a whole config from a
",
        "file. --fragment: a fragment (rocesw tune's, or one for rocectl patch) laid over the
",
        "imported config. Ports are matched by name: a lab made from the file (`rocesw lab up
",
        "--config config_db.json`) exports its tuning; the file's ports it lacks stay as they are,
",
        "and its speed (or MTU) is a note, not a change (PORT is the hardware). Exit 0 with the
",
        "patch ([] when nothing changed), 1 when a change cannot be said in the file (e.g. two
",
        "ports share a profile and differ), 2 on bad input or a switch that does not answer."
    ))]
    Export {
        /// The config_db.json the config was imported from (or a lab was made from).
        file: PathBuf,
        /// A whole rocesw config (TOML) to export.
        #[arg(
            long,
            value_name = "FILE",
            conflicts_with_all = ["fragment", "running"],
            required_unless_present_any = ["fragment", "running"]
        )]
        config: Option<PathBuf>,
        /// A TOML fragment laid over the imported config.
        #[arg(long, value_name = "FILE", conflicts_with = "running")]
        fragment: Option<PathBuf>,
        /// Export the running switch's config (asked over its control socket: --socket,
        /// --switch, --tcp), as --config would a file of it.
        #[arg(long)]
        running: bool,
        #[command(flatten)]
        connection: ConnectionArgs,
        /// Where to write the JSON Patch (default: standard output); never over an input.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        sonic: SonicArgs,
    },
}

/// How a config_db.json is read.
#[derive(Args)]
pub struct SonicArgs {
    /// The ASIC whose buffer rules apply, over DEVICE_METADATA's platform: spectrum1,
    /// spectrum2, spectrum3, spectrum4, tomahawk1, tomahawk2 or tomahawk5.
    #[arg(long, value_name = "NAME")]
    pub platform: Option<String>,
    /// The platform's pg_profile_lookup.ini (speed cable size xon xoff threshold
    /// [xon_offset]), for lossless PGs the file gives no profile (made as buffermgrd would).
    #[arg(long, value_name = "FILE")]
    pub pg_lookup: Option<PathBuf>,
}

/// `rocectl vlarb …`: offline tools for the VL arbitration scheduler.
#[derive(Subcommand)]
pub enum Vlarb {
    /// Admit connections (bandwidth, latency) to the high-priority table; print it and the
    /// bounds; write the fragment to apply live.
    ///
    /// Fills the table by the bit-reversal method of Alfaro, Sánchez and Duato: admits what
    /// fits, refuses the rest with the reason, releases and re-packs; prints the table and each
    /// connection's latency bound; writes the config fragment for `rocectl patch`. Exit 0 when
    /// every request was admitted, 1 when some were refused (the others are kept), 2 on bad
    /// input (nothing written).
    #[command(after_help = concat!(
        "Examples:\n",
        "  rocectl vlarb admit --speed 100G --high-limit 6 --state port.json \\\n",
        "      -r name=a,bw=2G,latency=20us,mtu=1024 -r name=b,bw=500M,distance=16 -o frag.toml\n",
        "  rocectl vlarb admit --state port.json --release a -o frag.toml\n",
        "  rocectl patch frag.toml\n",
        "\n",
        "Sizes are frames as the switch holds them (no FCS): mtu=M means a frame of M + 18 B.\n",
        "A latency is met by the largest distance whose bound holds whatever else is admitted\n",
        "later (the \"guaranteed\" column); \"bound now\" is the bound on the table as it is.\n",
        "The model and its assumptions: README, \"Admission control for VL arbitration\"."
    ))]
    Admit(AdmitArgs),
}

#[derive(Args)]
pub struct AdmitArgs {
    /// A connection to admit, as key=value pairs: name=NAME,bw=RATE and latency=TIME or
    /// distance=2|4|…|64, optionally mtu=BYTES (IP MTU; frame = MTU + 18) or frame=BYTES (the
    /// port's largest if neither), and vl=N. Repeatable; admitted in order, after the releases.
    #[arg(long = "request", short = 'r', value_name = "SPEC")]
    pub requests: Vec<String>,
    /// A file of requests with the keys of --request: TOML ([[request]] tables) or, for a
    /// .json file, a JSON array of objects. Repeatable; admitted after the --request ones.
    #[arg(long = "requests", value_name = "FILE")]
    pub request_files: Vec<PathBuf>,
    /// Release a connection (by name) before admitting; the table is then re-packed.
    /// Repeatable. Needs --state.
    #[arg(long, value_name = "NAME", requires = "state")]
    pub release: Vec<String>,
    /// The admitted connections of earlier runs (JSON): read if the file exists, written back
    /// with this run's changes, so admissions accumulate. It keeps the port's parameters too.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// A switch config to take the port's speed, largest frame and vlarb.high_limit from.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The table is for this [[port]] (its id) of --config; without it, for [port_defaults]
    /// (then the slowest port's speed and the largest frame of any port count).
    #[arg(long, value_name = "ID", requires = "config")]
    pub port: Option<u16>,
    /// The port's speed, e.g. 100G (default: from --config or --state).
    #[arg(long, value_name = "RATE", value_parser = rate)]
    pub speed: Option<u64>,
    /// LimitOfHighPriority, 0..=255: 4 KiB units of high-priority bytes before a waiting
    /// low-priority frame goes; 255 = unbounded, 0 = one high frame at a time. Default: from
    /// --config or --state, else 255. Written to the fragment.
    #[arg(long, value_name = "Q")]
    pub high_limit: Option<u8>,
    /// The port's IP MTU: its largest frame, on any VL, is MTU + 18 B (default: from --config
    /// or --state, else 1500).
    #[arg(long, value_name = "BYTES")]
    pub mtu: Option<u32>,
    /// The smallest frame the high-priority VLs send (stored bytes, no FCS): bounds how many
    /// frames, each with its wire overhead, one table entry can hold. Default 60.
    #[arg(long, value_name = "BYTES")]
    pub min_frame: Option<u32>,
    /// The VLs (queues) sequences may be given, e.g. 1,2,3 (default 1-7: queue 0 stays for the
    /// low-priority table). One VL per sequence size.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = clap::value_parser!(u8).range(0..8))]
    pub vls: Option<Vec<u8>>,
    /// Write the config fragment that puts the table on the switch (`rocectl patch FILE`).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the result as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Show {
    /// Per port: packets and bytes each way, ECN marks, drops by reason.
    Counters,
    /// Per port, as SONiC's `show interfaces status` and `counters`: link state (as the
    /// backend last read it; capture files have none), backend, speed, MTU, peer (emulated or
    /// wire), and rx/tx rates and utilisation over `--interval-ms`.
    Interfaces,
    /// Per egress queue: transmitted, dropped, ECN-marked, depth and peak, and the rates over
    /// `--interval-ms`.
    Queues,
    /// Per ingress priority group: received, dropped, XOFF/XON sent, cells in use and peaks.
    Pgs,
    /// PFC frames sent and received per priority, the time paused (`*`: paused right now), and
    /// the PFC watchdog per port and PFC priority (as SONiC's `show pfcwd stats`: storms
    /// detected and restored, in a storm now or not).
    Pfc,
    /// The pools (type, mode, size, shared headroom pool, use and peak), each port's use, and
    /// per port and PG the values in force (pool, min, limit, headroom, XON) with where each
    /// came from (a SONiC import's BUFFER_PROFILE|…|field, a key of the config, default).
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
pub enum ClearWhat {
    /// Buffer watermarks (peaks) of every PG, queue, port and the pool.
    Watermarks,
    /// What `show counters|queues|pgs|pfc` print, for you: they then count from now. The
    /// switch's own totals, its summary and its metrics never reset.
    Counters,
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

fn log_level(s: &str) -> Result<String, String> {
    controlplane::protocol::check_log(s, None)
}

fn log_target(s: &str) -> Result<String, String> {
    controlplane::protocol::check_log("info", Some(s)).map(|_| s.to_string())
}

fn duration(s: &str) -> Result<std::time::Duration, String> {
    match units::parse_duration(s) {
        Ok(0) => Err("the duration must be more than 0".into()),
        Ok(ns) => Ok(std::time::Duration::from_nanos(ns)),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every option and argument of every subcommand says what it is for.
    #[test]
    fn every_option_has_help() {
        let missing = ctl::help::undocumented_args(&Cli::command());
        assert!(missing.is_empty(), "options without help: {missing:?}");
    }

    /// `set ecn` names its target by profile or by queue: an error says either will do.
    #[test]
    fn set_ecn_wants_a_profile_or_a_queue() {
        use clap::Parser;
        let err = Cli::try_parse_from(["rocectl", "set", "ecn", "--kmax", "10KB"])
            .err()
            .expect("refused");
        let msg = err.to_string();
        assert!(msg.contains("--profile") && msg.contains("--queue"), "{msg}");
        assert!(Cli::try_parse_from(["rocectl", "set", "ecn", "--queue", "3", "--kmax", "10KB"]).is_ok());
    }

    const CONNECTION: [&str; 5] = ["socket", "switches", "all", "tcp", "token_file"];

    fn connection_ids(cmd: &clap::Command) -> Vec<&str> {
        cmd.get_arguments()
            .map(|a| a.get_id().as_str())
            .filter(|id| CONNECTION.contains(id))
            .collect()
    }

    /// The commands that talk to no switch they are told of do not list the connection
    /// options; every other command, and every `set` knob, takes all of them.
    #[test]
    fn only_the_commands_that_talk_to_a_switch_take_connection_options() {
        let cli = Cli::command();
        assert_eq!(connection_ids(&cli), CONNECTION, "before the command");
        for sub in cli.get_subcommands() {
            let name = sub.get_name();
            let ids = connection_ids(sub);
            match name {
                "check" | "headroom" | "switches" => assert!(ids.is_empty(), "{name}: {ids:?}"),
                "vlarb" | "sonic" => {
                    assert!(ids.is_empty(), "{name}: {ids:?}");
                    for sub in sub.get_subcommands() {
                        // `sonic export --running` asks a switch for its config.
                        if (name, sub.get_name()) == ("sonic", "export") {
                            assert_eq!(connection_ids(sub), CONNECTION, "sonic export");
                            continue;
                        }
                        assert!(connection_ids(sub).is_empty(), "{name} {}", sub.get_name());
                    }
                }
                "set" => {
                    assert!(ids.is_empty(), "set itself: {ids:?} (the knobs take them)");
                    assert!(sub.get_subcommands().count() >= 8);
                    for knob in sub.get_subcommands() {
                        assert_eq!(connection_ids(knob), CONNECTION, "set {}", knob.get_name());
                    }
                }
                _ => assert_eq!(ids, CONNECTION, "{name}"),
            }
        }
    }

    /// Issue 49 item 3: `sonic export --running` talks to the switch the connection options
    /// name (and only with --running); it takes no --config or --fragment beside it.
    #[test]
    fn sonic_export_running_talks_to_the_switch() {
        use clap::Parser;
        let parse = |args: &[&str]| Cli::try_parse_from([&["rocectl", "sonic", "export", "db.json"], args].concat());
        let running = parse(&["--running", "--socket", "/tmp/x.sock"]).unwrap();
        assert_eq!(
            running.command.connection().and_then(|c| c.socket.clone()),
            Some(std::path::PathBuf::from("/tmp/x.sock"))
        );
        let offline = parse(&["--config", "running.toml"]).unwrap();
        assert!(offline.command.connection().is_none());
        for bad in [
            &["--running", "--config", "r.toml"][..],
            &["--running", "--fragment", "f.toml"],
            &[],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    /// The --socket help names the default the code uses.
    #[test]
    fn the_socket_help_names_the_default() {
        let cli = Cli::command();
        let socket = cli.get_arguments().find(|a| a.get_id() == "socket").unwrap();
        let help = socket.get_help().unwrap().to_string();
        assert!(help.contains(controlplane::protocol::DEFAULT_SOCKET), "{help}");
    }

    fn resolve(args: &[&str], env: Option<&str>) -> Result<Option<super::ConnectionArgs>, String> {
        use clap::Parser;
        let cli = Cli::try_parse_from(std::iter::once("rocectl").chain(args.iter().copied())).unwrap();
        crate::target::connection(&cli.connection, &cli.command, env)
    }

    fn socket(args: &[&str], env: Option<&str>) -> Option<std::path::PathBuf> {
        resolve(args, env).unwrap().unwrap().socket
    }

    /// Connection options after the command, or before it as rocectl always took them.
    #[test]
    fn connection_options_before_or_after_the_command() {
        let p = Some(std::path::PathBuf::from("/tmp/s.sock"));
        assert_eq!(socket(&["show", "counters", "--socket", "/tmp/s.sock"], None), p);
        assert_eq!(socket(&["--socket", "/tmp/s.sock", "show", "counters"], None), p);
        assert_eq!(
            socket(
                &[
                    "set",
                    "ecn",
                    "--queue",
                    "3",
                    "--kmax",
                    "10KB",
                    "--socket",
                    "/tmp/s.sock"
                ],
                None
            ),
            p
        );
        assert_eq!(
            socket(&["--socket", "/tmp/s.sock", "set", "alpha", "--pg", "3", "1/4"], None),
            p
        );
        assert_eq!(
            socket(&["daemon", "--config", "x.toml", "--socket", "/tmp/s.sock"], None),
            p
        );
        let after = resolve(&["watch", "-s", "a,b"], None).unwrap().unwrap();
        assert_eq!(after.switches, ["a", "b"]);
        let tcp = resolve(
            &["clear", "watermarks", "--tcp", "127.0.0.1:7700", "--token-file", "t"],
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(tcp.tcp.as_deref(), Some("127.0.0.1:7700"));
    }

    /// Given in both places, they are refused (neither silently wins), naming both.
    #[test]
    fn connection_options_in_two_places_are_refused() {
        let e = resolve(&["--socket", "/tmp/a", "show", "counters", "--switch", "b"], None).unwrap_err();
        assert!(
            e.contains("before `show` (--socket)") && e.contains("after it (--switch)"),
            "{e}"
        );
        let e = resolve(&["-s", "a", "set", "pfc", "--pause-quanta", "1", "-s", "a"], None).unwrap_err();
        assert!(e.contains("one place"), "{e}");
    }

    /// ROCECTL_SWITCH names the switches only when no connection option is given: an explicit
    /// --socket (before or after the command) or --all is not a conflict with it.
    #[test]
    fn rocectl_switch_is_the_default_only() {
        let env = Some("leaf1,leaf2");
        let conn = resolve(&["show", "pfc"], env).unwrap().unwrap();
        assert_eq!(conn.switches, ["leaf1", "leaf2"]);
        assert_eq!(conn.socket, None);
        let p = Some(std::path::PathBuf::from("/tmp/s.sock"));
        assert_eq!(socket(&["show", "pfc", "--socket", "/tmp/s.sock"], env), p);
        assert_eq!(socket(&["--socket", "/tmp/s.sock", "show", "pfc"], env), p);
        let all = resolve(&["show", "pfc", "--all"], env).unwrap().unwrap();
        assert!(all.all && all.switches.is_empty());
        assert_eq!(
            resolve(&["show", "pfc"], Some("")).unwrap().unwrap(),
            Default::default()
        );
        // An offline command ignores the environment.
        assert_eq!(resolve(&["check", "x.toml"], env), Ok(None));
    }

    /// The offline commands refuse connection options given before them (after them, clap
    /// refuses them as unknown), naming what to remove.
    #[test]
    fn offline_commands_refuse_connection_options() {
        use clap::Parser;
        let e = resolve(&["--socket", "/tmp/s", "check", "x.toml"], None).unwrap_err();
        assert!(
            e.contains("`check` works offline") && e.contains("remove --socket"),
            "{e}"
        );
        let e = resolve(&["--all", "headroom", "--speed", "25G", "--cable", "1m"], None).unwrap_err();
        assert!(e.contains("`headroom`") && e.contains("remove --all"), "{e}");
        let e = resolve(&["--socket", "/tmp/s", "vlarb", "admit", "--speed", "25G"], None).unwrap_err();
        assert!(
            e.contains("`vlarb` works offline") && e.contains("remove --socket"),
            "{e}"
        );
        let e = resolve(&["-s", "a", "switches"], None).unwrap_err();
        assert!(e.contains("`switches`") && e.contains("remove --switch"), "{e}");
        for args in [
            &["check", "x.toml", "--socket", "/tmp/s"][..],
            &["headroom", "--speed", "25G", "--cable", "1m", "--switch", "a"],
            &["switches", "--all"],
            &["vlarb", "admit", "--speed", "25G", "--switch", "a"],
        ] {
            let e = Cli::try_parse_from(std::iter::once("rocectl").chain(args.iter().copied()))
                .err()
                .unwrap_or_else(|| panic!("{args:?} accepted"));
            assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{args:?}: {e}");
        }
    }
}

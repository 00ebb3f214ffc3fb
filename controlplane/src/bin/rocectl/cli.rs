//! What `rocectl` accepts: the clap definitions, and the unit parsers its flags use.

use clap::{Parser, Subcommand, ValueEnum};
use controlplane::{protocol, units};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "rocectl", version, about = "Configure and inspect rocesw switches")]
pub struct Cli {
    /// The running switch's control socket (`rocesw run --control`).
    #[arg(long, global = true, value_name = "PATH", default_value = protocol::DEFAULT_SOCKET, help_heading = "Connection (commands that talk to a switch)")]
    pub socket: PathBuf,
    /// Address switches by name (`rocesw run --name NAME` listens on /run/rocesw/NAME.sock):
    /// repeat or separate with commas. `show`, `apply` and `set` then act on each in turn.
    #[arg(
        long = "switch",
        short = 's',
        global = true,
        help_heading = "Connection (commands that talk to a switch)",
        value_name = "NAME",
        value_delimiter = ',',
        env = "ROCECTL_SWITCH",
        conflicts_with = "socket"
    )]
    pub switches: Vec<String>,
    /// Every switch with a socket in /run/rocesw (see `rocectl switches`).
    #[arg(long, global = true, conflicts_with_all = ["socket", "switches"], help_heading = "Connection (commands that talk to a switch)")]
    pub all: bool,
    /// Talk to a switch over TCP instead (`rocesw run --control-tcp`): its loopback address.
    #[arg(long, global = true, value_name = "ADDR", requires = "token_file", conflicts_with_all = ["socket", "switches", "all"], help_heading = "Connection (commands that talk to a switch)")]
    pub tcp: Option<String>,
    /// The token file for --tcp (private to its owner, as the switch's).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        requires = "tcp",
        help_heading = "Connection (commands that talk to a switch)"
    )]
    pub token_file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
        /// What to show.
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
        /// What to clear.
        what: ClearWhat,
        /// The persistent watermarks instead of the user ones.
        #[arg(long)]
        persistent: bool,
    },
    /// Replace the running switch's config with FILE (validated whole; all or nothing).
    Apply {
        /// The whole config (TOML).
        file: PathBuf,
    },
    /// Change one live knob of the running switch (ECN, alpha, PG, queue, policer, PFC,
    /// watchdog, DSCP), globally or with --port on one port; applied whole, all or nothing.
    #[command(subcommand)]
    Set(controlplane::set::Set),
    /// Merge a TOML fragment into the running config (FILE, or - for stdin): anything `set`
    /// has no subcommand for, e.g. classification rules. Tables merge key by key; arrays replace.
    #[command(after_help = "Example:\n  printf '[fdb]\\naging = \"60s\"\\n' | rocectl patch -")]
    Patch {
        /// The TOML fragment, or - for standard input.
        file: PathBuf,
    },
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
        /// How often the view refreshes, in milliseconds.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..))]
        interval_ms: u64,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Show {
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
pub enum ClearWhat {
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

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every option and argument of every subcommand says what it is for.
    #[test]
    fn every_option_has_help() {
        let missing = controlplane::help::undocumented_args(&Cli::command());
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
}

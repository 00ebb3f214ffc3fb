//! `rocectl`: rocesw's control-plane command line. For now the offline commands: validate a
//! config (`check`) and the PFC headroom calculator (`headroom`). Talking to a running
//! dataplane comes with the control socket.

use clap::{Parser, Subcommand};
use controlplane::{headroom, units};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "rocectl", version, about = "Configure and inspect rocesw switches")]
struct Cli {
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
    match Cli::parse().command {
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
    }
}

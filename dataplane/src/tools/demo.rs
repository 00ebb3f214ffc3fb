//! `rocesw demo`: lab, switch, generator, report, teardown.

use crate::io::{AfPacket, PortBackend};
use crate::tools::lab::{self, LabSpec};
use anyhow::{bail, Context, Result};
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
            Ok(r) => say(&format!("{r}\n")),
            Err(e) => eprintln!("rocesw demo: teardown: {e:#}"),
        }
        let _ = std::fs::remove_dir(self.state);
    }
}

/// `config`: the switch profile; `None` for the built-in default profile.
pub fn run(config: Option<&Path>, duration: f64, speed: &str, rate: &str) -> Result<()> {
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
        mtu: None,
    };
    let lab = lab::up(&spec, config, &state).context("creating the demo lab")?;
    let _teardown = Teardown {
        name: &name,
        state: &state,
    };
    say(&format!("{lab}\n\n"));
    let cfg = controlplane::load_file(&lab.config_path)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .config;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let sw_stop = Arc::new(AtomicBool::new(false));
    let s2 = sw_stop.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let switch = std::thread::spawn(move || {
        let opts = crate::runtime::worker::RunOptions {
            seed: 1,
            control: None,
            ready: Some(Box::new(move || {
                let _ = ready_tx.send(());
            })),
            open: Box::new(|p: &controlplane::PortConfig| {
                let port = AfPacket::open(
                    p.interface.as_deref().unwrap_or_default(),
                    crate::io::AfPacketOptions::for_port(p),
                )?;
                Ok(Box::new(port) as Box<dyn PortBackend + Send>)
            }),
        };
        let mut printer = crate::report::live::Printer::new(&cfg);
        let mut hook = |s: &crate::report::Snapshot, now: u64| printer.print(s, now);
        crate::runtime::worker::run(&cfg, opts, s2, Some(&mut hook))
    });
    // Traffic starts once every port is open: a frame sent before its port's socket exists is
    // lost where nothing counts it, and the demo would report a loss the switch never saw.
    if ready_rx.recv().is_err() {
        // The switch stopped before it was ready: its error says why.
        let outcome = switch.join().map_err(|_| anyhow::anyhow!("switch thread panicked"))?;
        return outcome.map(|_| ()).context("the switch did not start");
    }
    // rocegen sends the lab's first lossless DSCP (`LabClasses`), 26 in the default profile.
    let class = match lab.classes.default_dscp() {
        Some(d) => format!("lossless RoCEv2 (DSCP {d})"),
        None => "RoCEv2 on DSCP 26, which this config makes lossy,".to_string(),
    };
    say(&format!(
        "3→1 incast: hosts 1-3 send {class} at {rate} each to host 0 for {duration} s; {} runs at {speed}\n\n",
        lab.hosts[0].port_label()
    ));
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
            say(&format!("\n== rocegen ==\n{out}\n"));
            if !status.success() {
                eprintln!("rocesw demo: rocegen exited with {status}");
            }
            break;
        }
        if stop.load(Ordering::Relaxed) {
            let _ = gen.kill();
            say("interrupted\n");
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    sw_stop.store(true, Ordering::Relaxed);
    let outcome = switch.join().map_err(|_| anyhow::anyhow!("switch thread panicked"))??;
    say("== switch ==\n");
    say(&crate::report::human_summary(
        &outcome.snapshot,
        "uptime",
        outcome.uptime_ns,
    ));
    Ok(())
}

/// Prints to standard output; a reader that went away (`rocesw demo | head`) is no reason to
/// stop before the lab is torn down, and nothing else could be done about a failed write.
fn say(text: &str) {
    let _ = crate::report::print_stdout(text);
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("rocesw-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

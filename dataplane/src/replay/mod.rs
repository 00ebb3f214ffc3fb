//! `rocesw replay`: captures in, the switch in virtual time, captures and a summary out.
//!
//! A discrete-event loop: the clock jumps to the next thing that can happen (a peer's frame
//! arriving, a link finishing a frame, a pause expiring, a timer) and the same `Switch` the
//! real-time workers run handles it. Nothing reads the wall clock, so the same inputs, config
//! and seed give byte-identical outputs.

pub(crate) mod pcapio;
mod peer;
pub mod progress;
pub mod schedule;

pub use pcapio::{PcapInput, PcapOutput};
pub use peer::{Peer, PEER_HOLD_LIMIT_BYTES};

use crate::report::Snapshot;
use crate::switch::{ser_ps, Switch, TxSink};
use anyhow::{bail, Context, Result};
use controlplane::Config;
use std::path::{Path, PathBuf};

/// What to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// (port id, capture) pairs; a port may appear once.
    pub inputs: Vec<(u16, PathBuf)>,
    /// Where the port captures go (`port<ID>.pcap`), created if missing.
    pub output_dir: PathBuf,
    /// Seeds the switch's random draws (WRED): same inputs and seed, same bytes out.
    pub seed: u64,
    /// Model peers that ignore PFC (to show what happens without flow control).
    pub peer_ignores_pfc: bool,
    /// Called now and then with (input bytes consumed, total input bytes).
    pub progress: Option<fn(u64, u64)>,
    /// Config changes at virtual times (ns from the replay's start), in time order: the
    /// reproducible form of live tuning (`rocesw replay --schedule`).
    pub schedule: schedule::Schedule,
    /// Record a timeline (`--timeline`): [`ReplayOutcome::timeline`]. Off, the loop only tests
    /// this once per round.
    pub timeline: bool,
}

/// A change of the schedule as the replay applied it (or could not: its time came after the
/// last frame left).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AppliedChange {
    /// When it was due and applied, in virtual ns from the replay's start.
    pub at_ns: u64,
    /// False when the replay ended before `at_ns`: the change never took effect.
    pub applied: bool,
    /// Dotted config paths the change set.
    pub keys: Vec<String>,
}

/// What a replay produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReplayOutcome {
    /// The seed the replay ran with.
    pub seed: u64,
    /// Virtual time from the first input frame to the last transmitted frame.
    pub duration_ns: u64,
    /// Frames read from the inputs and offered to the switch.
    pub input_frames: u64,
    /// Frames the inputs hold only in part (captured with a snap length): not replayed.
    pub input_frames_skipped_snaplen: u64,
    /// The port captures written, relative to the output folder.
    pub outputs: Vec<PathBuf>,
    /// Each change of `--schedule`, in time order (absent without one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<AppliedChange>,
    /// The switch's counters at the end, flattened into the summary beside these fields.
    #[serde(flatten)]
    pub snapshot: Snapshot,
    /// What happened over time, with [`ReplayOptions::timeline`]; not in summary.json.
    #[serde(skip)]
    pub timeline: Option<crate::timeline::Timeline>,
}

struct Outputs<'a> {
    files: Vec<PcapOutput>,
    peers: &'a mut [Option<Peer>],
    speeds: Vec<u64>,
    base_ns: u64,
    last_ns: u64,
    error: Option<anyhow::Error>,
    /// Frames sent that are not MAC control (PFC): what moves traffic along.
    data_frames: u64,
}

impl TxSink for Outputs<'_> {
    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        if frame.get(12..14) != Some(&[0x88, 0x08]) {
            self.data_frames += 1;
        }
        let ser_ns = ser_ps(frame.len(), self.speeds[port]) / 1000;
        self.last_ns = self.last_ns.max(at_ns + ser_ns);
        if let Some(peer) = self.peers[port].as_mut() {
            peer.on_frame_from_switch(frame, at_ns, ser_ns);
        }
        if self.error.is_none() {
            if let Err(e) = self.files[port].write(self.base_ns + at_ns, frame) {
                self.error = Some(e);
            }
        }
    }
}

/// How long a replay goes on with nothing moving while a port whose transmit is off holds
/// frames (only PFC refreshes left to happen) before it ends.
const TX_OFF_IDLE_NS: u64 = 1_000_000_000;

/// Replays the inputs through a switch running `cfg` and writes one capture per port; errors if an
/// input names no port of `cfg`, cannot be read, or an output aliases an input.
pub fn run(cfg: &Config, opts: &ReplayOptions) -> Result<ReplayOutcome> {
    let mut sw = Switch::new(cfg, opts.seed);
    let n = sw.num_ports();
    let mut seen = vec![false; n];
    for (id, path) in &opts.inputs {
        let Some(idx) = sw.port_index(*id) else {
            let ids: Vec<String> = cfg.ports.iter().map(|p| p.id.to_string()).collect();
            bail!(
                "--input {id}={}: the config has no port {id} (ports: {})",
                path.display(),
                ids.join(", ")
            );
        };
        if std::mem::replace(&mut seen[idx], true) {
            bail!("port {id} is given more than one --input");
        }
    }
    // Outputs are named in the summary relative to the output folder, so the same replay into
    // two folders writes the same summary.
    let names: Vec<PathBuf> = cfg
        .ports
        .iter()
        .map(|p| PathBuf::from(format!("port{}.pcap", p.id)))
        .collect();
    let paths: Vec<PathBuf> = names.iter().map(|name| opts.output_dir.join(name)).collect();
    let labelled_in: Vec<(String, &Path)> = opts
        .inputs
        .iter()
        .map(|(id, p)| (format!("port {id} input"), p.as_path()))
        .collect();
    let labelled_out: Vec<(String, &Path)> = cfg
        .ports
        .iter()
        .zip(&paths)
        .map(|(p, path)| (format!("port {} output", p.id), path.as_path()))
        .collect();
    pcapio::refuse_aliased_outputs(&labelled_in, &labelled_out)?;

    // Each input is opened once (a pipe cannot be reopened); its first frame is read ahead to
    // find replay time zero, the earliest first timestamp across inputs.
    let mut base_ns = u64::MAX;
    let mut total_bytes = 0u64;
    let mut opened = Vec::new();
    for (id, path) in &opts.inputs {
        let idx = sw.port_index(*id).expect("checked above");
        let mut input = PcapInput::open(path)?;
        if let Some(ts) = input.first_ts() {
            base_ns = base_ns.min(ts);
        }
        total_bytes += std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        opened.push((idx, input));
    }
    if base_ns == u64::MAX {
        base_ns = 0;
    }

    let mut peers: Vec<Option<Peer>> = (0..n).map(|_| None).collect();
    for (idx, input) in opened {
        let port = &cfg.ports[idx];
        let quanta = controlplane::headroom::peer_response_quanta(port.speed_bps);
        peers[idx] = Some(Peer::new(
            input,
            base_ns,
            port.speed_bps,
            port.cable_m,
            quanta,
            !opts.peer_ignores_pfc,
        ));
    }

    std::fs::create_dir_all(&opts.output_dir)
        .with_context(|| format!("cannot create output directory {}", opts.output_dir.display()))?;
    let mut files = Vec::with_capacity(n);
    for path in &paths {
        files.push(PcapOutput::create(path)?);
    }
    let speeds = cfg.ports.iter().map(|p| p.speed_bps).collect();
    let mut out = Outputs {
        files,
        peers: &mut peers,
        speeds,
        base_ns,
        last_ns: 0,
        error: None,
        data_frames: 0,
    };

    let mut now = 0u64;
    let mut schedule = opts.schedule.player();
    let mut input_frames = 0u64;
    let mut input_bytes = 0u64;
    let mut last_progress = 0u64;
    let (mut moved, mut last_moved) = ((0u64, 0u64), 0u64);
    // Log lines from here on carry the virtual time.
    let clock = crate::logging::VirtualClock::start();
    let mut timeline = opts.timeline.then(|| {
        let mut r = crate::timeline::Recorder::new("replay", 0);
        r.add_switch("", &sw);
        r
    });
    loop {
        clock.set(now);
        let mut progressed = false;
        if let Some(tl) = timeline.as_mut() {
            if tl.sample_due(now) {
                tl.sample_switch(0, &sw);
                tl.end_sample(now);
            }
        }
        // Changes due now apply before anything else at this instant: a frame arriving at the
        // same nanosecond is handled under the new config.
        while let Some(at) = schedule.next_at().filter(|&at| at <= now) {
            let step = schedule.taken();
            let config = schedule.take().expect("a step is due")?;
            sw.reconfigure(&config)
                .map_err(|e| anyhow::anyhow!("schedule change at {at} ns: {e}"))?;
            if let Some(tl) = timeline.as_mut() {
                tl.change(now, opts.schedule.steps()[step].describe());
            }
            progressed = true;
        }
        for port in 0..n {
            let Some(peer) = out.peers[port].as_mut() else { continue };
            while let Some((frame, at)) = peer.pop_due(now, sw.port_maps(port)) {
                input_frames += 1;
                // pcap record header + data, to match the file sizes the bar counts.
                input_bytes += frame.len() as u64 + 16;
                sw.receive(port, &frame, at);
                progressed = true;
            }
        }
        sw.poll(now);
        for port in 0..n {
            progressed |= sw.transmit(port, now, &mut out) > 0;
        }
        if let Some(e) = out.error.take() {
            return Err(e);
        }
        if let Some(tl) = timeline.as_mut() {
            tl.observe_switch(0, &sw, now);
        }
        if let Some(report) = opts.progress {
            if input_bytes - last_progress > 1 << 20 {
                report(input_bytes, total_bytes);
                last_progress = input_bytes;
            }
        }
        let peers_done = out.peers.iter().all(|p| p.as_ref().is_none_or(Peer::is_done));
        if peers_done && sw.is_idle() {
            break;
        }
        if (input_frames, out.data_frames) != moved {
            (moved, last_moved) = ((input_frames, out.data_frames), now);
        }
        // A port whose transmit is off can hold frames, and the peers it pauses theirs, for
        // ever: once only PFC frames are left to move, for a second of virtual time, the
        // replay ends with them queued.
        if now.saturating_sub(last_moved) > TX_OFF_IDLE_NS {
            if let Some(held) = sw.held_by_tx_off() {
                tracing::info!(
                    "replay ends: nothing moved for {} with {held} frames queued on ports whose transmit is off",
                    controlplane::units::format_duration(TX_OFF_IDLE_NS)
                );
                break;
            }
        }
        let next = out
            .peers
            .iter()
            .filter_map(|p| p.as_ref().and_then(|p| p.next_event(now)))
            .chain(sw.next_event(now))
            .chain(schedule.next_at())
            .min();
        match next {
            Some(t) if t > now => now = t,
            // Something is due now: go round again, unless nothing moved (then step on, so a
            // deadline that rounding put in the past cannot spin the loop).
            Some(_) => {
                if !progressed {
                    now += 1;
                }
            }
            None => match sw.held_by_tx_off() {
                // What is left waits behind a transmit that is off: nothing more can happen.
                Some(held) if peers_done => {
                    tracing::info!("replay ends with {held} frames queued on ports whose transmit is off");
                    break;
                }
                _ => bail!("replay stalled at {now} ns with frames still queued (a bug: please report it)"),
            },
        }
    }
    if let Some(report) = opts.progress {
        report(total_bytes, total_bytes);
    }
    let mut skipped = 0;
    for (port, peer) in cfg.ports.iter().zip(out.peers.iter()) {
        let Some(peer) = peer else { continue };
        if peer.skipped_snapped > 0 {
            // Loud: a capture taken with a snap length (tcpdump -s) replays as much less
            // traffic than it recorded, and the summary alone is easy to miss.
            tracing::warn!(
                "port {}: {} frames skipped: the capture holds only their first bytes (taken \
                 with a snap length, e.g. tcpdump -s); recapture with -s 0 to replay them",
                port.id,
                peer.skipped_snapped
            );
        }
        skipped += peer.skipped_snapped;
    }
    let last_ns = out.last_ns;
    for f in out.files {
        f.finish()?;
    }
    let next_change = schedule.taken();
    for c in &opts.schedule.steps()[next_change..] {
        // Loud: the experiment the schedule describes did not happen.
        tracing::warn!(
            "schedule: the change at {} ({}) was not applied: the replay ended at {}, when the \
             last frame left",
            controlplane::units::format_duration(c.at_ns),
            c.keys.join(", "),
            controlplane::units::format_duration(last_ns.max(now))
        );
    }
    let schedule = opts
        .schedule
        .steps()
        .iter()
        .enumerate()
        .map(|(i, c)| AppliedChange {
            at_ns: c.at_ns,
            applied: i < next_change,
            keys: c.keys.clone(),
        })
        .collect();
    let end = last_ns.max(now);
    let timeline = timeline.map(|mut tl| {
        tl.sample_switch(0, &sw);
        let title = opts
            .inputs
            .iter()
            .map(|(id, p)| format!("port {id} ← {}", p.file_name().unwrap_or_default().to_string_lossy()))
            .collect::<Vec<_>>()
            .join(", ");
        tl.finish(format!("replay of {title}"), end)
    });
    Ok(ReplayOutcome {
        seed: opts.seed,
        duration_ns: last_ns,
        input_frames,
        input_frames_skipped_snaplen: skipped,
        outputs: names,
        schedule,
        snapshot: sw.snapshot(end),
        timeline,
    })
}

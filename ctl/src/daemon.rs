//! `rocectl daemon`: owns the desired config of one switch and keeps the switch on it.
//!
//! * The desired config is the last *valid* content of the watched file. An edit that does not
//!   parse or validate is refused with the reason and changes nothing; the last good config
//!   stays desired (and running).
//! * It is applied (whole, `apply`) whenever it changes and whenever the daemon (re)connects to
//!   the switch: at start, and after the switch restarted. A restart is noticed because the
//!   connection drops (a heartbeat `hello` every poll interval); reconnection is retried every
//!   poll interval, so a restarted switch is back on the desired config within about two.
//! * A switch that cannot take the apply yet (its data plane still setting up: the switch
//!   answers that it did not answer in time, `protocol::not_yet`) is asked again with back-off
//!   ([`APPLY_RETRY_FIRST`] doubling to [`APPLY_RETRY_MAX`]), each wait said at info level;
//!   drift detection starts with the first apply the switch takes. Taken as a refusal, as it
//!   once was, the file was never applied and no later drift was seen.
//! * A change made behind its back (`rocectl set`, `patch`, `apply` by someone else) is a drift:
//!   the running config, read at every poll, no longer says what the file says. It is said
//!   (a log line naming the keys, `rocectl_daemon_drift` and `rocectl_daemon_drifts_total`) and,
//!   as `--on-drift` chooses, left (`warn`), undone (`restore`, SONiC's `config reload`) or
//!   written into the file (`adopt`, SONiC's `config save`).
//! * The daemon holds no state the switch needs: killing it leaves the switch forwarding on its
//!   last config, and a new daemon simply re-applies.
//! * Optionally serves Prometheus metrics on a loopback address (`metrics.rs`): each scrape
//!   gets a `counters` snapshot asked of the switch after the scrape arrived. Connections are
//!   served concurrently (hyper on a small tokio runtime) with a deadline on the request and
//!   on the connection, so a slow or stalled client delays no scrape.
//!
//! The metrics endpoint is reachable by every local user while the switch's socket is the
//! owner's alone, so what a scraper can make the daemon do is bounded, whoever it is:
//! * Renders run on one thread, one at a time, over one connection to the switch kept open
//!   (`Scraper`); scrapes that arrive during a render share the next one, and one whose
//!   client left is not rendered for. A scrape used to render on a blocking thread of its own,
//!   over a connection of its own, which went on after its client closed: a flood of
//!   `GET /metrics`-and-close grew the daemon to hundreds of threads and filled the switch's
//!   control slots (root's `rocectl` was then refused), an unprivileged user reaching the
//!   root-only socket through the daemon.
//! * Connection slots are kept per local user (the owner of the connecting socket:
//!   `controlplane::loopback`, since any local process may use any 127/8 address): at most
//!   [`MAX_IDLE_PER_USER`] connections of one user that have sent no whole request yet, a new
//!   one beyond that taking the place of that user's oldest such connection; at most
//!   [`MAX_METRICS_CONNECTIONS`] in all, a new one then taking the place of the oldest idle
//!   connection of the user holding the most. A connection whose request has arrived is
//!   served, never displaced. 40 idle connections, re-opened as they were closed, used to
//!   hold all 32 slots and turn every scrape away; now they displace only their own.
//!
//! The file is polled (content compared) rather than watched with inotify: editors replace
//! files by rename, and polling a small file a few times a second costs nothing.
//!
//! Only a complete, settled file is applied (a file caught half written may well parse: TOML
//! sections have defaults, so a truncated file is often a valid, different config):
//! * a new content counts once two reads a poll apart agree;
//! * a content that looks cut short, because it drops a whole section (a table, or an element
//!   of an array of tables such as a `[[port]]`) the last applied file had, or does not end in
//!   a newline, counts only once it has stayed the same for [`SETTLE`] (and at least four
//!   polls): a writer that paused mid-file finishes long before, one that meant it is applied
//!   a little later, with a log line saying why it waited.
//!
//! A file that disappears (for two polls: an editor's save may briefly remove it) is said
//! loudly and counted (`rocectl_daemon_config_missing_total`); the running config stays, and
//! the file is applied again when it is back. Only a regular file is read, opened without
//! blocking (`controlplane::files::read_regular_text`): a FIFO put in its place counts as the
//! file gone, where its open used to wait for a writer, wedging the daemon (no edit applied,
//! no heartbeat, `config_file_present` still 1).

use crate::metrics::Metrics;
use controlplane::loopback::PeerKey;
use controlplane::protocol::{ApplyData, Client, ClientError, ConfigData, Endpoint, Op};
use controlplane::snapshot::Snapshot;
use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a content that looks cut short must stay unchanged before it is applied.
pub const SETTLE: Duration = Duration::from_secs(2);

/// The first wait before an apply the switch could not take yet is asked again (a switch
/// still setting up its data plane: `protocol::not_yet`); each next wait doubles, up to
/// [`APPLY_RETRY_MAX`].
pub const APPLY_RETRY_FIRST: Duration = Duration::from_millis(250);

/// The longest wait between two tries of an apply the switch could not take yet.
pub const APPLY_RETRY_MAX: Duration = Duration::from_secs(8);

/// The wait before the `n`-th retry (counted from 1) of an apply the switch could not take yet.
pub fn apply_retry_wait(n: u32) -> Duration {
    APPLY_RETRY_FIRST
        .saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(APPLY_RETRY_MAX)
}

/// What the daemon is told.
pub struct DaemonOptions {
    /// The config file watched: its last valid content is the desired config.
    pub config: PathBuf,
    /// Where the switch listens.
    pub socket: Endpoint,
    /// The `switch` label of the metrics.
    pub name: String,
    /// Loopback address to serve Prometheus metrics on; None: no metrics.
    pub metrics: Option<SocketAddr>,
    /// How often the file is read and the switch's running config compared with it.
    pub poll: Duration,
    /// What to do when the switch's running config drifts from the file (a `rocectl set`
    /// behind the daemon's back).
    pub on_drift: DriftAction,
}

/// What the daemon does when the switch's running config no longer says what the file says
/// (someone ran `rocectl set`, `patch` or `apply` behind its back). As SONiC: the running
/// config and the saved file may differ until `config reload` (restore) or `config save`
/// (adopt); the daemon says so either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftAction {
    /// Say it (log, `rocectl_daemon_drift`) and leave both as they are.
    Warn,
    /// Put the file's config back on the switch (`config reload`).
    Restore,
    /// Write the switch's running config into the file (`config save`); the file is replaced
    /// whole, atomically. Not for a config_db.json file (the running config is its TOML).
    Adopt,
}

impl DriftAction {
    /// The name `--on-drift` takes.
    pub fn name(self) -> &'static str {
        match self {
            DriftAction::Warn => "warn",
            DriftAction::Restore => "restore",
            DriftAction::Adopt => "adopt",
        }
    }
}

/// The daemon's own state, shared with the metrics thread.
#[derive(Default)]
pub struct DaemonState {
    /// Whether the daemon holds a connection to the switch now.
    pub dataplane_up: AtomicBool,
    /// Applies the switch took.
    pub applies_ok: AtomicU64,
    /// Applies the switch refused (valid, but not applicable live); its config stayed.
    pub applies_refused: AtomicU64,
    /// File contents refused as invalid (not TOML, or not valid); the desired config stayed.
    pub edits_refused: AtomicU64,
    /// Unix time (ms) of the last successful apply; 0 before the first.
    pub last_apply_ms: AtomicU64,
    /// Times the config file was found gone (or unreadable); the running config stayed.
    pub config_missing: AtomicU64,
    /// Whether the config file is there now (false from the second failed read on).
    pub config_present: AtomicBool,
    /// The buffer cell of the config last applied (0 before the first): the metrics give
    /// levels in bytes with it.
    pub cell_bytes: AtomicU64,
    /// Whether the switch's running config differs from the file now.
    pub drift: AtomicBool,
    /// Drifts seen (each change behind the daemon's back counts once).
    pub drifts: AtomicU64,
}

/// Runs until `stop` is set. Fails only on a bad start (unreadable or invalid file, metrics
/// address unusable); everything later is logged and retried.
pub fn run(opts: DaemonOptions, stop: Arc<AtomicBool>) -> Result<(), String> {
    let mut desired = controlplane::files::read_regular_text(&opts.config)?;
    if let Err(e) = controlplane::load_str(&desired) {
        return Err(format!(
            "{}: invalid, not starting:\n  {}",
            opts.config.display(),
            e.problems().join("\n  ")
        ));
    }
    let state = Arc::new(DaemonState::default());
    state.config_present.store(true, Ordering::Relaxed);
    if let Some(addr) = opts.metrics {
        let bound = serve_metrics(
            addr,
            opts.socket.clone(),
            opts.name.clone(),
            state.clone(),
            stop.clone(),
        )?;
        eprintln!("rocectl daemon: metrics on http://{bound}/metrics");
    }
    eprintln!(
        "rocectl daemon: keeping {} on {} (edits are applied as they are saved; Ctrl-C stops)",
        opts.socket,
        opts.config.display()
    );
    let mut seen = desired.clone();
    // A new content and when it was first read that way.
    let mut pending: Option<(String, Instant)> = None;
    // What was said about the pending content being held.
    let mut held_said = false;
    let mut missing_polls = 0u32;
    let mut client: Option<Client> = None;
    let mut need_apply = true;
    // Said once per outage, not once per poll.
    let mut waiting_said = false;
    // The switch's config version after the daemon's last apply, and the drifted version
    // last reported (each drift is said once).
    let mut applied_version: Option<u64> = None;
    let mut drift_said: Option<u64> = None;
    // An apply the switch could not take yet (still starting): tries so far, and when the
    // next one is due.
    let mut apply_retry: Option<(u32, Instant)> = None;
    while !stop.load(Ordering::Relaxed) {
        // 1. The file: a new valid content becomes desired once complete and settled; a bad
        //    one is refused once.
        match controlplane::files::read_regular_text(&opts.config) {
            Ok(text) => {
                if missing_polls >= 2 {
                    eprintln!("rocectl daemon: {} is back", opts.config.display());
                }
                missing_polls = 0;
                state.config_present.store(true, Ordering::Relaxed);
                if text == seen {
                    pending = None;
                } else if pending.as_ref().is_none_or(|(p, _)| *p != text) {
                    pending = Some((text, Instant::now()));
                    held_said = false;
                } else if let Some((text, since)) = pending.take() {
                    let suspicion = looks_cut_short(&desired, &text);
                    let settle = SETTLE.max(opts.poll * 4);
                    match suspicion {
                        Some(why) if since.elapsed() < settle => {
                            if !held_said {
                                eprintln!(
                                    "rocectl daemon: {}: the new content {why}; holding it until it has stayed \
                                     the same for {} ms (a save caught half way)",
                                    opts.config.display(),
                                    settle.as_millis()
                                );
                                held_said = true;
                            }
                            pending = Some((text, since));
                        }
                        _ => {
                            if let Some(why) = suspicion {
                                eprintln!(
                                    "rocectl daemon: {}: the new content {why}, and stayed so: taking it as meant",
                                    opts.config.display()
                                );
                            }
                            seen = text.clone();
                            match controlplane::load_str(&text) {
                                Ok(_) => {
                                    desired = text;
                                    need_apply = true;
                                }
                                Err(e) => {
                                    state.edits_refused.fetch_add(1, Ordering::Relaxed);
                                    let msg = e.problems().join("; ");
                                    eprintln!(
                                        "rocectl daemon: {}: edit refused, the running config stays: {msg}",
                                        opts.config.display()
                                    );
                                }
                            }
                        }
                    }
                }
            }
            // Gone or unreadable. An editor's save may remove it for an instant: said (loudly,
            // once) from the second failed read on.
            Err(e) => {
                missing_polls += 1;
                if missing_polls == 2 {
                    state.config_missing.fetch_add(1, Ordering::Relaxed);
                    state.config_present.store(false, Ordering::Relaxed);
                    eprintln!(
                        "rocectl daemon: WARNING: {} disappeared or cannot be read ({e}); the switch keeps \
                         the running config, and the file is applied again when it is back",
                        opts.config.display()
                    );
                }
            }
        }
        // 2. The switch: (re)connect, heartbeat, apply.
        if client.is_none() {
            match Client::connect_to(&opts.socket) {
                Ok(mut c) => {
                    if c.set_timeout(Some(Duration::from_secs(10))).is_ok() {
                        eprintln!("rocectl daemon: switch at {} is up", opts.socket);
                        client = Some(c);
                        need_apply = true;
                        waiting_said = false;
                    }
                }
                Err(e) if !waiting_said => {
                    eprintln!("rocectl daemon: waiting for the switch ({e})");
                    waiting_said = true;
                }
                Err(_) => {}
            }
        } else if let Some(c) = client.as_mut() {
            // The heartbeat: the running config, compared with the file's.
            match c.call_as::<ConfigData>(Op::GetConfig) {
                Err(_) => {
                    eprintln!("rocectl daemon: lost the switch at {}; retrying", opts.socket);
                    client = None;
                    waiting_said = true;
                    apply_retry = None;
                }
                // A version neither the daemon applied nor already looked at: once per change.
                Ok(running)
                    if !need_apply
                        && applied_version.is_some_and(|v| v != running.version)
                        && drift_said != Some(running.version) =>
                {
                    let drift = Drift {
                        file: &opts.config,
                        desired: &desired,
                        running: &running,
                    };
                    match drift.keys() {
                        // Applied again as it was (another daemon, a script): nothing differs.
                        None => {
                            applied_version = Some(running.version);
                            state.drift.store(false, Ordering::Relaxed);
                        }
                        Some(keys) => {
                            drift_said = Some(running.version);
                            state.drifts.fetch_add(1, Ordering::Relaxed);
                            eprintln!(
                                "rocectl daemon: DRIFT: the switch's running config (version {}) is not {}: {} \
                                 (changed behind the daemon, e.g. rocectl set); --on-drift {}",
                                running.version,
                                opts.config.display(),
                                keys.join(", "),
                                opts.on_drift.name()
                            );
                            state.drift.store(true, Ordering::Relaxed);
                            match opts.on_drift {
                                DriftAction::Warn => {}
                                DriftAction::Restore => match c.call_as::<ApplyData>(Op::Apply {
                                    toml: desired.clone(),
                                    if_version: Some(running.version),
                                }) {
                                    Ok(d) => {
                                        applied_version = Some(d.version);
                                        state.drift.store(false, Ordering::Relaxed);
                                        eprintln!(
                                            "rocectl daemon: restored {} on the switch ({})",
                                            opts.config.display(),
                                            keys.join(", ")
                                        );
                                    }
                                    Err(e) => {
                                        eprintln!("rocectl daemon: could not restore {}: {e}", opts.config.display())
                                    }
                                },
                                DriftAction::Adopt => match drift.adopt() {
                                    Ok(text) => {
                                        seen = text.clone();
                                        desired = text;
                                        pending = None;
                                        applied_version = Some(running.version);
                                        state.drift.store(false, Ordering::Relaxed);
                                        eprintln!(
                                            "rocectl daemon: adopted the switch's running config into {} ({})",
                                            opts.config.display(),
                                            keys.join(", ")
                                        );
                                    }
                                    Err(e) => eprintln!("rocectl daemon: cannot adopt the drift: {e}"),
                                },
                            }
                        }
                    }
                }
                Ok(_) => {}
            }
        }
        state.dataplane_up.store(client.is_some(), Ordering::Relaxed);
        let apply_due = apply_retry.is_none_or(|(_, at)| Instant::now() >= at);
        if let (true, true, Some(c)) = (need_apply, apply_due, client.as_mut()) {
            match c.call_as::<ApplyData>(Op::Apply {
                toml: desired.clone(),
                if_version: None,
            }) {
                Ok(d) => {
                    need_apply = false;
                    if let Some((tries, _)) = apply_retry.take() {
                        tracing::info!(
                            "the switch took {} after {tries} tr{}: drift detection is on",
                            opts.config.display(),
                            if tries == 1 { "y" } else { "ies" }
                        );
                    }
                    applied_version = Some(d.version);
                    state.drift.store(false, Ordering::Relaxed);
                    state.applies_ok.fetch_add(1, Ordering::Relaxed);
                    if let Ok(l) = controlplane::load_str(&desired) {
                        state
                            .cell_bytes
                            .store(l.config.buffer.cell_bytes.into(), Ordering::Relaxed);
                    }
                    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
                    state.last_apply_ms.store(now.as_millis() as u64, Ordering::Relaxed);
                    let changed = if d.changed.is_empty() {
                        "nothing changed".to_string()
                    } else {
                        format!("changed: {}", d.changed.join(", "))
                    };
                    eprintln!("rocectl daemon: applied {} ({changed})", opts.config.display());
                    for w in d.warnings {
                        eprintln!("rocectl daemon: warning: {w}");
                    }
                }
                // Not refused: the switch could not take it yet (its data plane is still
                // setting up, or busy). Asked again with back-off until it answers; drift
                // detection starts with the first apply it takes.
                Err(ClientError::Refused(why)) if controlplane::protocol::not_yet(&why) => {
                    let tries = apply_retry.map_or(0, |(n, _)| n) + 1;
                    let wait = apply_retry_wait(tries);
                    if tries == 1 {
                        tracing::info!(
                            "waiting for the switch to take {} ({why}): it may still be starting; \
                             asking again with back-off, first in {} ms, up to every {} s",
                            opts.config.display(),
                            wait.as_millis(),
                            APPLY_RETRY_MAX.as_secs()
                        );
                    } else {
                        tracing::info!(
                            "still waiting for the switch to take {} (try {tries}: {why}); next try in {} ms",
                            opts.config.display(),
                            wait.as_millis()
                        );
                    }
                    apply_retry = Some((tries, Instant::now() + wait));
                }
                Err(ClientError::Refused(why)) => {
                    apply_retry = None;
                    // Valid on its own but not applicable live (e.g. other ports): the switch
                    // keeps its config; the next edit is tried again.
                    need_apply = false;
                    state.applies_refused.fetch_add(1, Ordering::Relaxed);
                    eprintln!("rocectl daemon: the switch refused {}: {why}", opts.config.display());
                }
                Err(e) => {
                    eprintln!("rocectl daemon: apply failed ({e}); retrying");
                    client = None;
                    apply_retry = None;
                }
            }
        }
        std::thread::sleep(opts.poll);
    }
    Ok(())
}

/// The switch's running config against the file's.
struct Drift<'a> {
    file: &'a std::path::Path,
    desired: &'a str,
    running: &'a ConfigData,
}

impl Drift<'_> {
    /// The config keys that differ, or None when the two say the same (a config_db.json file
    /// is compared as the TOML it imports to).
    fn keys(&self) -> Option<Vec<String>> {
        let table = |text: &str| -> Option<toml::Table> { controlplane::config_toml(text).ok()?.parse().ok() };
        let (want, have) = (table(self.desired)?, table(&self.running.toml)?);
        let keys = controlplane::patch::changed_keys(&want, &have);
        (!keys.is_empty()).then_some(keys)
    }

    /// Writes the running config over the file, atomically (a temporary file beside it, then
    /// a rename, its permissions kept); returns the text written.
    fn adopt(&self) -> Result<String, String> {
        if controlplane::sonic::looks_like_config_db(self.desired) {
            return Err(format!(
                "{} is a config_db.json and the running config is rocesw TOML: send the change back with `rocectl sonic export`",
                self.file.display()
            ));
        }
        let dir = self
            .file
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        let name = self
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(".{name}.rocectl-adopt.{}", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            if let Ok(meta) = std::fs::metadata(self.file) {
                f.set_permissions(meta.permissions())?;
            }
            std::io::Write::write_all(&mut f, self.running.toml.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, self.file)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {e}", self.file.display())
        })?;
        Ok(self.running.toml.clone())
    }
}

/// Why `new` looks like `old` cut short rather than edited: it drops a whole section (table
/// path) or array-of-tables element that `old` had, or its last line is unfinished. None if
/// neither (or if it does not parse: then validation says what is wrong).
fn looks_cut_short(old: &str, new: &str) -> Option<String> {
    if !new.is_empty() && !new.ends_with('\n') {
        return Some("does not end with a newline".into());
    }
    let (Ok(old), Ok(new)) = (old.parse::<toml::Table>(), new.parse::<toml::Table>()) else {
        return None;
    };
    let (mut before, mut after) = (Vec::new(), Vec::new());
    sections(&old, "", &mut before);
    sections(&new, "", &mut after);
    let gone: Vec<&String> = before.iter().filter(|s| !after.contains(s)).collect();
    if gone.is_empty() {
        return None;
    }
    let names: Vec<String> = gone.iter().take(4).map(|s| format!("[{s}]")).collect();
    let more = if gone.len() > 4 { ", …" } else { "" };
    Some(format!("drops {}{more}", names.join(", ")))
}

/// Every table's dotted path in `t`, array-of-tables elements as `name[i]`.
fn sections(t: &toml::Table, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in t {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(inner) => {
                out.push(path.clone());
                sections(inner, &path, out);
            }
            toml::Value::Array(items) if items.iter().all(toml::Value::is_table) && !items.is_empty() => {
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    out.push(p.clone());
                    if let toml::Value::Table(inner) = item {
                        sections(inner, &p, out);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A metrics request (its headers) must arrive whole within this, or its connection is closed:
/// a client trickling bytes cannot hold a connection for ever.
pub const METRICS_REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// A metrics connection is closed this long after it was accepted, whatever it is doing
/// (a scrape asks the switch with a 5 s timeout, so an answer is always ready before).
pub const METRICS_CONNECTION_DEADLINE: Duration = Duration::from_secs(10);
/// Metrics connections open at once, every user's together. Beyond it a new connection takes
/// the place of the oldest idle one (no whole request yet) of the user holding the most; with
/// none idle it is closed. Each costs a descriptor and a small task.
pub const MAX_METRICS_CONNECTIONS: usize = 256;
/// Connections one local user may hold that have sent no whole request yet; that user's next
/// one takes the place of its oldest (a scraper sends its request as it connects, so only a
/// connection that holds a slot and says nothing is ever displaced).
pub const MAX_IDLE_PER_USER: usize = 16;

/// What a metrics request needs to answer.
struct MetricsCtx {
    scraper: Arc<Scraper>,
}

/// The open metrics connections, oldest first, with their users: who may take whose place.
#[derive(Default)]
struct Slots {
    next: u64,
    open: BTreeMap<u64, Slot>,
}

struct Slot {
    who: PeerKey,
    /// Set once the connection's request has arrived: it is then served, never displaced.
    busy: Arc<AtomicBool>,
    /// Ends the connection's task (set once spawned).
    abort: Option<tokio::task::AbortHandle>,
}

impl Slots {
    /// Makes room for a new connection of `who` and records it: its id and the connections
    /// that give up their place (for the caller to close), or `None` if every slot is busy.
    fn admit(&mut self, who: PeerKey, busy: Arc<AtomicBool>) -> Option<(u64, Vec<Slot>)> {
        let idle = |s: &Slot| !s.busy.load(Ordering::Relaxed);
        let mut closing = Vec::new();
        let own_idle: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, s)| s.who == who && idle(s))
            .map(|(id, _)| *id)
            .collect();
        if own_idle.len() >= MAX_IDLE_PER_USER {
            closing.extend(self.open.remove(&own_idle[0]));
        }
        if self.open.len() >= MAX_METRICS_CONNECTIONS {
            let mut held: HashMap<PeerKey, usize> = HashMap::new();
            for s in self.open.values() {
                *held.entry(s.who).or_default() += 1;
            }
            // The oldest idle connection of the user holding the most.
            let victim = self
                .open
                .iter()
                .filter(|(_, s)| idle(s))
                .max_by_key(|(id, s)| (held[&s.who], std::cmp::Reverse(**id)))
                .map(|(id, _)| *id);
            closing.extend(self.open.remove(&victim?));
        }
        let id = self.next;
        self.next += 1;
        self.open.insert(id, Slot { who, busy, abort: None });
        Some((id, closing))
    }
}

/// Frees a connection's slot when its task ends, however it ends.
struct Release {
    slots: Arc<Mutex<Slots>>,
    id: u64,
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Ok(mut s) = self.slots.lock() {
            s.open.remove(&self.id);
        }
    }
}

/// The one thread that asks the switch for counters and renders them: scrapes wait here for a
/// render that starts after they arrived, and share it.
struct Scraper {
    waiting: Mutex<Vec<tokio::sync::oneshot::Sender<String>>>,
    wake: Condvar,
}

impl Scraper {
    /// Starts the thread, which keeps one connection to the switch at `socket` and ends once
    /// `stop` is set.
    fn start(
        socket: Endpoint,
        name: String,
        state: Arc<DaemonState>,
        stop: Arc<AtomicBool>,
    ) -> Result<Arc<Scraper>, String> {
        let scraper = Arc::new(Scraper {
            waiting: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        });
        let s = scraper.clone();
        std::thread::Builder::new()
            .name("rocectl-scrape".into())
            .spawn(move || {
                let mut client = None;
                while let Some(batch) = s.next_batch(&stop) {
                    let body = render_metrics(&mut client, &socket, &name, &state);
                    for tx in batch {
                        let _ = tx.send(body.clone());
                    }
                }
            })
            .map_err(|e| format!("metrics: cannot start: {e}"))?;
        Ok(scraper)
    }

    /// The rendered metrics, from a render that starts after this call (empty if the thread
    /// is gone).
    async fn scrape(&self) -> String {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if let Ok(mut w) = self.waiting.lock() {
            w.push(tx);
            self.wake.notify_one();
        }
        rx.await.unwrap_or_default()
    }

    /// Waits for scrapes and takes every one waiting whose client is still there; `None` once
    /// `stop` is set.
    fn next_batch(&self, stop: &AtomicBool) -> Option<Vec<tokio::sync::oneshot::Sender<String>>> {
        let mut w = self.waiting.lock().ok()?;
        loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            let batch: Vec<_> = std::mem::take(&mut *w)
                .into_iter()
                .filter(|tx| !tx.is_closed())
                .collect();
            if !batch.is_empty() {
                return Some(batch);
            }
            w = self.wake.wait_timeout(w, Duration::from_millis(250)).ok()?.0;
        }
    }
}

/// Binds the metrics listener (loopback only) and serves it on its own thread: a tokio runtime
/// with one task per connection (slots per user, [`Slots`]), hyper's HTTP/1 with a whole-header
/// deadline, and the [`Scraper`] thread. Returns the bound address (port 0 picks a free one).
fn serve_metrics(
    addr: SocketAddr,
    socket: Endpoint,
    name: String,
    state: Arc<DaemonState>,
    stop: Arc<AtomicBool>,
) -> Result<SocketAddr, String> {
    if !addr.ip().is_loopback() {
        return Err(format!(
            "--metrics {addr}: only a loopback address (127.0.0.1 or ::1) is served; put a proxy in front to expose it"
        ));
    }
    let listener = TcpListener::bind(addr).map_err(|e| format!("--metrics {addr}: cannot listen: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("metrics: cannot start: {e}"))?;
    let scraper = Scraper::start(socket, name, state, stop.clone())?;
    let ctx = Arc::new(MetricsCtx { scraper });
    std::thread::Builder::new()
        .name("rocectl-metrics".into())
        .spawn(move || rt.block_on(metrics_loop(listener, ctx, stop)))
        .map_err(|e| e.to_string())?;
    Ok(bound)
}

async fn metrics_loop(listener: TcpListener, ctx: Arc<MetricsCtx>, stop: Arc<AtomicBool>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rocectl daemon: metrics disabled: {e}");
            return;
        }
    };
    let slots = Arc::new(Mutex::new(Slots::default()));
    while !stop.load(Ordering::Relaxed) {
        // Wakes up now and then to notice `stop`.
        let Ok(accepted) = tokio::time::timeout(Duration::from_millis(250), listener.accept()).await else {
            continue;
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!("metrics: accept failed: {e}");
                // Out of descriptors and the like: do not spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let who = PeerKey::of(tcp.local_addr().ok(), peer);
        let busy = Arc::new(AtomicBool::new(false));
        let admitted = slots.lock().ok().and_then(|mut s| s.admit(who, busy.clone()));
        let Some((id, closing)) = admitted else {
            tracing::debug!("metrics: every connection busy; closing a new one");
            continue;
        };
        for slot in closing {
            tracing::debug!("metrics: closing an idle connection of {} to make room", slot.who);
            if let Some(a) = slot.abort {
                a.abort();
            }
        }
        let release = Release {
            slots: slots.clone(),
            id,
        };
        let ctx = ctx.clone();
        let task = tokio::spawn(async move {
            let _release = release;
            let svc = hyper::service::service_fn(move |req| {
                busy.store(true, Ordering::Relaxed);
                respond(req, ctx.clone())
            });
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(METRICS_REQUEST_DEADLINE)
                .max_buf_size(16 * 1024)
                .keep_alive(false);
            let conn = http.serve_connection(hyper_util::rt::TokioIo::new(tcp), svc);
            match tokio::time::timeout(METRICS_CONNECTION_DEADLINE, conn).await {
                Ok(Err(e)) => tracing::debug!("metrics request: {e}"),
                Err(_) => tracing::debug!("metrics request: connection deadline"),
                Ok(Ok(())) => {}
            }
        });
        if let Some(slot) = slots.lock().ok().as_mut().and_then(|s| s.open.get_mut(&id)) {
            slot.abort = Some(task.abort_handle());
        }
        // Let the connections just accepted read their requests before more are accepted.
        tokio::task::yield_now().await;
    }
}

/// `GET /metrics` (or `/`), nothing else.
async fn respond(
    req: hyper::Request<hyper::body::Incoming>,
    ctx: Arc<MetricsCtx>,
) -> Result<hyper::Response<http_body_util::Full<bytes::Bytes>>, std::convert::Infallible> {
    let plain = |status: u16, text: &'static str| {
        hyper::Response::builder()
            .status(status)
            .header("content-type", "text/plain")
            .body(http_body_util::Full::new(bytes::Bytes::from_static(text.as_bytes())))
            .expect("a static response builds")
    };
    if req.method() != hyper::Method::GET {
        return Ok(plain(405, "only GET\n"));
    }
    if !matches!(req.uri().path(), "/metrics" | "/") {
        return Ok(plain(404, "see /metrics\n"));
    }
    let body = ctx.scraper.scrape().await;
    Ok(hyper::Response::builder()
        .header(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .expect("a metrics response builds"))
}

/// The switch's `counters`, over `client` (connected first if need be; a kept connection that
/// fails, as after a restart of the switch, is replaced once).
fn counters(client: &mut Option<Client>, socket: &Endpoint) -> Result<Snapshot, ClientError> {
    let reused = client.is_some();
    for _ in 0..=usize::from(reused) {
        if client.is_none() {
            let mut c = Client::connect_to(socket)?;
            c.set_timeout(Some(Duration::from_secs(5)))?;
            *client = Some(c);
        }
        let Some(c) = client.as_mut() else { break };
        match c.call_as::<Snapshot>(Op::Counters) {
            Ok(s) => return Ok(s),
            // The connection is fine; the answer is not a snapshot this build reads.
            Err(e @ ClientError::Protocol(_)) => return Err(e),
            Err(e) => {
                *client = None;
                if !reused {
                    return Err(e);
                }
            }
        }
    }
    Err(ClientError::Closed)
}

/// The switch's counters (fresh, over `client`, the scraper's one connection to the switch)
/// and the daemon's state.
pub fn render_metrics(client: &mut Option<Client>, socket: &Endpoint, name: &str, state: &DaemonState) -> String {
    let mut m = Metrics::default();
    m.cell_bytes = Some(state.cell_bytes.load(Ordering::Relaxed)).filter(|&c| c > 0);
    let snapshot = counters(client, socket);
    let base = vec![("switch".to_string(), name.to_string())];
    let up = match snapshot {
        Ok(s) => {
            m.add_snapshot(name, &s);
            1.0
        }
        Err(ClientError::Protocol(e)) => {
            // Up but unreadable (a switch whose snapshot lacks a field this build needs):
            // say so, or the metrics would just look like a switch that is down.
            tracing::warn!("the switch's counters do not read as a snapshot: {e}");
            0.0
        }
        Err(_) => 0.0,
    };
    m.gauge(
        "rocectl_daemon_dataplane_up",
        "1 if the switch answered this scrape",
        base.clone(),
        up,
    );
    for (result, n) in [("ok", &state.applies_ok), ("refused", &state.applies_refused)] {
        let mut l = base.clone();
        l.push(("result".into(), result.into()));
        m.counter(
            "rocectl_daemon_applies",
            "config applies by the daemon, by result",
            l,
            n.load(Ordering::Relaxed) as f64,
        );
    }
    m.counter(
        "rocectl_daemon_edits_refused",
        "edits of the config file refused as invalid",
        base.clone(),
        state.edits_refused.load(Ordering::Relaxed) as f64,
    );
    m.counter(
        "rocectl_daemon_config_missing",
        "times the config file disappeared or could not be read (the running config stayed)",
        base.clone(),
        state.config_missing.load(Ordering::Relaxed) as f64,
    );
    m.gauge(
        "rocectl_daemon_config_file_present",
        "1 if the config file is there now",
        base.clone(),
        if state.config_present.load(Ordering::Relaxed) {
            1.0
        } else {
            0.0
        },
    );
    m.gauge(
        "rocectl_daemon_drift",
        "1 while the switch's running config differs from the file (changed behind the daemon)",
        base.clone(),
        if state.drift.load(Ordering::Relaxed) { 1.0 } else { 0.0 },
    );
    m.counter(
        "rocectl_daemon_drifts",
        "changes of the switch's running config made behind the daemon",
        base.clone(),
        state.drifts.load(Ordering::Relaxed) as f64,
    );
    m.gauge(
        "rocectl_daemon_last_apply_timestamp_seconds",
        "Unix time of the last successful apply (0: none yet)",
        base,
        state.last_apply_ms.load(Ordering::Relaxed) as f64 / 1e3,
    );
    m.encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A drift is the keys that differ (none when the running config says what the file does,
    /// a config_db.json compared as its TOML), and `adopt` never writes TOML over a
    /// config_db.json: the file is left as it was.
    #[test]
    fn a_drift_names_its_keys_and_adopt_refuses_a_config_db_json() {
        let dir = tempfile::tempdir().unwrap();
        let json = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../configs/sonic/spectrum1-t1.json"
        ))
        .unwrap();
        let file = dir.path().join("config_db.json");
        std::fs::write(&file, &json).unwrap();
        let toml = controlplane::config_toml(&json).unwrap().into_owned();
        let same = ConfigData {
            toml: toml.clone(),
            version: 2,
        };
        let drift = |running: &ConfigData| {
            Drift {
                file: &file,
                desired: &json,
                running,
            }
            .keys()
        };
        assert_eq!(drift(&same), None);
        let changed = ConfigData {
            toml: toml.replacen("dynamic_th = 0", "dynamic_th = 1", 1),
            version: 3,
        };
        assert_eq!(drift(&changed), Some(vec!["pg.3.dynamic_th".to_string()]));
        let e = Drift {
            file: &file,
            desired: &json,
            running: &changed,
        }
        .adopt()
        .unwrap_err();
        assert!(
            e.contains("is a config_db.json") && e.contains("rocectl sonic export"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), json);
    }

    /// Admits an idle connection of `who`: its id, how many made room for it, its busy flag.
    fn admit(slots: &mut Slots, who: PeerKey) -> (u64, usize, Arc<AtomicBool>) {
        let busy = Arc::new(AtomicBool::new(false));
        let (id, closing) = slots.admit(who, busy.clone()).expect("admitted");
        assert!(
            closing.iter().all(|s| s.who == who),
            "another user's connection displaced"
        );
        (id, closing.len(), busy)
    }

    /// Issue 41 item 8: 40 idle connections (re-opened as they closed) held every one of the
    /// 32 slots and turned every scrape away. Now a user's idle connections beyond its
    /// allowance displace only its own oldest; another user's connection is never displaced
    /// while the flooder has idle ones; a connection whose request arrived is never displaced.
    #[test]
    fn idle_connections_displace_only_their_own_users() {
        let (flooder, scraper) = (PeerKey::User(65534), PeerKey::User(0));
        let mut slots = Slots::default();
        let (first_scrape, _, _) = admit(&mut slots, scraper);
        let mut flood = Vec::new();
        for _ in 0..1000 {
            let (id, closed, _) = admit(&mut slots, flooder);
            assert!(closed <= 1);
            flood.push(id);
        }
        // The scraper's idle connection survived a thousand of the flooder's.
        assert!(slots.open.contains_key(&first_scrape));
        let held = |slots: &Slots, who| slots.open.values().filter(|s| s.who == who).count();
        assert_eq!(held(&slots, flooder), MAX_IDLE_PER_USER);
        // The flooder's newest are kept, the oldest were displaced.
        assert!(slots.open.contains_key(flood.last().unwrap()));
        assert!(!slots.open.contains_key(&flood[0]));

        // Busy connections (a request arrived) are never displaced: with every slot busy, a
        // new connection is refused instead.
        let mut slots = Slots::default();
        for k in 0..MAX_METRICS_CONNECTIONS as u32 {
            let (_, _, busy) = admit(&mut slots, PeerKey::User(k));
            busy.store(true, Ordering::Relaxed);
        }
        assert!(slots.admit(scraper, Arc::new(AtomicBool::new(false))).is_none());

        // Full with many users: the one holding the most gives up its oldest idle connection.
        let heavy = PeerKey::User(7);
        let mut slots = Slots::default();
        let mut heavy_idle = Vec::new();
        for k in 0..MAX_METRICS_CONNECTIONS as u32 {
            let who = if k % 2 == 1 { heavy } else { PeerKey::User(1000 + k) };
            let (id, closed, busy) = admit(&mut slots, who);
            assert_eq!(closed, 0, "displaced before full");
            if who == heavy && heavy_idle.len() < 8 {
                heavy_idle.push(id);
            } else {
                busy.store(true, Ordering::Relaxed);
            }
        }
        let (_, closing) = slots.admit(scraper, Arc::new(AtomicBool::new(false))).unwrap();
        assert_eq!(closing.len(), 1);
        assert_eq!(closing[0].who, heavy);
        assert!(!slots.open.contains_key(&heavy_idle[0]) && slots.open.contains_key(&heavy_idle[1]));
    }

    /// Metric names in OpenMetrics `text`, each with the label names its series carry.
    fn families(text: &str) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
        let mut out: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let labels = out.entry(line[..name_end].to_string()).or_default();
            if let Some(body) = line[name_end..].strip_prefix('{') {
                for pair in body.split("\",") {
                    if let Some((k, _)) = pair.split_once('=') {
                        labels.insert(k.trim_start_matches(',').to_string());
                    }
                }
            }
        }
        out
    }

    /// Names made of `[a-z0-9_]` that start with `prefix` in `expr`.
    fn names_in<'a>(expr: &'a str, prefix: &str) -> Vec<&'a str> {
        let mut out = Vec::new();
        let mut rest = expr;
        while let Some(at) = rest.find(prefix) {
            let tail = &rest[at..];
            let len = tail
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(tail.len());
            out.push(&tail[..len]);
            rest = &tail[len..];
        }
        out
    }

    /// Every string under a key `key` in `v`.
    fn strings_under<'a>(v: &'a serde_json::Value, key: &str, out: &mut Vec<&'a str>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match x {
                        serde_json::Value::String(s) if k == key => out.push(s),
                        _ => strings_under(x, key, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| strings_under(x, key, out)),
            _ => {}
        }
    }

    /// docs/grafana/rocesw.json asks only for what `rocectl daemon` serves: every metric name
    /// in its queries is a series the daemon renders (from a snapshot with every kind of row,
    /// plus the daemon's own), and every label it groups or filters by is on that metric.
    #[test]
    fn the_grafana_dashboard_asks_only_for_served_metrics() {
        let state = DaemonState {
            cell_bytes: AtomicU64::new(256),
            ..Default::default()
        };
        let gone = Endpoint::Unix(std::path::PathBuf::from("/nonexistent/rocesw-test.sock"));
        let daemon = render_metrics(&mut None, &gone, "s1", &state);
        let mut m = Metrics::default();
        m.cell_bytes = Some(256);
        // A named port, as every port of a SONiC import is: its series carry `name`.
        let mut snap = crate::metrics::tests::snapshot();
        snap.ports[0].name = Some("Ethernet8".into());
        m.add_snapshot("s1", &snap);
        let mut served = families(&daemon);
        served.extend(families(&m.encode()));
        assert!(served.contains_key("rocectl_daemon_dataplane_up"), "{served:?}");
        assert!(served.contains_key("rocesw_queue_ecn_marked_total"), "{served:?}");

        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/grafana/rocesw.json");
        let dash: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        // Issue 49 item 7: ports by name. Every sum that keeps a port keeps its name, and every
        // legend that shows a port's id shows its name; each legend's labels are on the
        // series its query gives.
        let mut targets: Vec<(&str, &str)> = Vec::new();
        for panel in dash["panels"].as_array().unwrap() {
            for t in panel["targets"].as_array().into_iter().flatten() {
                targets.push((t["expr"].as_str().unwrap(), t["legendFormat"].as_str().unwrap_or("")));
            }
        }
        for (expr, legend) in &targets {
            for part in expr.split("by (").skip(1) {
                let by: Vec<&str> = part[..part.find(')').unwrap()].split(',').map(str::trim).collect();
                assert!(
                    !by.contains(&"port") || by.contains(&"name"),
                    "{expr}: sums ports without their names"
                );
            }
            assert!(!legend.contains("{{port}}") || legend.contains("{{name}}"), "{legend}");
            let names: Vec<&str> = ["rocesw_", "rocectl_"].iter().flat_map(|p| names_in(expr, p)).collect();
            for label in legend.split("{{").skip(1).map(|l| &l[..l.find("}}").unwrap()]) {
                assert!(
                    names.iter().all(|n| served.get(*n).is_some_and(|l| l.contains(label))),
                    "{expr}: legend label {label} is not on its series"
                );
            }
        }
        // The pools (SONiC's BUFFER_POOL, with their shared headroom pools) and the PG
        // watermarks have panels of their own.
        for wanted in [
            "rocesw_buffer_pool_used_bytes",
            "rocesw_buffer_pool_headroom_used_bytes",
            "rocesw_pg_peak_bytes",
            "rocesw_pg_peak_headroom_bytes",
        ] {
            assert!(
                targets.iter().any(|(e, _)| names_in(e, "rocesw_").contains(&wanted)),
                "no panel shows {wanted}"
            );
        }
        let mut exprs = Vec::new();
        strings_under(&dash["panels"], "expr", &mut exprs);
        strings_under(&dash["templating"], "query", &mut exprs);
        assert!(exprs.len() >= 12, "{exprs:?}");
        let mut asked = 0;
        for expr in exprs {
            let names: Vec<&str> = ["rocesw_", "rocectl_"].iter().flat_map(|p| names_in(expr, p)).collect();
            for name in &names {
                assert!(served.contains_key(*name), "{expr}: {name} is not served");
                asked += 1;
            }
            // Labels: `by (a, b)`, `{a=~"..."}`, and label_values(metric, a).
            let mut labels: Vec<String> = Vec::new();
            for part in expr.split("by (").skip(1) {
                let inner = &part[..part.find(')').unwrap()];
                labels.extend(inner.split(',').map(|l| l.trim().to_string()));
            }
            for part in expr.split('{').skip(1) {
                let inner = &part[..part.find('}').unwrap()];
                if inner.contains('=') {
                    labels.extend(
                        inner
                            .split(',')
                            .map(|m| m.split(['=', '!', '~']).next().unwrap().trim().to_string()),
                    );
                }
            }
            if let Some(args) = expr.strip_prefix("label_values(") {
                labels.push(
                    args.trim_end_matches(')')
                        .rsplit(',')
                        .next()
                        .unwrap()
                        .trim()
                        .to_string(),
                );
            }
            for label in labels {
                assert!(
                    names.iter().all(|n| served[*n].contains(&label)),
                    "{expr}: label {label} is not on every metric it names"
                );
            }
        }
        assert!(asked >= 15, "{asked}");
    }
}

//! The control protocol between `rocectl` and a running switch (`rocesw run`); the server is
//! `dataplane::runtime::control_server`. `controlplane/PROTOCOL.md` is the reference; in short:
//!
//! * JSON lines over a Unix stream socket (default [`DEFAULT_SOCKET`], mode 0600). Each request
//!   is one line `{"v":1,"id":N,"op":"...", ...}`; each response is one line
//!   `{"v":1,"id":N,"ok":true,"data":...}` or `{"v":1,"id":N,"ok":false,"error":"..."}` with
//!   the request's `id` (`null` when the request was too broken to read one).
//! * Ops ([`Op`]): `hello`, `get_config`, `apply {toml}`, `patch {toml}`, `counters`, `fdb`,
//!   `subscribe {interval_ms}` (≥ [`MIN_INTERVAL_MS`]; acknowledged, then a `counters` response
//!   carrying the subscribe's id is pushed every interval until the connection closes),
//!   `watermarks {kind}` and `clear_watermarks {kind}` (user or persistent, as SONiC keeps them),
//!   `auth {token}` (first on a TCP connection, see [`Endpoint`]), `capture {port, ...}`
//!   (acknowledged with [`CaptureStarted`], then [`CaptureData`] pushes carrying the capture's
//!   id until one says how it ended), `capture_stop` and `log {level, target}` (the log filter:
//!   read, or set as `ovs-appctl vlog/set` does, [`LogData`]).
//! * `apply` and `patch` are all or nothing: the resulting config is validated as a whole, then
//!   the switch applies it between two bursts or refuses it with a reason; nothing changes on
//!   any error. Both answer [`ApplyData`]: the warnings and the dotted keys whose value changed.
//! * A wrong `v`, an unknown op or field, or malformed JSON is answered with `ok:false`; the
//!   connection stays usable. A line over [`MAX_LINE`] bytes or not UTF-8 breaks the framing:
//!   answered, then the server closes the connection.

use crate::snapshot::{PoolPeaks, PoolReportPeaks, PortPeaks};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The protocol version this crate speaks (`v` in every line).
pub const VERSION: u32 = 1;
/// Longest request line the server reads, newline excluded.
pub const MAX_LINE: usize = 64 * 1024;
/// Where `rocesw run` listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/rocesw/rocesw.sock";
/// Where named switches listen: `rocesw run --name NAME` → `SOCKET_DIR/NAME.sock`.
pub const SOCKET_DIR: &str = "/run/rocesw";

/// The default socket of the switch called `name`.
pub fn socket_of(name: &str) -> PathBuf {
    Path::new(SOCKET_DIR).join(format!("{name}.sock"))
}

/// A control token (`rocesw run --control-token-file`) is a password shared by the switch and
/// its TCP clients: at least this many characters...
pub const TOKEN_MIN_CHARS: usize = 16;
/// ...of which at least this many different ones, so `aaaaaaaaaaaaaaaa` or `abababab...` is
/// refused while any random token passes (24 random bytes in base64 are 32 characters of some
/// 25 different ones).
pub const TOKEN_MIN_DISTINCT: usize = 10;
/// How to make a good token, for the messages that refuse a weak one.
pub const TOKEN_ADVICE: &str = "make one with `head -c 24 /dev/urandom | base64 > FILE && chmod 600 FILE`";

/// Refuses a weak control token (see [`TOKEN_MIN_CHARS`], [`TOKEN_MIN_DISTINCT`]), saying why
/// and how to make a good one.
pub fn check_token(token: &str) -> Result<(), String> {
    let chars = token.chars().count();
    let mut distinct: Vec<char> = token.chars().collect();
    distinct.sort_unstable();
    distinct.dedup();
    if chars < TOKEN_MIN_CHARS || distinct.len() < TOKEN_MIN_DISTINCT {
        return Err(format!(
            "the control token is too weak ({chars} characters, {} different): it must have at least \
             {TOKEN_MIN_CHARS} characters, at least {TOKEN_MIN_DISTINCT} of them different; {TOKEN_ADVICE}",
            distinct.len()
        ));
    }
    Ok(())
}

/// Reads a control token file: it must be private to its owner (no group or other
/// permission bits: the token is a password) and hold a token [`check_token`] accepts
/// (surrounding white space is not part of it).
pub fn read_token_file(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{}: mode {mode:03o} lets others read the token; `chmod 600 {}`",
            path.display(),
            path.display()
        ));
    }
    let token = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let token = token.trim().to_string();
    check_token(&token).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(token)
}

/// A switch name is a file name: letters, digits, `-`, `_`, `.`, not starting with `.`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "switch name {name:?}: use 1-64 letters, digits, '-', '_' or '.' (not starting with '.')"
        ))
    }
}
/// Shortest `subscribe` interval.
pub const MIN_INTERVAL_MS: u64 = 100;

/// What a request asks for: the `op` field and its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// Server and protocol version ([`HelloData`]).
    Hello,
    /// The running config's TOML text ([`ConfigData`]).
    GetConfig,
    /// Replace the whole config with this TOML text ([`ApplyData`]). With `if_version`, only
    /// if the running config is still that version (`get_config`'s): how a read-edit-apply
    /// client such as `rocectl set` avoids undoing a change made since it read.
    Apply {
        /// The whole config as TOML text.
        toml: String,
        /// Refuse unless the running config is this version.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        if_version: Option<u64>,
    },
    /// Deep-merge this TOML fragment into the running config ([`ApplyData`]): tables merge key
    /// by key, any other value (arrays included) replaces. `if_version` as for `Apply`.
    Patch {
        /// The TOML fragment to merge.
        toml: String,
        /// Refuse unless the running config is this version.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        if_version: Option<u64>,
    },
    /// Every counter now: the switch's snapshot (`summary.json`'s `switch` object).
    Counters,
    /// The MAC table: an array of `{mac, port, is_static, age_ns}`.
    Fdb,
    /// Push `counters` every `interval_ms` on this connection until it closes.
    Subscribe {
        /// At least [`MIN_INTERVAL_MS`].
        interval_ms: u64,
    },
    /// Buffer watermarks (peak use) since they were last cleared, of one kind
    /// ([`WatermarksData`]).
    Watermarks {
        /// User (default) or persistent.
        #[serde(default)]
        kind: WatermarkKind,
    },
    /// Restart one kind of watermarks from the current use; the other kind is untouched.
    ClearWatermarks {
        /// User (default) or persistent.
        #[serde(default)]
        kind: WatermarkKind,
    },
    /// The first request on a TCP connection (`rocesw run --control-tcp`): the shared token.
    /// Anything else first, or a wrong token, is refused and the connection closed. Accepted
    /// (and needless) on the Unix socket, whose file permissions are the access control.
    Auth {
        /// The switch's control token.
        token: String,
    },
    /// Copy the frames port `port` (its config id) receives and/or sends ([`CaptureStarted`],
    /// then [`CaptureData`] pushes with this request's id). One capture per connection and
    /// per port. It ends after `count` frames, after `duration_ms`, on `capture_stop`, when
    /// the connection closes, or when the switch stops; the last push says which.
    Capture {
        /// The port's config id.
        port: u16,
        /// Received, sent, or both (the default).
        #[serde(default)]
        direction: CaptureDirection,
        /// Bytes kept of each frame (default: the port's largest frame).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snaplen: Option<u32>,
        /// Frames the switch's capture ring holds (default: [`CAPTURE_RING_BYTES`] worth).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ring: Option<u32>,
        /// Stop after this many frames.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        /// Stop after this long, in ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    /// End this connection's capture: the frames already captured are still sent, then the
    /// last push (`end: "stopped"`), then this request's answer `{"stopped":true}`.
    CaptureStop,
    /// The switch's log filter ([`LogData`]), as `ovs-appctl vlog/set`: without `level`, read
    /// it; with `level` alone, every target logs at that level (the whole filter becomes it);
    /// with `target` too, that target (a module path, `dataplane::runtime`) logs at `level`
    /// and the rest of the filter stays. Levels: [`LOG_LEVELS`]. Takes effect at once.
    Log {
        /// One of [`LOG_LEVELS`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        level: Option<String>,
        /// A module path; needs `level`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
    },
}

/// The levels `log` takes, quietest first.
pub const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// The longest log filter a switch keeps (its directives joined by commas, in bytes): a `log`
/// request that would make it longer is refused, and the filter stays. Each target has one
/// directive (a new level for it replaces the old), so only ever more targets grow it; this
/// is room for dozens of module paths, and a client naming target after target can no longer
/// grow it (and the work every log call does to match it) without bound.
pub const MAX_LOG_FILTER: usize = 1024;

/// Checks a `log` request's level and target, as the server and `rocectl log` both do: the
/// level (any case) one of [`LOG_LEVELS`], returned in lower case; the target a Rust module
/// path (`dataplane::runtime`: identifiers joined by `::`) that fits in [`MAX_LOG_FILTER`].
pub fn check_log(level: &str, target: Option<&str>) -> Result<String, String> {
    let lower = level.to_ascii_lowercase();
    if !LOG_LEVELS.contains(&lower.as_str()) {
        return Err(format!("log level {level:?} is not one of {}", LOG_LEVELS.join(", ")));
    }
    if let Some(t) = target {
        if t.len() + 1 + lower.len() > MAX_LOG_FILTER {
            return Err(format!(
                "log target of {} bytes is too long: the whole filter is at most {MAX_LOG_FILTER} bytes",
                t.len()
            ));
        }
        let ident = |p: &str| {
            p.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if !t.split("::").all(ident) {
            return Err(format!(
                "log target {t:?} is not a module path (identifiers joined by ::, e.g. dataplane::runtime)"
            ));
        }
    }
    Ok(lower)
}

/// `log`'s answer: the filter in force (after the change, if one was asked), as tracing
/// directives (`warn,dataplane::runtime=debug`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogData {
    /// The directives, comma-separated.
    pub filter: String,
}

/// Default memory of one capture's ring in the switch (frame bytes), when `ring` is not given.
pub const CAPTURE_RING_BYTES: usize = 32 << 20;
/// Largest ring one capture may ask for, in frames and in bytes.
pub const CAPTURE_MAX_RING_FRAMES: u32 = 1 << 16;
/// The same limit in frame bytes.
pub const CAPTURE_MAX_RING_BYTES: usize = 64 << 20;
/// What all the captures running at once may hold in the switch.
pub const CAPTURE_MAX_TOTAL_BYTES: usize = 256 << 20;
/// Smallest snap length (an Ethernet, IP and BTH header).
pub const CAPTURE_MIN_SNAPLEN: u32 = 64;

/// Which of a port's frames a capture copies: what it received, what it sent, or both (the
/// default, as tcpdump's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureDirection {
    /// Only what the port received.
    Rx,
    /// Only what the port sent.
    Tx,
    /// Both (the default).
    #[default]
    Both,
}

impl CaptureDirection {
    /// Whether received frames are copied.
    pub fn rx(self) -> bool {
        matches!(self, CaptureDirection::Rx | CaptureDirection::Both)
    }

    /// Whether sent frames are copied.
    pub fn tx(self) -> bool {
        matches!(self, CaptureDirection::Tx | CaptureDirection::Both)
    }
}

impl std::fmt::Display for CaptureDirection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CaptureDirection::Rx => "rx",
            CaptureDirection::Tx => "tx",
            CaptureDirection::Both => "rx and tx",
        })
    }
}

/// `capture`'s answer: what the switch set up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureStarted {
    /// The port's config id.
    pub port: u16,
    /// Which frames are copied.
    pub direction: CaptureDirection,
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// Frames the ring holds: what a reader may fall behind by before frames are dropped.
    pub ring: u32,
}

/// One push of a running capture: the frames read from the ring since the last push, oldest
/// first, with the running totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureData {
    /// The frames, oldest first.
    pub frames: Vec<CapturedFrame>,
    /// Frames sent to this client so far, these included.
    pub captured: u64,
    /// Frames the switch could not keep so far: the ring was full (this client read too
    /// slowly). Never waited for: the switch goes on.
    pub dropped: u64,
    /// Set on the last push only: why the capture ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<CaptureEnd>,
}

/// Why a capture ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureEnd {
    /// `count` frames were sent.
    Count,
    /// `duration_ms` passed.
    Duration,
    /// `capture_stop`.
    Stopped,
    /// The switch is stopping.
    SwitchStopping,
}

impl std::fmt::Display for CaptureEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CaptureEnd::Count => "the frame count was reached",
            CaptureEnd::Duration => "the duration passed",
            CaptureEnd::Stopped => "stopped",
            CaptureEnd::SwitchStopping => "the switch stopped",
        })
    }
}

/// Which way a captured frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameDir {
    /// Received by the port.
    Rx,
    /// Sent by the port.
    Tx,
}

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturedFrame {
    /// When the switch received or sent it: nanoseconds since the Unix epoch (the switch's
    /// monotonic clock, anchored to wall-clock time when the switch started).
    pub ns: u64,
    /// Received or sent.
    pub dir: FrameDir,
    /// The frame's length on the wire (no FCS); `data` holds at most the snap length of it.
    pub len: u32,
    /// The captured bytes, base64 (standard alphabet, padded).
    pub data: String,
}

impl CapturedFrame {
    /// A frame of wire length `len` of which `bytes` (at most the snap length) were kept.
    pub fn new(ns: u64, dir: FrameDir, len: u32, bytes: &[u8]) -> CapturedFrame {
        use base64::Engine;
        CapturedFrame {
            ns,
            dir,
            len,
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    /// The captured bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(&self.data)
            .map_err(|e| format!("a captured frame's data is not base64: {e}"))
    }
}

/// Two independent sets of watermarks, as SONiC keeps them: `user` for day-to-day clearing,
/// `persistent` for long-term peaks that only a deliberate clear resets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatermarkKind {
    /// Cleared day to day (the default).
    #[default]
    User,
    /// Long-term peaks, cleared only on purpose.
    Persistent,
}

impl std::fmt::Display for WatermarkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WatermarkKind::User => "user",
            WatermarkKind::Persistent => "persistent",
        })
    }
}

/// `watermarks`' answer: `counters`' shape cut down to the peak fields (`peak_*`) and the ids
/// that locate them ([`crate::snapshot::Peaks`]), each the peak since this kind was last
/// cleared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatermarksData {
    /// The kind these are.
    pub kind: WatermarkKind,
    /// Milliseconds since this kind was last cleared (or since the switch started).
    pub since_ms: u64,
    /// Per port, in config order.
    pub ports: Vec<PortPeaks>,
    /// The shared pool's.
    pub buffer: PoolPeaks,
    /// Each named pool's (`[buffer.pool.NAME]`), as the counters' `pools`; left out without.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolReportPeaks>,
}

/// One row of `fdb`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FdbRow {
    /// Lower-case, colon-separated.
    pub mac: String,
    /// Port id it is learnt on (or pinned to).
    pub port: u16,
    /// A `[[fdb.static]]` entry: never aged.
    pub is_static: bool,
    /// Time since the address was last seen, in ns (0 for static entries).
    pub age_ns: u64,
}

/// One request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Chosen by the client; the answer carries it back.
    pub id: u64,
    /// What is asked.
    pub op: Op,
}

/// Why a request line was refused, with the id when one could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequest {
    /// The request's id, None if it could not be read.
    pub id: Option<u64>,
    /// What was wrong, for the answer's `error`.
    pub error: String,
}

impl Request {
    /// The request as one JSON line (no newline).
    pub fn to_line(&self) -> String {
        let mut v = serde_json::to_value(&self.op).expect("ops serialise");
        let obj = v.as_object_mut().expect("ops are objects");
        obj.insert("v".into(), VERSION.into());
        obj.insert("id".into(), self.id.into());
        v.to_string()
    }

    /// Reads one request line: checks `v` and `id`, then the op and its fields (unknown ones
    /// are refused).
    pub fn parse(line: &str) -> Result<Request, BadRequest> {
        let bad = |id, error: String| BadRequest { id, error };
        let value: Value = serde_json::from_str(line).map_err(|e| bad(None, format!("malformed JSON: {e}")))?;
        let Value::Object(mut obj) = value else {
            return Err(bad(None, "a request must be a JSON object".into()));
        };
        let id = match obj.remove("id") {
            Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
            Some(_) => return Err(bad(None, "`id` must be a non-negative integer".into())),
            None => return Err(bad(None, "missing `id`".into())),
        };
        match obj.remove("v") {
            Some(Value::Number(n)) if n.as_u64() == Some(VERSION as u64) => {}
            Some(other) => {
                return Err(bad(
                    id,
                    format!("unsupported protocol version {other} (this server speaks v{VERSION})"),
                ))
            }
            None => return Err(bad(id, format!("missing `v` (this server speaks v{VERSION})"))),
        }
        if !obj.contains_key("op") {
            return Err(bad(id, "missing `op`".into()));
        }
        let keys: Vec<String> = obj.keys().cloned().collect();
        let op: Op = serde_json::from_value(Value::Object(obj)).map_err(|e| bad(id, format!("bad request: {e}")))?;
        // serde ignores extra fields on ops without arguments: compare with what the op holds.
        let known = serde_json::to_value(&op).expect("ops serialise");
        if let Some(k) = keys.iter().find(|k| known.get(k.as_str()).is_none()) {
            return Err(bad(
                id,
                format!(
                    "bad request: unknown field `{k}` for op `{}`",
                    known["op"].as_str().unwrap_or("?")
                ),
            ));
        }
        if let Op::Subscribe { interval_ms } = op {
            if interval_ms < MIN_INTERVAL_MS {
                return Err(bad(
                    id,
                    format!("subscribe: interval_ms must be at least {MIN_INTERVAL_MS} (got {interval_ms})"),
                ));
            }
        }
        Ok(Request {
            id: id.unwrap_or(0),
            op,
        })
    }
}

/// One response line. Exactly one of `data` (when `ok`) and `error` is present.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Protocol version, [`VERSION`].
    pub v: u32,
    /// The request's id; None when the request was too broken to read one.
    pub id: Option<u64>,
    /// Whether the request succeeded.
    pub ok: bool,
    /// The op's answer, when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Why it failed, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Response {
    /// A success answering request `id`.
    pub fn ok(id: u64, data: Value) -> Self {
        Response {
            v: VERSION,
            id: Some(id),
            ok: true,
            data: Some(data),
            error: None,
        }
    }

    /// A refusal; `id` None when the request's could not be read.
    pub fn err(id: Option<u64>, error: impl Into<String>) -> Self {
        Response {
            v: VERSION,
            id,
            ok: false,
            data: None,
            error: Some(error.into()),
        }
    }

    /// The response as one JSON line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("responses serialise");
        s.push('\n');
        s
    }
}

/// `hello`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloData {
    /// e.g. `rocesw 0.1.0`.
    pub server: String,
    /// The protocol version the server speaks, [`VERSION`].
    pub protocol: u32,
    /// The switch's name (`rocesw run --name`), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Time since the control socket opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_ms: Option<u64>,
}

/// `get_config`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigData {
    /// The running config's TOML text.
    pub toml: String,
    /// The running config's version: 1 at start, one more for every change that took effect.
    #[serde(default)]
    pub version: u64,
}

/// `apply`'s and `patch`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyData {
    /// Dotted TOML key paths whose value changed, sorted.
    pub changed: Vec<String>,
    /// The new config's validation warnings that the running config did not have: each
    /// warning is said once, by the change that brings it (`rocectl check` lists them all).
    pub warnings: Vec<String>,
    /// The running config's version now (see [`ConfigData::version`]).
    #[serde(default)]
    pub version: u64,
    /// True when the request changed nothing (a `patch` that is empty or sets what is already
    /// set): the switch was not asked and the version stays, so a version always stands for
    /// a change that took effect. Added within v1; left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
}

/// How the refusal of an `apply` or `patch` whose `if_version` is no longer the running
/// config's version begins: a client that sees it may read the config again and retry.
pub const VERSION_CHANGED: &str = "the running config changed since it was read";

/// How the refusal of a change begins when the switch's data plane did not take it in time
/// (its workers did not answer within the control server's reply timeout: a switch still
/// setting up, or one very busy). Not a verdict on the change: asked again later, it applies.
pub const NOT_ANSWERED: &str = "the switch did not answer within";

/// How the refusal begins when the switch's control queue to its workers is full.
pub const BUSY: &str = "the switch is busy";

/// Whether a refusal says only that the switch could not take the request yet
/// ([`NOT_ANSWERED`], [`BUSY`]), so that the same request asked again later may well succeed,
/// rather than that the request itself is refused.
pub fn not_yet(refusal: &str) -> bool {
    refusal.starts_with(NOT_ANSWERED) || refusal.starts_with(BUSY)
}

/// How the line begins that the switch sends a TCP connection it closes before it
/// authenticated, to make room for a newer one (`MAX_TCP_UNAUTHENTICATED` connections waiting
/// to authenticate): a client that sees it (or the connection closing before the answer to its
/// `auth`) may connect again.
pub const AUTH_DISPLACED: &str = "closed: newer connections were waiting to authenticate";

/// How the server ends an `auth` refused unread while the peer's user is in back-off after
/// wrong tokens: `...; retry in N ms` ([`retry_after`] reads it).
pub const AUTH_RETRY_IN: &str = "retry in ";

/// The longest [`Client::connect_to`] keeps waiting and retrying when its `auth` is told to
/// retry later (the server's back-off is at most 2 s, so several rounds fit).
pub const AUTH_RETRY_FOR: Duration = Duration::from_secs(10);

/// The wait an `auth` refusal asks for (`...; retry in N ms`), if it asks for one.
pub fn retry_after(refusal: &str) -> Option<Duration> {
    let (_, tail) = refusal.rsplit_once(AUTH_RETRY_IN)?;
    let ms: u64 = tail.strip_suffix(" ms")?.trim().parse().ok()?;
    Some(Duration::from_millis(ms))
}

/// `subscribe`'s acknowledgement (the pushes that follow are `counters` data).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscribeData {
    /// The interval the pushes come at, in ms.
    pub interval_ms: u64,
}

/// What can go wrong talking to a switch.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting failed: nothing listens at `path` (for TCP, `tcp://ADDR`), or no permission.
    #[error("cannot connect to the switch: {source} (is `rocesw run` running? socket {})", path.display())]
    Connect {
        /// The socket, or `tcp://ADDR`.
        path: PathBuf,
        /// Why the connection failed.
        source: std::io::Error,
    },
    /// Reading or writing the connection failed.
    #[error("connection to the switch: {0}")]
    Io(#[from] std::io::Error),
    /// The connection ended where a response was expected.
    #[error("the switch closed the connection")]
    Closed,
    /// A line from the switch that is not a valid response.
    #[error("unreadable response from the switch: {0}")]
    Protocol(String),
    /// The switch answered `ok:false`.
    #[error("{0}")]
    Refused(String),
}

/// Where a switch listens: its Unix socket, or (when `rocesw run --control-tcp` enabled it) a
/// loopback TCP port with the token it requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The switch's Unix socket path.
    Unix(PathBuf),
    /// A loopback TCP port, which requires the token first.
    Tcp {
        /// `host:port`.
        addr: String,
        /// The token [`Op::Auth`] presents.
        token: String,
    },
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
            Endpoint::Tcp { addr, .. } => write!(f, "tcp://{addr}"),
        }
    }
}

/// One connection, either kind.
enum Stream {
    Unix(UnixStream),
    Tcp(std::net::TcpStream),
}

impl Stream {
    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }
}

impl std::io::Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => send_no_sigpipe(s, buf),
            // std sends with MSG_NOSIGNAL on TCP already.
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

/// A write to a Unix socket that a closed peer answers with EPIPE, never SIGPIPE: std's
/// `UnixStream` writes with write(2), which raises the signal, and a client such as rocectl
/// that restores SIGPIPE's default (to end quietly when its output pipe closes) would then die
/// silently when the switch hangs up, instead of saying so.
fn send_no_sigpipe(s: &UnixStream, buf: &[u8]) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: `buf` is valid for `buf.len()` bytes and the descriptor is the open stream's.
        let n = unsafe { libc::send(s.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A blocking client: one connection, requests answered in order.
pub struct Client {
    reader: BufReader<Stream>,
    writer: Stream,
    next_id: u64,
}

/// A second handle on a [`Client`]'s connection that only sends: for a client that reads pushes
/// on one thread and must send a request from another (`rocectl capture` sends `capture_stop`
/// on Ctrl-C while its reader waits for frames). Ids are the caller's to choose.
pub struct RequestSender {
    writer: Stream,
}

impl RequestSender {
    /// Sends one request with this id, chosen not to clash with the [`Client`]'s own; its answer
    /// arrives on the client's reader.
    pub fn send(&mut self, id: u64, op: Op) -> Result<(), ClientError> {
        let mut line = Request { id, op }.to_line();
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        Ok(())
    }
}

impl Client {
    /// A sending handle on this connection (see [`RequestSender`]).
    pub fn sender(&self) -> Result<RequestSender, ClientError> {
        Ok(RequestSender {
            writer: self.writer.try_clone()?,
        })
    }

    /// Connects to a switch's Unix socket (no authentication needed).
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
        Client::over(Stream::Unix(stream))
    }

    /// Connects to either kind of endpoint; over TCP, authenticates first, connecting again
    /// when displaced before its token was read, and waiting as told (for up to
    /// [`AUTH_RETRY_FOR`]) when its user is in back-off after wrong tokens: a token holder whose
    /// user also sent wrong ones (a typo, a stale token file) gets in once the wait is over,
    /// instead of failing with "retry in N ms".
    pub fn connect_to(ep: &Endpoint) -> Result<Client, ClientError> {
        match ep {
            Endpoint::Unix(p) => Client::connect(p),
            Endpoint::Tcp { addr, token } => {
                // A peer flooding the switch with connections that never authenticate can
                // displace this one before its token is read: connect again, a few times.
                let mut attempt = 0;
                let started = std::time::Instant::now();
                loop {
                    let stream =
                        std::net::TcpStream::connect(addr.as_str()).map_err(|source| ClientError::Connect {
                            path: PathBuf::from(format!("tcp://{addr}")),
                            source,
                        })?;
                    let mut c = Client::over(Stream::Tcp(stream))?;
                    c.set_timeout(Some(Duration::from_secs(10)))?;
                    let e = match c.call(Op::Auth { token: token.clone() }) {
                        Ok(_) => return Ok(c),
                        Err(e) => e,
                    };
                    if let ClientError::Refused(why) = &e {
                        if let Some(wait) = retry_after(why) {
                            // A little past the wait, so the next token is compared.
                            let wait = wait + Duration::from_millis(5);
                            if started.elapsed() + wait <= AUTH_RETRY_FOR {
                                std::thread::sleep(wait);
                                continue;
                            }
                        }
                    }
                    let displaced = match &e {
                        ClientError::Refused(why) => why.starts_with(AUTH_DISPLACED),
                        // Closed with the token unread: the connection ends, or is reset.
                        ClientError::Closed => true,
                        ClientError::Io(io) => io.kind() == std::io::ErrorKind::ConnectionReset,
                        _ => false,
                    };
                    if !displaced || attempt >= 5 {
                        return Err(e);
                    }
                    std::thread::sleep(Duration::from_millis(10 << attempt));
                    attempt += 1;
                }
            }
        }
    }

    fn over(stream: Stream) -> Result<Client, ClientError> {
        let writer = stream.try_clone()?;
        Ok(Client {
            reader: BufReader::new(stream),
            writer,
            next_id: 1,
        })
    }

    /// Gives up on a response after this long (`None`: wait for ever).
    pub fn set_timeout(&mut self, t: Option<Duration>) -> Result<(), ClientError> {
        self.reader.get_ref().set_read_timeout(t)?;
        Ok(())
    }

    /// Sends a request and returns its id.
    pub fn send(&mut self, op: Op) -> Result<u64, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut line = Request { id, op }.to_line();
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        Ok(id)
    }

    /// The next response line, whatever it answers.
    pub fn read(&mut self) -> Result<Response, ClientError> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(ClientError::Closed);
        }
        serde_json::from_str(&line).map_err(|e| ClientError::Protocol(format!("{e}: {}", line.trim_end())))
    }

    /// The data of the next response, or the switch's error.
    pub fn read_data(&mut self) -> Result<Value, ClientError> {
        let r = self.read()?;
        if r.ok {
            Ok(r.data.unwrap_or(Value::Null))
        } else {
            Err(ClientError::Refused(r.error.unwrap_or_else(|| "refused".into())))
        }
    }

    /// Sends a request and waits for its answer.
    pub fn call(&mut self, op: Op) -> Result<Value, ClientError> {
        let id = self.send(op)?;
        loop {
            let r = self.read()?;
            // Skip pushes of an earlier subscription.
            if r.id == Some(id) || r.id.is_none() {
                return if r.ok {
                    Ok(r.data.unwrap_or(Value::Null))
                } else {
                    Err(ClientError::Refused(r.error.unwrap_or_else(|| "refused".into())))
                };
            }
        }
    }

    /// `call` with the answer decoded.
    pub fn call_as<T: serde::de::DeserializeOwned>(&mut self, op: Op) -> Result<T, ClientError> {
        let v = self.call(op)?;
        serde_json::from_value(v).map_err(|e| ClientError::Protocol(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_tokens_are_refused() {
        for weak in [
            "",
            "short-token",
            "aaaaaaaaaaaaaaaa",
            "abababababababababababab",
            "0123456780123456",
        ] {
            let e = check_token(weak).unwrap_err();
            assert!(e.contains("too weak") && e.contains("/dev/urandom"), "{weak}: {e}");
        }
        for good in [
            "a-long-enough-secret-token",
            "0123456789abcdef",
            "q8Zc0mJ2vXy7LrT5pWn3Kd1Hb6Gs4Ff9",
        ] {
            check_token(good).unwrap();
        }
        // What the advice makes: 24 random bytes in base64.
        let mut bytes = [0u8; 24];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(97).wrapping_add(13);
        }
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        check_token(&b64).unwrap();
    }

    #[test]
    fn requests_round_trip() {
        for op in [
            Op::Hello,
            Op::GetConfig,
            Op::Apply {
                toml: "a = 1".into(),
                if_version: None,
            },
            Op::Apply {
                toml: "a = 1".into(),
                if_version: Some(3),
            },
            Op::Patch {
                toml: "[ecn.roce]\nkmax = \"200KB\"".into(),
                if_version: None,
            },
            Op::Counters,
            Op::Fdb,
            Op::Subscribe { interval_ms: 250 },
            Op::Watermarks {
                kind: WatermarkKind::Persistent,
            },
            Op::ClearWatermarks {
                kind: WatermarkKind::User,
            },
            Op::Auth { token: "s3cret".into() },
            Op::Capture {
                port: 3,
                direction: CaptureDirection::Tx,
                snaplen: Some(128),
                ring: None,
                count: Some(10),
                duration_ms: None,
            },
            Op::CaptureStop,
            Op::Log {
                level: None,
                target: None,
            },
            Op::Log {
                level: Some("debug".into()),
                target: Some("dataplane::runtime".into()),
            },
        ] {
            let r = Request { id: 7, op };
            assert_eq!(Request::parse(&r.to_line()).unwrap(), r);
        }
        assert_eq!(
            Request::parse(r#"{"v":1,"id":3,"op":"get_config"}"#).unwrap(),
            Request {
                id: 3,
                op: Op::GetConfig
            }
        );
    }

    #[test]
    fn log_levels_and_targets_are_checked() {
        assert_eq!(check_log("DEBUG", None).unwrap(), "debug");
        assert_eq!(check_log("off", Some("dataplane::runtime::shard")).unwrap(), "off");
        let e = check_log("verbose", None).unwrap_err();
        assert!(
            e.contains("\"verbose\" is not one of off, error, warn, info, debug, trace"),
            "{e}"
        );
        for bad in ["", "a=b", "dataplane::", "::x", "a,b", "1x", "a b"] {
            let e = check_log("info", Some(bad)).unwrap_err();
            assert!(e.contains("is not a module path"), "{bad:?}: {e}");
        }
        assert_eq!(
            Request::parse(r#"{"v":1,"id":5,"op":"log"}"#).unwrap().op,
            Op::Log {
                level: None,
                target: None
            }
        );
    }

    #[test]
    fn bad_requests_say_why() {
        let e = |s: &str| Request::parse(s).unwrap_err();
        assert!(e("{nope").error.contains("malformed JSON"));
        assert_eq!(e("{nope").id, None);
        let w = e(r#"{"v":2,"id":4,"op":"hello"}"#);
        assert_eq!(w.id, Some(4));
        assert!(w.error.contains("version 2"), "{}", w.error);
        assert!(e(r#"{"v":1,"id":4,"op":"reboot"}"#).error.contains("reboot"));
        assert!(e(r#"{"v":1,"id":4,"op":"hello","x":1}"#).error.contains('x'));
        assert!(e(r#"{"v":1,"id":4,"op":"apply","toml":"","extra":1}"#)
            .error
            .contains("extra"));
        assert!(e(r#"{"v":1,"id":4,"op":"apply"}"#).error.contains("toml"));
        assert!(e(r#"{"v":1,"id":4,"op":"subscribe","interval_ms":10}"#)
            .error
            .contains("at least 100"));
        assert!(e(r#"{"v":1,"op":"hello"}"#).error.contains("id"));
        assert!(e(r#"{"v":1,"id":4,"op":"capture"}"#).error.contains("port"));
        assert!(e(r#"{"v":1,"id":4,"op":"capture","port":1,"direction":"up"}"#)
            .error
            .contains("up"));
        assert!(e(r#"[1]"#).error.contains("object"));
    }

    /// A capture request with only its port captures both ways; frames survive the trip
    /// through base64 byte for byte.
    #[test]
    fn captures_default_to_both_directions_and_frames_round_trip() {
        let r = Request::parse(r#"{"v":1,"id":9,"op":"capture","port":2}"#).unwrap();
        let Op::Capture { port, direction, .. } = r.op else {
            panic!("{r:?}")
        };
        assert_eq!((port, direction), (2, CaptureDirection::Both));
        assert!(direction.rx() && direction.tx());
        assert!(!CaptureDirection::Rx.tx() && !CaptureDirection::Tx.rx());
        let bytes: Vec<u8> = (0..=255u8).chain(0..7).collect();
        let f = CapturedFrame::new(1_700_000_000_123_456_789, FrameDir::Tx, 9000, &bytes);
        let line = Response::ok(
            9,
            serde_json::to_value(CaptureData {
                frames: vec![f],
                captured: 1,
                dropped: 0,
                end: Some(CaptureEnd::Count),
            })
            .unwrap(),
        )
        .to_line();
        let back: Response = serde_json::from_str(&line).unwrap();
        let data: CaptureData = serde_json::from_value(back.data.unwrap()).unwrap();
        assert_eq!(data.frames[0].bytes().unwrap(), bytes);
        assert_eq!((data.frames[0].len, data.end), (9000, Some(CaptureEnd::Count)));
        assert!(CapturedFrame {
            data: "*".into(),
            ..data.frames[0].clone()
        }
        .bytes()
        .is_err());
    }

    #[test]
    fn an_auth_refusal_says_how_long_to_wait() {
        let why = "authentication refused: too many wrong tokens from your user; retry in 1600 ms";
        assert_eq!(retry_after(why), Some(Duration::from_millis(1600)));
        assert_eq!(
            retry_after("authentication failed: wrong token; connection closed"),
            None
        );
        assert_eq!(retry_after("retry in soon ms"), None);
    }

    #[test]
    fn responses_are_one_line() {
        let r = Response::err(None, "bad\nthing");
        let line = r.to_line();
        assert_eq!(line.matches('\n').count(), 1);
        assert_eq!(line, "{\"v\":1,\"id\":null,\"ok\":false,\"error\":\"bad\\nthing\"}\n");
        let ok = Response::ok(2, serde_json::json!({"a": 1}));
        assert_eq!(ok.to_line(), "{\"v\":1,\"id\":2,\"ok\":true,\"data\":{\"a\":1}}\n");
        assert_eq!(serde_json::from_str::<Response>(&ok.to_line()).unwrap(), ok);
    }
}

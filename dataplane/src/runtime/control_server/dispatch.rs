//! Dispatch: one request line to its answer (every op of the protocol), the workers asked and
//! waited for, and the counters pushed to subscribers.

use super::captures::CaptureArgs;
use super::{json, Server, MAX_PENDING_OUTPUT, REPLY_TIMEOUT};
use crate::runtime::worker::ControlRequest;
use controlplane::change::Edit;
use controlplane::protocol::{self, CaptureEnd, ConfigData, HelloData, Op, Request, Response, SubscribeData};
use controlplane::snapshot::Snapshot;
use mio::Token;
use serde_json::Value;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub(super) struct Subscription {
    pub(super) id: u64,
    pub(super) every: Duration,
    pub(super) next: Instant,
}

impl Server {
    pub(super) fn push_subscriptions(&mut self) {
        let now = Instant::now();
        let due: Vec<(Token, u64)> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.closed && !c.close_when_flushed)
            .filter_map(|(t, c)| c.subscription.as_ref().filter(|s| s.next <= now).map(|s| (*t, s.id)))
            .collect();
        // A subscriber still holding a full allowance of unsent pushes has stopped reading:
        // pushing more would only grow the switch's memory.
        let mut due = due;
        due.retain(|(t, _)| {
            let Some(c) = self.conns.get_mut(t) else { return false };
            if c.output.len() < MAX_PENDING_OUTPUT {
                return true;
            }
            tracing::warn!("control socket: closing a subscriber that stopped reading");
            let _ = self.poll.registry().deregister(&mut c.stream);
            c.closed = true;
            false
        });
        if due.is_empty() {
            return;
        }
        // One snapshot serves every subscriber due now.
        let line = self.snapshot().map(|mut s| {
            self.annotate(&mut s);
            json(&s)
        });
        for (t, id) in due {
            let Some(c) = self.conns.get_mut(&t) else { continue };
            let resp = match &line {
                Ok(v) => Response::ok(id, v.clone()),
                Err(e) => Response::err(Some(id), e.clone()),
            };
            c.output.extend_from_slice(resp.to_line().as_bytes());
            if let Some(s) = c.subscription.as_mut() {
                // Keep the cadence; after a stall, resume from now rather than burst.
                s.next += s.every;
                if s.next <= now {
                    s.next = now + s.every;
                }
            }
        }
    }

    pub(super) fn handle(&mut self, token: Token, line: &str) -> Option<Response> {
        if line.trim().is_empty() {
            return None;
        }
        let req = match Request::parse(line) {
            Ok(r) => r,
            Err(bad) => {
                // An unauthenticated TCP peer gets one answer, then the door.
                if let Some(c) = self.conns.get_mut(&token).filter(|c| !c.authed) {
                    c.close_when_flushed = true;
                }
                return Some(Response::err(bad.id, bad.error));
            }
        };
        let id = req.id;
        let authed = self.conns.get(&token).is_some_and(|c| c.authed);
        if !authed {
            return Some(self.authenticate(token, id, &req.op));
        }
        let result: Result<Value, String> = match req.op {
            Op::Auth { .. } => Ok(serde_json::json!({ "authenticated": true })),
            Op::Hello => Ok(json(&HelloData {
                server: format!("rocesw {}", env!("CARGO_PKG_VERSION")),
                protocol: protocol::VERSION,
                name: self.name.clone(),
                uptime_ms: Some(self.started.elapsed().as_millis() as u64),
            })),
            Op::GetConfig => Ok(json(&ConfigData {
                toml: self.running.text.clone(),
                version: self.running.version,
            })),
            Op::Apply { toml, if_version } => self
                .check_version(if_version)
                .and_then(|()| self.change(Edit::Whole(&toml))),
            Op::Patch { toml, if_version } => self
                .check_version(if_version)
                .and_then(|()| self.change(Edit::Fragment(&toml))),
            Op::Counters => self.snapshot().map(|mut s| {
                self.annotate(&mut s);
                json(&s)
            }),
            Op::Watermarks { kind } => self.snapshot().map(|s| json(&self.watermarks.read(kind, &s))),
            Op::ClearWatermarks { kind } => {
                let (tx, rx) = sync_channel(1);
                self.ask(ControlRequest::SnapshotAndRestartPeaks { reply: tx }, &rx)
                    .map(|s| {
                        self.watermarks.clear(kind, &s);
                        serde_json::json!({ "cleared": kind })
                    })
            }
            Op::Fdb => {
                let (tx, rx) = sync_channel(1);
                self.ask(ControlRequest::Fdb { reply: tx }, &rx).map(|rows| json(&rows))
            }
            Op::Capture {
                port,
                direction,
                snaplen,
                ring,
                count,
                duration_ms,
            } => self.start_capture(
                token,
                id,
                CaptureArgs {
                    port,
                    direction,
                    snaplen,
                    ring,
                    count,
                    duration_ms,
                },
            ),
            Op::CaptureStop => {
                let Some(s) = self.conns.get_mut(&token).and_then(|c| c.capture.as_mut()) else {
                    return Some(Response::err(Some(id), "no capture runs on this connection"));
                };
                s.end(CaptureEnd::Stopped);
                // Answered after the capture's last push (`CaptureSession::finish`).
                s.stop_reply = Some(id);
                return None;
            }
            Op::Log { level, target } => match (level, target) {
                (None, None) => crate::logging::filter()
                    .map(|filter| json(&protocol::LogData { filter }))
                    .ok_or_else(|| {
                        "this switch's log filter is not known (its process did not start it through rocesw)"
                            .to_string()
                    }),
                (None, Some(t)) => Err(format!("log: a target ({t}) needs a level")),
                (Some(level), target) => crate::logging::set_level(&level, target.as_deref()).map(|filter| {
                    tracing::info!(%filter, "log filter changed by a control client");
                    json(&protocol::LogData { filter })
                }),
            },
            Op::Subscribe { interval_ms } => {
                let every = Duration::from_millis(interval_ms);
                if let Some(c) = self.conns.get_mut(&token) {
                    c.subscription = Some(Subscription {
                        id,
                        every,
                        next: Instant::now() + every,
                    });
                }
                Ok(json(&SubscribeData { interval_ms }))
            }
        };
        Some(match result {
            Ok(data) => Response::ok(id, data),
            Err(e) => Response::err(Some(id), e),
        })
    }

    pub(super) fn snapshot(&mut self) -> Result<Snapshot, String> {
        let (tx, rx) = sync_channel(1);
        self.ask(ControlRequest::Snapshot { reply: tx }, &rx)
    }

    /// Hands a request to the workers and waits for the answer.
    pub(super) fn ask<T>(&mut self, req: ControlRequest, rx: &Receiver<T>) -> Result<T, String> {
        if self.queue.push(req).is_err() {
            return Err(format!("{} (its control queue is full); try again", protocol::BUSY));
        }
        match rx.recv_timeout(REPLY_TIMEOUT) {
            Ok(v) => Ok(v),
            Err(RecvTimeoutError::Timeout) => Err(format!("{} {} s", protocol::NOT_ANSWERED, REPLY_TIMEOUT.as_secs())),
            Err(RecvTimeoutError::Disconnected) => Err("the switch is stopping".into()),
        }
    }
}

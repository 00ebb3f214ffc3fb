//! The running config: `apply` and `patch` prepared against it (`controlplane::change`:
//! refused here, before they reach the workers, when they are not valid or not a change the
//! switch can take live), handed to the switch, and committed once it took them, late answers
//! included.

use super::{json, Server, REPLY_TIMEOUT};
use crate::runtime::worker::ControlRequest;
use controlplane::change::Edit;
use controlplane::protocol::{self, ApplyData};
use serde_json::Value;
use std::sync::mpsc::{sync_channel, RecvTimeoutError};

impl Server {
    /// Refuses a change made against a config version that is no longer the running one. A
    /// change still pending in the switch (answered late) counts as a change: until it is
    /// settled nobody can say which version a new change would apply to.
    pub(super) fn check_version(&mut self, if_version: Option<u64>) -> Result<(), String> {
        let Some(wanted) = if_version else { return Ok(()) };
        self.collect_late();
        if !self.late.is_empty() {
            return Err(format!(
                "{}: a change is still pending in the switch; read the config again",
                protocol::VERSION_CHANGED
            ));
        }
        if wanted != self.running.version {
            return Err(format!(
                "{} (version {wanted} was read, the running config is version {}); read it again",
                protocol::VERSION_CHANGED,
                self.running.version
            ));
        }
        Ok(())
    }

    /// Prepares a change against the running config (refused here, before it reaches the
    /// workers, if it is not valid or not a change the switch can take live), has the switch
    /// apply it, and on success makes it the running config. A `patch` that changes nothing is
    /// not sent: it is answered `unchanged` (with no warnings: the running config's were said when it
    /// was applied).
    pub(super) fn change(&mut self, edit: Edit<'_>) -> Result<Value, String> {
        let is_patch = matches!(edit, Edit::Fragment(_));
        let mut change = self.running.prepare(edit).map_err(|e| e.to_string())?;
        if is_patch && change.changed.is_empty() {
            return Ok(json(&ApplyData {
                changed: Vec::new(),
                warnings: change.warnings,
                version: self.running.version,
                unchanged: true,
            }));
        }
        let (tx, rx) = sync_channel(1);
        let req = ControlRequest::Apply {
            config: Box::new(change.config.clone()),
            reply: tx,
        };
        if self.queue.push(req).is_err() {
            return Err(format!("{} (its control queue is full); try again", protocol::BUSY));
        }
        match rx.recv_timeout(REPLY_TIMEOUT) {
            Ok(Ok(())) => {
                // Changes answered late were queued before this one, so the switch has settled
                // them by now: take them first, or one would later overwrite this one.
                self.collect_late();
                let changed = std::mem::take(&mut change.changed);
                let warnings = std::mem::take(&mut change.warnings);
                self.running.commit(change);
                Ok(json(&ApplyData {
                    changed,
                    warnings,
                    version: self.running.version,
                    unchanged: false,
                }))
            }
            Ok(Err(reason)) => Err(format!("the switch refused the change: {reason}")),
            Err(RecvTimeoutError::Timeout) => {
                self.late.push((rx, change));
                Err(format!(
                    "{} {} s (the change may still apply; check get_config)",
                    protocol::NOT_ANSWERED,
                    REPLY_TIMEOUT.as_secs()
                ))
            }
            Err(RecvTimeoutError::Disconnected) => Err("the switch is stopping".into()),
        }
    }

    /// Takes the answers of changes that timed out, in the order they were queued (the order
    /// the switch applied them, so the last one applied is the running text).
    pub(super) fn collect_late(&mut self) {
        let mut i = 0;
        while i < self.late.len() {
            match self.late[i].0.try_recv() {
                Ok(r) => {
                    let (_, change) = self.late.remove(i);
                    if r.is_ok() {
                        tracing::info!("a late config change was applied");
                        self.running.commit(change);
                    }
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => i += 1,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.late.remove(i);
                }
            }
        }
    }
}

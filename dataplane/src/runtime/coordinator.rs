//! The control plane's one door to a switch of several shards: it takes requests from the
//! control server's queue (the same [`ControlQueue`] a single shard serves itself), asks every
//! shard on its own queue, and answers once they all have.
//!
//! * A config change is made in three steps: every shard stops taking frames and sends what it
//!   has taken across (`Quiesce`); every shard queues what crossed under the old config, then
//!   takes the new one (`Apply`); every shard takes frames again (`Resume`). So the switch
//!   reports the new version only once every shard runs it, and no frame is classified under
//!   one config and queued under the other. The ports are not read for those few rounds; their
//!   rings hold the frames.
//! * A snapshot is every shard's, merged: each port from the shard that owns it, the pool's
//!   figures summed (`report::merge_shards`).
//! * The MAC table: each learnt entry from the shard that learnt it (its port's owner).
//! * A capture goes to the shard that owns the port, which answers itself.

use crate::report::merge_shards;
use crate::runtime::worker::{ControlQueue, ControlRequest};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::Duration;

/// How long the coordinator waits for a shard's answer: a shard answers within a round unless
/// its core is taken from it.
const SHARD_REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the control plane for a switch of several shards, one request at a time.
pub struct Coordinator<'a> {
    /// The queue the control server feeds.
    pub public: &'a ControlQueue,
    /// Each shard's own queue, by shard index.
    pub shards: Vec<&'a ControlQueue>,
    /// Per port index: the shard that owns it.
    pub owners: Vec<u8>,
    /// Port ids, by index (the FDB speaks ids).
    pub port_ids: Vec<u16>,
}

impl Coordinator<'_> {
    /// Serves requests until `done` is set.
    pub fn run(&self, done: &AtomicBool) {
        while !done.load(Ordering::Acquire) {
            match self.public.pop() {
                Some(req) => self.serve(req),
                None => std::thread::sleep(Duration::from_micros(200)),
            }
        }
    }

    fn serve(&self, req: ControlRequest) {
        match req {
            ControlRequest::Apply { config, reply } => {
                let _ = reply.try_send(self.apply(&config));
            }
            ControlRequest::Snapshot { reply } => {
                if let Ok(parts) = self.ask_all(|reply| ControlRequest::Snapshot { reply }) {
                    let _ = reply.try_send(merge_shards(parts, &self.owners));
                }
            }
            ControlRequest::SnapshotAndRestartPeaks { reply } => {
                if let Ok(parts) = self.ask_all(|reply| ControlRequest::SnapshotAndRestartPeaks { reply }) {
                    let _ = reply.try_send(merge_shards(parts, &self.owners));
                }
            }
            ControlRequest::Fdb { reply } => {
                if let Ok(parts) = self.ask_all(|reply| ControlRequest::Fdb { reply }) {
                    let mut rows: Vec<_> = parts
                        .into_iter()
                        .enumerate()
                        .flat_map(|(s, rows)| rows.into_iter().map(move |r| (s, r)))
                        .filter(|(s, r)| self.owner_of_id(r.port).map_or(*s == 0, |o| o == *s))
                        .map(|(_, r)| r)
                        .collect();
                    rows.sort_by(|a, b| a.mac.cmp(&b.mac));
                    let _ = reply.try_send(rows);
                }
            }
            ControlRequest::Capture { port, rx, tx, reply } => {
                let Some(&owner) = self.owners.get(port) else {
                    let _ = reply.try_send(Err(format!("port index {port} has no backend in this run")));
                    return;
                };
                if let Err(ControlRequest::Capture { reply, .. }) =
                    self.shards[owner as usize].push(ControlRequest::Capture { port, rx, tx, reply })
                {
                    let _ = reply.try_send(Err("the switch is busy; try again".into()));
                }
            }
            ControlRequest::Quiesce { reply } | ControlRequest::Resume { reply } => {
                let _ = reply.try_send(Err("not a request for the switch as a whole".into()));
            }
        }
    }

    fn owner_of_id(&self, id: u16) -> Option<usize> {
        let i = self.port_ids.iter().position(|&p| p == id)?;
        Some(self.owners[i] as usize)
    }

    /// Quiesce, apply, resume (the module's doc says why).
    fn apply(&self, config: &controlplane::Config) -> Result<(), String> {
        let quiesced = self.ask_all(|reply| ControlRequest::Quiesce { reply });
        let applied = match quiesced {
            Ok(_) => self
                .ask_all(|reply| ControlRequest::Apply {
                    config: Box::new(config.clone()),
                    reply,
                })
                .and_then(|answers| answers.into_iter().find(Result::is_err).unwrap_or(Ok(()))),
            Err(e) => Err(e),
        };
        // Whatever happened, every shard takes frames again.
        let _ = self.ask_all(|reply| ControlRequest::Resume { reply });
        applied
    }

    /// Sends each shard the request `make` builds around a reply channel, and collects the
    /// answers in shard order.
    fn ask_all<T>(&self, make: impl Fn(SyncSender<T>) -> ControlRequest) -> Result<Vec<T>, String> {
        let mut waiting: Vec<Receiver<T>> = Vec::with_capacity(self.shards.len());
        for q in &self.shards {
            let (tx, rx) = sync_channel(1);
            let mut req = make(tx);
            // The shard's queue is short and served every round: wait for a place.
            loop {
                match q.push(req) {
                    Ok(()) => break,
                    Err(r) => {
                        req = r;
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
            }
            waiting.push(rx);
        }
        waiting
            .into_iter()
            .enumerate()
            .map(|(s, rx)| {
                rx.recv_timeout(SHARD_REPLY_TIMEOUT)
                    .map_err(|_| format!("worker {s} did not answer within {SHARD_REPLY_TIMEOUT:?}"))
            })
            .collect()
    }
}

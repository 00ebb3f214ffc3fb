//! What a running switch cannot take from a new config: the one rule every path that changes a
//! running config shares (the control socket's apply, patch and set, `rocesw replay
//! --schedule`), so each refuses the same change with the same words.
//!
//! These are the things the switch was *built* from rather than the knobs it reads as it runs:
//! the buffer carved into packet slots and rings, the ports opened as sockets or files and
//! assigned to worker threads, the workers themselves with their pinning and polling, and the
//! drain timeout the shutdown path was handed at start-up. Accepting a change to one of them
//! would say "applied" while the switch ran as before.

use crate::model::Config;

/// Why `new` cannot replace `old` on a running switch (naming the first field that differs and
/// cannot change live), or None when every difference can be applied between two bursts.
///
/// The largest frame a port accepts is checked by the switch itself, against the packet slots
/// it allocated (`Switch::reconfigure`), and by the schedule loader against the config the
/// replay starts with: it may move freely below that size.
pub fn live_change_refusal(old: &Config, new: &Config) -> Option<String> {
    let restart = "cannot change while the switch runs (restart it)";
    if old.buffer.total_bytes != new.buffer.total_bytes {
        return Some(format!("buffer.size {restart}"));
    }
    if old.buffer.cell_bytes != new.buffer.cell_bytes {
        return Some(format!("buffer.cell {restart}"));
    }
    let ids = |c: &Config| c.ports.iter().map(|p| p.id).collect::<Vec<_>>();
    if ids(old) != ids(new) {
        return Some(format!("the set of ports {restart}"));
    }
    for (i, (o, n)) in old.ports.iter().zip(&new.ports).enumerate() {
        let field = if o.interface != n.interface {
            "interface"
        } else if o.pcap != n.pcap {
            "pcap"
        } else if o.worker != n.worker {
            "worker"
        } else {
            continue;
        };
        return Some(format!("port[{i}].{field} (port {}) {restart}", o.id));
    }
    let (o, n) = (&old.run, &new.run);
    let field = if o.workers != n.workers {
        "run.workers"
    } else if o.cores != n.cores {
        "run.cores"
    } else if o.idle_sleep_ns != n.idle_sleep_ns {
        "run.idle"
    } else if o.drain_timeout_ns != n.drain_timeout_ns {
        "run.drain_timeout"
    } else {
        return None;
    };
    Some(format!("{field} {restart}"))
}

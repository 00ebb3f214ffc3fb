//! What a running switch cannot take from a new config: the one rule every path that changes a
//! running config shares (the control socket's apply, patch and set, `rocesw replay
//! --schedule`, `rocesw tune`'s candidates, all through `change::Running::prepare`), so each
//! refuses the same change with the same words. The switch checks it again itself
//! (`Switch::reconfigure`).
//!
//! These are the things the switch was *built* from rather than the knobs it reads as it runs:
//! the buffer carved into packet slots and rings, the ports opened as sockets, files or DPDK
//! devices (and the peer each was given: an emulated link or the wire itself) and assigned to
//! worker threads, the workers themselves with their pinning and polling, DPDK's EAL (its
//! arguments, memory and mbuf pool, taken once per process), and the drain timeout the
//! shutdown path was handed at start-up. Accepting a change to one of them
//! would say "applied" while the switch ran as before.

use crate::model::Config;

/// Why `new` cannot replace `old` on a running switch (naming the first field that differs and
/// cannot change live), or None when every difference can be applied between two bursts.
///
/// The largest frame a port accepts is not one of them: it may move freely up to the packet
/// slots the switch allocated at start ([`frame_refusal`]).
pub fn live_change_refusal(old: &Config, new: &Config) -> Option<String> {
    let restart = "cannot change while the switch runs (restart it)";
    if old.buffer.total_bytes != new.buffer.total_bytes {
        return Some(format!("buffer.size {restart}"));
    }
    if old.buffer.cell_bytes != new.buffer.cell_bytes {
        return Some(format!("buffer.cell {restart}"));
    }
    if old.buffer.slices != new.buffer.slices {
        return Some(format!("buffer.slices {restart}"));
    }
    // Cells already charged to a pool go back to it: which pools there are, which PG or
    // queue draws on which, and whether a pool's PGs take headroom from a shared headroom pool
    // stay as they started. Sizes may change (`SharedPool::resize`).
    let shape = |c: &Config| {
        c.buffer
            .pools
            .iter()
            .map(|p| (p.name.clone(), p.dir, p.headroom_bytes > 0))
            .collect::<Vec<_>>()
    };
    if shape(old) != shape(new) {
        return Some(format!(
            "buffer.pool: which pools there are (and whether one has a shared headroom pool) {restart}; their sizes may change"
        ));
    }
    for (o, n) in old.ports.iter().zip(&new.ports) {
        if o.slice != n.slice {
            return Some(format!("slice (port {}) {restart}", o.id));
        }
        for i in 0..crate::NUM_TC {
            if o.pgs[i].pool != n.pgs[i].pool {
                return Some(format!("pg.{i}.pool (port {}) {restart}", o.id));
            }
            if o.queues[i].pool != n.queues[i].pool {
                return Some(format!("queue.{i}.pool (port {}) {restart}", o.id));
            }
        }
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
        } else if o.dpdk != n.dpdk {
            "dpdk"
        } else if o.peer != n.peer {
            "peer"
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
    } else if o.dpdk.eal_args != n.dpdk.eal_args {
        "run.dpdk.eal_args"
    } else if o.dpdk.memory_mb != n.dpdk.memory_mb {
        "run.dpdk.memory"
    } else if o.dpdk.hugepages != n.dpdk.hugepages {
        "run.dpdk.hugepages"
    } else if o.dpdk.mbufs != n.dpdk.mbufs {
        "run.dpdk.mbufs"
    } else {
        return None;
    };
    Some(format!("{field} {restart}"))
}

/// Why a port of `new` would take frames larger than the packet slots of `slot_bytes` a switch
/// allocated when it started (`memory::footprint(..).slot_bytes`: its largest frame then,
/// rounded up to a cache line), naming the first such port; None when every frame fits.
pub fn frame_refusal(slot_bytes: u64, new: &Config) -> Option<String> {
    let (i, p) = new
        .ports
        .iter()
        .enumerate()
        .find(|(_, p)| u64::from(p.max_frame_bytes) > slot_bytes)?;
    Some(format!(
        "port[{i}].mtu (port {}): frames up to {} B exceed the {slot_bytes} B packet slots the switch was started with (restart it)",
        p.id, p.max_frame_bytes
    ))
}

#[cfg(test)]
mod tests {
    use super::live_change_refusal;

    /// The shipped profile with `port0` added to port 0's table and `tail` appended.
    fn load(port0: &str, tail: &str) -> crate::Config {
        let base = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml")).unwrap();
        assert!(base.contains("[[port]]\nid = 0\n"));
        let text = base.replacen("[[port]]\nid = 0\n", &format!("[[port]]\nid = 0\n{port0}\n"), 1) + "\n" + tail;
        crate::load_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}")).config
    }

    /// A port's peer and DPDK device, and `[run.dpdk]`, are taken at start-up (the emulated
    /// link, the device opened, the EAL started once per process): a live change of any of them
    /// is refused by name, like `interface` and `pcap`, never "applied" while nothing changed.
    #[test]
    fn peer_dpdk_and_run_dpdk_cannot_change_live() {
        let old = load("", "");
        let cases = [
            (load("peer = \"emulated\"", ""), "port[0].peer (port 0)"),
            (load("dpdk = \"net_null0\"", ""), "port[0].dpdk (port 0)"),
            (
                load("", "[run.dpdk]\neal_args = [\"-d\", \"/tmp/x.so\"]\n"),
                "run.dpdk.eal_args",
            ),
            (load("", "[run.dpdk]\nmemory = \"1GiB\"\n"), "run.dpdk.memory"),
            (load("", "[run.dpdk]\nhugepages = true\n"), "run.dpdk.hugepages"),
            (load("", "[run.dpdk]\nmbufs = 32767\n"), "run.dpdk.mbufs"),
        ];
        for (new, field) in &cases {
            let why = live_change_refusal(&old, new).unwrap_or_else(|| panic!("{field}: taken live"));
            assert!(why.starts_with(field) && why.contains("restart"), "{field}: {why}");
            // And back: the running switch's value cannot be dropped either.
            assert!(live_change_refusal(new, &old).is_some(), "{field}: removal taken live");
        }
        assert_eq!(live_change_refusal(&old, &load("", "")), None);
    }
}

//! The receive side of the switch: parse → MAC control → link-local filter → FDB learn and
//! look-up → classify, for each frame of a burst; then admission on the ingress PG (its
//! [`port::IngressPort`] account) before the egress side queues it.
//!
//! [`Ingress`] owns what a port's receive side decides with: the ports' PG accounts and XOFF
//! generators, the FDB (learning) and the classifier. It never touches an egress queue; it
//! answers with an [`Arrival`] that the switch hands to the egress side.

pub mod classify;
pub mod fdb;
pub mod flood;
pub mod port;

use crate::counters::DropReason;
use crate::wire::{self, FrameInfo};
use classify::{Class, Classifier, PortMaps};
use controlplane::{Config, NUM_TC};
use fdb::Fdb;
use flood::FloodGroups;
use port::IngressPort;

/// Where a received frame goes next; for `Unicast` and `Flood`, in the class
/// [`Ingress::receive`] wrote beside it. The class is not a payload of the enum: an enum whose
/// variants carry different payloads stays in memory, and the class was written into it byte
/// by byte and read back wider, a store-forwarding stall on every forwarded frame.
pub enum Arrival {
    /// Dropped or consumed here (counted already).
    Done,
    /// A MAC control frame (PFC/PAUSE) for the egress side of the same port to obey.
    MacControl,
    /// To one egress port (index).
    Unicast(usize),
    /// To every other port.
    Flood,
}

/// The ingress side of every port: parse, FDB, classification and PG admission with XOFF.
pub struct Ingress {
    pub(crate) ports: Vec<IngressPort>,
    pub(crate) fdb: Fdb,
    pub(crate) classifier: Classifier,
    /// The flooded frames whose copies are still out, each charged to its PG once.
    pub(crate) floods: FloodGroups,
    /// Per port index, per PG: the PFC-enabled priorities that map to it through the port's
    /// map set, what an XOFF for that PG announces.
    pub(crate) pg_prios: Vec<[u8; NUM_TC]>,
    /// Port id → index (u16::MAX: no such port): the FDB speaks ids, the arrays indices.
    index_of_id: Vec<u16>,
}

/// Per port, per PG: the port's own PFC-enabled priorities (`[[port]] pfc`, SONiC's per-port
/// `pfc_enable`) that map to it through the port's TC → PG map: what an XOFF for that PG
/// announces, as an ASIC names only the priorities PFC is enabled for on the port.
fn pg_priorities(cfg: &Config) -> Vec<[u8; NUM_TC]> {
    cfg.ports
        .iter()
        .enumerate()
        .map(|(port, p)| {
            let tc_to_pg = cfg.port_maps(port).tc_to_pg;
            let mut pg_prios = [0u8; NUM_TC];
            for prio in 0..NUM_TC {
                if p.pfc_enabled[prio] {
                    pg_prios[tc_to_pg[prio] as usize & 7] |= 1 << prio;
                }
            }
            pg_prios
        })
        .collect()
}

impl Ingress {
    /// `packet_slots`: the packet pool's capacity, which bounds the floods out at once.
    pub(crate) fn new(cfg: &Config, accounts: Vec<crate::mmu::PgAccount>, packet_slots: usize) -> Self {
        let ports = cfg
            .ports
            .iter()
            .zip(accounts)
            .map(|(p, a)| IngressPort::new(p, &cfg.pfc, a, PortMaps::new(cfg, p.map_set)))
            .collect();
        let max_id = cfg.ports.iter().map(|p| p.id as usize).max().unwrap_or(0);
        let mut index_of_id = vec![u16::MAX; max_id + 1];
        for (i, p) in cfg.ports.iter().enumerate() {
            index_of_id[p.id as usize] = i as u16;
        }
        Ingress {
            ports,
            fdb: Fdb::new(&cfg.fdb, &cfg.ports.iter().map(|p| p.id).collect::<Vec<_>>()),
            classifier: Classifier::new(cfg),
            floods: FloodGroups::new(packet_slots),
            pg_prios: pg_priorities(cfg),
            index_of_id,
        }
    }

    /// Takes a new config (same ports); learnt MACs, counts and XOFF state are kept.
    pub(crate) fn reconfigure(&mut self, cfg: &Config, fresh: &[crate::mmu::PgAccount]) {
        for ((p, pc), a) in self.ports.iter_mut().zip(&cfg.ports).zip(fresh) {
            p.reconfigure(pc, &cfg.pfc, a, PortMaps::new(cfg, pc.map_set));
        }
        self.fdb.reconfigure(&cfg.fdb);
        self.classifier = Classifier::new(cfg);
        self.pg_prios = pg_priorities(cfg);
    }

    /// The classification maps of port index `port` (`[classify]`'s own for an index that is
    /// not a port): what a peer sending into that port classifies its frames by.
    pub fn port_maps(&self, port: usize) -> &PortMaps {
        self.ports.get(port).map_or(&self.classifier.default, |p| &p.maps)
    }

    /// The index of the port with config id `id`; `None` if the config has no such port.
    #[inline]
    pub fn port_index(&self, id: u16) -> Option<usize> {
        match self.index_of_id.get(id as usize) {
            Some(&i) if i != u16::MAX => Some(i as usize),
            _ => None,
        }
    }

    /// Receives one frame (without FCS) on port index `port` at `now`, parsing into `info`
    /// (reused across a burst), and says where it goes, in which class (`class`, written when
    /// the answer is `Unicast` or `Flood`).
    #[inline(always)]
    pub(crate) fn receive(
        &mut self,
        port: usize,
        frame: &[u8],
        now: u64,
        info: &mut FrameInfo,
        class: &mut Class,
    ) -> Arrival {
        let p = &mut self.ports[port];
        p.counters.rx_packets += 1;
        p.counters.rx_bytes += frame.len() as u64;
        if frame.len() > p.max_frame {
            p.counters.drops[DropReason::Oversize as usize] += 1;
            return Arrival::Done;
        }
        if let Err(m) = wire::parse_into(frame, p.max_frame, info) {
            p.counters.malformed[m as usize] += 1;
            return Arrival::Done;
        }
        if info.is_mac_control() {
            return Arrival::MacControl;
        }
        // MACs are read from the frame, not from `info`: the parser has just written them there
        // byte by byte, and reading them back wider stalls on store forwarding.
        let Some((dst, src)) = fdb::frame_mac_keys(frame) else {
            return Arrival::Done; // parse guarantees 14 bytes
        };
        if wire::parse::is_link_local_key(dst) {
            p.counters.drops[DropReason::LinkLocal as usize] += 1;
            return Arrival::Done;
        }
        if info.is_unknown_ethertype() {
            p.counters.unknown_ethertype += 1;
        }

        let in_id = p.id;
        if !fdb::is_group_key(src) && self.fdb.learn_key(src, in_id, now).refused() {
            p.counters.learn_refused += 1;
        }
        *class = self.classifier.classify(info, &p.maps, in_id, frame.len());
        // A PG is 0..8 (the config's maps are checked), so the mask only spares a bounds check.
        let pgc = &mut p.pg_counters[class.pg as usize & 7];
        pgc.rx_packets += 1;
        pgc.rx_bytes += frame.len() as u64;

        let unicast_to = if !fdb::is_group_key(dst) {
            self.fdb.lookup_recent_key(dst, now)
        } else {
            None
        };
        match unicast_to {
            Some(out_id) if out_id == in_id => self.drop_frame(port, class.pg, DropReason::NoRoute),
            Some(out_id) => match self.port_index(out_id) {
                Some(out) => Arrival::Unicast(out),
                None => self.drop_frame(port, class.pg, DropReason::NoRoute),
            },
            None if self.ports.len() < 2 => self.drop_frame(port, class.pg, DropReason::NoRoute),
            // "Every other port" is one port: the frame itself, not a flood of copies.
            None if self.ports.len() == 2 => Arrival::Unicast(1 - port),
            None => Arrival::Flood,
        }
    }

    /// Counts a frame dropped before it was queued anywhere, on its port and ingress PG.
    #[cold]
    pub(crate) fn drop_frame(&mut self, port: usize, pg: u8, reason: DropReason) -> Arrival {
        self.ports[port].drop_frame(pg, reason);
        Arrival::Done
    }
}

//! What one ingress port owns: its PGs' buffer account, XOFF generation, and the counters of
//! what it received. The egress side reaches it only through [`IngressPort::release`] (a
//! frame of this port left the switch, or was dropped after admission): a call on one core, a
//! message between shards.

use super::classify::PortMaps;
use crate::counters::{DropReason, PgCounters, PortCounters};
use crate::mmu::{PgAccount, SharedPool};
use crate::pfc::{PfcGenerator, PfcRequest};
use controlplane::{PfcConfig, PortConfig, NUM_TC};

/// One port's ingress state: its PGs' buffer account, XOFF generation and receive counters.
pub struct IngressPort {
    pub(crate) id: u16,
    pub(crate) max_frame: usize,
    pub(crate) buffers: PgAccount,
    pub(crate) pfc_gen: PfcGenerator,
    pub(crate) counters: PortCounters,
    pub(crate) pg_counters: [PgCounters; NUM_TC],
    /// Its classification maps (its map set's, or `[classify]`'s): beside what the receive
    /// path already holds of the port, not in a table of their own (`classify::Classifier`).
    pub(crate) maps: PortMaps,
}

impl IngressPort {
    pub(crate) fn new(cfg: &PortConfig, pfc: &PfcConfig, buffers: PgAccount, maps: PortMaps) -> Self {
        IngressPort {
            maps,
            id: cfg.id,
            max_frame: cfg.max_frame_bytes as usize,
            buffers,
            pfc_gen: PfcGenerator::new(pfc, cfg.speed_bps),
            counters: PortCounters::default(),
            pg_counters: Default::default(),
        }
    }

    /// New limits, PFC timing and maps; every count, XOFF state and pending refresh is kept.
    pub(crate) fn reconfigure(&mut self, cfg: &PortConfig, pfc: &PfcConfig, fresh: &PgAccount, maps: PortMaps) {
        self.maps = maps;
        self.max_frame = cfg.max_frame_bytes as usize;
        self.buffers.set_limits(fresh);
        self.pfc_gen.reconfigure(pfc, cfg.speed_bps);
    }

    /// Counts a frame dropped before it was queued anywhere, on this port and its PG.
    #[cold]
    pub(crate) fn drop_frame(&mut self, pg: u8, reason: DropReason) {
        self.counters.drops[reason as usize] += 1;
        self.pg_counters[pg as usize & 7].dropped_packets += 1;
    }

    /// Enters XOFF for `pg` if it is not there yet: the PFC frame to send, if any.
    #[inline]
    pub(crate) fn xoff(&mut self, pg: usize, prios: u8, now: u64) -> Option<PfcRequest> {
        if prios == 0 || !self.pfc_gen.start_xoff(pg, now) {
            return None;
        }
        Some(self.xoff_frame(pg, prios))
    }

    /// The XOFF (first one or a refresh) for the priorities `prios` of `pg`.
    fn xoff_frame(&mut self, pg: usize, prios: u8) -> PfcRequest {
        self.pg_counters[pg].xoff_sent += 1;
        PfcRequest::xoff(prios, self.pfc_gen.pause_quanta())
    }

    fn xon(&mut self, pg: usize, prios: u8) -> PfcRequest {
        self.pfc_gen.stop_xoff(pg);
        self.pg_counters[pg].xon_sent += 1;
        PfcRequest::xon(prios)
    }

    /// A frame admitted from `pg` has left the switch (`dropped`: it was dropped on its way
    /// out): its cells return, and if the PG is in XOFF and may now resume, the XON to send.
    #[inline(always)]
    pub(crate) fn release(
        &mut self,
        pg: usize,
        cells: u32,
        dropped: bool,
        prios: u8,
        pool: &mut SharedPool,
    ) -> Option<PfcRequest> {
        self.buffers.release(pg, cells, pool);
        if dropped {
            self.pg_counters[pg].dropped_packets += 1;
        }
        if self.pfc_gen.is_xoff(pg) && self.buffers.may_resume(pg, pool) {
            return Some(self.xon(pg, prios));
        }
        None
    }

    /// A frame admitted from `pg` was dropped on its way out, after its cells were returned.
    pub(crate) fn count_dropped(&mut self, pg: usize) {
        self.pg_counters[pg & 7].dropped_packets += 1;
    }

    /// The refresh timer of a PG in XOFF: XON if it may resume by now (or holds nothing),
    /// otherwise a refreshed XOFF, so the peer's pause never runs out while congested.
    pub(crate) fn refresh(&mut self, pg: usize, prios: u8, now: u64, pool: &SharedPool) -> Option<PfcRequest> {
        if !self.pfc_gen.refresh_due(pg, now) {
            return None;
        }
        if self.buffers.may_resume(pg, pool) || self.buffers.pg(pg).total() == 0 {
            Some(self.xon(pg, prios))
        } else {
            self.pfc_gen.refreshed(pg, now);
            Some(self.xoff_frame(pg, prios))
        }
    }

    pub(crate) fn next_refresh(&self) -> Option<u64> {
        self.pfc_gen.next_refresh()
    }
}

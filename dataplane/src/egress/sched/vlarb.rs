//! InfiniBand VL arbitration (IBA 1.2.1 Vol. 1 §7.6.9, "VL Arbitration", the VLArbitrationTable
//! attribute of §14.2.5.9), with egress queue n playing VL n, configured the way OpenSM does it
//! (`qos_vlarb_high`, `qos_vlarb_low`, `qos_high_limit`; OpenSM's
//! doc/QoS_management_in_OpenSM.txt, section 7).
//!
//! How this reads the specification, rule by rule:
//!
//! * **Two tables, high first.** A high-priority and a low-priority table, each an ordered,
//!   circular list of up to 64 (VL, weight) entries. The high table is served whenever one of
//!   its VLs can send and the limit below does not hold it back; otherwise the low table.
//! * **Weights are 64-byte credits, spent whole packets at a time.** An entry that becomes
//!   current may send `weight` credits. A packet costs the credits it occupies, its length
//!   rounded up to 64 bytes (a 1500-byte frame is 24 credits), as IB's flow-control credits
//!   count it. A packet is always sent whole: it may start while the entry has any weight left
//!   and is charged in full, so the entry may overdraw.
//!   The entry ends when its remaining weight reaches zero or goes negative, and the table
//!   moves to the next entry. The overdraw is not carried: the entry starts afresh at its next
//!   turn (the specification's weight counter is reloaded per turn; Mellanox's IB flit model
//!   does the same, resetting an entry's used credits when the index moves).
//! * **Weight 0 skips the entry** (OpenSM: "a weight of 0 indicates that this entry should be
//!   skipped"); the same VL may appear in several entries and in both tables.
//! * **An entry whose VL cannot send is skipped**: the table moves on to the next entry whose
//!   VL can (the current entry's unused weight is forfeited: it was its turn). "Can send" is
//!   the caller's eligibility: the queue holds a frame, is not paused by PFC (IB: has credits)
//!   and its shaper conforms. A table whose VLs cannot send is passed over without moving.
//! * **Each table keeps its place.** Serving the other table does not reset a table's current
//!   entry or its remaining weight.
//! * **LimitOfHighPriority** (`high_limit`, units of 4 KiB) bounds the high-priority bytes sent
//!   while a low-priority packet waits: a counter adds every high-priority packet's credits;
//!   once it reaches `high_limit × 64` credits (× 4096 bytes) and a low-priority VL can send,
//!   one low-priority
//!   packet is sent ("the number of high-priority packets that can be transmitted without an
//!   opportunity to send a low-priority packet", OpenSM's wording of the specification). The
//!   counter resets to zero when a low-priority packet is sent, and whenever no low-priority VL
//!   can send (nothing is being held back). `high_limit = 0` lets exactly one high-priority
//!   packet go between low-priority opportunities; 255 is unbounded (the low table is served
//!   only when no high-priority VL can send, and may starve). Like a weight, the limit is
//!   checked before a packet, so the packet that crosses it is still sent whole.
//! * **A queue in neither table** (or only in weight-0 entries) is, on an IB port, a VL that is
//!   never sent ("effectively turned off" in OpenSM's example). A switch queue may still
//!   receive frames, and a queue that never drains would hold its buffer and, if lossless,
//!   pause its senders for good; so such a queue is served only when no VL of either table can
//!   send, higher queue first, and validation warns when traffic can reach one. That keeps the
//!   scheduler work-conserving, as every kind must be.
//!
//! Lengths are the frame's bytes as the switch counts them (Ethernet, without FCS), in credits
//! as above.
//!
//! A live change of the tables ([`VlArb::retune`]) keeps each table's place: the current
//! index stays (wrapped into the new length); if the entry there still names the same VL the
//! turn goes on with its remaining weight clamped to the new weight, otherwise that entry
//! starts afresh. The limit's counter is kept and compared with the new limit.

use controlplane::{
    VlArbConfig, VlArbEntry, NUM_TC, VLARB_LIMIT_BYTES, VLARB_MAX_ENTRIES, VLARB_UNBOUNDED, VLARB_WEIGHT_BYTES,
};

/// The 64-byte credits a frame of `len` bytes occupies.
#[inline]
fn credits(len: u32) -> u32 {
    len.div_ceil(VLARB_WEIGHT_BYTES)
}

/// One arbitration table and its place in it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    /// (VL, weight) entries; only the first `len` are used.
    entries: [(u8, u8); VLARB_MAX_ENTRIES],
    len: u8,
    /// VLs (queue mask) with at least one entry of weight above 0: whether the table can serve
    /// anything of an eligibility mask is one AND.
    vls: u8,
    /// The current entry.
    cur: u8,
    /// Whether the current entry's turn has begun (`remaining` is then its weight left, in
    /// credits).
    started: bool,
    remaining: i32,
}

/// Where a decision came from, and what committing it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pick {
    High {
        idx: u8,
        fresh: bool,
        q: u8,
    },
    Low {
        idx: u8,
        fresh: bool,
        q: u8,
    },
    /// A queue in neither table, served because no table VL could send.
    Other {
        q: u8,
    },
}

impl Pick {
    fn queue(self) -> usize {
        match self {
            Pick::High { q, .. } | Pick::Low { q, .. } | Pick::Other { q } => usize::from(q),
        }
    }
}

impl Table {
    fn new(entries: &[VlArbEntry]) -> Self {
        let mut t = Table {
            entries: [(0, 0); VLARB_MAX_ENTRIES],
            len: 0,
            vls: 0,
            cur: 0,
            started: false,
            remaining: 0,
        };
        for (slot, e) in t.entries.iter_mut().zip(entries) {
            *slot = (e.vl & 7, e.weight);
            t.len += 1;
            if e.weight > 0 {
                t.vls |= 1 << (e.vl & 7);
            }
        }
        t
    }

    /// The entry that would send next given `eligible`, and whether its turn starts afresh.
    /// None when none of the table's VLs is eligible (then nothing moves).
    #[inline]
    fn pick(&self, eligible: u8) -> Option<(u8, bool, u8)> {
        if eligible & self.vls == 0 {
            return None;
        }
        let n = usize::from(self.len);
        for i in 0..n {
            let idx = (usize::from(self.cur) + i) % n;
            let (vl, w) = self.entries[idx];
            if w > 0 && eligible & (1 << vl) != 0 {
                return Some((idx as u8, i > 0 || !self.started, vl));
            }
        }
        None
    }

    /// Charges entry `idx` for a packet of `cost` credits; the entry ends when its weight is
    /// spent.
    #[inline]
    fn charge(&mut self, idx: u8, fresh: bool, cost: u32) {
        if fresh {
            self.remaining = i32::from(self.entries[usize::from(idx)].1);
        }
        self.remaining -= cost.min(1 << 24) as i32;
        if self.remaining > 0 {
            self.cur = idx;
            self.started = true;
        } else {
            self.cur = ((usize::from(idx) + 1) % usize::from(self.len)) as u8;
            self.started = false;
        }
    }

    /// Takes new entries, keeping the place (see the module doc).
    fn retune(&mut self, entries: &[VlArbEntry]) {
        let old = std::mem::replace(self, Table::new(entries));
        if self.len == 0 {
            return;
        }
        self.cur = old.cur % self.len;
        let (vl, w) = self.entries[usize::from(self.cur)];
        if old.started && old.entries[usize::from(old.cur)].0 == vl && w > 0 && old.cur == self.cur {
            self.started = true;
            self.remaining = old.remaining.min(i32::from(w));
        }
    }
}

/// The VL arbiter of one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlArb {
    high: Table,
    low: Table,
    /// `high_limit` in credits; None: unbounded.
    limit: Option<u32>,
    /// High-priority credits sent since a low-priority packet last went or last stopped
    /// waiting.
    high_sent: u32,
    /// The eligibility of the last `select`, which `select_again` is promised still holds.
    last_eligible: u8,
}

impl VlArb {
    /// A fresh arbiter over the port's `vlarb` high and low tables, nothing sent yet.
    pub fn new(c: &VlArbConfig) -> Self {
        VlArb {
            high: Table::new(&c.high),
            low: Table::new(&c.low),
            limit: limit_credits(c.high_limit),
            high_sent: 0,
            last_eligible: 0,
        }
    }

    /// A live change: see the module doc.
    pub fn retune(&mut self, c: &VlArbConfig) {
        self.high.retune(&c.high);
        self.low.retune(&c.low);
        self.limit = limit_credits(c.high_limit);
    }

    /// The decision for `eligible`, and the limit counter it implies, without changing
    /// anything.
    #[inline]
    fn decide(&self, eligible: u8) -> (Option<Pick>, u32) {
        let low_waiting = eligible & self.low.vls != 0;
        // Nothing is held back while no low-priority packet can go: the counter restarts.
        let sent = if low_waiting { self.high_sent } else { 0 };
        let held = low_waiting && self.limit.is_some_and(|l| sent > 0 && sent >= l);
        if !held {
            if let Some((idx, fresh, q)) = self.high.pick(eligible) {
                return (Some(Pick::High { idx, fresh, q }), sent);
            }
        }
        if let Some((idx, fresh, q)) = self.low.pick(eligible) {
            return (Some(Pick::Low { idx, fresh, q }), sent);
        }
        let other = eligible & !(self.high.vls | self.low.vls);
        let pick = (other != 0).then(|| Pick::Other {
            q: 7 - other.leading_zeros() as u8,
        });
        (pick, sent)
    }

    #[inline]
    fn commit(&mut self, pick: Option<Pick>, sent: u32, len: u32) {
        self.high_sent = sent;
        let cost = credits(len);
        match pick {
            Some(Pick::High { idx, fresh, .. }) => {
                self.high.charge(idx, fresh, cost);
                self.high_sent = sent.saturating_add(cost);
            }
            Some(Pick::Low { idx, fresh, .. }) => {
                self.low.charge(idx, fresh, cost);
                self.high_sent = 0;
            }
            Some(Pick::Other { .. }) | None => {}
        }
    }

    /// Picks the queue to send from next and charges its entry for the head's length.
    #[inline]
    pub fn select(&mut self, eligible: u8, head_len: impl Fn(usize) -> u32) -> Option<usize> {
        self.last_eligible = eligible;
        let (pick, sent) = self.decide(eligible);
        let q = pick.map(Pick::queue);
        self.commit(pick, sent, q.map_or(0, head_len));
        q
    }

    /// Whether `select` would pick `q` again with the same eligible queues (the caller's
    /// promise); charges it when so. The decision does not depend on head lengths, so this is
    /// the full decision on the remembered mask.
    #[inline]
    pub fn select_again(&mut self, q: usize, head_len: u32) -> bool {
        let (pick, sent) = self.decide(self.last_eligible);
        if pick.map(Pick::queue) != Some(q & (NUM_TC - 1)) {
            return false;
        }
        self.commit(pick, sent, head_len);
        true
    }
}

/// `high_limit` (units of 4 KiB) in credits.
fn limit_credits(high_limit: u8) -> Option<u32> {
    (high_limit != VLARB_UNBOUNDED).then_some(u32::from(high_limit) * (VLARB_LIMIT_BYTES / VLARB_WEIGHT_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(high: &[(u8, u8)], low: &[(u8, u8)], high_limit: u8) -> VlArbConfig {
        let t = |v: &[(u8, u8)]| v.iter().map(|&(vl, weight)| VlArbEntry { vl, weight }).collect();
        VlArbConfig {
            high: t(high),
            low: t(low),
            high_limit,
        }
    }

    /// The queues picked in `n` selections with `eligible` fixed and every head `len` bytes.
    fn run(a: &mut VlArb, eligible: u8, len: u32, n: usize) -> Vec<usize> {
        (0..n).map(|_| a.select(eligible, |_| len).unwrap()).collect()
    }

    #[test]
    fn an_entry_sends_its_weight_in_whole_packets_and_may_overdraw() {
        // Weight 16 = 1024 B: four 256 B packets; with 300 B packets (5 credits each), four
        // (the last one overdraws by 4 credits), and the overdraw is not carried into the next
        // turn.
        let mut a = VlArb::new(&cfg(&[], &[(1, 16), (2, 16)], 0));
        assert_eq!(run(&mut a, 0b110, 256, 8), [1, 1, 1, 1, 2, 2, 2, 2]);
        let mut a = VlArb::new(&cfg(&[], &[(1, 16), (2, 16)], 0));
        assert_eq!(run(&mut a, 0b110, 300, 12), [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1]);
        // A packet costs whole credits: 65 B is 2, so weight 4 (256 B) is two of them, not 3.
        let mut a = VlArb::new(&cfg(&[], &[(1, 4), (2, 4)], 0));
        assert_eq!(run(&mut a, 0b110, 65, 4), [1, 1, 2, 2]);
        // A packet larger than the whole weight still goes, one per turn.
        let mut a = VlArb::new(&cfg(&[], &[(1, 1), (2, 2)], 0));
        assert_eq!(run(&mut a, 0b110, 1500, 4), [1, 2, 1, 2]);
    }

    #[test]
    fn weight_zero_entries_and_ineligible_vls_are_skipped() {
        let mut a = VlArb::new(&cfg(&[], &[(1, 0), (2, 1), (3, 1)], 0));
        assert_eq!(run(&mut a, 0b1110, 64, 4), [2, 3, 2, 3]);
        // VL 3 not eligible: its entry is passed over, VL 2 gets every turn.
        assert_eq!(run(&mut a, 0b0110, 64, 3), [2, 2, 2]);
        // A queue whose only entry has weight 0 is in neither table: served last.
        assert_eq!(a.select(0b0010, |_| 64), Some(1));
    }

    #[test]
    fn a_skipped_entry_forfeits_its_turn_and_each_table_keeps_its_place() {
        // Low table: VL1 weight 4 (256 B), VL2 weight 4. VL1 sends one of its four 64 B
        // packets, then stops being eligible: the turn passes to VL2 and VL1's turn is lost.
        let mut a = VlArb::new(&cfg(&[(0, 255)], &[(1, 4), (2, 4)], 255));
        assert_eq!(a.select(0b110, |_| 64), Some(1));
        assert_eq!(run(&mut a, 0b100, 64, 2), [2, 2]);
        // High traffic in between changes nothing of the low table's place: VL2 still has two
        // packets of its turn left, then VL1 starts a fresh turn.
        assert_eq!(run(&mut a, 0b001, 64, 10), [0; 10]);
        assert_eq!(run(&mut a, 0b110, 64, 6), [2, 2, 1, 1, 1, 1]);
    }

    #[test]
    fn the_high_table_goes_first_until_the_limit_then_one_low_packet() {
        // Limit 1 = 4096 B: four 1024 B high packets, then one low packet, again and again.
        let mut a = VlArb::new(&cfg(&[(0, 255)], &[(1, 255)], 1));
        assert_eq!(run(&mut a, 0b11, 1024, 10), [0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
        // 1500 B packets (24 credits): the third crosses 64 credits and still goes whole.
        let mut a = VlArb::new(&cfg(&[(0, 255)], &[(1, 255)], 1));
        assert_eq!(run(&mut a, 0b11, 1500, 8), [0, 0, 0, 1, 0, 0, 0, 1]);
        // 0: one high packet at a time.
        let mut a = VlArb::new(&cfg(&[(0, 1)], &[(1, 1)], 0));
        assert_eq!(run(&mut a, 0b11, 9000, 6), [0, 1, 0, 1, 0, 1]);
        // 255: unbounded, the low table only when no high VL can send.
        let mut a = VlArb::new(&cfg(&[(0, 1)], &[(1, 1)], 255));
        assert_eq!(run(&mut a, 0b11, 64, 100), [0; 100]);
        assert_eq!(a.select(0b10, |_| 64), Some(1));
    }

    #[test]
    fn the_limit_counter_restarts_when_no_low_packet_waits() {
        let mut a = VlArb::new(&cfg(&[(0, 255)], &[(1, 255)], 1));
        // Three 1024 B high packets while low is idle count nothing that holds low back...
        assert_eq!(run(&mut a, 0b01, 1024, 3), [0, 0, 0]);
        // ...except the last, sent just before the low packet arrived (the counter is reset
        // when no low packet waits at a decision, then counts the packet decided).
        assert_eq!(run(&mut a, 0b11, 1024, 5), [0, 0, 0, 1, 0]);
    }

    #[test]
    fn the_low_table_is_served_when_no_high_vl_can_send() {
        let mut a = VlArb::new(&cfg(&[(0, 255), (6, 255)], &[(1, 64), (2, 64)], 255));
        assert_eq!(a.select(0b0000_0110, |_| 1024), Some(1));
        assert_eq!(a.select(0b0100_0110, |_| 1024), Some(6));
        assert_eq!(a.select(0, |_| 1024), None);
    }

    #[test]
    fn a_live_change_keeps_the_place() {
        let mut a = VlArb::new(&cfg(&[], &[(1, 16), (2, 16)], 0));
        assert_eq!(run(&mut a, 0b110, 256, 2), [1, 1]);
        // Same VL at the current entry: the turn goes on with what it had left (512 B), clamped
        // to the new weight (8 = 512 B): two more packets.
        a.retune(&cfg(&[], &[(1, 8), (2, 16)], 0));
        assert_eq!(run(&mut a, 0b110, 256, 4), [1, 1, 2, 2]);
        // A different VL at the current entry: it starts afresh there.
        let mut b = VlArb::new(&cfg(&[], &[(1, 16), (2, 16)], 0));
        assert_eq!(run(&mut b, 0b110, 256, 2), [1, 1]);
        b.retune(&cfg(&[], &[(2, 4), (1, 16)], 0));
        assert_eq!(run(&mut b, 0b110, 256, 2), [2, 1]);
    }
}

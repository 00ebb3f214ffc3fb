//! The forwarding database: static entries from config plus MAC learning with aging.
//!
//! Open addressing with linear probing over a table allocated once: learning on the packet path
//! never allocates, and iteration order (and so every replay) is deterministic, which a
//! `HashMap` with a random hasher would not be. Aging is lazy: an entry older than the aging
//! time reads as absent and its slot is reused by the next insert on its probe path.
//!
//! The table holds at most `capacity` entries, and learning is bounded per port, as switches
//! bound it: each port may hold `port_limit` learnt entries and learn `learn_rate` new ones a
//! second. Without them a host sending from random source addresses filled the table, the real
//! hosts were never learnt, and everything to them flooded (issue 21, item 3). Entries are
//! counted from when they are written until a lazy aging is noticed: by an insert that reuses
//! the slot, or by a sweep of a few slots that a learn at a limit runs first (so a limit never
//! refuses on behalf of entries that have aged out, and the sweep's cost is paid only at the
//! learning rate).

use controlplane::FdbConfig;

const MAX_PROBE: usize = 32;
/// Never a MAC key (keys are 48-bit): marks an empty one-entry cache.
const NO_KEY: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    mac: u64,
    port: u16,
    used: bool,
    is_static: bool,
    /// Counted in the table's size (and, learnt, in its port's): from when it is written until
    /// its aging is noticed.
    counted: bool,
    last_seen: u64,
}

/// Slots a learn at a limit looks through for aged entries before refusing.
const SWEEP_SLOTS: usize = 256;

/// Where an entry comes from: what limits it is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Configured: never ages, never refused for a limit (validation fits them in capacity).
    Static,
    /// Learnt from a frame on one of this shard's ports: every limit.
    Learnt,
    /// Learnt by another shard, which held it to the port's limits: capacity only.
    Installed,
}

/// Per port, its learning: entries it holds, and its rate limiter (GCRA: the time at which
/// its bucket would be empty again).
#[derive(Debug, Clone, Copy, Default)]
struct PortLearning {
    learnt: u32,
    tat: u64,
    /// Sharded runs: announcements of this port's stations that did not reach another shard
    /// ([`Fdb::count_unannounced`]).
    unannounced: u64,
    /// Sharded runs: announcements of this port's stations that went to another shard a
    /// round or more late ([`Fdb::count_late`]).
    late: u64,
}

/// What [`Fdb::learn`] did with a source address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learn {
    /// Not known before: written.
    New,
    /// Known on this port: its age starts again.
    Refreshed,
    /// Known on another port: it now points here.
    Moved,
    /// A static entry names another port for this MAC; learning does not override it.
    StaticConflict,
    /// The table holds `capacity` entries.
    Full,
    /// The port holds `port_limit` learnt entries.
    PortLimit,
    /// The port learnt `learn_rate` new addresses in the last second.
    RateLimited,
    /// Learning is off (`[fdb] learning = false`): nothing changes.
    Disabled,
}

impl Learn {
    /// Whether learning refused the address (a limit).
    #[inline(always)]
    pub fn refused(self) -> bool {
        matches!(self, Learn::Full | Learn::PortLimit | Learn::RateLimited)
    }
}

/// The forwarding table of one switch (or one shard's replica): MAC → port id, with aging and
/// learning limits.
#[derive(Debug)]
pub struct Fdb {
    slots: Box<[Entry]>,
    mask: usize,
    aging_ns: u64,
    learning: bool,
    /// The last refresh and the last lookup, each valid for its `now` only and until the table
    /// next changes. The frames of a burst share `now` and mostly their MACs, so most frames
    /// skip hashing and probing (VPP's l2-learn and l2-fwd keep the same one-entry cache).
    recent_learn: (u64, u16, u64),
    recent_lookup: (u64, u64, Option<u16>),
    /// Sharded runs: what this shard learnt that the other shards' replicas must hear
    /// (`crate::shard`), taken once a round. A station is announced when learnt or moved, and
    /// again each quarter of the aging time while it is seen, so the replicas never age out
    /// an entry that is still in use here. Bounded: beyond it a learn waits for its refresh.
    announcements: Vec<(u64, u16, u64)>,
    announce: bool,
    /// Per slot, when this shard last told the others about its entry (sharded runs only:
    /// empty otherwise, kept apart so a lone switch's entries stay as small as they were).
    announced: Box<[u64]>,
    capacity: usize,
    /// Entries counted (see the module doc).
    entries: usize,
    port_limit: u32,
    /// Nanoseconds of the learning rate's bucket one new address takes, and the bucket (1 s).
    learn_cost_ns: u64,
    /// Port id → index into `ports` (u16::MAX: not a port of the config).
    index_of_id: Box<[u16]>,
    ports: Box<[PortLearning]>,
    /// Where the next sweep starts.
    sweep_at: usize,
}

const BUCKET_NS: u64 = 1_000_000_000;

/// Learns a shard may have waiting between two rounds.
const ANNOUNCE_BACKLOG: usize = 4096;

/// An FDB row for reports: the control protocol's type, so the switch and `rocectl` cannot
/// disagree on it.
pub use controlplane::protocol::FdbRow;

/// A MAC as the table keys it: the 48 bits in the low end of a `u64`.
#[inline]
pub fn mac_key(mac: &[u8; 6]) -> u64 {
    let mut b = [0u8; 8];
    b[2..].copy_from_slice(mac);
    u64::from_be_bytes(b)
}

/// The destination and source MACs of an Ethernet frame (at least 14 bytes) as [`mac_key`]s,
/// each from one 8-byte load. Copying them out as `[u8; 6]` first made the compiler store them
/// to the stack piecewise and read them back wider, a store-forwarding stall per MAC per frame
/// (about a fifth of the receive path's time on DPDK ports).
#[inline(always)]
pub fn frame_mac_keys(frame: &[u8]) -> Option<(u64, u64)> {
    let dst: [u8; 8] = frame.get(0..8)?.try_into().ok()?;
    let src: [u8; 8] = frame.get(6..14)?.try_into().ok()?;
    Some((u64::from_be_bytes(dst) >> 16, u64::from_be_bytes(src) >> 16))
}

/// Whether a [`mac_key`] is a group (multicast or broadcast) address: the I/G bit.
#[inline(always)]
pub fn is_group_key(key: u64) -> bool {
    key & (1 << 40) != 0
}

#[inline]
fn hash(key: u64) -> usize {
    // Fibonacci hashing: cheap and spreads the low-entropy MAC prefixes.
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20) as usize
}

impl Fdb {
    /// A table for the ports `port_ids` (the config's, in order).
    pub fn new(cfg: &FdbConfig, port_ids: &[u16]) -> Self {
        let size = (cfg.capacity.max(16) * 2).next_power_of_two();
        let max_id = port_ids.iter().copied().max().unwrap_or(0) as usize;
        let mut index_of_id = vec![u16::MAX; max_id + 1].into_boxed_slice();
        for (i, &id) in port_ids.iter().enumerate() {
            index_of_id[id as usize] = i as u16;
        }
        let mut fdb = Fdb {
            slots: vec![Entry::default(); size].into_boxed_slice(),
            mask: size - 1,
            aging_ns: cfg.aging_ns.max(1),
            learning: cfg.learning,
            recent_learn: (NO_KEY, 0, 0),
            recent_lookup: (NO_KEY, 0, None),
            announcements: Vec::new(),
            announce: false,
            announced: Box::new([]),
            capacity: 0,
            entries: 0,
            port_limit: 0,
            learn_cost_ns: 0,
            index_of_id,
            ports: vec![PortLearning::default(); port_ids.len()].into_boxed_slice(),
            sweep_at: 0,
        };
        fdb.reconfigure(cfg);
        fdb
    }

    /// Takes a new config's learning, aging, limits and static entries; learnt entries are
    /// kept (beyond a smaller limit, until they age out: nothing new is learnt meanwhile).
    pub fn reconfigure(&mut self, cfg: &FdbConfig) {
        self.forget_recent();
        self.learning = cfg.learning;
        self.aging_ns = cfg.aging_ns.max(1);
        self.capacity = cfg.capacity;
        self.port_limit = u32::try_from(cfg.port_limit).unwrap_or(u32::MAX);
        self.learn_cost_ns = BUCKET_NS / cfg.learn_rate.clamp(1, BUCKET_NS);
        for s in &cfg.static_entries {
            self.insert(mac_key(&s.mac), s.port, 0, Origin::Static);
        }
    }

    /// Entries the table counts (live ones, and aged ones not yet noticed).
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether no entry is counted.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    #[inline]
    fn live(&self, e: &Entry, now: u64) -> bool {
        e.used && (e.is_static || now.saturating_sub(e.last_seen) < self.aging_ns)
    }

    /// The port a unicast MAC was learnt or configured on.
    #[inline]
    pub fn lookup(&self, mac: &[u8; 6], now: u64) -> Option<u16> {
        self.lookup_key(mac_key(mac), now)
    }

    fn lookup_key(&self, key: u64, now: u64) -> Option<u16> {
        let mut i = hash(key) & self.mask;
        for _ in 0..MAX_PROBE {
            let e = &self.slots[i];
            if !e.used {
                return None;
            }
            if e.mac == key {
                return self.live(e, now).then_some(e.port);
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// [`Fdb::lookup`] through the one-entry cache: the same answer, for the pipeline.
    #[inline]
    pub fn lookup_recent(&mut self, mac: &[u8; 6], now: u64) -> Option<u16> {
        self.lookup_recent_key(mac_key(mac), now)
    }

    /// [`Fdb::lookup_recent`] by [`mac_key`].
    #[inline]
    pub fn lookup_recent_key(&mut self, key: u64, now: u64) -> Option<u16> {
        let (k, t, port) = self.recent_lookup;
        if k == key && t == now {
            return port;
        }
        let port = self.lookup_key(key, now);
        self.recent_lookup = (key, now, port);
        port
    }

    /// Learns a source MAC on a port.
    #[inline]
    pub fn learn(&mut self, mac: &[u8; 6], port: u16, now: u64) -> Learn {
        self.learn_key(mac_key(mac), port, now)
    }

    /// [`Fdb::learn`] by [`mac_key`]. Always inlined into the receive path (its one caller
    /// per frame): left to the compiler it went out of line after unrelated changes, a call
    /// a frame that cost about 25 instructions on the DPDK path (bench/README.md, issue 40);
    /// what is not a refresh is [`Fdb::learn_new`], out of line.
    #[inline(always)]
    pub fn learn_key(&mut self, key: u64, port: u16, now: u64) -> Learn {
        if !self.learning {
            return Learn::Disabled;
        }
        // Refreshed at this very `now` and nothing changed since: refreshing again is a no-op.
        if self.recent_learn == (key, port, now) {
            return Learn::Refreshed;
        }
        // Fast path: a known station seen again on the same port (nearly every frame).
        let i = hash(key) & self.mask;
        let e = &mut self.slots[i];
        if e.used && e.mac == key && e.port == port && !e.is_static && now.saturating_sub(e.last_seen) < self.aging_ns {
            e.last_seen = now;
            self.recent_learn = (key, port, now);
            if self.announce {
                self.refresh_announcement(i, key, port, now);
            }
            return Learn::Refreshed;
        }
        self.learn_new(key, port, now)
    }

    /// [`Fdb::learn_key`] for a station not refreshed in place: a new one, one that moved,
    /// one that aged out.
    #[inline(never)]
    fn learn_new(&mut self, key: u64, port: u16, now: u64) -> Learn {
        let learnt = self.insert(key, port, now, Origin::Learnt);
        if self.announce && matches!(learnt, Learn::New | Learn::Moved) {
            self.queue_announcement(key, port, now);
        }
        learnt
    }

    /// Turns on announcements for the other shards (a sharded run).
    pub fn announce_to_shards(&mut self) {
        self.announce = true;
        self.announcements = Vec::with_capacity(ANNOUNCE_BACKLOG);
        self.announced = vec![0; self.slots.len()].into_boxed_slice();
    }

    /// A station seen again in slot `i`: announced again once a quarter of the aging time has
    /// passed since the last time.
    #[cold]
    fn refresh_announcement(&mut self, i: usize, key: u64, port: u16, now: u64) {
        if now.saturating_sub(self.announced[i]) >= self.aging_ns / 4 {
            self.announced[i] = now;
            self.queue_announcement(key, port, now);
        }
    }

    #[cold]
    fn queue_announcement(&mut self, key: u64, port: u16, now: u64) {
        if self.announcements.len() < ANNOUNCE_BACKLOG {
            self.announcements.push((key, port, now));
        } else {
            self.count_unannounced(port, 1);
        }
    }

    /// Announcements of a station on port id `port` that `shards` other shards will not hear
    /// (this shard's backlog, or its outbox to them, full): that shard floods the station's
    /// frames until the entry's next refresh announces it again. Counted per port, as
    /// `learn_unannounced` in reports: not a loss, but a flood a user should be able to see.
    #[cold]
    fn count_unannounced(&mut self, port: u16, shards: u64) {
        if let Some(i) = self.port_idx(port) {
            self.ports[i].unannounced += shards;
        }
    }

    /// An announcement of a station on port id `port` that could not go to another shard in
    /// the round it was made (the queue of learns to it full: that shard is behind), and waits
    /// for a later one. Counted per port, once per shard, as `learn_late` in reports: that shard
    /// floods the station's frames until the news arrives.
    #[cold]
    pub fn count_late(&mut self, port: u16) {
        if let Some(i) = self.port_idx(port) {
            self.ports[i].late += 1;
        }
    }

    /// Announcements of port index `port`'s stations that reached another shard late.
    pub fn late(&self, port: usize) -> u64 {
        self.ports.get(port).map_or(0, |p| p.late)
    }

    /// Announcements of port index `port`'s stations that did not reach another shard.
    pub fn unannounced(&self, port: usize) -> u64 {
        self.ports.get(port).map_or(0, |p| p.unannounced)
    }

    /// Hands what was learnt since the last call (MAC key, port id, when) to `send`, which
    /// answers how many shards it could not reach with it (counted: `unannounced`).
    pub fn announce(&mut self, mut send: impl FnMut(u64, u16, u64) -> u64) {
        // Taken out and put back, emptied: the same buffer every round, never reallocated.
        let mut list = std::mem::take(&mut self.announcements);
        for &(key, port, now) in &list {
            let missed = send(key, port, now);
            if missed > 0 {
                self.count_unannounced(port, missed);
            }
        }
        list.clear();
        self.announcements = list;
    }

    /// An entry another shard learnt (its port is that shard's): kept like a learnt one,
    /// refreshed by the next announcement, never announced again from here.
    pub fn install(&mut self, key: u64, port: u16, now: u64) {
        if self.learning {
            let _ = self.insert(key, port, now, Origin::Installed);
        }
    }

    /// Empties the one-entry caches: called by everything that changes the table other than a
    /// refresh (which changes no answer at the same `now`).
    fn forget_recent(&mut self) {
        self.recent_learn.0 = NO_KEY;
        self.recent_lookup.0 = NO_KEY;
    }

    fn insert(&mut self, key: u64, port: u16, now: u64, origin: Origin) -> Learn {
        self.forget_recent();
        let is_static = origin == Origin::Static;
        let mut i = hash(key) & self.mask;
        let mut reusable = None;
        let mut found = None;
        for _ in 0..MAX_PROBE {
            let e = &self.slots[i];
            if e.used && e.mac == key {
                found = Some(i);
                break;
            }
            if !e.used {
                reusable = reusable.or(Some(i));
                break;
            }
            if !self.live(e, now) && reusable.is_none() {
                reusable = Some(i);
            }
            i = (i + 1) & self.mask;
        }
        if let Some(i) = found {
            let e = self.slots[i];
            if e.is_static && !is_static {
                return if e.port == port {
                    Learn::Refreshed
                } else {
                    Learn::StaticConflict
                };
            }
            let was_live = self.live(&e, now);
            let moved = e.port != port;
            if !was_live {
                self.uncount(i);
            }
            if moved || !was_live {
                // New here, or on another port: held to the limits (the move keeps its place
                // in the table, so only the port's).
                if let Err(refused) = self.admit(port, now, origin, !was_live) {
                    return refused;
                }
            }
            self.uncount(i);
            self.write(i, key, port, now, is_static);
            return match (was_live, moved) {
                (true, true) => Learn::Moved,
                (true, false) => Learn::Refreshed,
                (false, _) => Learn::New,
            };
        }
        let Some(slot) = reusable else {
            return Learn::Full;
        };
        // An aged entry in the slot: no longer counted, whatever comes next.
        self.uncount(slot);
        if let Err(refused) = self.admit(port, now, origin, true) {
            return refused;
        }
        self.write(slot, key, port, now, is_static);
        Learn::New
    }

    /// Whether `port` may learn an address now (`new_entry`: one more entry in the table),
    /// taking one from its learning rate when it may. A limit reached first sweeps for aged
    /// entries, which may make room.
    fn admit(&mut self, port: u16, now: u64, origin: Origin, new_entry: bool) -> Result<(), Learn> {
        if origin == Origin::Static {
            return Ok(());
        }
        let idx = self.port_idx(port);
        // GCRA: refuse while the bucket is a second ahead of now. The token is taken last,
        // once the capacity and the port's limit let the address in: a refused address takes
        // nothing, so a steady stream gets `learn_rate` through every second, and a flood a
        // limit refuses leaves the port its rate for when room is made.
        let mut tat = None;
        if origin == Origin::Learnt {
            if let Some(p) = idx.map(|x| &self.ports[x]) {
                let t = p.tat.max(now);
                if t - now > BUCKET_NS - self.learn_cost_ns {
                    return Err(Learn::RateLimited);
                }
                tat = Some(t);
            }
        }
        if new_entry && self.entries >= self.capacity {
            self.sweep(now);
            if self.entries >= self.capacity {
                return Err(Learn::Full);
            }
        }
        if origin == Origin::Learnt {
            if let Some(x) = idx {
                if self.ports[x].learnt >= self.port_limit {
                    self.sweep(now);
                    if self.ports[x].learnt >= self.port_limit {
                        return Err(Learn::PortLimit);
                    }
                }
            }
        }
        if let (Some(t), Some(x)) = (tat, idx) {
            self.ports[x].tat = t + self.learn_cost_ns;
        }
        Ok(())
    }

    #[inline]
    fn port_idx(&self, port: u16) -> Option<usize> {
        match self.index_of_id.get(port as usize) {
            Some(&i) if i != u16::MAX => Some(i as usize),
            _ => None,
        }
    }

    /// Writes slot `i` and counts it.
    fn write(&mut self, i: usize, key: u64, port: u16, now: u64, is_static: bool) {
        self.slots[i] = Entry {
            mac: key,
            port,
            used: true,
            is_static,
            counted: true,
            last_seen: now,
        };
        self.entries += 1;
        if !is_static {
            if let Some(x) = self.port_idx(port) {
                self.ports[x].learnt += 1;
            }
        }
        if let Some(a) = self.announced.get_mut(i) {
            *a = now;
        }
    }

    /// Stops counting slot `i`'s entry (it is being replaced, or has aged out).
    fn uncount(&mut self, i: usize) {
        let e = &mut self.slots[i];
        if !e.counted {
            return;
        }
        e.counted = false;
        let (port, is_static) = (e.port, e.is_static);
        self.entries -= 1;
        if !is_static {
            if let Some(x) = self.port_idx(port) {
                self.ports[x].learnt -= 1;
            }
        }
    }

    /// Stops counting the aged entries among the next [`SWEEP_SLOTS`] slots.
    #[cold]
    fn sweep(&mut self, now: u64) {
        for _ in 0..SWEEP_SLOTS.min(self.slots.len()) {
            let i = self.sweep_at;
            self.sweep_at = (i + 1) & self.mask;
            let e = &self.slots[i];
            if e.counted && !self.live(e, now) {
                self.uncount(i);
            }
        }
    }

    /// Live entries, sorted by MAC (not for the packet path).
    pub fn rows(&self, now: u64) -> Vec<FdbRow> {
        let mut rows: Vec<FdbRow> = self
            .slots
            .iter()
            .filter(|e| self.live(e, now))
            .map(|e| {
                let b = e.mac.to_be_bytes();
                FdbRow {
                    mac: format!(
                        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                        b[2], b[3], b[4], b[5], b[6], b[7]
                    ),
                    port: e.port,
                    is_static: e.is_static,
                    age_ns: if e.is_static { 0 } else { now - e.last_seen },
                }
            })
            .collect();
        rows.sort_by(|a, b| a.mac.cmp(&b.mac));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use controlplane::StaticMac;

    /// The keys read from a frame in one load each are the FDB's keys of its MACs, the group
    /// bit is the first byte's low bit, and the link-local test on a key is the one on bytes.
    #[test]
    fn frame_mac_keys_are_the_macs_keys() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..4096u32 {
            let mut f = [0u8; 14];
            for b in f.iter_mut() {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *b = (seed >> 56) as u8;
            }
            if i % 4 == 0 {
                // Around the link-local group: 01:80:c2:00:00:xx and its neighbours.
                f[..5].copy_from_slice(&[0x01, 0x80, 0xc2, 0x00, (i / 4 % 3) as u8]);
                f[5] = (i / 12) as u8;
            }
            let (dst, src) = frame_mac_keys(&f).unwrap();
            let (d, s): ([u8; 6], [u8; 6]) = (f[..6].try_into().unwrap(), f[6..12].try_into().unwrap());
            assert_eq!((dst, src), (mac_key(&d), mac_key(&s)));
            assert_eq!(is_group_key(dst), d[0] & 1 == 1);
            assert_eq!(is_group_key(src), s[0] & 1 == 1);
            let bytes_rule = d[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && d[5] <= 0x0f;
            assert_eq!(crate::wire::parse::is_link_local_key(dst), bytes_rule, "{d:02x?}");
        }
        assert_eq!(frame_mac_keys(&[0u8; 13]), None, "shorter than an Ethernet header");
    }

    const PORTS: [u16; 4] = [0, 1, 2, 3];

    /// A sharded run's announcements: what did not fit in the backlog, and what the other
    /// shards could not take, is counted on the station's port, once per shard missed; the
    /// backlog is empty after a round.
    #[test]
    fn announcements_that_miss_a_shard_are_counted_on_their_port() {
        let mut f = Fdb::new(&cfg(2 * ANNOUNCE_BACKLOG), &PORTS);
        f.announce_to_shards();
        let beyond = 10u64;
        for i in 0..ANNOUNCE_BACKLOG as u64 + beyond {
            assert_eq!(f.learn_key(0x02aa_0000_0000 + i, 1, 1), Learn::New);
        }
        assert_eq!(f.unannounced(1), beyond, "the backlog's overflow");
        // Two other shards; one takes every third announcement only.
        let mut heard = 0u64;
        f.announce(|_, port, _| {
            assert_eq!(port, 1);
            heard += 1;
            if heard.is_multiple_of(3) {
                1
            } else {
                2
            }
        });
        let n = ANNOUNCE_BACKLOG as u64;
        assert_eq!(heard, n);
        assert_eq!(f.unannounced(1), beyond + 2 * n - n / 3);
        assert_eq!(f.unannounced(0), 0);
        f.announce(|_, _, _| panic!("announced twice"));
    }

    fn cfg(capacity: usize) -> FdbConfig {
        FdbConfig {
            learning: true,
            aging_ns: 1_000,
            capacity,
            port_limit: capacity,
            learn_rate: 1_000_000_000,
            static_entries: vec![StaticMac {
                mac: [2, 0, 0, 0, 0, 9],
                port: 3,
            }],
        }
    }

    #[test]
    fn learns_ages_and_moves() {
        let mut f = Fdb::new(&cfg(64), &PORTS);
        let m = [2, 0, 0, 0, 0, 1];
        assert_eq!(f.lookup(&m, 0), None);
        assert_eq!(f.learn(&m, 1, 10), Learn::New);
        assert_eq!(f.lookup(&m, 500), Some(1));
        assert_eq!(f.learn(&m, 2, 600), Learn::Moved);
        assert_eq!(f.lookup(&m, 1_500), Some(2));
        assert_eq!(f.lookup(&m, 1_600), None, "aged out");
        assert_eq!(f.learn(&m, 2, 2_000), Learn::New);
    }

    #[test]
    fn static_entries_never_age_and_are_not_overridden() {
        let mut f = Fdb::new(&cfg(64), &PORTS);
        let m = [2, 0, 0, 0, 0, 9];
        assert_eq!(f.lookup(&m, u64::MAX / 2), Some(3));
        assert_eq!(f.learn(&m, 1, 5), Learn::StaticConflict);
        assert_eq!(f.lookup(&m, 5), Some(3));
    }

    #[test]
    fn full_table_refuses_instead_of_growing() {
        let mut f = Fdb::new(&cfg(16), &PORTS);
        let mut full = 0;
        for i in 0..10_000u32 {
            let b = i.to_be_bytes();
            if f.learn(&[2, 0, b[0], b[1], b[2], b[3]], 0, 0) == Learn::Full {
                full += 1;
            }
        }
        assert!(full > 0);
        assert_eq!(f.rows(0).len(), 16, "exactly the capacity, the static entry included");
        assert_eq!(f.len(), 16);
    }

    fn mac(i: u32) -> [u8; 6] {
        let b = i.to_be_bytes();
        [2, 1, b[0], b[1], b[2], b[3]]
    }

    /// A port sending from ever new addresses fills its share, not the table: the other
    /// ports still learn their hosts (issue 21, item 3).
    #[test]
    fn a_port_holds_its_limit_and_the_others_still_learn() {
        let mut c = cfg(80);
        c.port_limit = 16;
        let mut f = Fdb::new(&c, &PORTS);
        let refused = (0..10_000).filter(|&i| f.learn(&mac(i), 0, 10).refused()).count();
        assert_eq!(refused, 10_000 - 16);
        assert_eq!(f.learn(&mac(1 << 20), 0, 10), Learn::PortLimit);
        for p in 1..4u16 {
            for h in 0..16 {
                assert_eq!(
                    f.learn(&mac(p as u32 * 100_000 + h), p, 10),
                    Learn::New,
                    "port {p} host {h}"
                );
            }
        }
        assert_eq!(f.len(), 1 + 4 * 16);
        // Once the attacker's entries age out, its port learns again (a sweep finds them).
        assert_eq!(f.learn(&mac(1 << 21), 0, 2_000), Learn::New);
    }

    #[test]
    fn the_capacity_holds_across_ports_and_aged_entries_make_room() {
        let mut f = Fdb::new(&cfg(32), &PORTS);
        let mut learnt = 0;
        for i in 0..1000 {
            learnt += (f.learn(&mac(i), (i % 4) as u16, 10) == Learn::New) as usize;
        }
        assert_eq!(learnt, 31, "the static entry takes one place");
        assert_eq!(f.len(), 32);
        assert_eq!(f.learn(&mac(5000), 1, 10), Learn::Full);
        // All learnt entries aged out by 1_010: the next learns take their places.
        for i in 0..31 {
            assert_eq!(f.learn(&mac(10_000 + i), 2, 5_000), Learn::New, "{i}");
        }
        assert_eq!(f.len(), 32);
        assert_eq!(f.rows(5_000).len(), 32);
    }

    #[test]
    fn a_port_learns_at_its_rate_and_refreshes_are_free() {
        let mut c = cfg(4096);
        c.learn_rate = 100;
        let mut f = Fdb::new(&c, &PORTS);
        c.aging_ns = u64::MAX;
        f.reconfigure(&c);
        let second = 1_000_000_000u64;
        let t0 = 5 * second;
        let new = |f: &mut Fdb, from: u32, n: u32, now: u64| {
            (from..from + n)
                .filter(|&i| f.learn(&mac(i), 1, now) == Learn::New)
                .count()
        };
        assert_eq!(new(&mut f, 0, 1000, t0), 100, "a burst of one second's worth");
        assert_eq!(f.learn(&mac(0), 1, t0), Learn::Refreshed, "known hosts refresh");
        assert_eq!(f.learn(&mac(5), 2, t0), Learn::Moved, "another port's rate");
        assert_eq!(new(&mut f, 1000, 1000, t0 + second / 10), 10, "then 100 a second");
        assert_eq!(new(&mut f, 2000, 1000, t0 + 3 * second), 100, "a full bucket, no more");
    }

    /// Issue 41 item 11: `admit` took the rate's token before the capacity and port-limit
    /// checks, so every address a limit refused used up rate (the comment said it took
    /// nothing): a flood against a full table or a port at its limit left the port no rate
    /// for when room was made. Both limits, at one instant so that no token comes back.
    #[test]
    fn an_address_refused_for_a_limit_takes_nothing_from_the_rate() {
        let t0 = 5_000_000_000u64;
        let learn = |f: &mut Fdb, from: u32, n: u32, now: u64| -> Vec<Learn> {
            (from..from + n).map(|i| f.learn(&mac(i), 1, now)).collect()
        };
        let count = |v: &[Learn], l: Learn| v.iter().filter(|&&x| x == l).count();
        // The port's limit: 16 of a rate of 100 a second, then a flood the limit refuses.
        let mut c = cfg(4096);
        (c.learn_rate, c.port_limit, c.aging_ns) = (100, 16, u64::MAX);
        let mut f = Fdb::new(&c, &PORTS);
        assert_eq!(count(&learn(&mut f, 0, 16, t0), Learn::New), 16);
        let flood = learn(&mut f, 100, 1000, t0);
        assert_eq!(
            count(&flood, Learn::PortLimit),
            1000,
            "refused for the limit, not the rate"
        );
        c.port_limit = 4096;
        f.reconfigure(&c);
        let after = learn(&mut f, 2000, 1000, t0);
        assert_eq!(count(&after, Learn::New), 84, "the rest of the second's 100");
        // The table's capacity: 16 places (the static entry takes one), full, then aged.
        let mut c = cfg(17);
        c.learn_rate = 100;
        let mut f = Fdb::new(&c, &PORTS);
        assert_eq!(count(&learn(&mut f, 0, 16, t0), Learn::New), 16);
        assert_eq!(count(&learn(&mut f, 100, 1000, t0), Learn::Full), 1000);
        // 2 µs on, the 16 aged out (aging 1 µs) and the rate has refilled by nothing.
        let after = learn(&mut f, 2000, 1000, t0 + 2_000);
        assert_eq!(count(&after, Learn::New), 16, "{:?}", &after[..20]);
    }

    /// The one-entry caches change no answer: an FDB whose caches are emptied before every
    /// call (so they never hit) gives the same results and ends in the same table, along random
    /// runs of learns, moves, lookups, static entries and aging over a few MACs and ports.
    mod recent {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Op {
            Learn(u8, u16),
            Lookup(u8),
            Reconfigure(bool),
            /// Time passes (ns); 0 keeps `now`, as within a burst.
            Advance(u64),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => (5u8..10, 0u16..4).prop_map(|(m, p)| Op::Learn(m, p)),
                4 => (4u8..11).prop_map(Op::Lookup),
                1 => any::<bool>().prop_map(Op::Reconfigure),
                3 => prop_oneof![Just(0u64), 1u64..400, 900u64..1200].prop_map(Op::Advance),
            ]
        }

        proptest! {
            #[test]
            fn caching_changes_no_answer(ops in proptest::collection::vec(op(), 1..300)) {
                let mut c = cfg(16);
                let mut cached = Fdb::new(&c, &PORTS);
                let mut plain = Fdb::new(&c, &PORTS);
                let mut now = 1u64;
                let mac = |m: u8| [2, 0, 0, 0, 0, m];
                for op in ops {
                    plain.forget_recent();
                    match op {
                        Op::Learn(m, port) => {
                            prop_assert_eq!(cached.learn(&mac(m), port, now), plain.learn(&mac(m), port, now));
                        }
                        Op::Lookup(m) => {
                            prop_assert_eq!(cached.lookup_recent(&mac(m), now), plain.lookup(&mac(m), now));
                        }
                        Op::Reconfigure(learning) => {
                            c.learning = learning;
                            cached.reconfigure(&c);
                            plain.reconfigure(&c);
                        }
                        Op::Advance(ns) => now += ns,
                    }
                }
                prop_assert_eq!(format!("{:?}", cached.rows(now)), format!("{:?}", plain.rows(now)));
            }
        }
    }
}

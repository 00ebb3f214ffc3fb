//! The validated, resolved configuration: what the dataplane runs on.
//!
//! The TOML schema (`schema.rs`) is what people write; this is what it means once every unit is
//! converted, every default filled in and every cross-field rule checked. Sizes are bytes, times
//! nanoseconds, rates bits per second. The dataplane never sees the TOML, so a later control
//! plane can build a `Config` from a patch just as well as from a file.

/// Traffic classes, priorities, queues and priority groups per port: 802.1Q has eight.
pub const NUM_TC: usize = 8;

/// A whole switch configuration, validated: built by `load_str`/`load_file` (or a patch) and
/// handed to the dataplane, which never sees the TOML.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The packet buffer shared by every port (`[buffer]`).
    pub buffer: BufferConfig,
    /// The ports in file order; the dataplane indexes them by position, not by `id`.
    pub ports: Vec<PortConfig>,
    /// How a frame gets its traffic class, queue and PG (`[classify]`).
    pub classify: ClassifyConfig,
    /// Where CNPs go and how they are policed (`[cnp]`).
    pub cnp: CnpConfig,
    /// Per priority-group profile, indexed by PG (0..8): the global `[pg.N]` tables. Each
    /// port's own copy (`PortConfig::pgs`, with its overrides) is what the switch runs; change
    /// those when editing a config by hand.
    pub pgs: [PgProfile; NUM_TC],
    /// Per egress-queue profile, indexed by queue (0..8): the global `[queue.N]` tables; see
    /// `pgs` and `PortConfig::queues`.
    pub queues: [QueueProfile; NUM_TC],
    /// Which priorities are lossless and how the switch sends and watches pauses (`[pfc]`).
    pub pfc: PfcConfig,
    /// The MAC table's learning, aging and static entries (`[fdb]`).
    pub fdb: FdbConfig,
    /// How `rocesw run` drives the ports (ignored by replay).
    pub run: RunConfig,
}

/// `[buffer]`, resolved: the one packet buffer every port's PGs and queues draw from.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferConfig {
    /// Accounting unit: a frame occupies ceil(len / cell_bytes) cells.
    pub cell_bytes: u32,
    /// Total packet buffer. Guaranteed minimums and headroom are carved out of it; the rest is
    /// the shared pool that dynamic thresholds are computed against (unless `pools` says
    /// otherwise).
    pub total_bytes: u64,
    /// The shared pools as configured (`[buffer.pool.NAME]`, SONiC's BUFFER_POOL), ingress ones
    /// first, each direction in name order: a PG's `pool` indexes the ingress ones, a queue's
    /// the egress ones. Empty: one pool per direction, what the reserves leave of the buffer.
    pub pools: Vec<PoolConfig>,
    /// Slices of the MMU (Broadcom's XPEs/ITMs; 1 elsewhere): each pool's size is split evenly
    /// among them, and a port's PGs and queues are accounted in its slice
    /// (`PortConfig::slice`), against that slice's share of the pool only.
    pub slices: u8,
}

/// Pools per direction at most: SONiC configures one or two (lossless, lossy).
pub const MAX_POOLS: usize = 4;

/// Slices of the MMU at most (Tomahawk 2 has four XPEs).
pub const MAX_SLICES: usize = 4;

/// Which side's accounting a pool holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolDir {
    /// PGs' shared use (ingress accounting, where PFC is decided).
    Ingress,
    /// Queues' shared use (egress accounting, where lossy frames drop).
    Egress,
}

/// Whether a pool's PGs or queues give dynamic or static limits (SAI's pool threshold mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// alpha × (pool − pool used).
    Dynamic,
    /// Fixed byte limits.
    Static,
}

/// One `[buffer.pool.NAME]`, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfig {
    /// The NAME, as PGs and queues refer to it.
    pub name: String,
    /// Ingress or egress.
    pub dir: PoolDir,
    /// Its shared space in bytes (reserves are outside it).
    pub size_bytes: u64,
    /// Dynamic or static limits.
    pub mode: PoolMode,
    /// Ingress only: the shared headroom pool's size in bytes (0: each lossless PG's headroom
    /// is reserved for it alone).
    pub headroom_bytes: u64,
}

impl BufferConfig {
    /// The configured pools of one direction, in index order.
    pub fn pools_of(&self, dir: PoolDir) -> impl Iterator<Item = &PoolConfig> {
        self.pools.iter().filter(move |p| p.dir == dir)
    }
}

/// One `[[port]]`, resolved: `[port_defaults]` and the global PG and queue tables applied.
#[derive(Debug, Clone, PartialEq)]
pub struct PortConfig {
    /// The port id as configured (0..=65535, unique); what the CLI, protocol and metrics name.
    pub id: u16,
    /// Line rate in bits per second; the egress scheduler never transmits faster.
    pub speed_bps: u64,
    /// Cable length in metres; only the headroom calculation reads it.
    pub cable_m: f64,
    /// Largest L2 frame (without FCS) the port accepts; larger ones are dropped as oversize.
    pub max_frame_bytes: u32,
    /// A label for logs and reports.
    pub name: Option<String>,
    /// The host interface `rocesw run` attaches to (AF_PACKET); None: the port exists only in
    /// replay.
    pub interface: Option<String>,
    /// Index of the poll-mode worker that owns this port in `rocesw run`.
    pub worker: usize,
    /// In `rocesw run`, a port fed from and written to capture files instead of an interface
    /// (exclusive with `interface`).
    pub pcap: Option<PcapPortConfig>,
    /// What is at the far end in `rocesw run`: when a received frame counts as arrived.
    pub peer: PeerKind,
    /// In `rocesw run`, a DPDK port: its device string as written (a virtual device such as
    /// `net_pcap0,rx_pcap=in.pcap`, or a PCI address), already checked to be well formed.
    /// Exclusive with `interface` and `pcap`.
    pub dpdk: Option<String>,
    /// Headroom per PG on this port in bytes (0 for lossy PGs), resolved from the PG profile:
    /// either given, or computed from speed, cable length and MTU (see `headroom`).
    pub headroom_bytes: [u64; NUM_TC],
    /// This port's PG profiles: `Config::pgs` with the port's own `pg.N` overrides laid over.
    /// The dataplane reads these, never `Config::pgs`, for anything per port.
    pub pgs: [PgProfile; NUM_TC],
    /// This port's queue profiles, likewise.
    pub queues: [QueueProfile; NUM_TC],
    /// Which kind of scheduler picks the queue that sends next (`scheduler`, DESIGN.md
    /// "Schedulers as a choice").
    pub scheduler: SchedulerConfig,
    /// Whether the port transmits data (`tx = "off"`: SAI's PKT_TX_ENABLE = false; its PFC
    /// frames still go, as a MAC sends its control frames).
    pub tx_enabled: bool,
    /// This port's PFC-enabled priorities (`[[port]] pfc`, else `[pfc] priorities`): what its
    /// PGs send XOFF for and what a PFC frame it receives may pause. Always a subset of
    /// `PfcConfig::enabled`.
    pub pfc_enabled: [bool; NUM_TC],
    /// The MMU slice its PGs and queues are accounted in (`BufferConfig::slices`; 0 with one).
    pub slice: u8,
    /// The map set its received frames are classified with (`[[port]] classify`): an index
    /// into `ClassifyConfig::sets`; None: `[classify]`'s own maps.
    pub map_set: Option<usize>,
}

/// A port's scheduler kind and its own settings. Strict priority + WDRR reads its modes and
/// weights from the queue profiles (`QueueProfile::sched`); the other kinds carry theirs here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SchedulerConfig {
    /// Strict priority, then WDRR by byte weights (`queue.N.sched`, `queue.N.weight`).
    #[default]
    SpWdrr,
    /// InfiniBand VL arbitration (IBA 1.2.1 §7.6.9): queue n plays VL n.
    VlArb(VlArbConfig),
    /// Earliest deadline first for the regulated queues, between the strict queues above and
    /// the WDRR queues below (`[port_defaults.edf]`, `[port.edf]`).
    Edf(Box<EdfConfig>),
}

/// The longest EDF delay budget (and tag) accepted. Deadlines are whole nanoseconds of the
/// switch clock (u64) in each queued descriptor (`memory::DESC_BYTES`), so they compare right
/// however long a frame waits; the cap is about sense (a budget is a latency target, and a
/// frame that ties with one a second older keeps arrival order by a 32-bit arrival number).
pub const MAX_EDF_BUDGET_NS: u64 = 1_000_000_000;

/// How an EDF port keeps a regulated queue's frames in deadline order (`edf.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EdfMode {
    /// A heap per regulated queue: exact EDF, the comparison point.
    Ideal,
    /// One FIFO per regulated queue; EDF compares the queues' heads only, so a frame with a
    /// later deadline holds back earlier ones behind it (order errors).
    Fifo2,
    /// An ordered FIFO and a take-over FIFO per regulated queue: a frame whose deadline is
    /// earlier than the ordered list's last goes to the take-over list; the earlier head sends.
    #[default]
    TakeOver,
}

impl EdfMode {
    /// The name `edf.mode` gives this mode.
    pub fn name(self) -> &'static str {
        match self {
            EdfMode::Ideal => "ideal",
            EdfMode::Fifo2 => "fifo2",
            EdfMode::TakeOver => "take-over",
        }
    }
}

/// The EDF scheduler's settings: which queues are regulated and where each frame's deadline
/// comes from. A frame's deadline is its arrival time plus, in order of precedence: its
/// time-to-destination tag (when `tag_unit_ns` is set and the frame carries one), its DSCP's
/// budget, its queue's budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdfConfig {
    /// How the regulated queues keep their frames in deadline order.
    pub mode: EdfMode,
    /// Each queue's delay budget (`edf.budget.N`), in ns; the queues with one are the
    /// regulated queues.
    pub queue_budget_ns: [Option<u64>; NUM_TC],
    /// Per-DSCP budgets over the queue's (`edf.dscp_budget.D`), in ns.
    pub dscp_budget_ns: [Option<u64>; 64],
    /// `edf.tag = "flow_label"`: the unit of the IPv6 flow label read as a time-to-destination
    /// tag (`edf.tag_unit`), in ns; None = tags off.
    pub tag_unit_ns: Option<u64>,
}

impl EdfConfig {
    /// The regulated queues, as a bit mask.
    pub fn regulated(&self) -> u8 {
        (0..NUM_TC)
            .filter(|&q| self.queue_budget_ns[q].is_some())
            .fold(0, |m, q| m | 1 << q)
    }
}

/// `vlarb`: the two arbitration tables and the high-priority limit, in OpenSM's units.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VlArbConfig {
    /// The high-priority table, in order: at most [`VLARB_MAX_ENTRIES`].
    pub high: Vec<VlArbEntry>,
    /// The low-priority table, likewise.
    pub low: Vec<VlArbEntry>,
    /// LimitOfHighPriority in units of 4 KiB: how many high-priority bytes may be sent while a
    /// low-priority packet waits. 255 = unbounded; 0 = one high-priority packet at a time.
    pub high_limit: u8,
}

/// Entries per VL arbitration table at most (IBA: 64).
pub const VLARB_MAX_ENTRIES: usize = 64;
/// Bytes per unit of an entry's weight (one IB credit).
pub const VLARB_WEIGHT_BYTES: u32 = 64;
/// Bytes per unit of `high_limit`.
pub const VLARB_LIMIT_BYTES: u32 = 4096;
/// The `high_limit` that means unbounded.
pub const VLARB_UNBOUNDED: u8 = 255;

/// One (VL, weight) entry: the queue it serves and how many 64-byte credits it may send per
/// turn (0: skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlArbEntry {
    /// The VL, i.e. the egress queue (0..8), this entry serves.
    pub vl: u8,
    /// Credits of 64 bytes ([`VLARB_WEIGHT_BYTES`]) per turn; 0 skips the entry.
    pub weight: u8,
}

impl SchedulerConfig {
    /// The name `scheduler = "..."` gives this kind.
    pub fn name(&self) -> &'static str {
        match self {
            SchedulerConfig::SpWdrr => "sp_wdrr",
            SchedulerConfig::VlArb(_) => "vlarb",
            SchedulerConfig::Edf(_) => "edf",
        }
    }
}

/// A port backed by capture files: what arrives comes from `input`, what the port transmits
/// goes to `output`. Lets `rocesw run` (real time, real workers) run where no interface is
/// available, and feeds a capture through the real-time path rather than replay's virtual one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapPortConfig {
    /// Capture whose frames arrive on the port (classic pcap); None: nothing arrives.
    pub input: Option<std::path::PathBuf>,
    /// File the port's transmitted frames are written to (nanosecond pcap); None: discarded.
    pub output: Option<std::path::PathBuf>,
    /// When the input's frames arrive.
    pub pace: PcapPace,
}

/// How `rocesw run` treats what arrives on a port (`[[port]] peer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKind {
    /// The far end is software (a veth or tap to a host process, capture files, a VM): the
    /// port's receive ring is the peer NIC's transmit queue. Frames cross an emulated wire at the
    /// port's line rate from when the switch reads them, and a priority the switch paused waits
    /// outside the switch's buffer (as replay's peers do). A process that was not scheduled for
    /// milliseconds, or a switch that was not, then costs time, not lossless frames.
    Emulated,
    /// The far end is a real NIC on a real wire, which already paces frames and obeys PFC
    /// within its 802.3 response time: frames count as arrived when the switch reads them.
    Wire,
}

/// What backs a port in `rocesw run`: decides the default [`PeerKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// `interface = "..."`: AF_PACKET on a veth or tap (the lab's test hosts).
    Interface,
    /// `pcap = {...}`: capture files.
    Pcap,
    /// `dpdk = "net_..."`: a DPDK virtual device (a VM over vhost-user, a tap, a capture
    /// file, a memif peer...): software at the far end, as for an interface.
    DpdkVdev,
    /// `dpdk = "0000:3b:00.0"`: a NIC bound to a DPDK driver, a real wire.
    DpdkPci,
    /// None: the port exists only in replay.
    Unattached,
}

impl BackendKind {
    /// The backend of a port with these fields (`dpdk` as validated).
    pub fn of(interface: Option<&str>, pcap: bool, dpdk: Option<&str>) -> BackendKind {
        match (interface, pcap, dpdk) {
            (Some(_), _, _) => BackendKind::Interface,
            (None, true, _) => BackendKind::Pcap,
            (None, false, Some(d)) if dpdk::DeviceSpec::parse(d).is_ok_and(|s| s.is_pci()) => BackendKind::DpdkPci,
            (None, false, Some(_)) => BackendKind::DpdkVdev,
            (None, false, None) => BackendKind::Unattached,
        }
    }
}

impl PeerKind {
    /// The peer a port gets unless `peer` says otherwise. Emulated for interfaces (a veth or
    /// tap: the lab's test hosts are processes that notice PFC only when they next run) and
    /// for capture files (a file cannot obey PFC; with it `rocesw run` on captures loses
    /// nothing, as replay). DPDK virtual devices stay wires by default: they are where the
    /// pipeline's speed is measured (`net_null`, `net_ring`), and the emulated store copies
    /// every frame, which undoes zero copy; a VM behind `net_vhost` can ask for
    /// `peer = "emulated"`. A PCI NIC is a wire, and a port with no backend is fed by whatever
    /// embeds the switch (tests' in-memory ports, which play a NIC).
    pub fn default_for(backend: BackendKind) -> PeerKind {
        match backend {
            BackendKind::Pcap | BackendKind::Interface => PeerKind::Emulated,
            BackendKind::DpdkVdev | BackendKind::DpdkPci | BackendKind::Unattached => PeerKind::Wire,
        }
    }

    /// The name `peer = "..."` gives this kind.
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Emulated => "emulated",
            PeerKind::Wire => "wire",
        }
    }
}

impl PortConfig {
    /// What backs this port in `rocesw run`.
    pub fn backend_kind(&self) -> BackendKind {
        BackendKind::of(self.interface.as_deref(), self.pcap.is_some(), self.dpdk.as_deref())
    }
}

/// When a capture's frames arrive in `rocesw run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcapPace {
    /// At the capture's own spacing, every port on one time base (the earliest first frame of
    /// all inputs arrives at start-up).
    Capture,
    /// As fast as the switch takes them (a burst per poll).
    Asap,
}

/// `rocesw run`: workers and their polling.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// Poll-mode worker threads; ports are assigned by `port.worker` (default: round robin).
    pub workers: usize,
    /// Pin worker i to core `cores[i]` (empty: no pinning).
    pub cores: Vec<usize>,
    /// Busy-poll (None) or sleep this long after an idle round (for shared machines).
    pub idle_sleep_ns: Option<u64>,
    /// On SIGINT/SIGTERM, how long to keep transmitting what was admitted before giving up.
    pub drain_timeout_ns: u64,
    /// How DPDK's EAL starts when some port is a DPDK port (`[run.dpdk]`).
    pub dpdk: DpdkRunConfig,
}

/// `[run.dpdk]`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkRunConfig {
    /// Extra EAL arguments, after rocesw's own.
    pub eal_args: Vec<String>,
    /// Memory the EAL reserves, in MiB.
    pub memory_mb: u32,
    /// Hugepage-backed memory (needed by PCI ports); false: `--no-huge`, anonymous memory.
    pub hugepages: bool,
    /// Mbufs in the shared packet pool of the DPDK ports.
    pub mbufs: u32,
}

/// Which header field gives a frame its traffic class (`classify.trust`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The IP DSCP, through `dscp_to_tc`.
    Dscp,
    /// The VLAN tag's PCP, through `pcp_to_tc`.
    Pcp,
    /// Neither: every frame gets `default_tc` (rules may still change it).
    None,
}

/// `[classify]`, resolved: every map filled in, so lookups never miss.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassifyConfig {
    /// The field read for the traffic class.
    pub trust: Trust,
    /// Traffic class for frames that carry no trusted field (or `trust = none`).
    pub default_tc: u8,
    /// Traffic class per DSCP (unlisted DSCPs: `default_tc`).
    pub dscp_to_tc: [u8; 64],
    /// Traffic class per PCP (unlisted PCP p: tc p).
    pub pcp_to_tc: [u8; 8],
    /// Egress queue per traffic class (default identity).
    pub tc_to_queue: [u8; NUM_TC],
    /// Ingress priority group per traffic class (default identity).
    pub tc_to_pg: [u8; NUM_TC],
    /// Evaluated in order after the trust maps; the first match wins.
    pub rules: Vec<Rule>,
    /// The named map sets (`[classify.map.NAME]`), in name order: the ingress maps of the
    /// ports that name one (SONiC binds its maps per port). Trust, `default_tc`, the rules and
    /// `tc_to_queue` stay the switch's: SAI applies a TC_TO_QUEUE map where a frame leaves, and
    /// rocesw picks the queue once, where it arrives, so one queue map serves every port.
    pub sets: Vec<MapSet>,
}

/// Map sets at most (`[classify.map.NAME]`): a port's choice is a byte in the dataplane.
pub const MAX_MAP_SETS: usize = 255;

/// One `[classify.map.NAME]`, resolved: every map filled in, `[classify]`'s where the set
/// gives none.
#[derive(Debug, Clone, PartialEq)]
pub struct MapSet {
    /// The NAME, as `[[port]] classify` refers to it.
    pub name: String,
    /// Traffic class per DSCP.
    pub dscp_to_tc: [u8; 64],
    /// Traffic class per PCP.
    pub pcp_to_tc: [u8; 8],
    /// Ingress priority group per traffic class.
    pub tc_to_pg: [u8; NUM_TC],
}

/// The maps one port classifies with: its map set's, or the switch's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Maps<'a> {
    /// Traffic class per DSCP.
    pub dscp_to_tc: &'a [u8; 64],
    /// Traffic class per PCP.
    pub pcp_to_tc: &'a [u8; 8],
    /// Ingress priority group per traffic class.
    pub tc_to_pg: &'a [u8; NUM_TC],
    /// Egress queue per traffic class (always the switch's).
    pub tc_to_queue: &'a [u8; NUM_TC],
}

impl ClassifyConfig {
    /// The maps of map set `set` (an index into `sets`), or `[classify]`'s for None (or an
    /// index that is not a set).
    pub fn maps(&self, set: Option<usize>) -> Maps<'_> {
        match set.and_then(|i| self.sets.get(i)) {
            Some(s) => Maps {
                dscp_to_tc: &s.dscp_to_tc,
                pcp_to_tc: &s.pcp_to_tc,
                tc_to_pg: &s.tc_to_pg,
                tc_to_queue: &self.tc_to_queue,
            },
            None => Maps {
                dscp_to_tc: &self.dscp_to_tc,
                pcp_to_tc: &self.pcp_to_tc,
                tc_to_pg: &self.tc_to_pg,
                tc_to_queue: &self.tc_to_queue,
            },
        }
    }
}

/// One `[[classify.rule]]`: overrides the trust maps' result for the frames it matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// As written, or `ruleN` (N its position from 0); names the rule in warnings.
    pub name: String,
    /// Which frames it applies to.
    pub matches: RuleMatch,
    /// What it changes in them.
    pub action: RuleAction,
}

/// Every field that is `Some` must match; an empty match matches everything (a catch-all).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleMatch {
    /// Port id (not index) the frame came in on.
    pub in_port: Option<u16>,
    /// Ethernet type after any VLAN tag.
    pub ether_type: Option<u16>,
    /// IP protocol number (IPv6: the next header).
    pub ip_proto: Option<u8>,
    /// UDP destination port.
    pub udp_dport: Option<u16>,
    /// UDP source port.
    pub udp_sport: Option<u16>,
    /// IP DSCP (0..=63).
    pub dscp: Option<u8>,
    /// VLAN PCP (0..=7).
    pub pcp: Option<u8>,
    /// UDP destination port 4791 with a BTH.
    pub roce: Option<bool>,
    /// RoCEv2 with BTH opcode 0x81.
    pub cnp: Option<bool>,
}

/// What a matching rule does; at least one field is set (validation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleAction {
    /// New traffic class (then queue and PG follow the tc maps unless `queue` is also given).
    pub tc: Option<u8>,
    /// Egress queue override, taken over the one the tc maps to.
    pub queue: Option<u8>,
    /// Rewrite the IP DSCP (IPv4 checksum updated incrementally; the ICRC masks it).
    pub set_dscp: Option<u8>,
}

/// `[cnp]`, resolved: CNPs skip classification so congestion feedback is never queued behind data.
#[derive(Debug, Clone, PartialEq)]
pub struct CnpConfig {
    /// CNPs bypass classification into this queue, which should be strict priority.
    pub queue: u8,
    /// Token bucket in front of the CNP queue, so a CNP flood cannot starve the others.
    pub policer: Option<RateLimit>,
}

/// A token bucket (CNP policer, queue shaper).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Fill rate in bits per second (above 0).
    pub rate_bps: u64,
    /// Bucket depth in bytes: the largest burst passed at once.
    pub burst_bytes: u64,
}

/// How far a PG or queue may go into the shared pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// A fixed limit on shared-pool use.
    Static {
        /// The limit in bytes.
        bytes: u64,
    },
    /// limit = alpha × (shared pool − shared pool used). SAI writes alpha as 2^dynamic_th.
    Dynamic {
        /// The multiplier (2^dynamic_th when written that way); 0 means no shared use.
        alpha: f64,
    },
    /// No limit: may take the whole shared pool.
    Unlimited,
}

/// An ingress priority group's accounting on one port: where XOFF is sent for a lossless PG.
#[derive(Debug, Clone, PartialEq)]
pub struct PgProfile {
    /// A PG is lossless when a PFC-enabled priority maps to it.
    pub lossless: bool,
    /// Bytes reserved for this PG on each port, never shared.
    pub min_bytes: u64,
    /// How far beyond `min_bytes` it may go into the shared pool; for a lossless PG, the XOFF
    /// point.
    pub shared: Threshold,
    /// XON is sent once shared use falls below (limit − xon_offset) and headroom is empty.
    pub xon_offset_bytes: u64,
    /// ... or once shared use is at or below this (SAI's XON_TH: resume at or below
    /// max(xon, limit − xon_offset)); 0 = the offset alone decides.
    pub xon_bytes: u64,
    /// Index of its ingress pool among `BufferConfig::pools` of that direction (0 without pools).
    pub pool: u8,
}

/// How the SP+WDRR scheduler treats a queue (`queue.N.sched`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedMode {
    /// Served before every WDRR queue; among strict queues the higher index goes first.
    Strict,
    /// Weighted deficit round robin; the weight scales the byte quantum.
    Wdrr {
        /// Multiplier of the byte quantum, 1..=1000.
        weight: u32,
    },
}

/// An egress queue's accounting, scheduling and marking on one port.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueProfile {
    /// Bytes reserved for this queue on each port, never shared.
    pub min_bytes: u64,
    /// How far beyond `min_bytes` it may go into the shared pool; lossy frames beyond it drop.
    pub shared: Threshold,
    /// Strict or WDRR under the `sp_wdrr` scheduler (EDF reads it for its bands; VL arbitration
    /// ignores it).
    pub sched: SchedMode,
    /// Token bucket the queue must conform to before it may send; None: line rate.
    pub shaper: Option<RateLimit>,
    /// WRED-ECN profile, resolved from its name.
    pub ecn: Option<EcnProfile>,
    /// Index of its egress pool among `BufferConfig::pools` of that direction (0 without pools).
    pub pool: u8,
}

/// Where WRED-ECN decides to mark (`mark_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkPoint {
    /// When the frame is queued, against the queue length then.
    Enqueue,
    /// When the frame leaves (the default): the shortest feedback loop.
    Dequeue,
}

/// What WRED does to frames that are not ECN-capable (`non_ect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonEct {
    /// Non-ECN-capable packets are never dropped by WRED.
    Pass,
    /// Non-ECN-capable packets are dropped with the probability they would have been marked.
    Drop,
}

/// An `[ecn.NAME]` WRED-ECN profile: marking probability as a function of queue length.
#[derive(Debug, Clone, PartialEq)]
pub struct EcnProfile {
    /// The `NAME` of `[ecn.NAME]`, as queues refer to it.
    pub name: String,
    /// Queue length in bytes below which nothing is marked.
    pub kmin_bytes: u64,
    /// Queue length in bytes at which the probability reaches `pmax`; above it every frame is
    /// marked.
    pub kmax_bytes: u64,
    /// Marking probability at `kmax_bytes`, 0..=1.
    pub pmax: f64,
    /// EWMA weight as a power of two: avg += (q − avg) / 2^shift. `None` = instantaneous.
    pub ewma_shift: Option<u8>,
    /// Whether to decide at enqueue or dequeue.
    pub mark_at: MarkPoint,
    /// What happens to non-ECN-capable frames that would have been marked.
    pub non_ect: NonEct,
}

/// What the PFC watchdog does to a stormed queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchdogAction {
    /// Drop what is queued and what arrives for the stormed queue until restoration.
    Drop,
    /// Ignore the pause: transmit as if no PFC had been received.
    Forward,
    /// Only count and log.
    Alert,
}

/// The PFC watchdog: a queue held paused with frames waiting for too long is a storm.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchdogConfig {
    /// How long a queue must stay paused while holding frames to count as stormed, in ns.
    pub detection_ns: u64,
    /// How long without any PFC frame before the action stops, in ns.
    pub restoration_ns: u64,
    /// What is done meanwhile.
    pub action: WatchdogAction,
}

/// `[pfc]`, resolved: which priorities are lossless and how our XOFF frames are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct PfcConfig {
    /// PFC-enabled priorities (priority = traffic class).
    pub enabled: [bool; NUM_TC],
    /// Pause time carried by the XOFF frames the switch sends, in quanta (512 bit times).
    pub pause_quanta: u16,
    /// Re-send XOFF after this fraction of the pause time while still congested (0 < f < 1).
    pub refresh_fraction: f64,
    /// None: the watchdog is off.
    pub watchdog: Option<WatchdogConfig>,
}

/// `[fdb]`, resolved: the MAC table's bounds, so no host can take it from the others.
#[derive(Debug, Clone, PartialEq)]
pub struct FdbConfig {
    /// Whether source addresses are learnt (false: only static entries, the rest floods).
    pub learning: bool,
    /// How long a learnt entry lives without being refreshed, in ns.
    pub aging_ns: u64,
    /// Entries the table holds at most, static ones included.
    pub capacity: usize,
    /// Learnt entries one port may hold: by default an equal share of `capacity`, so a host
    /// sending from random addresses cannot take the table from the others.
    pub port_limit: usize,
    /// New addresses (learnt or moved) a port may learn per second, and at once.
    pub learn_rate: u64,
    /// Entries present from the start, never aged or moved.
    pub static_entries: Vec<StaticMac>,
}

/// A `[[fdb.static]]` entry: a unicast MAC pinned to a port.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticMac {
    /// The unicast MAC address.
    pub mac: [u8; 6],
    /// Port id (not index) it is pinned to.
    pub port: u16,
}

impl Config {
    /// The maps port index `port` classifies with.
    pub fn port_maps(&self, port: usize) -> Maps<'_> {
        self.classify.maps(self.ports.get(port).and_then(|p| p.map_set))
    }

    /// The index in `ports` of the port with this id; None if there is none.
    pub fn port_index(&self, id: u16) -> Option<usize> {
        self.ports.iter().position(|p| p.id == id)
    }

    /// The id of the port a user named: its id (`8`) or its `name` (`Ethernet8`, as a config
    /// imported from SONiC names every port). The error lists what there is.
    pub fn port_id_of(&self, name_or_id: &str) -> Result<u16, String> {
        let ports: Vec<(u16, Option<&str>)> = self.ports.iter().map(|p| (p.id, p.name.as_deref())).collect();
        find_port(&ports, name_or_id, "the config")
    }
}

impl PortConfig {
    /// How tables and messages name the port: its `name` where it has one, else its id.
    pub fn label(&self) -> String {
        port_label(self.id, self.name.as_deref())
    }
}

/// How tables and messages name a port: its config `name` (`Ethernet8`) where it has one, else
/// its id.
pub fn port_label(id: u16, name: Option<&str>) -> String {
    name.map_or_else(|| id.to_string(), str::to_string)
}

/// The id of the port a user named among `ports` (id, name): by its name first (`Ethernet8`),
/// else by its id (`8`). The error says it is not a port of `of` ("the config", "the switch")
/// and lists every port, `8 (Ethernet8)` where it has a name.
pub fn find_port(ports: &[(u16, Option<&str>)], name_or_id: &str, of: &str) -> Result<u16, String> {
    let s = name_or_id.trim();
    if let Some(&(id, _)) = ports.iter().find(|(_, n)| *n == Some(s)) {
        return Ok(id);
    }
    if let Some(&(id, _)) = s
        .parse::<u16>()
        .ok()
        .and_then(|want| ports.iter().find(|(id, _)| *id == want))
    {
        return Ok(id);
    }
    let known: Vec<String> = ports
        .iter()
        .map(|&(id, n)| match n {
            Some(n) => format!("{id} ({n})"),
            None => id.to_string(),
        })
        .collect();
    Err(format!("{s:?} is not a port of {of} (ports: {})", known.join(", ")))
}

//! Every default and limit of the schema, in one place so `configs/README.md` and the code can
//! be compared line by line (and so the sections' resolvers share one source of each number).

use crate::headroom;
use crate::model::Trust;

/// `buffer.cell` unless given.
pub const DEFAULT_CELL_BYTES: u32 = 256;
/// Smallest `buffer.cell` accepted.
pub const MIN_CELL_BYTES: u32 = 64;
/// Largest `buffer.cell` accepted.
pub const MAX_CELL_BYTES: u32 = 4096;
/// `buffer.size` unless given: 4 MiB.
pub const DEFAULT_BUFFER_BYTES: u64 = 4 << 20;
/// Smallest `buffer.size`, in cells.
pub const MIN_BUFFER_CELLS: u64 = 64;
/// Most `[[port]]` tables a config may have.
pub const MAX_PORTS: usize = 512;
/// `cable` unless given, in metres.
pub const DEFAULT_CABLE_M: f64 = 15.0;
/// Longest `cable` accepted, in metres (10 km).
pub const MAX_CABLE_M: f64 = 10_000.0;
/// `mtu` unless given (IP MTU, bytes).
pub const DEFAULT_MTU: u32 = 1500;
/// Smallest `mtu` accepted (IPv4's minimum).
pub const MIN_MTU: i64 = 68;
/// Largest `mtu` accepted (jumbo frames).
pub const MAX_MTU: i64 = 9216;
/// Ethernet header + one VLAN tag: max frame = MTU + 18 (the FCS is not stored).
pub const L2_OVERHEAD: u32 = headroom::L2_OVERHEAD_BYTES;
/// `classify.trust` unless given.
pub const DEFAULT_TRUST: Trust = Trust::Dscp;
/// Shared limit of a lossless PG that gives none: alpha 1/8.
pub const DEFAULT_LOSSLESS_PG_ALPHA: f64 = 0.125;
/// `xon_offset` of a lossless PG unless given: 3 KiB (HPCC's resume offset).
pub const DEFAULT_XON_OFFSET_BYTES: u64 = 3 * 1024;
/// Shared limit of a lossy queue that gives none: alpha 1.
pub const DEFAULT_LOSSY_QUEUE_ALPHA: f64 = 1.0;
/// `queue.N.weight` unless given.
pub const DEFAULT_WEIGHT: u32 = 1;
/// Largest `queue.N.weight` accepted.
pub const MAX_WEIGHT: i64 = 1000;
/// `cnp.queue` unless given.
pub const DEFAULT_CNP_QUEUE: u8 = 6;
/// The slowest port speed accepted: 10 Mb/s, the slowest Ethernet (10BASE-T). Nothing real
/// runs slower, and at 1 or 10 b/s a max frame takes hours: such a config validated and
/// dropped thousands of lossless frames in replay (issue 21).
pub const MIN_PORT_SPEED_BPS: u64 = 10_000_000;
/// A policer must pass at least one minimum frame (a CNP is 78 B untagged).
pub const MIN_POLICER_BURST: u64 = 64;
/// `pfc.pause_quanta` unless given: the longest pause, refreshed while congested.
pub const DEFAULT_PAUSE_QUANTA: u16 = 65535;
/// `pfc.refresh` unless given: XOFF re-sent at half the pause time.
pub const DEFAULT_REFRESH: f64 = 0.5;
/// `pfc.watchdog.detection` unless given: 200 ms.
pub const DEFAULT_WD_DETECTION_NS: u64 = 200_000_000;
/// `pfc.watchdog.restoration` unless given: 400 ms.
pub const DEFAULT_WD_RESTORATION_NS: u64 = 400_000_000;
/// Largest `ecn.NAME.ewma_shift` accepted.
pub const MAX_EWMA_SHIFT: i64 = 15;
/// `fdb.learning` unless given.
pub const DEFAULT_FDB_LEARNING: bool = true;
/// `fdb.aging` unless given: 300 s.
pub const DEFAULT_FDB_AGING_NS: u64 = 300_000_000_000;
/// `fdb.capacity` unless given, in entries.
pub const DEFAULT_FDB_CAPACITY: usize = 4096;
/// Largest `fdb.capacity` accepted, in entries.
pub const MAX_FDB_CAPACITY: i64 = 1 << 20;
/// New MAC addresses a port may learn per second (and at once): a host cycling source
/// addresses at line rate churns the table at this pace at most.
pub const DEFAULT_FDB_LEARN_RATE: u64 = 1000;
/// Largest `fdb.learn_rate` accepted, addresses per second.
pub const MAX_FDB_LEARN_RATE: i64 = 1_000_000_000;
/// Most `run.workers` accepted.
pub const MAX_WORKERS: usize = 64;
/// `run.drain_timeout` unless given: 1 s.
pub const DEFAULT_DRAIN_TIMEOUT_NS: u64 = 1_000_000_000;

/// `[run.dpdk] memory`: what the EAL reserves (anonymous memory without hugepages).
pub const DEFAULT_DPDK_MEMORY_MB: u32 = 512;
/// `[run.dpdk] mbufs`: the DPDK ports' shared packet pool (2^k - 1, as DPDK prefers).
pub const DEFAULT_DPDK_MBUFS: u32 = 16383;

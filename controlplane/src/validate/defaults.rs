//! Every default and limit of the schema, in one place so `configs/README.md` and the code can
//! be compared line by line (and so the sections' resolvers share one source of each number).

use crate::headroom;
use crate::model::Trust;

pub const DEFAULT_CELL_BYTES: u32 = 256;
pub const MIN_CELL_BYTES: u32 = 64;
pub const MAX_CELL_BYTES: u32 = 4096;
pub const DEFAULT_BUFFER_BYTES: u64 = 4 << 20;
pub const MIN_BUFFER_CELLS: u64 = 64;
pub const MAX_PORTS: usize = 64;
pub const DEFAULT_CABLE_M: f64 = 15.0;
pub const MAX_CABLE_M: f64 = 10_000.0;
pub const DEFAULT_MTU: u32 = 1500;
pub const MIN_MTU: i64 = 68;
pub const MAX_MTU: i64 = 9216;
/// Ethernet header + one VLAN tag: max frame = MTU + 18 (the FCS is not stored).
pub const L2_OVERHEAD: u32 = headroom::L2_OVERHEAD_BYTES;
pub const DEFAULT_TRUST: Trust = Trust::Dscp;
pub const DEFAULT_LOSSLESS_PG_ALPHA: f64 = 0.125;
pub const DEFAULT_XON_OFFSET_BYTES: u64 = 3 * 1024;
pub const DEFAULT_LOSSY_QUEUE_ALPHA: f64 = 1.0;
pub const DEFAULT_WEIGHT: u32 = 1;
pub const MAX_WEIGHT: i64 = 1000;
pub const DEFAULT_CNP_QUEUE: u8 = 6;
/// The slowest port speed accepted: 10 Mb/s, the slowest Ethernet (10BASE-T). Nothing real
/// runs slower, and at 1 or 10 b/s a max frame takes hours: such a config validated and
/// dropped thousands of lossless frames in replay (issue 21).
pub const MIN_PORT_SPEED_BPS: u64 = 10_000_000;
/// A policer must pass at least one minimum frame (a CNP is 78 B untagged).
pub const MIN_POLICER_BURST: u64 = 64;
pub const DEFAULT_PAUSE_QUANTA: u16 = 65535;
pub const DEFAULT_REFRESH: f64 = 0.5;
pub const DEFAULT_WD_DETECTION_NS: u64 = 200_000_000;
pub const DEFAULT_WD_RESTORATION_NS: u64 = 400_000_000;
pub const MAX_EWMA_SHIFT: i64 = 15;
pub const DEFAULT_FDB_LEARNING: bool = true;
pub const DEFAULT_FDB_AGING_NS: u64 = 300_000_000_000;
pub const DEFAULT_FDB_CAPACITY: usize = 4096;
pub const MAX_FDB_CAPACITY: i64 = 1 << 20;
/// New MAC addresses a port may learn per second (and at once): a host cycling source
/// addresses at line rate churns the table at this pace at most.
pub const DEFAULT_FDB_LEARN_RATE: u64 = 1000;
pub const MAX_FDB_LEARN_RATE: i64 = 1_000_000_000;
pub const MAX_WORKERS: usize = 64;
pub const DEFAULT_DRAIN_TIMEOUT_NS: u64 = 1_000_000_000;

/// `[run.dpdk] memory`: what the EAL reserves (anonymous memory without hugepages).
pub const DEFAULT_DPDK_MEMORY_MB: u32 = 512;
/// `[run.dpdk] mbufs`: the DPDK ports' shared packet pool (2^k - 1, as DPDK prefers).
pub const DEFAULT_DPDK_MBUFS: u32 = 16383;

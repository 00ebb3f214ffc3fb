//! Flow completion times per message size: short messages and long transfers want different
//! things from the same queue, so one median over all of them hides both.

use super::FlowReport;
use serde::{Deserialize, Serialize};

/// The finite flows whose size is at most `up_to_bytes` (and above the previous bucket's).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SizeFct {
    /// The bucket's upper bound: the size rounded up to a power of two.
    pub up_to_bytes: u64,
    /// Finite flows in this bucket.
    pub messages: u64,
    /// Of those, the ones whose every packet arrived (their FCTs make the percentiles).
    pub completed: u64,
    /// Median completion time, ns (nearest rank); `None` if none completed.
    pub fct_p50_ns: Option<u64>,
    /// 99th percentile completion time, ns; `None` if none completed.
    pub fct_p99_ns: Option<u64>,
    /// Slowest completion, ns; `None` if none completed.
    pub fct_max_ns: Option<u64>,
}

/// One bucket per power of two that some finite flow falls in, smallest first.
pub fn by_size(flows: &[FlowReport]) -> Vec<SizeFct> {
    let mut buckets: std::collections::BTreeMap<u64, (u64, Vec<u64>)> = Default::default();
    for f in flows {
        let Some(size) = f.size else { continue };
        let b = buckets.entry(size.next_power_of_two()).or_default();
        b.0 += 1;
        b.1.extend(f.fct_ns);
    }
    buckets
        .into_iter()
        .map(|(up_to_bytes, (messages, mut fcts))| {
            fcts.sort_unstable();
            // Nearest rank.
            let q = |p: f64| -> Option<u64> {
                let n = fcts.len();
                (n > 0).then(|| fcts[((p * n as f64).ceil() as usize).clamp(1, n) - 1])
            };
            SizeFct {
                up_to_bytes,
                messages,
                completed: fcts.len() as u64,
                fct_p50_ns: q(0.5),
                fct_p99_ns: q(0.99),
                fct_max_ns: fcts.last().copied(),
            }
        })
        .collect()
}

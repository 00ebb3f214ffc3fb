//! The latency histogram: what the receiver records per flow and the report merges and
//! summarises. It has a module of its own because both sides need it: kept in `report`, it made
//! `receiver` depend on `report`, which depends on `host`, which depends on `receiver` (a cycle).

use serde::Serialize;

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) << SUB_BITS;

/// A fixed-size log-linear histogram of nanosecond values: exact below 128 ns, then 128
/// buckets per power of two (under 0.8 % error). Recording never allocates.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram; its buckets (58 KiB) are allocated here, once.
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            n: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    #[inline]
    fn index(v: u64) -> usize {
        if v < SUB {
            v as usize
        } else {
            let e = 63 - v.leading_zeros();
            (((e - SUB_BITS + 1) as usize) << SUB_BITS) | ((v >> (e - SUB_BITS)) & (SUB - 1)) as usize
        }
    }

    /// The middle of bucket `i`.
    fn value(i: usize) -> u64 {
        if (i as u64) < SUB {
            return i as u64;
        }
        let b = (i >> SUB_BITS) as u32;
        let m = (i as u64) & (SUB - 1);
        let shift = b - 1;
        ((SUB + m) << shift) + ((1u64 << shift) >> 1)
    }

    /// Adds one value, in ns.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.n += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Adds every sample of `o`, as if recorded here (per flow into per pattern).
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.n += o.n;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The largest value recorded, exact (0 if none).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0..=1), within the bucket error, clamped to [min, max].
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut acc = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= rank {
                return Self::value(i).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// The percentiles, extremes and mean reports print; all 0 if nothing was recorded.
    pub fn summary(&self) -> Latency {
        Latency {
            samples: self.n,
            p50_ns: self.quantile(0.5),
            p99_ns: self.quantile(0.99),
            max_ns: self.max,
            min_ns: if self.n == 0 { 0 } else { self.min },
            mean_ns: if self.n == 0 {
                0
            } else {
                (self.sum / u128::from(self.n)) as u64
            },
        }
    }
}

/// One-way latency (send timestamp in the payload → arrival at the receiver's socket).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Latency {
    /// Packets measured.
    pub samples: u64,
    /// Median, ns (within the bucket error).
    pub p50_ns: u64,
    /// 99th percentile, ns (within the bucket error).
    pub p99_ns: u64,
    /// Largest, ns, exact.
    pub max_ns: u64,
    /// Smallest, ns, exact.
    pub min_ns: u64,
    /// Mean, ns, exact (rounded down).
    pub mean_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!(s.samples, 10_000);
        assert_eq!(s.max_ns, 10_000_000);
        let near = |a: u64, b: u64| (a as f64 - b as f64).abs() / b as f64 <= 0.01;
        assert!(near(s.p50_ns, 5_000_000), "{}", s.p50_ns);
        assert!(near(s.p99_ns, 9_900_000), "{}", s.p99_ns);
        // Exact below 128, continuous indices above.
        for v in [0u64, 1, 127, 128, 129, 255, 256, 1 << 40, u64::MAX] {
            let i = Histogram::index(v);
            assert!(i < BUCKETS);
            let back = Histogram::value(i);
            assert!(
                v < 128 && back == v || (back as f64 - v as f64).abs() / v as f64 <= 0.008,
                "{v} {back}"
            );
        }
        assert_eq!(Histogram::index(127) + 1, Histogram::index(128));
        assert_eq!(Histogram::index(255) + 1, Histogram::index(256));
    }
}

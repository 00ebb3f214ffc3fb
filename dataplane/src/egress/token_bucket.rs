//! Token buckets for the CNP policer and per-queue shapers. Integer arithmetic in
//! byte-picoseconds so that a 25G bucket refilled every few nanoseconds does not drift.

use controlplane::RateLimit;

const PS_PER_S: u128 = 1_000_000_000_000;

/// A token bucket: rate in bits per second, depth in bytes, refilled up to the `now` (ns) each
/// call passes.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_bps: u64,
    burst_bytes: u64,
    /// Tokens in bytes × 10^12 / 8 / ... kept as "byte·ps" units: tokens_bps_ps / (8·10^12) = bytes.
    tokens: u128,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket (rate and burst of at least 1).
    pub fn new(limit: RateLimit) -> Self {
        let burst = limit.burst_bytes.max(1);
        TokenBucket {
            rate_bps: limit.rate_bps.max(1),
            burst_bytes: burst,
            tokens: Self::scale(burst),
            last_ns: 0,
        }
    }

    /// Takes a new rate and burst keeping the tokens it holds (clamped to the new burst), so a
    /// live change, even re-applying the same config in a loop, never refills the bucket: a
    /// refill per change would let a CNP flood past the policer one burst per change.
    pub fn retune(&mut self, limit: RateLimit) {
        self.rate_bps = limit.rate_bps.max(1);
        self.burst_bytes = limit.burst_bytes.max(1);
        self.tokens = self.tokens.min(Self::scale(self.burst_bytes));
    }

    /// Bytes are held scaled by 8·10^12 so that rate_bps × elapsed_ps... adds exactly.
    #[inline]
    fn scale(bytes: u64) -> u128 {
        bytes as u128 * 8 * PS_PER_S / 1000
    }

    #[inline]
    fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            // rate [bit/s] × elapsed [ns] = bits × 10^9; scaled bytes are bits × 10^9.
            let add = self.rate_bps as u128 * (now_ns - self.last_ns) as u128;
            self.tokens = (self.tokens + add).min(Self::scale(self.burst_bytes));
            self.last_ns = now_ns;
        }
    }

    /// Whether `bytes` could pass at `now` (without taking them).
    #[inline]
    pub fn conforms(&mut self, now_ns: u64, bytes: u32) -> bool {
        self.refill(now_ns);
        self.tokens >= Self::scale(bytes as u64)
    }

    /// Takes `bytes` if they conform (policer use).
    #[inline]
    pub fn take(&mut self, now_ns: u64, bytes: u32) -> bool {
        if self.conforms(now_ns, bytes) {
            self.tokens -= Self::scale(bytes as u64);
            true
        } else {
            false
        }
    }

    /// Takes `bytes` even if that leaves the bucket short (shaper use: the frame was allowed by
    /// `conforms`, this just charges it).
    #[inline]
    pub fn charge(&mut self, now_ns: u64, bytes: u32) {
        self.refill(now_ns);
        self.tokens = self.tokens.saturating_sub(Self::scale(bytes as u64));
    }

    /// Earliest time at which `bytes` will conform.
    pub fn ready_at(&self, now_ns: u64, bytes: u32) -> u64 {
        let need = Self::scale(bytes.min(self.burst_bytes as u32) as u64);
        let elapsed = now_ns.saturating_sub(self.last_ns) as u128;
        let have = (self.tokens + self.rate_bps as u128 * elapsed).min(Self::scale(self.burst_bytes));
        if have >= need {
            return now_ns;
        }
        let wait = (need - have).div_ceil(self.rate_bps as u128);
        now_ns + wait.min(u64::MAX as u128 / 2) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policer_passes_its_rate_over_time() {
        // 1 Gb/s = 125 bytes per microsecond; offer 1000-byte frames every 4 µs (2 Gb/s) for 10 ms.
        let mut tb = TokenBucket::new(RateLimit {
            rate_bps: 1_000_000_000,
            burst_bytes: 2000,
        });
        let mut passed = 0u64;
        for i in 0..2500u64 {
            if tb.take(i * 4_000, 1000) {
                passed += 1000;
            }
        }
        let expected = 1_000_000_000u64 / 8 / 100; // 10 ms at 1 Gb/s
        let err = (passed as f64 - expected as f64).abs() / expected as f64;
        assert!(err < 0.02, "passed {passed} expected {expected}");
    }

    #[test]
    fn retune_keeps_the_tokens_clamped_to_the_new_burst() {
        let limit = RateLimit {
            rate_bps: 8_000,
            burst_bytes: 3000,
        };
        let mut tb = TokenBucket::new(limit);
        assert!(tb.take(0, 2000));
        tb.retune(limit);
        assert!(!tb.take(0, 1001), "the same limit again does not refill");
        tb.retune(RateLimit {
            burst_bytes: 500,
            ..limit
        });
        assert!(tb.take(0, 500) && !tb.take(0, 1), "clamped to the smaller burst");
    }

    #[test]
    fn burst_is_the_cap() {
        let mut tb = TokenBucket::new(RateLimit {
            rate_bps: 8_000,
            burst_bytes: 3000,
        });
        assert!(tb.take(10_000_000_000, 3000));
        assert!(!tb.take(10_000_000_000, 1));
    }

    #[test]
    fn ready_at_is_when_it_conforms() {
        let mut tb = TokenBucket::new(RateLimit {
            rate_bps: 8_000_000_000,
            burst_bytes: 1500,
        });
        assert!(tb.take(0, 1500));
        let t = tb.ready_at(0, 1000); // 1000 bytes at 1 byte/ns
        assert_eq!(t, 1000);
        assert!(!tb.conforms(t - 1, 1000));
        assert!(tb.conforms(t, 1000));
    }
}

//! Shared-pool limits resolved to integer arithmetic, so admission is a multiply and a shift
//! and two runs on different machines take the same decisions.

use controlplane::Threshold;

/// Fixed-point scale for alpha: 16 fractional bits is finer than SAI's 2^dynamic_th steps.
const ALPHA_SHIFT: u32 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Static(u32),
    /// alpha in 1/65536 units; limit = alpha × free shared cells.
    Dynamic(u64),
    Unlimited,
}

impl Limit {
    pub fn from_threshold(t: Threshold, cell_bytes: u32) -> Self {
        match t {
            Threshold::Static { bytes } => Limit::Static(bytes.div_ceil(cell_bytes as u64).min(u32::MAX as u64) as u32),
            Threshold::Dynamic { alpha } => {
                Limit::Dynamic((alpha.max(0.0) * (1u64 << ALPHA_SHIFT) as f64).round() as u64)
            }
            Threshold::Unlimited => Limit::Unlimited,
        }
    }

    /// The limit in cells given the free shared cells right now.
    #[inline]
    pub fn resolve(self, free_shared: u32) -> u32 {
        match self {
            Limit::Static(c) => c,
            Limit::Dynamic(a) => ((free_shared as u64 * a) >> ALPHA_SHIFT).min(u32::MAX as u64) as u32,
            Limit::Unlimited => u32::MAX,
        }
    }
}

//! Shared-pool limits resolved to integer arithmetic, so admission is a multiply and a shift
//! and two runs on different machines take the same decisions.

use controlplane::Threshold;

/// Fixed-point scale for alpha: 16 fractional bits is finer than SAI's 2^dynamic_th steps.
const ALPHA_SHIFT: u32 = 16;

/// A shared-pool limit: `alpha × free shared cells + fixed` cells, saturating. A static limit has
/// alpha 0, a dynamic one fixed 0, an unlimited one fixed `u32::MAX`: one branch-free formula,
/// as admission resolves it for every frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// alpha in 1/65536 units.
    alpha_q16: u64,
    fixed: u32,
}

impl Limit {
    /// No limit: the shared pool is the only bound.
    pub const UNLIMITED: Limit = Limit {
        alpha_q16: 0,
        fixed: u32::MAX,
    };

    /// A config threshold in cells: a static byte limit rounded up to cells, a dynamic alpha in
    /// fixed point.
    pub fn from_threshold(t: Threshold, cell_bytes: u32) -> Self {
        match t {
            Threshold::Static { bytes } => Limit {
                alpha_q16: 0,
                fixed: bytes.div_ceil(cell_bytes as u64).min(u32::MAX as u64) as u32,
            },
            Threshold::Dynamic { alpha } => Limit {
                alpha_q16: (alpha.max(0.0) * (1u64 << ALPHA_SHIFT) as f64).round() as u64,
                fixed: 0,
            },
            Threshold::Unlimited => Limit::UNLIMITED,
        }
    }

    /// The limit in cells given the free shared cells right now.
    #[inline]
    pub fn resolve(self, free_shared: u32) -> u32 {
        let dynamic = ((free_shared as u64 * self.alpha_q16) >> ALPHA_SHIFT).min(u32::MAX as u64) as u32;
        dynamic.saturating_add(self.fixed)
    }
}

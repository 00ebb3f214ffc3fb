//! Port schedulers: which eligible queue sends next. Today strict priority then WDRR
//! ([`sp_wdrr`]); the InfiniBand VL arbitration and EDF kinds join here behind the same shape
//! (an eligibility mask and head lengths in, a queue out).

pub mod sp_wdrr;

pub use sp_wdrr::Scheduler;

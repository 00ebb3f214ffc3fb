//! rocesw's configuration: the TOML schema people write, its validation, and the resolved model
//! the dataplane runs on. The control-plane process (`rocectl`) will live here too.

pub mod model;

pub use model::*;

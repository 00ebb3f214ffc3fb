//! Benchmarks and tools that measure rocesw.

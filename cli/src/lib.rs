//! The `kernbench` command line as a library: its arguments, the configuration they validate into,
//! the commands, and the sweeps, nccl-tests tables, comparisons with nccl-tests logs, tuner, plots
//! and whole-or-nothing output files they are made of, for tests and tools that drive them without a
//! process.
//!
//! Uses only the `kernbench` library's public API; the library never calls back up into this crate.

pub mod args;
pub mod commands;
pub mod compare;
pub mod config;
pub mod files;
pub mod memory;
pub mod plot;
pub mod sweep;
pub mod tune;

//! kernbench: write collective-communication kernels as plain Rust functions, run them on every PE of
//! a simulated accelerator under `cargo test`, and see whether they are right.
//!
//! This crate gathers the others behind one dependency:
//!
//! - the machine model, tiles, the `tl` API and the registry ([`kernbench_core`], re-exported at the
//!   root);
//! - `#[ccl_kernel]` (in [`prelude`]);
//! - the mock runtime ([`sim`]);
//! - the shipped kernels and the default `ccl.json` ([`algorithms`]);
//! - the [`Communicator`]: collectives on a system, each choosing its algorithm from the registry;
//! - [`estimate`]: a call's peak memory and messages, estimated before it runs;
//! - [`workload`]: the graph of compute phases and calls of a training step, from JSON or Chakra
//!   traces, and its schedule (its sizes are read by [`size`]).
//!
//! (`kernbench_core`'s deprecated name `workload` for its sample tensors is not re-exported here:
//! they are [`samples`].)
//!
//! The `kernbench` command line, with its sweeps, tables, tuner and plots, is the `kernbench-cli`
//! crate, so depending on this one brings no argument parser, progress bar or plotting library.

pub use kernbench_core::*;

/// The mock runtime.
pub mod sim {
    pub use kernbench_sim::*;
}

/// The shipped kernels and the default registry.
pub mod algorithms {
    pub use kernbench_algorithms::*;
}

pub mod calibrate;
mod communicator;
pub mod estimate;
pub mod size;
pub mod workload;

pub use communicator::{CallOptions, CallReport, CommError, Communicator, PreparedCall, TogetherCall};

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
//! - sweeps over sizes and algorithms ([`sweep`]), tuning of selection rules ([`tune`]) and the
//!   sample tensors both use ([`workload`]).
//!
//! The `kernbench` command line is the `kernbench-cli` crate, so depending on this one brings no
//! argument parser or progress bar.

pub use kernbench_core::*;

/// The mock runtime.
pub mod sim {
    pub use kernbench_sim::*;
}

/// The shipped kernels and the default registry.
pub mod algorithms {
    pub use kernbench_algorithms::*;
}

mod communicator;

pub use communicator::{CallOptions, CallReport, CommError, Communicator};
pub mod sweep;
pub mod tune;
pub mod workload;

//! kernbench: write, run and time collective-communication kernels on a simulated accelerator.

pub use kernbench_core::*;

//! Estimates of what a call will cost before it runs, its peak memory and its messages, for a
//! registry's algorithm: [`kernbench_core::collective::estimate`] (where the measurements and formulas
//! behind them are) given the algorithm's kernel and parameters. The [`Communicator`](crate::Communicator)
//! and the CLI check their limits with it.

use kernbench_core::collective::estimate;
use kernbench_core::{Algorithm, InstallPlan};

pub use kernbench_core::collective::estimate::{DEFAULT_MAX_MESSAGES, human, peak_memory};

/// The symmetric heap, in bytes, that one call of `algorithm` on `ranks` ranks of `input_bytes` each
/// allocates in all: [`estimate::symmetric_heap`] of its kernel.
///
/// # Examples
/// ```
/// use kernbench::estimate::symmetric_heap;
/// let registry = kernbench::algorithms::default_registry();
/// // 4 ranks, each an inbox of 4 inputs of 1 MiB.
/// assert_eq!(symmetric_heap(registry.get("symmetric_one_shot").unwrap(), 4, 1 << 20), 16 << 20);
/// assert_eq!(symmetric_heap(registry.get("ring").unwrap(), 4, 1 << 20), 0);
/// ```
pub fn symmetric_heap(algorithm: &Algorithm, ranks: usize, input_bytes: u64) -> u64 {
    estimate::symmetric_heap(algorithm.kernel.name, ranks, input_bytes)
}

/// The estimated number of messages one call of `algorithm` sends on `plan` (its plan on the
/// system), whatever the size: [`estimate::messages`] of its kernel and parameters.
///
/// # Examples
/// ```
/// use kernbench::System;
/// use kernbench::estimate::messages;
/// let registry = kernbench::algorithms::default_registry();
/// let ring = registry.get("ring").unwrap();
/// let plan = ring.plan(&System::shape(16, 1, 1, 1).unwrap()).unwrap();
/// // 16 ranks, each 2 (16 - 1) steps of 2 pieces on 4 lanes.
/// assert_eq!(messages(ring, &plan), 16 * 2 * 15 * 2 * 4);
/// ```
pub fn messages(algorithm: &Algorithm, plan: &InstallPlan) -> u64 {
    estimate::messages(algorithm.kernel.name, &algorithm.params, plan)
}

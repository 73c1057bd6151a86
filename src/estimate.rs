//! Estimates of what a call will cost before it runs, its peak memory and its messages, for a
//! registry's algorithm: [`kernbench_core::collective::estimate`] (where the measurements and formulas
//! behind them are) given the algorithm's kernel and parameters. The [`Communicator`](crate::Communicator)
//! and the CLI check their limits with it.

use kernbench_core::collective::estimate;
use kernbench_core::{Algorithm, Collective, InstallPlan, Layout, System};

pub use kernbench_core::collective::estimate::{
    DEFAULT_MAX_MESSAGES, RunSize, human, kept_messages, peak_memory, timing_only_memory,
};

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

/// What one call is estimated to cost, known before it runs: its ranks' largest input, its peak memory
/// and its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// The largest input of a rank, in bytes.
    pub input_bytes: u64,
    /// The peak memory ([`peak_memory`], the algorithm's [`symmetric_heap`], and an exact check's
    /// provenance run), in bytes.
    pub memory: u64,
    /// The messages it sends ([`messages`]).
    pub messages: u64,
}

/// What a call moves and checks, as its estimate counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checking {
    /// Data, checked against the collective's postcondition.
    Numeric,
    /// Data, checked numerically and exactly (a second, provenance run holds 8-byte signatures in
    /// place of the elements).
    Exact,
    /// No data: simulated time only, nothing checked.
    TimingOnly,
}

/// The least memory any call of `collective` on `ranks` ranks, the largest input `input_bytes`,
/// needs, moving and checking as `checking` says, whatever its algorithm: [`call`] estimates at least
/// this for every plan a validator lets hold those ranks (each rank a participant, running a lane or
/// more). Known from the tensor's layout alone, it refuses a call too large for a limit before the
/// call is planned (planning sixteen million PEs takes seconds and gigabytes).
///
/// # Examples
/// ```
/// use kernbench::Collective;
/// use kernbench::estimate::{Checking, RunSize, floor, peak_memory, timing_only_memory};
/// assert_eq!(floor(Collective::AllReduce, 8, 1 << 20, Checking::Numeric), peak_memory(Collective::AllReduce, 8, 1 << 20));
/// let one_lane_each =
///     RunSize { ranks: 8, lanes: 8, state: 0, queues: 0, slots: 0, hops: 0, channels: 0, messages: 0, kept: 0 };
/// assert_eq!(floor(Collective::AllReduce, 8, 1 << 20, Checking::TimingOnly), timing_only_memory(&one_lane_each));
/// ```
pub fn floor(collective: Collective, ranks: usize, input_bytes: u64, checking: Checking) -> u64 {
    match checking {
        Checking::Numeric | Checking::Exact => peak_memory(collective, ranks, input_bytes),
        Checking::TimingOnly => {
            let lanes = ranks as u64;
            timing_only_memory(&RunSize {
                ranks,
                lanes,
                state: 0,
                queues: 0,
                slots: 0,
                hops: 0,
                channels: 0,
                messages: 0,
                kept: 0,
            })
        }
    }
}

/// The estimate of one call of `collective` by `algorithm` on `plan` (its plan on `system`), its ranks
/// holding the shards of `layout`, moving and checking as `checking` says.
///
/// # Examples
/// ```
/// use kernbench::estimate::{Checking, RunSize, call, peak_memory, timing_only_memory};
/// use kernbench::{Collective, DpPolicy, Dtype, Layout, System};
/// let system = System::shape(4, 1, 1, 1).unwrap();
/// let registry = kernbench::algorithms::default_registry();
/// let one_shot = registry.get("symmetric_one_shot").unwrap();
/// let plan = one_shot.plan(&system).unwrap();
/// let layout = Layout::of(&system, Dtype::F32, 1, 1 << 18, DpPolicy::LEADER).unwrap();
/// let e = call(&system, Collective::AllReduce, one_shot, &plan, &layout, Checking::Numeric);
/// assert_eq!(e.input_bytes, 1 << 20);
/// // The data's peak and an inbox of every rank's input on each of 4 ranks.
/// assert_eq!(e.memory, peak_memory(Collective::AllReduce, 4, 1 << 20) + (16 << 20));
/// // Timing only: what its messages hold, whatever their bytes.
/// let t = call(&system, Collective::AllReduce, one_shot, &plan, &layout, Checking::TimingOnly);
/// let run = RunSize::of(one_shot.kernel.name, one_shot.launch(), &plan, &system, t.messages);
/// assert_eq!(t.memory, timing_only_memory(&run));
/// ```
pub fn call(
    system: &System,
    collective: Collective,
    algorithm: &Algorithm,
    plan: &InstallPlan,
    layout: &Layout,
    checking: Checking,
) -> Estimate {
    let element = layout.dtype.size() as u64;
    let largest = layout.elements_of(plan.participants().map(|p| p.pe)).flatten().max().unwrap_or(0);
    let input_bytes = (largest as u64).saturating_mul(element);
    let ranks = plan.len();
    let messages = messages(algorithm, plan);
    let data =
        || peak_memory(collective, ranks, input_bytes).saturating_add(symmetric_heap(algorithm, ranks, input_bytes));
    let memory = match checking {
        Checking::Numeric => data(),
        Checking::Exact => data().saturating_add(peak_memory(collective, ranks, (largest as u64).saturating_mul(8))),
        Checking::TimingOnly => {
            timing_only_memory(&RunSize::of(algorithm.kernel.name, algorithm.launch(), plan, system, messages))
        }
    };
    Estimate { input_bytes, memory, messages }
}

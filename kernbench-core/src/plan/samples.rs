//! Sample tensors for runs from the command line, examples and tests: deterministic small values that
//! every dtype holds exactly, so any correct algorithm gives the reference's bits. Uses the rest of
//! [`plan`](super), [`machine`](crate::machine) and [`tile`](crate::tile).

use crate::machine::System;
use crate::plan::{DistTensor, DpPolicy, LayoutError, Split, mapper_by_name};
use crate::tile::{Dtype, ReduceOp, Tile};

/// Every PE of a SIP holds an equal column block of the SIP's tensor: [`DpPolicy::EVERY_PE`].
pub const EVERY_PE: DpPolicy = DpPolicy::EVERY_PE;

/// Every cube's PE 0 holds an equal column block: [`DpPolicy::CUBE_LEADERS`].
pub const CUBE_LEADERS: DpPolicy = DpPolicy::CUBE_LEADERS;

/// The layout the built-in mapper called `mapper` needs ([`Mapper::layout`](crate::plan::Mapper)),
/// or the SIP leader's for a name no mapper has.
///
/// # Examples
/// ```
/// # #![allow(deprecated)]
/// use kernbench_core::DpPolicy;
/// use kernbench_core::samples::policy_for_mapper;
/// assert_eq!(policy_for_mapper("all_pes"), DpPolicy::EVERY_PE);
/// assert_eq!(policy_for_mapper("leader_only"), DpPolicy::LEADER);
/// ```
#[deprecated(note = "a mapper carries its layout: use `mapper_by_name(name)?.layout()` or `algorithm.mapper.layout()`")]
pub fn policy_for_mapper(mapper: &str) -> DpPolicy {
    mapper_by_name(mapper).map_or(DpPolicy::LEADER, |mapper| mapper.layout())
}

/// How many PEs of a SIP hold a shard of its tensor under `policy`.
///
/// # Examples
/// ```
/// use kernbench_core::{System, samples::{CUBE_LEADERS, shards_per_sip}};
/// let system = System::shape(2, 2, 2, 4).unwrap();
/// assert_eq!(shards_per_sip(&system, CUBE_LEADERS), 4);
/// ```
pub fn shards_per_sip(system: &System, policy: DpPolicy) -> usize {
    let parts = |split: Split, count: usize| match split {
        Split::RowWise | Split::ColumnWise => count,
        Split::Leader | Split::Replicated => 1,
    };
    parts(policy.cube, system.cubes_per_sip()) * parts(policy.pe, system.pes_per_cube())
}

/// A tensor of about `bytes_per_sip` bytes per SIP, spread as `policy` says.
///
/// The element count is rounded up so that every shard gets the same number of elements. Values are
/// small integers (for `prod`: 1 and -1), so sums and products are exact in every dtype.
///
/// # Errors
/// [`LayoutError::TooLarge`] when the tensor over every SIP would pass [`DistTensor::MAX_BYTES`].
///
/// # Examples
/// ```
/// use kernbench_core::{Dtype, ReduceOp, System, samples::{EVERY_PE, sample_tensor}};
/// let system = System::shape(2, 1, 1, 4).unwrap();
/// let t = sample_tensor(&system, 100, Dtype::F32, ReduceOp::Sum, EVERY_PE).unwrap();
/// assert_eq!(t.shape(), (1, 28)); // 25 elements, rounded up to a multiple of 4 PEs
/// assert_eq!(t.shards().len(), 8);
/// let huge = sample_tensor(&system, u64::MAX, Dtype::F32, ReduceOp::Sum, EVERY_PE);
/// assert!(matches!(huge, Err(kernbench_core::LayoutError::TooLarge { bytes: u64::MAX, .. })));
/// ```
pub fn sample_tensor(
    system: &System,
    bytes_per_sip: u64,
    dtype: Dtype,
    op: ReduceOp,
    policy: DpPolicy,
) -> Result<DistTensor, LayoutError> {
    let (shards, element) = (shards_per_sip(system, policy) as u64, dtype.size() as u64);
    // Saturating: a size past u64 is too large just as u64::MAX is.
    let elements = bytes_per_sip.div_ceil(element).max(1).checked_next_multiple_of(shards).unwrap_or(u64::MAX);
    DistTensor::check_size(elements.saturating_mul(element).saturating_mul(system.sips() as u64))?;
    // Fits a 64-bit usize: check_size bounds it by MAX_BYTES.
    let elements = elements as usize;
    let ranks = (0..system.sips())
        .map(|sip| {
            let period: Vec<f64> = (0..SAMPLE_PERIOD).map(|i| sample_value(sip, i, op)).collect();
            Tile::try_repeating(dtype, elements, &period)
        })
        .collect::<Result<Vec<Tile>, _>>()?;
    DistTensor::distribute(system, &ranks, 1, elements, policy)
}

/// The tensor of [`sample_tensor`]'s shape, its tiles [without data](Tile::without_data): what a
/// timing-only call runs on, of any size (it holds no bytes, so no size is too large to make).
///
/// # Examples
/// ```
/// use kernbench_core::{Dtype, System, samples::{EVERY_PE, sample_tensor, tensor_without_data}};
/// let system = System::shape(2, 1, 1, 4).unwrap();
/// let t = tensor_without_data(&system, 100, Dtype::F32, EVERY_PE).unwrap();
/// let with_data = sample_tensor(&system, 100, Dtype::F32, kernbench_core::ReduceOp::Sum, EVERY_PE).unwrap();
/// assert_eq!(t.layout(), with_data.layout());
/// assert!(t.shards().values().all(|tile| !tile.has_data()));
/// let huge = tensor_without_data(&system, 1 << 40, Dtype::F32, EVERY_PE).unwrap();
/// assert_eq!(huge.shape(), (1, 1 << 38));
/// ```
///
/// # Errors
/// [`LayoutError::ShapeOverflow`] when the element count does not fit the machine's integers.
pub fn tensor_without_data(
    system: &System,
    bytes_per_sip: u64,
    dtype: Dtype,
    policy: DpPolicy,
) -> Result<DistTensor, LayoutError> {
    let (shards, element) = (shards_per_sip(system, policy) as u64, dtype.size() as u64);
    let elements = bytes_per_sip.div_ceil(element).max(1).checked_next_multiple_of(shards).unwrap_or(u64::MAX);
    let elements = usize::try_from(elements).map_err(|_| LayoutError::ShapeOverflow { rows: 1, cols: usize::MAX })?;
    let ranks: Vec<Tile> = (0..system.sips()).map(|_| Tile::without_data(dtype, elements)).collect();
    DistTensor::distribute(system, &ranks, 1, elements, policy)
}

/// Elements after which a rank's sample repeats: [`sample_value`] depends on `i` only modulo 7.
const SAMPLE_PERIOD: usize = 7;

/// The value of element `i` of rank `sip`: in -3..=3, or ±1 for products; it varies with both, so
/// that no rank's input is the reduction of all of them everywhere (with values constant per rank, a
/// kernel that left rank 0's input in its output passed on 4 ranks: -3 + 2 + 0 - 2 = -3).
fn sample_value(sip: usize, i: usize, op: ReduceOp) -> f64 {
    let k = (sip * 5 + i * 3) % 7;
    match op {
        ReduceOp::Prod => {
            if k % 2 == 0 {
                1.0
            } else {
                -1.0
            }
        }
        _ => k as f64 - 3.0,
    }
}

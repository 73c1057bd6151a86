//! The tensor of a sweep's point: how its nccl-tests size is laid out over the PEs that hold data and
//! rounded to do so.
//!
//! Uses [`super::error`].

use kernbench::samples::{sample_tensor, shards_per_sip};
use kernbench::{Collective, Counts, DistTensor, DpPolicy, Dtype, LayoutError, ReduceOp, System};
use serde::Serialize;

/// The seed of all-to-all-v's counts unless a sweep names another (`--counts-seed`).
pub const DEFAULT_COUNTS_SEED: u64 = 1;

/// The per-pair counts of a point of an exchange by counts, every rank's input `elements` long:
/// all-to-all-v's uneven counts drawn from `seed`, each rank sending all its input, some pairs
/// nothing ([`Counts::seeded`]); send/recv's nccl-tests shift, each rank sending all its input to
/// rank + 1 ([`Counts::shift`]). `None` for the collectives that take no counts.
///
/// # Examples
/// ```
/// use kernbench::Collective;
/// use kernbench_cli::sweep::point_counts;
/// let counts = point_counts(Collective::AllToAllV, 8, 1000, 1).unwrap();
/// assert!((0..8).all(|r| counts.sent_by(r) == 1000));
/// assert_eq!(point_counts(Collective::SendRecv, 8, 1000, 1).unwrap().count(7, 0), 1000);
/// assert!(point_counts(Collective::AllToAll, 8, 1000, 1).is_none());
/// ```
pub fn point_counts(collective: Collective, ranks: usize, elements: usize, seed: u64) -> Option<Counts> {
    match collective {
        Collective::AllToAllV => Some(Counts::seeded(ranks, elements, seed)),
        Collective::SendRecv => Some(Counts::shift(ranks, elements)),
        _ => None,
    }
}

/// A size that does not run as asked, as nccl-tests rounds its sizes: what was asked, what runs and
/// why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rounding {
    /// The size asked for, in bytes.
    pub asked: u64,
    /// The size that runs, in the same terms: nccl-tests' size, a SIP's tensor (an all-gather's
    /// gathered output).
    pub runs: u64,
    /// Why, such as `whole f32 elements`.
    pub why: String,
}

impl std::fmt::Display for Rounding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "size {} runs as {} bytes: {}", self.asked, self.runs, self.why)
    }
}

/// The sample tensor of a point of nccl-tests size `size` of `collective`, laid out as `policy`, with
/// `ranks` ranks in all (the PEs that hold it): every holder gets an equal share of `size` (at least
/// one element), of which an all-gather contributes one rank's part and an all-to-all rounds up to
/// one block per rank; with how `size` was rounded to get there, if it was.
///
/// # Errors
/// [`LayoutError::TooLarge`] when the tensor is larger than a run may allocate.
///
/// # Examples
/// ```
/// use kernbench::{Collective, Dtype, ReduceOp, System, samples::EVERY_PE};
/// use kernbench_cli::sweep::point_tensor;
/// let system = System::shape(2, 1, 1, 4).unwrap();
/// let data = (Dtype::F32, ReduceOp::Sum);
/// // 25 elements per SIP: 6 per PE, rounded up to a block for each of the 8 ranks.
/// let (t, rounded) = point_tensor(&system, Collective::AllToAll, 100, data, EVERY_PE, 8).unwrap();
/// assert_eq!(t.shape(), (1, 32));
/// assert_eq!(rounded.unwrap().to_string(), "size 100 runs as 128 bytes: \
///     whole elements on each of a SIP's 4 PEs holding data; whole blocks for each of the 8 ranks");
/// // An all-gather's size is its output: each PE's share (64 elements) gathers 8 contributions of 8.
/// let (t, rounded) = point_tensor(&system, Collective::AllGather, 1024, data, EVERY_PE, 8).unwrap();
/// assert_eq!((t.shape(), rounded), ((1, 32), None));
/// ```
pub fn point_tensor(
    system: &System,
    collective: Collective,
    size: u64,
    (dtype, op): (Dtype, ReduceOp),
    policy: DpPolicy,
    ranks: usize,
) -> Result<(DistTensor, Option<Rounding>), LayoutError> {
    let (bytes, rounded) = point_size(system, collective, size, dtype, policy, ranks);
    Ok((sample_tensor(system, bytes, dtype, op, policy)?, rounded))
}

/// The bytes of each SIP's tensor at a point of nccl-tests size `size` ([`point_tensor`] makes that
/// tensor), with how `size` was rounded to get there, if it was.
pub fn point_size(
    system: &System,
    collective: Collective,
    size: u64,
    dtype: Dtype,
    policy: DpPolicy,
    ranks: usize,
) -> (u64, Option<Rounding>) {
    let (shards, ranks, element) = (shards_per_sip(system, policy) as u64, ranks.max(1) as u64, dtype.size() as u64);
    let mut why = Vec::new();
    if size % element != 0 {
        why.push(format!("whole {} elements", dtype.name()));
    }
    let whole = size / element;
    if shards > 1 && (whole % shards != 0 || whole < shards) {
        why.push(format!("whole elements on each of a SIP's {shards} PEs holding data"));
    }
    let mut elements = (whole / shards).max(1);
    let mut gathered = 1;
    match collective {
        Collective::AllGather => {
            if elements % ranks != 0 {
                why.push(format!("an equal whole number of elements from each of the {ranks} ranks"));
            }
            elements = (elements / ranks).max(1);
            gathered = ranks;
        }
        // Saturating, as the bytes below: sample_tensor rejects a size past u64 as too large.
        Collective::AllToAll => {
            if elements % ranks != 0 {
                why.push(format!("whole blocks for each of the {ranks} ranks"));
            }
            elements = elements.checked_next_multiple_of(ranks).unwrap_or(u64::MAX);
        }
        _ => {}
    }
    let bytes = elements.saturating_mul(shards).saturating_mul(element);
    let runs = bytes.saturating_mul(gathered);
    // Too few elements for even one per PE is rounded up to one, which the checks above name.
    let rounded = (runs != size).then(|| Rounding { asked: size, runs, why: why.join("; ") });
    (bytes, rounded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench::samples::EVERY_PE;

    #[test]
    fn a_point_too_large_to_allocate_is_an_error_for_every_collective() {
        let system = System::shape(2, 1, 1, 4).unwrap();
        for collective in Collective::ALL {
            for size in [8_000_000_000 << 30, u64::MAX] {
                let point = point_tensor(&system, collective, size, (Dtype::F32, ReduceOp::Sum), EVERY_PE, 8);
                assert!(matches!(point, Err(LayoutError::TooLarge { .. })), "{collective} of {size} bytes");
            }
        }
    }
}

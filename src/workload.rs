//! Sample tensors for runs from the command line and for tests: deterministic small values that every
//! dtype holds exactly, so any correct algorithm gives the reference's bits.

use kernbench_core::{DistTensor, DpPolicy, Dtype, LayoutError, LayoutKind, ReduceOp, Split, System, Tile};

/// A tensor of about `bytes_per_rank` bytes per SIP.
///
/// With [`LayoutKind::OnePe`] each rank's data sits whole on its (cube 0, PE 0); with
/// [`LayoutKind::MultiPe`] every PE of the SIP holds an equal column block (the element count is rounded
/// up to a multiple of the PEs per SIP). Values are small integers (for `prod`: 1 and -1), so sums and
/// products are exact in every dtype.
///
/// # Errors
/// [`LayoutError`] when the shape is too large.
///
/// # Examples
/// ```
/// use kernbench::{Dtype, LayoutKind, ReduceOp, System, workload::sample_tensor};
/// let system = System::shape(2, 1, 1, 4).unwrap();
/// let t = sample_tensor(&system, 100, Dtype::F32, ReduceOp::Sum, LayoutKind::MultiPe).unwrap();
/// assert_eq!(t.shape(), (1, 28)); // 25 elements, rounded up to a multiple of 4 PEs
/// assert_eq!(t.shards().len(), 8);
/// ```
pub fn sample_tensor(
    system: &System,
    bytes_per_rank: u64,
    dtype: Dtype,
    op: ReduceOp,
    layout: LayoutKind,
) -> Result<DistTensor, LayoutError> {
    let mut elements = (bytes_per_rank as usize).div_ceil(dtype.size()).max(1);
    let policy = match layout {
        LayoutKind::OnePe => DpPolicy::LEADER,
        LayoutKind::MultiPe => {
            elements = elements.next_multiple_of(system.pes_per_sip());
            DpPolicy::new(Split::ColumnWise, Split::ColumnWise)
        }
    };
    let ranks: Vec<Tile> = (0..system.sips())
        .map(|sip| {
            let values: Vec<f64> = (0..elements).map(|i| sample_value(sip, i, op)).collect();
            Tile::from_f64s(dtype, &values)
        })
        .collect();
    DistTensor::distribute(system, &ranks, 1, elements, policy)
}

/// The value of element `i` of rank `sip`: in -3..=3, or ±1 for products.
fn sample_value(sip: usize, i: usize, op: ReduceOp) -> f64 {
    let k = (sip * 131 + i * 7) % 7;
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

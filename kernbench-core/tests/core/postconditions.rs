//! Postconditions: every collective's reference outputs over three ranks against hand-computed ones,
//! and `check` on right outputs, wrong elements, wrong shapes, float sums reduced in another order and
//! errors beyond the tolerance. Scenarios are functions over (collective, dtype); the `#[test]`s call
//! them.

use std::sync::Arc;

use kernbench_core::postcondition::{CallFacts, Mismatch, Postcondition, PostconditionError, check, reference};
use kernbench_core::{Collective, Counts, Dtype, ReduceOp, Tile, TileError};

/// Three ranks' inputs: chunks of 5 over 3 ranks are 0..2, 2..4 and 4..5. Every sum, product, max and
/// min below is exact in bf16, the narrowest dtype.
const INPUTS: [[f64; 5]; 3] =
    [[1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 20.0, 30.0, 40.0, 50.0], [-4.0, 6.0, -8.0, 10.0, -8.0]];

/// Each rank's output buffer before the call: what `reduce` leaves on the ranks that are not its root.
const BEFORE: [[f64; 5]; 3] = [[-1.0; 5], [-2.0; 5], [-3.0; 5]];

/// The root of broadcast and reduce, unless a test says otherwise.
const ROOT: usize = 1;

/// `INPUTS` summed over the ranks.
const SUM: [f64; 5] = [7.0, 28.0, 25.0, 54.0, 47.0];

/// The outputs of `collective` (sum, root 1) over `INPUTS`, worked out by hand.
fn hand_computed(collective: Collective) -> Vec<Vec<f64>> {
    match collective {
        Collective::AllReduce => vec![SUM.to_vec(); 3],
        Collective::AllGather => {
            vec![vec![1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, -4.0, 6.0, -8.0, 10.0, -8.0]; 3]
        }
        Collective::ReduceScatter => vec![vec![7.0, 28.0], vec![25.0, 54.0], vec![47.0]],
        Collective::Broadcast => vec![INPUTS[1].to_vec(); 3],
        Collective::Reduce => vec![BEFORE[0].to_vec(), SUM.to_vec(), BEFORE[2].to_vec()],
        Collective::AllToAll => {
            vec![vec![1.0, 2.0, 10.0, 20.0, -4.0, 6.0], vec![3.0, 4.0, 30.0, 40.0, -8.0, 10.0], vec![5.0, 50.0, -8.0]]
        }
        // By `counts`: rank 0 keeps 2 and sends 3 to rank 2; rank 1 sends 1 to rank 0 and keeps 4;
        // rank 2 sends 2 to rank 1 and keeps 2 (of its 5).
        Collective::AllToAllV => {
            vec![vec![1.0, 2.0, 10.0], vec![20.0, 30.0, 40.0, 50.0, -4.0, 6.0], vec![3.0, 4.0, 5.0, -8.0, 10.0]]
        }
        // Each rank's first 2 elements to the next.
        Collective::SendRecv => vec![vec![-4.0, 6.0], vec![1.0, 2.0], vec![10.0, 20.0]],
    }
}

/// The per-pair counts of the collectives that take them.
fn counts(collective: Collective) -> Option<Arc<Counts>> {
    match collective {
        Collective::AllToAllV => {
            Some(Arc::new(Counts::new(vec![vec![2, 0, 3], vec![1, 4, 0], vec![0, 2, 2]]).unwrap()))
        }
        Collective::SendRecv => Some(Arc::new(Counts::shift(3, 2))),
        _ => None,
    }
}

fn sum_call(collective: Collective) -> CallFacts {
    CallFacts { collective, op: ReduceOp::Sum, root: ROOT, counts: counts(collective) }
}

/// One tile of `dtype` per row.
fn tiles<R: AsRef<[f64]>>(dtype: Dtype, rows: &[R]) -> Vec<Tile> {
    rows.iter().map(|row| Tile::from_f64s(dtype, row.as_ref())).collect()
}

/// `check` of `outputs` for `call` over `INPUTS` and `BEFORE` in `dtype`.
fn check_outputs(call: &CallFacts, dtype: Dtype, outputs: &[Tile]) -> Postcondition {
    check(call, &tiles(dtype, &INPUTS), &tiles(dtype, &BEFORE), outputs).unwrap()
}

const HELD: Postcondition = Postcondition { held: true, wrong: 0, first: None };

/// `outputs` with element `index` of `rank` replaced by `value`.
fn with_element(outputs: &[Vec<f64>], rank: usize, index: usize, value: f64) -> Vec<Vec<f64>> {
    let mut outputs = outputs.to_vec();
    outputs[rank][index] = value;
    outputs
}

// ---------------------------------------------------------------------------------------------------
// Every collective: the reference, and `check` on right and wrong outputs.
// ---------------------------------------------------------------------------------------------------

fn reference_is_hand_computed(collective: Collective) {
    for dtype in Dtype::ALL {
        let got = reference(&sum_call(collective), &tiles(dtype, &INPUTS), &tiles(dtype, &BEFORE)).unwrap();
        assert_eq!(got, tiles(dtype, &hand_computed(collective)), "{collective} {dtype}");
    }
}

fn check_holds_on_right_outputs(collective: Collective) {
    for dtype in Dtype::ALL {
        let outputs = tiles(dtype, &hand_computed(collective));
        assert_eq!(check_outputs(&sum_call(collective), dtype, &outputs), HELD, "{collective} {dtype}");
    }
}

/// The last element of the last rank is 99: one wrong element, located.
fn one_wrong_element_is_counted_and_located(collective: Collective) {
    let right = hand_computed(collective);
    let index = right[2].len() - 1;
    let wrong = with_element(&right, 2, index, 99.0);
    for dtype in Dtype::ALL {
        let result = check_outputs(&sum_call(collective), dtype, &tiles(dtype, &wrong));
        let first = Mismatch { rank: 2, index: Some(index), got: "99".into(), want: right[2][index].to_string() };
        assert_eq!(result, Postcondition { held: false, wrong: 1, first: Some(first) }, "{collective} {dtype}");
    }
}

/// Element 0 of rank 0 and every element of rank 2 are wrong: all are counted, the first is rank 0's.
fn every_wrong_element_is_counted(collective: Collective) {
    let right = hand_computed(collective);
    let mut wrong = with_element(&right, 0, 0, 99.0);
    wrong[2] = vec![99.0; right[2].len()];
    for dtype in Dtype::ALL {
        let result = check_outputs(&sum_call(collective), dtype, &tiles(dtype, &wrong));
        let first = Mismatch { rank: 0, index: Some(0), got: "99".into(), want: right[0][0].to_string() };
        let want = Postcondition { held: false, wrong: 1 + right[2].len(), first: Some(first) };
        assert_eq!(result, want, "{collective} {dtype}");
    }
}

/// Rank 1's output one element too long, then one too short, then of another dtype: one wrong output
/// each time, with no element index.
fn wrong_shape_output_fails_without_index(collective: Collective) {
    let right = hand_computed(collective);
    let len = right[1].len();
    for dtype in Dtype::ALL {
        let other = if dtype == Dtype::I32 { Dtype::I64 } else { Dtype::I32 };
        let mut longer = right.clone();
        longer[1].push(0.0);
        let mut shorter = right.clone();
        shorter[1].pop();
        let mut retyped = tiles(dtype, &right);
        retyped[1] = Tile::from_f64s(other, &right[1]);
        for (outputs, got) in [
            (tiles(dtype, &longer), format!("{dtype}[{}]", len + 1)),
            (tiles(dtype, &shorter), format!("{dtype}[{}]", len - 1)),
            (retyped, format!("{other}[{len}]")),
        ] {
            let result = check_outputs(&sum_call(collective), dtype, &outputs);
            let first = Mismatch { rank: 1, index: None, got: got.clone(), want: format!("{dtype}[{len}]") };
            assert_eq!(result, Postcondition { held: false, wrong: 1, first: Some(first) }, "{collective} {got}");
        }
    }
}

/// Two outputs, or four, for three ranks: the missing or extra output is the wrong one.
fn wrong_number_of_outputs_fails(collective: Collective) {
    let right = tiles(Dtype::F32, &hand_computed(collective));
    let result = check_outputs(&sum_call(collective), Dtype::F32, &right[..2]);
    let first = Mismatch { rank: 2, index: None, got: "2 outputs".into(), want: "3 outputs".into() };
    assert_eq!(result, Postcondition { held: false, wrong: 1, first: Some(first) }, "{collective}, too few");

    let mut extra = right;
    extra.push(extra[0].clone());
    let result = check_outputs(&sum_call(collective), Dtype::F32, &extra);
    let first = Mismatch { rank: 3, index: None, got: "4 outputs".into(), want: "3 outputs".into() };
    assert_eq!(result, Postcondition { held: false, wrong: 1, first: Some(first) }, "{collective}, too many");
}

macro_rules! every_collective {
    ($($module:ident: $collective:ident;)*) => {$(
        mod $module {
            use super::*;

            #[test]
            fn reference_is_hand_computed() {
                super::reference_is_hand_computed(Collective::$collective);
            }

            #[test]
            fn check_holds_on_right_outputs() {
                super::check_holds_on_right_outputs(Collective::$collective);
            }

            #[test]
            fn one_wrong_element_is_counted_and_located() {
                super::one_wrong_element_is_counted_and_located(Collective::$collective);
            }

            #[test]
            fn every_wrong_element_is_counted() {
                super::every_wrong_element_is_counted(Collective::$collective);
            }

            #[test]
            fn wrong_shape_output_fails_without_index() {
                super::wrong_shape_output_fails_without_index(Collective::$collective);
            }

            #[test]
            fn wrong_number_of_outputs_fails() {
                super::wrong_number_of_outputs_fails(Collective::$collective);
            }
        }
    )*};
}

every_collective! {
    all_reduce: AllReduce;
    all_gather: AllGather;
    reduce_scatter: ReduceScatter;
    broadcast: Broadcast;
    reduce: Reduce;
    all_to_all: AllToAll;
}

// ---------------------------------------------------------------------------------------------------
// Reducing collectives: floating-point tolerance.
// ---------------------------------------------------------------------------------------------------

/// Whether `rank`'s output holds reduced data after `call`: every rank's does for all-reduce and
/// reduce-scatter, only the root's for reduce.
fn holds_reduced(call: &CallFacts, rank: usize) -> bool {
    call.collective != Collective::Reduce || rank == call.root
}

/// `outputs` (per rank, for `call`) with `f` applied to every element that holds reduced data.
fn map_reduced(call: &CallFacts, outputs: &[Tile], f: impl Fn(f64) -> f64) -> Vec<Tile> {
    outputs
        .iter()
        .enumerate()
        .map(|(rank, t)| {
            if holds_reduced(call, rank) {
                Tile::from_f64s(t.dtype(), &t.to_f64_vec().into_iter().map(&f).collect::<Vec<_>>())
            } else {
                t.clone()
            }
        })
        .collect()
}

/// How many elements of `outputs` hold reduced data.
fn reduced_elements(call: &CallFacts, outputs: &[Tile]) -> usize {
    outputs.iter().enumerate().filter(|&(rank, _)| holds_reduced(call, rank)).map(|(_, t)| t.len()).sum()
}

/// The outputs of `call` with the sum taken as (rank 2 + rank 0) + rank 1 rather than in rank order.
fn summed_in_another_order(call: &CallFacts, inputs: &[Tile], before: &[Tile]) -> Vec<Tile> {
    let sum = (&(&inputs[2] + &inputs[0]).unwrap() + &inputs[1]).unwrap();
    match call.collective {
        Collective::AllReduce => vec![sum; 3],
        Collective::ReduceScatter => (0..3).map(|r| sum.chunk(r, 3).unwrap()).collect(),
        Collective::Reduce => (0..3).map(|r| if r == call.root { sum.clone() } else { before[r].clone() }).collect(),
        other => panic!("{other} does not reduce"),
    }
}

/// The machine epsilon of a float dtype.
fn epsilon(dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F32 => f64::from(f32::EPSILON),
        Dtype::F16 => f64::from(half::f16::EPSILON),
        Dtype::BF16 => f64::from(half::bf16::EPSILON),
        integer => panic!("{integer} has no epsilon"),
    }
}

/// `big` + 1 rounds back to `big` (a tie, to even), so summing rank 2's 1 into rank 0's `big` before
/// rank 1's `-big` cancels it gives 0 where rank order gives 1: a rounding difference well inside
/// `(n - 1) eps` of the magnitudes. It is in the last element, which reduce-scatter gives rank 2, so the
/// tolerance must be taken from the inputs' elements that rank's chunk came from.
fn float_sum_in_another_order_passes(collective: Collective, dtype: Dtype) {
    let big = 2.0 / epsilon(dtype);
    let inputs = tiles(dtype, &[[1.5, 0.25, big], [2.5, 0.5, -big], [3.5, 0.75, 1.0]]);
    let before = tiles(dtype, &[[-1.0; 3]; 3]);
    let call = sum_call(collective);
    let reordered = summed_in_another_order(&call, &inputs, &before);
    let want = reference(&call, &inputs, &before).unwrap();
    assert_ne!(reordered, want, "{collective} {dtype}: the other order should round differently");
    assert_eq!(check(&call, &inputs, &before, &reordered).unwrap(), HELD, "{collective} {dtype}");
}

/// Every reduced element 1% too large: far outside f32's `(n - 1) eps`, so each one is wrong.
fn f32_sum_one_percent_off_fails(collective: Collective) {
    let call = sum_call(collective);
    let right = tiles(Dtype::F32, &hand_computed(collective));
    let off = map_reduced(&call, &right, |v| v * 1.01);
    let result = check_outputs(&call, Dtype::F32, &off);
    assert!(!result.held, "{collective}");
    assert_eq!(result.wrong, reduced_elements(&call, &right), "{collective}");
}

/// Sums of 1 + 1 + 2, 2 + 2 + 4 and 4 + 4 + 8 over three ranks (powers of two: the units in their
/// last place are `eps` times them) may each be off by `(3 - 1) * eps` times the sum of the magnitudes
/// that went into them: 2 units in the last place. 2 pass, 3 fail, either side.
fn float_sum_tolerance_is_n_minus_1_eps(collective: Collective, dtype: Dtype) {
    let call = sum_call(collective);
    let inputs = tiles(dtype, &[[1.0, 2.0, 4.0], [1.0, 2.0, 4.0], [2.0, 4.0, 8.0]]);
    let before = tiles(dtype, &[[-1.0; 3]; 3]);
    let want = reference(&call, &inputs, &before).unwrap();
    let eps = epsilon(dtype);
    for ulps in [-2.0, 2.0] {
        let inside = map_reduced(&call, &want, |v| v + ulps * eps * v);
        assert_eq!(check(&call, &inputs, &before, &inside).unwrap(), HELD, "{collective} {dtype}, {ulps} ulps");
    }
    for ulps in [-3.0, 3.0] {
        let outside = map_reduced(&call, &want, |v| v + ulps * eps * v);
        let result = check(&call, &inputs, &before, &outside).unwrap();
        assert!(!result.held, "{collective} {dtype}, {ulps} ulps");
        assert_eq!(result.wrong, reduced_elements(&call, &want), "{collective} {dtype}, {ulps} ulps");
    }
}

macro_rules! every_reducing_collective {
    ($($module:ident: $collective:ident;)*) => {$(
        mod $module {
            use super::*;

            #[test]
            fn f32_sum_in_another_order_passes() {
                float_sum_in_another_order_passes(Collective::$collective, Dtype::F32);
            }

            #[test]
            fn f16_sum_in_another_order_passes() {
                float_sum_in_another_order_passes(Collective::$collective, Dtype::F16);
            }

            #[test]
            fn bf16_sum_in_another_order_passes() {
                float_sum_in_another_order_passes(Collective::$collective, Dtype::BF16);
            }

            #[test]
            fn f32_sum_one_percent_off_fails() {
                super::f32_sum_one_percent_off_fails(Collective::$collective);
            }

            #[test]
            fn f32_sum_tolerance_is_n_minus_1_eps() {
                float_sum_tolerance_is_n_minus_1_eps(Collective::$collective, Dtype::F32);
            }

            #[test]
            fn f16_sum_tolerance_is_n_minus_1_eps() {
                float_sum_tolerance_is_n_minus_1_eps(Collective::$collective, Dtype::F16);
            }

            #[test]
            fn bf16_sum_tolerance_is_n_minus_1_eps() {
                float_sum_tolerance_is_n_minus_1_eps(Collective::$collective, Dtype::BF16);
            }
        }
    )*};
}

every_reducing_collective! {
    tolerance_all_reduce: AllReduce;
    tolerance_reduce_scatter: ReduceScatter;
    tolerance_reduce: Reduce;
}

#[test]
fn float_max_and_min_are_exact() {
    for op in [ReduceOp::Max, ReduceOp::Min] {
        let call = CallFacts { collective: Collective::AllReduce, op, root: 0, counts: None };
        let inputs = tiles(Dtype::F32, &INPUTS);
        let want = reference(&call, &inputs, &inputs).unwrap();
        let off = map_reduced(&call, &want, |v| f64::from(f32::from_bits((v as f32).to_bits() + 1)));
        let result = check(&call, &inputs, &inputs, &off).unwrap();
        assert_eq!((result.held, result.wrong), (false, 15), "{op}: one ulp off everywhere");
    }
}

#[test]
fn integer_sums_are_exact() {
    for dtype in [Dtype::I32, Dtype::I64] {
        let wrong = with_element(&hand_computed(Collective::AllReduce), 0, 3, 55.0);
        let result = check_outputs(&sum_call(Collective::AllReduce), dtype, &tiles(dtype, &wrong));
        assert_eq!((result.held, result.wrong), (false, 1), "{dtype}: 55 for 54");
    }
}

#[test]
fn non_reducing_float_collectives_are_exact() {
    for collective in [Collective::AllGather, Collective::Broadcast, Collective::AllToAll] {
        let call = sum_call(collective);
        let right = tiles(Dtype::F32, &hand_computed(collective));
        let mut off = right.clone();
        let bumped = f32::from_bits(right[0].to_vec::<f32>().unwrap()[0].to_bits() + 1);
        off[0].write_at(0, &Tile::from_vec(vec![bumped])).unwrap();
        let result = check_outputs(&call, Dtype::F32, &off);
        assert_eq!((result.held, result.wrong), (false, 1), "{collective}: one ulp off");
    }
}

// ---------------------------------------------------------------------------------------------------
// Other operators, roots and shapes.
// ---------------------------------------------------------------------------------------------------

#[test]
fn all_reduce_of_every_op_is_hand_computed() {
    let expected: [(ReduceOp, [f64; 5]); 5] = [
        (ReduceOp::Sum, SUM),
        (ReduceOp::Prod, [-40.0, 240.0, -720.0, 1600.0, -2000.0]),
        (ReduceOp::Max, [10.0, 20.0, 30.0, 40.0, 50.0]),
        (ReduceOp::Min, [-4.0, 2.0, -8.0, 4.0, -8.0]),
        // 7 / 3, 28 / 3, 25 / 3, 54 / 3, 47 / 3, truncated toward zero.
        (ReduceOp::Avg, [2.0, 9.0, 8.0, 18.0, 15.0]),
    ];
    for (op, want) in expected {
        let call = CallFacts { collective: Collective::AllReduce, op, root: 0, counts: None };
        let got = reference(&call, &tiles(Dtype::I32, &INPUTS), &tiles(Dtype::I32, &BEFORE)).unwrap();
        assert_eq!(got, tiles(Dtype::I32, &[want; 3]), "{op}");
        assert_eq!(check_outputs(&call, Dtype::I32, &got), HELD, "{op}");
    }
}

#[test]
fn float_avg_passes_and_one_percent_off_fails() {
    let call = CallFacts { collective: Collective::AllReduce, op: ReduceOp::Avg, root: 0, counts: None };
    let inputs = tiles(Dtype::F32, &[[3.0, 6.0], [6.0, 12.0], [9.0, 30.0]]);
    let want = tiles(Dtype::F32, &[[6.0, 16.0]; 3]);
    assert_eq!(reference(&call, &inputs, &inputs).unwrap(), want);
    assert_eq!(check(&call, &inputs, &inputs, &want).unwrap(), HELD);
    let off = map_reduced(&call, &want, |v| v * 1.01);
    assert_eq!(check(&call, &inputs, &inputs, &off).unwrap().wrong, 6);
}

#[test]
fn reduce_leaves_non_root_outputs_as_before() {
    for root in 0..3 {
        let call = CallFacts { collective: Collective::Reduce, op: ReduceOp::Sum, root, counts: None };
        let mut right: Vec<Vec<f64>> = BEFORE.iter().map(|b| b.to_vec()).collect();
        right[root] = SUM.to_vec();
        let got = reference(&call, &tiles(Dtype::I32, &INPUTS), &tiles(Dtype::I32, &BEFORE)).unwrap();
        assert_eq!(got, tiles(Dtype::I32, &right), "root {root}");
        assert_eq!(check_outputs(&call, Dtype::I32, &got), HELD, "root {root}");
    }
}

#[test]
fn reduce_fails_when_non_roots_also_hold_the_result() {
    let everywhere = tiles(Dtype::I32, &[SUM; 3]);
    let result = check_outputs(&sum_call(Collective::Reduce), Dtype::I32, &everywhere);
    let first = Mismatch { rank: 0, index: Some(0), got: "7".into(), want: "-1".into() };
    assert_eq!(result, Postcondition { held: false, wrong: 10, first: Some(first) });
}

#[test]
fn broadcast_from_every_root() {
    for (root, root_input) in INPUTS.iter().enumerate() {
        let call = CallFacts { collective: Collective::Broadcast, op: ReduceOp::Sum, root, counts: None };
        let got = reference(&call, &tiles(Dtype::F16, &INPUTS), &tiles(Dtype::F16, &BEFORE)).unwrap();
        assert_eq!(got, tiles(Dtype::F16, &[root_input; 3]), "root {root}");
    }
}

#[test]
fn root_out_of_range_is_an_error() {
    for collective in [Collective::Broadcast, Collective::Reduce] {
        let call = CallFacts { collective, op: ReduceOp::Sum, root: 3, counts: None };
        let (inputs, before) = (tiles(Dtype::F32, &INPUTS), tiles(Dtype::F32, &BEFORE));
        let bad_root = PostconditionError::BadRoot { root: 3, ranks: 3 };
        assert_eq!(reference(&call, &inputs, &before), Err(bad_root.clone()), "{collective}");
        assert_eq!(check(&call, &inputs, &before, &inputs), Err(bad_root), "{collective}");
    }
}

#[test]
fn inputs_that_do_not_combine_are_an_error() {
    let mut mixed = tiles(Dtype::F32, &INPUTS);
    mixed[2] = Tile::from_f64s(Dtype::I32, &INPUTS[2]);
    let mut ragged = tiles(Dtype::F32, &INPUTS);
    ragged[1] = Tile::from_f64s(Dtype::F32, &INPUTS[1][..4]);
    let before = tiles(Dtype::F32, &BEFORE);
    for collective in [Collective::AllReduce, Collective::ReduceScatter, Collective::Reduce] {
        let call = sum_call(collective);
        let mismatch = TileError::DtypeMismatch { left: Dtype::F32, right: Dtype::I32 };
        assert_eq!(reference(&call, &mixed, &before), Err(mismatch.into()), "{collective}");
        let short = TileError::LengthMismatch { left: 5, right: 4 };
        assert_eq!(reference(&call, &ragged, &before), Err(short.into()), "{collective}");
    }
    let mismatch = TileError::DtypeMismatch { left: Dtype::F32, right: Dtype::I32 };
    assert_eq!(reference(&sum_call(Collective::AllGather), &mixed, &before), Err(mismatch.into()));
}

/// 7 elements over 3 ranks are chunked 0..3, 3..5, 5..7: rank 0 receives 3 elements from each rank.
#[test]
fn all_to_all_of_a_length_not_divisible_by_the_ranks() {
    let call = sum_call(Collective::AllToAll);
    let inputs = tiles(
        Dtype::I64,
        &[
            [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0],
            [20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0],
        ],
    );
    let want = vec![
        Tile::from_f64s(Dtype::I64, &[0.0, 1.0, 2.0, 10.0, 11.0, 12.0, 20.0, 21.0, 22.0]),
        Tile::from_f64s(Dtype::I64, &[3.0, 4.0, 13.0, 14.0, 23.0, 24.0]),
        Tile::from_f64s(Dtype::I64, &[5.0, 6.0, 15.0, 16.0, 25.0, 26.0]),
    ];
    assert_eq!(reference(&call, &inputs, &inputs).unwrap(), want);
    assert_eq!(check(&call, &inputs, &inputs, &want).unwrap(), HELD);
}

/// 2 elements over 3 ranks: the last rank's chunk of every input is empty, so it receives nothing.
#[test]
fn all_to_all_with_fewer_elements_than_ranks() {
    let call = sum_call(Collective::AllToAll);
    let inputs = tiles(Dtype::F32, &[[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]]);
    let want = tiles(Dtype::F32, &[&[1.0, 10.0, 100.0][..], &[2.0, 20.0, 200.0], &[]]);
    assert_eq!(reference(&call, &inputs, &inputs).unwrap(), want);
    let mut extra = want.clone();
    extra[2] = Tile::from_f64s(Dtype::F32, &[0.0]);
    let result = check(&call, &inputs, &inputs, &extra).unwrap();
    let first = Mismatch { rank: 2, index: None, got: "f32[1]".into(), want: "f32[0]".into() };
    assert_eq!(result, Postcondition { held: false, wrong: 1, first: Some(first) });
}

#[test]
fn failure_message_names_rank_element_and_values() {
    let wrong = with_element(&hand_computed(Collective::AllReduce), 2, 4, 99.0);
    let result = check_outputs(&sum_call(Collective::AllReduce), Dtype::I32, &tiles(Dtype::I32, &wrong));
    assert_eq!(result.to_string(), "postcondition failed: 1 wrong; first at rank 2 element 4: got 99, want 47");
    assert_eq!(HELD.to_string(), "postcondition held");
}

// ---------------------------------------------------------------------------------------------------
// Regressions: each guards a bug found while writing these tests.
// ---------------------------------------------------------------------------------------------------

/// 2^53 + 1 and 2^53 are different i64s but the same f64: `check` must compare bits, not `f64`s.
#[test]
fn i64_outputs_are_compared_bit_for_bit_above_2_pow_53() {
    let call = sum_call(Collective::AllGather);
    let big = 1i64 << 53;
    let inputs = vec![Tile::from_vec(vec![big + 1]), Tile::from_vec(vec![0i64]), Tile::from_vec(vec![0i64])];
    let wrong = vec![Tile::from_vec(vec![big, 0, 0]); 3];
    let result = check(&call, &inputs, &inputs, &wrong).unwrap();
    assert_eq!((result.held, result.wrong), (false, 3));
}

/// Collectives that do not reduce must match bit for bit: 0.0 does not stand for -0.0.
#[test]
fn all_gather_output_must_keep_the_sign_of_zero() {
    let call = sum_call(Collective::AllGather);
    let inputs = tiles(Dtype::F32, &[[-0.0], [1.0], [2.0]]);
    let wrong = tiles(Dtype::F32, &[[0.0, 1.0, 2.0]; 3]);
    let result = check(&call, &inputs, &inputs, &wrong).unwrap();
    assert_eq!((result.held, result.wrong), (false, 3));
}

/// A rank that is not reduce's root must keep its buffer exactly: the root's float tolerance does not
/// apply to it.
#[test]
fn reduce_non_root_outputs_must_equal_before_exactly() {
    let call = CallFacts { collective: Collective::Reduce, op: ReduceOp::Sum, root: 1, counts: None };
    let (inputs, before) = (tiles(Dtype::F32, &INPUTS), tiles(Dtype::F32, &BEFORE));
    let mut outputs = reference(&call, &inputs, &before).unwrap();
    outputs[0] = Tile::from_f64s(Dtype::F32, &[-1.0 + 2f64.powi(-20), -1.0, -1.0, -1.0, -1.0]);
    let result = check(&call, &inputs, &before, &outputs).unwrap();
    assert_eq!((result.held, result.wrong), (false, 1));
}

/// Too few `before` tiles for the ranks is an error, not an index out of bounds.
#[test]
fn reduce_with_too_few_before_tiles_is_an_error_not_a_panic() {
    let call = sum_call(Collective::Reduce);
    let inputs = tiles(Dtype::F32, &INPUTS);
    assert_eq!(
        reference(&call, &inputs, &[]),
        Err(PostconditionError::TileCount { what: "outputs before the call", got: 0, ranks: 3 })
    );
}

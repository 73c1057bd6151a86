//! Tiles: every dtype under every reduction operator against a reference computed without the tile
//! code, half-precision rounding, shape and type errors, zero-copy views with copy on write, chunk
//! boundaries and the end of a reduction. Scenarios are functions over (dtype, op); the `#[test]`s
//! call them.

use std::ops::Range;

use half::{bf16, f16};
use kernbench_core::{Dtype, ReduceOp, Tile, TileError, chunk_range, chunk_start};

// ---------------------------------------------------------------------------------------------------
// Building tiles without `Tile::from_f64s`, so the references do not share the code under test.
// ---------------------------------------------------------------------------------------------------

/// A tile of `dtype` holding `values`, each exactly representable in `dtype`.
fn tile_of(dtype: Dtype, values: &[f64]) -> Tile {
    match dtype {
        Dtype::F32 => Tile::from_vec(values.iter().map(|&v| v as f32).collect::<Vec<_>>()),
        Dtype::F16 => Tile::from_vec(values.iter().map(|&v| f16::from_f64(v)).collect::<Vec<_>>()),
        Dtype::BF16 => Tile::from_vec(values.iter().map(|&v| bf16::from_f64(v)).collect::<Vec<_>>()),
        Dtype::I32 => Tile::from_vec(values.iter().map(|&v| v as i32).collect::<Vec<_>>()),
        Dtype::I64 => Tile::from_vec(values.iter().map(|&v| v as i64).collect::<Vec<_>>()),
    }
}

/// A tile of the integer `dtype` holding `values`, which must fit it.
fn int_tile(dtype: Dtype, values: &[i128]) -> Tile {
    match dtype {
        Dtype::I32 => Tile::from_vec(values.iter().map(|&v| i32::try_from(v).unwrap()).collect::<Vec<_>>()),
        Dtype::I64 => Tile::from_vec(values.iter().map(|&v| i64::try_from(v).unwrap()).collect::<Vec<_>>()),
        float => panic!("{float} is not an integer dtype"),
    }
}

/// The smallest and largest value of the integer `dtype`.
fn int_bounds(dtype: Dtype) -> (i128, i128) {
    match dtype {
        Dtype::I32 => (i32::MIN.into(), i32::MAX.into()),
        Dtype::I64 => (i64::MIN.into(), i64::MAX.into()),
        float => panic!("{float} is not an integer dtype"),
    }
}

/// `v` wrapped into the integer `dtype`, two's complement.
fn wrap(dtype: Dtype, v: i128) -> i128 {
    match dtype {
        Dtype::I32 => (v as i32).into(),
        Dtype::I64 => (v as i64).into(),
        float => panic!("{float} is not an integer dtype"),
    }
}

/// Where a tile's viewed elements start in memory: equal before and after a write means "in place".
fn data_ptr(tile: &Tile) -> *const u8 {
    match tile.dtype() {
        Dtype::F32 => tile.as_slice::<f32>().unwrap().as_ptr().cast(),
        Dtype::F16 => tile.as_slice::<f16>().unwrap().as_ptr().cast(),
        Dtype::BF16 => tile.as_slice::<bf16>().unwrap().as_ptr().cast(),
        Dtype::I32 => tile.as_slice::<i32>().unwrap().as_ptr().cast(),
        Dtype::I64 => tile.as_slice::<i64>().unwrap().as_ptr().cast(),
    }
}

// ---------------------------------------------------------------------------------------------------
// Every dtype x every operator against an independent reference.
// ---------------------------------------------------------------------------------------------------

/// Float operands, pairwise: mixed signs, both negative (-3, -5), a zero product that is -0.0
/// (-7 * 0), and -7 avg 0 = -3.5. Every sum, product and mean is exact in bf16, the narrowest dtype.
const FLOAT_A: [f64; 9] = [1.5, -2.0, 3.0, -7.0, 0.0, 100.0, -0.5, 8.0, -3.0];
const FLOAT_B: [f64; 9] = [2.25, -3.0, -4.0, 0.0, -1.0, 0.5, -0.25, 8.0, -5.0];

/// Integer operands, pairwise: as for floats, plus the overflows MAX + 1, MAX * 2, MIN - 1, MIN * -1,
/// MIN + MIN, MIN * MIN, and 7 avg 0 = 3, -7 avg 0 = -3 (truncation toward zero on both sides).
fn int_operands(dtype: Dtype) -> (Vec<i128>, Vec<i128>) {
    let (min, max) = int_bounds(dtype);
    (
        vec![1, -2, 3, -7, 0, 100, -5, 8, -3, max, max, min, min, 7],
        vec![2, -3, -4, 0, -1, 7, -6, 8, -5, 1, 2, -1, min, 0],
    )
}

/// Fresh, uniquely held operands of the reduction scenarios.
fn operands(dtype: Dtype) -> (Tile, Tile) {
    if dtype.is_float() {
        (tile_of(dtype, &FLOAT_A), tile_of(dtype, &FLOAT_B))
    } else {
        let (a, b) = int_operands(dtype);
        (int_tile(dtype, &a), int_tile(dtype, &b))
    }
}

/// `op` over the two operands, then divided by 2 for `Avg`: floats in `f64`, integers in `i128`
/// wrapped to the dtype, so nothing is shared with the tile's arithmetic.
fn reference(dtype: Dtype, op: ReduceOp) -> Tile {
    if dtype.is_float() {
        let values: Vec<f64> = FLOAT_A
            .iter()
            .zip(&FLOAT_B)
            .map(|(&x, &y)| match op {
                ReduceOp::Sum => x + y,
                ReduceOp::Prod => x * y,
                ReduceOp::Max => x.max(y),
                ReduceOp::Min => x.min(y),
                ReduceOp::Avg => (x + y) / 2.0,
            })
            .collect();
        tile_of(dtype, &values)
    } else {
        let (a, b) = int_operands(dtype);
        let values: Vec<i128> = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| match op {
                ReduceOp::Sum => wrap(dtype, x + y),
                ReduceOp::Prod => wrap(dtype, x * y),
                ReduceOp::Max => x.max(y),
                ReduceOp::Min => x.min(y),
                // `i128` division truncates toward zero, as the dtype's own does.
                ReduceOp::Avg => wrap(dtype, x + y) / 2,
            })
            .collect();
        int_tile(dtype, &values)
    }
}

/// Reducing the two operands under `op` (then finishing over 2 contributions) gives the reference,
/// both in place (uniquely held accumulator) and by copy on write (shared accumulator); for `Sum`,
/// `&a + &b` does too.
fn reduces_like_reference(dtype: Dtype, op: ReduceOp) {
    let want = reference(dtype, op);

    let (mut unique, b) = operands(dtype);
    unique.reduce_in_place(&b, op).unwrap();
    unique.finish_reduction(op, 2).unwrap();
    assert_eq!(unique, want, "{dtype} {op}, uniquely held accumulator");

    let (a, b) = operands(dtype);
    let mut shared = a.clone();
    shared.reduce_in_place(&b, op).unwrap();
    shared.finish_reduction(op, 2).unwrap();
    assert_eq!(shared, want, "{dtype} {op}, shared accumulator");
    assert_eq!(a, operands(dtype).0, "{dtype} {op}: the other holder of the buffer saw the write");

    if op == ReduceOp::Sum {
        assert_eq!((&a + &b).unwrap(), want, "{dtype}: &a + &b");
    }
}

macro_rules! every_op {
    ($($module:ident: $dtype:ident;)*) => {$(
        mod $module {
            use super::*;

            #[test]
            fn sum() {
                reduces_like_reference(Dtype::$dtype, ReduceOp::Sum);
            }

            #[test]
            fn prod() {
                reduces_like_reference(Dtype::$dtype, ReduceOp::Prod);
            }

            #[test]
            fn max() {
                reduces_like_reference(Dtype::$dtype, ReduceOp::Max);
            }

            #[test]
            fn min() {
                reduces_like_reference(Dtype::$dtype, ReduceOp::Min);
            }

            #[test]
            fn avg() {
                reduces_like_reference(Dtype::$dtype, ReduceOp::Avg);
            }
        }
    )*};
}

every_op! {
    reduce_f32: F32;
    reduce_f16: F16;
    reduce_bf16: BF16;
    reduce_i32: I32;
    reduce_i64: I64;
}

/// `a op b`, one element each, after `finish_reduction(op, 2)`.
fn reduce_pair(a: Tile, b: &Tile, op: ReduceOp) -> Tile {
    let mut acc = a;
    acc.reduce_in_place(b, op).unwrap();
    acc.finish_reduction(op, 2).unwrap();
    acc
}

#[test]
fn i32_max_plus_one_wraps_to_min() {
    let sum = reduce_pair(Tile::from_vec(vec![i32::MAX]), &Tile::from_vec(vec![1i32]), ReduceOp::Sum);
    assert_eq!(sum.to_vec::<i32>().unwrap(), [i32::MIN]);
}

#[test]
fn i64_max_plus_one_wraps_to_min() {
    let sum = reduce_pair(Tile::from_vec(vec![i64::MAX]), &Tile::from_vec(vec![1i64]), ReduceOp::Sum);
    assert_eq!(sum.to_vec::<i64>().unwrap(), [i64::MIN]);
}

#[test]
fn i32_prod_wraps_on_overflow() {
    let prod =
        reduce_pair(Tile::from_vec(vec![i32::MAX, 1 << 16]), &Tile::from_vec(vec![2i32, 1 << 16]), ReduceOp::Prod);
    assert_eq!(prod.to_vec::<i32>().unwrap(), [-2, 0]);
}

#[test]
fn i64_prod_wraps_on_overflow() {
    let prod =
        reduce_pair(Tile::from_vec(vec![i64::MAX, 1 << 32]), &Tile::from_vec(vec![2i64, 1 << 32]), ReduceOp::Prod);
    assert_eq!(prod.to_vec::<i64>().unwrap(), [-2, 0]);
}

/// Integer `Avg` truncates toward zero: -7 / 2 = -3 (not -4), 7 / 2 = 3, -1 / 2 = 0.
fn int_avg_truncates_toward_zero(dtype: Dtype) {
    let avg = reduce_pair(tile_of(dtype, &[-7.0, 7.0, -1.0]), &tile_of(dtype, &[0.0; 3]), ReduceOp::Avg);
    assert_eq!(avg.to_f64_vec(), [-3.0, 3.0, 0.0], "{dtype}");
}

#[test]
fn i32_avg_truncates_toward_zero() {
    int_avg_truncates_toward_zero(Dtype::I32);
}

#[test]
fn i64_avg_truncates_toward_zero() {
    int_avg_truncates_toward_zero(Dtype::I64);
}

#[test]
fn float_avg_of_minus_7_and_0_is_minus_3_5() {
    for dtype in [Dtype::F32, Dtype::F16, Dtype::BF16] {
        let avg = reduce_pair(tile_of(dtype, &[-7.0]), &tile_of(dtype, &[0.0]), ReduceOp::Avg);
        assert_eq!(avg.to_f64_vec(), [-3.5], "{dtype}");
    }
}

#[test]
fn max_and_min_of_negative_values() {
    for dtype in Dtype::ALL {
        let (a, b) = (tile_of(dtype, &[-3.0, -8.0, -1.0]), tile_of(dtype, &[-5.0, -1.0, 2.0]));
        let max = reduce_pair(a.clone(), &b, ReduceOp::Max);
        let min = reduce_pair(a, &b, ReduceOp::Min);
        assert_eq!(max.to_f64_vec(), [-3.0, -1.0, 2.0], "{dtype} max");
        assert_eq!(min.to_f64_vec(), [-5.0, -8.0, -1.0], "{dtype} min");
    }
}

// ---------------------------------------------------------------------------------------------------
// Half-precision rounding.
// ---------------------------------------------------------------------------------------------------

/// `a + b` in `dtype` gives exactly `want`.
fn sum_rounds_to(dtype: Dtype, a: f64, b: f64, want: f64) {
    let sum = (&tile_of(dtype, &[a]) + &tile_of(dtype, &[b])).unwrap();
    assert_eq!(sum, tile_of(dtype, &[want]), "{dtype}: {a} + {b}");
}

#[test]
fn f16_2048_plus_1_rounds_to_even_2048() {
    // 2049 lies halfway between 2048 and 2050 (f16's step there is 2); 2048 has the even mantissa.
    sum_rounds_to(Dtype::F16, 2048.0, 1.0, 2048.0);
}

#[test]
fn f16_2048_plus_3_rounds_to_even_2052() {
    // 2051 lies halfway between 2050 and 2052: rounding up here shows ties go to even, not down.
    sum_rounds_to(Dtype::F16, 2048.0, 3.0, 2052.0);
}

#[test]
fn bf16_256_plus_1_rounds_to_even_256() {
    sum_rounds_to(Dtype::BF16, 256.0, 1.0, 256.0);
}

#[test]
fn bf16_256_plus_3_rounds_to_even_260() {
    sum_rounds_to(Dtype::BF16, 256.0, 3.0, 260.0);
}

#[test]
fn f16_sum_overflows_to_infinity() {
    sum_rounds_to(Dtype::F16, 65504.0, 65504.0, f64::INFINITY);
}

#[test]
fn f16_one_third_is_the_nearest_f16() {
    let want = f16::from_f32(1.0 / 3.0).to_bits();
    assert_eq!(want, 0x3555);
    let converted = Tile::from_f64s(Dtype::F16, &[1.0 / 3.0]);
    assert_eq!(converted.to_vec::<f16>().unwrap()[0].to_bits(), want, "from_f64s");
    let mut divided = Tile::filled(Dtype::F16, 1, 1.0);
    divided.finish_reduction(ReduceOp::Avg, 3).unwrap();
    assert_eq!(divided.to_vec::<f16>().unwrap()[0].to_bits(), want, "1 / 3 by finish_reduction");
}

#[test]
fn bf16_one_third_is_the_nearest_bf16() {
    let want = bf16::from_f32(1.0 / 3.0).to_bits();
    assert_eq!(want, 0x3EAB);
    let mut divided = Tile::filled(Dtype::BF16, 1, 1.0);
    divided.finish_reduction(ReduceOp::Avg, 3).unwrap();
    assert_eq!(divided.to_vec::<bf16>().unwrap()[0].to_bits(), want);
}

/// Pairs of finite values of a 16-bit float type, spread over every exponent and both signs.
fn half_bit_pairs(max_finite_bits: u16) -> impl Iterator<Item = (u16, u16)> {
    let sign = |i: u16| if i % 3 == 0 { 0x8000 } else { 0 };
    (0..max_finite_bits).step_by(29).enumerate().map(move |(i, a)| {
        let i = i as u16;
        let b = a.wrapping_mul(7919) % max_finite_bits;
        (a | sign(i), b | sign(i / 2 + 1))
    })
}

#[test]
fn f16_sum_is_the_f32_sum_rounded_once() {
    let (a, b): (Vec<f16>, Vec<f16>) =
        half_bit_pairs(0x7BFF).map(|(a, b)| (f16::from_bits(a), f16::from_bits(b))).unzip();
    let sum = (&Tile::from_vec(a.clone()) + &Tile::from_vec(b.clone())).unwrap();
    for ((x, y), got) in a.iter().zip(&b).zip(sum.to_vec::<f16>().unwrap()) {
        let want = f16::from_f32(x.to_f32() + y.to_f32());
        assert_eq!(got.to_bits(), want.to_bits(), "{x} + {y}: got {got}, want {want}");
    }
}

#[test]
fn bf16_sum_is_the_f32_sum_rounded_once() {
    let (a, b): (Vec<bf16>, Vec<bf16>) =
        half_bit_pairs(0x7F7F).map(|(a, b)| (bf16::from_bits(a), bf16::from_bits(b))).unzip();
    let sum = (&Tile::from_vec(a.clone()) + &Tile::from_vec(b.clone())).unwrap();
    for ((x, y), got) in a.iter().zip(&b).zip(sum.to_vec::<bf16>().unwrap()) {
        let want = bf16::from_f32(x.to_f32() + y.to_f32());
        assert_eq!(got.to_bits(), want.to_bits(), "{x} + {y}: got {got}, want {want}");
    }
}

/// 1 + 2^-11 + 2^-30 lies just above the midpoint of the f16 neighbours 1 and 1 + 2^-10, so its
/// nearest f16 is 1 + 2^-10 (bits 0x3C01). Converting through f32 first rounds it to the midpoint
/// 1 + 2^-11, which then ties to even: 1.0 (0x3C00).
#[test]
fn f16_from_f64_rounds_to_nearest_not_through_f32() {
    let value = 1.0 + 2f64.powi(-11) + 2f64.powi(-30);
    let tile = Tile::from_f64s(Dtype::F16, &[value]);
    assert_eq!(tile.to_vec::<f16>().unwrap()[0].to_bits(), 0x3C01);
}

#[test]
fn integer_conversions_truncate_toward_zero_and_saturate() {
    assert_eq!(Tile::filled(Dtype::I32, 2, -2.7).to_vec::<i32>().unwrap(), [-2, -2]);
    assert_eq!(Tile::from_f64s(Dtype::I32, &[2.7, 1e10, -1e10]).to_vec::<i32>().unwrap(), [2, i32::MAX, i32::MIN]);
    assert_eq!(Tile::from_f64s(Dtype::I64, &[-2.7, 1e30]).to_vec::<i64>().unwrap(), [-2, i64::MAX]);
}

#[test]
fn zeros_filled_and_from_f64s_agree_with_to_f64_vec() {
    for dtype in Dtype::ALL {
        let zeros = Tile::zeros(dtype, 3);
        assert_eq!((zeros.dtype(), zeros.len(), zeros.bytes()), (dtype, 3, 3 * dtype.size()));
        assert_eq!(zeros.to_f64_vec(), [0.0; 3], "{dtype}");
        assert_eq!(Tile::filled(dtype, 2, -6.0), tile_of(dtype, &[-6.0, -6.0]), "{dtype}");
        assert_eq!(Tile::from_f64s(dtype, &[1.0, -2.0, 64.0]), tile_of(dtype, &[1.0, -2.0, 64.0]), "{dtype}");
        assert!(Tile::zeros(dtype, 0).is_empty());
    }
}

// ---------------------------------------------------------------------------------------------------
// Equality is bitwise.
// ---------------------------------------------------------------------------------------------------

#[test]
fn equality_is_bitwise() {
    let zero = Tile::from_vec(vec![0.0f32]);
    let negative_zero = Tile::from_vec(vec![-0.0f32]);
    assert_ne!(zero, negative_zero, "0.0 and -0.0 differ in their bits");
    assert!(!zero.bit_eq(&negative_zero));

    let nan = Tile::from_vec(vec![f32::NAN]);
    assert_eq!(nan, Tile::from_vec(vec![f32::NAN]), "NaNs with equal bits are equal");
    assert_ne!(nan, Tile::from_vec(vec![f32::from_bits(f32::NAN.to_bits() | 1)]), "NaN payloads differ");

    assert_ne!(Tile::from_vec(vec![-1i32]), Tile::from_vec(vec![-1i64]), "same value, other dtype");
    assert_ne!(Tile::from_vec(vec![1.0f32]), Tile::from_vec(vec![1.0f32, 1.0]), "other length");

    let whole = Tile::from_vec(vec![5i32, 6, 5, 6]);
    assert_eq!(whole.chunk(0, 2).unwrap(), whole.chunk(1, 2).unwrap(), "views of equal values are equal");
    assert_eq!(whole.chunk(0, 2).unwrap(), Tile::from_vec(vec![5i32, 6]), "a view equals a separate buffer");
}

// ---------------------------------------------------------------------------------------------------
// Errors: reported, never a panic, and nothing changed.
// ---------------------------------------------------------------------------------------------------

/// Reducing a tile of `left` with one of every other dtype is a `DtypeMismatch` naming both, and
/// leaves the accumulator as it was; `&a + &b` and `check_same_shape` agree.
fn dtype_mismatch_is_reported_and_changes_nothing(left: Dtype) {
    for right in Dtype::ALL.into_iter().filter(|&d| d != left) {
        let values = [1.0, 2.0, 3.0];
        let mut acc = tile_of(left, &values);
        let other = tile_of(right, &values);
        let want = TileError::DtypeMismatch { left, right };
        for op in ReduceOp::ALL {
            assert_eq!(acc.reduce_in_place(&other, op), Err(want.clone()), "{left} {op} {right}");
        }
        assert_eq!(acc, tile_of(left, &values), "{left} {right}: the accumulator changed");
        assert_eq!(&acc + &other, Err(want.clone()));
        assert_eq!(acc.check_same_shape(&other), Err(want));
    }
}

#[test]
fn dtype_mismatch_f32() {
    dtype_mismatch_is_reported_and_changes_nothing(Dtype::F32);
}

#[test]
fn dtype_mismatch_f16() {
    dtype_mismatch_is_reported_and_changes_nothing(Dtype::F16);
}

#[test]
fn dtype_mismatch_bf16() {
    dtype_mismatch_is_reported_and_changes_nothing(Dtype::BF16);
}

#[test]
fn dtype_mismatch_i32() {
    dtype_mismatch_is_reported_and_changes_nothing(Dtype::I32);
}

#[test]
fn dtype_mismatch_i64() {
    dtype_mismatch_is_reported_and_changes_nothing(Dtype::I64);
}

#[test]
fn length_mismatch_is_reported_and_changes_nothing() {
    for dtype in Dtype::ALL {
        let mut acc = tile_of(dtype, &[1.0, 2.0, 3.0, 4.0]);
        let shorter = tile_of(dtype, &[1.0, 2.0, 3.0]);
        for op in ReduceOp::ALL {
            assert_eq!(
                acc.reduce_in_place(&shorter, op),
                Err(TileError::LengthMismatch { left: 4, right: 3 }),
                "{dtype} {op}"
            );
        }
        assert_eq!(acc, tile_of(dtype, &[1.0, 2.0, 3.0, 4.0]), "{dtype}: the accumulator changed");
        assert_eq!(&shorter + &acc, Err(TileError::LengthMismatch { left: 3, right: 4 }));
        assert_eq!(acc.check_same_shape(&shorter), Err(TileError::LengthMismatch { left: 4, right: 3 }));
    }
}

#[test]
fn shared_accumulator_is_not_copied_by_a_failed_reduction() {
    let parent = Tile::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]);
    let mut view = parent.slice(0..2).unwrap();
    assert!(view.reduce_in_place(&Tile::from_vec(vec![1.0f32]), ReduceOp::Sum).is_err());
    assert!(view.shares_buffer_with(&parent), "an error must leave the view as it was");
}

/// The elements of `tile` asked for as each element type: only its own dtype succeeds.
fn as_each_element_type(tile: &Tile) -> [(Dtype, Result<usize, TileError>); 5] {
    [
        (Dtype::F32, tile.as_slice::<f32>().map(<[_]>::len)),
        (Dtype::F16, tile.as_slice::<f16>().map(<[_]>::len)),
        (Dtype::BF16, tile.as_slice::<bf16>().map(<[_]>::len)),
        (Dtype::I32, tile.to_vec::<i32>().map(|v| v.len())),
        (Dtype::I64, tile.to_vec::<i64>().map(|v| v.len())),
    ]
}

#[test]
fn asking_for_another_element_type_is_wrong_element_type() {
    assert_eq!(
        Tile::from_vec(vec![1i32]).as_slice::<f32>(),
        Err(TileError::WrongElementType { requested: Dtype::F32, actual: Dtype::I32 })
    );
    for actual in Dtype::ALL {
        let tile = Tile::zeros(actual, 3);
        for (requested, result) in as_each_element_type(&tile) {
            let want = if requested == actual { Ok(3) } else { Err(TileError::WrongElementType { requested, actual }) };
            assert_eq!(result, want, "{actual} tile asked for as {requested}");
        }
    }
}

#[test]
fn out_of_range_slice_is_an_error() {
    let tile = Tile::from_vec(vec![1i64, 2, 3, 4, 5]);
    assert_eq!(tile.slice(3..6).unwrap_err(), TileError::OutOfRange { start: 3, end: 6, len: 5 });
    assert_eq!(tile.slice(6..6).unwrap_err(), TileError::OutOfRange { start: 6, end: 6, len: 5 });
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = 4..2;
    assert_eq!(tile.slice(reversed).unwrap_err(), TileError::OutOfRange { start: 4, end: 2, len: 5 });
    assert_eq!(tile.slice(0..usize::MAX).unwrap_err(), TileError::OutOfRange { start: 0, end: usize::MAX, len: 5 });
    assert!(tile.slice(5..5).unwrap().is_empty(), "an empty range at the end is in range");
    // Bounds are those of the view, not of the buffer behind it.
    let view = tile.slice(1..3).unwrap();
    assert_eq!(view.slice(1..3).unwrap_err(), TileError::OutOfRange { start: 1, end: 3, len: 2 });
}

#[test]
fn bad_chunk_is_an_error() {
    let tile = Tile::from_vec(vec![1.0f32; 10]);
    assert_eq!(tile.chunk(4, 4).unwrap_err(), TileError::BadChunk { index: 4, count: 4 });
    assert_eq!(tile.chunk(9, 4).unwrap_err(), TileError::BadChunk { index: 9, count: 4 });
    assert_eq!(tile.chunk(0, 0).unwrap_err(), TileError::BadChunk { index: 0, count: 0 });
    assert_eq!(chunk_range(10, 0, 0), Err(TileError::BadChunk { index: 0, count: 0 }));
}

#[test]
fn concat_of_no_tiles_is_empty_concat() {
    assert_eq!(Tile::concat(&[]), Err(TileError::EmptyConcat));
}

#[test]
fn concat_of_mixed_dtypes_is_dtype_mismatch() {
    let tiles = [Tile::zeros(Dtype::F32, 2), Tile::zeros(Dtype::F32, 1), Tile::zeros(Dtype::I32, 2)];
    assert_eq!(Tile::concat(&tiles), Err(TileError::DtypeMismatch { left: Dtype::F32, right: Dtype::I32 }));
}

#[test]
fn concat_joins_in_order_into_a_new_buffer() {
    let whole = Tile::from_vec(vec![1i32, 2, 3, 4, 5]);
    let parts = [whole.slice(3..5).unwrap(), Tile::from_vec(Vec::<i32>::new()), whole.slice(0..2).unwrap()];
    let joined = Tile::concat(&parts).unwrap();
    assert_eq!(joined.to_vec::<i32>().unwrap(), [4, 5, 1, 2]);
    assert!(!joined.shares_buffer_with(&whole));
}

#[test]
fn write_at_past_the_end_is_out_of_range_and_changes_nothing() {
    let mut tile = Tile::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0]);
    let src = Tile::from_vec(vec![9.0f32; 3]);
    assert_eq!(tile.write_at(3, &src), Err(TileError::OutOfRange { start: 3, end: 6, len: 5 }));
    assert_eq!(tile.write_at(6, &Tile::zeros(Dtype::F32, 0)), Err(TileError::OutOfRange { start: 6, end: 6, len: 5 }));
    assert_eq!(tile, Tile::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0]));
    tile.write_at(2, &src).unwrap();
    assert_eq!(tile.to_vec::<f32>().unwrap(), [1.0, 2.0, 9.0, 9.0, 9.0], "a write that just fits");
}

#[test]
fn write_at_of_another_dtype_is_dtype_mismatch() {
    let mut tile = Tile::from_vec(vec![1i32, 2, 3]);
    assert_eq!(
        tile.write_at(0, &Tile::from_vec(vec![1i64])),
        Err(TileError::DtypeMismatch { left: Dtype::I32, right: Dtype::I64 })
    );
    assert_eq!(tile.to_vec::<i32>().unwrap(), [1, 2, 3]);
}

/// `offset + src.len()` overflows before the bounds check: a panic ("attempt to add with overflow")
/// in debug builds; in release, the wrapped end passes the check and slicing `[usize::MAX..0]` panics.
#[test]
fn write_at_huge_offset_is_out_of_range_not_a_panic() {
    let mut tile = Tile::from_vec(vec![1i32, 2, 3]);
    let result = tile.write_at(usize::MAX, &Tile::from_vec(vec![7i32]));
    assert!(matches!(result, Err(TileError::OutOfRange { start: usize::MAX, .. })), "{result:?}");
}

mod views;

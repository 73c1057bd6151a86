//! Zero-copy views with copy on write, chunk boundaries, and the end of a reduction.

use super::*;

// ---------------------------------------------------------------------------------------------------
// Zero copy and copy on write.
// ---------------------------------------------------------------------------------------------------

const SIX: [f64; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];

#[test]
fn slice_chunk_and_clone_share_the_buffer() {
    for dtype in Dtype::ALL {
        let tile = tile_of(dtype, &SIX);
        let slice = tile.slice(1..4).unwrap();
        let chunk = tile.chunk(2, 3).unwrap();
        assert!(slice.shares_buffer_with(&tile) && chunk.shares_buffer_with(&tile), "{dtype}");
        assert!(slice.shares_buffer_with(&chunk) && tile.clone().shares_buffer_with(&tile), "{dtype}");
        assert_eq!(slice.to_f64_vec(), [2.0, 3.0, 4.0], "{dtype}");
        assert_eq!(chunk.to_f64_vec(), [5.0, 6.0], "{dtype}");
        assert!(!tile.shares_buffer_with(&tile_of(dtype, &SIX)), "{dtype}: separate buffers of equal values");
    }
}

/// A tile of four bytes or fewer holds its elements itself: a copy shares nothing with it, so a
/// write to either leaves the other as it was, and views, joins, reductions and bytes read the same
/// values as a buffer's. Five bytes or more (and every `i64`, whose alignment the held bytes lack) are
/// a shared buffer as before. Either way a tile is three words.
#[test]
fn a_tile_of_four_bytes_or_fewer_holds_them_itself() {
    assert_eq!(size_of::<Tile>(), 3 * size_of::<usize>());
    for dtype in Dtype::ALL {
        let fits = if dtype.size() <= 4 { 4 / dtype.size() } else { 0 };
        for len in 1..=fits + 1 {
            let values: Vec<f64> = (1..=len).map(|v| v as f64).collect();
            let tile = tile_of(dtype, &values);
            let held = len <= fits;
            assert_eq!(tile.clone().shares_buffer_with(&tile), !held, "{dtype} x {len}");
            assert_eq!(Tile::filled(dtype, len, 3.0).to_f64_vec(), vec![3.0; len], "{dtype} x {len}");

            let mut copy = tile.clone();
            copy.reduce_in_place(&tile_of(dtype, &vec![10.0; len]), ReduceOp::Sum).unwrap();
            assert_eq!(copy.to_f64_vec(), values.iter().map(|v| v + 10.0).collect::<Vec<_>>(), "{dtype} x {len}");
            assert_eq!(tile.to_f64_vec(), values, "{dtype} x {len}: the copy's reduction reached the tile");
            copy.write_at(len - 1, &tile_of(dtype, &[0.0])).unwrap();
            assert_eq!(copy.get_f64(len - 1), Some(0.0), "{dtype} x {len}");
            assert_eq!(tile.get_f64(len - 1), Some(len as f64), "{dtype} x {len}: the copy's write reached the tile");

            let last = tile.slice(len - 1..len).unwrap();
            assert_eq!(last.to_f64_vec(), [len as f64], "{dtype} x {len}");
            let joined = Tile::concat(&[last.clone(), tile.clone()]).unwrap();
            assert_eq!(joined.to_f64_vec(), [&[len as f64][..], &values].concat(), "{dtype} x {len}");
            let mut bytes = Vec::new();
            tile.write_bytes(&mut bytes);
            assert_eq!(Tile::from_bytes(dtype, &bytes).unwrap(), tile, "{dtype} x {len}");
        }
    }
    let one = Tile::from_vec(vec![7.0f32]);
    assert_eq!(one.as_slice::<f32>().unwrap(), [7.0]);
    assert!(matches!(one.as_slice::<i32>(), Err(TileError::WrongElementType { .. })));
    let empty = Tile::zeros(Dtype::F16, 0);
    assert!(empty.is_empty() && empty.has_data() && empty.as_slice::<f16>().unwrap().is_empty());
}

/// A write into a view of a shared buffer copies that view first: the other views keep their values
/// and stop sharing with it.
fn writing_a_shared_view_copies_it(dtype: Dtype) {
    let parent = tile_of(dtype, &SIX);
    let mut view = parent.chunk(1, 2).unwrap();
    view.reduce_in_place(&tile_of(dtype, &[10.0; 3]), ReduceOp::Sum).unwrap();
    assert_eq!(view.to_f64_vec(), [14.0, 15.0, 16.0], "{dtype}: the written view");
    assert_eq!(parent.to_f64_vec(), SIX, "{dtype}: the parent saw its view's reduction");
    assert!(!view.shares_buffer_with(&parent), "{dtype}");

    let mut parent = parent;
    let view = parent.slice(0..3).unwrap();
    parent.write_at(1, &tile_of(dtype, &[0.0, 0.0])).unwrap();
    assert_eq!(parent.to_f64_vec(), [1.0, 0.0, 0.0, 4.0, 5.0, 6.0], "{dtype}: the written parent");
    assert_eq!(view.to_f64_vec(), [1.0, 2.0, 3.0], "{dtype}: a view saw its parent's write");
    assert!(!view.shares_buffer_with(&parent), "{dtype}");
}

#[test]
fn writing_a_shared_view_copies_it_every_dtype() {
    for dtype in Dtype::ALL {
        writing_a_shared_view_copies_it(dtype);
    }
}

#[test]
fn finishing_a_shared_avg_copies_it() {
    let parent = Tile::from_vec(vec![4i32, 8]);
    let mut view = parent.clone();
    view.finish_reduction(ReduceOp::Avg, 2).unwrap();
    assert_eq!(view.to_vec::<i32>().unwrap(), [2, 4]);
    assert_eq!(parent.to_vec::<i32>().unwrap(), [4, 8]);
}

#[test]
fn write_at_from_a_view_of_the_same_buffer() {
    let mut tile = Tile::from_vec(vec![1i32, 2, 3, 4, 5]);
    let src = tile.slice(0..2).unwrap();
    tile.write_at(3, &src).unwrap();
    assert_eq!(tile.to_vec::<i32>().unwrap(), [1, 2, 3, 1, 2]);
    assert_eq!(src.to_vec::<i32>().unwrap(), [1, 2]);
}

#[test]
fn reducing_a_uniquely_held_tile_stays_in_place() {
    for dtype in Dtype::ALL {
        let mut acc = tile_of(dtype, &SIX);
        let other = tile_of(dtype, &SIX);
        let before = data_ptr(&acc);
        acc.reduce_in_place(&other, ReduceOp::Max).unwrap();
        acc.write_at(0, &tile_of(dtype, &[7.0])).unwrap();
        assert_eq!(data_ptr(&acc), before, "{dtype}: a uniquely held tile was copied");
        assert!(!acc.shares_buffer_with(&other), "{dtype}");
        assert_eq!(acc.to_f64_vec(), [7.0, 2.0, 3.0, 4.0, 5.0, 6.0], "{dtype}");
    }
}

#[test]
fn reducing_a_uniquely_held_chunk_stays_in_place() {
    let mut chunk = Tile::from_vec(vec![1i64, 2, 3, 4, 5]).chunk(1, 2).unwrap();
    let before = data_ptr(&chunk);
    chunk.reduce_in_place(&Tile::from_vec(vec![10i64, 20]), ReduceOp::Sum).unwrap();
    assert_eq!(data_ptr(&chunk), before);
    assert_eq!(chunk.to_vec::<i64>().unwrap(), [14, 25]);
}

#[test]
fn reducing_a_tile_with_a_clone_of_itself_doubles_it() {
    for dtype in Dtype::ALL {
        let mut tile = tile_of(dtype, &[1.0, -2.0, 3.5]);
        let clone = tile.clone();
        tile.reduce_in_place(&clone, ReduceOp::Sum).unwrap();
        let doubled = if dtype.is_float() { [2.0, -4.0, 7.0] } else { [2.0, -4.0, 6.0] };
        assert_eq!(tile.to_f64_vec(), doubled, "{dtype}");
        assert_eq!(clone, tile_of(dtype, &[1.0, -2.0, 3.5]), "{dtype}: the clone changed");
    }
}

#[test]
fn reducing_one_chunk_with_another_of_the_same_buffer() {
    let whole = Tile::from_vec(vec![1.0f32, 2.0, 3.0, 10.0, 20.0, 30.0]);
    let mut low = whole.chunk(0, 2).unwrap();
    low.reduce_in_place(&whole.chunk(1, 2).unwrap(), ReduceOp::Sum).unwrap();
    assert_eq!(low.to_vec::<f32>().unwrap(), [11.0, 22.0, 33.0]);
    assert_eq!(whole.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 10.0, 20.0, 30.0]);
}

#[test]
fn add_leaves_both_operands_and_shares_neither() {
    let (a, b) = (Tile::from_vec(vec![1i32, 2]), Tile::from_vec(vec![10i32, 20]));
    let sum = (&a + &b).unwrap();
    assert_eq!(sum.to_vec::<i32>().unwrap(), [11, 22]);
    assert_eq!((a.to_vec::<i32>().unwrap(), b.to_vec::<i32>().unwrap()), (vec![1, 2], vec![10, 20]));
    assert!(!sum.shares_buffer_with(&a) && !sum.shares_buffer_with(&b));
}

// ---------------------------------------------------------------------------------------------------
// Chunk boundaries.
// ---------------------------------------------------------------------------------------------------

/// (len, count, every chunk boundary): chunk `i` is `bounds[i]..bounds[i + 1]`, so `bounds` holds
/// `count + 1` entries and ends at `len`.
const CHUNK_TABLE: &[(usize, usize, &[usize])] = &[
    (10, 4, &[0, 3, 6, 8, 10]),
    (12, 4, &[0, 3, 6, 9, 12]),
    (7, 3, &[0, 3, 5, 7]),
    (5, 1, &[0, 5]),
    (1, 1, &[0, 1]),
    (3, 5, &[0, 1, 2, 3, 3, 3]),
    (1, 3, &[0, 1, 1, 1]),
    (0, 3, &[0, 0, 0, 0]),
    (0, 1, &[0, 0]),
];

#[test]
fn chunk_ranges_match_the_table() {
    for &(len, count, bounds) in CHUNK_TABLE {
        let want: Vec<Range<usize>> = bounds.windows(2).map(|w| w[0]..w[1]).collect();
        let got: Vec<_> = (0..count).map(|i| chunk_range(len, i, count).unwrap()).collect();
        assert_eq!(got, want, "len {len}, count {count}");
        let starts: Vec<_> = (0..=count).map(|i| chunk_start(len, i, count)).collect();
        assert_eq!(starts, bounds, "len {len}, count {count}: chunk_start up to and including count");
    }
}

#[test]
fn chunk_start_of_zero_chunks_is_zero() {
    assert_eq!(chunk_start(10, 0, 0), 0);
    assert_eq!(chunk_start(10, 3, 0), 0);
}

#[test]
fn chunks_cover_the_length_without_gaps_or_overlaps() {
    for len in 0..50 {
        for count in 1..10 {
            let mut next = 0;
            for i in 0..count {
                let range = chunk_range(len, i, count).unwrap();
                assert_eq!(range.start, next, "len {len}, chunk {i} of {count}: a gap or an overlap");
                let want = len / count + usize::from(i < len % count);
                assert_eq!(range.len(), want, "len {len}, chunk {i} of {count}");
                next = range.end;
            }
            assert_eq!(next, len, "len {len}, count {count}: the chunks stop short or run over");
        }
    }
}

#[test]
fn tile_chunks_hold_their_range() {
    let values: Vec<i32> = (0..23).collect();
    let tile = Tile::from_vec(values.clone());
    for count in 1..10 {
        let chunks: Vec<Tile> = (0..count).map(|i| tile.chunk(i, count).unwrap()).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let range = chunk_range(values.len(), i, count).unwrap();
            assert_eq!(chunk.as_slice::<i32>().unwrap(), &values[range], "chunk {i} of {count}");
        }
        assert_eq!(Tile::concat(&chunks).unwrap(), tile, "{count} chunks joined");
    }
}

// ---------------------------------------------------------------------------------------------------
// The end of a reduction.
// ---------------------------------------------------------------------------------------------------

const SUMS: [f64; 5] = [2.0, -6.0, 9.0, 0.0, -7.0];

/// `SUMS / 3` in `dtype`: floats divided in `f64` and rounded once, integers truncated toward zero.
fn sums_over_three(dtype: Dtype) -> Tile {
    if dtype.is_float() { tile_of(dtype, &SUMS.map(|v| v / 3.0)) } else { tile_of(dtype, &[0.0, -2.0, 3.0, 0.0, -2.0]) }
}

fn avg_divides_by_the_contributions(dtype: Dtype) {
    let mut tile = tile_of(dtype, &SUMS);
    tile.finish_reduction(ReduceOp::Avg, 3).unwrap();
    assert_eq!(tile, sums_over_three(dtype), "{dtype}");
}

#[test]
fn avg_divides_f32() {
    avg_divides_by_the_contributions(Dtype::F32);
}

#[test]
fn avg_divides_f16() {
    avg_divides_by_the_contributions(Dtype::F16);
}

#[test]
fn avg_divides_bf16() {
    avg_divides_by_the_contributions(Dtype::BF16);
}

#[test]
fn avg_divides_i32() {
    avg_divides_by_the_contributions(Dtype::I32);
}

#[test]
fn avg_divides_i64() {
    avg_divides_by_the_contributions(Dtype::I64);
}

#[test]
fn finishing_other_ops_changes_nothing() {
    for dtype in Dtype::ALL {
        for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
            let mut tile = tile_of(dtype, &SUMS);
            tile.finish_reduction(op, 3).unwrap();
            assert_eq!(tile, tile_of(dtype, &SUMS), "{dtype} {op}");
        }
    }
}

#[test]
fn finishing_avg_of_one_contribution_changes_nothing() {
    for dtype in Dtype::ALL {
        let mut tile = tile_of(dtype, &SUMS);
        tile.finish_reduction(ReduceOp::Avg, 1).unwrap();
        assert_eq!(tile, tile_of(dtype, &SUMS), "{dtype}");
    }
}

#[test]
fn finishing_avg_of_zero_contributions_is_an_error_and_changes_nothing() {
    for dtype in Dtype::ALL {
        let mut tile = tile_of(dtype, &SUMS);
        assert_eq!(tile.finish_reduction(ReduceOp::Avg, 0), Err(TileError::NoContributions), "{dtype}");
        assert_eq!(tile, tile_of(dtype, &SUMS), "{dtype}");
    }
    let message = TileError::NoContributions.to_string();
    assert!(message.contains("0 contributions") && message.contains("at least 1"), "{message}");
}

#[test]
fn a_tile_above_max_bytes_is_too_large_before_any_allocation() {
    // 2^36 f32 elements are 256 GiB: refused by the cap, so this never reaches the allocator.
    let error = Tile::try_zeros(Dtype::F32, 1 << 36).unwrap_err();
    assert_eq!(error, TileError::TooLarge { dtype: Dtype::F32, len: 1 << 36, bytes: 1 << 38, max: Tile::MAX_BYTES });
    assert!(error.to_string().contains("Tile::MAX_BYTES"), "{error}");
    let overflowing = Tile::try_filled(Dtype::I64, usize::MAX, 1.0).unwrap_err();
    assert!(
        matches!(overflowing, TileError::TooLarge { bytes, .. } if bytes == usize::MAX as u128 * 8),
        "{overflowing}"
    );
}

#[test]
fn a_tile_may_hold_the_largest_distributed_tensor() {
    assert_eq!(Tile::MAX_BYTES as u64, kernbench_core::DistTensor::MAX_BYTES);
}

#[test]
fn concat_larger_than_max_bytes_is_too_large() {
    let whole = Tile::zeros(Dtype::F32, 1 << 20);
    // 2^15 views of 4 MiB each are 128 GiB: above the cap, though each view is small.
    let views = vec![whole; 1 << 15];
    let error = Tile::concat(&views).unwrap_err();
    assert!(matches!(error, TileError::TooLarge { len, bytes, .. } if len == 1 << 35 && bytes == 1 << 37), "{error}");
}

#[test]
fn concat_of_adjacent_views_is_a_view_and_anything_else_a_copy() {
    let whole = Tile::from_vec((0..10).map(|i| i as f32).collect());
    let parts: Vec<Tile> = (0..3).map(|i| whole.chunk(i, 3).unwrap()).collect();
    let joined = Tile::concat(&parts).unwrap();
    assert!(joined.shares_buffer_with(&whole) && joined == whole);
    let one = Tile::concat(&parts[1..2]).unwrap();
    assert!(one.shares_buffer_with(&whole) && one == parts[1]);
    // Out of order, or with a gap: a new buffer holding the values in the order given.
    let swapped = Tile::concat(&[parts[1].clone(), parts[0].clone()]).unwrap();
    assert!(!swapped.shares_buffer_with(&whole));
    assert_eq!(swapped.to_vec::<f32>().unwrap(), [4.0, 5.0, 6.0, 0.0, 1.0, 2.0, 3.0]);
    let gap = Tile::concat(&[parts[0].clone(), parts[2].clone()]).unwrap();
    assert_eq!(gap.to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0, 3.0, 7.0, 8.0, 9.0]);
}

/// `len` small integers from `first` (exact in every dtype): parts large enough to be kept joined.
fn ramp(dtype: Dtype, first: usize, len: usize) -> Tile {
    tile_of(dtype, &(first..first + len).map(|i| (i % 256) as f64).collect::<Vec<_>>())
}

/// Elements in a part of 8 KiB or more in every dtype: joined, not copied.
const BIG: usize = 4096;

#[test]
fn concat_holds_its_parts_until_read_as_one_and_comparing_reads_them_in_place() {
    for dtype in Dtype::ALL {
        let (a, b) = (ramp(dtype, 0, BIG), ramp(dtype, BIG, BIG));
        let whole = ramp(dtype, 0, 2 * BIG);
        let joined = Tile::concat(&[a.clone(), b.clone()]).unwrap();
        let pieces = joined.pieces();
        assert_eq!(pieces.len(), 2, "{dtype}");
        assert!(pieces[0].shares_buffer_with(&a) && pieces[1].shares_buffer_with(&b), "{dtype}: not copied");
        // A view across the seam keeps the parts of its range.
        let middle = joined.slice(BIG - 1..BIG + 1).unwrap().pieces();
        assert_eq!(middle.iter().map(Tile::to_f64_vec).collect::<Vec<_>>(), [vec![255.0], vec![0.0]], "{dtype}");
        // Compared part by part, against a tile cut elsewhere and a flat one: equal, still not joined.
        let (c, d) = (ramp(dtype, 0, BIG + 3), ramp(dtype, BIG + 3, BIG - 3));
        assert!(joined == Tile::concat(&[c, d]).unwrap() && joined == whole, "{dtype}");
        let mut other = whole.to_f64_vec();
        (other[2], other[BIG + 5]) = (9.0, 8.0);
        let mut differences = Vec::new();
        joined.for_each_difference(&tile_of(dtype, &other), |i, x, y| differences.push((i, x, y))).unwrap();
        assert_eq!(differences, [(2, 2.0, 9.0), (BIG + 5, 5.0, 8.0)], "{dtype}");
        assert_eq!(joined.pieces().len(), 2, "{dtype}: comparing joined nothing");
        // Read as one: copied into one vector once.
        assert_eq!(joined.to_f64_vec(), whole.to_f64_vec(), "{dtype}");
        assert_eq!(joined.pieces().len(), 1, "{dtype}");
    }
}

#[test]
fn concat_of_small_parts_copies_them() {
    let joined = Tile::concat(&[Tile::from_vec(vec![1i32, 2]), Tile::from_vec(vec![3i32])]).unwrap();
    assert_eq!(joined.pieces().len(), 1, "3 elements are copied, not kept in 2 parts");
    assert_eq!(joined.to_vec::<i32>().unwrap(), [1, 2, 3]);
}

#[test]
fn writing_a_part_or_a_joined_tile_changes_only_what_was_written() {
    let (mut a, b) = (ramp(Dtype::I32, 0, BIG), ramp(Dtype::I32, BIG, BIG));
    let joined = Tile::concat(&[a.clone(), b.clone()]).unwrap();
    a.write_at(0, &Tile::from_vec(vec![99i32])).unwrap();
    assert_eq!(joined.get_f64(0), Some(0.0), "the part's write copied the part");
    let mut again = Tile::concat(&[b.clone(), b.clone()]).unwrap();
    again.reduce_in_place(&Tile::filled(Dtype::I32, 2 * BIG, 1000.0), ReduceOp::Sum).unwrap();
    assert_eq!((again.get_f64(BIG), b.get_f64(0)), (Some(1000.0 + (BIG % 256) as f64), Some((BIG % 256) as f64)));
    assert_eq!(again.pieces().len(), 1, "reduced into one vector");
    // A small write into a joined tile: the tile becomes one vector, its parts stay as they were.
    let mut joined = joined;
    joined.write_at(1, &Tile::from_vec(vec![-1i32])).unwrap();
    assert_eq!((joined.get_f64(1), joined.get_f64(BIG)), (Some(-1.0), Some((BIG % 256) as f64)));
    assert_eq!((a.get_f64(1), b.get_f64(0)), (Some(1.0), Some((BIG % 256) as f64)), "the parts are unchanged");
}

#[test]
fn writing_into_a_shared_tile_joins_the_write_with_the_rest_and_copies_neither() {
    for dtype in Dtype::ALL {
        let input = ramp(dtype, 0, 4 * BIG);
        let mut output = input.clone();
        // Two lanes' shares of a result, written one after the other.
        let shares = [ramp(dtype, 7, BIG), ramp(dtype, 11, 2 * BIG)];
        output.write_at(BIG, &shares[0]).unwrap();
        output.write_at(2 * BIG, &shares[1]).unwrap();
        let pieces = output.pieces();
        assert_eq!(pieces.len(), 3, "{dtype}: the input's first quarter and the two shares");
        assert!(pieces[0].shares_buffer_with(&input), "{dtype}");
        assert!(pieces[1].shares_buffer_with(&shares[0]) && pieces[2].shares_buffer_with(&shares[1]), "{dtype}");
        let want = Tile::concat(&[input.slice(0..BIG).unwrap(), shares[0].clone(), shares[1].clone()]).unwrap();
        assert!(output == want, "{dtype}");
        assert_eq!(input, ramp(dtype, 0, 4 * BIG), "{dtype}: the input is as it was");
        // Written in place once it is one vector again.
        output.reduce_in_place(&Tile::zeros(dtype, 4 * BIG), ReduceOp::Sum).unwrap();
        output.write_at(1, &ramp(dtype, 0, 1)).unwrap();
        assert_eq!((output.pieces().len(), output.get_f64(1)), (1, Some(0.0)), "{dtype}");
    }
}

#[test]
fn writing_all_of_a_tile_takes_the_source_and_writing_part_copies_it_in() {
    let mut target = Tile::zeros(Dtype::F32, 4);
    let source = Tile::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]);
    target.write_at(0, &source).unwrap();
    assert!(target.shares_buffer_with(&source) && target == source);
    // A part of a buffer shared with the source: copied on write, the source unchanged.
    target.write_at(1, &source.slice(0..2).unwrap()).unwrap();
    assert_eq!(target.to_vec::<f32>().unwrap(), [1.0, 1.0, 2.0, 4.0]);
    assert_eq!(source.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
}

// ---------------------------------------------------------------------------------------------------
// Tiles without data: every view, join, write and reduction keeps the shape; reading a value says no.

#[test]
fn a_tile_without_data_keeps_its_shape_through_every_operation() {
    for dtype in Dtype::ALL {
        let mut acc = Tile::without_data(dtype, 12);
        let with_data = Tile::zeros(dtype, 12);
        assert_eq!((acc.len(), acc.bytes(), acc.dtype(), acc.has_data()), (12, 12 * dtype.size(), dtype, false));
        let piece = acc.chunk(2, 3).unwrap();
        assert_eq!((piece.len(), piece.has_data()), (4, false));
        let joined = Tile::concat(&[piece.clone(), with_data.slice(0..2).unwrap()]).unwrap();
        assert_eq!((joined.len(), joined.has_data()), (6, false));
        let mut written = with_data.clone();
        written.write_at(4, &piece).unwrap();
        assert_eq!((written.len(), written.has_data()), (12, false));
        acc.reduce_in_place(&with_data, ReduceOp::Sum).unwrap();
        let mut avg = Tile::zeros(dtype, 12);
        avg.reduce_in_place(&Tile::without_data(dtype, 12), ReduceOp::Avg).unwrap();
        avg.finish_reduction(ReduceOp::Avg, 3).unwrap();
        assert!(!acc.has_data() && !avg.has_data());
        // Shapes are still checked.
        assert!(acc.reduce_in_place(&Tile::without_data(dtype, 11), ReduceOp::Sum).is_err());
        assert!(acc.write_at(10, &piece).is_err());
        assert_eq!(acc, Tile::without_data(dtype, 12));
        assert_ne!(acc, with_data);
    }
}

#[test]
fn reading_a_value_out_of_a_tile_without_data_is_an_error_naming_the_read() {
    let tile = Tile::without_data(Dtype::I32, 3);
    let error = tile.to_vec::<i32>().unwrap_err();
    assert!(matches!(error, TileError::NoData { dtype: Dtype::I32, len: 3, .. }), "{error}");
    assert!(error.to_string().starts_with("reading the values of a i32[3] tile that carries no data"), "{error}");
    assert_eq!(tile.get_f64(0), None);
    assert_eq!(format!("{tile:?}"), "i32[3] (no data)");
}

#[test]
fn tiles_made_while_without_data_is_on_carry_none_but_small_integer_ones() {
    let steering = Tile::STEERING_ELEMENTS;
    let made = kernbench_core::tile::without_data_while(true, || {
        let none = (Tile::zeros(Dtype::F32, 1 << 30), Tile::filled(Dtype::I64, steering + 1, 1.0));
        (none, Tile::filled(Dtype::I64, 4, 1.0), Tile::zeros(Dtype::I32, steering), Tile::zeros(Dtype::F32, 4))
    });
    assert!(!made.0.0.has_data() && !made.0.1.has_data() && !made.3.has_data());
    // Flags, counters and indices keep their values: they steer a timing-only run.
    assert_eq!(made.1.to_vec::<i64>().unwrap(), [1; 4]);
    assert!(made.2.has_data());
    assert!(Tile::zeros(Dtype::F32, 4).has_data(), "outside it, tiles carry data again");
}

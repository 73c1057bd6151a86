//! Tile arithmetic and comparison: reductions under a [`ReduceOp`], the end of an average, and
//! checks that two tiles hold the same shape or bits.

use std::ops::Add;

use super::storage::{Element, buffer, with_element};
use super::{ReduceOp, Tile, TileError};

impl Tile {
    /// Combines `other` into this tile elementwise under `op`, copying first if the buffer is shared.
    ///
    /// # Errors
    /// [`TileError::DtypeMismatch`] or [`TileError::LengthMismatch`], or [`TileError::OutOfMemory`] when
    /// a shared buffer cannot be copied; the tile is unchanged then.
    pub fn reduce_in_place(&mut self, other: &Tile, op: ReduceOp) -> Result<(), TileError> {
        self.check_same_shape(other)?;
        if !self.has_data() {
            // Already what the result is: a tile of this shape without data. A timing-only run
            // reduces every message so, and a new tile here would cost an allocation each time.
            return Ok(());
        }
        if !other.has_data() {
            *self = Tile::without_data(self.dtype(), self.len);
            return Ok(());
        }
        with_element!(self.dtype(), T => {
            // A uniquely held buffer cannot alias `other` (which would hold a second reference), so it
            // is combined in place; a shared one is combined into a new buffer in the same single pass
            // a copy on write would take.
            if self.holds_alone() {
                reduce_slice(self.typed_mut::<T>(), other.typed::<T>(), op);
            } else {
                *self = Tile::from_vec(combine_slices(self.typed::<T>(), other.typed::<T>(), op)?);
            }
        });
        Ok(())
    }

    /// Ends a reduction of `contributions` inputs under `op`: divides by the count for `Avg`,
    /// leaves the tile as it is for every other operator.
    ///
    /// # Errors
    /// [`TileError::NoContributions`] for an `Avg` of 0 contributions; the tile is unchanged then.
    pub fn finish_reduction(&mut self, op: ReduceOp, contributions: usize) -> Result<(), TileError> {
        if op != ReduceOp::Avg {
            return Ok(());
        }
        if contributions == 0 {
            return Err(TileError::NoContributions);
        }
        if contributions == 1 || !self.has_data() {
            return Ok(());
        }
        with_element!(self.dtype(), T => {
            for v in self.typed_mut::<T>() {
                *v = v.divide(contributions);
            }
        });
        Ok(())
    }

    /// Checks that `other` has this tile's dtype and length, so the two combine elementwise.
    ///
    /// # Errors
    /// [`TileError::DtypeMismatch`] or [`TileError::LengthMismatch`].
    pub fn check_same_shape(&self, other: &Tile) -> Result<(), TileError> {
        if self.dtype() != other.dtype() {
            return Err(TileError::DtypeMismatch { left: self.dtype(), right: other.dtype() });
        }
        if self.len != other.len {
            return Err(TileError::LengthMismatch { left: self.len, right: other.len });
        }
        Ok(())
    }

    /// Whether both tiles hold the same dtype, length and bits (NaNs compare by their bits).
    pub fn bit_eq(&self, other: &Tile) -> bool {
        if !(self.has_data() && other.has_data()) {
            return self.dtype() == other.dtype() && self.len == other.len && self.has_data() == other.has_data();
        }
        self.dtype() == other.dtype()
            && self.len == other.len
            && self
                .for_each_aligned_piece(other, &mut |_, a, b| {
                    let same = with_element!(a.dtype(), T => {
                        a.typed::<T>().iter().zip(b.typed::<T>()).all(|(x, y)| x.bits() == y.bits())
                    });
                    if same { Ok(()) } else { Err(()) }
                })
                .is_ok()
    }

    /// Calls `each(offset, mine, theirs)` for pieces of this tile and `other` (of the same length) at
    /// the same offset, in order, each a view of one vector (see [`Tile::for_each_piece`]): both read
    /// in place, joined tiles part by part.
    fn for_each_aligned_piece<E>(
        &self,
        other: &Tile,
        each: &mut impl FnMut(usize, &Tile, &Tile) -> Result<(), E>,
    ) -> Result<(), E> {
        self.for_each_piece(&mut |offset, mine| {
            let theirs = other.slice(offset..offset + mine.len).expect("tiles of the same length");
            theirs.for_each_piece(&mut |within, theirs| {
                let mine = mine.slice(within..within + theirs.len).expect("within the piece");
                each(offset + within, &mine, theirs)
            })
        })
    }

    /// Calls `each(index, mine, theirs)`, in index order, for every element whose bits differ from
    /// `other`'s, with both values as `f64`. Reads both tiles in place: checking a large output against
    /// its reference must not hold converted copies of them.
    ///
    /// # Errors
    /// [`TileError::DtypeMismatch`] or [`TileError::LengthMismatch`]; `each` is not called then.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::Tile;
    /// let (a, b) = (Tile::from_vec(vec![1.0f32, 2.0, 3.0]), Tile::from_vec(vec![1.0f32, 5.0, 3.0]));
    /// let mut seen = Vec::new();
    /// a.for_each_difference(&b, |i, x, y| seen.push((i, x, y))).unwrap();
    /// assert_eq!(seen, [(1, 2.0, 5.0)]);
    /// ```
    pub fn for_each_difference(&self, other: &Tile, mut each: impl FnMut(usize, f64, f64)) -> Result<(), TileError> {
        self.check_same_shape(other)?;
        self.check_data("for_each_difference")?;
        other.check_data("for_each_difference")?;
        // Block by block: a block whose bits all match (almost every block of a correct output) is
        // passed in one loop the compiler vectorises; only a block that differs is walked element by
        // element.
        const BLOCK: usize = 64;
        let compare = &mut |offset: usize, mine: &Tile, theirs: &Tile| {
            with_element!(mine.dtype(), T => {
                for (block, (a, b)) in mine.typed::<T>().chunks(BLOCK).zip(theirs.typed::<T>().chunks(BLOCK)).enumerate() {
                    if a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x.bits() ^ y.bits())) == 0 {
                        continue;
                    }
                    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
                        if x.bits() != y.bits() {
                            each(offset + block * BLOCK + i, Element::to_f64(x), Element::to_f64(y));
                        }
                    }
                }
            });
            Ok::<(), std::convert::Infallible>(())
        };
        let Ok(()) = self.for_each_aligned_piece(other, compare);
        Ok(())
    }
}

/// `op` of `a` and `b`, elementwise, into a new vector.
fn combine_slices<T: Element>(a: &[T], b: &[T], op: ReduceOp) -> Result<Vec<T>, TileError> {
    fn each<T: Element>(a: &[T], b: &[T], op: ReduceOp) -> Result<Vec<T>, TileError> {
        let len = a.len().min(b.len());
        let mut out: Vec<T> = buffer(len)?;
        // Writing through the spare capacity, one plain loop over three slices, vectorises where
        // `extend` over an iterator does not.
        for ((slot, &x), &y) in out.spare_capacity_mut()[..len].iter_mut().zip(a).zip(b) {
            slot.write(x.combine(y, op));
        }
        // SAFETY: the loop above initialised the first `len` elements.
        unsafe { out.set_len(len) };
        Ok(out)
    }
    match op {
        ReduceOp::Sum | ReduceOp::Avg => each(a, b, ReduceOp::Sum),
        ReduceOp::Prod => each(a, b, ReduceOp::Prod),
        ReduceOp::Max => each(a, b, ReduceOp::Max),
        ReduceOp::Min => each(a, b, ReduceOp::Min),
    }
}

fn reduce_slice<T: Element>(acc: &mut [T], rhs: &[T], op: ReduceOp) {
    // One loop per operator, each with a constant `op`, so the compiler can vectorise it.
    fn each<T: Element>(acc: &mut [T], rhs: &[T], op: ReduceOp) {
        for (a, &b) in acc.iter_mut().zip(rhs) {
            *a = a.combine(b, op);
        }
    }
    match op {
        ReduceOp::Sum | ReduceOp::Avg => each(acc, rhs, ReduceOp::Sum),
        ReduceOp::Prod => each(acc, rhs, ReduceOp::Prod),
        ReduceOp::Max => each(acc, rhs, ReduceOp::Max),
        ReduceOp::Min => each(acc, rhs, ReduceOp::Min),
    }
}

impl Add for &Tile {
    type Output = Result<Tile, TileError>;

    /// The elementwise sum, in a new tile.
    fn add(self, rhs: &Tile) -> Self::Output {
        let mut sum = self.clone();
        sum.reduce_in_place(rhs, ReduceOp::Sum)?;
        Ok(sum)
    }
}

/// Tiles are equal when they hold the same dtype, length and bits: what "identical results" means for
/// a deterministic simulator (so NaNs with equal bits are equal, and `0.0 != -0.0`).
impl PartialEq for Tile {
    fn eq(&self, other: &Tile) -> bool {
        self.bit_eq(other)
    }
}

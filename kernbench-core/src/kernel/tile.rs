//! Tiles: dtype-tagged contiguous data that kernels send, receive and reduce.
//!
//! A tile is a view (`start..start + len`) of a shared, reference-counted buffer. Slicing and sending
//! share the buffer; the first write to a shared buffer copies the viewed range (copy on write), so a
//! sender that keeps reducing into its tile never changes what a receiver already holds.

use std::fmt;
use std::ops::{Add, Range};
use std::sync::Arc;

use half::{bf16, f16};

use crate::kernel::{Dtype, ReduceOp};

/// The storage behind tiles: one typed vector.
#[derive(Clone, Debug)]
enum Storage {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// Runs `$body` with `$v` bound to the typed vector inside a `Storage` (by reference or mutably).
macro_rules! each_storage {
    ($storage:expr, $v:ident => $body:expr) => {
        match $storage {
            Storage::F32($v) => $body,
            Storage::F16($v) => $body,
            Storage::BF16($v) => $body,
            Storage::I32($v) => $body,
            Storage::I64($v) => $body,
        }
    };
}

/// A Rust type that can be a tile's element.
pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + 'static + sealed::Sealed {
    /// The dtype of tiles holding this type.
    const DTYPE: Dtype;
    /// Converts to `f64` (exactly, except `i64` beyond 2^53).
    fn to_f64(self) -> f64;
    /// Converts from `f64`, rounding to nearest (integers: saturating, toward zero).
    fn from_f64(v: f64) -> Self;
    /// Combines two elements under a reduction operator (`Avg` combines as a sum).
    fn combine(self, other: Self, op: ReduceOp) -> Self;
    /// Divides by a count of contributions (the end of an `Avg`).
    fn divide(self, count: usize) -> Self;
    /// The element's bits, for bitwise comparison.
    fn bits(self) -> u64;
    #[doc(hidden)]
    fn wrap(v: Vec<Self>) -> Storage_;
    #[doc(hidden)]
    fn view(s: &Storage_) -> Option<&[Self]>;
    #[doc(hidden)]
    fn view_mut(s: &mut Storage_) -> Option<&mut Vec<Self>>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

/// The opaque storage of a tile, named by [`Element`]'s hidden methods.
#[doc(hidden)]
#[derive(Debug)]
pub struct Storage_(Storage);

/// `v` as an `f32` rounded to odd: truncated toward zero, with the last bit set when anything was cut
/// off. Rounding that to a narrower type (f16, bf16: at least two bits fewer) gives the same result as
/// rounding `v` directly, where rounding to nearest twice could round a tie the wrong way.
fn f32_round_to_odd(v: f64) -> f32 {
    let nearest = v as f32;
    if !nearest.is_finite() || f64::from(nearest) == v {
        return nearest;
    }
    let toward_zero = if f64::from(nearest).abs() > v.abs() { f32::from_bits(nearest.to_bits() - 1) } else { nearest };
    f32::from_bits(toward_zero.to_bits() | 1)
}

fn element_dtype<T: Element>(_: &[T]) -> Dtype {
    T::DTYPE
}

/// The storage methods of an [`Element`] kept in `Storage::$variant`: the same for every element type.
macro_rules! storage_access {
    ($variant:ident) => {
        fn wrap(v: Vec<Self>) -> Storage_ {
            Storage_(Storage::$variant(v))
        }
        fn view(s: &Storage_) -> Option<&[Self]> {
            match &s.0 {
                Storage::$variant(v) => Some(v),
                _ => None,
            }
        }
        fn view_mut(s: &mut Storage_) -> Option<&mut Vec<Self>> {
            match &mut s.0 {
                Storage::$variant(v) => Some(v),
                _ => None,
            }
        }
    };
}

macro_rules! float_element {
    ($t:ty, $variant:ident, $to32:expr, $from32:expr, $from64:expr) => {
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$variant;
            fn to_f64(self) -> f64 {
                f64::from(($to32)(self))
            }
            fn from_f64(v: f64) -> Self {
                ($from64)(v)
            }
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                let (a, b): (f32, f32) = (($to32)(self), ($to32)(other));
                ($from32)(match op {
                    ReduceOp::Sum | ReduceOp::Avg => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                })
            }
            fn divide(self, count: usize) -> Self {
                ($from32)(($to32)(self) / count as f32)
            }
            fn bits(self) -> u64 {
                u64::from(self.to_bits())
            }
            storage_access!($variant);
        }
    };
}

float_element!(f32, F32, |x: f32| x, |x: f32| x, |v: f64| v as f32);
float_element!(f16, F16, |x: f16| x.to_f32(), f16::from_f32, |v| f16::from_f32(f32_round_to_odd(v)));
float_element!(bf16, BF16, |x: bf16| x.to_f32(), bf16::from_f32, |v| bf16::from_f32(f32_round_to_odd(v)));

macro_rules! int_element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$variant;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self.wrapping_add(other),
                    ReduceOp::Prod => self.wrapping_mul(other),
                    ReduceOp::Max => self.max(other),
                    ReduceOp::Min => self.min(other),
                }
            }
            fn divide(self, count: usize) -> Self {
                self / count as $t
            }
            fn bits(self) -> u64 {
                self as u64
            }
            storage_access!($variant);
        }
    };
}

int_element!(i32, I32);
int_element!(i64, I64);

/// Runs `$body` with `$T` bound to the element type of `$dtype`.
macro_rules! with_element {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            Dtype::F32 => {
                type $T = f32;
                $body
            }
            Dtype::F16 => {
                type $T = f16;
                $body
            }
            Dtype::BF16 => {
                type $T = bf16;
                $body
            }
            Dtype::I32 => {
                type $T = i32;
                $body
            }
            Dtype::I64 => {
                type $T = i64;
                $body
            }
        }
    };
}

/// Why a tile operation could not be done.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TileError {
    /// Two tiles combined elementwise hold different dtypes.
    #[error("dtype mismatch: {left} vs {right}")]
    DtypeMismatch {
        /// The dtype of the tile being written or the left operand.
        left: Dtype,
        /// The dtype of the other operand.
        right: Dtype,
    },
    /// Two tiles combined elementwise have different lengths.
    #[error("length mismatch: {left} vs {right} elements")]
    LengthMismatch {
        /// The length of the tile being written or the left operand.
        left: usize,
        /// The length of the other operand.
        right: usize,
    },
    /// A range reaches past the end of a tile.
    #[error("range {start}..{end} is out of bounds for a tile of {len} elements")]
    OutOfRange {
        /// First element of the range.
        start: usize,
        /// One past the last element of the range.
        end: usize,
        /// The tile's length.
        len: usize,
    },
    /// A chunk index that is not below the chunk count, or a count of zero.
    #[error("chunk {index} of {count} does not exist: expected an index in 0..{count} and a count of at least 1")]
    BadChunk {
        /// The chunk asked for.
        index: usize,
        /// The number of chunks.
        count: usize,
    },
    /// The tile's elements were asked for as another Rust type.
    #[error("the tile holds {actual}, not {requested}")]
    WrongElementType {
        /// The dtype the caller asked for.
        requested: Dtype,
        /// The dtype the tile holds.
        actual: Dtype,
    },
    /// A concatenation of no tiles (its dtype would be unknown).
    #[error("cannot concatenate zero tiles: the dtype would be unknown")]
    EmptyConcat,
    /// A tile larger than [`Tile::MAX_BYTES`] was asked for; it was refused before any memory was taken.
    #[error(
        "a tile of {len} {dtype} elements ({bytes} bytes) is larger than the most one tile may hold, {max} bytes (Tile::MAX_BYTES); use smaller tiles"
    )]
    TooLarge {
        /// The dtype asked for.
        dtype: Dtype,
        /// The number of elements asked for.
        len: usize,
        /// Their size in bytes (wide enough that no request overflows it).
        bytes: u128,
        /// [`Tile::MAX_BYTES`].
        max: usize,
    },
    /// The allocator could not provide a tile's buffer: this machine's memory is used up.
    #[error(
        "the allocator could not provide {bytes} bytes for a tile of {len} {dtype} elements: this machine's memory is used up; use smaller tiles or fewer PEs"
    )]
    OutOfMemory {
        /// The dtype asked for.
        dtype: Dtype,
        /// The number of elements asked for.
        len: usize,
        /// Their size in bytes.
        bytes: usize,
    },
    /// An average finished over zero contributions, which would divide by zero.
    #[error("cannot finish an average of 0 contributions: expected at least 1")]
    NoContributions,
}

/// Dtype-tagged contiguous data: a view of a shared buffer.
///
/// # Examples
/// ```
/// use kernbench_core::{ReduceOp, Tile};
/// let mut acc = Tile::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]);
/// let other = Tile::from_vec(vec![10.0f32; 4]);
/// acc.reduce_in_place(&other, ReduceOp::Sum).unwrap();
/// assert_eq!(acc.as_slice::<f32>().unwrap(), &[11.0, 12.0, 13.0, 14.0]);
///
/// let half = acc.chunk(1, 2).unwrap(); // zero-copy
/// assert!(half.shares_buffer_with(&acc));
/// assert_eq!(half.as_slice::<f32>().unwrap(), &[13.0, 14.0]);
///
/// let mismatch = Tile::from_vec(vec![1i32; 4]);
/// assert!(acc.reduce_in_place(&mismatch, ReduceOp::Sum).is_err());
/// ```
#[derive(Clone)]
pub struct Tile {
    data: Arc<Storage_>,
    start: usize,
    len: usize,
}

impl Tile {
    /// The most bytes one tile may hold: 64 GiB, as much as the largest tensor a workload may describe
    /// (`DistTensor::MAX_BYTES`), so no collective needs a larger tile. Larger requests fail with
    /// [`TileError::TooLarge`] before the allocator is asked, so an absurd length ends in an error, not in
    /// an abort of the process.
    pub const MAX_BYTES: usize = 1 << 36;

    /// A tile owning `values`.
    pub fn from_vec<T: Element>(values: Vec<T>) -> Tile {
        let len = values.len();
        Tile { data: Arc::new(T::wrap(values)), start: 0, len }
    }

    /// `len` zeros of `dtype`.
    ///
    /// # Panics
    /// As [`Tile::filled`].
    pub fn zeros(dtype: Dtype, len: usize) -> Tile {
        Tile::filled(dtype, len, 0.0)
    }

    /// `len` zeros of `dtype`, or an error where [`Tile::zeros`] would panic.
    ///
    /// # Errors
    /// As [`Tile::try_filled`].
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{Dtype, Tile, TileError};
    /// assert_eq!(Tile::try_zeros(Dtype::I32, 3).unwrap().to_vec::<i32>().unwrap(), [0, 0, 0]);
    /// let absurd = Tile::try_zeros(Dtype::F32, 1 << 36).unwrap_err();
    /// assert!(matches!(absurd, TileError::TooLarge { bytes, .. } if bytes == 1 << 38), "{absurd}");
    /// ```
    pub fn try_zeros(dtype: Dtype, len: usize) -> Result<Tile, TileError> {
        Tile::try_filled(dtype, len, 0.0)
    }

    /// `len` copies of `value` converted to `dtype` (rounded to nearest; integers truncated).
    ///
    /// # Panics
    /// When [`Tile::try_filled`] fails: for more than [`Tile::MAX_BYTES`], or when memory is used up.
    pub fn filled(dtype: Dtype, len: usize, value: f64) -> Tile {
        Tile::try_filled(dtype, len, value).unwrap_or_else(|error| panic!("{error}"))
    }

    /// `len` copies of `value` converted to `dtype`, or an error where [`Tile::filled`] would panic.
    ///
    /// # Errors
    /// [`TileError::TooLarge`] above [`Tile::MAX_BYTES`], [`TileError::OutOfMemory`] when the allocator
    /// cannot provide the buffer.
    pub fn try_filled(dtype: Dtype, len: usize, value: f64) -> Result<Tile, TileError> {
        with_element!(dtype, T => {
            let mut values: Vec<T> = buffer(len)?;
            values.resize(len, <T as Element>::from_f64(value));
            Ok(Tile::from_vec(values))
        })
    }

    /// A tile of `len` elements of `dtype` repeating `period` (converted once: rounded to nearest,
    /// integers truncated) from its start: element `i` is `period[i % period.len()]`; zeros for an empty
    /// `period`. Written by doubling copies of what is already there, so a large sample costs about a
    /// memcpy, with no `f64` copy of it.
    ///
    /// # Errors
    /// As [`Tile::try_filled`].
    pub(crate) fn try_repeating(dtype: Dtype, len: usize, period: &[f64]) -> Result<Tile, TileError> {
        if period.is_empty() {
            return Tile::try_zeros(dtype, len);
        }
        with_element!(dtype, T => {
            let mut values: Vec<T> = buffer(len)?;
            values.extend(period.iter().take(len).map(|&v| <T as Element>::from_f64(v)));
            // A whole number of periods so far, so a copy of a prefix continues the pattern.
            while values.len() < len {
                values.extend_from_within(..values.len().min(len - values.len()));
            }
            Ok(Tile::from_vec(values))
        })
    }

    /// A tile of `dtype` from `f64` values (rounded to nearest; integers truncated).
    ///
    /// # Panics
    /// As [`Tile::filled`].
    pub fn from_f64s(dtype: Dtype, values: &[f64]) -> Tile {
        with_element!(dtype, T => {
            let mut out: Vec<T> = buffer(values.len()).unwrap_or_else(|error| panic!("{error}"));
            out.extend(values.iter().map(|&v| <T as Element>::from_f64(v)));
            Tile::from_vec(out)
        })
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        each_storage!(&self.data.0, v => element_dtype(v.as_slice()))
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tile has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size of the elements in bytes.
    pub fn bytes(&self) -> usize {
        self.len * self.dtype().size()
    }

    /// Whether two tiles view the same buffer (a slice or a sent copy of a tile does, until either is
    /// written).
    pub fn shares_buffer_with(&self, other: &Tile) -> bool {
        Arc::ptr_eq(&self.data, &other.data)
    }

    /// The elements as a slice of `T`.
    ///
    /// # Errors
    /// [`TileError::WrongElementType`] when the tile holds another dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], TileError> {
        let all =
            T::view(&self.data).ok_or(TileError::WrongElementType { requested: T::DTYPE, actual: self.dtype() })?;
        Ok(&all[self.start..self.start + self.len])
    }

    /// The elements copied into a vector of `T`.
    ///
    /// # Errors
    /// [`TileError::WrongElementType`] when the tile holds another dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, TileError> {
        self.as_slice().map(<[T]>::to_vec)
    }

    /// Appends the elements' bytes (in the machine's byte order) to `out`: a tile on the wire between
    /// processes of one run, which [`Tile::from_bytes`] reads back bit for bit.
    pub fn write_bytes(&self, out: &mut Vec<u8>) {
        with_element!(self.dtype(), T => out.extend_from_slice(bytemuck::cast_slice::<T, u8>(self.typed::<T>())))
    }

    /// A tile of `dtype` holding `bytes` as [`Tile::write_bytes`] wrote them; `None` when `bytes` is
    /// not a whole number of elements or is more than [`Tile::MAX_BYTES`].
    pub fn from_bytes(dtype: Dtype, bytes: &[u8]) -> Option<Tile> {
        if bytes.len() > Tile::MAX_BYTES || bytes.len() % dtype.size() != 0 {
            return None;
        }
        Some(with_element!(dtype, T => Tile::from_vec(bytemuck::pod_collect_to_vec::<u8, T>(bytes))))
    }

    /// The elements converted to `f64`, for checks and reports.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        with_element!(self.dtype(), T => self.typed::<T>().iter().map(|&v| Element::to_f64(v)).collect())
    }

    /// The view `range` of this tile, sharing its buffer.
    ///
    /// # Errors
    /// [`TileError::OutOfRange`] when `range` reaches past the end.
    pub fn slice(&self, range: Range<usize>) -> Result<Tile, TileError> {
        if range.start > range.end || range.end > self.len {
            return Err(TileError::OutOfRange { start: range.start, end: range.end, len: self.len });
        }
        Ok(Tile { data: Arc::clone(&self.data), start: self.start + range.start, len: range.len() })
    }

    /// Chunk `index` of `count` near-equal chunks (see [`chunk_range`]), sharing this tile's buffer.
    ///
    /// # Errors
    /// [`TileError::BadChunk`] when `index >= count`.
    pub fn chunk(&self, index: usize, count: usize) -> Result<Tile, TileError> {
        self.slice(chunk_range(self.len, index, count)?)
    }

    /// The tiles one after the other, in one new buffer (or, for views that already follow each other
    /// in one buffer, a view of them).
    ///
    /// # Errors
    /// [`TileError::EmptyConcat`] for no tiles, [`TileError::DtypeMismatch`] for mixed dtypes,
    /// [`TileError::TooLarge`] or [`TileError::OutOfMemory`] when the result cannot be allocated.
    pub fn concat(tiles: &[Tile]) -> Result<Tile, TileError> {
        let first = tiles.first().ok_or(TileError::EmptyConcat)?;
        let dtype = first.dtype();
        // Views that follow each other in one buffer (the chunks of a tile, in order) are already
        // that tile: a view of them costs nothing, where a copy costs a pass over the data.
        let adjacent = tiles.windows(2).all(|w| w[0].shares_buffer_with(&w[1]) && w[0].start + w[0].len == w[1].start);
        if adjacent {
            let len = tiles.iter().map(Tile::len).sum();
            return Ok(Tile { data: Arc::clone(&first.data), start: first.start, len });
        }
        with_element!(dtype, T => {
            // Views of one buffer can repeat it, so the total can pass usize: saturating keeps it above
            // the cap, which refuses it.
            let len = tiles.iter().fold(0usize, |sum, t| sum.saturating_add(t.len()));
            let mut out: Vec<T> = buffer(len)?;
            for t in tiles {
                out.extend_from_slice(t.as_slice::<T>().map_err(|_| TileError::DtypeMismatch { left: dtype, right: t.dtype() })?);
            }
            Ok(Tile::from_vec(out))
        })
    }

    /// Combines `other` into this tile elementwise under `op`, copying first if the buffer is shared.
    ///
    /// # Errors
    /// [`TileError::DtypeMismatch`] or [`TileError::LengthMismatch`], or [`TileError::OutOfMemory`] when
    /// a shared buffer cannot be copied; the tile is unchanged then.
    pub fn reduce_in_place(&mut self, other: &Tile, op: ReduceOp) -> Result<(), TileError> {
        self.check_same_shape(other)?;
        with_element!(self.dtype(), T => {
            // A uniquely held buffer cannot alias `other` (which would hold a second reference), so it
            // is combined in place; a shared one is combined into a new buffer in the same single pass
            // a copy on write would take.
            if Arc::get_mut(&mut self.data).is_some() {
                reduce_slice(self.typed_mut::<T>(), other.typed::<T>(), op);
            } else {
                *self = Tile::from_vec(combine_slices(self.typed::<T>(), other.typed::<T>(), op)?);
            }
        });
        Ok(())
    }

    /// Copies `src` into this tile at `offset`; a shared buffer is left as it is and this tile gets a
    /// new one, holding `src` there and the rest as it was.
    ///
    /// # Errors
    /// [`TileError::DtypeMismatch`], or [`TileError::OutOfRange`] when `src` does not fit;
    /// [`TileError::OutOfMemory`] when a shared buffer's replacement cannot be allocated.
    pub fn write_at(&mut self, offset: usize, src: &Tile) -> Result<(), TileError> {
        if self.dtype() != src.dtype() {
            return Err(TileError::DtypeMismatch { left: self.dtype(), right: src.dtype() });
        }
        let end = offset.checked_add(src.len()).filter(|&end| end <= self.len);
        let Some(end) = end else {
            return Err(TileError::OutOfRange { start: offset, end: offset.saturating_add(src.len()), len: self.len });
        };
        if offset == 0 && end == self.len {
            // All of it: the same values as a copy, without copying.
            *self = src.clone();
            return Ok(());
        }
        with_element!(self.dtype(), T => {
            if Arc::get_mut(&mut self.data).is_some() {
                // A uniquely held buffer cannot alias `src` (which would hold a second reference).
                self.typed_mut::<T>()[offset..end].copy_from_slice(src.typed::<T>());
            } else {
                // A shared one is rebuilt in one pass around `src`, not copied whole and then partly
                // overwritten.
                let old = self.typed::<T>();
                let mut new: Vec<T> = buffer(self.len)?;
                new.extend_from_slice(&old[..offset]);
                new.extend_from_slice(src.typed::<T>());
                new.extend_from_slice(&old[end..]);
                *self = Tile::from_vec(new);
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
        if contributions == 1 {
            return Ok(());
        }
        with_element!(self.dtype(), T => {
            for v in self.typed_mut::<T>() {
                *v = v.divide(contributions);
            }
        });
        Ok(())
    }

    /// Each element's bits (zero-extended), for comparisons that must be exact.
    pub fn to_bits_vec(&self) -> Vec<u64> {
        with_element!(self.dtype(), T => self.typed::<T>().iter().map(|v| v.bits()).collect())
    }

    /// Element `index` converted to `f64`, or `None` past the end.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::Tile;
    /// let t = Tile::from_vec(vec![1i32, 2, 3]);
    /// assert_eq!(t.get_f64(2), Some(3.0));
    /// assert_eq!(t.get_f64(3), None);
    /// ```
    pub fn get_f64(&self, index: usize) -> Option<f64> {
        with_element!(self.dtype(), T => self.typed::<T>().get(index).map(|&v| Element::to_f64(v)))
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
        with_element!(self.dtype(), T => {
            // Block by block: a block whose bits all match (almost every block of a correct output) is
            // passed in one loop the compiler vectorises; only a block that differs is walked element by
            // element.
            const BLOCK: usize = 64;
            let (mine, theirs) = (self.typed::<T>(), other.typed::<T>());
            for (block, (a, b)) in mine.chunks(BLOCK).zip(theirs.chunks(BLOCK)).enumerate() {
                if a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x.bits() ^ y.bits())) == 0 {
                    continue;
                }
                for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
                    if x.bits() != y.bits() {
                        each(block * BLOCK + i, Element::to_f64(x), Element::to_f64(y));
                    }
                }
            }
        });
        Ok(())
    }

    /// Whether both tiles hold the same dtype, length and bits (NaNs compare by their bits).
    pub fn bit_eq(&self, other: &Tile) -> bool {
        self.dtype() == other.dtype()
            && self.len == other.len
            && with_element!(self.dtype(), T => {
                self.typed::<T>().iter().zip(other.typed::<T>()).all(|(a, b)| a.bits() == b.bits())
            })
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

    /// The viewed elements; the caller has matched `T` to the dtype.
    fn typed<T: Element>(&self) -> &[T] {
        &T::view(&self.data).expect("dtype dispatched by the caller")[self.start..self.start + self.len]
    }

    /// The viewed elements, writable: takes a private copy of the range first if the buffer is shared.
    fn typed_mut<T: Element>(&mut self) -> &mut [T] {
        if Arc::get_mut(&mut self.data).is_none() {
            let own = self.typed::<T>().to_vec();
            self.data = Arc::new(T::wrap(own));
            self.start = 0;
        }
        let data = Arc::get_mut(&mut self.data).expect("unique after copy on write");
        let (start, len) = (self.start, self.len);
        &mut T::view_mut(data).expect("dtype dispatched by the caller")[start..start + len]
    }
}

/// The range of chunk `index` when `len` elements are split into `count` near-equal chunks: the first
/// `len % count` chunks hold one element more than the rest.
///
/// # Errors
/// [`TileError::BadChunk`] when `index >= count` (so also when `count` is zero).
///
/// # Examples
/// ```
/// use kernbench_core::chunk_range;
/// assert_eq!(chunk_range(10, 0, 4).unwrap(), 0..3);
/// assert_eq!(chunk_range(10, 3, 4).unwrap(), 8..10);
/// assert!(chunk_range(10, 4, 4).is_err());
/// ```
pub fn chunk_range(len: usize, index: usize, count: usize) -> Result<Range<usize>, TileError> {
    if index >= count {
        return Err(TileError::BadChunk { index, count });
    }
    Ok(chunk_start(len, index, count)..chunk_start(len, index + 1, count))
}

/// Where chunk `index` of `count` near-equal chunks of `len` elements starts, for any `index` up to and
/// including `count` (which gives `len`): the boundaries [`chunk_range`] uses.
///
/// # Examples
/// ```
/// use kernbench_core::chunk_start;
/// assert_eq!(chunk_start(10, 1, 4), 3);
/// assert_eq!(chunk_start(10, 4, 4), 10);
/// ```
pub fn chunk_start(len: usize, index: usize, count: usize) -> usize {
    if count == 0 {
        return 0;
    }
    index * (len / count) + index.min(len % count)
}

/// An empty vector with room for `len` elements, or an error if that is more than [`Tile::MAX_BYTES`]
/// or more than the allocator can give: `Vec::with_capacity` would abort the process instead. Large
/// ones ask the OS for huge pages before anything touches them: faulting a fresh buffer in 4 KiB at a
/// time costs more than filling it.
fn buffer<T: Element>(len: usize) -> Result<Vec<T>, TileError> {
    let bytes = len as u128 * size_of::<T>() as u128;
    if bytes > Tile::MAX_BYTES as u128 {
        return Err(TileError::TooLarge { dtype: T::DTYPE, len, bytes, max: Tile::MAX_BYTES });
    }
    let mut values = Vec::new();
    values.try_reserve_exact(len).map_err(|_| TileError::OutOfMemory {
        dtype: T::DTYPE,
        len,
        // Below MAX_BYTES, so it fits a usize.
        bytes: len * size_of::<T>(),
    })?;
    #[cfg(target_os = "linux")]
    advise_huge_pages(&values);
    Ok(values)
}

#[cfg(target_os = "linux")]
fn advise_huge_pages<T>(values: &Vec<T>) {
    const HUGE_PAGE: usize = 2 << 20;
    let bytes = values.capacity() * size_of::<T>();
    if bytes < 2 * HUGE_PAGE {
        return;
    }
    let start = (values.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
    let end = (values.as_ptr() as usize + bytes) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        // SAFETY: the range lies inside the vector's own allocation; MADV_HUGEPAGE is advice about how
        // to back those pages and changes neither their contents nor their mapping.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
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

impl fmt::Debug for Tile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 8;
        let values = self.to_f64_vec();
        write!(f, "{}[{}] ", self.dtype(), self.len)?;
        let mut list = f.debug_list();
        list.entries(values.iter().take(SHOWN));
        if values.len() > SHOWN {
            list.entry(&format_args!("..."));
        }
        list.finish()
    }
}

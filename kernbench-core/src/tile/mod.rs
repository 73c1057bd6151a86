//! Tiles: dtype-tagged contiguous data that kernels send, receive and reduce, with the dtypes and
//! reduction operators they hold and the near-equal chunks they are cut into. Uses nothing of ours.
//!
//! A tile is a view (`start..start + len`) of a shared, reference-counted buffer. Slicing and sending
//! share the buffer; the first write to a shared buffer copies the viewed range (copy on write), so a
//! sender that keeps reducing into its tile never changes what a receiver already holds. A tile of at
//! most four bytes (one `f32` or `i32`, two `f16`: a flag, a count, one value) holds its elements
//! itself instead: making, sending and dropping it asks nothing of the allocator and touches no shared
//! count, which would cost more than the elements.
//!
//! A tile may also carry no data at all, only its dtype and length ([`Tile::without_data`]): what a
//! timing-only run moves, where the time of every operation depends on those alone. Such a tile has
//! no buffer either, so making, viewing, sending and dropping one touches no shared count. Views, joins,
//! writes and reductions work on such tiles (their results carry no data either); reading a value out
//! of one is [`TileError::NoData`]. While [`without_data_while`] says so, the tiles a kernel makes
//! ([`Tile::zeros`], [`Tile::filled`]) carry no data.
//!
//! This file holds the [`Tile`] and how one is made; the others how its elements are stored, its
//! conversions, its views and chunks, and its arithmetic.

mod arith;
mod convert;
mod dtype;
mod error;
mod storage;
mod view;

use std::cell::Cell;
use std::ops::Range;
use std::sync::Arc;

pub use dtype::{Dtype, ParseDtypeError, ParseReduceOpError, ReduceOp};
pub use error::TileError;
/// Half-precision element types (from the `half` crate), for `F16` and `BF16` tiles.
pub use half::{bf16, f16};
pub use storage::Element;
pub use view::{chunk_range, chunk_start};

use storage::{Storage_, buffer, with_element};

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
    view: View,
    len: usize,
}

/// What a tile views: elements of a shared buffer from `start`, or what the tile holds itself
/// ([`Held`], in the room `start` would take, so a tile is three words either way).
#[derive(Clone)]
enum View {
    Shared { buffer: Arc<Storage_>, start: usize },
    Held(Held),
}

/// What a tile without a buffer holds: its elements, when they fit in [`Held::BYTES`], or, for a tile
/// [without data](Tile::without_data), none; and their dtype either way.
#[derive(Clone, Copy)]
struct Held {
    dtype: Dtype,
    has_data: bool,
    bytes: HeldBytes,
}

/// The bytes of a [`Held`] tile's elements, aligned for every element type that fits in them.
#[derive(Clone, Copy)]
#[repr(align(4))]
struct HeldBytes([u8; Held::BYTES]);

impl Held {
    /// The most bytes of elements a tile holds itself.
    const BYTES: usize = 4;

    /// A tile's dtype without its data.
    fn absent(dtype: Dtype) -> Held {
        Held { dtype, has_data: false, bytes: HeldBytes([0; Held::BYTES]) }
    }

    /// `values`, if they fit (and are aligned as the bytes are).
    fn of<T: Element>(values: &[T]) -> Option<Held> {
        let from: &[u8] = bytemuck::cast_slice(values);
        if from.len() > Held::BYTES || align_of::<T>() > align_of::<HeldBytes>() {
            return None;
        }
        let mut bytes = HeldBytes([0; Held::BYTES]);
        bytes.0[..from.len()].copy_from_slice(from);
        Some(Held { dtype: T::DTYPE, has_data: true, bytes })
    }

    /// The first `len` elements, if they are of `T`.
    fn elements<T: Element>(&self, len: usize) -> Option<&[T]> {
        (self.has_data && self.dtype == T::DTYPE).then(|| bytemuck::cast_slice(&self.bytes.0[..len * size_of::<T>()]))
    }

    /// Elements `range` (of a dtype of `size` bytes) moved to the front, if there are elements.
    fn slice(mut self, range: Range<usize>, size: usize) -> Held {
        if self.has_data {
            self.bytes.0.copy_within(range.start * size..range.end * size, 0);
        }
        self
    }
}

impl Tile {
    /// The most bytes one tile may hold: 64 GiB, as much as the largest tensor a `DistTensor` may hold
    /// (`DistTensor::MAX_BYTES`), so no collective needs a larger tile. Larger requests fail with
    /// [`TileError::TooLarge`] before the allocator is asked, so an absurd length ends in an error, not in
    /// an abort of the process.
    pub const MAX_BYTES: usize = 1 << 36;

    /// A tile owning `values`.
    pub fn from_vec<T: Element>(values: Vec<T>) -> Tile {
        let len = values.len();
        let view = match Held::of(&values) {
            Some(held) => View::Held(held),
            None => View::Shared { buffer: Arc::new(T::wrap(values)), start: 0 },
        };
        Tile { view, len }
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

    /// `len` copies of `value` converted to `dtype`, or an error where [`Tile::filled`] would panic; a
    /// tile [without data](Tile::without_data) while [`without_data_while`] says so.
    ///
    /// # Errors
    /// [`TileError::TooLarge`] above [`Tile::MAX_BYTES`], [`TileError::OutOfMemory`] when the allocator
    /// cannot provide the buffer.
    pub fn try_filled(dtype: Dtype, len: usize, value: f64) -> Result<Tile, TileError> {
        if WITHOUT_DATA.get() && !Tile::steers(dtype, len) {
            return Ok(Tile::without_data(dtype, len));
        }
        with_element!(dtype, T => {
            let value = <T as Element>::from_f64(value);
            if let Some(held) = [value; Held::BYTES].get(..len).and_then(Held::of) {
                return Ok(Tile { view: View::Held(held), len });
            }
            let mut values: Vec<T> = buffer(len)?;
            values.resize(len, value);
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

    /// The most elements of an integer tile that keeps its data while [`without_data_while`] says
    /// otherwise.
    pub const STEERING_ELEMENTS: usize = 4096;

    /// Whether a tile of `len` elements of `dtype` keeps its data even in a timing-only run: a small
    /// integer tile holds flags, counters or indices, whose values steer a run (a wait on a flag, a
    /// compare-and-swap on a lock), and costs nothing to keep.
    pub fn steers(dtype: Dtype, len: usize) -> bool {
        matches!(dtype, Dtype::I32 | Dtype::I64) && len <= Tile::STEERING_ELEMENTS
    }

    /// A tile of `len` elements of `dtype` that carries no data, only its dtype and length: what a
    /// timing-only run moves. It costs no memory whatever its length.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{Dtype, ReduceOp, Tile, TileError};
    /// let mut big = Tile::without_data(Dtype::F32, 1 << 40);
    /// assert_eq!((big.len(), big.bytes(), big.has_data()), (1 << 40, 1 << 42, false));
    /// let half = big.chunk(1, 2).unwrap();
    /// big.reduce_in_place(&Tile::without_data(Dtype::F32, 1 << 40), ReduceOp::Sum).unwrap();
    /// assert_eq!((half.len(), half.has_data()), (1 << 39, false));
    /// assert!(matches!(half.to_vec::<f32>(), Err(TileError::NoData { .. })));
    /// ```
    pub fn without_data(dtype: Dtype, len: usize) -> Tile {
        Tile { view: View::Held(Held::absent(dtype)), len }
    }

    /// Whether it carries its elements' data: every tile but one [without data](Tile::without_data).
    pub fn has_data(&self) -> bool {
        match &self.view {
            View::Shared { .. } => true,
            View::Held(held) => held.has_data,
        }
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        match &self.view {
            View::Shared { buffer, .. } => buffer.dtype(),
            View::Held(held) => held.dtype,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tile has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size of the elements in bytes (what a send of it moves, with or without data).
    pub fn bytes(&self) -> usize {
        self.len.saturating_mul(self.dtype().size())
    }

    /// [`TileError::NoData`] for `op` when the tile carries no data.
    fn check_data(&self, op: &'static str) -> Result<(), TileError> {
        if self.has_data() { Ok(()) } else { Err(TileError::NoData { op, dtype: self.dtype(), len: self.len }) }
    }

    /// Whether two tiles view the same buffer (a slice or a sent copy of a tile does, until either is
    /// written). Tiles without data and tiles small enough to hold their elements themselves have no
    /// buffer, so share none.
    pub fn shares_buffer_with(&self, other: &Tile) -> bool {
        match (&self.view, &other.view) {
            (View::Shared { buffer: a, .. }, View::Shared { buffer: b, .. }) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Whether this tile alone holds its data, so that writing it changes no other tile.
    #[inline]
    fn holds_alone(&mut self) -> bool {
        match &mut self.view {
            View::Shared { buffer, .. } => Arc::get_mut(buffer).is_some(),
            View::Held(held) => held.has_data,
        }
    }

    /// The buffer and where the view starts in it; `None` for a tile without one.
    #[inline]
    fn buffer(&self) -> Option<(&Storage_, usize)> {
        match &self.view {
            View::Shared { buffer, start } => Some((buffer, *start)),
            View::Held(_) => None,
        }
    }

    /// The viewed elements, if the tile has data and it is of `T`.
    #[inline]
    fn elements<T: Element>(&self) -> Option<&[T]> {
        match &self.view {
            View::Shared { buffer, start } => Some(&T::view(buffer)?[*start..*start + self.len]),
            View::Held(held) => held.elements(self.len),
        }
    }

    /// The viewed elements; the caller has checked that there is data and matched `T` to the dtype.
    #[inline]
    fn typed<T: Element>(&self) -> &[T] {
        self.elements().expect("data and dtype checked by the caller")
    }

    /// The viewed elements, writable: takes a private copy of the range first if the buffer is shared.
    #[inline]
    fn typed_mut<T: Element>(&mut self) -> &mut [T] {
        if !self.holds_alone() {
            *self = Tile::from_vec(self.typed::<T>().to_vec());
        }
        let len = self.len;
        match &mut self.view {
            View::Shared { buffer, start } => {
                let data = Arc::get_mut(buffer).expect("unique after copy on write");
                &mut T::view_mut(data).expect("dtype dispatched by the caller")[*start..*start + len]
            }
            View::Held(held) => bytemuck::cast_slice_mut(&mut held.bytes.0[..len * size_of::<T>()]),
        }
    }
}

thread_local! {
    /// Whether the tiles made on this thread now carry no data: see [`without_data_while`].
    static WITHOUT_DATA: Cell<bool> = const { Cell::new(false) };
}

/// Whether the tiles made on this thread now carry no data ([`without_data_while`]): in a
/// timing-only run's polls.
pub(crate) fn made_without_data() -> bool {
    WITHOUT_DATA.get()
}

/// Runs `f` with the tiles made on this thread by [`Tile::zeros`], [`Tile::filled`] and their fallible
/// forms carrying no data when `on`: a timing-only runtime polls its kernels so, and their own tiles
/// cost no memory either.
#[doc(hidden)]
#[inline]
pub fn without_data_while<R>(on: bool, f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        #[inline]
        fn drop(&mut self) {
            WITHOUT_DATA.set(self.0);
        }
    }
    let _reset = Reset(WITHOUT_DATA.replace(on));
    f()
}

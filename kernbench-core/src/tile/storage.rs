//! How a tile's elements are stored: one typed vector per dtype, or tiles joined end to end and
//! copied into one vector only when read as one; the [`Element`] types that can fill it, and
//! allocation that fails with an error instead of aborting. Uses [`Dtype`] and [`ReduceOp`].

use std::fmt;
use std::sync::OnceLock;

use half::{bf16, f16};

use super::{Dtype, ReduceOp, Tile, TileError};

/// The storage behind tiles with data: one typed vector, or tiles joined.
#[derive(Debug)]
enum Storage {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    /// Boxed: a buffer's header stays a vector's size, and a run can hold millions of small buffers.
    Joined(Box<Joined>),
}

/// Tiles one after the other ([`Tile::concat`]), not copied: a result received in parts (a ring's
/// pieces, which every rank shares) costs nothing to join, and a reader that goes part by part
/// ([`Tile::for_each_difference`]) never copies it. Read as one slice, the parts are copied into one
/// vector once, on first read; written, the buffer becomes that vector.
#[derive(Debug)]
pub(super) struct Joined {
    dtype: Dtype,
    len: usize,
    /// Each with data, of `dtype` and not empty, and each a view of one vector ([`Tile::pieces`]): a
    /// joined tile holds no joined tile whose parts it would have to walk.
    parts: Box<[Tile]>,
    /// The parts copied into one vector (never `Joined`), once something has read them as one.
    flat: OnceLock<Storage>,
}

impl Joined {
    /// The parts as one vector, copied on the first call.
    ///
    /// # Panics
    /// When memory for the copy is used up ([`Tile::concat`] has already refused any length above
    /// [`Tile::MAX_BYTES`]).
    fn flat(&self) -> &Storage {
        self.flat
            .get_or_init(|| Storage_::copied(self.dtype, self.len, &self.parts).unwrap_or_else(|e| panic!("{e}")).0)
    }
}

/// A Rust type that can be a tile's element.
pub trait Element: bytemuck::Pod + Send + Sync + PartialEq + fmt::Debug + sealed::Sealed {
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

impl Storage_ {
    /// The dtype of the elements stored.
    pub(super) fn dtype(&self) -> Dtype {
        match &self.0 {
            Storage::F32(_) => Dtype::F32,
            Storage::F16(_) => Dtype::F16,
            Storage::BF16(_) => Dtype::BF16,
            Storage::I32(_) => Dtype::I32,
            Storage::I64(_) => Dtype::I64,
            Storage::Joined(joined) => joined.dtype,
        }
    }

    /// One vector holding `parts` (`len` elements of `dtype` in all, each with data) one after the
    /// other.
    ///
    /// # Errors
    /// As [`buffer`].
    pub(super) fn copied(dtype: Dtype, len: usize, parts: &[Tile]) -> Result<Storage_, TileError> {
        with_element!(dtype, T => {
            let mut values: Vec<T> = buffer(len)?;
            for part in parts {
                values.extend_from_slice(part.typed::<T>());
            }
            Ok(T::wrap(values))
        })
    }

    /// Storage of `parts` joined end to end: `len` elements of `dtype` in all, each part with data and
    /// of `dtype`.
    pub(super) fn joined(dtype: Dtype, len: usize, parts: Box<[Tile]>) -> Storage_ {
        Storage_(Storage::Joined(Box::new(Joined { dtype, len, parts, flat: OnceLock::new() })))
    }

    /// The parts of joined storage not yet read as one: a reader can take them one by one instead.
    pub(super) fn parts(&self) -> Option<&[Tile]> {
        match &self.0 {
            Storage::Joined(joined) if joined.flat.get().is_none() => Some(&joined.parts),
            _ => None,
        }
    }

    /// Joined storage made one vector, so it can be written in place.
    fn flatten(&mut self) {
        if let Storage::Joined(joined) = &mut self.0 {
            joined.flat();
            let flat = joined.flat.take().expect("just joined");
            self.0 = flat;
        }
    }
}

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

/// The storage methods of an [`Element`] kept in `Storage::$variant`: the same for every element type.
macro_rules! storage_access {
    ($variant:ident) => {
        fn wrap(v: Vec<Self>) -> Storage_ {
            Storage_(Storage::$variant(v))
        }
        fn view(s: &Storage_) -> Option<&[Self]> {
            match &s.0 {
                Storage::$variant(v) => Some(v),
                // Of another dtype, it is not joined just to say so.
                Storage::Joined(joined) if joined.dtype == Self::DTYPE => match joined.flat() {
                    Storage::$variant(v) => Some(v),
                    _ => None,
                },
                _ => None,
            }
        }
        fn view_mut(s: &mut Storage_) -> Option<&mut Vec<Self>> {
            s.flatten();
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
            $crate::tile::Dtype::F32 => {
                type $T = f32;
                $body
            }
            $crate::tile::Dtype::F16 => {
                type $T = ::half::f16;
                $body
            }
            $crate::tile::Dtype::BF16 => {
                type $T = ::half::bf16;
                $body
            }
            $crate::tile::Dtype::I32 => {
                type $T = i32;
                $body
            }
            $crate::tile::Dtype::I64 => {
                type $T = i64;
                $body
            }
        }
    };
}

pub(super) use with_element;

/// An empty vector with room for `len` elements, or an error if that is more than [`Tile::MAX_BYTES`]
/// or more than the allocator can give: `Vec::with_capacity` would abort the process instead. Large
/// ones ask the OS for huge pages before anything touches them: faulting a fresh buffer in 4 KiB at a
/// time costs more than filling it.
pub(super) fn buffer<T: Element>(len: usize) -> Result<Vec<T>, TileError> {
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

//! Tiles to and from other representations: `f64` values, typed slices, raw bytes and bits, and the
//! short form `{:?}` shows.

use std::fmt;

use super::storage::{Element, buffer, with_element};
use super::{Dtype, Tile, TileError};

impl Tile {
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

    /// The elements as a slice of `T`.
    ///
    /// # Errors
    /// [`TileError::WrongElementType`] when the tile holds another dtype, [`TileError::NoData`] for a
    /// tile [without data](Tile::without_data).
    pub fn as_slice<T: Element>(&self) -> Result<&[T], TileError> {
        self.check_data("reading the values")?;
        self.elements().ok_or(TileError::WrongElementType { requested: T::DTYPE, actual: self.dtype() })
    }

    /// The elements copied into a vector of `T`.
    ///
    /// # Errors
    /// [`TileError::WrongElementType`] when the tile holds another dtype, [`TileError::NoData`] for a
    /// tile [without data](Tile::without_data).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, TileError> {
        self.as_slice().map(<[T]>::to_vec)
    }

    /// The elements converted to `f64`, for checks and reports.
    ///
    /// # Panics
    /// For a tile [without data](Tile::without_data) ([`Tile::as_slice`] says so as an error).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.check_data("to_f64_vec").unwrap_or_else(|error| panic!("{error}"));
        with_element!(self.dtype(), T => self.typed::<T>().iter().map(|&v| Element::to_f64(v)).collect())
    }

    /// Element `index` converted to `f64`, or `None` past the end or for a tile [without
    /// data](Tile::without_data).
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::Tile;
    /// let t = Tile::from_vec(vec![1i32, 2, 3]);
    /// assert_eq!(t.get_f64(2), Some(3.0));
    /// assert_eq!(t.get_f64(3), None);
    /// ```
    pub fn get_f64(&self, index: usize) -> Option<f64> {
        self.check_data("get_f64").ok()?;
        with_element!(self.dtype(), T => self.typed::<T>().get(index).map(|&v| Element::to_f64(v)))
    }

    /// Each element's bits (zero-extended), for comparisons that must be exact.
    ///
    /// # Panics
    /// For a tile [without data](Tile::without_data).
    pub fn to_bits_vec(&self) -> Vec<u64> {
        self.check_data("to_bits_vec").unwrap_or_else(|error| panic!("{error}"));
        with_element!(self.dtype(), T => self.typed::<T>().iter().map(|v| v.bits()).collect())
    }

    /// Appends the elements' bytes (in the machine's byte order) to `out`: a tile on the wire between
    /// processes of one run, which [`Tile::from_bytes`] reads back bit for bit.
    ///
    /// # Panics
    /// For a tile [without data](Tile::without_data).
    pub fn write_bytes(&self, out: &mut Vec<u8>) {
        self.check_data("write_bytes").unwrap_or_else(|error| panic!("{error}"));
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
}

impl fmt::Debug for Tile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 8;
        if !self.has_data() {
            return write!(f, "{}[{}] (no data)", self.dtype(), self.len);
        }
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

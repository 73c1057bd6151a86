//! Views and chunks: slicing a tile without copying, cutting it into near-equal chunks, joining
//! tiles, and writing one into another.

use std::ops::Range;
use std::sync::Arc;

use super::storage::{buffer, with_element};
use super::{Tile, TileError, View};

impl Tile {
    /// The view `range` of this tile, sharing its buffer.
    ///
    /// # Errors
    /// [`TileError::OutOfRange`] when `range` reaches past the end.
    pub fn slice(&self, range: Range<usize>) -> Result<Tile, TileError> {
        if range.start > range.end || range.end > self.len {
            return Err(TileError::OutOfRange { start: range.start, end: range.end, len: self.len });
        }
        let view = match &self.view {
            View::Data { buffer, start } => View::Data { buffer: Arc::clone(buffer), start: start + range.start },
            View::Absent(dtype) => View::Absent(*dtype),
        };
        Ok(Tile { view, len: range.len() })
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
        let follows = |a: &Tile, b: &Tile| match (a.buffer(), b.buffer()) {
            (Some((_, a_start)), Some((_, b_start))) => a.shares_buffer_with(b) && a_start + a.len == b_start,
            _ => false,
        };
        if tiles.windows(2).all(|w| follows(&w[0], &w[1])) && first.has_data() {
            let len = tiles.iter().map(Tile::len).sum();
            return Ok(Tile { view: first.view.clone(), len });
        }
        // Views of one buffer can repeat it, so the total can pass usize: saturating keeps it above the
        // cap, which refuses it.
        let len = tiles.iter().fold(0usize, |sum, t| sum.saturating_add(t.len()));
        if tiles.iter().any(|t| !t.has_data()) {
            if let Some(other) = tiles.iter().find(|t| t.dtype() != dtype) {
                return Err(TileError::DtypeMismatch { left: dtype, right: other.dtype() });
            }
            return Ok(Tile::without_data(dtype, len));
        }
        with_element!(dtype, T => {
            let mut out: Vec<T> = buffer(len)?;
            for t in tiles {
                out.extend_from_slice(t.as_slice::<T>().map_err(|_| TileError::DtypeMismatch { left: dtype, right: t.dtype() })?);
            }
            Ok(Tile::from_vec(out))
        })
    }

    /// Copies `src` into this tile at `offset`; a shared buffer is left as it is and this tile gets a
    /// new one, holding `src` there and the rest as it was.
    ///
    /// # Errors
    /// [`TileError::DtypeMismatch`], or [`TileError::OutOfRange`] when `src` does not fit;
    /// [`TileError::OutOfMemory`] when a shared buffer's replacement cannot be allocated.
    pub fn write_at(&mut self, offset: usize, src: &Tile) -> Result<(), TileError> {
        let end = self.check_same_dtype_fits(offset, src)?;
        if offset == 0 && end == self.len {
            // All of it: the same values as a copy, without copying.
            *self = src.clone();
            return Ok(());
        }
        if !self.has_data() {
            // Without data it stays so, whatever is written into it.
            return Ok(());
        }
        if !src.has_data() {
            *self = Tile::without_data(self.dtype(), self.len);
            return Ok(());
        }
        with_element!(self.dtype(), T => {
            if self.holds_alone() {
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
}

impl Tile {
    /// Checks that `src` could be written at `offset` ([`Tile::write_at`]'s checks); returns where it
    /// would end.
    ///
    /// # Errors
    /// As [`Tile::write_at`].
    pub fn check_same_dtype_fits(&self, offset: usize, src: &Tile) -> Result<usize, TileError> {
        if self.dtype() != src.dtype() {
            return Err(TileError::DtypeMismatch { left: self.dtype(), right: src.dtype() });
        }
        offset.checked_add(src.len()).filter(|&end| end <= self.len).ok_or(TileError::OutOfRange {
            start: offset,
            end: offset.saturating_add(src.len()),
            len: self.len,
        })
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

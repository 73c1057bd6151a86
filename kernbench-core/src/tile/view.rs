//! Views and chunks: slicing a tile without copying, cutting it into near-equal chunks, joining
//! tiles, and writing one into another.

use std::ops::Range;
use std::sync::Arc;

use super::storage::{Storage_, buffer, with_element};
use super::{Dtype, Tile, TileError, View};

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
            View::Shared { buffer, start } => View::Shared { buffer: Arc::clone(buffer), start: start + range.start },
            View::Held(held) => View::Held(held.slice(range.clone(), self.dtype().size())),
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

    /// The tiles one after the other: for views that already follow each other in one buffer, a view
    /// of them; otherwise, for parts of 4 KiB or more on average, a new buffer that holds the tiles
    /// themselves, not a copy of them (smaller ones are copied). Their values are copied into one
    /// vector the first time something reads them as one slice ([`Tile::as_slice`], a reduction into
    /// it); [`Tile::for_each_difference`] and `==` read them part by part and copy nothing. A result
    /// received in parts so costs nothing to join, and the parts stay shared with every other tile
    /// that holds them.
    ///
    /// # Errors
    /// [`TileError::EmptyConcat`] for no tiles, [`TileError::DtypeMismatch`] for mixed dtypes,
    /// [`TileError::TooLarge`] for more than [`Tile::MAX_BYTES`] in all, [`TileError::OutOfMemory`]
    /// when small parts' copy cannot be allocated.
    pub fn concat(tiles: &[Tile]) -> Result<Tile, TileError> {
        let first = tiles.first().ok_or(TileError::EmptyConcat)?;
        let dtype = first.dtype();
        if let Some(other) = tiles.iter().find(|t| t.dtype() != dtype) {
            return Err(TileError::DtypeMismatch { left: dtype, right: other.dtype() });
        }
        // Views that follow each other in one buffer (the chunks of a tile, in order) are already
        // that tile: a view of them costs nothing.
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
            return Ok(Tile::without_data(dtype, len));
        }
        let bytes = len as u128 * dtype.size() as u128;
        if bytes > Tile::MAX_BYTES as u128 {
            return Err(TileError::TooLarge { dtype, len, bytes, max: Tile::MAX_BYTES });
        }
        let mut parts = Vec::with_capacity(tiles.len());
        for tile in tiles {
            tile.push_pieces(&mut parts);
        }
        if Tile::worth_joining(len * dtype.size(), parts.len()) {
            return Ok(Tile::joined(dtype, len, parts));
        }
        let storage = Storage_::copied(dtype, len, &parts)?;
        Ok(Tile { view: View::Shared { buffer: Arc::new(storage), start: 0 }, len })
    }

    /// The least bytes a part of a joined tile holds on average: below it, copying the parts into one
    /// vector costs less than keeping them apart and reading them part by part.
    const JOINED_PART_BYTES: usize = 4096;

    /// Whether `bytes` in `parts` parts are better joined than copied.
    pub(crate) fn worth_joining(bytes: usize, parts: usize) -> bool {
        parts > 1 && bytes / parts >= Tile::JOINED_PART_BYTES
    }

    /// A tile of `parts` (pieces of flat vectors, none empty, `len` elements of `dtype` in all) joined.
    fn joined(dtype: Dtype, len: usize, parts: Vec<Tile>) -> Tile {
        let storage = Storage_::joined(dtype, len, parts.into_boxed_slice());
        Tile { view: View::Shared { buffer: Arc::new(storage), start: 0 }, len }
    }

    /// Appends this tile's pieces ([`Tile::pieces`]), the empty ones left out, to `parts`: a joined
    /// tile keeps the flat pieces of what it joins, never a joined tile inside another.
    fn push_pieces(&self, parts: &mut Vec<Tile>) {
        let Ok(()) = self.for_each_piece(&mut |_, piece| {
            if !piece.is_empty() {
                parts.push(piece.clone());
            }
            Ok::<(), std::convert::Infallible>(())
        });
    }

    /// The pieces this tile's values lie in, in order, each a view of one vector: a tile joined by
    /// [`Tile::concat`] and not yet read as one gives its parts (those of the range it views), any
    /// other tile itself (an empty tile, none). What a reader can take one by one instead of joining
    /// them.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::Tile;
    /// // Parts of 4 KiB or more are kept joined; smaller ones are copied.
    /// let (a, b) = (Tile::from_vec(vec![1.0f32; 1024]), Tile::from_vec(vec![2.0f32; 1024]));
    /// let joined = Tile::concat(&[a.clone(), b.clone()]).unwrap();
    /// let pieces = joined.pieces();
    /// assert!(pieces[0].shares_buffer_with(&a) && pieces[1].shares_buffer_with(&b));
    /// assert_eq!(joined.as_slice::<f32>().unwrap()[1023..1025], [1.0, 2.0]); // one vector from now on
    /// assert_eq!(joined.pieces().len(), 1);
    /// ```
    pub fn pieces(&self) -> Vec<Tile> {
        let mut pieces = Vec::new();
        self.push_pieces(&mut pieces);
        pieces
    }

    /// Calls `each(offset, piece)` for pieces of this tile, in order, that together are the tile, each
    /// a view of one vector: a tile joined by [`Tile::concat`] and not yet read as one gives its parts
    /// (the parts of the range it views), any other itself. A reader that goes piece by piece reads a
    /// joined tile without copying it.
    pub(super) fn for_each_piece<E>(&self, each: &mut impl FnMut(usize, &Tile) -> Result<(), E>) -> Result<(), E> {
        self.for_each_piece_from(0, each)
    }

    fn for_each_piece_from<E>(
        &self,
        offset: usize,
        each: &mut impl FnMut(usize, &Tile) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(parts) = self.buffer().and_then(|(buffer, _)| buffer.parts()) else {
            return each(offset, self);
        };
        let (_, start) = self.buffer().expect("a joined tile has a buffer");
        let range = start..start + self.len;
        let mut part_start = 0;
        for part in parts {
            let part_range = part_start..part_start + part.len;
            part_start = part_range.end;
            let (from, to) = (range.start.max(part_range.start), range.end.min(part_range.end));
            if from < to {
                let piece = part.slice(from - part_range.start..to - part_range.start).expect("within the part");
                piece.for_each_piece_from(offset + from - range.start, each)?;
            }
            if part_range.end >= range.end {
                break;
            }
        }
        Ok(())
    }

    /// Copies `src` into this tile at `offset`; a shared buffer is left as it is and this tile gets a
    /// new one, holding `src` there and the rest as it was: for large enough parts, the rest and `src`
    /// joined (see [`Tile::concat`]) rather than copied.
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
        let joined = self.buffer().is_some_and(|(buffer, _)| buffer.parts().is_some());
        if (!self.holds_alone() || joined) && src.bytes() >= Tile::JOINED_PART_BYTES {
            // A shared or joined tile becomes its pieces around a large `src`, where writing `src` in
            // would copy it (and, shared, the rest first): a result stored a lane's share at a time
            // is never copied. A small one costs less to copy than to keep apart.
            let mut parts = Vec::new();
            self.slice(0..offset)?.push_pieces(&mut parts);
            src.push_pieces(&mut parts);
            self.slice(end..self.len)?.push_pieces(&mut parts);
            if parts.len() <= Tile::MAX_SPLICED_PARTS && Tile::worth_joining(self.bytes(), parts.len()) {
                *self = Tile::joined(self.dtype(), self.len, parts);
                return Ok(());
            }
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
    /// The most parts [`Tile::write_at`] keeps a written tile in: past it, the parts are copied into
    /// one vector and written in place, so that many writes do not grow a list each one walks. Room
    /// for a few lanes' shares of a ring's result, each in its pieces.
    const MAX_SPLICED_PARTS: usize = 256;

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

//! The PE's own buffers and the tile operations a kernel is charged for: loads and stores,
//! reductions and their end, and cutting and joining tiles, each failing with the PE's
//! [`KernelError`].

use super::backend::{Work, with};
use super::{Buffer, Tl};
use crate::kernel::{KernelError, Op};
use crate::tile::{Dtype, ReduceOp, Tile, TileError};

impl Tl {
    /// The contents of one of the PE's buffers.
    pub fn load(&self, buffer: Buffer) -> Result<Tile, KernelError> {
        with(|b| {
            let tile = b.load(buffer)?;
            b.charge(Work::Memory { bytes: tile.bytes() });
            Ok(tile)
        })
    }

    /// The length in elements of one of the PE's buffers (scratch: what the kernel last stored there).
    pub fn buffer_len(&self, buffer: Buffer) -> Result<usize, KernelError> {
        with(|b| b.load(buffer)).map(|tile| tile.len())
    }

    /// The `len` elements of one of the PE's buffers from `start` (sharing its storage): what a lane
    /// working on a slice reads, charged for those bytes only.
    ///
    /// # Errors
    /// [`KernelError::Tile`] when the range reaches past the buffer's end.
    pub fn load_slice(&self, buffer: Buffer, start: usize, len: usize) -> Result<Tile, KernelError> {
        let whole = with(|b| b.load(buffer))?;
        let slice = self.slice(&whole, start, len)?;
        with(|b| b.charge(Work::Memory { bytes: slice.bytes() }));
        Ok(slice)
    }

    /// Replaces the contents of one of the PE's buffers with `tile`.
    ///
    /// # Errors
    /// [`KernelError::Tile`] when `tile` does not match the buffer's dtype and length.
    pub fn store(&self, buffer: Buffer, tile: &Tile) -> Result<(), KernelError> {
        with(|b| {
            b.store(buffer, None, tile)?;
            b.charge(Work::Memory { bytes: tile.bytes() });
            Ok(())
        })
    }

    /// Writes `tile` into one of the PE's buffers at element `offset`.
    ///
    /// # Errors
    /// [`KernelError::Tile`] when `tile` does not fit at `offset` or has another dtype.
    pub fn store_at(&self, buffer: Buffer, offset: usize, tile: &Tile) -> Result<(), KernelError> {
        with(|b| {
            b.store(buffer, Some(offset), tile)?;
            b.charge(Work::Memory { bytes: tile.bytes() });
            Ok(())
        })
    }

    /// Writes `parts` one after the other into `buffer` from element `offset`: [`Tl::store_at`] of
    /// their concatenation, charged the same (one store of all their bytes). Large parts are joined,
    /// not copied ([`Tile::concat`]), and a buffer shared with another (an all-reduce's output starts
    /// as its input) takes them beside the rest of it rather than being copied first
    /// ([`Tile::write_at`]): a result received in parts, stored a lane's share at a time, is never
    /// copied.
    ///
    /// # Errors
    /// As [`Tl::store_at`], for the first part that does not fit, and as [`Tl::concat`].
    pub fn store_parts_at(&self, buffer: Buffer, offset: usize, parts: &[Tile]) -> Result<(), KernelError> {
        let whole = offset == 0 && parts.iter().map(Tile::len).sum::<usize>() == self.buffer_len(buffer)?;
        if whole && !parts.is_empty() {
            return self.store(buffer, &self.concat(parts)?);
        }
        let bytes = parts.iter().map(Tile::bytes).sum();
        // Large parts go in joined, in one write; small ones are copied in one by one, which costs
        // no more than copying them together first (and holds no second copy meanwhile). Parts without
        // data (a timing-only run's) join for nothing: a shape of their total length.
        let joined;
        let shapes = parts.len() > 1 && !parts.iter().all(Tile::has_data);
        let writes = if shapes || Tile::worth_joining(bytes, parts.len()) {
            joined = [self.concat(parts)?];
            &joined[..]
        } else {
            parts
        };
        with(|b| {
            let mut at = offset;
            for part in writes {
                b.store(buffer, Some(at), part)?;
                at += part.len();
            }
            b.charge(Work::Memory { bytes });
            Ok(())
        })
    }

    /// Combines `other` into `acc` elementwise under `op` (`Avg` sums; see [`Tl::finish`]).
    ///
    /// # Errors
    /// [`KernelError::Tile`] on a dtype or length mismatch.
    #[inline]
    pub fn reduce(&self, acc: &mut Tile, other: &Tile, op: ReduceOp) -> Result<(), KernelError> {
        acc.reduce_in_place(other, op).map_err(|source| self.tile_error(Op::Reduce, source))?;
        with(|b| b.charge(Work::Reduce { elements: other.len(), dtype: other.dtype() }));
        Ok(())
    }

    /// Ends a reduction of `contributions` inputs: divides by the count for `Avg`, nothing otherwise.
    ///
    /// # Errors
    /// [`KernelError::Tile`] for an `Avg` of 0 contributions.
    pub fn finish(&self, acc: &mut Tile, op: ReduceOp, contributions: usize) -> Result<(), KernelError> {
        acc.finish_reduction(op, contributions).map_err(|source| self.tile_error(Op::Finish, source))?;
        if op == ReduceOp::Avg {
            with(|b| b.charge(Work::Reduce { elements: acc.len(), dtype: acc.dtype() }));
        }
        Ok(())
    }

    /// [`Tl::finish`] of a result held in `parts`: each part divided for `Avg`, charged as one finish of
    /// all their elements.
    ///
    /// # Errors
    /// As [`Tl::finish`].
    pub fn finish_parts(&self, parts: &mut [Tile], op: ReduceOp, contributions: usize) -> Result<(), KernelError> {
        for part in parts.iter_mut() {
            part.finish_reduction(op, contributions).map_err(|source| self.tile_error(Op::Finish, source))?;
        }
        if op == ReduceOp::Avg {
            if let Some(first) = parts.first() {
                let elements = parts.iter().map(Tile::len).sum();
                with(|b| b.charge(Work::Reduce { elements, dtype: first.dtype() }));
            }
        }
        Ok(())
    }

    /// Chunk `index` of `count` near-equal chunks of `tile`, without copying.
    ///
    /// # Errors
    /// [`KernelError::Tile`] when `index >= count`.
    #[inline]
    pub fn chunk(&self, tile: &Tile, index: usize, count: usize) -> Result<Tile, KernelError> {
        tile.chunk(index, count).map_err(|source| self.tile_error(Op::Chunk, source))
    }

    /// The `len` elements of `tile` from `start`, without copying.
    ///
    /// # Errors
    /// [`KernelError::Tile`] when the range reaches past the end.
    #[inline]
    pub fn slice(&self, tile: &Tile, start: usize, len: usize) -> Result<Tile, KernelError> {
        let end = start.checked_add(len).ok_or(TileError::OutOfRange { start, end: usize::MAX, len: tile.len() });
        end.and_then(|end| tile.slice(start..end)).map_err(|source| self.tile_error(Op::Slice, source))
    }

    /// The tiles one after the other, in a new tile.
    ///
    /// # Errors
    /// [`KernelError::Tile`] for no tiles or mixed dtypes, [`KernelError::OutOfMemory`] when the result
    /// is larger than [`Tile::MAX_BYTES`] or cannot be allocated.
    pub fn concat(&self, tiles: &[Tile]) -> Result<Tile, KernelError> {
        Tile::concat(tiles).map_err(|source| self.tile_error(Op::Concat, source))
    }

    /// A new tile of `len` zeros of `dtype`.
    ///
    /// # Errors
    /// [`KernelError::OutOfMemory`] when the tile is larger than [`Tile::MAX_BYTES`] or cannot be
    /// allocated.
    pub fn zeros(&self, dtype: Dtype, len: usize) -> Result<Tile, KernelError> {
        Tile::try_zeros(dtype, len).map_err(|source| self.tile_error(Op::Zeros, source))
    }

    /// `source` as the error of `op` on this PE: an allocation refused is [`KernelError::OutOfMemory`],
    /// anything else [`KernelError::Tile`].
    fn tile_error(&self, op: Op, source: TileError) -> KernelError {
        let pe = self.pe;
        match source {
            TileError::TooLarge { .. } | TileError::OutOfMemory { .. } => KernelError::OutOfMemory { pe, op, source },
            source => KernelError::Tile { pe, op, source },
        }
    }
}

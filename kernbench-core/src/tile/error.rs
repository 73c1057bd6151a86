//! What can go wrong with a tile operation.

use super::Dtype;

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
    /// A tile larger than [`Tile::MAX_BYTES`](super::Tile::MAX_BYTES) was asked for; it was refused before any memory was taken.
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
        /// [`Tile::MAX_BYTES`](super::Tile::MAX_BYTES).
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
    /// An operation that reads a tile's values on a tile that carries none: a timing-only run's tiles
    /// hold their dtype and length only (the kernel's fault, when it reads its data in such a run).
    #[error(
        "{op} of a {dtype}[{len}] tile that carries no data: a timing-only run moves no bytes, so a kernel that reads values out of its tiles cannot run timing-only"
    )]
    NoData {
        /// What tried to read the values.
        op: &'static str,
        /// The tile's dtype.
        dtype: Dtype,
        /// The tile's length.
        len: usize,
    },
}

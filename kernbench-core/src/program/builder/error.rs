//! What can go wrong in writing a chunk program, and where in the source it went wrong.

use std::fmt;
use std::panic::Location;

use crate::collective::Collective;
use crate::kernel::Buffer;
use crate::program::check::ProgramError;

/// A place in the source: where an operation of the builder was called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceAt {
    /// The file.
    pub file: &'static str,
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1.
    pub column: u32,
}

impl SourceAt {
    /// The place that called the `#[track_caller]` function this is called in.
    #[track_caller]
    pub(super) fn caller() -> SourceAt {
        let at = Location::caller();
        SourceAt { file: at.file(), line: at.line(), column: at.column() }
    }
}

impl fmt::Display for SourceAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Which operation wrote a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// [`ProgramBuilder::copy`](super::ProgramBuilder::copy).
    Copy,
    /// [`ProgramBuilder::reduce`](super::ProgramBuilder::reduce).
    Reduce,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Copy => "copy",
            OpKind::Reduce => "reduce",
        })
    }
}

/// A buffer as the builder's errors name it.
fn buffer_name(buffer: Buffer) -> &'static str {
    match buffer {
        Buffer::Input => "input",
        Buffer::Output => "output",
        Buffer::Scratch => "scratch",
    }
}

/// A wrong use of a chunk, raised at the call that makes it; `at` is that call's place in the source.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// A program of no ranks, or an all-gather or reduce-scatter whose chunks are not whole blocks of
    /// its ranks (`ProgramBuilder::new`).
    #[error("{at}: {collective} over {ranks} ranks cannot be cut into {chunks} chunks: expected at least one rank{}", if matches!(collective, Collective::AllGather | Collective::ReduceScatter) { format!(" and a multiple of {ranks} chunks") } else { String::new() })]
    BadShape {
        /// The call.
        at: SourceAt,
        /// The collective.
        collective: Collective,
        /// The ranks given.
        ranks: usize,
        /// The chunks given.
        chunks: usize,
    },
    /// A rank that the program does not have.
    #[error("{at}: rank {rank} is out of range: the program has {ranks} ranks, 0..{ranks}")]
    RankOutOfRange {
        /// The call.
        at: SourceAt,
        /// The rank given.
        rank: usize,
        /// The program's ranks.
        ranks: usize,
    },
    /// Chunks past the end of a buffer, or no chunks at all.
    #[error(
        "{at}: chunks {index}..{end} of rank {rank}'s {} buffer are out of range: it has {size} chunks, so expected 1 to {size} chunks within 0..{size}",
        buffer_name(*buffer),
        end = index + count
    )]
    OutOfRange {
        /// The call.
        at: SourceAt,
        /// The rank.
        rank: usize,
        /// The buffer.
        buffer: Buffer,
        /// The first chunk.
        index: usize,
        /// How many chunks.
        count: usize,
        /// The chunks the buffer has.
        size: usize,
    },
    /// A handle to chunks that nothing has written: output and scratch chunks hold data only once a
    /// copy or reduce wrote them (input chunks, and what an in-place program aliases to them, from the
    /// start).
    #[error(
        "{at}: chunk {index} of rank {rank}'s {} buffer holds nothing: no copy or reduce has written it yet; only input chunks (and, in place, what aliases them) start with data",
        buffer_name(*buffer)
    )]
    Uninitialised {
        /// The call.
        at: SourceAt,
        /// The rank.
        rank: usize,
        /// The buffer.
        buffer: Buffer,
        /// The first chunk that holds nothing.
        index: usize,
    },
    /// A handle whose chunks a later operation overwrote: it names contents that are gone.
    #[error(
        "{at}: the handle to chunk {index} of rank {rank}'s {} buffer is stale: the {op} at {by} overwrote that chunk; use the handle that {op} returned, or take a new one with chunk()",
        buffer_name(*buffer)
    )]
    Stale {
        /// The call that used the handle.
        at: SourceAt,
        /// The rank.
        rank: usize,
        /// The buffer.
        buffer: Buffer,
        /// The first overwritten chunk.
        index: usize,
        /// The operation that overwrote it.
        op: OpKind,
        /// Where that operation was called.
        by: SourceAt,
    },
    /// A reduce of runs of different lengths.
    #[error("{at}: reduce of {into} chunks with {other} chunks: both runs must have the same count")]
    CountMismatch {
        /// The call.
        at: SourceAt,
        /// `into`'s count.
        into: usize,
        /// `other`'s count.
        other: usize,
    },
    /// A copy or reduce whose two runs share a chunk of one rank.
    #[error(
        "{at}: the source and destination share chunks of rank {rank}'s {} buffer (chunk {index}): expected disjoint runs",
        buffer_name(*buffer)
    )]
    Overlap {
        /// The call.
        at: SourceAt,
        /// The rank.
        rank: usize,
        /// The buffer, after in-place aliasing.
        buffer: Buffer,
        /// The first shared chunk, after in-place aliasing.
        index: usize,
    },
}

impl ChunkError {
    /// Where the offending call is.
    pub fn at(&self) -> SourceAt {
        match self {
            ChunkError::BadShape { at, .. }
            | ChunkError::RankOutOfRange { at, .. }
            | ChunkError::OutOfRange { at, .. }
            | ChunkError::Uninitialised { at, .. }
            | ChunkError::Stale { at, .. }
            | ChunkError::CountMismatch { at, .. }
            | ChunkError::Overlap { at, .. } => *at,
        }
    }
}

/// Why a program could not be written: a wrong use of a chunk, or a lowered program that [`check`](crate::program::check())
/// refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A copy, reduce or chunk call was wrong.
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    /// The lowered program does not pass [`check`](crate::program::check()).
    #[error("the lowered program `{name}` does not pass check: {error}")]
    Check {
        /// The program's name.
        name: String,
        /// What [`check`](crate::program::check()) found.
        error: ProgramError,
    },
}

//! Writing chunk programs in Rust the way MSCCLang writes them in Python: take handles to chunks of a
//! rank's buffers, chain [`copy`](ProgramBuilder::copy) and [`reduce`](ProgramBuilder::reduce), and
//! [`build`](ProgramBuilder::build) lowers the chain to a [`Program`](super::Program) that [`check`](super::check()) accepts. Uses the
//! rest of [`program`](super), [`Buffer`] from `kernel` and [`Collective`].
//!
//! Every rank has an input, an output and a scratch buffer cut into chunks. Input chunks hold data from
//! the start; output and scratch chunks only once an operation has written them. A [`Chunk`] is a
//! handle to the *current* contents of a run of chunks: an operation that overwrites them makes every
//! older handle stale, and using a stale handle is an error at the call that uses it.
//!
//! # Lowering
//!
//! - A copy to another rank is a send (`s`) on the source rank and a receive (`r`) on the destination
//!   rank; a reduce across ranks is `s` on the rank of `other` and `rrc` (source and destination
//!   `into`'s chunks) on the rank of `into`. On one rank they are `cpy` and `re`.
//! - Fusion, as MSCCLang does it: a receive whose chunks the rank then sends on, unchanged, becomes one
//!   step that receives and forwards: `r` + `s` is `rcs`, `rrc` + `s` is `rrcs`, and `rrs` when the
//!   reduced value is dead once forwarded (nothing on that rank reads it before it is overwritten,
//!   and it is not part of the result: the output, or the input of an in-place program). The fused
//!   step goes right after the last other send on the send's connection between the two (or at the
//!   receive's place): the receive moves later and the send earlier, which is allowed only if the
//!   receive passes no other receive of its connection and no read of its chunks, so that each
//!   connection stays FIFO, and only if the thread block keeps one send and one receive peer.
//! - Thread blocks: one per (send peer, receive peer, channel) of each rank, sorted as the MSCCL writer
//!   sorts them; local steps go to a thread block of no peers on their channel. Steps are appended in
//!   program order.
//! - Dependencies: a step that reads chunks another thread block of the rank wrote, or writes chunks
//!   another one read or wrote before, depends on the last such step of each such thread block; all
//!   but the last dependency become `nop`s before it, as in MSCCL-IR.
//!
//! # Examples
//!
//! A two-rank all-reduce: each rank adds the other's chunk into its own, in place.
//!
//! ```
//! use kernbench_core::Collective;
//! use kernbench_core::kernel::Buffer;
//! use kernbench_core::program::{ProgramBuilder, StepKind, check};
//!
//! let mut p = ProgramBuilder::new("pair", Collective::AllReduce, 2, 2, true)?;
//! // Chunk 0 is summed on rank 0, chunk 1 on rank 1, then each sum is copied to the other rank.
//! for (c, (owner, other)) in [(0, 1), (1, 0)].into_iter().enumerate() {
//!     let sum = p.reduce(&p.chunk(owner, Buffer::Input, c, 1)?, &p.chunk(other, Buffer::Input, c, 1)?)?;
//!     p.copy(&sum, other, Buffer::Input, c)?;
//! }
//! let program = p.build()?;
//! check(&program)?;
//! // Rank 0 receives chunk 0, adds its own and sends the sum back at once; sends chunk 1; receives its sum.
//! let kinds: Vec<StepKind> = program.ranks[0].thread_blocks[0].steps.iter().map(|s| s.kind).collect();
//! assert_eq!(kinds, [StepKind::RecvReduceCopySend, StepKind::Send, StepKind::Recv]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
mod error;
mod lower;

use std::collections::HashMap;

pub use error::{BuildError, ChunkError, OpKind, SourceAt};

use super::{ChunkRef, Protocol};
use crate::collective::Collective;
use crate::kernel::Buffer;

/// A handle to the current contents of `count` consecutive chunks of one rank's buffer, as
/// [`ProgramBuilder::chunk`], [`copy`](ProgramBuilder::copy) and [`reduce`](ProgramBuilder::reduce)
/// return it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    rank: usize,
    buffer: Buffer,
    index: usize,
    count: usize,
    /// The chunks after in-place aliasing, and their versions when the handle was taken.
    slots: Vec<(Slot, u32)>,
}

impl Chunk {
    /// The rank whose buffer holds the chunks.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The buffer, as it was named (before in-place aliasing).
    pub fn buffer(&self) -> Buffer {
        self.buffer
    }

    /// The first chunk.
    pub fn index(&self) -> usize {
        self.index
    }

    /// How many consecutive chunks.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The run after in-place aliasing.
    fn first(&self) -> ChunkRef {
        let (buffer, index) = (self.slots[0].0.buffer, self.slots[0].0.index);
        ChunkRef { buffer, index }
    }
}

/// One chunk of one rank after in-place aliasing: the unit of versions and dependencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Slot {
    rank: usize,
    buffer: Buffer,
    index: usize,
}

/// What a chunk holds now.
#[derive(Clone, Copy, Debug)]
struct Contents {
    version: u32,
    /// The operation that wrote it last, `None` for input data.
    written_by: Option<(OpKind, SourceAt)>,
}

/// One recorded copy or reduce: `dst = src` or `dst ⊕= src`.
#[derive(Clone, Debug)]
struct Op {
    kind: OpKind,
    src_rank: usize,
    src: ChunkRef,
    dst_rank: usize,
    dst: ChunkRef,
    count: usize,
    channel: usize,
}

/// Writes a [`Program`](super::Program) as MSCCLang does: see the [module docs](self).
#[derive(Clone, Debug)]
pub struct ProgramBuilder {
    name: String,
    collective: Collective,
    ranks: usize,
    chunks: usize,
    in_place: bool,
    protocol: Protocol,
    channel: usize,
    contents: HashMap<Slot, Contents>,
    ops: Vec<Op>,
}

impl ProgramBuilder {
    /// A program of `collective` over `ranks` ranks whose larger buffer is cut into `chunks` chunks
    /// (`N`). Buffer sizes follow the collective as in MSCCL: all-gather input `N / ranks`,
    /// reduce-scatter output `N / ranks`, every other buffer `N`; scratch grows to the highest chunk
    /// written. In place, buffers alias as the executor aliases them: all-reduce, all-to-all,
    /// broadcast and reduce use one buffer for both; all-gather's input is block `rank` of its output;
    /// reduce-scatter's output is block `rank` of its input.
    ///
    /// # Errors
    /// [`ChunkError::BadShape`] for no ranks, or for an all-gather or reduce-scatter whose `chunks` is
    /// not a multiple of `ranks`.
    #[track_caller]
    pub fn new(
        name: impl Into<String>,
        collective: Collective,
        ranks: usize,
        chunks: usize,
        in_place: bool,
    ) -> Result<ProgramBuilder, ChunkError> {
        let blocks = matches!(collective, Collective::AllGather | Collective::ReduceScatter);
        if ranks == 0 || (blocks && chunks % ranks != 0) {
            return Err(ChunkError::BadShape { at: SourceAt::caller(), collective, ranks, chunks });
        }
        let mut builder = ProgramBuilder {
            name: name.into(),
            collective,
            ranks,
            chunks,
            in_place,
            protocol: Protocol::Simple,
            channel: 0,
            contents: HashMap::new(),
            ops: Vec::new(),
        };
        for rank in 0..ranks {
            for index in 0..builder.size(Buffer::Input) {
                let slot = builder.slot(rank, Buffer::Input, index);
                builder.contents.insert(slot, Contents { version: 0, written_by: None });
            }
        }
        Ok(builder)
    }

    /// Sets the protocol of the program (default [`Protocol::Simple`]).
    pub fn protocol(&mut self, protocol: Protocol) -> &mut ProgramBuilder {
        self.protocol = protocol;
        self
    }

    /// Sets the channel of the copies and reduces that follow, until set again (default 0).
    pub fn channel(&mut self, channel: usize) -> &mut ProgramBuilder {
        self.channel = channel;
        self
    }

    /// The chunks `buffer` has on every rank, before in-place aliasing; `usize::MAX` for scratch,
    /// which grows as it is written.
    pub fn size(&self, buffer: Buffer) -> usize {
        let block = self.chunks / self.ranks;
        match (buffer, self.collective) {
            (Buffer::Scratch, _) => usize::MAX,
            (Buffer::Input, Collective::AllGather) | (Buffer::Output, Collective::ReduceScatter) => block,
            _ => self.chunks,
        }
    }

    /// Chunk `index` of `buffer` on `rank` after in-place aliasing.
    fn slot(&self, rank: usize, buffer: Buffer, index: usize) -> Slot {
        let block = rank * (self.chunks / self.ranks);
        let (buffer, index) = match (self.in_place, self.collective, buffer) {
            (true, Collective::AllGather, Buffer::Input) => (Buffer::Output, block + index),
            (true, Collective::ReduceScatter, Buffer::Output) => (Buffer::Input, block + index),
            (true, Collective::AllGather | Collective::ReduceScatter, buffer) => (buffer, index),
            (true, _, Buffer::Output) => (Buffer::Input, index),
            (_, _, buffer) => (buffer, index),
        };
        Slot { rank, buffer, index }
    }

    /// The slots of a run, after checking the rank and the range.
    fn slots(
        &self,
        at: SourceAt,
        rank: usize,
        buffer: Buffer,
        index: usize,
        count: usize,
    ) -> Result<Vec<Slot>, ChunkError> {
        if rank >= self.ranks {
            return Err(ChunkError::RankOutOfRange { at, rank, ranks: self.ranks });
        }
        let size = self.size(buffer);
        if count == 0 || index.checked_add(count).is_none_or(|end| end > size) {
            return Err(ChunkError::OutOfRange { at, rank, buffer, index, count, size });
        }
        Ok((index..index + count).map(|i| self.slot(rank, buffer, i)).collect())
    }

    /// A handle to the current contents of chunks `index..index + count` of `buffer` on `rank`.
    ///
    /// # Errors
    /// [`ChunkError::RankOutOfRange`], [`ChunkError::OutOfRange`], or [`ChunkError::Uninitialised`]
    /// if one of the chunks holds nothing yet.
    #[track_caller]
    pub fn chunk(&self, rank: usize, buffer: Buffer, index: usize, count: usize) -> Result<Chunk, ChunkError> {
        let at = SourceAt::caller();
        let slots = self.slots(at, rank, buffer, index, count)?;
        let mut versions = Vec::with_capacity(count);
        for (i, slot) in slots.into_iter().enumerate() {
            let Some(contents) = self.contents.get(&slot) else {
                return Err(ChunkError::Uninitialised { at, rank, buffer, index: index + i });
            };
            versions.push((slot, contents.version));
        }
        Ok(Chunk { rank, buffer, index, count, slots: versions })
    }

    /// Fails if a chunk of `handle` was overwritten since the handle was taken.
    fn fresh(&self, at: SourceAt, handle: &Chunk) -> Result<(), ChunkError> {
        for (i, (slot, version)) in handle.slots.iter().enumerate() {
            let contents = self.contents[slot];
            if contents.version != *version {
                let (op, by) = contents.written_by.expect("only operations change a version");
                let (rank, buffer, index) = (handle.rank, handle.buffer, handle.index + i);
                return Err(ChunkError::Stale { at, rank, buffer, index, op, by });
            }
        }
        Ok(())
    }

    fn disjoint(at: SourceAt, a: &[Slot], b: &[(Slot, u32)]) -> Result<(), ChunkError> {
        match a.iter().find(|slot| b.iter().any(|(other, _)| other == *slot)) {
            Some(slot) => Err(ChunkError::Overlap { at, rank: slot.rank, buffer: slot.buffer, index: slot.index }),
            None => Ok(()),
        }
    }

    /// Records that `op` at `at` wrote `slots`; the handle to their new contents.
    fn write(&mut self, op: Op, at: SourceAt, buffer: Buffer, index: usize, slots: Vec<Slot>) -> Chunk {
        let (rank, count, kind) = (op.dst_rank, op.count, op.kind);
        self.ops.push(op);
        let mut versions = Vec::with_capacity(slots.len());
        for slot in slots {
            let version = self.contents.get(&slot).map_or(0, |c| c.version + 1);
            self.contents.insert(slot, Contents { version, written_by: Some((kind, at)) });
            versions.push((slot, version));
        }
        Chunk { rank, buffer, index, count, slots: versions }
    }

    /// Copies the chunks of `src` to chunks `index..` of `buffer` on `rank` (the same rank or
    /// another), on the current [`channel`](Self::channel); the handle to the copy.
    ///
    /// # Errors
    /// [`ChunkError::Stale`] if `src` was overwritten, [`ChunkError::RankOutOfRange`] or
    /// [`ChunkError::OutOfRange`] for the destination, [`ChunkError::Overlap`] if it shares chunks
    /// with `src`.
    #[track_caller]
    pub fn copy(&mut self, src: &Chunk, rank: usize, buffer: Buffer, index: usize) -> Result<Chunk, ChunkError> {
        let at = SourceAt::caller();
        self.fresh(at, src)?;
        let slots = self.slots(at, rank, buffer, index, src.count)?;
        Self::disjoint(at, &slots, &src.slots)?;
        let dst = ChunkRef { buffer: slots[0].buffer, index: slots[0].index };
        let op = Op {
            kind: OpKind::Copy,
            src_rank: src.rank,
            src: src.first(),
            dst_rank: rank,
            dst,
            count: src.count,
            channel: self.channel,
        };
        Ok(self.write(op, at, buffer, index, slots))
    }

    /// Reduces `other` into `into` (`into ⊕= other`, the two on any ranks), on the current
    /// [`channel`](Self::channel); the handle to `into`'s new contents.
    ///
    /// # Errors
    /// [`ChunkError::Stale`] if either handle was overwritten, [`ChunkError::CountMismatch`] if they
    /// differ in count, [`ChunkError::Overlap`] if they share chunks.
    #[track_caller]
    pub fn reduce(&mut self, into: &Chunk, other: &Chunk) -> Result<Chunk, ChunkError> {
        let at = SourceAt::caller();
        self.fresh(at, into)?;
        self.fresh(at, other)?;
        if into.count != other.count {
            return Err(ChunkError::CountMismatch { at, into: into.count, other: other.count });
        }
        let slots: Vec<Slot> = into.slots.iter().map(|(slot, _)| *slot).collect();
        Self::disjoint(at, &slots, &other.slots)?;
        let op = Op {
            kind: OpKind::Reduce,
            src_rank: other.rank,
            src: other.first(),
            dst_rank: into.rank,
            dst: into.first(),
            count: into.count,
            channel: self.channel,
        };
        Ok(self.write(op, at, into.buffer, into.index, slots))
    }
}

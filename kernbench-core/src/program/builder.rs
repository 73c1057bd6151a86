//! Writing chunk programs in Rust the way MSCCLang writes them in Python: take handles to chunks of a
//! rank's buffers, chain [`copy`](ProgramBuilder::copy) and [`reduce`](ProgramBuilder::reduce), and
//! [`build`](ProgramBuilder::build) lowers the chain to a [`Program`] that [`check`] accepts. Uses the
//! rest of [`program`](super) and, from `kernel`, [`Buffer`] and [`Collective`].
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
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::Location;

use super::check::{ProgramError, check};
use super::{ChunkRef, Program, Protocol, RankProgram, Step, StepKind, ThreadBlock};
use crate::collective::Collective;
use crate::kernel::Buffer;

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
    fn caller() -> SourceAt {
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
    /// [`ProgramBuilder::copy`].
    Copy,
    /// [`ProgramBuilder::reduce`].
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

/// Why a program could not be written: a wrong use of a chunk, or a lowered program that [`check`]
/// refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A copy, reduce or chunk call was wrong.
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    /// The lowered program does not pass [`check`].
    #[error("the lowered program `{name}` does not pass check: {error}")]
    Check {
        /// The program's name.
        name: String,
        /// What [`check`] found.
        error: ProgramError,
    },
}

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

/// Writes a [`Program`] as MSCCLang does: see the [module docs](self).
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

    /// Lowers the operations to a [`Program`] (see the [module docs](self)) and checks it.
    ///
    /// # Errors
    /// [`BuildError::Check`] if the program does not pass [`check`] (a deadlock, say).
    pub fn build(&self) -> Result<Program, BuildError> {
        let ranks = (0..self.ranks).map(|rank| self.lower_rank(rank)).collect();
        let channels = self.ops.iter().map(|op| op.channel + 1).max().unwrap_or(1);
        let program = Program {
            name: self.name.clone(),
            collective: self.collective,
            in_place: self.in_place,
            protocol: self.protocol,
            chunks: self.chunks,
            channels,
            ranks,
        };
        check(&program).map_err(|error| BuildError::Check { name: self.name.clone(), error })?;
        Ok(program)
    }

    /// Whether a chunk's value at the end is part of the result.
    fn observable(&self, buffer: Buffer) -> bool {
        buffer == Buffer::Output || (self.in_place && buffer == Buffer::Input)
    }

    fn lower_rank(&self, rank: usize) -> RankProgram {
        let mut insts = self.instructions(rank);
        let mut conns = Connections::default();
        self.fuse(&mut insts, &mut conns);
        let thread_blocks = Emitter::emit(&insts, &mut conns);
        let scratch_chunks = insts
            .iter()
            .filter_map(|inst| inst.dst.filter(|d| d.buffer == Buffer::Scratch).map(|d| d.index + inst.count))
            .max()
            .unwrap_or(0);
        let folded = |buffer: Buffer| {
            let aliased = match self.collective {
                Collective::AllGather => buffer == Buffer::Input,
                _ => buffer == Buffer::Output,
            };
            if self.in_place && aliased { 0 } else { self.size(buffer) }
        };
        RankProgram {
            input_chunks: folded(Buffer::Input),
            output_chunks: folded(Buffer::Output),
            scratch_chunks,
            thread_blocks,
        }
    }

    /// The rank's part of each operation, in program order.
    fn instructions(&self, rank: usize) -> Vec<Inst> {
        let mut insts = Vec::new();
        for op in &self.ops {
            let base = Inst {
                kind: StepKind::Nop,
                src: None,
                dst: None,
                count: op.count,
                send: None,
                recv: None,
                channel: op.channel,
            };
            let local = op.src_rank == op.dst_rank;
            if local && op.src_rank == rank {
                let kind = if op.kind == OpKind::Copy { StepKind::Copy } else { StepKind::Reduce };
                insts.push(Inst { kind, src: Some(op.src), dst: Some(op.dst), ..base });
            } else if op.src_rank == rank && !local {
                insts.push(Inst { kind: StepKind::Send, src: Some(op.src), send: Some(op.dst_rank), ..base });
            } else if op.dst_rank == rank && !local {
                let (kind, src) = match op.kind {
                    OpKind::Copy => (StepKind::Recv, None),
                    OpKind::Reduce => (StepKind::RecvReduceCopy, Some(op.dst)),
                };
                insts.push(Inst { kind, src, dst: Some(op.dst), recv: Some(op.src_rank), ..base });
            }
        }
        insts
    }

    /// Fuses each receive with the send that forwards what it stored, where that keeps the program's
    /// meaning, each connection FIFO and each thread block to one send and one receive peer.
    fn fuse(&self, insts: &mut Vec<Inst>, conns: &mut Connections) {
        let mut i = 0;
        while i < insts.len() {
            let fusable = matches!(insts[i].kind, StepKind::Recv | StepKind::RecvReduceCopy);
            let Some((j, after)) = fusable.then(|| forwarding_send(insts, i)).flatten() else {
                i += 1;
                continue;
            };
            let send = Conn::Send(insts[j].send.expect("a send has a peer"), insts[j].channel);
            let recv = Conn::Recv(insts[i].recv.expect("a receive has a peer"), insts[i].channel);
            if !conns.join(send, recv) {
                i += 1;
                continue;
            }
            let dst = insts[i].dst.expect("a receive writes");
            let dead = !(0..insts[i].count).any(|c| {
                let chunk = ChunkRef { buffer: dst.buffer, index: dst.index + c };
                self.live_after(insts, i, j, chunk)
            });
            let mut fused = insts[i];
            fused.send = insts[j].send;
            fused.kind = match fused.kind {
                StepKind::Recv => StepKind::RecvCopySend,
                _ if dead => StepKind::RecvReduceSend,
                _ => StepKind::RecvReduceCopySend,
            };
            if fused.kind == StepKind::RecvReduceSend {
                fused.dst = None;
            }
            // The fused step takes the place right after `after`: the receive moves later past steps
            // of other connections, the send earlier; `i` then holds the next step to look at, or the
            // fused one, which fuses no further.
            insts.remove(j);
            insts.insert(after + 1, fused);
            insts.remove(i);
        }
    }

    /// Whether the value instruction `i` stores in `chunk` is read after it, other than by the send
    /// `j` fused into it: by an instruction before one that only overwrites it, or as the result.
    fn live_after(&self, insts: &[Inst], i: usize, j: usize, chunk: ChunkRef) -> bool {
        for (k, inst) in insts.iter().enumerate().skip(i + 1) {
            if k == j {
                continue;
            }
            if inst.reads(chunk) {
                return true;
            }
            if inst.writes(chunk) {
                return false;
            }
        }
        self.observable(chunk.buffer)
    }
}

/// The send that forwards what receive `i` stored, and the step after which the fused step can go:
/// the next send of exactly its chunks on its channel, with nothing overwriting them in between, and
/// a place where the receive, moved later, passes no receive of its connection and no read of its
/// chunks, and the send, moved earlier, passes no send of its connection.
fn forwarding_send(insts: &[Inst], i: usize) -> Option<(usize, usize)> {
    let recv = &insts[i];
    let dst = recv.dst?;
    let chunks = || (0..recv.count).map(|c| ChunkRef { buffer: dst.buffer, index: dst.index + c });
    let forwards = |inst: &Inst| inst.kind == StepKind::Send && inst.src == Some(dst) && inst.count == recv.count;
    // Another send of these chunks, or a write to them, ends the search: what follows no longer
    // forwards exactly what was received.
    let stops = |inst: &Inst| chunks().any(|c| inst.writes(c) || (inst.kind == StepKind::Send && inst.reads(c)));
    let j = i + 1 + insts[i + 1..].iter().position(|inst| forwards(inst) || stops(inst))?;
    let send = &insts[j];
    if !forwards(send) || send.channel != recv.channel {
        return None;
    }
    let between = || insts.iter().enumerate().take(j).skip(i + 1);
    let after = between().rev().find(|(_, inst)| (inst.send, inst.channel) == (send.send, send.channel));
    let blocker = between()
        .find(|(_, inst)| (inst.recv, inst.channel) == (recv.recv, recv.channel) || chunks().any(|c| inst.reads(c)));
    let after = after.map_or(i, |(k, _)| k);
    blocker.is_none_or(|(b, _)| after < b).then_some((j, after))
}

/// One step of a rank before it is placed in a thread block.
#[derive(Clone, Copy, Debug)]
struct Inst {
    kind: StepKind,
    src: Option<ChunkRef>,
    dst: Option<ChunkRef>,
    count: usize,
    send: Option<usize>,
    recv: Option<usize>,
    channel: usize,
}

impl Inst {
    /// Whether it reads chunk `c`.
    fn reads(&self, c: ChunkRef) -> bool {
        let covers = |r: Option<ChunkRef>| {
            r.is_some_and(|r| r.buffer == c.buffer && (r.index..r.index + self.count).contains(&c.index))
        };
        (self.kind.reads_src() && covers(self.src)) || (self.kind == StepKind::Reduce && covers(self.dst))
    }

    /// Whether it writes chunk `c`.
    fn writes(&self, c: ChunkRef) -> bool {
        let covers = |r: Option<ChunkRef>| {
            r.is_some_and(|r| r.buffer == c.buffer && (r.index..r.index + self.count).contains(&c.index))
        };
        self.kind.writes_dst() && covers(self.dst)
    }
}

/// One end of a rank's connection, or its local work on a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Conn {
    Send(usize, usize),
    Recv(usize, usize),
    Local(usize),
}

/// Which connections share a thread block: a union-find whose sets hold at most one send and one
/// receive connection each.
#[derive(Debug, Default)]
struct Connections {
    parent: BTreeMap<Conn, Conn>,
}

impl Connections {
    fn root(&mut self, conn: Conn) -> Conn {
        let parent = *self.parent.entry(conn).or_insert(conn);
        if parent == conn {
            return conn;
        }
        let root = self.root(parent);
        self.parent.insert(conn, root);
        root
    }

    /// The connections in `conn`'s set.
    fn members(&mut self, conn: Conn) -> Vec<Conn> {
        let root = self.root(conn);
        let keys: Vec<Conn> = self.parent.keys().copied().collect();
        keys.into_iter().filter(|&k| self.root(k) == root).collect()
    }

    /// Puts `send` and `recv` in one thread block if neither already shares one with another
    /// connection of its own direction; whether they now share one.
    fn join(&mut self, send: Conn, recv: Conn) -> bool {
        let (a, b) = (self.root(send), self.root(recv));
        if a == b {
            return true;
        }
        let has_recv = self.members(send).iter().any(|c| matches!(c, Conn::Recv(..)));
        let has_send = self.members(recv).iter().any(|c| matches!(c, Conn::Send(..)));
        if has_recv || has_send {
            return false;
        }
        self.parent.insert(a, b);
        true
    }
}

/// Places a rank's instructions in thread blocks, with their dependencies.
#[derive(Debug, Default)]
struct Emitter {
    blocks: Vec<ThreadBlock>,
    /// Per chunk: the step that wrote it last, and the steps that read it since.
    last_write: HashMap<ChunkRef, (usize, usize)>,
    reads: HashMap<ChunkRef, Vec<(usize, usize)>>,
}

impl Emitter {
    fn emit(insts: &[Inst], conns: &mut Connections) -> Vec<ThreadBlock> {
        // Thread blocks by (send, recv, channel), sorted as the MSCCL writer sorts them (-1 first).
        let mut keys = BTreeMap::new();
        let key_of = |inst: &Inst, conns: &mut Connections| {
            let conn = match (inst.send, inst.recv) {
                (Some(p), _) => Conn::Send(p, inst.channel),
                (None, Some(p)) => Conn::Recv(p, inst.channel),
                (None, None) => Conn::Local(inst.channel),
            };
            let members = conns.members(conn);
            let send = members.iter().find_map(|c| if let Conn::Send(p, _) = c { Some(*p) } else { None });
            let recv = members.iter().find_map(|c| if let Conn::Recv(p, _) = c { Some(*p) } else { None });
            (send.map_or(-1, |p| p as i64), recv.map_or(-1, |p| p as i64), inst.channel)
        };
        let placed: Vec<_> = insts.iter().map(|i| (*i, key_of(i, conns))).collect();
        for (_, key) in &placed {
            keys.insert(*key, ());
        }
        let ids: HashMap<_, usize> = keys.keys().enumerate().map(|(id, key)| (*key, id)).collect();
        let mut emitter = Emitter {
            blocks: keys
                .keys()
                .map(|&(send, recv, channel)| ThreadBlock {
                    send: usize::try_from(send).ok(),
                    recv: usize::try_from(recv).ok(),
                    channel,
                    steps: Vec::new(),
                })
                .collect(),
            ..Emitter::default()
        };
        for (inst, key) in placed {
            emitter.push(ids[&key], &inst);
        }
        emitter.blocks
    }

    fn push(&mut self, tb: usize, inst: &Inst) {
        let chunks = |r: Option<ChunkRef>| {
            r.into_iter().flat_map(move |r| {
                (r.index..r.index + inst.count).map(move |index| ChunkRef { buffer: r.buffer, index })
            })
        };
        let reads: Vec<ChunkRef> = if inst.kind.reads_src() { chunks(inst.src).collect() } else { Vec::new() };
        let reads: Vec<ChunkRef> =
            if inst.kind == StepKind::Reduce { reads.into_iter().chain(chunks(inst.dst)).collect() } else { reads };
        let writes: Vec<ChunkRef> = if inst.kind.writes_dst() { chunks(inst.dst).collect() } else { Vec::new() };
        // The last step of each other thread block this one must wait for.
        let mut deps: BTreeMap<usize, usize> = BTreeMap::new();
        let mut wait = |on: (usize, usize)| {
            if on.0 != tb {
                let step = deps.entry(on.0).or_insert(on.1);
                *step = (*step).max(on.1);
            }
        };
        for chunk in &reads {
            if let Some(&on) = self.last_write.get(chunk) {
                wait(on);
            }
        }
        for chunk in &writes {
            if let Some(&on) = self.last_write.get(chunk) {
                wait(on);
            }
            for &on in self.reads.get(chunk).into_iter().flatten() {
                wait(on);
            }
        }
        let deps: Vec<(usize, usize)> = deps.into_iter().collect();
        for &(on_tb, on_step) in &deps {
            self.blocks[on_tb].steps[on_step].has_dependents = true;
        }
        let steps = &mut self.blocks[tb].steps;
        if let Some((last, rest)) = deps.split_last() {
            for &dep in rest {
                steps.push(Step {
                    kind: StepKind::Nop,
                    src: None,
                    dst: None,
                    count: 0,
                    depends_on: Some(dep),
                    has_dependents: false,
                });
            }
            steps.push(Step {
                kind: inst.kind,
                src: inst.src,
                dst: inst.dst,
                count: inst.count,
                depends_on: Some(*last),
                has_dependents: false,
            });
        } else {
            steps.push(Step {
                kind: inst.kind,
                src: inst.src,
                dst: inst.dst,
                count: inst.count,
                depends_on: None,
                has_dependents: false,
            });
        }
        let at = (tb, steps.len() - 1);
        for chunk in reads {
            self.reads.entry(chunk).or_default().push(at);
        }
        for chunk in writes {
            self.last_write.insert(chunk, at);
            self.reads.remove(&chunk);
        }
    }
}

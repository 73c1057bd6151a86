//! Chunk programs: collective algorithms as MSCCL writes them, per rank a list of thread blocks, each a
//! list of steps over chunks of the rank's input, output and scratch buffers. Uses
//! [`machine`](crate::machine), [`tile`](crate::tile), [`collective`](crate::collective) and
//! [`kernel`](crate::kernel): a program runs as a kernel written against the same `tl` API as any
//! other, so it is a module of the core beside that API, not a crate of its own.
//!
//! [`Program`] is the one form every source compiles to: an MSCCL-IR XML file ([`msccl`]) is read into
//! it and written from it, and [`ProgramKernel`] runs it on any backend as a kernel whose lanes are its
//! thread blocks. Its semantics are those of the MSCCL executor (in NCCL and RCCL):
//!
//! - buffer `X` of a rank is cut into chunks of `S` elements, `S` = the collective's elements (for
//!   all-gather, reduce-scatter and all-to-all, all ranks' parts) / [`Program::chunks`]; a step moves
//!   `count` consecutive chunks from a chunk index;
//! - within a thread block steps run in order; a step waits for the steps it depends on (in other
//!   thread blocks of its rank) to have completed; across ranks only messages order steps;
//! - message k that a thread block sends to rank `r` on channel `c` is message k that the thread block
//!   of `r` receiving from it on channel `c` receives (FIFO per connection);
//! - each thread block runs its whole list once per *pass* over its chunks ([`Protocol::pass_bytes`]
//!   of each), and a step moves its part of a pass in *slices* ([`Protocol::slice_bytes`]): a step
//!   that receives, reduces and forwards (`rrs`, `rcs`, `rrcs`) passes each slice on as it arrives.

pub mod builder;
pub mod check;
pub mod examples;
mod kernel;
pub mod msccl;

pub use builder::{BuildError, Chunk, ChunkError, OpKind, ProgramBuilder, SourceAt};
pub use check::{ProgramError, check};
pub use kernel::{MSCCL_PROGRAM, ProgramFamily, ProgramKernel};
pub use msccl::MscclError;

use std::fmt;

use crate::collective::Collective;
use crate::kernel::Buffer;
pub use crate::machine::Protocol;

/// What a step does. `src` and `dst` are the step's source and destination chunks; `recv` takes the
/// next message of the thread block's receive connection, `send` pushes onto its send connection, `⊕`
/// is the call's reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// `s`: `send(src)`.
    Send,
    /// `r`: `dst = recv()`.
    Recv,
    /// `rcs`: `v = recv(); dst = v; send(v)`.
    RecvCopySend,
    /// `rrs`: `send(recv() ⊕ src)`; nothing is stored.
    RecvReduceSend,
    /// `rrc`: `dst = recv() ⊕ src`.
    RecvReduceCopy,
    /// `rrcs`: `v = recv() ⊕ src; dst = v; send(v)`.
    RecvReduceCopySend,
    /// `cpy`: `dst = src`.
    Copy,
    /// `re`: `dst = dst ⊕ src`.
    Reduce,
    /// `nop`: only waits for its dependencies.
    Nop,
}

impl StepKind {
    /// Every kind, in the executor's numbering.
    pub const ALL: [StepKind; 9] = [
        StepKind::Send,
        StepKind::Recv,
        StepKind::RecvCopySend,
        StepKind::RecvReduceSend,
        StepKind::RecvReduceCopy,
        StepKind::RecvReduceCopySend,
        StepKind::Copy,
        StepKind::Reduce,
        StepKind::Nop,
    ];

    /// Its name in MSCCL-IR (`s`, `r`, `rcs`, ...).
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Send => "s",
            StepKind::Recv => "r",
            StepKind::RecvCopySend => "rcs",
            StepKind::RecvReduceSend => "rrs",
            StepKind::RecvReduceCopy => "rrc",
            StepKind::RecvReduceCopySend => "rrcs",
            StepKind::Copy => "cpy",
            StepKind::Reduce => "re",
            StepKind::Nop => "nop",
        }
    }

    /// Whether it takes a message from the thread block's receive connection.
    pub fn receives(self) -> bool {
        matches!(
            self,
            StepKind::Recv
                | StepKind::RecvCopySend
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
        )
    }

    /// Whether it pushes a message onto the thread block's send connection.
    pub fn sends(self) -> bool {
        matches!(
            self,
            StepKind::Send | StepKind::RecvCopySend | StepKind::RecvReduceSend | StepKind::RecvReduceCopySend
        )
    }

    /// Whether it reads its source chunks.
    pub fn reads_src(self) -> bool {
        matches!(
            self,
            StepKind::Send
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
                | StepKind::Copy
                | StepKind::Reduce
        )
    }

    /// Whether it writes its destination chunks.
    pub fn writes_dst(self) -> bool {
        matches!(
            self,
            StepKind::Recv
                | StepKind::RecvCopySend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
                | StepKind::Copy
                | StepKind::Reduce
        )
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A run of chunks of one of a rank's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChunkRef {
    /// The buffer.
    pub buffer: Buffer,
    /// The first chunk.
    pub index: usize,
}

/// One step of a thread block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// What it does.
    pub kind: StepKind,
    /// The chunks it reads, for kinds that read.
    pub src: Option<ChunkRef>,
    /// The chunks it writes, for kinds that write.
    pub dst: Option<ChunkRef>,
    /// How many consecutive chunks it moves (0 for a `nop`).
    pub count: usize,
    /// The step it waits for first: `(thread block, step index)` on the same rank, the index counting
    /// every step of that thread block's list (`nop`s included).
    pub depends_on: Option<(usize, usize)>,
    /// Whether another thread block waits on this step (the executor publishes only such steps).
    pub has_dependents: bool,
}

/// One thread block of a rank: a lane of the rank's PE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadBlock {
    /// The rank it sends to, if any.
    pub send: Option<usize>,
    /// The rank it receives from, if any.
    pub recv: Option<usize>,
    /// The channel of both connections.
    pub channel: usize,
    /// Its steps, in order.
    pub steps: Vec<Step>,
}

/// What one rank runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankProgram {
    /// Chunks of its input buffer.
    pub input_chunks: usize,
    /// Chunks of its output buffer.
    pub output_chunks: usize,
    /// Chunks of its scratch buffer.
    pub scratch_chunks: usize,
    /// Its thread blocks, by id.
    pub thread_blocks: Vec<ThreadBlock>,
}

/// A chunk program: what every rank runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// Its name.
    pub name: String,
    /// The collective it computes.
    pub collective: Collective,
    /// Whether it runs in place (input and output the same memory, aliased as the collective says).
    pub in_place: bool,
    /// The protocol.
    pub protocol: Protocol,
    /// `N`: the chunks the larger of a rank's input and output is cut into.
    pub chunks: usize,
    /// Channels it uses (above every thread block's channel).
    pub channels: usize,
    /// One per rank.
    pub ranks: Vec<RankProgram>,
}

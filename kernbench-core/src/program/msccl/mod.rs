//! MSCCL-IR XML in and out: [`from_xml_str`] / [`from_file`] read a file into a [`Program`](super::Program),
//! [`to_xml`] writes one as msccl-tools does, and [`refusals`] says which real executors would refuse
//! it. Uses the rest of [`program`](super), [`Buffer`] from `kernel` and [`Collective`].
//!
//! The format, as msccl-tools writes it (what each step type does is in the [`program`](super) docs):
//!
//! ```text
//! <algo name="ring" proto="Simple" nchannels="1" nchunksperloop="4" ngpus="4" coll="allreduce" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
//!   <gpu id="0" i_chunks="4" o_chunks="4" s_chunks="0">
//!     <tb id="0" send="1" recv="3" chan="0">
//!       <step s="0" type="s" srcbuf="i" srcoff="3" dstbuf="o" dstoff="-1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
//! ```
//!
//! - `<algo>`: `nchunksperloop` is [`Program::chunks`](super::Program::chunks), `ngpus` the number of `<gpu>` elements, `coll`
//!   the collective, `inplace` whether it runs in place. `outofplace`, `minBytes` and `maxBytes` (absent
//!   in old files) only select when the runtime uses the program, so they are not kept.
//! - `<gpu>`: a rank and the chunks of its input (`i`), output (`o`) and scratch (`s`) buffers.
//! - `<tb>`: a thread block, its `send` and `recv` peers (-1: none) and its channel; ids dense from 0.
//! - `<step>`: `s` is its position (nops count), `srcbuf`/`srcoff` and `dstbuf`/`dstoff` its chunks
//!   (-1: none), `cnt` how many, `depid`/`deps` the thread block and step it waits for (-1: none),
//!   `hasdep` whether another thread block waits for it.
//!
//! The reader accepts what the real readers (RCCL, msccl-executor-nccl, the old microsoft/msccl)
//! accept: any attribute order, unknown attributes and elements ignored, comments, `reducescatter` and
//! `reduce_scatter`, integers as C's `strtol(s, NULL, 0)` reads them (`0x1f` hex, `017` octal). It is
//! stricter in one way: an integer must be the whole value, where `strtol` would silently read `"12abc"`
//! as 12. Every program read is [`check`](super::check())ed.
//!
//! One thing does not survive a round trip: msccl-tools writes the peer's chunk as the unused side of
//! a send (`dst`) or receive (`src`); [`Program`](super::Program) keeps only the chunks a step uses, so [`to_xml`]
//! writes the unused side as `i`/`o` with offset -1, as msccl-tools does for a nop.

mod executors;
mod read;
mod write;

use std::fmt;
use std::path::PathBuf;

pub use executors::{Executor, Refusal, refusals};
pub use read::{from_file, from_xml_str};
pub use write::to_xml;

use super::Protocol;
use super::check::ProgramError;
use crate::collective::Collective;
use crate::kernel::Buffer;
use crate::quote::Quoted;

/// The element of an MSCCL-IR document an error is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Element {
    /// The `<algo>` root.
    Algo,
    /// A `<gpu>`, with its id once read.
    Gpu {
        /// Its `id`, if it was read.
        id: Option<usize>,
    },
    /// A `<tb>` of a gpu, with its id once read.
    Tb {
        /// The gpu's id.
        gpu: usize,
        /// Its `id`, if it was read.
        id: Option<usize>,
    },
    /// A `<step>`.
    Step {
        /// The gpu's id.
        gpu: usize,
        /// The thread block's id.
        tb: usize,
        /// Its position in the thread block (0-based, nops included).
        step: usize,
    },
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Element::Algo => f.write_str("<algo>"),
            Element::Gpu { id: Some(id) } => write!(f, "gpu {id}"),
            Element::Gpu { id: None } => f.write_str("<gpu>"),
            Element::Tb { gpu, id: Some(id) } => write!(f, "gpu {gpu} tb {id}"),
            Element::Tb { gpu, id: None } => write!(f, "gpu {gpu} <tb>"),
            Element::Step { gpu, tb, step } => write!(f, "gpu {gpu} tb {tb} step {step}"),
        }
    }
}

/// Where in an MSCCL-IR document an error is: the line of the element's start and the element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// The line (1-based) where the element starts.
    pub line: u32,
    /// The element.
    pub element: Element,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, {}", self.line, self.element)
    }
}

/// The `coll` names this reader knows, with their collectives.
const COLLECTIVES: [(&str, Collective); 7] = [
    ("allreduce", Collective::AllReduce),
    ("allgather", Collective::AllGather),
    ("reducescatter", Collective::ReduceScatter),
    ("reduce_scatter", Collective::ReduceScatter),
    ("alltoall", Collective::AllToAll),
    ("broadcast", Collective::Broadcast),
    ("reduce", Collective::Reduce),
];

/// The `coll` names msccl-tools (Azure, new) writes, one per collective.
fn collective_name(collective: Collective) -> &'static str {
    collective.nccl_tests_name()
}

const PROTOCOLS: [Protocol; 3] = [Protocol::Simple, Protocol::Ll, Protocol::Ll128];

const BUFFERS: [(&str, Buffer); 3] = [("i", Buffer::Input), ("o", Buffer::Output), ("s", Buffer::Scratch)];

fn buffer_name(buffer: Buffer) -> &'static str {
    BUFFERS.iter().find(|(_, b)| *b == buffer).map(|(name, _)| *name).expect("every buffer has a name")
}

fn names<T>(table: &[(&'static str, T)]) -> String {
    table.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

/// Why an MSCCL-IR file was rejected. Each of these is the file's fault; each names where (line and
/// element), the attribute, and what would be valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MscclError {
    /// The file could not be read.
    #[error("cannot read MSCCL-IR file `{}`: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        message: String,
    },
    /// A file's content was rejected; `source` says why.
    #[error("in MSCCL-IR file `{}`: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<MscclError>,
    },
    /// The text is not well-formed XML.
    #[error("not XML: {message}")]
    NotXml {
        /// The XML parser's message, with the line and column.
        message: String,
        /// The line (1-based).
        line: u32,
        /// The column (1-based).
        column: u32,
    },
    /// The first element is not `<algo>`.
    #[error("line {line}: the root element is <{}>: expected <algo>", Quoted(found))]
    RootNotAlgo {
        /// The line of the root element.
        line: u32,
        /// Its name.
        found: String,
    },
    /// A required attribute is absent.
    #[error("{at}: no `{attribute}` attribute: it is required")]
    MissingAttribute {
        /// The element.
        at: Location,
        /// The attribute.
        attribute: &'static str,
    },
    /// An attribute that holds an integer holds something else.
    #[error(
        "{at}: `{attribute}=\"{}\"` is not an integer: expected a decimal, 0x-hex or 0-octal number",
        Quoted(value)
    )]
    BadInteger {
        /// The element.
        at: Location,
        /// The attribute.
        attribute: &'static str,
        /// Its value.
        value: String,
    },
    /// An integer attribute out of its range.
    #[error("{at}: `{attribute}={value}` is out of range: expected {expected}")]
    OutOfRange {
        /// The element.
        at: Location,
        /// The attribute.
        attribute: &'static str,
        /// Its value.
        value: i64,
        /// What would be valid.
        expected: &'static str,
    },
    /// A thread block's channel is negative (some msccl-tools branches write `chan="-1"` for thread
    /// blocks that only copy locally; every real reader refuses it).
    #[error("{at}: `chan={value}` is negative: expected a channel of 0 or more, also for a thread block without peers")]
    NegativeChannel {
        /// The thread block.
        at: Location,
        /// The channel.
        value: i64,
    },
    /// `coll` names a collective this reader does not model (or none at all).
    #[error("{at}: collective `{}` is not supported: expected one of {}", Quoted(name), names(&COLLECTIVES))]
    UnsupportedCollective {
        /// The `<algo>` element.
        at: Location,
        /// The name found.
        name: String,
    },
    /// `proto` is not a protocol.
    #[error("{at}: protocol `{}` is unknown: expected one of Simple, LL, LL128 (case-sensitive)", Quoted(name))]
    UnknownProtocol {
        /// The `<algo>` element.
        at: Location,
        /// The name found.
        name: String,
    },
    /// A step's `type` is none of the 9 step types.
    #[error("{at}: step type `{}` is unknown: expected one of s, r, rcs, rrs, rrc, rrcs, cpy, re, nop", Quoted(name))]
    UnknownStepType {
        /// The step.
        at: Location,
        /// The type found.
        name: String,
    },
    /// `srcbuf` or `dstbuf` is not a buffer.
    #[error("{at}: `{attribute}=\"{}\"` is not a buffer: expected one of {}", Quoted(name), names(&BUFFERS))]
    UnknownBuffer {
        /// The step.
        at: Location,
        /// `srcbuf` or `dstbuf`.
        attribute: &'static str,
        /// The name found.
        name: String,
    },
    /// The number of `<gpu>` elements is not `ngpus`.
    #[error("{at}: `ngpus={ngpus}` but there are {gpus} <gpu> elements: expected one per rank")]
    GpuCount {
        /// The `<algo>` element.
        at: Location,
        /// `ngpus`.
        ngpus: usize,
        /// The `<gpu>` elements found.
        gpus: usize,
    },
    /// Two `<gpu>` elements have the same id.
    #[error("{at}: gpu id {id} appears twice: expected each of 0..ngpus once")]
    DuplicateGpu {
        /// The second one.
        at: Location,
        /// The id.
        id: usize,
    },
    /// Two `<tb>` elements of a gpu have the same id.
    #[error("{at}: tb id {id} appears twice in its gpu: expected each of 0..{count} once")]
    DuplicateThreadBlock {
        /// The second one.
        at: Location,
        /// The id.
        id: usize,
        /// How many `<tb>` elements the gpu has.
        count: usize,
    },
    /// A `<tb>` id leaves a gap: ids must be `0..k` for `k` thread blocks.
    #[error(
        "{at}: tb id {id} leaves a gap: the gpu has {count} <tb> elements, so expected ids 0..{count} (thread block {missing} is missing)"
    )]
    ThreadBlockGap {
        /// The thread block.
        at: Location,
        /// Its id.
        id: usize,
        /// How many `<tb>` elements the gpu has.
        count: usize,
        /// The lowest id not used.
        missing: usize,
    },
    /// A step's `s` is not its position in the thread block (steps run in document order).
    #[error("{at}: `s={s}` but the step is at position {position} of its thread block: expected s={position}")]
    StepNumber {
        /// The step.
        at: Location,
        /// The `s` found.
        s: i64,
        /// Its position.
        position: usize,
    },
    /// The file parsed, but the program cannot run; names the rank (the gpu id), thread block and step.
    #[error(transparent)]
    Program(#[from] ProgramError),
}

#[cfg(test)]
mod tests;

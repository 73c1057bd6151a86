//! MSCCL-IR XML in and out: [`from_xml_str`] / [`from_file`] read a file into a [`Program`],
//! [`to_xml`] writes one as msccl-tools does, and [`refusals`] says which real executors would refuse
//! it. Uses the rest of [`program`](super) and, from `kernel`, [`Buffer`] and [`Collective`].
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
//! - `<algo>`: `nchunksperloop` is [`Program::chunks`], `ngpus` the number of `<gpu>` elements, `coll`
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
//! a send (`dst`) or receive (`src`); [`Program`] keeps only the chunks a step uses, so [`to_xml`]
//! writes the unused side as `i`/`o` with offset -1, as msccl-tools does for a nop.

use std::fmt;
use std::path::{Path, PathBuf};

use super::check::{ProgramError, check};
use super::{ChunkRef, Program, Protocol, RankProgram, Step, StepKind, ThreadBlock};
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
    match collective {
        Collective::AllReduce => "allreduce",
        Collective::AllGather => "allgather",
        Collective::ReduceScatter => "reducescatter",
        Collective::AllToAll => "alltoall",
        Collective::Broadcast => "broadcast",
        Collective::Reduce => "reduce",
    }
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

/// Reads an MSCCL-IR file: [`from_xml_str`] of its content.
///
/// # Errors
/// [`MscclError::Io`] when the file cannot be read (or is too large or not UTF-8), [`MscclError::InFile`]
/// wrapping what [`from_xml_str`] says about its content.
pub fn from_file(path: &Path) -> Result<Program, MscclError> {
    let text = crate::files::read_text(path)
        .map_err(|error| MscclError::Io { path: path.to_owned(), message: error.to_string() })?;
    from_xml_str(&text).map_err(|error| MscclError::InFile { path: path.to_owned(), source: Box::new(error) })
}

/// Parses MSCCL-IR XML into a [`Program`] and [`check`]s it.
///
/// # Examples
/// ```
/// use kernbench_core::program::msccl;
/// let xml = r#"<algo name="pair" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="1">
///   <gpu id="0" i_chunks="0" o_chunks="2" s_chunks="0">
///     <tb id="0" send="1" recv="1" chan="0">
///       <step s="0" type="s" srcbuf="o" srcoff="0" dstbuf="o" dstoff="-1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
///       <step s="1" type="r" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
///     </tb>
///   </gpu>
///   <gpu id="1" i_chunks="0" o_chunks="2" s_chunks="0">
///     <tb id="0" send="0" recv="0" chan="0">
///       <step s="0" type="s" srcbuf="o" srcoff="1" dstbuf="o" dstoff="-1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
///       <step s="1" type="r" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
///     </tb>
///   </gpu>
/// </algo>"#;
/// let program = msccl::from_xml_str(xml).unwrap();
/// assert_eq!(program.ranks.len(), 2);
/// assert!(program.in_place);
/// ```
///
/// # Errors
/// An [`MscclError`] naming the line, element and attribute when the text is not MSCCL-IR, or
/// [`MscclError::Program`] when [`check`] rejects the program.
pub fn from_xml_str(text: &str) -> Result<Program, MscclError> {
    let document = roxmltree::Document::parse(text).map_err(|error| MscclError::NotXml {
        message: error.to_string(),
        line: error.pos().row,
        column: error.pos().col,
    })?;
    let reader = Reader::new(text);
    let program = reader.algo(document.root_element())?;
    check(&program)?;
    Ok(program)
}

/// Reads the elements of a parsed document, knowing where its lines start so that each element's
/// line costs a binary search (roxmltree's own `text_pos_at` scans the text from its start).
struct Reader {
    /// The byte offset of each line's first character after the first line.
    line_starts: Vec<usize>,
}

/// An element with its location, whose attributes are read with the error naming both.
struct Attributes<'d, 'input> {
    node: roxmltree::Node<'d, 'input>,
    at: Location,
}

impl<'d, 'input> Attributes<'d, 'input> {
    fn text(&self, attribute: &'static str) -> Result<&'d str, MscclError> {
        self.node.attribute(attribute).ok_or(MscclError::MissingAttribute { at: self.at, attribute })
    }

    fn integer(&self, attribute: &'static str) -> Result<i64, MscclError> {
        let value = self.text(attribute)?;
        parse_c_integer(value).ok_or_else(|| MscclError::BadInteger { at: self.at, attribute, value: value.into() })
    }

    /// An integer that must be at least `min` (0 or 1).
    fn at_least(&self, attribute: &'static str, min: i64, expected: &'static str) -> Result<usize, MscclError> {
        let value = self.integer(attribute)?;
        usize::try_from(value).ok().filter(|_| value >= min).ok_or(MscclError::OutOfRange {
            at: self.at,
            attribute,
            value,
            expected,
        })
    }

    /// An index or peer, where -1 means none.
    fn optional(&self, attribute: &'static str) -> Result<Option<usize>, MscclError> {
        match self.integer(attribute)? {
            -1 => Ok(None),
            value => usize::try_from(value).map(Some).map_err(|_| MscclError::OutOfRange {
                at: self.at,
                attribute,
                value,
                expected: "-1 (none) or a number of 0 or more",
            }),
        }
    }

    fn flag(&self, attribute: &'static str) -> Result<bool, MscclError> {
        match self.integer(attribute)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(MscclError::OutOfRange { at: self.at, attribute, value, expected: "0 or 1" }),
        }
    }

    fn buffer(&self, attribute: &'static str) -> Result<Buffer, MscclError> {
        let name = self.text(attribute)?;
        BUFFERS
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, buffer)| *buffer)
            .ok_or_else(|| MscclError::UnknownBuffer { at: self.at, attribute, name: name.into() })
    }
}

impl Reader {
    fn new(text: &str) -> Reader {
        Reader { line_starts: text.match_indices('\n').map(|(newline, _)| newline + 1).collect() }
    }

    fn attributes<'d, 'input>(&self, node: roxmltree::Node<'d, 'input>, element: Element) -> Attributes<'d, 'input> {
        let lines_before = self.line_starts.partition_point(|&start| start <= node.range().start);
        let line = u32::try_from(lines_before + 1).unwrap_or(u32::MAX);
        Attributes { node, at: Location { line, element } }
    }

    fn children<'d, 'input>(node: roxmltree::Node<'d, 'input>, name: &'static str) -> Vec<roxmltree::Node<'d, 'input>> {
        node.children().filter(|child| child.is_element() && child.tag_name().name() == name).collect()
    }

    fn algo(&self, node: roxmltree::Node<'_, '_>) -> Result<Program, MscclError> {
        let algo = self.attributes(node, Element::Algo);
        if node.tag_name().name() != "algo" {
            return Err(MscclError::RootNotAlgo { line: algo.at.line, found: node.tag_name().name().into() });
        }
        // RCCL never reads `name`, so files without one run there.
        let name = node.attribute("name").unwrap_or_default().to_owned();
        let protocol_name = algo.text("proto")?;
        let protocol = PROTOCOLS
            .into_iter()
            .find(|protocol| protocol.name() == protocol_name)
            .ok_or_else(|| MscclError::UnknownProtocol { at: algo.at, name: protocol_name.into() })?;
        let channels = algo.at_least("nchannels", 1, "1 or more")?;
        let chunks = algo.at_least("nchunksperloop", 1, "1 or more")?;
        let ngpus = algo.at_least("ngpus", 1, "1 or more")?;
        let collective_text = algo.text("coll")?;
        let collective = COLLECTIVES
            .iter()
            .find(|(known, _)| *known == collective_text)
            .map(|(_, collective)| *collective)
            .ok_or_else(|| MscclError::UnsupportedCollective { at: algo.at, name: collective_text.into() })?;
        let in_place = algo.flag("inplace")?;

        let gpus = Self::children(node, "gpu");
        if gpus.len() != ngpus {
            return Err(MscclError::GpuCount { at: algo.at, ngpus, gpus: gpus.len() });
        }
        let mut ranks: Vec<Option<RankProgram>> = vec![None; ngpus];
        for gpu in gpus {
            let attributes = self.attributes(gpu, Element::Gpu { id: None });
            let id = attributes.at_least("id", 0, "a gpu id in 0..ngpus")?;
            if id >= ngpus {
                let value = i64::try_from(id).unwrap_or(i64::MAX);
                return Err(MscclError::OutOfRange {
                    at: attributes.at,
                    attribute: "id",
                    value,
                    expected: "a gpu id in 0..ngpus",
                });
            }
            if ranks[id].is_some() {
                return Err(MscclError::DuplicateGpu { at: attributes.at, id });
            }
            ranks[id] = Some(self.gpu(gpu, id)?);
        }
        let ranks =
            ranks.into_iter().map(|rank| rank.expect("ngpus distinct ids below ngpus fill every slot")).collect();
        Ok(Program { name, collective, in_place, protocol, chunks, channels, ranks })
    }

    fn gpu(&self, node: roxmltree::Node<'_, '_>, id: usize) -> Result<RankProgram, MscclError> {
        let gpu = self.attributes(node, Element::Gpu { id: Some(id) });
        let input_chunks = gpu.at_least("i_chunks", 0, "0 or more")?;
        let output_chunks = gpu.at_least("o_chunks", 0, "0 or more")?;
        let scratch_chunks = gpu.at_least("s_chunks", 0, "0 or more")?;
        let tbs = Self::children(node, "tb");
        let count = tbs.len();
        // All ids first, so that a gap names the id really missing, wherever its element would be.
        let mut ids = Vec::with_capacity(count);
        let mut present = vec![false; count];
        for &tb in &tbs {
            let attributes = self.attributes(tb, Element::Tb { gpu: id, id: None });
            let tb_id = attributes.at_least("id", 0, "a thread block id of 0 or more")?;
            let at = Location { element: Element::Tb { gpu: id, id: Some(tb_id) }, ..attributes.at };
            if let Some(seen) = present.get_mut(tb_id) {
                if *seen {
                    return Err(MscclError::DuplicateThreadBlock { at, id: tb_id, count });
                }
                *seen = true;
            }
            ids.push((tb_id, at));
        }
        if let Some(&(tb_id, at)) = ids.iter().find(|(tb_id, _)| *tb_id >= count) {
            let missing = present.iter().position(|seen| !seen).expect("an id out of 0..count leaves one of them out");
            return Err(MscclError::ThreadBlockGap { at, id: tb_id, count, missing });
        }
        let mut thread_blocks: Vec<Option<ThreadBlock>> = vec![None; count];
        for (tb, (tb_id, _)) in tbs.into_iter().zip(ids) {
            thread_blocks[tb_id] = Some(self.thread_block(tb, id, tb_id)?);
        }
        let thread_blocks =
            thread_blocks.into_iter().map(|tb| tb.expect("count distinct ids below count fill every slot")).collect();
        Ok(RankProgram { input_chunks, output_chunks, scratch_chunks, thread_blocks })
    }

    fn thread_block(&self, node: roxmltree::Node<'_, '_>, gpu: usize, id: usize) -> Result<ThreadBlock, MscclError> {
        let tb = self.attributes(node, Element::Tb { gpu, id: Some(id) });
        let send = tb.optional("send")?;
        let recv = tb.optional("recv")?;
        let channel = tb.integer("chan")?;
        let channel =
            usize::try_from(channel).map_err(|_| MscclError::NegativeChannel { at: tb.at, value: channel })?;
        let steps = Self::children(node, "step")
            .into_iter()
            .enumerate()
            .map(|(position, step)| self.step(step, gpu, id, position))
            .collect::<Result<_, _>>()?;
        Ok(ThreadBlock { send, recv, channel, steps })
    }

    fn step(&self, node: roxmltree::Node<'_, '_>, gpu: usize, tb: usize, position: usize) -> Result<Step, MscclError> {
        let step = self.attributes(node, Element::Step { gpu, tb, step: position });
        let s = step.integer("s")?;
        if usize::try_from(s).ok() != Some(position) {
            return Err(MscclError::StepNumber { at: step.at, s, position });
        }
        let type_name = step.text("type")?;
        let kind = StepKind::ALL
            .into_iter()
            .find(|kind| kind.name() == type_name)
            .ok_or_else(|| MscclError::UnknownStepType { at: step.at, name: type_name.into() })?;
        // Every reader requires all of these, also where the kind does not use them.
        let src_buffer = step.buffer("srcbuf")?;
        let src_index = step.optional("srcoff")?;
        let dst_buffer = step.buffer("dstbuf")?;
        let dst_index = step.optional("dstoff")?;
        let count = step.at_least("cnt", 0, "0 or more")?;
        let depid = step.optional("depid")?;
        let deps = step.optional("deps")?;
        let has_dependents = step.flag("hasdep")?;
        let depends_on = match (depid, deps) {
            (None, _) => None,
            (Some(tb), Some(step)) => Some((tb, step)),
            (Some(_), None) => {
                return Err(MscclError::OutOfRange {
                    at: step.at,
                    attribute: "deps",
                    value: -1,
                    expected: "a step index of 0 or more when depid is set",
                });
            }
        };
        let chunks =
            |used: bool, buffer, index: Option<usize>| index.filter(|_| used).map(|index| ChunkRef { buffer, index });
        Ok(Step {
            kind,
            src: chunks(kind.reads_src(), src_buffer, src_index),
            dst: chunks(kind.writes_dst(), dst_buffer, dst_index),
            // A nop moves nothing, whatever its `cnt` says.
            count: if kind == StepKind::Nop { 0 } else { count },
            depends_on,
            has_dependents,
        })
    }
}

/// Reads an integer as C's `strtol(s, NULL, 0)` does (leading whitespace, a sign, `0x` hex, a leading
/// `0` octal), but only when the whole value is the number.
fn parse_c_integer(text: &str) -> Option<i64> {
    let text = text.trim_start();
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        (16, hex)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// Writes `program` as msccl-tools (Azure, the new one) does: the attribute order, 2-space
/// indentation and no prolog; `outofplace` is the opposite of `inplace`, `minBytes` and `maxBytes` 0
/// (no limit); unused chunks are written `i`/`o` with offset -1.
///
/// # Examples
/// ```
/// use kernbench_core::program::msccl;
/// let xml = "<algo name=\"x\" proto=\"LL\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"1\" coll=\"allreduce\" inplace=\"1\">\n  <gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\"/>\n</algo>\n";
/// let program = msccl::from_xml_str(xml).unwrap();
/// let written = msccl::to_xml(&program);
/// assert!(written.starts_with("<algo name=\"x\" proto=\"LL\" nchannels=\"1\""));
/// assert_eq!(msccl::from_xml_str(&written).unwrap(), program);
/// ```
pub fn to_xml(program: &Program) -> String {
    let mut out = format!(
        "<algo name=\"{}\" proto=\"{}\" nchannels=\"{}\" nchunksperloop=\"{}\" ngpus=\"{}\" coll=\"{}\" inplace=\"{}\" outofplace=\"{}\" minBytes=\"0\" maxBytes=\"0\">\n",
        escape(&program.name),
        program.protocol.name(),
        program.channels,
        program.chunks,
        program.ranks.len(),
        collective_name(program.collective),
        u8::from(program.in_place),
        u8::from(!program.in_place),
    );
    for (id, rank) in program.ranks.iter().enumerate() {
        let gpu = format!(
            "  <gpu id=\"{id}\" i_chunks=\"{}\" o_chunks=\"{}\" s_chunks=\"{}\"",
            rank.input_chunks, rank.output_chunks, rank.scratch_chunks
        );
        if rank.thread_blocks.is_empty() {
            out += &format!("{gpu}/>\n");
            continue;
        }
        out += &format!("{gpu}>\n");
        for (tb_id, tb) in rank.thread_blocks.iter().enumerate() {
            let tb_start = format!(
                "    <tb id=\"{tb_id}\" send=\"{}\" recv=\"{}\" chan=\"{}\"",
                or_minus_one(tb.send),
                or_minus_one(tb.recv),
                tb.channel
            );
            if tb.steps.is_empty() {
                out += &format!("{tb_start}/>\n");
                continue;
            }
            out += &format!("{tb_start}>\n");
            for (position, step) in tb.steps.iter().enumerate() {
                out += &step_xml(position, step);
            }
            out += "    </tb>\n";
        }
        out += "  </gpu>\n";
    }
    out += "</algo>\n";
    out
}

fn step_xml(position: usize, step: &Step) -> String {
    let chunks = |chunks: Option<ChunkRef>, unused: Buffer| match chunks {
        Some(chunks) => (buffer_name(chunks.buffer), chunks.index.to_string()),
        None => (buffer_name(unused), "-1".to_owned()),
    };
    let (src_buffer, src_index) = chunks(step.src, Buffer::Input);
    let (dst_buffer, dst_index) = chunks(step.dst, Buffer::Output);
    let (depid, deps) = (or_minus_one(step.depends_on.map(|d| d.0)), or_minus_one(step.depends_on.map(|d| d.1)));
    format!(
        "      <step s=\"{position}\" type=\"{}\" srcbuf=\"{src_buffer}\" srcoff=\"{src_index}\" dstbuf=\"{dst_buffer}\" dstoff=\"{dst_index}\" cnt=\"{}\" depid=\"{depid}\" deps=\"{deps}\" hasdep=\"{}\"/>\n",
        step.kind,
        if step.kind == StepKind::Nop { 0 } else { step.count },
        u8::from(step.has_dependents)
    )
}

fn or_minus_one(value: Option<usize>) -> String {
    value.map_or_else(|| "-1".to_owned(), |value| value.to_string())
}

/// An attribute value as lxml escapes it.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A real MSCCL executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Executor {
    /// RCCL's MSCCL (ROCm/rccl), built without the receive-and-compute step types.
    Rccl,
    /// MSCCL on NCCL 2.18+ (Azure/msccl-executor-nccl).
    MscclExecutorNccl,
    /// The old MSCCL, a fork of NCCL 2.12 (microsoft/msccl).
    OldMsccl,
}

impl fmt::Display for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Executor::Rccl => "RCCL",
            Executor::MscclExecutorNccl => "msccl-executor-nccl",
            Executor::OldMsccl => "old MSCCL (microsoft/msccl)",
        })
    }
}

/// Why an executor would refuse a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Which executor.
    pub executor: Executor,
    /// Why, naming the first rank, thread block or step at fault.
    pub reason: String,
}

/// What an executor accepts, beyond what [`check`] requires of every program.
struct Limits {
    executor: Executor,
    /// Steps per thread block (`MSCCL_MAX_NUM_STEPS`).
    max_steps: usize,
    /// Thread blocks per rank, if limited below anything realistic.
    max_thread_blocks: Option<usize>,
    /// The largest `cnt` its reader takes (`MSCCL_MAX_COUNT` - 1), if it checks.
    max_count: Option<usize>,
    /// Whether `rcs`, `rrs`, `rrc` and `rrcs` run (RCCL builds its kernels with `fullOps=false`).
    full_ops: bool,
    /// Whether it checks `i_chunks` (all-gather) and `o_chunks` (reduce-scatter) against N.
    checks_part_chunks: bool,
}

const EXECUTORS: [Limits; 3] = [
    Limits {
        executor: Executor::Rccl,
        max_steps: 64,
        max_thread_blocks: Some(64),
        max_count: Some(71),
        full_ops: false,
        checks_part_chunks: false,
    },
    Limits {
        executor: Executor::MscclExecutorNccl,
        max_steps: 64,
        max_thread_blocks: None,
        max_count: Some(71),
        full_ops: true,
        checks_part_chunks: false,
    },
    Limits {
        executor: Executor::OldMsccl,
        max_steps: 256,
        max_thread_blocks: Some(216),
        max_count: None,
        full_ops: true,
        checks_part_chunks: true,
    },
];

/// Which real executors would refuse `program` and why, one [`Refusal`] per executor and reason
/// (naming the first offender). Empty when all three would run it. Whether it runs on one is a
/// question about that runtime's limits, separate from whether the program is correct.
///
/// # Examples
/// ```
/// use kernbench_core::program::msccl::{self, Executor};
/// let xml = r#"<algo name="pair" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="1">
///   <gpu id="0" i_chunks="0" o_chunks="2" s_chunks="0">
///     <tb id="0" send="1" recv="1" chan="0">
///       <step s="0" type="s" srcbuf="o" srcoff="0" dstbuf="o" dstoff="-1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
///       <step s="1" type="r" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
///     </tb>
///   </gpu>
///   <gpu id="1" i_chunks="0" o_chunks="2" s_chunks="0">
///     <tb id="0" send="0" recv="0" chan="0">
///       <step s="0" type="s" srcbuf="o" srcoff="1" dstbuf="o" dstoff="-1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
///       <step s="1" type="r" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
///     </tb>
///   </gpu>
/// </algo>"#;
/// assert!(msccl::refusals(&msccl::from_xml_str(xml).unwrap()).is_empty());
/// ```
pub fn refusals(program: &Program) -> Vec<Refusal> {
    EXECUTORS
        .iter()
        .flat_map(|limits| {
            let reasons = [
                too_many_steps(program, limits.max_steps),
                limits.max_thread_blocks.and_then(|max| too_many_thread_blocks(program, max)),
                limits.max_count.and_then(|max| count_too_large(program, max)),
                (!limits.full_ops).then(|| full_op(program)).flatten(),
                limits.checks_part_chunks.then(|| wrong_part_chunks(program)).flatten(),
            ];
            reasons.into_iter().flatten().map(|reason| Refusal { executor: limits.executor, reason })
        })
        .collect()
}

/// Every thread block of the program with its rank and id.
fn thread_blocks(program: &Program) -> impl Iterator<Item = (usize, usize, &ThreadBlock)> {
    let ranks = program.ranks.iter().enumerate();
    ranks.flat_map(|(rank, r)| r.thread_blocks.iter().enumerate().map(move |(tb, block)| (rank, tb, block)))
}

fn too_many_steps(program: &Program, max: usize) -> Option<String> {
    let (rank, tb, block) = thread_blocks(program).find(|(.., block)| block.steps.len() > max)?;
    Some(format!(
        "rank {rank} tb {tb} has {} steps: at most {max} per thread block (MSCCL_MAX_NUM_STEPS)",
        block.steps.len()
    ))
}

fn too_many_thread_blocks(program: &Program, max: usize) -> Option<String> {
    let (rank, r) = program.ranks.iter().enumerate().find(|(_, r)| r.thread_blocks.len() > max)?;
    Some(format!("rank {rank} has {} thread blocks: at most {max}", r.thread_blocks.len()))
}

fn count_too_large(program: &Program, max: usize) -> Option<String> {
    let (rank, tb, step, count) = thread_blocks(program)
        .flat_map(|(rank, tb, block)| block.steps.iter().enumerate().map(move |(step, s)| (rank, tb, step, s.count)))
        .find(|&(.., count)| count > max)?;
    Some(format!("rank {rank} tb {tb} step {step} has cnt={count}: at most {max} (MSCCL_MAX_COUNT is {})", max + 1))
}

/// The first step that receives and does more than store (`rcs`, `rrs`, `rrc`, `rrcs`).
fn full_op(program: &Program) -> Option<String> {
    let (rank, tb, step, kind) = thread_blocks(program)
        .flat_map(|(rank, tb, block)| block.steps.iter().enumerate().map(move |(step, s)| (rank, tb, step, s.kind)))
        .find(|&(.., kind)| kind.receives() && kind != StepKind::Recv)?;
    Some(format!(
        "rank {rank} tb {tb} step {step} is `{kind}`: its kernels are built without rcs, rrs, rrc and rrcs (fullOps=false); only s, r, re, cpy and nop run"
    ))
}

/// Each rank's part of an all-gather's input or a reduce-scatter's output must be N / ngpus chunks
/// when given.
fn wrong_part_chunks(program: &Program) -> Option<String> {
    let part = |r: &RankProgram| match program.collective {
        Collective::AllGather => Some(("i_chunks", r.input_chunks)),
        Collective::ReduceScatter => Some(("o_chunks", r.output_chunks)),
        _ => None,
    };
    let ngpus = program.ranks.len();
    let (rank, attribute, chunks) = program.ranks.iter().enumerate().find_map(|(rank, r)| {
        let (attribute, chunks) = part(r)?;
        (chunks > 0 && chunks * ngpus != program.chunks).then_some((rank, attribute, chunks))
    })?;
    Some(format!(
        "rank {rank} has {attribute}={chunks}: for {} it must be 0 or nchunksperloop / ngpus = {} / {ngpus}",
        program.collective, program.chunks
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RING_ALLREDUCE: &str = include_str!("../../../tests/fixtures/msccl/ring_allreduce.xml");
    const ALLTOALL_SCRATCH: &str = include_str!("../../../tests/fixtures/msccl/alltoall_scratch.xml");
    const TWO_RING_ALLREDUCE: &str = include_str!("../../../tests/fixtures/msccl/two_ring_allreduce.xml");
    const RING_ALLGATHER_INPLACE: &str = include_str!("../../../tests/fixtures/msccl/ring_allgather_inplace.xml");
    const FIXTURES: [&str; 4] = [RING_ALLREDUCE, ALLTOALL_SCRATCH, TWO_RING_ALLREDUCE, RING_ALLGATHER_INPLACE];

    fn parse(text: &str) -> Program {
        from_xml_str(text).unwrap_or_else(|error| panic!("{error}"))
    }

    /// The error `text` with `from` replaced by `to` gives, checking the replacement happened.
    fn error_after(text: &str, from: &str, to: &str) -> MscclError {
        assert!(text.contains(from), "the fixture has no `{from}`");
        from_xml_str(&text.replacen(from, to, 1)).expect_err("the edited file should be refused")
    }

    fn assert_mentions(error: &impl fmt::Display, parts: &[&str]) {
        let message = error.to_string();
        for part in parts {
            assert!(message.contains(part), "`{message}` does not mention `{part}`");
        }
    }

    #[test]
    fn fixtures_parse_check_and_round_trip() {
        for fixture in FIXTURES {
            let program = parse(fixture);
            assert_eq!(check(&program), Ok(()));
            assert_eq!(to_xml(&program), fixture, "msccl-tools style is reproduced exactly");
            assert_eq!(from_xml_str(&to_xml(&program)), Ok(program));
        }
    }

    #[test]
    fn ring_allreduce_reads_as_written() {
        let program = parse(RING_ALLREDUCE);
        assert_eq!(program.name, "ring_allreduce");
        assert_eq!(program.collective, Collective::AllReduce);
        assert!(!program.in_place);
        assert_eq!(
            (program.protocol, program.chunks, program.channels, program.ranks.len()),
            (Protocol::Simple, 4, 1, 4)
        );
        let rank = &program.ranks[0];
        assert_eq!((rank.input_chunks, rank.output_chunks, rank.scratch_chunks), (4, 4, 0));
        let tb = &rank.thread_blocks[0];
        assert_eq!((tb.send, tb.recv, tb.channel), (Some(1), Some(3), 0));
        let kinds: Vec<_> = tb.steps.iter().map(|step| step.kind.name()).collect();
        assert_eq!(kinds, ["s", "rrs", "rrs", "rrcs", "rcs", "rcs", "r"]);
        assert_eq!(
            tb.steps[3],
            Step {
                kind: StepKind::RecvReduceCopySend,
                src: Some(ChunkRef { buffer: Buffer::Input, index: 0 }),
                dst: Some(ChunkRef { buffer: Buffer::Output, index: 0 }),
                count: 1,
                depends_on: None,
                has_dependents: false,
            }
        );
        assert_eq!(tb.steps[1].dst, None, "rrs stores nothing");
    }

    #[test]
    fn nops_are_kept_so_dependencies_count_them() {
        let program = parse(TWO_RING_ALLREDUCE);
        let local = &program.ranks[1].thread_blocks[2];
        assert_eq!(local.steps[0].kind, StepKind::Nop);
        assert_eq!(local.steps[0].depends_on, Some((0, 1)));
        assert_eq!(local.steps[1].depends_on, Some((1, 1)));
        assert_eq!(program.ranks[1].thread_blocks[0].steps[2].depends_on, Some((2, 2)));
        assert_eq!(program.ranks[1].thread_blocks[1].channel, 1);
    }

    #[test]
    fn dialects_real_readers_accept() {
        let reference = parse(RING_ALLGATHER_INPLACE);
        // Another attribute order, extra attributes, a leading comment, no outofplace/minBytes/maxBytes,
        // hex and octal integers, and unknown elements.
        let reordered = RING_ALLGATHER_INPLACE
            .replace(
                r#"<algo name="ring_allgather_inplace" proto="Simple" nchannels="1" nchunksperloop="4" ngpus="4" coll="allgather" inplace="1" outofplace="0" minBytes="0" maxBytes="0">"#,
                "<!-- generated by hand -->\n<algo coll=\"allgather\" ngpus=\"0x4\" inplace=\"1\" nchunksperloop=\"04\" redop=\"sum\" nchannels=\"1\" proto=\"Simple\" name=\"ring_allgather_inplace\">\n  <note/>",
            )
            .replace(r#"<gpu id="2" i_chunks="0" o_chunks="4" s_chunks="0">"#, r#"<gpu s_chunks="0" o_chunks="0X4" i_chunks="0" id="2">"#);
        assert_eq!(parse(&reordered), reference);
        // Every collective name, reduce-scatter's old one (`reduce_scatter`) too; the writer uses the new.
        for (name, collective) in COLLECTIVES {
            let renamed = RING_ALLGATHER_INPLACE.replace(r#"coll="allgather""#, &format!("coll=\"{name}\""));
            let program = parse(&renamed);
            assert_eq!(program.collective, collective);
            assert!(to_xml(&program).contains(&format!("coll=\"{}\"", collective_name(collective))));
        }
        assert_eq!(collective_name(Collective::ReduceScatter), "reducescatter");
        // Gpus and thread blocks in any order: they are placed by id.
        let gpu_3_start = RING_ALLGATHER_INPLACE.find(r#"  <gpu id="3""#).expect("gpu 3");
        let gpu_0_start = RING_ALLGATHER_INPLACE.find(r#"  <gpu id="0""#).expect("gpu 0");
        let gpu_1_start = RING_ALLGATHER_INPLACE.find(r#"  <gpu id="1""#).expect("gpu 1");
        let end = RING_ALLGATHER_INPLACE.find("</algo>").expect("end");
        let shuffled = format!(
            "{}{}{}{}",
            &RING_ALLGATHER_INPLACE[..gpu_0_start],
            &RING_ALLGATHER_INPLACE[gpu_3_start..end],
            &RING_ALLGATHER_INPLACE[gpu_0_start..gpu_3_start],
            &RING_ALLGATHER_INPLACE[end..]
        );
        assert!(shuffled.find(r#"<gpu id="3""#) < Some(gpu_1_start));
        assert_eq!(parse(&shuffled), reference);
    }

    #[test]
    fn long_thread_blocks_parse_and_check_without_recursion() {
        // Two ranks passing one chunk back and forth 10 000 times: the deadlock search walks a path
        // of 40 000 steps, and every element's line is looked up.
        let rank = |first: &str, second: &str| {
            let steps: String = (0..20_000)
                .map(|s| {
                    let kind = if s % 2 == 0 { first } else { second };
                    format!("<step s=\"{s}\" type=\"{kind}\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n")
                })
                .collect();
            steps
        };
        let xml = format!(
            "<algo name=\"pingpong\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"2\" coll=\"allreduce\" inplace=\"1\">\n\
             <gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n{}</tb></gpu>\n\
             <gpu id=\"1\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\"><tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n{}</tb></gpu>\n</algo>\n",
            rank("s", "r"),
            rank("r", "s")
        );
        let program = parse(&xml);
        assert_eq!(program.ranks[1].thread_blocks[0].steps.len(), 20_000);
        let last_line = u32::try_from(xml.lines().count()).expect("few lines");
        let error =
            from_xml_str(&xml.replace(r#"<step s="19999" type="s""#, r#"<step s="19999" type="x""#)).unwrap_err();
        assert!(
            matches!(error, MscclError::UnknownStepType { at: Location { line, .. }, .. } if line == last_line - 2)
        );
    }

    #[test]
    fn c_integers() {
        for (text, value) in [("12", 12), ("-1", -1), ("0x1f", 31), ("0X10", 16), ("017", 15), ("0", 0), (" +7", 7)] {
            assert_eq!(parse_c_integer(text), Some(value), "{text}");
        }
        for text in ["", "-", "12abc", "08", "0x", "1.5", "99999999999999999999"] {
            assert_eq!(parse_c_integer(text), None, "{text}");
        }
    }

    #[test]
    fn not_xml() {
        let error = from_xml_str("<algo name=\"x\">\n  <gpu></algo>").unwrap_err();
        assert!(matches!(error, MscclError::NotXml { line: 2, .. }), "{error:?}");
        assert_mentions(&error, &["not XML", "2:"]);
    }

    #[test]
    fn root_not_algo() {
        let error = from_xml_str("<!-- x -->\n<algorithm/>").unwrap_err();
        assert_eq!(error, MscclError::RootNotAlgo { line: 2, found: "algorithm".into() });
        assert_mentions(&error, &["line 2", "<algorithm>", "expected <algo>"]);
    }

    #[test]
    fn missing_attribute() {
        let error = error_after(RING_ALLREDUCE, r#" depid="-1" deps="-1" hasdep="0"/>"#, r#" depid="-1" hasdep="0"/>"#);
        assert!(matches!(error, MscclError::MissingAttribute { attribute: "deps", .. }), "{error:?}");
        assert_mentions(&error, &["line 4, gpu 0 tb 0 step 0", "`deps`", "required"]);
        let error = error_after(RING_ALLREDUCE, r#" proto="Simple""#, "");
        assert_mentions(&error, &["line 1, <algo>", "`proto`"]);
    }

    #[test]
    fn bad_integer() {
        let error = error_after(RING_ALLREDUCE, r#"<tb id="0" send="1""#, r#"<tb id="0" send="one""#);
        assert_mentions(&error, &["line 3, gpu 0 tb 0", "`send=\"one\"`", "not an integer", "0x-hex"]);
    }

    #[test]
    fn out_of_range_values() {
        let error = error_after(RING_ALLREDUCE, r#"dstoff="-1" cnt="1""#, r#"dstoff="-2" cnt="1""#);
        assert_mentions(&error, &["gpu 0 tb 0 step 0", "`dstoff=-2`", "expected -1 (none)"]);
        let error = error_after(RING_ALLREDUCE, r#"ngpus="4""#, r#"ngpus="0""#);
        assert_mentions(&error, &["<algo>", "`ngpus=0`", "1 or more"]);
        let error = error_after(RING_ALLREDUCE, r#"hasdep="0""#, r#"hasdep="2""#);
        assert_mentions(&error, &["`hasdep=2`", "0 or 1"]);
        let error = error_after(RING_ALLREDUCE, r#"<gpu id="3""#, r#"<gpu id="4""#);
        assert_mentions(&error, &["<gpu>", "`id=4`", "0..ngpus"]);
    }

    #[test]
    fn negative_channel() {
        let error =
            error_after(ALLTOALL_SCRATCH, r#"send="-1" recv="-1" chan="0""#, r#"send="-1" recv="-1" chan="-1""#);
        assert!(matches!(error, MscclError::NegativeChannel { value: -1, .. }), "{error:?}");
        assert_mentions(&error, &["gpu 0 tb 2", "`chan=-1`", "0 or more"]);
    }

    #[test]
    fn unsupported_collective() {
        for name in ["alltoallv", "send", "recv", "gather", "scatter", "custom", "AllReduce"] {
            let error = error_after(RING_ALLREDUCE, r#"coll="allreduce""#, &format!("coll=\"{name}\""));
            assert_eq!(
                error,
                MscclError::UnsupportedCollective {
                    at: Location { line: 1, element: Element::Algo },
                    name: name.into()
                }
            );
            assert_mentions(
                &error,
                &[name, "not supported", "allreduce, allgather, reducescatter, reduce_scatter, alltoall"],
            );
        }
    }

    #[test]
    fn unknown_protocol() {
        let error = error_after(RING_ALLREDUCE, r#"proto="Simple""#, r#"proto="simple""#);
        assert_mentions(&error, &["`simple`", "Simple, LL, LL128"]);
    }

    #[test]
    fn unknown_step_type() {
        let error = error_after(RING_ALLREDUCE, r#"type="rrs""#, r#"type="ra""#);
        assert!(matches!(error, MscclError::UnknownStepType { .. }), "{error:?}");
        assert_mentions(&error, &["gpu 0 tb 0 step 1", "`ra`", "s, r, rcs, rrs, rrc, rrcs, cpy, re, nop"]);
    }

    #[test]
    fn unknown_buffer() {
        let error = error_after(RING_ALLREDUCE, r#"type="s" srcbuf="i""#, r#"type="s" srcbuf="x""#);
        assert_mentions(&error, &["gpu 0 tb 0 step 0", "`srcbuf=\"x\"`", "i, o, s"]);
    }

    #[test]
    fn gpu_count_and_ids() {
        let error = error_after(RING_ALLREDUCE, r#"ngpus="4""#, r#"ngpus="5""#);
        assert_eq!(error, MscclError::GpuCount { at: Location { line: 1, element: Element::Algo }, ngpus: 5, gpus: 4 });
        let error = error_after(RING_ALLREDUCE, r#"<gpu id="3""#, r#"<gpu id="1""#);
        assert!(matches!(error, MscclError::DuplicateGpu { id: 1, .. }), "{error:?}");
        assert_mentions(&error, &["gpu id 1 appears twice"]);
    }

    #[test]
    fn thread_block_ids_dense_and_unique() {
        let error = error_after(ALLTOALL_SCRATCH, r#"<tb id="2""#, r#"<tb id="3""#);
        assert!(matches!(error, MscclError::ThreadBlockGap { id: 3, count: 3, missing: 2, .. }), "{error:?}");
        assert_mentions(&error, &["gpu 0 tb 3", "0..3", "thread block 2 is missing"]);
        let error = error_after(ALLTOALL_SCRATCH, r#"<tb id="2""#, r#"<tb id="0""#);
        assert!(matches!(error, MscclError::DuplicateThreadBlock { id: 0, .. }), "{error:?}");
        assert_mentions(&error, &["gpu 0 tb 0", "tb id 0 appears twice", "0..3 once"]);
        // The gap is found wherever the id out of range stands.
        let shuffled = ALLTOALL_SCRATCH.replacen(r#"<tb id="0""#, r#"<tb id="5""#, 1).replacen(
            r#"<tb id="2""#,
            r#"<tb id="0""#,
            1,
        );
        let error = from_xml_str(&shuffled).unwrap_err();
        assert!(matches!(error, MscclError::ThreadBlockGap { id: 5, missing: 2, .. }), "{error:?}");
    }

    #[test]
    fn step_number_must_be_the_position() {
        let error = error_after(RING_ALLREDUCE, r#"<step s="1""#, r#"<step s="2""#);
        assert_eq!(
            error,
            MscclError::StepNumber {
                at: Location { line: 5, element: Element::Step { gpu: 0, tb: 0, step: 1 } },
                s: 2,
                position: 1
            }
        );
        assert_mentions(&error, &["`s=2`", "position 1", "expected s=1"]);
    }

    #[test]
    fn peers_must_be_other_ranks() {
        let error = error_after(RING_ALLREDUCE, r#"<tb id="0" send="1""#, r#"<tb id="0" send="0""#);
        assert_mentions(&error, &["rank 0 tb 0", "send peer 0", "0..4 other than 0"]);
        let error = error_after(RING_ALLREDUCE, r#"<tb id="0" send="1" recv="3""#, r#"<tb id="0" send="1" recv="4""#);
        assert_mentions(&error, &["rank 0 tb 0", "recv peer 4"]);
    }

    #[test]
    fn sending_and_receiving_steps_need_peers() {
        let error = error_after(RING_ALLREDUCE, r#"<tb id="0" send="1""#, r#"<tb id="0" send="-1""#);
        assert_mentions(&error, &["rank 0 tb 0 step 0", "`s` sends", "no send peer"]);
        let error = error_after(RING_ALLREDUCE, r#"send="1" recv="3""#, r#"send="1" recv="-1""#);
        assert_mentions(&error, &["rank 0 tb 0 step 1", "`rrs` receives", "no recv peer"]);
    }

    #[test]
    fn from_file_names_the_file() {
        let missing = Path::new("/nonexistent/kernbench/ring.xml");
        assert_mentions(&from_file(missing).unwrap_err(), &["cannot read MSCCL-IR file", "ring.xml"]);
        let path = std::env::temp_dir().join(format!("kernbench-msccl-{}.xml", std::process::id()));
        std::fs::write(&path, RING_ALLREDUCE.replace(r#"type="rrs""#, r#"type="bad""#)).expect("temp file");
        let error = from_file(&path).unwrap_err();
        std::fs::remove_file(&path).expect("temp file");
        assert!(matches!(error, MscclError::InFile { .. }));
        assert_mentions(&error, &["in MSCCL-IR file", "kernbench-msccl-", "`bad`"]);
        std::fs::write(&path, RING_ALLREDUCE).expect("temp file");
        let program = from_file(&path);
        std::fs::remove_file(&path).expect("temp file");
        assert_eq!(program, Ok(parse(RING_ALLREDUCE)));
    }

    #[test]
    fn rccl_refuses_the_receive_and_compute_steps() {
        let refused = refusals(&parse(RING_ALLREDUCE));
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].executor, Executor::Rccl);
        assert_mentions(&refused[0].reason, &["rank 0 tb 0 step 1 is `rrs`", "fullOps=false"]);
        assert_eq!(refusals(&parse(ALLTOALL_SCRATCH)), []);
        assert_eq!(refusals(&parse(TWO_RING_ALLREDUCE)), []);
    }

    #[test]
    fn step_and_thread_block_limits() {
        let mut program = parse(ALLTOALL_SCRATCH);
        let copy = program.ranks[1].thread_blocks[2].steps[0].clone();
        program.ranks[1].thread_blocks[2].steps.resize(65, copy);
        let refused = refusals(&program);
        let executors: Vec<_> = refused.iter().map(|refusal| refusal.executor).collect();
        assert_eq!(executors, [Executor::Rccl, Executor::MscclExecutorNccl]);
        assert_mentions(&refused[0].reason, &["rank 1 tb 2 has 65 steps", "at most 64"]);

        let mut program = parse(ALLTOALL_SCRATCH);
        let local = program.ranks[0].thread_blocks[2].clone();
        program.ranks[0].thread_blocks.resize(217, local);
        let refused = refusals(&program);
        let executors: Vec<_> = refused.iter().map(|refusal| refusal.executor).collect();
        assert_eq!(executors, [Executor::Rccl, Executor::OldMsccl]);
        assert_mentions(&refused[1].reason, &["rank 0 has 217 thread blocks", "at most 216"]);
    }

    #[test]
    fn counts_of_72_and_more_are_refused_by_the_new_readers() {
        let mut program = parse(ALLTOALL_SCRATCH);
        for rank in &mut program.ranks {
            rank.input_chunks = 72;
            rank.output_chunks = 72;
            rank.thread_blocks[2].steps[0].count = 72;
        }
        program.chunks = 72;
        let refused = refusals(&program);
        let executors: Vec<_> = refused.iter().map(|refusal| refusal.executor).collect();
        assert_eq!(executors, [Executor::Rccl, Executor::MscclExecutorNccl]);
        assert_mentions(&refused[0].reason, &["rank 0 tb 2 step 0 has cnt=72", "at most 71"]);
    }

    #[test]
    fn old_msccl_checks_an_allgather_input_against_n() {
        let old_msccl = |program: &Program| {
            refusals(program).into_iter().filter(|refusal| refusal.executor == Executor::OldMsccl).collect::<Vec<_>>()
        };
        let mut program = parse(RING_ALLGATHER_INPLACE);
        assert_eq!(old_msccl(&program), []);
        program.ranks[2].input_chunks = 2;
        let refused = old_msccl(&program);
        assert_eq!(refused.len(), 1);
        assert_mentions(&refused[0].reason, &["rank 2 has i_chunks=2", "4 / 4"]);
        program.ranks[2].input_chunks = 1;
        assert_eq!(old_msccl(&program), [], "N / ngpus is valid");
    }

    #[test]
    fn names_are_escaped_on_export() {
        let mut program = parse(RING_ALLGATHER_INPLACE);
        program.name = "a<b & \"c\"".into();
        assert!(to_xml(&program).contains(r#"name="a&lt;b &amp; &quot;c&quot;""#));
        assert_eq!(from_xml_str(&to_xml(&program)), Ok(program));
    }
}

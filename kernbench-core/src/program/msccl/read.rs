//! Reading MSCCL-IR: the document's elements and attributes into a [`Program`], with every error
//! naming its line, element and attribute.

use std::path::Path;

use super::{BUFFERS, COLLECTIVES, Element, Location, MscclError, PROTOCOLS};
use crate::kernel::Buffer;
use crate::program::check::check;
use crate::program::{ChunkRef, Program, RankProgram, Step, StepKind, ThreadBlock};

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
pub(super) fn parse_c_integer(text: &str) -> Option<i64> {
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

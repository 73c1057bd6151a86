//! Writing MSCCL-IR as msccl-tools writes it.

use super::{buffer_name, collective_name};
use crate::kernel::Buffer;
use crate::program::{ChunkRef, Program, Step, StepKind};

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

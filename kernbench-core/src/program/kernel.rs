//! Running a chunk program as a kernel: each thread block of a rank is a lane of its PE, which walks its
//! step list once per slice, as the MSCCL executor does.
//!
//! - Buffers: `i` and `o` are the PE's input and output, `s` its scratch (made by the first lane to
//!   run). In-place programs alias them as the executor does: for all-reduce and all-to-all `i` is
//!   `o`; for all-gather `i` is the rank's block of `o`; for reduce-scatter `o` is the rank's block of
//!   `i` (kept in scratch, copied to the output at the end).
//! - Messages: a thread block sends to rank `send` and receives from rank `recv` over the `full`
//!   topology's `peer<j>` links, on its channel; one message per step and slice.
//! - Dependencies: a thread block publishes its progress on the PE's signal `DEPENDENCY + its id` after
//!   each step others wait on, and a step waits for the progress it depends on, counted in slices and
//!   steps, so that a wait is satisfied by any later step too (the executor's flags).
//! - The end: lane 0 waits for the others, then does what the collective needs once (an in-place
//!   reduce-scatter's copy, an average's division) and resets the signals.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::collective::Collective;
use crate::kernel::{ArgsError, Buffer, KernelDef, KernelError, KernelFuture, Launch, ParamDef, Params, Tl};
use crate::machine::Direction;
use crate::program::{ChunkRef, Program, Protocol, Step, StepKind, msccl};
use crate::tile::{Dtype, ReduceOp, Tile};

/// The PE signal the lanes raise when they finish.
const FINISHED: usize = 0;
/// The PE signal of thread block 0's progress; thread block `t` uses `DEPENDENCY + t`.
const DEPENDENCY: usize = 1;

/// The kernel a registry names to run an MSCCL-IR XML file: `{"kernel": "msccl_program", "params":
/// {"file": "ring.xml"}}` (a path relative to the working directory), on the `full` topology.
pub static MSCCL_PROGRAM: KernelDef = KernelDef {
    name: "msccl_program",
    params: &[ParamDef { name: "file", ty: "String", default: None }],
    summary: "runs an MSCCL-IR XML file: its thread blocks as lanes, its steps slice by slice",
    instantiate: bind_file,
};

fn bind_file(params: &Params) -> Result<Arc<dyn Launch>, ArgsError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Args {
        file: String,
    }
    let def = &MSCCL_PROGRAM;
    let args: Args = serde_json::from_value(serde_json::Value::Object(params.clone()))
        .map_err(|e| ArgsError::new(def.name, def.params, e))?;
    let program = msccl::from_file(Path::new(&args.file)).map_err(|e| ArgsError::new(def.name, def.params, e))?;
    Ok(Arc::new(ProgramKernel::new(Arc::new(program))))
}

/// A chunk program bound as a kernel: lanes are thread blocks.
#[derive(Clone, Debug)]
pub struct ProgramKernel {
    program: Arc<Program>,
}

impl ProgramKernel {
    /// The kernel that runs `program`.
    pub fn new(program: Arc<Program>) -> ProgramKernel {
        ProgramKernel { program }
    }

    /// The program it runs.
    pub fn program(&self) -> &Program {
        &self.program
    }
}

impl Launch for ProgramKernel {
    fn launch(&self, tl: Tl) -> KernelFuture {
        let program = Arc::clone(&self.program);
        Box::pin(async move { run_lane(&program, &tl).await })
    }

    fn lanes(&self, rank: usize, _size: usize) -> usize {
        self.program.ranks.get(rank).map_or(1, |r| r.thread_blocks.len().max(1))
    }

    fn protocol(&self, _size: usize) -> Option<Protocol> {
        Some(self.program.protocol)
    }
}

/// A chunk program made for the number of ranks it runs on (a ring for 4 ranks is not a ring for 8):
/// built once per size, on first use.
pub struct ProgramFamily {
    build: Box<dyn Fn(usize) -> Result<Program, String> + Send + Sync>,
    built: Mutex<BTreeMap<usize, Result<Arc<Program>, String>>>,
}

impl ProgramFamily {
    /// The family whose program for `n` ranks `build(n)` makes (or says why it cannot).
    pub fn new(build: impl Fn(usize) -> Result<Program, String> + Send + Sync + 'static) -> ProgramFamily {
        ProgramFamily { build: Box::new(build), built: Mutex::new(BTreeMap::new()) }
    }

    /// Its program for `n` ranks.
    ///
    /// # Errors
    /// Why it has none, as its builder says.
    pub fn program(&self, n: usize) -> Result<Arc<Program>, String> {
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        built.entry(n).or_insert_with(|| (self.build)(n).map(Arc::new)).clone()
    }
}

impl fmt::Debug for ProgramFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProgramFamily").finish_non_exhaustive()
    }
}

impl Launch for ProgramFamily {
    fn launch(&self, tl: Tl) -> KernelFuture {
        let program = self.program(tl.size());
        Box::pin(async move {
            match program {
                Ok(program) => run_lane(&program, &tl).await,
                Err(why) => Err(KernelError::kernel(tl.pe(), why)),
            }
        })
    }

    fn lanes(&self, rank: usize, size: usize) -> usize {
        self.program(size).ok().and_then(|p| p.ranks.get(rank).map(|r| r.thread_blocks.len().max(1))).unwrap_or(1)
    }

    fn protocol(&self, size: usize) -> Option<Protocol> {
        self.program(size).ok().map(|p| p.protocol)
    }
}

/// Where a rank's chunks live in its PE's buffers, for one run.
///
/// A rank's chunks are `chunk` elements each. When they do not divide its data and the collective's
/// data is one block (all-reduce, broadcast, reduce), the input and output are *staged*: worked on
/// in scratch, padded to whole chunks, and the output copied out at the end. The copies in and out
/// cost their time, and the padding moves with the chunks, but it never reaches the output. An
/// in-place reduce-scatter is staged too, its output being a block of its input.
struct Layout {
    /// Elements per chunk.
    chunk: usize,
    /// Elements of each chunk a thread block moves per pass of its list.
    pass: usize,
    /// Elements of each chunk a step moves per message.
    slice: usize,
    dtype: Dtype,
    /// Chunks of the program's own scratch: staged input and output come after them.
    scratch_chunks: usize,
    /// Chunks of input and output, in `N` chunks.
    input_chunks: usize,
    output_chunks: usize,
    /// Whether input and output are worked on in scratch.
    staged: bool,
    /// The rank's block of `N` chunks, for in-place all-gather and reduce-scatter.
    block_chunks: usize,
    collective: Collective,
    in_place: bool,
    rank: usize,
}

/// A run of a rank's data as the program sees it, before it is placed in a PE buffer.
#[derive(Clone, Copy)]
enum Region {
    Input,
    Output,
    Scratch,
}

impl Layout {
    fn new(program: &Program, tl: &Tl) -> Result<Layout, KernelError> {
        let (rank, n) = (tl.rank(), tl.size());
        let pe = tl.pe();
        if program.ranks.len() != n {
            let message =
                format!("the program `{}` is for {} ranks, the run has {n}", program.name, program.ranks.len());
            return Err(KernelError::kernel(pe, message));
        }
        let input = tl.buffer_len(Buffer::Input)?;
        let output = tl.buffer_len(Buffer::Output)?;
        let dtype = tl.load_slice(Buffer::Input, 0, 0)?.dtype();
        let elements = input.max(output);
        let chunks = program.chunks.max(1);
        let one_block =
            matches!(program.collective, Collective::AllReduce | Collective::Broadcast | Collective::Reduce);
        if elements % chunks != 0 && !one_block {
            let message = format!(
                "the program `{}` cuts the {elements} elements of a rank into {chunks} chunks: an {} needs a multiple of {chunks} elements",
                program.name, program.collective
            );
            return Err(KernelError::kernel(pe, message));
        }
        let chunk = elements.div_ceil(chunks);
        let elements_of = |bytes: usize| (bytes / dtype.size()).max(1);
        let in_chunks = |len: usize| if chunk == 0 { 0 } else { len.div_ceil(chunk) };
        Ok(Layout {
            chunk,
            pass: elements_of(program.protocol.pass_bytes()),
            slice: elements_of(program.protocol.slice_bytes()),
            dtype,
            scratch_chunks: program.ranks[rank].scratch_chunks,
            input_chunks: in_chunks(input).max(program.ranks[rank].input_chunks),
            output_chunks: in_chunks(output).max(program.ranks[rank].output_chunks),
            staged: elements % chunks != 0 || (program.in_place && program.collective == Collective::ReduceScatter),
            block_chunks: chunks / n.max(1),
            collective: program.collective,
            in_place: program.in_place,
            rank,
        })
    }

    /// Scratch elements: the program's scratch, staged input and output, and one element more, so
    /// that a scratch of 0 chunks is still told apart from none.
    fn scratch_len(&self) -> usize {
        let staged = if self.staged { self.input_chunks + self.output_chunks } else { 0 };
        (self.scratch_chunks + staged) * self.chunk + 1
    }

    /// Where `region`'s chunk `index` lives: its PE buffer and chunk index there.
    fn place(&self, region: Region, index: usize) -> (Buffer, usize) {
        match (region, self.staged) {
            (Region::Scratch, _) => (Buffer::Scratch, index),
            (Region::Input, true) => (Buffer::Scratch, self.scratch_chunks + index),
            (Region::Output, true) => (Buffer::Scratch, self.scratch_chunks + self.input_chunks + index),
            (Region::Input, false) => (Buffer::Input, index),
            (Region::Output, false) => (Buffer::Output, index),
        }
    }

    /// The PE buffer and chunk index that `r` names, after in-place aliasing.
    fn resolve(&self, r: ChunkRef) -> (Buffer, usize) {
        let own_block = self.rank * self.block_chunks;
        let (region, index) = match (self.in_place, self.collective, r.buffer) {
            (_, _, Buffer::Scratch) => (Region::Scratch, r.index),
            (true, Collective::AllGather, Buffer::Input) => (Region::Output, own_block + r.index),
            (true, Collective::ReduceScatter, Buffer::Input) => (Region::Input, r.index),
            (true, Collective::ReduceScatter, Buffer::Output) => (Region::Input, own_block + r.index),
            (true, _, _) => (Region::Output, r.index),
            (false, _, Buffer::Input) => (Region::Input, r.index),
            (false, _, Buffer::Output) => (Region::Output, r.index),
        };
        self.place(region, index)
    }

    /// The element ranges of `count` chunks from `r` within slice `window` of each chunk.
    fn pieces(&self, r: ChunkRef, count: usize, window: &std::ops::Range<usize>) -> (Buffer, Vec<(usize, usize)>) {
        let (buffer, first) = self.resolve(r);
        let pieces = (first..first + count).map(|c| (c * self.chunk + window.start, window.len())).collect();
        (buffer, pieces)
    }

    /// Sets the PE's buffers up before any lane moves data: scratch, staged copies, in-place aliases.
    fn set_up(&self, tl: &Tl) -> Result<(), KernelError> {
        tl.store(Buffer::Scratch, &tl.zeros(self.dtype, self.scratch_len())?)?;
        if !(self.staged || self.in_place) {
            return Ok(());
        }
        let input = tl.load(Buffer::Input)?;
        let put = |region: Region, index: usize, tile: &Tile| {
            let (buffer, chunk) = self.place(region, index);
            tl.store_at(buffer, chunk * self.chunk, tile)
        };
        if self.staged {
            put(Region::Input, 0, &input)?;
            put(Region::Output, 0, &tl.load(Buffer::Output)?)?;
        }
        if self.in_place {
            match self.collective {
                Collective::AllGather => put(Region::Output, self.rank * self.block_chunks, &input)?,
                // Its data is its input, staged above.
                Collective::ReduceScatter => {}
                _ => put(Region::Output, 0, &input)?,
            }
        }
        Ok(())
    }

    /// Copies a staged output out to the PE's output buffer, once every lane has finished.
    fn finish(&self, tl: &Tl) -> Result<(), KernelError> {
        if !self.staged {
            return Ok(());
        }
        let (region, index) = if self.in_place && self.collective == Collective::ReduceScatter {
            (Region::Input, self.rank * self.block_chunks)
        } else {
            (Region::Output, 0)
        };
        let (buffer, chunk) = self.place(region, index);
        let len = tl.buffer_len(Buffer::Output)?;
        tl.store(Buffer::Output, &tl.load_slice(buffer, chunk * self.chunk, len)?)
    }
}

/// The chunks `r` names, read within the slice.
fn read(
    tl: &Tl,
    layout: &Layout,
    r: ChunkRef,
    count: usize,
    window: &std::ops::Range<usize>,
) -> Result<Tile, KernelError> {
    let (buffer, pieces) = layout.pieces(r, count, window);
    let tiles = pieces.iter().map(|&(start, len)| tl.load_slice(buffer, start, len)).collect::<Result<Vec<_>, _>>()?;
    match tiles.len() {
        0 => tl.zeros(layout.dtype, 0),
        1 => Ok(tiles.into_iter().next().expect("one tile")),
        _ => tl.concat(&tiles),
    }
}

/// Writes `tile` into the chunks `r` names, within the slice.
fn write(
    tl: &Tl,
    layout: &Layout,
    r: ChunkRef,
    count: usize,
    window: &std::ops::Range<usize>,
    tile: &Tile,
) -> Result<(), KernelError> {
    let (buffer, pieces) = layout.pieces(r, count, window);
    let mut at = 0;
    for (start, len) in pieces {
        tl.store_at(buffer, start, &tl.slice(tile, at, len)?)?;
        at += len;
    }
    Ok(())
}

fn missing(tl: &Tl, step: &Step, what: &str) -> KernelError {
    KernelError::kernel(tl.pe(), format!("a `{}` step has no {what} chunk", step.kind))
}

/// One lane of one rank: its thread block's steps, slice by slice.
async fn run_lane(program: &Program, tl: &Tl) -> Result<(), KernelError> {
    let layout = Layout::new(program, tl)?;
    let (rank, lane, op) = (tl.rank(), tl.lane(), tl.op());
    let rank_program = &program.ranks[rank];
    if tl.buffer_len(Buffer::Scratch)? == 0 {
        // The first lane of the PE to run sets its buffers up, before any lane moves data.
        layout.set_up(tl)?;
    }
    if let Some(tb) = rank_program.thread_blocks.get(lane) {
        let passes = layout.chunk.div_ceil(layout.pass).max(1);
        let mut published = 0u64;
        for pass in 0..passes {
            let window = pass * layout.pass..((pass + 1) * layout.pass).min(layout.chunk);
            for (index, step) in tb.steps.iter().enumerate() {
                if let Some((other, at)) = step.depends_on {
                    let steps = rank_program.thread_blocks.get(other).map_or(0, |t| t.steps.len());
                    tl.wait_until(DEPENDENCY + other, (pass * steps + at + 1) as u64).await?;
                }
                run_step(tl, &layout, tb.send, tb.recv, tb.channel, step, &window, op).await?;
                if step.has_dependents {
                    let progress = (pass * tb.steps.len() + index + 1) as u64;
                    tl.signal(rank, DEPENDENCY + lane, progress - published)?;
                    published = progress;
                }
            }
        }
    }
    let lanes = tl.lanes();
    if lane != 0 {
        tl.signal(rank, FINISHED, 1)?;
        return Ok(());
    }
    tl.wait_until(FINISHED, (lanes - 1) as u64).await?;
    layout.finish(tl)?;
    if op == ReduceOp::Avg
        && matches!(program.collective, Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce)
    {
        let mut output = tl.load(Buffer::Output)?;
        tl.finish(&mut output, op, tl.size())?;
        tl.store(Buffer::Output, &output)?;
    }
    // Every wait on them is over: the signals end where they began.
    tl.reset_signal(FINISHED)?;
    for tb in 0..rank_program.thread_blocks.len() {
        tl.reset_signal(DEPENDENCY + tb)?;
    }
    Ok(())
}

/// One step on one pass: slice by slice, each received, combined, stored and forwarded before the
/// next is awaited.
#[allow(clippy::too_many_arguments)]
async fn run_step(
    tl: &Tl,
    layout: &Layout,
    send: Option<usize>,
    recv: Option<usize>,
    channel: usize,
    step: &Step,
    window: &std::ops::Range<usize>,
    op: ReduceOp,
) -> Result<(), KernelError> {
    if step.kind == StepKind::Nop {
        return Ok(());
    }
    // The peers the step talks to, found once for all its slices.
    let peer = |uses: bool, rank: Option<usize>, what: &str| -> Result<Option<Direction>, KernelError> {
        if !uses {
            return Ok(None);
        }
        let missing =
            || KernelError::kernel(tl.pe(), format!("a `{}` step on a thread block with no {what} peer", step.kind));
        rank.map(|r| Some(Direction::Peer(r as u32))).ok_or_else(missing)
    };
    let peers = (peer(step.kind.sends(), send, "send")?, peer(step.kind.receives(), recv, "receive")?);
    // Local steps move the pass at once; steps that talk move it slice by slice.
    let slice = if step.kind.sends() || step.kind.receives() { layout.slice } else { window.len().max(1) };
    let mut start = window.start;
    loop {
        let part = start..(start + slice).min(window.end);
        run_slice(tl, layout, peers, channel, step, &part, op).await?;
        start = part.end;
        if start >= window.end {
            return Ok(());
        }
    }
}

/// One step on one slice of each of its chunks.
async fn run_slice(
    tl: &Tl,
    layout: &Layout,
    (send, recv): (Option<Direction>, Option<Direction>),
    channel: usize,
    step: &Step,
    part: &std::ops::Range<usize>,
    op: ReduceOp,
) -> Result<(), KernelError> {
    let count = step.count;
    let src = || step.src.ok_or_else(|| missing(tl, step, "source"));
    let dst = || step.dst.ok_or_else(|| missing(tl, step, "destination"));
    let received = match recv {
        Some(from) => Some(tl.recv_on(from, channel, count * part.len(), layout.dtype).await?),
        None => None,
    };
    let value = match (step.kind, received) {
        (StepKind::Send | StepKind::Copy, _) => read(tl, layout, src()?, count, part)?,
        (StepKind::Reduce, _) => {
            let mut acc = read(tl, layout, dst()?, count, part)?;
            tl.reduce(&mut acc, &read(tl, layout, src()?, count, part)?, op)?;
            acc
        }
        (StepKind::RecvReduceSend | StepKind::RecvReduceCopy | StepKind::RecvReduceCopySend, Some(mut got)) => {
            tl.reduce(&mut got, &read(tl, layout, src()?, count, part)?, op)?;
            got
        }
        // `Recv` and `RecvCopySend`: what arrived (every receiving kind has received by now).
        (_, got) => got.ok_or_else(|| missing(tl, step, "received"))?,
    };
    if step.kind.writes_dst() {
        write(tl, layout, dst()?, count, part, &value)?;
    }
    if let Some(to) = send {
        tl.send_on(to, channel, &value).await?;
    }
    Ok(())
}

//! Which real MSCCL executors would refuse a program, and why: their limits beyond what every
//! program must satisfy.

use std::fmt;

use crate::collective::Collective;
use crate::program::{Program, RankProgram, StepKind, ThreadBlock};

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

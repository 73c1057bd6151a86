//! Chunk programs written in Rust with the MSCCLang-style builder: each misuse of a chunk is an error
//! at the offending line, the lowering fuses receives with the sends that forward them, and the
//! example algorithms pass `check`, hold their postconditions on the mock runtime, survive a round
//! trip through MSCCL-IR XML, and take time comparable to the shipped Rust ring kernel.

use std::sync::Arc;

use kernbench::algorithms as alg;
use kernbench::prelude::*;
use kernbench::program::{
    BuildError, ChunkError, OpKind, Program, ProgramBuilder, ProgramKernel, StepKind, check, examples, msccl,
};
use kernbench::sim::testing::MockRun;
use kernbench::sim::{Call, PeBuffers, Runtime};
use kernbench::{Collective, InstallPlan, System};
use serde_json::json;

use crate::programs::run;

/// `program` passes `check`, comes back equal from MSCCL-IR XML, and holds its postcondition for
/// every dtype and for sum, max and average (all-gather and all-to-all, which do not reduce, once).
fn assert_runs_correctly(program: &Program) {
    check(program).unwrap_or_else(|e| panic!("{}: {e}", program.name));
    let xml = msccl::to_xml(program);
    assert_eq!(&msccl::from_xml_str(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}")), program, "{xml}");
    let n = program.ranks.len();
    let system = System::shape(n, 1, 1, 1).unwrap();
    // Whole chunks: an all-gather contributes its part of them.
    let elements = match program.collective {
        Collective::AllGather => program.chunks / n * 3,
        _ => program.chunks * 3,
    };
    let reduces = matches!(program.collective, Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce);
    let ops: &[ReduceOp] = if reduces { &[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg] } else { &[ReduceOp::Sum] };
    for dtype in Dtype::ALL {
        for &op in ops {
            let (_, held) = run(&system, program, dtype, elements, op);
            assert!(held, "{}: {dtype} {op}", program.name);
        }
    }
}

/// The kinds of the steps of one thread block.
fn kinds(program: &Program, rank: usize, tb: usize) -> Vec<StepKind> {
    program.ranks[rank].thread_blocks[tb].steps.iter().map(|s| s.kind).collect()
}

// Errors, each at the call that makes it.

#[test]
fn a_stale_handle_is_an_error_where_it_is_used_naming_the_overwriting_op() {
    let mut p = ProgramBuilder::new("stale", Collective::AllReduce, 2, 2, false).unwrap();
    let mine = p.chunk(0, Buffer::Input, 0, 1).unwrap();
    let theirs = p.chunk(1, Buffer::Input, 0, 1).unwrap();
    let (sum, reduced_at) = (p.reduce(&mine, &theirs).unwrap(), line!());
    let (error, used_at) = (p.copy(&mine, 1, Buffer::Output, 0).unwrap_err(), line!());
    let ChunkError::Stale { at, rank: 0, buffer: Buffer::Input, index: 0, op: OpKind::Reduce, by } = error else {
        panic!("{error:?}")
    };
    assert_eq!((at.file, at.line), (file!(), used_at), "{error}");
    assert_eq!((by.file, by.line), (file!(), reduced_at), "{error}");
    let text = error.to_string();
    assert!(text.starts_with(&format!("{}:{used_at}:", file!())), "{text}");
    assert!(text.contains(&format!("the reduce at {}:{reduced_at}:", file!())), "{text}");
    // The handle the reduce returned is current, and so is a new one.
    p.copy(&sum, 1, Buffer::Output, 0).unwrap();
    p.copy(&p.chunk(0, Buffer::Input, 0, 1).unwrap(), 0, Buffer::Output, 0).unwrap();
    // A copy makes the destination's older handles stale too.
    let out = p.chunk(1, Buffer::Output, 0, 1).unwrap();
    let again = p.chunk(0, Buffer::Input, 1, 1).unwrap();
    let copied_at = line!() + 1;
    p.copy(&again, 1, Buffer::Output, 0).unwrap();
    let (error, used_at) = (p.reduce(&out, &again).unwrap_err(), line!());
    assert!(matches!(error, ChunkError::Stale { op: OpKind::Copy, by, .. } if by.line == copied_at), "{error}");
    assert_eq!(error.at().line, used_at);
}

#[test]
fn output_and_scratch_chunks_that_nothing_wrote_are_errors_where_they_are_taken() {
    let mut p = ProgramBuilder::new("uninitialised", Collective::AllReduce, 2, 4, false).unwrap();
    let (error, line) = (p.chunk(1, Buffer::Output, 2, 1).unwrap_err(), line!());
    assert_eq!(error, ChunkError::Uninitialised { at: error.at(), rank: 1, buffer: Buffer::Output, index: 2 });
    assert_eq!((error.at().file, error.at().line), (file!(), line));
    assert!(error.to_string().contains("chunk 2 of rank 1's output buffer holds nothing"), "{error}");
    // Scratch chunk 0 written; chunks 0..2 are not all written, and the error names the first that
    // is not.
    let input = p.chunk(0, Buffer::Input, 0, 1).unwrap();
    p.copy(&input, 1, Buffer::Scratch, 0).unwrap();
    p.chunk(1, Buffer::Scratch, 0, 1).unwrap();
    let (error, line) = (p.chunk(1, Buffer::Scratch, 0, 2).unwrap_err(), line!());
    assert_eq!(error, ChunkError::Uninitialised { at: error.at(), rank: 1, buffer: Buffer::Scratch, index: 1 });
    assert_eq!(error.at().line, line);
    // Rank 0's scratch is still empty: scratch is per rank.
    assert!(matches!(p.chunk(0, Buffer::Scratch, 0, 1), Err(ChunkError::Uninitialised { rank: 0, .. })));
}

#[test]
fn in_place_aliases_count_as_initialised() {
    // All-reduce in place: the output is the input.
    let p = ProgramBuilder::new("ar", Collective::AllReduce, 2, 2, true).unwrap();
    p.chunk(1, Buffer::Output, 1, 1).unwrap();
    // All-gather in place: the input is block `rank` of the output, the rest is empty.
    let p = ProgramBuilder::new("ag", Collective::AllGather, 3, 6, true).unwrap();
    p.chunk(2, Buffer::Output, 4, 2).unwrap();
    assert!(matches!(p.chunk(2, Buffer::Output, 3, 2), Err(ChunkError::Uninitialised { index: 3, .. })));
    // Out of place it is empty.
    let p = ProgramBuilder::new("ag", Collective::AllGather, 3, 6, false).unwrap();
    assert!(matches!(p.chunk(2, Buffer::Output, 4, 1), Err(ChunkError::Uninitialised { index: 4, .. })));
    // Reduce-scatter in place: the output is block `rank` of the input.
    let mut p = ProgramBuilder::new("rs", Collective::ReduceScatter, 2, 4, true).unwrap();
    let out = p.chunk(1, Buffer::Output, 0, 2).unwrap();
    let (error, line) = (p.copy(&out, 1, Buffer::Input, 1).unwrap_err(), line!());
    assert_eq!(error, ChunkError::Overlap { at: error.at(), rank: 1, buffer: Buffer::Input, index: 2 });
    assert_eq!(error.at().line, line);
}

#[test]
fn chunks_out_of_range_name_the_buffer_size() {
    let mut p = ProgramBuilder::new("range", Collective::AllGather, 4, 8, false).unwrap();
    // All-gather: the input has N / ranks = 2 chunks, the output 8.
    let (error, line) = (p.chunk(3, Buffer::Input, 1, 2).unwrap_err(), line!());
    let expected =
        ChunkError::OutOfRange { at: error.at(), rank: 3, buffer: Buffer::Input, index: 1, count: 2, size: 2 };
    assert_eq!(error, expected);
    assert_eq!(error.at().line, line);
    assert!(error.to_string().contains("chunks 1..3 of rank 3's input buffer are out of range: it has 2 chunks"));
    let input = p.chunk(3, Buffer::Input, 0, 2).unwrap();
    let (error, line) = (p.copy(&input, 0, Buffer::Output, 7).unwrap_err(), line!());
    assert!(matches!(error, ChunkError::OutOfRange { size: 8, index: 7, count: 2, .. }), "{error}");
    assert_eq!(error.at().line, line);
    let (error, line) = (p.chunk(0, Buffer::Input, 0, 0).unwrap_err(), line!());
    assert!(matches!(error, ChunkError::OutOfRange { count: 0, .. }), "{error}");
    assert_eq!(error.at().line, line);
    let (error, line) = (p.copy(&input, 4, Buffer::Output, 0).unwrap_err(), line!());
    assert_eq!(error, ChunkError::RankOutOfRange { at: error.at(), rank: 4, ranks: 4 });
    assert_eq!(error.at().line, line);
    // Reduce-scatter: the output has N / ranks chunks.
    let p = ProgramBuilder::new("range", Collective::ReduceScatter, 4, 8, false).unwrap();
    assert!(matches!(p.chunk(0, Buffer::Output, 2, 1), Err(ChunkError::OutOfRange { size: 2, .. })));
}

#[test]
fn a_reduce_of_different_counts_or_of_a_run_with_itself_is_an_error() {
    let mut p = ProgramBuilder::new("reduce", Collective::AllReduce, 2, 4, false).unwrap();
    let two = p.chunk(0, Buffer::Input, 0, 2).unwrap();
    let one = p.chunk(1, Buffer::Input, 0, 1).unwrap();
    let (error, line) = (p.reduce(&two, &one).unwrap_err(), line!());
    assert_eq!(error, ChunkError::CountMismatch { at: error.at(), into: 2, other: 1 });
    assert_eq!(error.at().line, line);
    let shifted = p.chunk(0, Buffer::Input, 1, 2).unwrap();
    let (error, line) = (p.reduce(&two, &shifted).unwrap_err(), line!());
    assert_eq!(error, ChunkError::Overlap { at: error.at(), rank: 0, buffer: Buffer::Input, index: 1 });
    assert_eq!(error.at().line, line);
}

#[test]
fn build_errors_are_returned_and_chunk_errors_convert() {
    // `?` in a function returning BuildError carries a chunk error with its place.
    fn misuse() -> Result<Program, BuildError> {
        let p = ProgramBuilder::new("misuse", Collective::AllReduce, 2, 2, false).unwrap();
        p.chunk(0, Buffer::Output, 0, 1)?;
        p.build()
    }
    let error = misuse().unwrap_err();
    assert!(matches!(&error, BuildError::Chunk(ChunkError::Uninitialised { .. })), "{error}");
    assert!(error.to_string().starts_with(file!()), "{error}");
    // A program with no operations is a valid (empty) program.
    let empty = ProgramBuilder::new("empty", Collective::AllReduce, 2, 2, false).unwrap().build().unwrap();
    assert!(empty.ranks.iter().all(|r| r.thread_blocks.is_empty()));
}

// Lowering.

#[test]
fn a_builder_ring_lowers_to_the_fused_steps_msccl_writes() {
    let program = examples::ring_allreduce(4, 1).unwrap();
    use StepKind::*;
    for rank in 0..4 {
        let blocks = &program.ranks[rank].thread_blocks;
        assert_eq!(blocks.len(), 2, "rank {rank}: {blocks:?}");
        // Thread block 0: the owner's local copy of its sum to the output, waiting for that sum.
        assert_eq!(kinds(&program, rank, 0), [Copy]);
        assert_eq!((blocks[1].send, blocks[1].recv), (Some((rank + 1) % 4), Some((rank + 3) % 4)));
        let ring = kinds(&program, rank, 1);
        // Each rank starts one chunk (s), forwards two partial sums it never stores (rrs), completes
        // one (rrcs), forwards two sums while storing them (rcs) and stores the last (r); the order
        // within a rank interleaves as the ring's steps do.
        let count = |k: StepKind| ring.iter().filter(|&&x| x == k).count();
        let counts = [Send, RecvReduceSend, RecvReduceCopySend, RecvCopySend, Recv].map(count);
        assert_eq!(counts, [1, 2, 1, 2, 1], "rank {rank}: {ring:?}");
        assert_eq!(*ring.last().unwrap(), Recv, "rank {rank}: {ring:?}");
        let complete = ring.iter().position(|&k| k == RecvReduceCopySend).unwrap();
        assert_eq!(blocks[0].steps[0].depends_on, Some((1, complete)), "rank {rank}");
        assert!(blocks[1].steps[complete].has_dependents);
    }
    // Rank 1 runs exactly the hand-written ring of programs.rs.
    assert_eq!(
        kinds(&program, 1, 1),
        [Send, RecvReduceSend, RecvReduceSend, RecvReduceCopySend, RecvCopySend, RecvCopySend, Recv]
    );
}

#[test]
fn a_receive_whose_value_is_read_later_is_stored_and_one_that_is_only_forwarded_is_not() {
    // Three ranks, out of place: rank 1 adds rank 0's chunk to its own and forwards the sum to rank
    // 2. If rank 1 never reads its chunk again the sum is only forwarded (rrs); if it copies it to
    // its output afterwards, it must store it (rrcs).
    for keep in [false, true] {
        let mut p = ProgramBuilder::new("forward", Collective::AllReduce, 3, 1, false).unwrap();
        let sum =
            p.reduce(&p.chunk(1, Buffer::Input, 0, 1).unwrap(), &p.chunk(0, Buffer::Input, 0, 1).unwrap()).unwrap();
        p.copy(&sum, 2, Buffer::Scratch, 0).unwrap();
        if keep {
            p.copy(&sum, 1, Buffer::Output, 0).unwrap();
        }
        let program = p.build().unwrap();
        let fused = if keep { StepKind::RecvReduceCopySend } else { StepKind::RecvReduceSend };
        let tb = program.ranks[1].thread_blocks.iter().position(|tb| tb.send.is_some()).unwrap();
        assert_eq!(kinds(&program, 1, tb), [fused], "keep {keep}");
    }
    // In place the reduced chunk is the result: stored even when nothing reads it.
    let mut p = ProgramBuilder::new("forward", Collective::AllReduce, 3, 1, true).unwrap();
    let sum = p.reduce(&p.chunk(1, Buffer::Input, 0, 1).unwrap(), &p.chunk(0, Buffer::Input, 0, 1).unwrap()).unwrap();
    p.copy(&sum, 2, Buffer::Scratch, 0).unwrap();
    assert_eq!(kinds(&p.build().unwrap(), 1, 0), [StepKind::RecvReduceCopySend]);
}

#[test]
fn a_forward_that_would_overtake_on_a_connection_is_not_fused() {
    // Rank 1 receives chunks A then C from rank 0, and forwards C then A to rank 2. Fusing A's
    // receive with its forward would either send A before C or receive A after C, against the order
    // the other ranks see; only C's pair fuses.
    let mut p = ProgramBuilder::new("overtake", Collective::AllReduce, 3, 2, false).unwrap();
    let a = p.copy(&p.chunk(0, Buffer::Input, 0, 1).unwrap(), 1, Buffer::Scratch, 0).unwrap();
    let c = p.copy(&p.chunk(0, Buffer::Input, 1, 1).unwrap(), 1, Buffer::Scratch, 1).unwrap();
    p.copy(&c, 2, Buffer::Scratch, 1).unwrap();
    p.copy(&a, 2, Buffer::Scratch, 0).unwrap();
    let program = p.build().unwrap();
    assert_eq!(kinds(&program, 1, 0), [StepKind::Recv, StepKind::RecvCopySend, StepKind::Send]);
    let chunks: Vec<_> =
        program.ranks[1].thread_blocks[0].steps.iter().map(|s| s.dst.or(s.src).unwrap().index).collect();
    assert_eq!(chunks, [0, 1, 0]);
}

#[test]
fn a_forward_that_would_give_a_thread_block_two_send_peers_is_not_fused() {
    // Rank 1 forwards one chunk from rank 0 to rank 2, then another from rank 0 to rank 3, on one
    // channel: the receive connection from rank 0 can be in one thread block only, which already
    // sends to rank 2, so the second pair stays a receive and a send.
    let mut p = ProgramBuilder::new("two_peers", Collective::AllReduce, 4, 2, false).unwrap();
    for (chunk, to) in [(0, 2), (1, 3)] {
        let got = p.copy(&p.chunk(0, Buffer::Input, chunk, 1).unwrap(), 1, Buffer::Scratch, chunk).unwrap();
        p.copy(&got, to, Buffer::Scratch, chunk).unwrap();
    }
    let program = p.build().unwrap();
    let blocks = &program.ranks[1].thread_blocks;
    let shape: Vec<_> =
        blocks.iter().map(|tb| (tb.send, tb.recv, tb.steps.iter().map(|s| s.kind).collect::<Vec<_>>())).collect();
    assert_eq!(
        shape,
        [(Some(2), Some(0), vec![StepKind::RecvCopySend, StepKind::Recv]), (Some(3), None, vec![StepKind::Send]),]
    );
    // The lone send waits for the receive of what it sends, in the other thread block.
    assert_eq!(blocks[1].steps[0].depends_on, Some((0, 1)));
}

#[test]
fn a_step_reading_what_another_thread_block_wrote_waits_for_it_with_nops_for_extra_dependencies() {
    // Rank 2 receives from ranks 0 and 1 into scratch chunks 0 and 1 (a thread block per peer), and
    // in its local thread block copies its input to scratch 2 and on to 3, which waits for nothing,
    // then scratch 0..2 to 4..6 in one step, which waits for both receives: a nop and the copy.
    let mut p = ProgramBuilder::new("deps", Collective::AllReduce, 3, 1, false).unwrap();
    p.copy(&p.chunk(0, Buffer::Input, 0, 1).unwrap(), 2, Buffer::Scratch, 0).unwrap();
    p.copy(&p.chunk(1, Buffer::Input, 0, 1).unwrap(), 2, Buffer::Scratch, 1).unwrap();
    let own = p.copy(&p.chunk(2, Buffer::Input, 0, 1).unwrap(), 2, Buffer::Scratch, 2).unwrap();
    p.copy(&own, 2, Buffer::Scratch, 3).unwrap();
    p.copy(&p.chunk(2, Buffer::Scratch, 0, 2).unwrap(), 2, Buffer::Scratch, 4).unwrap();
    let program = p.build().unwrap();
    let rank = &program.ranks[2];
    assert_eq!(rank.scratch_chunks, 6);
    let local = rank.thread_blocks.iter().position(|tb| tb.send.is_none() && tb.recv.is_none()).unwrap();
    let steps = &rank.thread_blocks[local].steps;
    let kinds: Vec<StepKind> = steps.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [StepKind::Copy, StepKind::Copy, StepKind::Nop, StepKind::Copy]);
    let from = |peer: usize| rank.thread_blocks.iter().position(|tb| tb.recv == Some(peer)).unwrap();
    assert_eq!(steps[2].depends_on, Some((from(0), 0)));
    assert_eq!(steps[3].depends_on, Some((from(1), 0)));
    assert!(rank.thread_blocks[from(0)].steps[0].has_dependents);
    check(&program).unwrap();
}

/// A small xorshift generator, so that random programs are the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// A random run of chunks of a random buffer on a random rank of a program of `ranks` ranks and `n`
/// chunks.
fn random_run(rng: &mut Rng, ranks: usize, n: usize) -> (usize, Buffer, usize, usize) {
    let buffer = [Buffer::Input, Buffer::Output, Buffer::Scratch][rng.below(3)];
    let index = rng.below(n);
    let count = if index + 2 <= n && rng.below(3) == 0 { 2 } else { 1 };
    (rng.below(ranks), buffer, index, count)
}

#[test]
fn random_programs_compute_what_their_copies_and_reduces_say() {
    // Elements per chunk.
    const E: usize = 2;
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let (ranks, n, in_place) = (2 + rng.below(3), 1 + rng.below(4), rng.below(2) == 0);
        let mut p = ProgramBuilder::new(format!("random_{seed}"), Collective::AllReduce, ranks, n, in_place).unwrap();
        // The model: each chunk's values, in place with the output folded into the input.
        let at = |rank: usize, buffer: Buffer, index: usize| {
            let buffer = if in_place && buffer == Buffer::Output { Buffer::Input } else { buffer };
            (rank, buffer, index)
        };
        let start = |rank: usize, chunk: usize| -> Vec<f64> {
            (0..E).map(|e| ((rank * 7 + chunk * E + e) % 11 + 1) as f64).collect()
        };
        let mut model = std::collections::HashMap::new();
        for rank in 0..ranks {
            for chunk in 0..n {
                model.insert(at(rank, Buffer::Input, chunk), start(rank, chunk));
            }
        }
        for _ in 0..1 + rng.below(12) {
            let (rank, buffer, index, count) = random_run(&mut rng, ranks, n);
            let Ok(src) = p.chunk(rank, buffer, index, count) else { continue };
            let (to_rank, to_buffer, to_index, _) = random_run(&mut rng, ranks, n);
            let reduce = rng.below(2) == 0;
            let result = if reduce {
                p.chunk(to_rank, to_buffer, to_index, count).and_then(|into| p.reduce(&into, &src))
            } else {
                p.copy(&src, to_rank, to_buffer, to_index)
            };
            match result {
                Ok(_) => {
                    for c in 0..count {
                        let value = model[&at(rank, buffer, index + c)].clone();
                        let target = model.entry(at(to_rank, to_buffer, to_index + c)).or_insert_with(|| vec![0.0; E]);
                        for (t, v) in target.iter_mut().zip(value) {
                            *t = if reduce { *t + v } else { v };
                        }
                    }
                }
                Err(ChunkError::Uninitialised { .. } | ChunkError::Overlap { .. } | ChunkError::OutOfRange { .. }) => {}
                Err(e) => panic!("seed {seed}: {e}"),
            }
        }
        let program = p.build().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let xml = msccl::to_xml(&program);
        assert_eq!(msccl::from_xml_str(&xml).unwrap(), program, "seed {seed}");
        let system = System::shape(ranks, 1, 1, 1).unwrap();
        let plan = InstallPlan::build(&system, "full", "leader_only").unwrap();
        let buffers = (0..ranks)
            .map(|rank| PeBuffers {
                input: Tile::from_f64s(I32, &(0..n).flat_map(|c| start(rank, c)).collect::<Vec<_>>()),
                output: Tile::zeros(I32, n * E),
            })
            .collect();
        let kernel = ProgramKernel::new(Arc::new(program.clone()));
        let report = Runtime::new(&system)
            .run(&plan, &kernel, buffers, Call::default())
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{xml}"));
        for (rank, pe) in report.pes().iter().enumerate() {
            let want: Vec<f64> =
                (0..n).flat_map(|c| model.get(&at(rank, Buffer::Output, c)).cloned().unwrap_or(vec![0.0; E])).collect();
            assert_eq!(pe.output.to_f64_vec(), want, "seed {seed}, rank {rank}\n{xml}");
        }
    }
}

// The examples.

#[test]
fn ring_allreduce_runs_correctly_for_several_rank_and_channel_counts() {
    for ranks in [2, 3, 4, 5] {
        for channels in [1, 2] {
            let program = examples::ring_allreduce(ranks, channels).unwrap();
            assert_eq!((program.chunks, program.channels), (ranks * channels, channels));
            assert_runs_correctly(&program);
        }
    }
}

#[test]
fn alltoall_with_scratch_runs_correctly() {
    for ranks in [2, 3, 4] {
        let program = examples::alltoall_with_scratch(ranks).unwrap();
        // Rank r's scratch holds the chunks of every other rank, indexed by sender.
        for (rank, rank_program) in program.ranks.iter().enumerate() {
            let highest = if rank == ranks - 1 { ranks - 2 } else { ranks - 1 };
            assert_eq!(rank_program.scratch_chunks, highest + 1, "rank {rank}");
        }
        assert_runs_correctly(&program);
    }
}

#[test]
fn ring_allgather_in_place_runs_correctly() {
    for ranks in [2, 3, 4, 5] {
        let program = examples::ring_allgather_in_place(ranks).unwrap();
        assert!(program.in_place);
        // In place, the writer's form: the input is folded into the output.
        assert!(program.ranks.iter().all(|r| r.input_chunks == 0 && r.output_chunks == ranks));
        // From three ranks on, each rank receives from and sends to different peers, so one thread
        // block does both and forwards as it receives.
        if ranks < 3 {
            assert_runs_correctly(&program);
            continue;
        }
        let ring = kinds(&program, 0, 0);
        let mut expected = vec![StepKind::Send];
        expected.extend(std::iter::repeat_n(StepKind::RecvCopySend, ranks - 2));
        expected.push(StepKind::Recv);
        assert_eq!(ring, expected);
        assert_runs_correctly(&program);
    }
}

#[test]
fn hierarchical_allreduce_runs_correctly() {
    for (nodes, gpus) in [(2, 2), (2, 3), (3, 2), (1, 3), (3, 1)] {
        let program = examples::hierarchical_allreduce(nodes, gpus).unwrap();
        assert!(program.in_place);
        assert_eq!(program.ranks.len(), nodes * gpus);
        assert_runs_correctly(&program);
    }
}

// Time against the shipped kernel.

#[test]
fn the_builders_ring_allreduce_takes_about_the_time_of_the_rust_ring_kernel() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    let program = examples::ring_allreduce(4, 1).unwrap();
    let mut lines = Vec::new();
    for bytes in [64 << 10, 4 << 20] {
        let elements = bytes / 4;
        let (report, held) = run(&system, &program, F32, elements, ReduceOp::Sum);
        assert!(held);
        let built = report.time().unwrap().completion_ns;
        let rust = MockRun::new(&system, "ring_1d", "leader_only", &alg::ring_allreduce::KERNEL)
            .params(json!({"chunks": 1, "lanes": 1}))
            .inputs(|_, rank| Tile::filled(F32, elements, rank as f64))
            .outputs(|_, _, _| Tile::zeros(F32, elements))
            .run()
            .unwrap();
        let rust = rust.time().unwrap().completion_ns;
        lines.push(format!(
            "{bytes} B per rank: builder {built:.0} ns, Rust kernel {rust:.0} ns, ratio {:.3}",
            built / rust
        ));
        // Both move 2 (p - 1) / p of the data per rank in 2 (p - 1) steps over the same links; the
        // builder's program adds slicing and one local copy, so it is within a factor of two of the
        // Rust kernel either way.
        assert!(built < 2.0 * rust && rust < 2.0 * built, "{}", lines.last().unwrap());
    }
    println!("{}", lines.join("\n"));
}

#[test]
fn a_program_of_no_ranks_or_of_chunks_that_are_not_whole_blocks_is_an_error_at_its_call() {
    let (error, line) = (ProgramBuilder::new("none", Collective::AllReduce, 0, 4, false).unwrap_err(), line!());
    assert_eq!(error.at().line, line);
    assert!(
        error.to_string().contains("all_reduce over 0 ranks cannot be cut into 4 chunks: expected at least one rank"),
        "{error}"
    );
    let error = ProgramBuilder::new("gather", Collective::AllGather, 3, 4, false).unwrap_err();
    assert!(error.to_string().contains("and a multiple of 3 chunks"), "{error}");
}

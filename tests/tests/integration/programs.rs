//! Chunk programs on the mock runtime: thread blocks as lanes, every step kind, dependencies between
//! thread blocks, in-place aliasing, slices, and time against the Rust-fn kernels of the same
//! algorithm.

use std::sync::Arc;

use kernbench::postcondition::{self, CallFacts, starting_output};
use kernbench::prelude::*;
use kernbench::program::{ChunkRef, Program, ProgramKernel, Protocol, RankProgram, Step, StepKind, ThreadBlock};
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::sim::{Call, PeBuffers, RunReport, Runtime};
use kernbench::{Collective, InstallPlan, System};

fn chunk(buffer: Buffer, index: usize) -> Option<ChunkRef> {
    Some(ChunkRef { buffer, index })
}

fn step(kind: StepKind, src: Option<ChunkRef>, dst: Option<ChunkRef>) -> Step {
    Step { kind, src, dst, count: 1, depends_on: None, has_dependents: false }
}

/// The ring all-reduce as MSCCL writes it: chunk `c` starts at rank `c`, is reduced along the ring
/// (`rrs`) until rank `c - 1` completes it (`rrcs`), then travels once more round the ring being
/// stored (`rcs`, and `r` at the end). `n` chunks, out of place, one thread block per rank on
/// `channel`; `reverse` runs it the other way round the ring.
fn ring_steps(n: usize, r: usize, reverse: bool) -> Vec<Step> {
    let at = |k: usize| if reverse { (r + k) % n } else { (r + n * n - k) % n };
    let (i, o) = (Buffer::Input, Buffer::Output);
    let mut steps = vec![step(StepKind::Send, chunk(i, r), None)];
    for k in 1..n - 1 {
        steps.push(step(StepKind::RecvReduceSend, chunk(i, at(k)), None));
    }
    let done = at(n - 1);
    steps.push(step(StepKind::RecvReduceCopySend, chunk(i, done), chunk(o, done)));
    for k in 1..n - 1 {
        steps.push(step(StepKind::RecvCopySend, None, chunk(o, at(n - 1 + k))));
    }
    steps.push(step(StepKind::Recv, None, chunk(o, at(2 * n - 2))));
    steps
}

/// [`ring_steps`] without fused steps: each hop receives the whole chunk (`rrc`, `r`) before it
/// sends it on (`s`).
fn unfused_ring_steps(n: usize, r: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    for fused in ring_steps(n, r, false) {
        let kind = match fused.kind {
            StepKind::RecvReduceSend | StepKind::RecvReduceCopySend => StepKind::RecvReduceCopy,
            StepKind::RecvCopySend => StepKind::Recv,
            kind => kind,
        };
        // What the fused step would have sent, from where the unfused one stored it.
        let stored = fused.dst.or(fused.src.map(|c| ChunkRef { buffer: Buffer::Output, index: c.index }));
        let dst = if kind == StepKind::Send { None } else { stored };
        steps.push(Step { kind, dst, ..fused.clone() });
        if fused.kind.sends() && fused.kind.receives() {
            steps.push(step(StepKind::Send, stored, None));
        }
    }
    steps
}

fn ring_program(n: usize, protocol: Protocol) -> Program {
    ring_program_of(n, protocol, |r| ring_steps(n, r, false))
}

fn ring_program_of(n: usize, protocol: Protocol, steps: impl Fn(usize) -> Vec<Step>) -> Program {
    let ranks = (0..n)
        .map(|r| RankProgram {
            input_chunks: n,
            output_chunks: n,
            scratch_chunks: 0,
            thread_blocks: vec![ThreadBlock {
                send: Some((r + 1) % n),
                recv: Some((r + n - 1) % n),
                channel: 0,
                steps: steps(r),
            }],
        })
        .collect();
    Program {
        name: format!("ring_{n}"),
        collective: Collective::AllReduce,
        in_place: false,
        protocol,
        chunks: n,
        channels: 1,
        ranks,
    }
}

/// `program` on the SIP leaders of `system` over `full`, every rank holding `elements` of `dtype`;
/// the report and whether the postcondition held.
pub(crate) fn run(
    system: &System,
    program: &Program,
    dtype: Dtype,
    elements: usize,
    op: ReduceOp,
) -> (RunReport, bool) {
    let input =
        |r: usize| Tile::from_f64s(dtype, &(0..elements).map(|e| ((r * 7 + e) % 11) as f64).collect::<Vec<_>>());
    let kernel = ProgramKernel::new(Arc::new(program.clone()));
    let report = MockRun::program(system, &kernel)
        .inputs(|_pe, rank| input(rank))
        .op(op)
        .run()
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    let n = report.pes().len();
    let inputs: Vec<Tile> = (0..n).map(input).collect();
    let before: Vec<Tile> =
        inputs.iter().enumerate().map(|(r, t)| starting_output(&program.collective.into(), t, r, n)).collect();
    let outputs: Vec<Tile> = report.pes().iter().map(|p| p.output.clone()).collect();
    let facts = CallFacts { collective: program.collective, op, root: 0, counts: None };
    let held = postcondition::check(&facts, &inputs, &before, &outputs).unwrap().held;
    (report, held)
}

#[test]
fn a_mock_run_of_a_program_starts_outputs_as_its_collective_and_checks_it_exactly() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    let kernel = ProgramKernel::new(Arc::new(kernbench::program::examples::ring_allgather_in_place(4).unwrap()));
    // An all-gather's output is every rank's block: told the collective, the run makes it 4 times the
    // input, where the default (a copy of the input) would be too short for the program.
    let report = MockRun::program(&system, &kernel)
        .inputs(|_pe, rank| Tile::filled(I32, 8, rank as f64))
        .exact(Collective::AllGather)
        .run()
        .unwrap();
    let gathered: Vec<i32> = (0..4).flat_map(|r| [r; 8]).collect();
    assert!(report.pes().iter().all(|p| p.output.to_vec::<i32>().unwrap() == gathered));
}

#[test]
fn a_mock_run_of_a_kernel_already_made_refuses_parameters() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    let kernel = ProgramKernel::new(Arc::new(ring_program(4, Protocol::Simple)));
    let refused = MockRun::launch(&system, "full", "leader_only", &kernel)
        .params(serde_json::json!({"chunks": 2}))
        .run()
        .unwrap_err();
    assert!(matches!(refused, MockError::ParamsOfALaunch(_)), "{refused}");
    assert!(refused.to_string().contains("already made"), "{refused}");
}

#[test]
fn a_ring_program_all_reduces_for_every_dtype_and_op() {
    for n in [2, 3, 4, 7] {
        let system = System::shape(n, 1, 1, 1).unwrap();
        for dtype in Dtype::ALL {
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg] {
                let (_, held) = run(&system, &ring_program(n, Protocol::Simple), dtype, n * 5, op);
                assert!(held, "{n} ranks, {dtype} {op}");
            }
        }
    }
}

#[test]
fn an_all_reduce_whose_chunks_do_not_divide_the_data_pads_them() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    for elements in [1, 10, 37] {
        let (_, held) = run(&system, &ring_program(4, Protocol::Simple), I32, elements, ReduceOp::Sum);
        assert!(held, "{elements} elements");
    }
}

#[test]
fn a_block_collective_whose_chunks_do_not_divide_the_data_is_the_kernels_error() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/msccl/alltoall_scratch.xml");
    let program = kernbench::program::msccl::from_file(std::path::Path::new(path)).unwrap();
    let system = System::shape(3, 1, 1, 1).unwrap();
    let plan = InstallPlan::build(&system, "full", "leader_only").unwrap();
    let buffers = (0..3).map(|_| PeBuffers { input: Tile::zeros(F32, 10), output: Tile::zeros(F32, 10) }).collect();
    let kernel = ProgramKernel::new(Arc::new(program));
    let error = Runtime::new(&system).run(&plan, &kernel, buffers, Call::default()).unwrap_err();
    let expected = "cuts the 10 elements of a rank into 3 chunks: an all_to_all needs a multiple of 3 elements";
    assert!(error.to_string().contains(expected), "{error}");
}

#[test]
fn fused_steps_forward_each_slice_as_it_arrives() {
    // 4 ranks of 8 MiB: 2 MiB chunks, one pass of two 1 MiB slices (Simple). A fused ring forwards
    // the first slice while the second is on the wire; an unfused one waits for the whole chunk.
    let system = System::shape(4, 1, 1, 1).unwrap();
    let elements = 2 << 20;
    let (fused, held) = run(&system, &ring_program(4, Protocol::Simple), F32, elements, ReduceOp::Sum);
    assert!(held);
    let unfused_program = ring_program_of(4, Protocol::Simple, |r| unfused_ring_steps(4, r));
    let (unfused, held) = run(&system, &unfused_program, F32, elements, ReduceOp::Sum);
    assert!(held);
    let time = |r: &RunReport| r.time().unwrap().completion_ns;
    assert!(time(&fused) < 0.9 * time(&unfused), "fused {} ns, unfused {} ns", time(&fused), time(&unfused));
}

#[test]
fn an_in_place_ring_program_all_reduces_in_its_input_buffer() {
    let n = 4;
    let mut program = ring_program(n, Protocol::Simple);
    program.in_place = true;
    for rank in &mut program.ranks {
        rank.output_chunks = 0;
        for step in &mut rank.thread_blocks[0].steps {
            if let Some(dst) = &mut step.dst {
                dst.buffer = Buffer::Input;
            }
        }
    }
    let system = System::shape(n, 1, 1, 1).unwrap();
    let (_, held) = run(&system, &program, I32, n * 3, ReduceOp::Sum);
    assert!(held);
}

/// Two ranks, three thread blocks each: one sends the input on, one receives the peer's into
/// scratch, and one waits for that receive (a `nop` and a `cpy` depending on it), copies it to the
/// output and adds the input: an all-reduce of two.
fn three_thread_blocks() -> Program {
    let (i, o, s) = (Buffer::Input, Buffer::Output, Buffer::Scratch);
    let received = (1, 0);
    let rank = |r: usize| RankProgram {
        input_chunks: 1,
        output_chunks: 1,
        scratch_chunks: 1,
        thread_blocks: vec![
            ThreadBlock {
                send: Some(1 - r),
                recv: None,
                channel: 0,
                steps: vec![step(StepKind::Send, chunk(i, 0), None)],
            },
            ThreadBlock {
                send: None,
                recv: Some(1 - r),
                channel: 0,
                steps: vec![Step { has_dependents: true, ..step(StepKind::Recv, None, chunk(s, 0)) }],
            },
            ThreadBlock {
                send: None,
                recv: None,
                channel: 0,
                steps: vec![
                    Step {
                        kind: StepKind::Nop,
                        count: 0,
                        depends_on: Some(received),
                        ..step(StepKind::Nop, None, None)
                    },
                    Step { depends_on: Some(received), ..step(StepKind::Copy, chunk(s, 0), chunk(o, 0)) },
                    step(StepKind::Reduce, chunk(i, 0), chunk(o, 0)),
                ],
            },
        ],
    };
    Program {
        name: "three_thread_blocks".to_owned(),
        collective: Collective::AllReduce,
        in_place: false,
        protocol: Protocol::Simple,
        chunks: 1,
        channels: 1,
        ranks: vec![rank(0), rank(1)],
    }
}

#[test]
fn thread_blocks_wait_for_the_steps_they_depend_on() {
    let system = System::shape(2, 1, 1, 1).unwrap();
    for dtype in Dtype::ALL {
        let (report, held) = run(&system, &three_thread_blocks(), dtype, 1000, ReduceOp::Sum);
        assert!(held, "{dtype}");
        // The copy waited for the receive: the third lane finishes after the second.
        let pe = &report.time().unwrap().pes[0];
        assert!(pe.lanes[2].finish_ns >= pe.lanes[1].finish_ns, "{:?}", pe.lanes);
    }
}

#[test]
fn imported_programs_hold_their_postconditions_and_take_time() {
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/msccl"));
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    for file in files {
        let program = kernbench::program::msccl::from_file(&file).unwrap();
        let n = program.ranks.len();
        let system = System::shape(n, 1, 1, 1).unwrap();
        // Whole chunks: an all-gather contributes its part of them.
        let elements = match program.collective {
            Collective::AllGather => program.chunks / n * 5,
            _ => program.chunks * 5,
        };
        for op in [ReduceOp::Sum, ReduceOp::Max] {
            let (report, held) = run(&system, &program, F32, elements, op);
            assert!(held, "{}: {op}", file.display());
            assert!(report.time().unwrap().completion_ns > 0.0, "{}", file.display());
        }
    }
}

/// The shipped `ring`'s schedule as a chunk program: on each of `lanes` channels a thread block runs
/// the ring on its share of the data, each of the `n` parts in `pieces` pieces sent ahead.
fn ring_program_on_lanes(n: usize, lanes: usize, pieces: usize) -> Program {
    let mut program = ring_program(n, Protocol::Simple);
    program.name = format!("ring_{n}_on_{lanes}_lanes");
    program.chunks = n * lanes * pieces;
    program.channels = lanes;
    for (r, rank) in program.ranks.iter_mut().enumerate() {
        rank.input_chunks = program.chunks;
        rank.output_chunks = program.chunks;
        rank.thread_blocks = (0..lanes)
            .map(|lane| {
                let remap = |c: Option<ChunkRef>, piece: usize| {
                    c.map(|c| ChunkRef { index: (lane * n + c.index) * pieces + piece, ..c })
                };
                let steps = ring_steps(n, r, false)
                    .into_iter()
                    .flat_map(|s| {
                        (0..pieces).map(move |piece| Step {
                            src: remap(s.src, piece),
                            dst: remap(s.dst, piece),
                            ..s.clone()
                        })
                    })
                    .collect();
                ThreadBlock { send: Some((r + 1) % n), recv: Some((r + n - 1) % n), channel: lane, steps }
            })
            .collect();
    }
    program
}

#[test]
fn a_16_rank_ring_xml_takes_the_shipped_rings_time_on_ring16() {
    // The shipped `ring` at its defaults (4 lanes of 2 pieces) against the same schedule written as
    // MSCCL-IR, exported and read back: within 1 % at 1 MiB and 16 MiB per rank.
    let system =
        System::from_file(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systems/ring16.json")))
            .unwrap();
    let xml = kernbench::program::msccl::to_xml(&ring_program_on_lanes(16, 4, 2));
    let program = kernbench::program::msccl::from_xml_str(&xml).unwrap();
    let registry = kernbench::algorithms::default_registry();
    let ring = registry.get("ring").unwrap();
    let plan = ring.plan(&system).unwrap();
    for bytes in [1usize << 20, 16 << 20] {
        let elements = bytes / 4;
        let (report, held) = run(&system, &program, F32, elements, ReduceOp::Sum);
        assert!(held);
        let xml_ns = report.time().unwrap().completion_ns;
        let buffers = (0..16)
            .map(|r| {
                let input = Tile::filled(F32, elements, r as f64);
                PeBuffers { output: input.clone(), input }
            })
            .collect();
        let shipped = Runtime::new(&system).run(&plan, ring.launch(), buffers, Call::default()).unwrap();
        let ring_ns = shipped.time().unwrap().completion_ns;
        assert!((xml_ns / ring_ns - 1.0).abs() <= 0.01, "{bytes} B: XML {xml_ns} ns, ring {ring_ns} ns");
    }
}

#[test]
fn the_chunk_program_ring_takes_the_time_of_the_rust_ring_with_the_same_schedule() {
    // `chunk_ring` (MSCCLang's ring, one channel) and `ring_low_latency` (the Rust ring, one piece on
    // one lane) move the same chunks over the same links in the same order; the program also copies
    // each rank's reduced chunk to its output (a `cpy`), a load and store the Rust ring does not make.
    use kernbench::samples::sample_tensor;
    use kernbench::{CallOptions, Communicator, DpPolicy};
    for system in [System::builtin(), System::shape(8, 1, 1, 1).unwrap()] {
        let mut comm = Communicator::new(system.clone());
        for bytes in [1 << 10, 1 << 20] {
            let tensor = sample_tensor(&system, bytes, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
            let time = |comm: &mut Communicator, name: &str| {
                let options = CallOptions { algorithm: Some(name.to_owned()), generation: None, counts: None };
                let (_, report) = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap();
                assert!(report.postcondition.held, "{report}");
                report.run.completion_ns().unwrap()
            };
            let (program, rust) = (time(&mut comm, "chunk_ring"), time(&mut comm, "ring_low_latency"));
            let close = (program / rust - 1.0).abs() < 1e-3;
            assert!(close, "{bytes} B: chunk_ring {program} ns, ring_low_latency {rust} ns");
        }
    }
}

//! The shipped ring, tree, butterfly, direct-peer, mesh and hierarchical kernels: each one's collective postcondition over
//! participant counts, dtypes, operators, lengths and roots, and bit-identical reruns.
//!
//! Inputs are small integers wherever a sum or product must come out exact, so any lost or doubled
//! contribution shows as a wrong element; one scenario per reducing kernel uses arbitrary floats to
//! exercise the postcondition's tolerance.

use kernbench::algorithms as alg;
use kernbench::postcondition::{CallFacts, check};
use kernbench::prelude::*;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::sim::{Call, RunError, RunReport};
use kernbench::{Collective, KernelDef, System, SystemSpec, mapper_by_name};
use serde_json::{Value, json};

/// The participant counts every flat kernel is run with.
const COUNTS: [usize; 8] = [1, 2, 3, 4, 5, 7, 8, 16];

/// A length that no count above divides (but 1).
const ODD_LEN: usize = 37;

/// A kernel and what it must compute.
struct Algo {
    kernel: &'static KernelDef,
    topology: &'static str,
    collective: Collective,
    params: Value,
}

impl Algo {
    fn new(kernel: &'static KernelDef, topology: &'static str, collective: Collective) -> Algo {
        Algo { kernel, topology, collective, params: json!({}) }
    }

    fn params(self, params: Value) -> Algo {
        Algo { params, ..self }
    }
}

/// A system and the mapper that picks its participants.
struct Machine {
    system: System,
    mapper: &'static str,
}

impl Machine {
    /// `n` participants on a flat machine: alternately `n` SIPs of one PE (leader_only) and one cube of
    /// `n` PEs (all_pes), so both link classes and both mappers are covered.
    fn flat(n: usize) -> Machine {
        if n % 2 == 0 {
            Machine { system: System::shape(n, 1, 1, 1).expect("a valid shape"), mapper: "leader_only" }
        } else {
            Machine { system: System::shape(1, 1, 1, n).expect("a valid shape"), mapper: "all_pes" }
        }
    }

    /// `sips` SIPs of a `w x h` cube mesh, one participant per cube.
    fn cubes(sips: usize, w: usize, h: usize) -> Machine {
        Machine { system: System::shape(sips, w, h, 2).expect("a valid shape"), mapper: "cube_leaders" }
    }

    fn participants(&self) -> usize {
        mapper_by_name(self.mapper).expect("a built-in mapper").participants(&self.system).len()
    }
}

// The kernels under test, each with its topology and collective.

/// The ring kernels run on three lanes: shares of uneven length, and empty ones for short inputs.
fn ring_allreduce() -> Algo {
    Algo::new(&alg::ring_allreduce::KERNEL, "ring_1d", Collective::AllReduce).params(json!({"chunks": 3, "lanes": 3}))
}

fn bidirectional_ring_allreduce() -> Algo {
    Algo::new(&alg::bidirectional_ring_allreduce::KERNEL, "ring_1d", Collective::AllReduce)
        .params(json!({"chunks": 3, "lanes": 3}))
}

fn ring_reduce_scatter() -> Algo {
    Algo::new(&alg::ring_reduce_scatter::KERNEL, "ring_1d", Collective::ReduceScatter)
        .params(json!({"chunks": 3, "lanes": 3}))
}

fn ring_allgather() -> Algo {
    Algo::new(&alg::ring_allgather::KERNEL, "ring_1d", Collective::AllGather).params(json!({"chunks": 3, "lanes": 3}))
}

fn hierarchical_allreduce() -> Algo {
    Algo::new(&alg::hierarchical_allreduce::KERNEL, "hierarchical_3level", Collective::AllReduce)
        .params(json!({"chunks": 3}))
}

fn tree_allreduce() -> Algo {
    Algo::new(&alg::tree_allreduce::KERNEL, "tree", Collective::AllReduce).params(json!({"chunks": 3}))
}

fn double_binary_tree_allreduce() -> Algo {
    Algo::new(&alg::double_binary_tree_allreduce::KERNEL, "double_binary_tree", Collective::AllReduce)
        .params(json!({"chunks": 3}))
}

fn recursive_doubling_allreduce() -> Algo {
    Algo::new(&alg::recursive_doubling_allreduce::KERNEL, "hypercube", Collective::AllReduce)
}

fn rabenseifner_allreduce() -> Algo {
    Algo::new(&alg::rabenseifner_allreduce::KERNEL, "hypercube", Collective::AllReduce)
}

fn one_shot_allreduce() -> Algo {
    Algo::new(&alg::one_shot_allreduce::KERNEL, "full", Collective::AllReduce)
}

fn symmetric_one_shot_allreduce() -> Algo {
    Algo::new(&alg::symmetric_one_shot_allreduce::KERNEL, "full", Collective::AllReduce)
}

fn symmetric_two_shot_allreduce() -> Algo {
    Algo::new(&alg::symmetric_two_shot_allreduce::KERNEL, "full", Collective::AllReduce)
}

fn symmetric_allgather() -> Algo {
    Algo::new(&alg::symmetric_allgather::KERNEL, "full", Collective::AllGather)
}

fn symmetric_alltoall() -> Algo {
    Algo::new(&alg::symmetric_alltoall::KERNEL, "full", Collective::AllToAll)
}

fn mesh_2d_allreduce() -> Algo {
    Algo::new(&alg::mesh_2d_allreduce::KERNEL, "mesh_2d", Collective::AllReduce)
}

fn intercube_allreduce() -> Algo {
    Algo::new(&alg::intercube_allreduce::KERNEL, "intercube", Collective::AllReduce)
}

fn recursive_doubling_allgather() -> Algo {
    Algo::new(&alg::recursive_doubling_allgather::KERNEL, "hypercube", Collective::AllGather)
}

fn bruck_allgather() -> Algo {
    Algo::new(&alg::bruck_allgather::KERNEL, "full", Collective::AllGather)
}

fn recursive_halving_reduce_scatter() -> Algo {
    Algo::new(&alg::recursive_halving_reduce_scatter::KERNEL, "hypercube", Collective::ReduceScatter)
}

fn tree_broadcast() -> Algo {
    Algo::new(&alg::tree_broadcast::KERNEL, "circulant", Collective::Broadcast)
}

fn pairwise_alltoall() -> Algo {
    Algo::new(&alg::pairwise_alltoall::KERNEL, "full", Collective::AllToAll)
}

/// Flat machines of every count in [`COUNTS`].
fn flat_machines() -> Vec<Machine> {
    COUNTS.into_iter().map(Machine::flat).collect()
}

/// Cube meshes for `intercube`: one cube, a row, a column, rectangles, and several SIPs (on their
/// ring of 2 and of 3, alone or with meshes).
fn cube_machines() -> Vec<Machine> {
    let mut machines: Vec<Machine> =
        [(1, 1, 1), (1, 3, 1), (1, 1, 3), (1, 3, 2), (2, 1, 1), (2, 2, 2), (3, 1, 1), (3, 4, 2), (5, 2, 3)]
            .into_iter()
            .map(|(sips, w, h)| Machine::cubes(sips, w, h))
            .collect();
    // Only the SIP leaders of a meshed system: the mesh steps are empty.
    machines.push(Machine { system: System::shape(3, 2, 2, 1).expect("a valid shape"), mapper: "leader_only" });
    machines
}

/// Every PE of a few SIPs of cube meshes, for `hierarchical_3level`: levels of one member, of two, and
/// of more, with odd and even rings.
fn hierarchical_machines() -> Vec<Machine> {
    [(1, 1, 1, 1), (1, 1, 1, 5), (2, 1, 1, 2), (1, 3, 1, 2), (2, 2, 2, 3), (3, 1, 2, 4), (5, 1, 1, 1)]
        .into_iter()
        .map(|(sips, w, h, pes)| Machine {
            system: System::shape(sips, w, h, pes).expect("a valid shape"),
            mapper: "all_pes",
        })
        .collect()
}

/// Machines with participant counts that `mesh_2d` arranges in every kind of grid.
fn mesh_machines() -> Vec<Machine> {
    COUNTS.into_iter().chain([6, 9, 12]).map(Machine::flat).collect()
}

/// A small integer for element `i` of `rank`'s input: in -5..=5, or for `Prod` one of 1, -1 and
/// (rarely) 2, so that no sum or product over a few dozen ranks rounds or overflows in any dtype.
fn small(op: ReduceOp, rank: usize, i: usize) -> f64 {
    let h = rank * 7 + i * 3;
    match op {
        ReduceOp::Prod => match h % 5 {
            0 => 2.0,
            1 | 3 => -1.0,
            _ => 1.0,
        },
        _ => (h % 11) as f64 - 5.0,
    }
}

/// An arbitrary float in [-1, 1) for element `i` of `rank`'s input.
fn noisy(rank: usize, i: usize) -> f64 {
    let mut x = (rank as u64) << 32 | i as u64;
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// `len` small integers of `dtype` for `rank` (see [`small`]).
fn small_input(dtype: Dtype, op: ReduceOp, len: usize) -> impl Fn(usize) -> Tile {
    move |rank| Tile::from_f64s(dtype, &(0..len).map(|i| small(op, rank, i)).collect::<Vec<_>>())
}

/// `len` arbitrary floats of `dtype` for `rank` (see [`noisy`]).
fn noisy_input(dtype: Dtype, len: usize) -> impl Fn(usize) -> Tile {
    move |rank| Tile::from_f64s(dtype, &(0..len).map(|i| noisy(rank, i)).collect::<Vec<_>>())
}

/// One call of `algo` on `machine`: its inputs, the outputs before, and the report.
struct Outcome {
    inputs: Vec<Tile>,
    before: Vec<Tile>,
    report: RunReport,
}

/// Runs `algo` on `machine` with `input(rank)` per rank, `threads` polling threads.
fn run(
    algo: &Algo,
    machine: &Machine,
    op: ReduceOp,
    root: usize,
    input: &dyn Fn(usize) -> Tile,
    threads: usize,
) -> Outcome {
    let n = machine.participants();
    let inputs: Vec<Tile> = (0..n).map(input).collect();
    let before: Vec<Tile> = inputs
        .iter()
        .enumerate()
        .map(|(r, x)| kernbench::postcondition::starting_output(&algo.collective.into(), x, r, n))
        .collect();
    let report = MockRun::new(&machine.system, algo.topology, machine.mapper, algo.kernel)
        .params(algo.params.clone())
        .inputs(|_, rank| inputs[rank].clone())
        .outputs(|_, rank, _| before[rank].clone())
        .call(Call { op, root, generation: 1 })
        .threads(threads)
        .parallel_min_ready(1)
        .run()
        .unwrap_or_else(|e| panic!("{} on {n} ranks ({}, {op}, root {root}): {e}", algo.kernel.name, machine.mapper));
    Outcome { inputs, before, report }
}

/// Runs `algo` and checks its collective's postcondition, and for an all-reduce that every rank holds
/// the same bits.
fn check_call(algo: &Algo, machine: &Machine, op: ReduceOp, root: usize, input: &dyn Fn(usize) -> Tile) {
    let Outcome { inputs, before, report } = run(algo, machine, op, root, input, 1);
    let outputs: Vec<Tile> = report.pes().iter().map(|p| p.output.clone()).collect();
    let n = inputs.len();
    let what = || {
        let shape = inputs.first().map(|x| format!("{}[{}]", x.dtype(), x.len())).unwrap_or_default();
        format!("{} on {n} ranks ({}), {shape}, {op}, root {root}", algo.kernel.name, machine.mapper)
    };
    let facts = CallFacts { collective: algo.collective, op, root, counts: None };
    let verdict = check(&facts, &inputs, &before, &outputs).expect("inputs of one shape");
    assert!(verdict.held, "{}: {verdict}", what());
    if algo.collective == Collective::AllReduce {
        if let Some(rank) = outputs.iter().position(|o| *o != outputs[0]) {
            panic!("{}: rank {rank} holds other bits than rank 0: {:?} vs {:?}", what(), outputs[rank], outputs[0]);
        }
    }
}

/// Every machine, every dtype under every operator.
fn every_dtype_and_op(algo: &Algo, machines: &[Machine]) {
    for machine in machines {
        for dtype in Dtype::ALL {
            for op in ReduceOp::ALL {
                check_call(algo, machine, op, 0, &small_input(dtype, op, ODD_LEN));
            }
        }
    }
}

/// Every machine, lengths from empty to not divisible by the count, i32 sums.
fn every_machine_and_len(algo: &Algo, machines: &[Machine]) {
    for machine in machines {
        for len in [0, 1, 2, 5, ODD_LEN] {
            check_call(algo, machine, ReduceOp::Sum, 0, &small_input(I32, ReduceOp::Sum, len));
        }
    }
}

/// Arbitrary floats, summed and averaged, within the postcondition's tolerance.
fn noisy_floats(algo: &Algo, machines: &[Machine]) {
    for machine in machines {
        for dtype in [F32, BF16] {
            for op in [ReduceOp::Sum, ReduceOp::Avg] {
                check_call(algo, machine, op, 0, &noisy_input(dtype, 101));
            }
        }
    }
}

/// Two runs of the same call, on one thread and on several, give the same report bit for bit.
fn deterministic(algo: &Algo, machine: &Machine) {
    let input = noisy_input(F32, 53);
    let once = run(algo, machine, ReduceOp::Sum, 0, &input, 1).report;
    let again = run(algo, machine, ReduceOp::Sum, 0, &input, 3).report;
    assert_eq!(once, again, "{} ran differently the second time", algo.kernel.name);
}

/// The scenarios every reducing kernel runs, as one module of tests per kernel.
macro_rules! reducing_kernel_tests {
    ($name:ident, $machines:expr, $one:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn holds_on_every_machine_for_every_dtype_and_op() {
                every_dtype_and_op(&super::$name(), &$machines);
            }

            #[test]
            fn holds_for_empty_short_and_uneven_lengths() {
                every_machine_and_len(&super::$name(), &$machines);
            }

            #[test]
            fn arbitrary_floats_stay_within_tolerance() {
                let machines = $machines;
                let some: Vec<Machine> =
                    machines.into_iter().filter(|m| [3, 8, 12, 16, 24].contains(&m.participants())).collect();
                noisy_floats(&super::$name(), &some);
            }

            #[test]
            fn runs_twice_with_identical_bits() {
                deterministic(&super::$name(), &$one);
            }
        }
    };
}

reducing_kernel_tests!(ring_allreduce, flat_machines(), Machine::flat(7));
reducing_kernel_tests!(bidirectional_ring_allreduce, flat_machines(), Machine::flat(7));
reducing_kernel_tests!(ring_reduce_scatter, flat_machines(), Machine::flat(7));
reducing_kernel_tests!(
    hierarchical_allreduce,
    hierarchical_machines(),
    Machine { system: System::shape(2, 2, 1, 3).expect("a valid shape"), mapper: "all_pes" }
);
reducing_kernel_tests!(tree_allreduce, flat_machines(), Machine::flat(7));
reducing_kernel_tests!(double_binary_tree_allreduce, flat_machines(), Machine::flat(7));
reducing_kernel_tests!(recursive_doubling_allreduce, flat_machines(), Machine::flat(7));
reducing_kernel_tests!(rabenseifner_allreduce, flat_machines(), Machine::flat(7));
reducing_kernel_tests!(one_shot_allreduce, flat_machines(), Machine::flat(7));
reducing_kernel_tests!(symmetric_one_shot_allreduce, flat_machines(), Machine::flat(7));
reducing_kernel_tests!(symmetric_two_shot_allreduce, flat_machines(), Machine::flat(7));
reducing_kernel_tests!(mesh_2d_allreduce, mesh_machines(), Machine::flat(12));
reducing_kernel_tests!(intercube_allreduce, cube_machines(), Machine::cubes(3, 4, 2));
reducing_kernel_tests!(recursive_halving_reduce_scatter, flat_machines(), Machine::flat(7));

/// Pipelined ring kernels with every piece count up to the queue depth (4), and more pieces than
/// elements.
fn ring_chunk_counts(algo: fn() -> Algo) {
    for n in [2, 3, 8] {
        let machine = Machine::flat(n);
        for chunks in [1, 2, 3, 4] {
            for len in [1, 5, ODD_LEN] {
                let algo = Algo { params: json!({ "chunks": chunks }), ..algo() };
                check_call(&algo, &machine, ReduceOp::Sum, 0, &small_input(I64, ReduceOp::Sum, len));
            }
        }
    }
}

#[test]
fn ring_allreduce_holds_for_any_chunk_count_up_to_the_queue_depth() {
    ring_chunk_counts(ring_allreduce);
}

#[test]
fn bidirectional_ring_allreduce_holds_for_any_chunk_count_up_to_the_queue_depth() {
    ring_chunk_counts(bidirectional_ring_allreduce);
}

#[test]
fn ring_reduce_scatter_and_allgather_hold_for_any_chunk_count_up_to_the_queue_depth() {
    ring_chunk_counts(ring_reduce_scatter);
    ring_chunk_counts(ring_allgather);
}

/// A ring keeps its pieces in flight before its first receive, so more pieces than queue slots would
/// leave every rank waiting for a credit that its neighbour returns only after its own sends: the
/// kernel cuts no more pieces than the queue holds, and the result holds.
#[test]
fn a_ring_allreduce_asked_for_more_pieces_than_queue_slots_cuts_as_many_as_the_queue_holds() {
    let machine = Machine::flat(4);
    let depth = machine.system.ipcq_depth();
    let run = |chunks: usize| {
        let algo = Algo { params: json!({"chunks": chunks, "lanes": 1}), ..ring_allreduce() };
        MockRun::new(&machine.system, algo.topology, machine.mapper, algo.kernel)
            .params(algo.params)
            .inputs(|_, rank| Tile::filled(F32, 64, rank as f64))
            .run()
            .unwrap()
    };
    let (asked, at_depth) = (run(depth + 1), run(depth));
    assert!(asked.pes().iter().all(|p| p.output == Tile::filled(F32, 64, 6.0)));
    // Each rank sends 2(p - 1) parts of `depth` pieces.
    assert_eq!(asked.pes()[0].figures.messages_sent, 2 * 3 * depth as u64);
    assert_eq!(asked, at_depth);
}

/// The hierarchical all-reduce's chains have no cycle, so any number of pieces streams through them.
#[test]
fn hierarchical_allreduce_holds_for_any_chunk_count() {
    let machine = Machine { system: System::shape(3, 2, 1, 3).expect("a valid shape"), mapper: "all_pes" };
    for chunks in [1, 2, 5, 11, ODD_LEN, 100] {
        let algo = Algo { params: json!({ "chunks": chunks }), ..hierarchical_allreduce() };
        check_call(&algo, &machine, ReduceOp::Sum, 0, &small_input(I64, ReduceOp::Sum, ODD_LEN));
    }
}

/// Streamed tree all-reduces with more pieces than queue slots, more pieces than elements, and one.
fn tree_chunk_counts(algo: fn() -> Algo) {
    for n in [2, 7, 16] {
        let machine = Machine::flat(n);
        for chunks in [1, 2, 5, 11, ODD_LEN, 100] {
            let algo = Algo { params: json!({ "chunks": chunks }), ..algo() };
            check_call(&algo, &machine, ReduceOp::Sum, 0, &small_input(I64, ReduceOp::Sum, ODD_LEN));
        }
    }
}

#[test]
fn tree_allreduce_holds_for_any_chunk_count() {
    tree_chunk_counts(tree_allreduce);
}

#[test]
fn double_binary_tree_allreduce_holds_for_any_chunk_count() {
    tree_chunk_counts(double_binary_tree_allreduce);
}

/// Streaming overlaps pieces: the run takes about `chunks + 2 height` dependent steps where one
/// round trip per piece would take `2 height chunks`.
#[test]
fn tree_allreduce_pieces_overlap_instead_of_each_waiting_for_a_round_trip() {
    let (n, height, chunks) = (16, 4, 32);
    for algo in [tree_allreduce, double_binary_tree_allreduce] {
        let algo = Algo { params: json!({ "chunks": chunks }), ..algo() };
        let report = run(&algo, &Machine::flat(n), ReduceOp::Sum, 0, &small_input(F32, ReduceOp::Sum, 64), 1).report;
        assert!(
            report.rounds() <= (chunks + 4 * height) as u64,
            "{} took {} rounds for {chunks} pieces on a tree of height {height}",
            algo.kernel.name,
            report.rounds()
        );
    }
}

/// The streamed tree schedule needs no queue depth: every receive waits for an earlier slot's send.
#[test]
fn tree_allreduces_stream_through_one_slot_queues_without_deadlock() {
    for n in [5, 16] {
        let spec = SystemSpec { sips: n, ipcq_depth: 1, ..SystemSpec::default() };
        let machine = Machine { system: System::from_spec(spec).expect("a valid spec"), mapper: "leader_only" };
        for algo in [tree_allreduce, double_binary_tree_allreduce] {
            let algo = Algo { params: json!({"chunks": 9}), ..algo() };
            check_call(&algo, &machine, ReduceOp::Sum, 0, &small_input(F32, ReduceOp::Sum, ODD_LEN));
        }
    }
}

/// Every machine, lengths from empty to uneven, every dtype: for the non-reducing collectives.
fn moves_every_block(algo: &Algo, machines: &[Machine]) {
    for machine in machines {
        for len in [0, 1, 3, ODD_LEN] {
            check_call(algo, machine, ReduceOp::Sum, 0, &small_input(I32, ReduceOp::Sum, len));
        }
    }
    for dtype in Dtype::ALL {
        check_call(algo, &Machine::flat(5), ReduceOp::Sum, 0, &noisy_input(dtype, ODD_LEN));
    }
}

/// The scenarios every non-reducing kernel runs.
macro_rules! moving_kernel_tests {
    ($name:ident) => {
        mod $name {
            use super::*;

            #[test]
            fn holds_on_every_machine_for_every_dtype_and_length() {
                moves_every_block(&super::$name(), &flat_machines());
            }

            #[test]
            fn runs_twice_with_identical_bits() {
                deterministic(&super::$name(), &Machine::flat(7));
            }
        }
    };
}

moving_kernel_tests!(ring_allgather);
moving_kernel_tests!(recursive_doubling_allgather);
moving_kernel_tests!(bruck_allgather);
moving_kernel_tests!(pairwise_alltoall);
moving_kernel_tests!(symmetric_allgather);
moving_kernel_tests!(symmetric_alltoall);
moving_kernel_tests!(tree_broadcast);

#[test]
fn tree_broadcast_holds_from_every_root() {
    let algo = tree_broadcast();
    for n in COUNTS.into_iter().chain([6, 15]) {
        let machine = Machine::flat(n);
        for root in 0..n {
            check_call(&algo, &machine, ReduceOp::Sum, root, &noisy_input(BF16, ODD_LEN));
        }
    }
}

#[test]
fn the_all_to_alls_hold_when_blocks_differ_in_length() {
    // 2n + 3 elements: the first three blocks of every input are one element longer.
    for algo in [pairwise_alltoall(), symmetric_alltoall()] {
        for n in COUNTS {
            check_call(&algo, &Machine::flat(n), ReduceOp::Sum, 0, &small_input(I64, ReduceOp::Sum, 2 * n + 3));
        }
    }
}

#[test]
fn a_root_that_is_not_a_rank_is_refused_before_any_kernel_runs() {
    let machine = Machine::flat(5);
    let cases = [
        ("circulant", &alg::tree_broadcast::KERNEL, json!({})),
        ("ring_1d", &alg::ring_reduce::KERNEL, json!({"chunks": 2})),
    ];
    for (topology, kernel, params) in cases {
        let result = MockRun::new(&machine.system, topology, machine.mapper, kernel)
            .params(params)
            .call(Call { op: ReduceOp::Sum, root: 5, generation: 1 })
            .run();
        match result {
            Err(MockError::Run(RunError::BadRoot { root: 5, participants: 5 })) => {}
            other => panic!("{}: expected BadRoot, got {other:?}", kernel.name),
        }
    }
}

#[test]
fn a_generation_too_large_for_its_phases_is_refused() {
    let machine = Machine::flat(2);
    let too_large = kernbench::tl::MAX_GENERATION + 1;
    let result = MockRun::new(&machine.system, "ring_1d", machine.mapper, &alg::ring_allreduce::KERNEL)
        .params(json!({"chunks": 1}))
        .call(Call { op: ReduceOp::Sum, root: 0, generation: too_large })
        .run();
    assert!(
        matches!(result, Err(MockError::Run(RunError::GenerationTooLarge { generation })) if generation == too_large),
        "{result:?}"
    );
}

#[test]
fn parameters_that_are_not_a_json_object_are_an_args_error() {
    let machine = Machine::flat(2);
    let result =
        MockRun::new(&machine.system, "ring_1d", machine.mapper, &alg::ring_allreduce::KERNEL).params(json!([4])).run();
    match result {
        Err(MockError::Args(e)) => assert!(e.to_string().contains("must be a JSON object"), "{e}"),
        other => panic!("expected an ArgsError, got {other:?}"),
    }
}

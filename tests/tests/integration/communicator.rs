//! The Communicator end to end: registry selection, the default ccl.json, every algorithm on every
//! shape it claims (the matrix), generations, and errors at plan time rather than wrong data.

use kernbench::postcondition::Postcondition;
use kernbench::prelude::*;
use kernbench::samples::{CUBE_LEADERS, EVERY_PE, sample_tensor};
use kernbench::{CallOptions, Collective, CommError, Communicator, DpPolicy, LayoutKind, PlanError, System};

fn comm(system: &System) -> Communicator {
    Communicator::new(system.clone())
}

/// Runs `algorithm` once on `system` and returns its postcondition.
fn run_named(system: &System, algorithm: &str, dtype: Dtype, op: ReduceOp, bytes: u64, root: usize) -> Postcondition {
    let mut comm = comm(system);
    let entry = comm.registry().get(algorithm).unwrap().clone();
    let tensor = sample_tensor(system, bytes, dtype, op, entry.mapper.layout()).unwrap();
    let ranks = comm.plan(&entry).unwrap().len();
    let elements = tensor.shards().values().next().map_or(0, |t| t.len());
    let counts = crate::counts_for(entry.collective, ranks, elements);
    let options = CallOptions { algorithm: Some(algorithm.to_owned()), generation: None, counts };
    let (_, report) = comm
        .call(entry.collective, &tensor, op, root, &options)
        .unwrap_or_else(|e| panic!("{algorithm} on {}: {e}", system.describe()));
    assert_eq!(report.algorithm, algorithm);
    report.postcondition
}

/// The shapes each mapper's algorithms claim: SIPs, mesh w x h, PEs per cube.
fn shapes(mapper: &str) -> &'static [(usize, usize, usize, usize)] {
    match mapper {
        "all_pes" => &[
            (1, 1, 1, 1),
            (1, 1, 1, 4),
            (2, 2, 2, 2),
            (2, 1, 1, 3),
            (3, 2, 2, 1),
            (1, 3, 5, 2),
            (2, 2, 2, 8),
            (5, 1, 1, 2),
            (2, 4, 4, 1),
        ],
        "cube_leaders" => &[(1, 1, 1, 1), (2, 2, 2, 4), (3, 3, 5, 1), (1, 4, 4, 2), (4, 2, 2, 1), (8, 1, 1, 1)],
        _ => &[(1, 1, 1, 1), (2, 1, 1, 1), (3, 2, 2, 1), (4, 1, 1, 2), (5, 1, 1, 1), (8, 4, 4, 1)],
    }
}

fn reduces(collective: Collective) -> bool {
    matches!(collective, Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce)
}

/// Every shape the algorithm's mapper claims, every dtype with `sum`, and every op in f32 and i32; roots
/// 0 and the last for rooted collectives.
fn matrix(algorithm: &str) {
    let registry = kernbench::algorithms::default_registry();
    let entry = registry.get(algorithm).unwrap();
    let mut cases: Vec<(Dtype, ReduceOp)> = Dtype::ALL.iter().map(|&d| (d, ReduceOp::Sum)).collect();
    if reduces(entry.collective) {
        for op in [ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg] {
            cases.extend([(F32, op), (I32, op)]);
        }
    }
    for &(sips, w, h, pes) in shapes(entry.mapper.name()) {
        let system = crate::system_for(entry, &System::shape(sips, w, h, pes).unwrap());
        let participants = entry.plan(&system).unwrap().len();
        let roots: Vec<usize> = match entry.collective {
            Collective::Broadcast | Collective::Reduce => vec![0, participants - 1],
            _ => vec![0],
        };
        for &(dtype, op) in &cases {
            for &root in &roots {
                // 37 elements per rank (SIP), prime: a one-PE rank's tensor is not a multiple of any
                // participant count above 1; multi-PE layouts round it up to a multiple of the rank's
                // shards and split it. All-to-all needs one whole block per participant, 5 elements
                // each, on each of a rank's participating PEs.
                let elements = if entry.collective == Collective::AllToAll {
                    5 * participants * (participants / sips)
                } else {
                    37
                };
                let bytes = (elements * dtype.size()) as u64;
                let post = run_named(&system, algorithm, dtype, op, bytes, root);
                assert!(post.held, "{algorithm} on {}, {dtype} {op} root {root}: {post}", system.describe());
            }
        }
    }
}

macro_rules! matrix_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                matrix(stringify!($name));
            }
        )*
    };
}

mod matrix {
    use super::matrix;

    matrix_tests!(
        ring,
        ring_low_latency,
        bidirectional_ring,
        recursive_doubling,
        rabenseifner,
        tree,
        double_binary_tree,
        one_shot,
        symmetric_one_shot,
        symmetric_two_shot,
        chunk_ring,
        chunk_hierarchical,
        mesh_2d,
        hierarchical_allreduce,
        intercube_allreduce,
        ring_allgather,
        recursive_doubling_allgather,
        bruck_allgather,
        symmetric_allgather,
        chunk_allgather_in_place,
        ring_reduce_scatter,
        recursive_halving_reduce_scatter,
        tree_broadcast,
        ring_broadcast,
        ring_reduce,
        pairwise_alltoall,
        symmetric_alltoall,
        chunk_alltoall,
        hierarchical_all_to_all,
        hierarchical_all_to_all_pes,
        nvls_allreduce,
        nvls_allgather,
        nvls_reduce_scatter,
        nvls_tree_allreduce,
        pairwise_alltoallv,
        symmetric_alltoallv,
        pairwise_sendrecv,
        symmetric_sendrecv,
    );
}

#[test]
fn the_matrix_covers_every_algorithm_of_the_default_registry() {
    let source = include_str!("communicator.rs");
    for entry in kernbench::algorithms::default_registry().algorithms() {
        assert!(source.contains(&format!("        {},\n", entry.name)), "{} has no matrix test", entry.name);
    }
}

#[test]
fn the_default_registry_uses_every_shipped_kernel() {
    let registry = kernbench::algorithms::default_registry();
    let used: Vec<&str> = registry.algorithms().map(|a| a.kernel.name).collect();
    for def in kernbench::algorithms::KERNELS {
        assert!(used.contains(&def.name), "kernel {} is shipped but no algorithm uses it", def.name);
    }
}

#[test]
fn t4_hierarchical_allreduce_runs_end_to_end_through_the_communicator_on_the_default_system() {
    let system = System::builtin();
    let mut comm = comm(&system);
    let mut tensor = sample_tensor(&system, 4096, F32, ReduceOp::Sum, EVERY_PE).unwrap();
    assert_eq!(tensor.layout().kind(), LayoutKind::MultiPe);
    let report = comm.all_reduce(&mut tensor, ReduceOp::Sum).unwrap();
    assert_eq!(report.algorithm, "hierarchical_allreduce");
    assert!(report.reason.contains("multi_pe"), "{}", report.reason);
    assert!(report.postcondition.held, "{report}");
    assert_eq!(report.run.pes().len(), system.total_pes());
}

#[test]
fn selection_follows_the_size_rules_and_says_which_rule_chose() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    let mut comm = comm(&system);
    // The shipped rules: one_shot up to 16384 bytes per SIP, symmetric_two_shot to 32768,
    // bidirectional_ring above.
    let cases = [
        (1024, "one_shot"),
        (16 << 10, "one_shot"),
        ((16 << 10) + 4, "symmetric_two_shot"),
        (32 << 10, "symmetric_two_shot"),
        ((32 << 10) + 4, "bidirectional_ring"),
        (1 << 20, "bidirectional_ring"),
    ];
    for (bytes, expected) in cases {
        let mut tensor = sample_tensor(&system, bytes, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
        let report = comm.all_reduce(&mut tensor, ReduceOp::Sum).unwrap();
        assert_eq!(report.algorithm, expected, "{bytes} bytes: {}", report.reason);
        assert!(report.reason.starts_with("rule "), "{}", report.reason);
        assert!(report.postcondition.held, "{report}");
    }
}

#[test]
fn consecutive_calls_take_consecutive_generations_and_a_reused_one_is_an_error() {
    let system = System::shape(3, 1, 1, 1).unwrap();
    let mut comm = comm(&system);
    let tensor = sample_tensor(&system, 48, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let (_, gathered) = comm.all_gather(&tensor).unwrap();
    let (_, exchanged) = comm.all_to_all(&tensor).unwrap();
    let mut reduced = tensor.clone();
    let summed = comm.all_reduce(&mut reduced, ReduceOp::Sum).unwrap();
    assert_eq!([gathered.generation, exchanged.generation, summed.generation], [1, 2, 3]);
    for report in [&gathered, &exchanged, &summed] {
        assert!(report.postcondition.held, "{report}");
    }
    let reused = CallOptions { algorithm: None, generation: Some(3), counts: None };
    let err = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &reused).unwrap_err();
    assert!(matches!(err, CommError::Generation { given: 3, last: 3 }), "{err}");
    let zero = CallOptions { algorithm: None, generation: Some(0), counts: None };
    assert!(matches!(
        comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &zero),
        Err(CommError::Generation { given: 0, .. })
    ));
}

#[test]
fn an_algorithm_that_cannot_take_a_shape_says_so_at_plan_time() {
    // `full` links every pair: more than 1024 participants is refused when the plan is built.
    let system = System::shape(1100, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 64, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let mut comm = comm(&system);
    let err = comm
        .call(
            Collective::AllReduce,
            &tensor,
            ReduceOp::Sum,
            0,
            &CallOptions { algorithm: Some("one_shot".into()), generation: None, counts: None },
        )
        .unwrap_err();
    assert!(matches!(err, CommError::Plan(PlanError::Unsupported { topology: "full", .. })), "{err}");
}

#[test]
fn a_layout_the_algorithm_cannot_take_is_a_validation_error() {
    let system = System::shape(2, 2, 2, 2).unwrap();
    let tensor = sample_tensor(&system, 64, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let mut comm = comm(&system);
    let options = CallOptions { algorithm: Some("hierarchical_allreduce".into()), generation: None, counts: None };
    let err = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap_err();
    assert!(matches!(err, CommError::Validation { .. }), "{err}");
}

#[test]
fn naming_an_algorithm_of_another_collective_is_an_error() {
    let system = System::shape(2, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 64, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let options = CallOptions { algorithm: Some("ring_allgather".into()), generation: None, counts: None };
    let err = comm(&system).call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap_err();
    assert!(matches!(err, CommError::WrongCollective { .. }), "{err}");
}

#[test]
fn an_all_to_all_contribution_that_is_not_whole_blocks_is_an_error_naming_the_rank() {
    let system = System::shape(3, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 4 * 4, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let err = comm(&system).all_to_all(&tensor).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, CommError::Inputs { collective: Collective::AllToAll, .. }), "{err}");
    assert!(message.contains("rank 0 (sip 0, cube 0, pe 0) contributes 4 elements"), "{message}");
}

#[test]
fn a_root_outside_the_participants_is_an_error() {
    let system = System::shape(3, 1, 1, 1).unwrap();
    let mut tensor = sample_tensor(&system, 64, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let err = comm(&system).broadcast(&mut tensor, 3).unwrap_err();
    assert!(matches!(err, CommError::BadRoot { root: 3, participants: 3, .. }), "{err}");
}

#[test]
fn the_same_call_gives_the_same_bits_every_time() {
    let system = System::shape(5, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 4096, BF16, ReduceOp::Avg, DpPolicy::LEADER).unwrap();
    let once = || {
        let mut t = tensor.clone();
        comm(&system).all_reduce(&mut t, ReduceOp::Avg).unwrap();
        t
    };
    let (a, b) = (once(), once());
    for (pe, shard) in a.shards() {
        assert_eq!(Some(shard), b.shard(*pe), "{pe}");
    }
}

#[test]
fn a_rule_whose_algorithm_does_not_fit_the_layout_is_skipped_for_the_next() {
    // A cube-leaders tensor is "multi_pe" to the rules, so the hierarchical rule matches first, but its
    // validator wants every PE: the Communicator says so and takes the intercube rule after it.
    let system = System::shape(2, 2, 2, 4).unwrap();
    let mut tensor = sample_tensor(&system, 1024, F32, ReduceOp::Sum, CUBE_LEADERS).unwrap();
    let report = comm(&system).all_reduce(&mut tensor, ReduceOp::Sum).unwrap();
    assert_eq!(report.algorithm, "intercube_allreduce");
    assert!(report.reason.contains("skipped hierarchical_allreduce"), "{}", report.reason);
    assert!(report.postcondition.held, "{report}");
}

#[test]
fn a_report_says_its_size_as_nccl_tests_does() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 256, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let mut comm = comm(&system);
    // Each rank puts in 256 bytes: the gathered output of 1024 is an all-gather's size, and a
    // reduce-scatter's is its input.
    let (_, gathered) = comm.all_gather(&tensor).unwrap();
    assert_eq!((gathered.bytes_per_sip, gathered.size), (256, 1024));
    assert!(gathered.to_string().contains(" on 4 PEs, 1024 bytes per rank, "), "{gathered}");
    let (_, scattered) = comm.reduce_scatter(&tensor, ReduceOp::Sum).unwrap();
    assert_eq!((scattered.bytes_per_sip, scattered.size), (256, 256));
}

#[test]
fn a_prepared_call_runs_on_every_tensor_of_its_layout_and_refuses_another() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    let mut comm = Communicator::new(system.clone());
    let tensor = sample_tensor(&system, 1024, Dtype::F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let prepared = comm.prepare(Collective::AllReduce, &tensor.layout(), None).unwrap();
    for _ in 0..2 {
        let (_, report) = comm.run_prepared(&prepared, &tensor, ReduceOp::Sum, 0, None).unwrap();
        assert!(report.postcondition.held, "{report}");
        assert_eq!(report.algorithm, prepared.algorithm.name);
    }
    let other = sample_tensor(&system, 2048, Dtype::F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let refused = comm.run_prepared(&prepared, &other, ReduceOp::Sum, 0, None).unwrap_err();
    assert!(matches!(refused, CommError::LayoutNotPrepared { .. }), "{refused}");
}

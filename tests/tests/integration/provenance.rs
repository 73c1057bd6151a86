//! Exact postconditions by provenance: every shipped algorithm's outputs hold exactly their
//! contributions, and kernels that a numeric check passes are caught counting one twice or taking
//! one from the wrong index.

use kernbench::Collective;
use kernbench::postcondition::starting_output;
use kernbench::prelude::*;
use kernbench::provenance::{ExactMismatch, Finding};
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::{InstallPlan, System};

/// A one-shot all-reduce that reduces its own input twice: under `max` the numbers are right.
#[ccl_kernel]
fn counts_its_own_twice(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let data = tl.load(Input);
    for peer in (0..n).filter(|&p| p != rank) {
        tl.send(Direction::Peer(peer as u32), &data);
    }
    let mut acc = data.clone();
    tl.reduce(&mut acc, &data, tl.op()); // counted twice
    for peer in (0..n).filter(|&p| p != rank) {
        let theirs = tl.recv(Direction::Peer(peer as u32), data.len(), data.dtype());
        tl.reduce(&mut acc, &theirs, tl.op());
    }
    tl.store(Output, &acc);
}

/// An all-gather whose blocks come one element late: with inputs constant per rank the numbers are
/// right.
#[ccl_kernel]
fn gathers_one_element_late(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let data = tl.load(Input);
    let m = data.len();
    let late = tl.concat(&[tl.slice(&data, 1, m - 1), tl.slice(&data, 0, 1)]);
    for peer in (0..n).filter(|&p| p != rank) {
        tl.send(Direction::Peer(peer as u32), &late);
    }
    tl.store_at(Output, rank * m, &data);
    for peer in (0..n).filter(|&p| p != rank) {
        tl.store_at(Output, peer * m, &tl.recv(Direction::Peer(peer as u32), m, data.dtype()));
    }
}

fn exact_error(result: Result<kernbench::sim::RunReport, MockError>) -> ExactMismatch {
    match result {
        Err(MockError::Exact(exactness)) => exactness.first.expect("a first wrong element"),
        other => panic!("expected an exact postcondition failure, got {other:?}"),
    }
}

#[test]
fn a_contribution_counted_twice_under_max_passes_the_numbers_and_not_provenance() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    let run = || {
        MockRun::new(&system, "full", "leader_only", &counts_its_own_twice::KERNEL)
            .op(ReduceOp::Max)
            .inputs(|_, rank| Tile::filled(I32, 6, rank as f64))
    };
    // The numbers: every rank holds the maximum, 3.
    let report = run().run().unwrap();
    assert!(report.pes().iter().all(|p| p.output == Tile::filled(I32, 6, 3.0)));
    let first = exact_error(run().exact(Collective::AllReduce).run());
    assert_eq!(
        first,
        ExactMismatch {
            rank: 0,
            pe: Some(PeId::new(0, 0, 0)),
            element: Some(0),
            finding: Finding::Extra { rank: 0, index: 0 }
        }
    );
    let text =
        MockError::Exact(kernbench::provenance::Exactness { held: false, wrong: 24, first: Some(first) }).to_string();
    assert!(
        text.contains("rank 0 ((sip 0, cube 0, pe 0)) element 0: it holds rank 0's element 0 once too often"),
        "{text}"
    );
}

#[test]
fn a_contribution_from_the_wrong_index_passes_the_numbers_and_not_provenance() {
    let system = System::shape(3, 1, 1, 1).unwrap();
    let run = || {
        MockRun::new(&system, "full", "leader_only", &gathers_one_element_late::KERNEL)
            .inputs(|_, rank| Tile::filled(F32, 4, rank as f64))
            .outputs(|_, rank, input| starting_output(&Collective::AllGather.into(), input, rank, 3))
    };
    run().run().unwrap();
    let first = exact_error(run().exact(Collective::AllGather).run());
    // Rank 0's block 1 (elements 4..8) should start with rank 1's element 0; it holds element 1.
    assert_eq!(
        first,
        ExactMismatch {
            rank: 0,
            pe: Some(PeId::new(0, 0, 0)),
            element: Some(4),
            finding: Finding::Instead { holds: (1, 1), want: (1, 0) },
        }
    );
}

#[test]
fn every_shipped_algorithm_holds_exactly_its_contributions() {
    let shape = System::shape(2, 2, 1, 2).unwrap();
    for algorithm in kernbench::algorithms::default_registry().algorithms() {
        let system = crate::system_for(algorithm, &shape);
        let plan = InstallPlan::build_with(&system, algorithm.topology, algorithm.mapper).unwrap();
        let n = plan.len();
        let collective = algorithm.collective;
        let len = 3 * n + 1;
        // All-to-all needs whole blocks.
        let len = if collective == Collective::AllToAll { 3 * n } else { len };
        for (op, root) in [(ReduceOp::Sum, 0), (ReduceOp::Max, n - 1)] {
            MockRun::new(&system, algorithm.topology.name(), algorithm.mapper.name(), algorithm.kernel)
                .params(serde_json::Value::Object(algorithm.params.clone()))
                .call(kernbench::sim::Call { op, root, generation: 1 })
                .counts(crate::counts_for(collective, n, len))
                .inputs(|_, rank| Tile::filled(I32, len, rank as f64))
                .collective(collective)
                .exact(collective)
                .run()
                .unwrap_or_else(|e| panic!("{} ({n} ranks, {op}, root {root}): {e}", algorithm.name));
        }
    }
}

#[test]
fn imported_msccl_programs_run_exactly_too() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/msccl");
    for (file, collective, ranks, elements) in [
        ("ring_allreduce.xml", Collective::AllReduce, 4, 8),
        ("alltoall_scratch.xml", Collective::AllToAll, 3, 9),
        ("ring_allgather_inplace.xml", Collective::AllGather, 4, 2),
        ("two_ring_allreduce.xml", Collective::AllReduce, 3, 9),
    ] {
        let system = System::shape(ranks, 1, 1, 1).unwrap();
        MockRun::new(&system, "full", "leader_only", &kernbench::program::MSCCL_PROGRAM)
            .params(serde_json::json!({"file": format!("{dir}/{file}")}))
            .inputs(|_, rank| Tile::filled(I64, elements, rank as f64))
            .outputs(|_, rank, input| starting_output(&collective.into(), input, rank, ranks))
            .exact(collective)
            .run()
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[test]
fn an_exact_communicator_says_so_in_every_report_and_counts_the_run_in_its_memory_estimate() {
    use kernbench::samples::sample_tensor;
    use kernbench::{CallOptions, CommError, Communicator, DpPolicy};
    let system = System::shape(4, 1, 1, 1).unwrap();
    let mut tensor = sample_tensor(&system, 1 << 20, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let mut comm = Communicator::new(system.clone()).exact(true);
    let report = comm.all_reduce(&mut tensor, ReduceOp::Sum).unwrap();
    assert!(report.exact.as_ref().is_some_and(|e| e.held), "{report}");
    assert!(report.to_string().contains("correct (exact: every element holds each of its contributions once)"));
    // 4 ranks of 1 MiB: about 70 MiB without the provenance run, about twice its elements' size more
    // with it.
    let plain = kernbench::estimate::peak_memory(Collective::AllReduce, 4, 1 << 20);
    let limit = Some(plain + (1 << 20));
    let options = CallOptions { algorithm: Some("ring".to_owned()), generation: None, counts: None };
    let mut comm = Communicator::new(system.clone()).max_memory(limit);
    comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap();
    let mut comm = Communicator::new(system).max_memory(limit).exact(true);
    let err = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap_err();
    assert!(matches!(err, CommError::TooMuchMemory { .. }), "{err}");
}

#[test]
fn a_report_whose_exact_check_failed_is_not_called_correct() {
    use kernbench::samples::sample_tensor;
    use kernbench::{CallOptions, Communicator, DpPolicy, KernelSet, RegistrySpec};
    let mut kernels = KernelSet::new();
    kernels.register(&counts_its_own_twice::KERNEL);
    let spec: RegistrySpec = serde_json::from_value(serde_json::json!({
        "algorithms": {"twice": {
            "collective": "all_reduce", "kernel": "counts_its_own_twice", "topology": "full",
            "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "hbm", "params": {},
            "summary": "counts its own input twice"
        }},
        "selection": {}
    }))
    .unwrap();
    let mut registry = kernbench::algorithms::default_registry();
    registry.merge(spec, &kernels).unwrap();
    let system = System::shape(4, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 64, I32, ReduceOp::Max, DpPolicy::LEADER).unwrap();
    let mut comm = Communicator::with_registry(system, registry).exact(true);
    let options = CallOptions { algorithm: Some("twice".to_owned()), generation: None, counts: None };
    let (_, report) = comm.call(Collective::AllReduce, &tensor, ReduceOp::Max, 0, &options).unwrap();
    // Under max the numbers hold; the provenance run sees the contribution counted twice.
    assert!(report.postcondition.held && report.exact.as_ref().is_some_and(|e| !e.held), "{report}");
    let line = report.to_string();
    assert!(!line.contains("correct") && line.contains(": exact postcondition failed: "), "{line}");
}

//! Multicast objects and in-switch reduction (NVLS): the NVLS algorithms are right to the
//! contribution on a switch that computes, take the same time with and without data, and are refused
//! by name where the switch only forwards; an unordered `multimem_st` is a race naming both sides.

use kernbench::prelude::*;
use kernbench::sim::RunError;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::{Collective, Communicator, Op, System};
use kernbench_cli::sweep::{Series, Sweep};

/// 4 SIPs of one PE behind a switch that multicasts and reduces.
fn nvls_system() -> System {
    System::from_json_str(
        r#"{"sips": 4, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
            "switch": {"multicast": true, "reduce_gbps": 100}}"#,
    )
    .unwrap()
}

const NVLS: [(Collective, &str); 3] = [
    (Collective::AllReduce, "nvls_allreduce"),
    (Collective::AllGather, "nvls_allgather"),
    (Collective::ReduceScatter, "nvls_reduce_scatter"),
];

#[test]
fn nvls_algorithms_are_exact_and_as_fast_without_data() {
    for (collective, name) in NVLS {
        let series = Series::Algorithm(name.into());
        for size in [1 << 10, 100 << 10] {
            let sweep = Sweep::new(collective, vec![series.clone()], vec![size]);
            let mut exact = Communicator::new(nvls_system()).exact(true);
            let (row, _) = sweep.call(&mut exact, &series, size).unwrap();
            assert_eq!((row.wrong, row.checked), (0, true), "{name} of {size}");
            let sol = row.sol.unwrap();
            assert!(sol > 0.0 && sol <= 1.0, "{name} of {size}: sol {sol}");
            let mut untimed_data = Communicator::new(nvls_system()).timing_only(true);
            let (without, _) = sweep.call(&mut untimed_data, &series, size).unwrap();
            assert_eq!(without.time_ns.to_bits(), row.time_ns.to_bits(), "{name} of {size}: timing-only differs");
        }
    }
}

#[test]
fn nvls_algorithms_are_refused_by_name_where_the_switch_only_forwards() {
    let forwarding = System::from_json_str(
        r#"{"sips": 4, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched"}"#,
    )
    .unwrap();
    let mut comm = Communicator::new(forwarding);
    for (collective, name) in NVLS {
        let all = Series::parse_list("all", comm.registry(), collective, comm.system()).unwrap();
        assert!(!all.contains(&Series::Algorithm(name.into())), "{name} in `all` without multicast");
        let series = Series::Algorithm(name.into());
        let error =
            Sweep::new(collective, vec![series.clone()], vec![1024]).call(&mut comm, &series, 1024).unwrap_err();
        assert!(error.to_string().contains("its spec gives no `switch`"), "{error}");
    }
}

/// Rank 0 stores into every rank's buffer through the switch; rank 1 reads its copy with nothing
/// ordering the two.
#[ccl_kernel]
fn reads_a_multicast_store_unordered(tl: &Tl) {
    let data = tl.multicast("data", F32, 8);
    if tl.rank() == 0 {
        tl.multimem_st(&data, 0, &tl.load(Input));
    } else if tl.rank() == 1 {
        tl.write(&data.buffer, 0, &Tile::zeros(F32, 8)); // the racy write
    }
    tl.barrier();
}

/// The race `kernel` ends in on the NVLS system, and its two sides (PE and operation) in PE order.
fn race_of(kernel: &'static kernbench::KernelDef) -> (Box<kernbench::symmetric::Race>, [(PeId, Op); 2]) {
    let system = Box::leak(Box::new(nvls_system()));
    let run = MockRun::new(system, "multicast", "leader_only", kernel)
        .inputs(|_, rank| Tile::filled(F32, 8, (rank + 1) as f64));
    let error = match run.run() {
        Err(MockError::Run(RunError::Kernel(KernelError::Race(race)))) => race,
        other => panic!("expected a race, got {other:?}"),
    };
    let mut sides = [(error.first.pe, error.first.op), (error.second.pe, error.second.op)];
    sides.sort_by_key(|&(pe, _)| pe);
    (error, sides)
}

#[test]
fn an_unordered_multimem_st_against_a_peer_s_write_is_a_race_naming_both_sides() {
    let (error, sides) = race_of(&reads_a_multicast_store_unordered::KERNEL);
    assert_eq!(sides, [(PeId::new(0, 0, 0), Op::MultimemSt), (PeId::new(1, 0, 0), Op::Write)], "{error}");
    assert_eq!((error.owner, error.buffer), (PeId::new(1, 0, 0), "data"));
}

/// Every rank reduces its input into every rank's buffer of 2s through the switch at once (the switch
/// applies the reductions one at a time: atomic with each other, so no race), and every rank reads the
/// inputs' sum with `multimem_ld_reduce`.
#[ccl_kernel]
fn reduces_in_the_switch(tl: &Tl) {
    let n = tl.size();
    let input = tl.multicast("input", F32, 8);
    tl.write(&input.buffer, 0, &tl.load(Input));
    let sums = tl.multicast("sums", F32, 8);
    tl.write(&sums.buffer, 0, &Tile::filled(F32, 8, 2.0));
    tl.barrier();
    tl.multimem_red(&sums, 0, &tl.load(Input), ReduceOp::Sum);
    let loaded = tl.multimem_ld_reduce(&input, 0, 8, ReduceOp::Sum);
    tl.barrier();
    let reduced = tl.read(&sums.buffer, 0, 8);
    let sum = (n * (n + 1) / 2) as f64;
    let (want_loaded, want_reduced) = (Tile::filled(F32, 8, sum), Tile::filled(F32, 8, 2.0 + sum));
    if reduced != want_reduced || loaded != want_loaded {
        Err(format!("{reduced:?} / {loaded:?}, expected {want_reduced:?} / {want_loaded:?}"))?;
    }
}

/// Rank 0 reduces into every rank's buffer through the switch while rank 1 reads its copy, nothing
/// ordering the two: an atomic reduction is still a write to a plain read.
#[ccl_kernel]
fn reads_a_multicast_reduction_unordered(tl: &Tl) {
    let data = tl.multicast("data", F32, 8);
    tl.write(&data.buffer, 0, &Tile::zeros(F32, 8));
    tl.barrier();
    if tl.rank() == 0 {
        tl.multimem_red(&data, 0, &tl.load(Input), ReduceOp::Sum);
    } else if tl.rank() == 1 {
        let _ = tl.read(&data.buffer, 0, 8); // the racy read
    }
    tl.barrier();
}

#[test]
fn a_read_unordered_with_a_multimem_red_is_a_race_naming_both_sides() {
    let (error, sides) = race_of(&reads_a_multicast_reduction_unordered::KERNEL);
    assert_eq!(sides, [(PeId::new(0, 0, 0), Op::MultimemRed), (PeId::new(1, 0, 0), Op::Read)], "{error}");
}

#[test]
fn multimem_red_and_ld_reduce_sum_every_rank_s_copy() {
    let system = Box::leak(Box::new(nvls_system()));
    MockRun::new(system, "multicast", "leader_only", &reduces_in_the_switch::KERNEL)
        .inputs(|_, rank| Tile::filled(F32, 8, (rank + 1) as f64))
        .run()
        .unwrap();
}

#[test]
fn the_two_level_nvls_all_reduce_is_exact_across_two_nodes_and_beats_the_ring_there() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systems/2x-dgx-h100-ndr.json");
    let system = kernbench::System::from_file(std::path::Path::new(path)).unwrap();
    let registry = kernbench::algorithms::default_registry();
    let nvls_tree = registry.get("nvls_tree_allreduce").unwrap();
    // Exact: every output element holds every rank's contribution once.
    let mut comm = kernbench::Communicator::new(system.clone()).exact(true);
    let ranks: Vec<Tile> = (0..16).map(|r| Tile::filled(F32, 4096, (r + 1) as f64)).collect();
    let tensor = kernbench::DistTensor::distribute(&system, &ranks, 1, 4096, kernbench::DpPolicy::LEADER).unwrap();
    let options = kernbench::CallOptions { algorithm: Some(nvls_tree.name.clone()), ..Default::default() };
    let (out, report) = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap();
    assert!(report.postcondition.held && report.exact.as_ref().is_some_and(|e| e.wrong == 0), "{report}");
    assert_eq!(out.gather_sip(15).unwrap().to_vec::<f32>().unwrap(), vec![136.0; 4096]);
    // The single-node NVLS algorithms are refused across the nodes; the two-level one is not.
    assert!(registry.get("nvls_allreduce").unwrap().plan(&system).is_err());
    // At 64 MiB a rank, timing only, it is faster than the ring on a lane a rail (by about twice, as at
    // 1 GiB: both are bandwidth-bound from a few MiB, and the ring's 1 GiB run is a minute's test).
    let mut comm = kernbench::Communicator::new(system.clone()).timing_only(true);
    let time = |comm: &mut kernbench::Communicator, name: &str| {
        let tensor =
            kernbench::samples::sample_tensor(&system, 64 << 20, F32, ReduceOp::Sum, kernbench::DpPolicy::LEADER)
                .unwrap();
        let options = kernbench::CallOptions { algorithm: Some(name.to_owned()), ..Default::default() };
        let (_, report) = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap();
        report.run.completion_ns().unwrap()
    };
    let (tree, ring) = (time(&mut comm, "nvls_tree_allreduce"), time(&mut comm, "ring"));
    assert!(tree < ring, "nvls_tree {tree} ns against ring {ring} ns");
}

//! Calls in flight together: collectives sharing links and PEs, against closed forms, each checked.

use kernbench::sim::RunError;
use kernbench::{
    CallOptions, CallReport, Collective, CommError, Communicator, DistTensor, DpPolicy, Dtype, LinkClass, ReduceOp,
    System, TogetherCall,
};

/// `configs/systems/ring16.json`: 16 SIPs on a ring of 500 ns, 50 GiB/s links.
fn ring16() -> System {
    System::from_file(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systems/ring16.json")))
        .unwrap()
}

fn without_data(system: &System, bytes: u64) -> DistTensor {
    kernbench::samples::tensor_without_data(system, bytes, Dtype::F32, DpPolicy::LEADER).unwrap()
}

fn ring(tensor: &DistTensor) -> TogetherCall<'_> {
    let options = CallOptions { algorithm: Some("ring".into()), ..CallOptions::default() };
    TogetherCall { options, ..TogetherCall::new(Collective::AllReduce, tensor, ReduceOp::Sum) }
}

fn completion(report: &CallReport) -> f64 {
    report.run.completion_ns().unwrap()
}

const MIB_64: u64 = 64 << 20;

/// The ring all-reduce on 16 ranks with `chunks` chunks a part on 4 lanes.
fn ring_chunked(tensor: &DistTensor, chunks: usize) -> TogetherCall<'_> {
    let name = format!("ring:chunks={chunks}");
    TogetherCall { options: CallOptions { algorithm: Some(name), ..CallOptions::default() }, ..ring(tensor) }
}

#[test]
fn two_all_reduces_sharing_ring16_each_take_one_at_half_the_bandwidth() {
    let system = ring16();
    let tensor = without_data(&system, MIB_64);
    let link = system.link(LinkClass::InterSip);
    let n = system.sips() as f64;
    // Each call's ring moves 2 (N - 1) / N of S over every link, at half of it: the other call has
    // the rest.
    let half_bandwidth = 2.0 * (n - 1.0) / n * MIB_64 as f64 / (link.bandwidth_gbps / 2.0) + link.latency_ns;
    for chunks in [2, 8] {
        let mut registry = kernbench::algorithms::default_registry();
        let name = format!("ring:chunks={chunks}");
        registry = kernbench_cli::sweep::with_variants(&name, &registry, Collective::AllReduce).unwrap();
        let mut comm = Communicator::with_registry(system.clone(), registry).timing_only(true);
        let alone = completion(&comm.call_together(&[ring_chunked(&tensor, chunks)]).unwrap()[0].1);
        let both = comm.call_together(&[ring_chunked(&tensor, chunks), ring_chunked(&tensor, chunks)]).unwrap();
        let times: Vec<f64> = both.iter().map(|(_, r)| completion(r)).collect();
        let errors: Vec<f64> = times.iter().map(|t| (t - half_bandwidth) / half_bandwidth).collect();
        // A channel carries one message at a time; calls waiting for it take turns (fair queueing), so
        // the call whose messages reached the links first ends a message or two ahead.
        let message = MIB_64 as f64 / n / (4 * chunks) as f64 / link.bandwidth_gbps;
        let lead = times[1] - times[0];
        assert!(
            (0.0..=2.01 * message).contains(&lead),
            "{chunks} chunks: the earlier call leads by {lead} ns, a message takes {message} ns"
        );
        assert!(
            errors.iter().all(|e| e.abs() < 0.01),
            "{chunks} chunks: {times:?} against {half_bandwidth} ns: {errors:?}"
        );
        assert!(times[0] > 1.9 * alone, "{chunks} chunks: {} ns together, {alone} ns alone", times[0]);
    }
}

#[test]
fn calls_run_together_each_hold_their_postcondition_on_their_own_data() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    let tiles = |base: f32| (0..4).map(|s| kernbench::Tile::from_vec(vec![base + s as f32; 4096])).collect::<Vec<_>>();
    let a = DistTensor::distribute(&system, &tiles(1.0), 1, 4096, DpPolicy::LEADER).unwrap();
    let b = DistTensor::distribute(&system, &tiles(100.0), 1, 4096, DpPolicy::LEADER).unwrap();
    let mut comm = Communicator::new(system);
    let max = TogetherCall { op: ReduceOp::Max, ..ring(&b) };
    let both = comm.call_together(&[ring(&a), max]).unwrap();
    assert!(both.iter().all(|(_, r)| r.postcondition.held), "{}\n{}", both[0].1, both[1].1);
    assert_eq!(both[0].0.gather_sip(2).unwrap().to_vec::<f32>().unwrap(), vec![10.0; 4096]);
    assert_eq!(both[1].0.gather_sip(2).unwrap().to_vec::<f32>().unwrap(), vec![103.0; 4096]);
    assert!(both[1].1.generation > both[0].1.generation, "generations are taken in call order");
}

#[test]
fn a_call_started_after_the_other_finished_takes_its_time_alone() {
    let system = ring16();
    let tensor = without_data(&system, 1 << 20);
    let mut comm = Communicator::new(system).timing_only(true);
    let alone = completion(&comm.call_together(&[ring(&tensor)]).unwrap()[0].1);
    let later = TogetherCall { start_ns: 2.0 * alone, ..ring(&tensor) };
    let both = comm.call_together(&[ring(&tensor), later]).unwrap();
    assert_eq!(completion(&both[0].1), alone);
    let second = completion(&both[1].1);
    assert!((second - 3.0 * alone).abs() < 1e-9 * alone, "{second} ns, not {} ns", 3.0 * alone);
}

#[test]
fn calls_on_different_topologies_run_together_on_the_union_of_their_plans() {
    let system = System::builtin();
    let sips = system.sips();
    let tiles: Vec<kernbench::Tile> = (0..sips).map(|s| kernbench::Tile::from_vec(vec![s as f32; 4096])).collect();
    let tensor = DistTensor::distribute(&system, &tiles, 1, 4096, DpPolicy::LEADER).unwrap();
    let named = |collective, algorithm: &str| TogetherCall {
        options: CallOptions { algorithm: Some(algorithm.into()), ..CallOptions::default() },
        ..TogetherCall::new(collective, &tensor, ReduceOp::Sum)
    };
    let calls = [
        named(Collective::AllReduce, "ring"),
        named(Collective::AllReduce, "tree"),
        named(Collective::AllToAll, "pairwise_alltoall"),
    ];
    let mut comm = Communicator::new(system.clone());
    let alone: Vec<f64> =
        calls.iter().map(|c| completion(&comm.call_together(std::slice::from_ref(c)).unwrap()[0].1)).collect();
    let together = comm.call_together(&calls).unwrap();
    for ((call, (_, report)), alone) in calls.iter().zip(&together).zip(alone) {
        let name = call.options.algorithm.as_deref().unwrap();
        assert!(report.postcondition.held, "{name}: {report}");
        assert_eq!(report.algorithm, name);
        assert!(completion(report) >= alone, "{name}: {} ns together, {alone} ns alone", completion(report));
    }
    let expected = (0..sips).map(|s| s as f32).sum::<f32>();
    assert_eq!(together[1].0.gather_sip(1).unwrap().to_vec::<f32>().unwrap(), vec![expected; 4096]);
}

#[test]
fn calls_that_cannot_run_together_are_refused_by_name() {
    let system = System::builtin();
    let tensor = without_data(&system, 1 << 16);
    let mut comm = Communicator::new(system).timing_only(true);
    // A ring's east is not a mesh's: both topologies use it.
    let mesh = TogetherCall {
        options: CallOptions { algorithm: Some("mesh_2d".into()), ..CallOptions::default() },
        ..ring(&tensor)
    };
    match comm.call_together(&[ring(&tensor), mesh]) {
        Err(CommError::Together { why }) => assert!(why.contains("both use direction"), "{why}"),
        other => panic!("expected CommError::Together, got {:?}", other.map(|r| r.len())),
    }
    // Every PE's block and the SIP leaders' are other participants.
    let every_pe =
        kernbench::samples::tensor_without_data(comm.system(), 1 << 16, Dtype::F32, DpPolicy::EVERY_PE).unwrap();
    let hierarchical = TogetherCall {
        options: CallOptions { algorithm: Some("hierarchical_allreduce".into()), ..CallOptions::default() },
        ..TogetherCall::new(Collective::AllReduce, &every_pe, ReduceOp::Sum)
    };
    match comm.call_together(&[ring(&tensor), hierarchical]) {
        Err(CommError::Together { why }) => assert!(why.contains("other PEs"), "{why}"),
        other => panic!("expected CommError::Together, got {:?}", other.map(|r| r.len())),
    }
    // One-sided kernels would share each PE's symmetric heap: their operations are refused.
    let one_sided = TogetherCall {
        options: CallOptions { algorithm: Some("symmetric_one_shot".into()), ..CallOptions::default() },
        ..ring(&tensor)
    };
    match comm.call_together(&[one_sided.clone(), one_sided]) {
        Err(CommError::Run(error)) => {
            let error = RunError::kernel(&error).map(|e| e.to_string()).unwrap_or_else(|| error.to_string());
            assert!(error.contains("symmetric memory"), "{error}");
        }
        other => panic!("expected a run error, got {:?}", other.map(|r| r.len())),
    }
}

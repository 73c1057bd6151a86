//! All-to-all-v and send/recv: seeded uneven counts on every shipped system at 8 and 64 ranks, checked
//! numerically and exactly; groups of arbitrary pairs; and bad counts, which end in errors naming what,
//! where and what would be valid.

use std::sync::Arc;

use kernbench::samples::sample_tensor;
use kernbench::sim::RunError;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::{
    CallOptions, CallReport, Collective, CommError, Communicator, Counts, DistTensor, DpPolicy, Dtype, KernelError,
    PeId, ReduceOp, System, Tile, Transfer,
};

use crate::golden::systems;

/// The shipped algorithms of all-to-all-v and send/recv.
const ALL_TO_ALL_V: [&str; 2] = ["pairwise_alltoallv", "symmetric_alltoallv"];
const SEND_RECV: [&str; 2] = ["pairwise_sendrecv", "symmetric_sendrecv"];

/// `system` with `sips` SIPs, each as the system's own; `None` when its spec does not build with that
/// many (a node count that does not divide them, say).
fn with_sips(system: &System, sips: usize) -> Option<System> {
    let mut spec = system.spec().clone();
    spec.sips = sips;
    System::from_spec(spec).ok()
}

/// Calls `algorithm` of `collective` with `counts` on a one-PE tensor of `elements` f32 per SIP,
/// checking exactly too.
fn call(
    system: &System,
    collective: Collective,
    algorithm: &str,
    elements: usize,
    counts: Option<Counts>,
) -> Result<CallReport, CommError> {
    let mut comm = Communicator::new(system.clone()).exact(true);
    let tensor = sample_tensor(system, (elements * 4) as u64, Dtype::F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let options =
        CallOptions { algorithm: Some(algorithm.to_owned()), counts: counts.map(Arc::new), ..Default::default() };
    comm.call(collective, &tensor, ReduceOp::Sum, 0, &options).map(|(_, report)| report)
}

/// Asserts that the call was right by both checks.
fn assert_correct(report: &CallReport, what: &str) {
    assert!(report.postcondition.held, "{what}: {}", report.postcondition);
    let exact = report.exact.as_ref().unwrap_or_else(|| panic!("{what}: no exact check"));
    assert!(exact.held, "{what}: {exact}");
}

/// Every shipped algorithm of all-to-all-v with counts drawn from `seed` on `ranks` SIPs of every
/// shipped system that builds with that many; returns the systems that ran and those that did not build.
fn seeded_on_every_system(ranks: usize, seed: u64) -> (Vec<String>, Vec<String>) {
    let elements = 300;
    let counts = Counts::seeded(ranks, elements, seed);
    assert!((0..ranks).any(|r| (0..ranks).any(|j| counts.count(r, j) == 0)), "the counts leave some pairs empty");
    let (mut ran, mut unbuilt) = (Vec::new(), Vec::new());
    for (name, system) in systems(&mut String::new()) {
        let Some(system) = with_sips(&system, ranks) else {
            unbuilt.push(name);
            continue;
        };
        for algorithm in ALL_TO_ALL_V {
            let what = format!("{algorithm} on {name} at {ranks} ranks, seed {seed}");
            let report = call(&system, Collective::AllToAllV, algorithm, elements, Some(counts.clone()))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(report.run.pes().len(), ranks, "{what}");
            assert_correct(&report, &what);
        }
        ran.push(name);
    }
    (ran, unbuilt)
}

#[test]
fn seeded_all_to_all_v_is_exact_at_8_ranks_on_every_shipped_system() {
    let (ran, unbuilt) = seeded_on_every_system(8, 1);
    // The built-in system and the nine files but `default.json`, which is the built-in one.
    assert_eq!((ran.len(), unbuilt), (10, vec![]), "ran on {ran:?}");
}

#[test]
fn seeded_all_to_all_v_is_exact_at_64_ranks_on_every_shipped_system() {
    let (ran, unbuilt) = seeded_on_every_system(64, 2);
    assert_eq!((ran.len(), unbuilt), (10, vec![]), "ran on {ran:?}");
}

#[test]
fn send_recv_shift_and_arbitrary_pairs_deliver_each_to_its_receiver() {
    let system = System::shape(5, 1, 1, 1).unwrap();
    let rows: Vec<Tile> = (0..5).map(|r| Tile::from_vec((0..6).map(|e| (r * 10 + e) as f32).collect())).collect();
    let tensor = DistTensor::distribute(&system, &rows, 1, 6, DpPolicy::LEADER).unwrap();
    let transfers = [
        Transfer { from: 0, to: 3, count: 4 },
        Transfer { from: 3, to: 0, count: 2 },
        Transfer { from: 4, to: 3, count: 1 },
        Transfer { from: 2, to: 2, count: 3 },
    ];
    let (out, report) = Communicator::new(system.clone()).exact(true).send_recv(&tensor, &transfers).unwrap();
    assert_correct(&report, "send_recv");
    // Outputs as long as what each rank receives: read shard by shard.
    let got = |sip: u32| out.shard(PeId::new(sip, 0, 0)).unwrap().to_f64_vec();
    assert_eq!(got(0), [30.0, 31.0]);
    assert_eq!(got(1), [0.0; 0]);
    assert_eq!(got(2), [20.0, 21.0, 22.0]);
    // From rank 0 first, then rank 4.
    assert_eq!(got(3), [0.0, 1.0, 2.0, 3.0, 40.0]);
    for algorithm in SEND_RECV {
        let counts = Counts::from_transfers(5, &transfers).unwrap();
        let report = call(&system, Collective::SendRecv, algorithm, 6, Some(counts)).unwrap();
        assert_correct(&report, algorithm);
        let shift = call(&system, Collective::SendRecv, algorithm, 6, Some(Counts::shift(5, 6))).unwrap();
        assert_correct(&shift, algorithm);
    }
}

#[test]
fn bad_counts_are_errors_naming_what_where_and_what_is_valid() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    let message = |counts: Option<Counts>, collective| {
        call(&system, collective, ALL_TO_ALL_V[0], 8, counts).err().map(|e| e.to_string()).unwrap_or_default()
    };
    assert_eq!(
        message(Some(Counts::seeded(3, 8, 1)), Collective::AllToAllV),
        "all_to_all_v: the counts are for 3 ranks but the call has 4: \
         expected a 4 x 4 table"
    );
    assert_eq!(
        message(Some(Counts::seeded(4, 9, 1)), Collective::AllToAllV),
        "all_to_all_v: rank 0 sends 9 elements but its input holds 8: expected at most 8"
    );
    assert_eq!(
        message(None, Collective::AllToAllV),
        "all_to_all_v: the call has no per-pair counts: expected counts, which all_to_all_v needs"
    );
    let tensor = sample_tensor(&system, 32, Dtype::F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let beyond = [Transfer { from: 1, to: 4, count: 2 }];
    let err = Communicator::new(system.clone()).send_recv(&tensor, &beyond).unwrap_err();
    assert!(matches!(err, CommError::Counts { collective: Collective::SendRecv, .. }), "{err}");
    assert_eq!(err.to_string(), "send_recv: transfer 0 (1 -> 4) names rank 4, which is not in the run: expected 0..4");
    let counts = Some(Arc::new(Counts::shift(4, 1)));
    let options = CallOptions { algorithm: Some("ring".into()), counts, ..Default::default() };
    let err = Communicator::new(system.clone()).call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options);
    assert_eq!(
        err.unwrap_err().to_string(),
        "all_reduce: the call has per-pair counts, which all_reduce does not take: expected none"
    );
}

#[test]
fn a_kernel_of_counts_run_without_them_names_the_pe() {
    let system = System::shape(2, 1, 1, 1).unwrap();
    let err = MockRun::new(&system, "full", "leader_only", &kernbench::algorithms::pairwise_uneven::KERNEL)
        .inputs(|_, _| Tile::zeros(Dtype::F32, 4))
        .run()
        .unwrap_err();
    assert!(matches!(err, MockError::Run(RunError::Kernel(KernelError::NoCounts { .. }))), "{err}");
    assert!(
        err.to_string().contains("the call has no per-pair counts: expected the kernel to run as all_to_all_v"),
        "{err}"
    );
}

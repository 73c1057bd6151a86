//! Faults: slow and failed links, NICs and PEs under real collectives, against closed forms and
//! named errors.

use std::time::{Duration, Instant};

use kernbench::sim::{Fault, RunError};
use kernbench::{
    CallOptions, CallReport, Collective, CommError, Communicator, DpPolicy, Dtype, LinkClass, Node, PeId, ReduceOp,
    System,
};

/// `configs/systems/ring16.json`: 16 SIPs on a ring of 500 ns, 50 GiB/s links.
fn ring16() -> System {
    System::from_file(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systems/ring16.json")))
        .unwrap()
}

fn faults(texts: &[String]) -> Vec<Fault> {
    texts.iter().map(|t| t.parse().unwrap()).collect()
}

/// The shipped ring all-reduce of `bytes` a rank on `system`, timing-only, under `faults`, on `threads`.
fn ring_all_reduce(system: &System, bytes: u64, faults: Vec<Fault>, threads: usize) -> Result<CallReport, CommError> {
    let mut comm =
        Communicator::new(system.clone()).timing_only(true).threads(threads).parallel_min_ready(1).faults(faults);
    let tensor = kernbench::samples::tensor_without_data(system, bytes, Dtype::F32, DpPolicy::LEADER).unwrap();
    let options = CallOptions { algorithm: Some("ring".into()), ..CallOptions::default() };
    comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).map(|(_, report)| report)
}

fn completion(report: &CallReport) -> f64 {
    report.run.completion_ns().unwrap()
}

fn run_error(error: CommError) -> RunError {
    match error {
        CommError::Run(error) => error,
        other => panic!("expected a run error, got {other}"),
    }
}

const MIB_64: u64 = 64 << 20;

#[test]
fn a_link_slowed_twice_under_a_ring_all_reduce_takes_the_closed_form() {
    let system = ring16();
    let link = system.link(LinkClass::InterSip);
    let n = system.sips() as f64;
    // The ring moves 2 (N - 1) / N of S over every link, so the slowest link sets the pace: at half
    // the bandwidth, 2 (N - 1) / N x S / (B / 2), plus the pipeline's fill.
    let closed_form = 2.0 * (n - 1.0) / n * MIB_64 as f64 / (link.bandwidth_gbps / 2.0) + link.latency_ns;
    let got = completion(&ring_all_reduce(&system, MIB_64, faults(&["link=3>4:slow=2".into()]), 1).unwrap());
    let error = (got - closed_form).abs() / closed_form;
    assert!(error < 0.01, "{got} ns against the closed form's {closed_form} ns: {:.3} %", 100.0 * error);
    let unslowed = completion(&ring_all_reduce(&system, MIB_64, Vec::new(), 1).unwrap());
    assert!(got > 1.9 * unslowed, "{got} ns slowed, {unslowed} ns not");
}

/// The SIP link `a -> b`'s bytes in `report`.
fn carried(report: &CallReport, a: u32, b: u32) -> u64 {
    let (a, b) = (Node::Pe(PeId::new(a, 0, 0)), Node::Pe(PeId::new(b, 0, 0)));
    let channels = &report.run.time().unwrap().channels;
    channels.iter().filter(|c| (c.channel.from, c.channel.to) == (a, b)).map(|c| c.bytes).sum()
}

#[test]
fn one_link_killed_at_half_a_ring_all_reduce_is_routed_the_long_way_round() {
    let system = ring16();
    let whole = completion(&ring_all_reduce(&system, MIB_64, Vec::new(), 1).unwrap());
    let half = whole / 2.0;
    let killed = faults(&[format!("link=3-4:fail@{half}ns")]);
    let report = ring_all_reduce(&system, MIB_64, killed, 1).unwrap();
    // The ring sends east only: 3 -> 4 carried half the call, and what was left went west, the long
    // way round (3 -> 2 -> ... -> 5 -> 4), over links that carry nothing otherwise.
    let (direct, around) = (carried(&report, 3, 4), carried(&report, 3, 2));
    assert!(direct > 0 && around > 0, "3 -> 4 carried {direct} bytes, 3 -> 2 {around}");
    assert_eq!(carried(&report, 5, 4), around, "every byte sent round arrives from 5");
    assert_eq!(carried(&ring_all_reduce(&system, MIB_64, Vec::new(), 1).unwrap(), 3, 2), 0);
    // Round the long way a message takes 14 more hops of latency, but the links it takes were idle
    // while 3 -> 4 had a queue, so the ring loses at most that latency, and here none (as the README
    // says): what waited behind 3 -> 4's queue leaves at once the other way.
    let detour = 14.0 * system.link(LinkClass::InterSip).latency_ns;
    assert_eq!(completion(&report), whole);
    // Killed from the start, every message pays the detour's latency once, in the pipeline's fill.
    let from_start = ring_all_reduce(&system, MIB_64, faults(&["link=3-4:fail".into()]), 1).unwrap();
    assert_eq!(completion(&from_start), whole + detour);
}

#[test]
fn a_ring_all_reduce_round_a_killed_link_still_holds_its_postcondition() {
    let system = ring16();
    let mut comm = Communicator::new(system.clone()).faults(faults(&["link=7-8:fail@5us".into()]));
    let tensor =
        kernbench::samples::sample_tensor(&system, 1 << 20, Dtype::F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let options = CallOptions { algorithm: Some("ring".into()), ..CallOptions::default() };
    let (_, report) = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap();
    assert!(report.postcondition.held, "{report}");
    assert!(carried(&report, 7, 6) > 0, "nothing went round");
}

#[test]
fn two_links_killed_at_half_cut_the_ring_and_name_the_links_and_the_ranks_cut_off() {
    let system = ring16();
    let whole = completion(&ring_all_reduce(&system, MIB_64, Vec::new(), 1).unwrap());
    let half = whole / 2.0;
    let cut = faults(&[format!("link=3-4:fail@{half}ns"), format!("link=11-12:fail@{half}ns")]);
    let started = Instant::now();
    let error = run_error(ring_all_reduce(&system, MIB_64, cut, 1).unwrap_err());
    // A guard against a hang, not a timing: the run stops at the first message cut off.
    assert!(started.elapsed() < Duration::from_secs(10));
    let RunError::Unreachable(cut) = &error else { panic!("expected Unreachable, got {error}") };
    assert_eq!((cut.from_rank, cut.to_rank), (3, 4), "{error}");
    assert_eq!(cut.cut_off, (4..=11).collect::<Vec<u32>>(), "{error}");
    assert_eq!(cut.failed.len(), 2, "{error}");
    let text = error.to_string();
    for says in ["rank 3", "rank 4", "link=3-4:fail", "link=11-12:fail", "ranks cut off from rank 3: 4..=11"] {
        assert!(text.contains(says), "{text} does not say {says}");
    }
}

#[test]
fn a_pe_that_fails_mid_call_names_its_rank_and_time() {
    let system = ring16();
    let error = run_error(ring_all_reduce(&system, MIB_64, faults(&["pe=5.0.0:fail@1ms".into()]), 1).unwrap_err());
    let RunError::PeFailed { rank, fault, at_ns, .. } = &error else { panic!("expected PeFailed, got {error}") };
    assert_eq!((*rank, fault.as_str(), at_ns.as_str()), (5, "pe=5.0.0:fail@1000000ns", "1000000"));
    // Failing after its kernel finished stops nothing.
    let late = ring_all_reduce(&system, MIB_64, faults(&["pe=5.0.0:fail@1s".into()]), 1).unwrap();
    assert_eq!(completion(&late), completion(&ring_all_reduce(&system, MIB_64, Vec::new(), 1).unwrap()));
}

#[test]
fn a_pe_slowed_from_the_start_is_a_straggler_with_its_rates_divided() {
    // Reductions and copies cost time here, and injections nothing (a slow PE's take longer too).
    let system = System::from_json_str(
        r#"{"sips": 4, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "ring",
            "pe": {"compute_gflops": 2, "memory_gbps": 50, "injection_ns": 0}}"#,
    )
    .unwrap();
    let spec = system.pe_spec();
    let slowed = ring_all_reduce(&system, 1 << 20, faults(&["pe=2.0.0:slow=3".into()]), 1).unwrap();
    let straggler = kernbench::sim::Straggler {
        compute_gflops: Some(spec.compute_gflops / 3.0),
        memory_gbps: Some(spec.memory_gbps / 3.0),
        ..Default::default()
    };
    let timing = kernbench::sim::Timing { stragglers: [(PeId::new(2, 0, 0), straggler)].into(), ..Default::default() };
    let mut comm = Communicator::new(system.clone()).timing(Some(timing)).timing_only(true);
    let tensor = kernbench::samples::tensor_without_data(&system, 1 << 20, Dtype::F32, DpPolicy::LEADER).unwrap();
    let options = CallOptions { algorithm: Some("ring".into()), ..CallOptions::default() };
    let (_, as_straggler) = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap();
    let unslowed = completion(&ring_all_reduce(&system, 1 << 20, Vec::new(), 1).unwrap());
    assert!(completion(&slowed) > unslowed, "{} ns slowed, {unslowed} ns not", completion(&slowed));
    assert_eq!(slowed.run.time(), as_straggler.run.time());
}

#[test]
fn faulted_runs_are_the_same_on_one_thread_and_several() {
    let system = ring16();
    let texts = ["link=3-4:fail@300us".to_string(), "link=9>10:slow=1.5@100us".into(), "pe=12.0.0:slow=2@1ms".into()];
    let one = ring_all_reduce(&system, 16 << 20, faults(&texts), 1).unwrap();
    for threads in [2, 4] {
        let many = ring_all_reduce(&system, 16 << 20, faults(&texts), threads).unwrap();
        assert_eq!(many.run.time(), one.run.time(), "{threads} threads");
    }
}

#[test]
fn a_dead_nic_sends_its_rail_through_another_and_a_slow_one_slows_its_rail() {
    let system = System::from_json_str(
        r#"{"sips": 4, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
            "nodes": {"sips_per_node": 2, "nics_per_node": 2}}"#,
    )
    .unwrap();
    let whole = completion(&ring_all_reduce(&system, 4 << 20, Vec::new(), 1).unwrap());
    let dead = ring_all_reduce(&system, 4 << 20, faults(&["nic=0.0:fail".into()]), 1).unwrap();
    let nic = Node::Nic { node: 0, rail: 0 };
    let channels = &dead.run.time().unwrap().channels;
    assert!(channels.iter().all(|c| c.channel.from != nic && c.channel.to != nic), "the dead NIC carried data");
    assert!(completion(&dead) >= whole);
    let slow = ring_all_reduce(&system, 4 << 20, faults(&["nic=0.0:slow=4".into()]), 1).unwrap();
    assert!(completion(&slow) > whole, "{} ns slowed, {whole} ns not", completion(&slow));
}

#[test]
fn a_fault_the_system_cannot_have_is_refused_before_the_run() {
    let system = ring16();
    for (text, says) in [
        ("link=3-5:fail", "no link joins 3 and 5"),
        ("link=3-4:slow=0.5", "expected a finite number of at least 1"),
        ("pe=16.0.0:fail", "has no PE"),
        ("nic=0.0:fail", "has no NIC 0.0"),
    ] {
        let error = run_error(ring_all_reduce(&system, 1 << 10, faults(&[text.into()]), 1).unwrap_err());
        assert!(matches!(error, RunError::BadFault { .. }), "{text}: {error}");
        assert!(error.to_string().contains(says), "{text}: {error}");
    }
}

#[test]
fn more_faults_than_the_network_numbers_are_refused() {
    let system = ring16();
    let many = vec!["link=3>4:slow=1".parse::<Fault>().unwrap(); 70_000];
    let error = run_error(ring_all_reduce(&system, 1 << 10, many, 1).unwrap_err());
    assert!(error.to_string().contains("fault `70000 faults`: expected at most 65535"), "{error}");
}

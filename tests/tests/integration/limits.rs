//! The Communicator's limits: calls whose estimated memory or messages pass them are refused at once,
//! with the estimate and the limit, before anything is allocated; the estimates bound what runs; a
//! timing's stragglers out of the system spec's ranges are refused before any PE runs.

use std::time::{Duration, Instant};

use kernbench::estimate::{self, DEFAULT_MAX_MESSAGES};
use kernbench::prelude::*;
use kernbench::samples::sample_tensor;
use kernbench::sim::{RunError, Straggler, Timing};
use kernbench::{CallOptions, Collective, CommError, Communicator, DpPolicy, System};

fn named(algorithm: &str) -> CallOptions {
    CallOptions { algorithm: Some(algorithm.to_owned()), generation: None, counts: None }
}

#[test]
fn a_call_over_the_memory_limit_is_refused_before_it_allocates() {
    // An all-gather of 64 KiB from each of 1,024 SIPs gathers 64 MiB on every SIP: 64 GiB of outputs,
    // which the call would take many seconds (or all the machine's memory) to allocate.
    let system = System::shape(1024, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 64 << 10, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let mut comm = Communicator::new(system).max_memory(Some(16 << 30));
    let started = Instant::now();
    let err = comm.call(Collective::AllGather, &tensor, ReduceOp::Sum, 0, &named("ring_allgather")).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let expected = estimate::peak_memory(Collective::AllGather, 1024, 64 << 10);
    assert!(
        matches!(err, CommError::TooMuchMemory { estimate, limit, ranks: 1024, .. } if estimate == expected && limit == 16 << 30),
        "{err}"
    );
    let text = err.to_string();
    // Refused before it is planned: no algorithm needs less than the data's peak.
    assert!(text.contains("all_gather over 1024 ranks of 64.00 KiB each needs at least "), "{text}");
    assert!(text.contains("more than the limit of 16.00 GiB"), "{text}");
    assert_eq!(comm.generation(), 0, "a refused call takes no generation");
}

#[test]
fn a_call_whose_layout_alone_passes_the_memory_limit_is_refused_before_it_is_planned() {
    // `full` cannot be planned on 1,100 SIPs (it links every pair), but the call is refused first, on
    // the least memory any plan of its 1,100 ranks would need: planning a huge system costs seconds and
    // gigabytes, to be refused afterwards.
    let system = System::shape(1100, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 1 << 20, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let floor = estimate::floor(Collective::AllReduce, 1100, 1 << 20, estimate::Checking::Numeric);
    let mut comm = Communicator::new(system.clone()).max_memory(Some(floor - 1));
    let err = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &named("one_shot")).unwrap_err();
    assert!(
        matches!(err, CommError::TooMuchMemory { estimate, ranks: 1100, input_bytes, at_least: true, .. } if estimate == floor && input_bytes == 1 << 20),
        "{err}"
    );
    assert!(err.to_string().contains("each needs at least "), "{err}");
    // At the floor itself the call is planned, and the plan's failure is what the caller hears.
    let mut comm = Communicator::new(system).max_memory(Some(floor));
    let err = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &named("one_shot")).unwrap_err();
    assert!(matches!(err, CommError::Plan(_)), "{err}");
}

#[test]
fn the_symmetric_heap_of_a_one_sided_algorithm_counts_against_the_memory_limit() {
    // 256 SIPs of 1 MiB: the one-shot's inboxes hold 256 inputs on every SIP, 64 GiB in all, where
    // the ring all-reduce needs a few GiB at most.
    let system = System::shape(256, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 1 << 20, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let limit = 8 << 30;
    let ring = estimate::peak_memory(Collective::AllReduce, 256, 1 << 20);
    assert!(ring < limit, "{ring}");
    let mut comm = Communicator::new(system).max_memory(Some(limit)).max_messages(None);
    let err = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &named("symmetric_one_shot")).unwrap_err();
    let heap = (256 * 256) << 20;
    // The data alone fits: refused on the planned call's estimate.
    assert!(
        matches!(err, CommError::TooMuchMemory { estimate, at_least: false, .. } if estimate == ring + heap),
        "{err}"
    );
    assert!(err.to_string().contains(" needs an estimated "), "{err}");
}

#[test]
fn a_call_under_the_memory_limit_runs() {
    let system = System::shape(4, 1, 1, 1).unwrap();
    let mut tensor = sample_tensor(&system, 1 << 10, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let mut comm = Communicator::new(system).max_memory(Some(1 << 30));
    assert!(comm.all_reduce(&mut tensor, ReduceOp::Sum).unwrap().postcondition.held);
}

#[test]
fn a_ring_all_reduce_on_4096_sips_is_refused_for_its_messages_at_once() {
    let system = System::from_json_str(r#"{"sips": 4096, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1}"#).unwrap();
    let started = Instant::now();
    let tensor = sample_tensor(&system, 1 << 10, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let mut comm = Communicator::new(system);
    let err = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &named("ring")).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    // 4,096 ranks, each 2 x 4,095 steps of 2 pieces on 4 lanes.
    let expected = 4096 * 2 * 4095 * 2 * 4;
    assert!(
        matches!(&err, CommError::TooManyMessages { algorithm, participants: 4096, estimate, limit }
            if algorithm == "ring" && *estimate == expected && *limit == DEFAULT_MAX_MESSAGES),
        "{err}"
    );
    let text = err.to_string();
    let bound = format!(
        "ring on 4096 participants would send an estimated {expected} messages, more than the limit of {DEFAULT_MAX_MESSAGES}: use fewer SIPs, another algorithm, or raise the limit"
    );
    assert!(text.starts_with(&bound), "{text}");
}

#[test]
fn a_timing_only_call_is_bounded_by_its_memory_not_its_messages() {
    // The ring all-reduce on 4,096 SIPs that the message limit refuses when it moves data: timing
    // only, it passes the message limit and meets the memory limit, whose estimate counts the messages.
    let system = System::from_json_str(r#"{"sips": 4096, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1}"#).unwrap();
    let tensor = sample_tensor(&system, 1 << 10, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let messages = 4096 * 2 * 4095 * 2 * 4;
    assert!(messages > DEFAULT_MAX_MESSAGES);
    let mut comm = Communicator::new(system);
    let ring = comm.algorithm("ring").unwrap();
    let plan = comm.plan(&ring).unwrap();
    // 4 lanes a rank, and a queue to each of its 2 neighbours (one hop away) on each lane's channel,
    // each of whose 4 slots its messages take; every hop a channel of its own.
    let run = estimate::RunSize::of(ring.kernel.name, ring.launch(), &plan, comm.system(), messages);
    let queues = 2 * 4 * 4096;
    let state = ring.state_bytes() as u64;
    let (slots, hops) = (4 * queues, queues);
    let expected = estimate::RunSize {
        ranks: 4096,
        lanes: 4 * 4096,
        state,
        queues,
        slots,
        hops,
        channels: hops,
        messages,
        kept: 0,
    };
    assert_eq!(run, expected);
    let needs = estimate::timing_only_memory(&run);
    let mut comm = comm.timing_only(true).max_memory(Some(needs - 1));
    let err = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &named("ring")).unwrap_err();
    assert!(
        matches!(err, CommError::TooMuchMemory { estimate, limit, .. } if estimate == needs && limit == needs - 1),
        "{err}"
    );
}

#[test]
fn a_timing_only_ring_keeps_nothing_a_message_so_its_estimate_stops_growing_with_its_messages() {
    // The rings keep no tile a message in a timing-only run, and their channels forget old bookings:
    // the ring all-reduce on 16,384 SIPs sends nearly 2^32 messages, which at what another kernel may
    // keep a message would be an estimate larger than a 24 GiB machine; its estimate is its ranks',
    // lanes', queues' and channels', each channel's list of bookings as large as forgetting lets it grow.
    let system = System::from_json_str(r#"{"sips": 16384, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1}"#).unwrap();
    let registry = kernbench::algorithms::default_registry();
    let ring = registry.get("ring").unwrap();
    let plan = ring.plan(&system).unwrap();
    let layout = kernbench::Layout::of(&system, F32, 1, 1 << 18, DpPolicy::LEADER).unwrap();
    let e = estimate::call(&system, Collective::AllReduce, ring, &plan, &layout, estimate::Checking::TimingOnly);
    assert_eq!(e.messages, 16384 * 2 * 16383 * 2 * 4);
    let run = estimate::RunSize::of(ring.kernel.name, ring.launch(), &plan, &system, e.messages);
    assert_eq!((run.messages, run.kept), (e.messages, 0));
    assert_eq!(e.memory, estimate::timing_only_memory(&run));
    assert!(e.memory < 1 << 30, "{}", estimate::human(e.memory));
    let keeping = estimate::RunSize { kept: run.messages, ..run };
    assert!(estimate::timing_only_memory(&keeping) > 24 << 30);
    // Twice the messages: the same lists, and no more kept; fewer than the lists hold, less.
    let twice = estimate::RunSize { messages: 2 * run.messages, ..run };
    assert_eq!(estimate::timing_only_memory(&twice), e.memory);
    let few = estimate::RunSize { messages: run.channels * 16, ..run };
    assert!(estimate::timing_only_memory(&few) < e.memory);
    // Every ring kernel, and the hierarchical all-reduce; a kernel that keeps what it receives is
    // estimated for all it sends.
    let keep_nothing = [
        "ring_allreduce",
        "bidirectional_ring_allreduce",
        "ring_allgather",
        "ring_reduce_scatter",
        "hierarchical_allreduce",
    ];
    for kernel in keep_nothing {
        assert_eq!(estimate::kept_messages(kernel, e.messages), 0, "{kernel}");
    }
    assert_eq!(estimate::kept_messages("pairwise_alltoall", e.messages), e.messages);
}

#[test]
fn a_timing_only_estimate_counts_every_queue_and_the_channels_its_route_crosses() {
    // Pairwise all-to-all on a ring of 8 SIPs: a queue from each rank to each of the 7 others, whose
    // routes go the short way round, 1 + 2 + 3 + 4 + 3 + 2 + 1 = 16 hops a rank, over no more channels
    // than the system has (its 16 ring channels among them); a message a queue, in its first slot.
    let system = System::from_json_str(r#"{"sips": 8, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1}"#).unwrap();
    let mut comm = Communicator::new(system.clone());
    let pairwise = comm.algorithm("pairwise_alltoall").unwrap();
    let plan = comm.plan(&pairwise).unwrap();
    let run = estimate::RunSize::of(pairwise.kernel.name, pairwise.launch(), &plan, &system, 56);
    assert!(system.channel_count() < 8 * 16);
    let state = pairwise.state_bytes() as u64;
    let expected = estimate::RunSize {
        ranks: 8,
        lanes: 8,
        state,
        queues: 8 * 7,
        slots: 8 * 7,
        hops: 8 * 16,
        channels: system.channel_count() as u64,
        messages: 56,
        kept: 56,
    };
    assert_eq!(run, expected);
    let farther = estimate::RunSize { hops: run.hops + 1, ..run };
    assert!(estimate::timing_only_memory(&farther) > estimate::timing_only_memory(&run));
    // More messages a queue take more of its slots, up to the queue's depth.
    let busier = estimate::RunSize::of(pairwise.kernel.name, pairwise.launch(), &plan, &system, 3 * 56);
    assert_eq!(busier.slots, 3 * 8 * 7);
    assert_eq!(
        estimate::RunSize::of(pairwise.kernel.name, pairwise.launch(), &plan, &system, 100 * 56).slots,
        4 * 8 * 7
    );
    assert!(estimate::timing_only_memory(&busier) > estimate::timing_only_memory(&run));
    // A larger coroutine is more memory a lane.
    let larger = estimate::RunSize { state: run.state + 64, ..run };
    assert_eq!(estimate::timing_only_memory(&larger), estimate::timing_only_memory(&run) + 8 * 64);
}

#[test]
fn raising_the_message_limit_lets_a_call_run() {
    let system = System::shape(16, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 1 << 10, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    // 16 x 2 x 15 x 2 x 4 = 3,840 messages.
    let mut comm = Communicator::new(system.clone()).max_messages(Some(3839));
    let err = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &named("ring")).unwrap_err();
    assert!(matches!(err, CommError::TooManyMessages { estimate: 3840, limit: 3839, .. }), "{err}");
    let mut comm = Communicator::new(system).max_messages(Some(3840));
    let (_, report) = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &named("ring")).unwrap();
    assert!(report.postcondition.held);
}

/// Every shipped algorithm runs on every shipped system, well under the default limit: the README's
/// commands and `bench --algos all` are never refused for their messages.
#[test]
fn every_shipped_algorithm_on_every_shipped_system_is_under_the_message_limit() {
    let registry = kernbench::algorithms::default_registry();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systems");
    let mut systems = 0;
    for file in std::fs::read_dir(dir).unwrap() {
        let system = System::from_file(&file.unwrap().path()).unwrap();
        systems += 1;
        for algorithm in registry.algorithms() {
            let Ok(plan) = algorithm.plan(&system) else { continue };
            let estimate = estimate::messages(algorithm, &plan);
            assert!(estimate < DEFAULT_MAX_MESSAGES / 100, "{} on {}: {estimate}", algorithm.name, system.describe());
        }
    }
    assert!(systems >= 7, "{systems} systems in {dir}");
}

/// Every shipped algorithm on systems of its mapper, at a size below and above its pieces: the
/// messages it sent are at most the estimate.
#[test]
fn the_message_estimate_bounds_every_shipped_algorithm() {
    let registry = kernbench::algorithms::default_registry();
    let shapes = [(1, 1, 1, 1), (2, 1, 1, 1), (5, 1, 1, 1), (8, 1, 1, 1), (3, 2, 2, 2), (4, 2, 2, 4), (6, 1, 1, 1)];
    let mut checked = std::collections::BTreeMap::<&str, usize>::new();
    for algorithm in registry.algorithms() {
        for &(sips, w, h, pes) in &shapes {
            let system = crate::system_for(algorithm, &System::shape(sips, w, h, pes).unwrap());
            let Ok(plan) = algorithm.plan(&system) else { continue };
            let estimate = estimate::messages(algorithm, &plan);
            let policy = algorithm.mapper.layout();
            let blocks = (plan.len() * plan.len()) as u64;
            for bytes in [4 * blocks, 4096 * blocks] {
                let tensor = sample_tensor(&system, bytes, F32, ReduceOp::Sum, policy).unwrap();
                let mut comm = Communicator::new(system.clone());
                let elements = tensor.shards().values().next().map_or(0, |t| t.len());
                let counts = crate::counts_for(algorithm.collective, plan.len(), elements);
                let options = CallOptions { counts, ..named(&algorithm.name) };
                let Ok((_, report)) = comm.call(algorithm.collective, &tensor, ReduceOp::Sum, 0, &options) else {
                    continue;
                };
                let sent = report.run.totals().messages_sent;
                assert!(
                    sent <= estimate,
                    "{} on {}, {bytes} bytes: sent {sent} messages, estimated {estimate}",
                    algorithm.name,
                    system.describe()
                );
                *checked.entry(&algorithm.name).or_default() += 1;
            }
        }
    }
    // Every algorithm ran on some of the shapes, at both sizes.
    assert_eq!(checked.len(), registry.algorithms().count(), "{checked:?}");
    assert!(checked.values().all(|&n| n >= 2), "{checked:?}");
}

fn straggling(pe: PeId, straggler: Straggler) -> Timing {
    Timing { stragglers: [(pe, straggler)].into(), ..Timing::default() }
}

/// A straggler's rate or delay out of the spec's ranges is refused before any PE runs, naming the PE
/// and the field.
#[test]
fn stragglers_out_of_range_are_refused_naming_pe_and_field() {
    let system = System::shape(2, 1, 1, 1).unwrap();
    let pe = PeId::new(1, 0, 0);
    let cases = [
        (Straggler { compute_gflops: Some(0.0), ..Straggler::default() }, "compute_gflops", "0.0"),
        (Straggler { compute_gflops: Some(1e-300), ..Straggler::default() }, "compute_gflops", "1e-300"),
        (Straggler { memory_gbps: Some(f64::INFINITY), ..Straggler::default() }, "memory_gbps", "inf"),
        (Straggler { start_delay_ns: f64::NAN, ..Straggler::default() }, "start_delay_ns", "NaN"),
        (Straggler { start_delay_ns: -1.0, ..Straggler::default() }, "start_delay_ns", "-1.0"),
        (Straggler { start_delay_ns: 1e20, ..Straggler::default() }, "start_delay_ns", "1e20"),
    ];
    for (straggler, field, value) in cases {
        let mut tensor = sample_tensor(&system, 64, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
        let mut comm = Communicator::new(system.clone()).timing(Some(straggling(pe, straggler)));
        let err = comm.all_reduce(&mut tensor, ReduceOp::Sum).unwrap_err();
        assert!(
            matches!(&err, CommError::Run(RunError::BadStraggler { pe: p, field: f, value: v, .. })
                if *p == pe && *f == field && v == value),
            "{field} = {value}: {err}"
        );
        let text = err.to_string();
        assert!(text.starts_with(&format!("timing straggler {pe}: {field} is {value}: expected ")), "{text}");
        assert_eq!(text.lines().count(), 1, "{text}");
    }
    let elsewhere = straggling(PeId::new(2, 0, 0), Straggler::default());
    let err = elsewhere.check(&system).unwrap_err();
    assert!(matches!(err, RunError::BadStraggler { field: "pe", .. }), "{err}");
}

#[test]
fn stragglers_in_range_run_slower() {
    let system = System::shape(2, 1, 1, 1).unwrap();
    let time = |timing: Timing| {
        let mut tensor = sample_tensor(&system, 1 << 12, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
        let mut comm = Communicator::new(system.clone()).timing(Some(timing));
        comm.all_reduce(&mut tensor, ReduceOp::Sum).unwrap().run.completion_ns().unwrap()
    };
    let slow = Straggler { compute_gflops: Some(System::MIN_RATE), start_delay_ns: 1e3, ..Straggler::default() };
    assert!(time(straggling(PeId::new(1, 0, 0), slow)) > time(Timing::default()));
}

//! Runs spread over processes ([`kernbench::sim::exchange`]): the processes here are threads joined by
//! the in-memory exchange, which hands over the same bytes MPI does (`cli/tests/mpi.rs` runs the
//! binary under `mpirun`). Every process must return the single-process run's report, bit for bit (or,
//! reporting to the first, process 0 the report and every other process its part of it), or its error,
//! word for word.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kernbench::System;
use kernbench::prelude::*;
use kernbench::sim::spread::{Exchange, ExchangeError, InMemory, Placement, ReportTo, SipBlocks};
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::sim::{PeReport, RunError, RunReport, Timing};

fn shipped(name: &str) -> System {
    match name {
        "builtin" => System::builtin(),
        file => System::from_file(std::path::Path::new(&format!(
            "{}/../configs/systems/{file}.json",
            env!("CARGO_MANIFEST_DIR")
        )))
        .unwrap(),
    }
}

/// What a run gave one process: its report with its times as JSON (equal text is equal bits: serde_json
/// writes each f64 as its shortest round-trip text), or its error as it reads.
type Seen = Result<(RunReport, String), String>;

fn seen(run: Result<RunReport, MockError>) -> Seen {
    run.map(|r| {
        let time = r.time().map(|t| serde_json::to_string(t).unwrap()).unwrap_or_default();
        (r, time)
    })
    .map_err(|e| e.to_string())
}

/// Runs `make` in each of `processes` threads, each with its endpoint of one in-memory exchange.
fn spread<T: Send>(processes: usize, make: impl Fn(Arc<dyn Exchange>) -> T + Sync) -> Vec<T> {
    let group = InMemory::group(processes);
    std::thread::scope(|s| {
        let make = &make;
        let runs: Vec<_> = group.into_iter().map(|e| s.spawn(move || make(Arc::new(e)))).collect();
        runs.into_iter().map(|r| r.join().expect("a process panicked")).collect()
    })
}

/// `mock`'s run in one process, then spread over each count of `processes`, reporting to the first:
/// process 0 must see what the one process saw, and every other process its part of it.
fn same_everywhere(mock: impl Fn() -> MockRun<'static> + Sync, processes: &[usize], what: &str) -> Seen {
    let alone = seen(mock().run());
    for &n in processes {
        let runs = spread(n, |e| seen(mock().spread_over(e).report_to(ReportTo::First).run()));
        for (process, got) in runs.into_iter().enumerate() {
            let what = format!("{what}, process {process} of {n}");
            match (&alone, &got) {
                (Ok(whole), Ok(got)) if process == 0 => same_report(got, whole, &what),
                (Ok(whole), Ok(got)) => same_part(got, whole, &what),
                _ => assert_eq!(got, alone, "{what}"),
            }
        }
    }
    alone
}

/// `got` must be the `whole` report: outputs, figures and rounds, then times and trace.
fn same_report(got: &(RunReport, String), whole: &(RunReport, String), what: &str) {
    assert_eq!(got.0.part(), None, "{what}: not the whole report");
    assert!(got.0 == whole.0, "{what}: outputs, figures or rounds differ");
    assert!(got.1 == whole.1, "{what}: times or trace differ");
}

/// `got` must be a part of the `whole` report: the PEs it names, with their outputs, figures and times,
/// and the whole run's rounds and completion, without the channels (the whole report's alone).
fn same_part(got: &(RunReport, String), whole: &(RunReport, String), what: &str) {
    let ranks = got.0.part().unwrap_or_else(|| panic!("{what}: a process after the first returned a whole report"));
    assert!(!ranks.is_empty() && ranks.is_sorted(), "{what}: the part's ranks {ranks:?}");
    let pes: Vec<&PeReport> = ranks.iter().map(|&r| &whole.0.pes()[r as usize]).collect();
    assert!(got.0.pes().iter().eq(pes), "{what}: outputs or figures differ");
    assert_eq!(got.0.rounds(), whole.0.rounds(), "{what}: rounds differ");
    let json = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
    let mut time = json(&whole.1);
    if let Some(pes) = time.as_mut().and_then(|t| t.get_mut("pes")).and_then(|p| p.as_array_mut()) {
        *pes = ranks.iter().map(|&r| pes[r as usize].take()).collect();
    }
    if let Some(channels) = time.as_mut().and_then(|t| t.get_mut("channels")) {
        *channels = serde_json::json!([]);
    }
    assert!(json(&got.1) == time, "{what}: times or trace differ");
}

/// The ring all-reduce in two pieces on `system`.
fn ring_allreduce(system: &'static System) -> MockRun<'static> {
    MockRun::new(system, "ring_1d", "all_pes", &kernbench::algorithms::ring_allreduce::KERNEL)
        .params(serde_json::json!({"chunks": 2}))
        .inputs(|_, rank| Tile::filled(F32, 64, rank as f64))
}

#[test]
fn a_spread_run_gives_every_process_the_whole_report_unless_it_reports_to_the_first() {
    let system = ring();
    let mock = || ring_allreduce(system);
    let whole = seen(mock().run()).unwrap();
    for n in [2, 4] {
        for (process, got) in spread(n, |e| seen(mock().spread_over(e).run())).into_iter().enumerate() {
            same_report(&got.unwrap(), &whole, &format!("process {process} of {n}"));
        }
        let runs = spread(n, |e| seen(mock().spread_over(e).report_to(ReportTo::Every).run()));
        for (process, got) in runs.into_iter().enumerate() {
            same_report(&got.unwrap(), &whole, &format!("process {process} of {n}, asked for"));
        }
    }
}

/// Calls of [`count_release`]: only the test below passes it.
static RELEASES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn count_release() {
    RELEASES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn a_spread_run_s_processes_release_freed_memory_as_they_start_after_set_up_and_after_rounds_one_process_never() {
    use std::sync::atomic::Ordering::Relaxed;
    let system = ring();
    let mock = || ring_allreduce(system).release_memory(Some(count_release));
    let whole = seen(mock().run()).unwrap();
    assert_eq!(RELEASES.load(Relaxed), 0, "one process has no whole lists to give back");
    for n in [2, 4] {
        RELEASES.store(0, Relaxed);
        let runs = spread(n, |e| seen(mock().spread_over(e).report_to(ReportTo::First).run()));
        // As the run starts, once the set-up's lists are freed, once the network model is, and once
        // the PEs' states are; and process 0 once more, once its own PEs' reports are in its whole
        // report.
        assert_eq!(RELEASES.load(Relaxed), 4 * n + 1, "{n} processes");
        same_report(runs[0].as_ref().unwrap(), &whole, &format!("process 0 of {n}"));
    }
}

fn leak(system: System) -> &'static System {
    Box::leak(Box::new(system))
}

/// Hands `check` every shipped algorithm's run on each shipped system it has a plan for ("builtin",
/// "ring16", "switched"), made by `mock`, with its name; checks that every algorithm ran on at least
/// two of them.
fn each_shipped_run(mut check: impl FnMut(&(dyn Fn() -> MockRun<'static> + Sync), &str)) {
    let registry = Box::leak(Box::new(kernbench::algorithms::default_registry()));
    let mut compared = 0;
    // Routes between SIPs of a mesh of cubes cross channels of both SIPs' processes; a ring's and a
    // switch's are a link or two.
    for system_name in ["builtin", "ring16", "switched"] {
        let system = leak(shipped(system_name));
        for algorithm in registry.algorithms() {
            let (topology, mapper) = (algorithm.topology.name(), algorithm.mapper.name());
            let Ok(plan) = kernbench::InstallPlan::build(system, topology, mapper) else { continue };
            let ranks = plan.len();
            let mock = || {
                MockRun::new(system, topology, mapper, algorithm.kernel)
                    .params(serde_json::Value::Object(algorithm.params.clone()))
                    .inputs(|_, rank| {
                        let values: Vec<f32> = (0..96).map(|i| ((rank * 5 + i * 3) % 7) as f32 - 3.0).collect();
                        Tile::from_vec(values)
                    })
                    .counts(crate::counts_for(algorithm.collective, ranks, 96))
                    .collective(algorithm.collective)
            };
            check(&mock, &format!("{} on {system_name}", algorithm.name));
            compared += 1;
        }
    }
    assert!(compared >= 2 * registry.algorithms().count(), "only {compared} algorithm-system pairs compared");
}

#[test]
fn every_shipped_algorithm_spread_over_one_to_four_processes_is_identical_bit_for_bit() {
    let timing = Timing { trace: true, ..Timing::default() };
    each_shipped_run(|mock, what| {
        let alone = same_everywhere(|| mock().timing(Some(timing.clone())), &[1, 2, 3, 4], what);
        let (report, time) = alone.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(time.contains("\"spans\":[{"), "{what}: the run was traced");
        assert!(report.rounds() > 0);
    });
}

#[test]
fn every_shipped_algorithm_placed_divided_over_two_to_four_processes_is_the_one_process_run() {
    each_shipped_run(|mock, what| {
        let divided = || mock().placement(Placement::Divided);
        let (report, _) = same_everywhere(divided, &[2, 3, 4], what).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(report.time().is_some_and(|t| !t.channels.is_empty()), "{what}: no channel carried data");
    });
}

#[test]
fn a_run_that_cannot_place_divided_asked_to_fails_before_it_starts_and_says_why() {
    let system = ring();
    let traced = Timing { trace: true, ..Timing::default() };
    let faulted = Timing { faults: vec!["link=1-2:fail@20us".parse().unwrap()], ..Timing::default() };
    for (timing, why) in [(traced, "a traced run"), (faulted, "a run with faults")] {
        let runs = spread(2, |e| {
            ring_allreduce(system).timing(Some(timing.clone())).placement(Placement::Divided).spread_over(e).run()
        });
        for run in runs {
            let Err(MockError::Run(error)) = run else { panic!("{why}: divided anyway: {run:?}") };
            assert!(matches!(error, RunError::Undividable { .. }), "{why}: {error}");
            let message = error.to_string();
            assert!(message.contains(why) && message.contains("Placement::Whole or Auto"), "{message}");
        }
        // Left to choose, it places whole.
        let runs = spread(2, |e| ring_allreduce(system).timing(Some(timing.clone())).spread_over(e).run());
        assert!(runs.iter().all(Result::is_ok), "{why}: {:?}", runs[0].as_ref().err());
    }
}

#[test]
fn timing_only_runs_spread_over_processes_are_the_one_process_run() {
    let registry = Box::leak(Box::new(kernbench::algorithms::default_registry()));
    let system = leak(shipped("builtin"));
    // Messages, puts and gets of tiles without data cross between the processes.
    for name in ["ring", "symmetric_one_shot", "symmetric_two_shot", "chunk_ring"] {
        let algorithm = registry.get(name).unwrap();
        let (topology, mapper) = (algorithm.topology.name(), algorithm.mapper.name());
        let mock = || {
            MockRun::new(system, topology, mapper, algorithm.kernel)
                .params(serde_json::Value::Object(algorithm.params.clone()))
                .inputs(|_, _| Tile::without_data(F32, 1 << 20))
                .timing_only(true)
        };
        for placement in [Placement::Whole, Placement::Divided] {
            let mock = || mock().placement(placement);
            let what = format!("{name}, {placement:?}");
            let (report, _) = same_everywhere(mock, &[2, 4], &what).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(report.pes().iter().all(|p| !p.output.has_data()), "{what}");
        }
    }
}

#[path = "faulty.rs"]
mod faulty;
use faulty::{fails_on_one_rank, waits_before_sending};

fn ring() -> &'static System {
    leak(System::shape(4, 1, 1, 2).unwrap())
}

#[test]
fn a_kernel_failing_in_one_process_ends_every_process_with_its_error() {
    let system = ring();
    for fails in [1, 6] {
        let mock = || {
            MockRun::new(system, "ring_1d", "all_pes", &fails_on_one_rank::KERNEL)
                .params(serde_json::json!({"fails": fails}))
                .inputs(|_, rank| Tile::filled(F32, 8, rank as f64))
        };
        let start = Instant::now();
        let alone = same_everywhere(mock, &[2, 4], &format!("rank {fails} fails"));
        let error = alone.expect_err("the kernel fails");
        assert!(error.contains("not a number") || error.contains("invalid digit"), "{error}");
        assert!(start.elapsed() < Duration::from_secs(30), "the failure took {:?} to end the run", start.elapsed());
    }
}

#[test]
fn a_deadlock_across_processes_is_reported_in_every_process_as_in_one() {
    let system = ring();
    let mock = || {
        MockRun::new(system, "ring_1d", "leader_only", &waits_before_sending::KERNEL)
            .inputs(|_, rank| Tile::filled(F32, 8, rank as f64))
    };
    let error = same_everywhere(mock, &[2, 4], "waits before sending").expect_err("a deadlock");
    assert!(error.starts_with("deadlock: no kernel can make progress; 0 of 4 finished, 4 blocked"), "{error}");
    // The blocked PEs are listed in rank order whichever process holds them.
    let sips: Vec<usize> =
        error.lines().filter_map(|l| l.trim().strip_prefix("(sip ")).map(|l| l[..1].parse().unwrap()).collect();
    assert_eq!(sips, vec![0, 1, 2, 3], "{error}");
}

/// Rank `r` reduces a long tile `r` times, then barriers over its column of the 2-D split by 4: ranks
/// `r` and `r + 4`, which a spread run over 2 processes holds in different processes.
#[ccl_kernel]
fn barriers_over_a_column(tl: &Tl) {
    let (_, column) = tl.team_split_2d(4);
    let mut acc = Tile::zeros(F32, 1 << 12);
    for _ in 0..tl.rank() {
        tl.reduce(&mut acc, &Tile::zeros(F32, 1 << 12), ReduceOp::Sum);
    }
    tl.barrier_team(&column);
}

#[test]
fn a_team_barrier_across_processes_releases_as_in_one() {
    let system = ring();
    let mock = || MockRun::new(system, "ring_1d", "all_pes", &barriers_over_a_column::KERNEL);
    let (report, _) = same_everywhere(mock, &[2, 4], "a column's barrier").unwrap();
    // Each column is released when its slower member (rank r + 4) arrives: columns one apart.
    let finish: Vec<f64> = report.time().unwrap().pes.iter().map(|p| p.finish_ns).collect();
    for r in 0..4 {
        assert_eq!(finish[r].to_bits(), finish[r + 4].to_bits(), "{finish:?}");
    }
    assert!(finish.windows(2).take(3).all(|w| w[0] < w[1]), "{finish:?}");
}

/// A multicast object over this rank's node.
#[ccl_kernel]
fn multicasts_over_its_node(tl: &Tl) {
    let _ = tl.multicast_team(&tl.team_node(), "node", F32, 8);
}

#[test]
fn a_multicast_over_a_node_held_by_one_process_is_still_refused_in_a_spread_run() {
    // 2 nodes of 2 SIPs: over 2 processes, each process holds one node.
    let spec = r#"{"sips": 4, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
        "switch": {"multicast": true, "reduce_gbps": 100}, "nodes": {"sips_per_node": 2}}"#;
    let system = leak(System::from_json_str(spec).unwrap());
    let mock = || MockRun::new(system, "full", "leader_only", &multicasts_over_its_node::KERNEL);
    mock().run().unwrap();
    for (process, got) in spread(2, |e| seen(mock().spread_over(e).run())).into_iter().enumerate() {
        let error = got.expect_err("a multicast in a spread run");
        assert!(error.contains("multicast_team: rank 2's heap is in another process"), "process {process}: {error}");
    }
}

/// A ring on `system` in which every rank sends its input (4 elements, its rank) east and stores what
/// comes from the west.
fn ring_pass(system: &'static System) -> MockRun<'static> {
    MockRun::new(system, "ring_1d", "all_pes", &fails_on_one_rank::KERNEL)
        .params(serde_json::json!({"fails": usize::MAX}))
        .inputs(|_, rank| Tile::filled(F32, 4, rank as f64))
}

#[test]
fn a_round_with_thousands_of_transfers_is_handed_over_as_one_with_few() {
    // 3 SIPs of 2,048 PEs on a ring: every process sends 2,048 or more messages in the first round, more
    // transfer records than a hand-over carries inline to each process, so they go once to all in an
    // all-gather.
    let system = leak(System::shape(3, 4, 4, 128).unwrap());
    let (report, _) = same_everywhere(|| ring_pass(system), &[2, 3], "a ring of 6,144 PEs").expect("the ring runs");
    assert_eq!(report.output(kernbench::PeId { sip: 0, cube: 0, pe: 1 }), Some(&Tile::filled(F32, 4, 0.0)));
}

#[test]
fn a_part_of_more_pes_than_a_piece_of_the_report_reaches_process_0_whole() {
    // 2 SIPs of 10,240 PEs on a ring: process 1 sends process 0 its part in pieces (8,192 PEs at
    // most each), which process 0 must put together in rank order.
    let system = leak(System::shape(2, 4, 4, 640).unwrap());
    let (report, _) = same_everywhere(|| ring_pass(system), &[2], "a ring of 20,480 PEs").expect("the ring runs");
    // Every rank holds what its west neighbour sent: the last rank's input is rank 0's output.
    let outputs: Vec<f32> = report.pes().iter().map(|p| p.output.to_vec::<f32>().unwrap()[0]).collect();
    assert_eq!(outputs[0], 20_479.0);
    assert!(outputs.windows(2).all(|w| w[1] == w[0] + 1.0 || w[0] == 20_479.0), "outputs out of rank order");
}

#[test]
fn a_process_that_never_hands_over_ends_the_others_with_a_named_timeout() {
    let mut group = InMemory::group(2).into_iter();
    let (first, second) = (group.next().unwrap(), group.next().unwrap());
    let first = first.with_timeout(Duration::from_millis(200));
    let start = Instant::now();
    let error = first.all_to_all(vec![vec![1], vec![2]]).unwrap_err();
    assert!(matches!(error, ExchangeError::Timeout { process: 0, processes: 2, .. }), "{error:?}");
    assert!(error.to_string().starts_with("exchange timeout: process 0 of 2 waited"), "{error}");
    assert!(start.elapsed() < Duration::from_secs(5));
    // The other process, coming late, is told the first left.
    let error = second.all_to_all(vec![vec![3], vec![4]]).unwrap_err();
    assert_eq!(error, ExchangeError::Gone { process: 1, gone: 0 });
    // A process that left is named at once, without waiting for the timeout.
    let mut group = InMemory::group(2).into_iter();
    let (first, second) = (group.next().unwrap(), group.next().unwrap());
    drop(second);
    let start = Instant::now();
    let error = first.all_to_all(vec![vec![1], vec![2]]).unwrap_err();
    assert_eq!(error, ExchangeError::Gone { process: 0, gone: 1 });
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_run_spread_over_more_processes_than_sips_is_refused() {
    let system = ring();
    let errors = spread(5, |e| {
        match MockRun::new(system, "ring_1d", "leader_only", &waits_before_sending::KERNEL).spread_over(e).run() {
            Err(MockError::Run(RunError::Exchange(e))) => e.to_string(),
            other => panic!("{other:?}"),
        }
    });
    for error in errors {
        assert_eq!(error, "a run on 4 SIPs cannot be spread over 5 processes: expected 1..=4 processes");
    }
}

#[test]
fn sip_blocks_give_each_process_a_contiguous_block_of_sips() {
    for sips in 1..=17 {
        let system = System::shape(sips, 1, 1, 1).unwrap();
        for processes in 1..=sips {
            let held = SipBlocks::new(&system, processes).unwrap();
            let blocks: Vec<_> = (0..processes).map(|p| held.sips_of(p)).collect();
            assert_eq!(blocks.first().unwrap().start, 0);
            assert_eq!(blocks.last().unwrap().end, sips);
            for (p, block) in blocks.iter().enumerate() {
                assert!(!block.is_empty(), "{sips} SIPs over {processes}: process {p} holds none");
                assert!(block.len() <= sips.div_ceil(processes));
                for sip in block.clone() {
                    assert_eq!(held.process_of(sip), p, "SIP {sip} of {sips} over {processes}");
                }
                if p > 0 {
                    assert_eq!(blocks[p - 1].end, block.start);
                }
            }
        }
        assert!(SipBlocks::new(&system, sips + 1).is_err());
        assert!(SipBlocks::new(&system, 0).is_err());
    }
}

#[test]
fn atomics_and_windows_spread_over_processes_are_the_one_process_run() {
    let gpus = leak(System::shape(4, 1, 1, 1).unwrap());
    let tickets = || {
        MockRun::new(gpus, "full", "leader_only", &crate::atomics::takes_a_ticket::KERNEL)
            .inputs(|_, _| Tile::filled(F32, 1, 0.0))
    };
    // Placed whole and divided: the atomics' replies come back over other processes' channels.
    for placement in [Placement::Whole, Placement::Divided] {
        let tickets = || tickets().placement(placement);
        same_everywhere(tickets, &[2, 4], &format!("tickets, {placement:?}")).unwrap();
        let seeded = || tickets().schedule(Some(5));
        same_everywhere(seeded, &[2, 4], &format!("tickets under seed 5, {placement:?}")).unwrap();
        let one_shot = || {
            MockRun::new(gpus, "full", "leader_only", &crate::atomics::epoch_one_shot::KERNEL)
                .inputs(|_, rank| Tile::filled(F32, 64, (rank + 1) as f64))
                .window("slots", F32, 4 * 64)
                .window("flags", I64, 4)
                .calls(3)
                .placement(placement)
        };
        let (report, _) = same_everywhere(one_shot, &[2, 4], &format!("a one-shot on windows, {placement:?}")).unwrap();
        assert!(report.pes().iter().all(|p| p.output == Tile::filled(F32, 64, 10.0)));
    }
}

#[test]
fn faulted_runs_spread_over_processes_are_the_one_process_run() {
    let registry = Box::leak(Box::new(kernbench::algorithms::default_registry()));
    let system = leak(shipped("ring16"));
    let algorithm = registry.get("ring").unwrap();
    // A detour, a cut, a failed PE and a slow link, each from the middle of a 40 us call.
    let cases: [&[&str]; 4] = [
        &["link=3-4:fail@20us"],
        &["link=3-4:fail@20us", "link=11-12:fail@20us"],
        &["pe=5.0.0:fail@20us"],
        &["link=9>10:slow=2@5us"],
    ];
    for faults in cases {
        let timing = Timing { faults: faults.iter().map(|f| f.parse().unwrap()).collect(), ..Timing::default() };
        let mock = || {
            MockRun::new(system, algorithm.topology.name(), algorithm.mapper.name(), algorithm.kernel)
                .params(serde_json::Value::Object(algorithm.params.clone()))
                .inputs(|_, _| Tile::without_data(F32, 1 << 18))
                .timing(Some(timing.clone()))
                .timing_only(true)
        };
        let seen = same_everywhere(mock, &[2, 4], &format!("{faults:?}"));
        // The cut and the failed PE end the run with their errors; the others complete.
        assert_eq!(seen.is_ok(), faults.len() == 1 && !faults[0].starts_with("pe="), "{faults:?}: {:?}", seen.err());
    }
}

/// An in-memory exchange that counts the bytes other processes hand this one.
#[derive(Debug)]
struct Counted {
    exchange: InMemory,
    received: Arc<std::sync::atomic::AtomicU64>,
}

impl Counted {
    fn count(&self, got: &[Vec<u8>]) {
        let me = self.exchange.process();
        let bytes: usize = got.iter().enumerate().filter(|&(p, _)| p != me).map(|(_, b)| b.len()).sum();
        self.received.fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Exchange for Counted {
    fn processes(&self) -> usize {
        self.exchange.processes()
    }

    fn process(&self) -> usize {
        self.exchange.process()
    }

    fn all_to_all(&self, to_each: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, ExchangeError> {
        let got = self.exchange.all_to_all(to_each)?;
        self.count(&got);
        Ok(got)
    }

    fn all_gather(&self, mine: Vec<u8>) -> Result<Vec<Vec<u8>>, ExchangeError> {
        let got = self.exchange.all_gather(mine)?;
        self.count(&got);
        Ok(got)
    }
}

#[test]
fn placed_divided_every_process_is_handed_fewer_bytes_than_placed_whole() {
    // 1,024 PEs in 4 SIPs: the hierarchical all-reduce's transfers stay in their SIP but for its ring
    // of SIP leaders, so each process of 4 has to do with few of the others' transfers. (Which
    // processes a queue's transfers go to is the network model's unit test.)
    let system = leak(System::shape(4, 4, 4, 16).unwrap());
    let mock = |placement| {
        MockRun::new(system, "hierarchical_3level", "all_pes", &kernbench::algorithms::hierarchical_allreduce::KERNEL)
            .params(serde_json::json!({"chunks": 1}))
            .inputs(|_, _| Tile::without_data(F32, 1 << 10))
            .timing_only(true)
            .placement(placement)
    };
    // The bytes each process was handed.
    let handed = |placement| -> Vec<u64> {
        std::thread::scope(|s| {
            let runs: Vec<_> = InMemory::group(4)
                .into_iter()
                .map(|exchange| {
                    s.spawn(move || {
                        let received = Arc::new(std::sync::atomic::AtomicU64::new(0));
                        let counted = Counted { exchange, received: Arc::clone(&received) };
                        mock(placement).spread_over(Arc::new(counted)).run().unwrap();
                        received.load(std::sync::atomic::Ordering::Relaxed)
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join().expect("a process panicked")).collect()
        })
    };
    let (whole, divided) = (handed(Placement::Whole), handed(Placement::Divided));
    // Placed whole, every process is handed every other's transfers; divided, for all its passes'
    // words on where transfers got to, fewer bytes (a quarter fewer here: each of the others' rounds
    // of 32 transfers, 34 bytes each, is a process's own business).
    for (p, (whole, divided)) in whole.iter().zip(&divided).enumerate() {
        assert!(divided < whole, "process {p}: handed {divided} bytes divided, {whole} whole");
    }
}

//! Atomics, memory scopes, waits with comparisons, windows across calls and seeded schedules: what
//! each does when used right (the bugs they let a kernel make are the corpus in `one_sided_bugs`).

use kernbench::prelude::*;
use kernbench::sim::RunError;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::{KernelDef, Op, System};

/// `kernel` on every PE of one cube of `pes`, every pair linked, each input one f32 of `rank + 1`.
fn on_cube(pes: usize, kernel: &'static KernelDef) -> MockRun<'static> {
    let system: &'static System = Box::leak(Box::new(System::shape(1, 1, 1, pes).unwrap()));
    MockRun::new(system, "full", "all_pes", kernel).inputs(|_, rank| Tile::filled(F32, 1, (rank + 1) as f64))
}

fn outputs(result: Result<kernbench::sim::RunReport, MockError>) -> Vec<f64> {
    let report = result.unwrap_or_else(|e| panic!("{e}"));
    report.pes().iter().map(|p| p.output.to_f64_vec()[0]).collect()
}

/// Every rank takes a ticket from rank 0's counter and keeps it as its output.
#[ccl_kernel]
pub(crate) fn takes_a_ticket(tl: &Tl) {
    let counter = tl.symmetric("counter", I64, 1);
    let ticket = tl.atomic_fetch_add(0, &counter, 0, 1, MemoryOrder::Relaxed, Scope::System);
    tl.store(Output, &Tile::filled(F32, 1, ticket as f64));
}

#[test]
fn fetch_add_hands_out_every_ticket_once_and_a_seed_replays_its_order() {
    let mut tickets = outputs(on_cube(4, &takes_a_ticket::KERNEL).run());
    // Rank 0's own counter is changed at once; the others' requests land together.
    assert_eq!(tickets[0], 0.0);
    tickets.sort_by(f64::total_cmp);
    assert_eq!(tickets, [0.0, 1.0, 2.0, 3.0]);
    // Which of the tied requests lands first is the schedule's to say: some seed orders them otherwise.
    let schedules = on_cube(4, &takes_a_ticket::KERNEL).schedules(1..=16).unwrap();
    let divergence = schedules.differs.expect("some seed hands out the tickets in another order");
    assert!(divergence.what.contains("output differs"), "{divergence}");
    let replay = || outputs(on_cube(4, &takes_a_ticket::KERNEL).schedule(Some(divergence.seed)).run());
    let (first, again) = (replay(), replay());
    assert_eq!(first, again, "seed {} replays differently", divergence.seed);
    let default = outputs(on_cube(4, &takes_a_ticket::KERNEL).run());
    assert_ne!(first, default, "seed {} was reported to differ", divergence.seed);
}

#[test]
fn without_atomics_every_seed_gives_the_default_outcome() {
    let system = System::shape(1, 1, 1, 4).unwrap();
    for kernel in [
        &kernbench::algorithms::symmetric_one_shot_allreduce::KERNEL,
        &kernbench::algorithms::symmetric_two_shot_allreduce::KERNEL,
        &kernbench::algorithms::symmetric_alltoall::KERNEL,
    ] {
        let run = MockRun::new(&system, "full", "all_pes", kernel)
            .inputs(|_, rank| Tile::from_f64s(F32, &[rank as f64 + 0.5; 8]));
        let schedules = run.schedules(0..8).unwrap();
        assert_eq!((schedules.runs, schedules.differs), (8, None), "{}", kernel.name);
    }
}

/// Each rank adds its rank + 1 to rank 0's total under a spin lock on rank 0: compare-and-swap to
/// take it (acquire), a plain get and put inside, a swap to give it back (release) at `release`.
#[ccl_kernel]
fn sums_under_a_lock(tl: &Tl, release: String) {
    let release = if release == "sip" { Scope::Sip } else { Scope::System };
    let lock = tl.symmetric("lock", I64, 1);
    let total = tl.symmetric("total", F32, 1);
    if tl.rank() == 0 {
        tl.write(&total, 0, &Tile::zeros(F32, 1));
    }
    tl.barrier();
    while tl.atomic_compare_swap(0, &lock, 0, 0, 1, MemoryOrder::Acquire, Scope::System) != 0 {}
    // Rank 0 reads and writes its own copy; the others get and put it.
    let mut sum = if tl.rank() == 0 { tl.read(&total, 0, 1) } else { tl.get(0, &total, 0, 1) };
    tl.reduce(&mut sum, &tl.load(Input), ReduceOp::Sum);
    if tl.rank() == 0 {
        tl.write(&total, 0, &sum);
    } else {
        tl.put(0, &total, 0, &sum);
        tl.quiet();
    }
    tl.atomic_swap(0, &lock, 0, 0, MemoryOrder::Release, release);
    tl.barrier();
    if tl.rank() == 0 {
        tl.store(Output, &tl.read(&total, 0, 1));
    }
}

#[test]
fn a_lock_taken_and_given_back_at_system_scope_orders_its_critical_sections() {
    let two_gpus: &'static System = Box::leak(Box::new(System::shape(4, 1, 1, 1).unwrap()));
    for threads in [1, 2, 4] {
        let run = MockRun::new(two_gpus, "full", "leader_only", &sums_under_a_lock::KERNEL)
            .params(serde_json::json!({"release": "system"}))
            .inputs(|_, rank| Tile::filled(F32, 1, (rank + 1) as f64))
            .threads(threads)
            .parallel_min_ready(1);
        assert_eq!(outputs(run.run())[0], 10.0, "{threads} threads");
    }
}

/// Rank 1 counts down rank 0's signal and waits on its own element with each comparison.
#[ccl_kernel]
fn waits_with_comparisons(tl: &Tl) {
    let flags = tl.symmetric("flags", I32, 2);
    if tl.rank() == 0 {
        tl.signal(1, 0, 3);
        tl.atomic_add(1, &flags, 1, -2, MemoryOrder::Release, Scope::System);
        tl.quiet();
    } else {
        let seen = tl.signal_wait_until(0, Cmp::Eq, 3);
        let below = tl.wait_value(&flags, 1, Cmp::Lt, 0, Scope::System);
        let same = tl.wait_value(&flags, 0, Cmp::Ne, 1, Scope::System);
        tl.note("seen", seen);
        tl.note("below", below);
        tl.note("same", same);
    }
}

#[test]
fn waits_compare_as_asked_and_return_what_they_saw() {
    let report = on_cube(2, &waits_with_comparisons::KERNEL).run().unwrap_or_else(|e| panic!("{e}"));
    let notes = &report.pes()[1].notes;
    assert_eq!((notes["seen"].as_str(), notes["below"].as_str(), notes["same"].as_str()), ("3", "-2", "0"));
}

/// An atomic on a float buffer, or past the end of an integer one.
#[ccl_kernel]
fn misaddresses_an_atomic(tl: &Tl, what: String) {
    let floats = tl.symmetric("floats", F32, 4);
    let ints = tl.symmetric("ints", I32, 4);
    if what == "float" {
        tl.atomic_add(0, &floats, 0, 1, MemoryOrder::Relaxed, Scope::System);
    } else {
        tl.atomic_fetch_max(0, &ints, 4, 1, MemoryOrder::Relaxed, Scope::System);
    }
}

#[test]
fn an_atomic_on_a_float_buffer_or_past_the_end_is_refused_by_name() {
    for (what, op, index) in [("float", Op::AtomicAdd, 0), ("past", Op::AtomicFetchMax, 4)] {
        let run = on_cube(1, &misaddresses_an_atomic::KERNEL).params(serde_json::json!({ "what": what }));
        let Err(MockError::Run(RunError::Kernel(error))) = run.run() else { panic!("{what}: expected an error") };
        assert!(matches!(&error, KernelError::BadAtomic { op: o, index: i, .. } if *o == op && *i == index), "{error}");
        assert!(error.to_string().contains("expected an i32 or i64 buffer and an element below 4"), "{error}");
    }
}

/// Counts its calls in window `calls` (its own copy, at once) and outputs the count before this one.
#[ccl_kernel]
fn counts_its_calls(tl: &Tl) {
    let calls = tl.window("calls");
    let before = tl.atomic_fetch_add(tl.rank(), &calls, 0, 1, MemoryOrder::Relaxed, Scope::Pe);
    tl.store(Output, &Tile::filled(F32, 1, before as f64));
}

#[test]
fn a_window_keeps_its_values_from_one_call_to_the_next() {
    let run = on_cube(2, &counts_its_calls::KERNEL).window("calls", I64, 1);
    assert_eq!(outputs(run.calls(3).run()), [2.0, 2.0]);
    // A fresh run starts from zeros again.
    assert_eq!(outputs(on_cube(2, &counts_its_calls::KERNEL).window("calls", I64, 1).run()), [0.0, 0.0]);
}

#[test]
fn a_window_nobody_registered_is_named_with_those_that_were() {
    let run = on_cube(1, &counts_its_calls::KERNEL).window("other", I64, 1);
    let Err(MockError::Call { call: 1, source: RunError::Kernel(error), .. }) = run.run() else {
        panic!("expected the call to fail")
    };
    assert!(
        matches!(&error, KernelError::NoSuchWindow { name, registered, .. } if name == "calls" && registered == &["other"])
    );
    assert!(error.to_string().contains("window `calls` is not registered: expected one of [other]"), "{error}");
    let duplicate = on_cube(1, &counts_its_calls::KERNEL).window("calls", I64, 1).window("calls", I32, 2).run();
    assert!(matches!(duplicate, Err(MockError::Window(_))), "{duplicate:?}");
}

/// A one-shot all-reduce on windows that waits, on every call, for the call's own epoch in each
/// peer's flag: the right way to reuse flags across calls.
#[ccl_kernel]
pub(crate) fn epoch_one_shot(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let data = tl.load(Input);
    let len = data.len();
    let slots = tl.window("slots");
    let flags = tl.window("flags");
    let epoch = tl.context().generation as i64;
    for peer in (0..n).filter(|&p| p != rank) {
        tl.put(peer, &slots, rank * len, &data);
        tl.fence();
        tl.atomic_swap(peer, &flags, rank, epoch, MemoryOrder::Release, Scope::System);
    }
    let mut acc = data.clone();
    for peer in (0..n).filter(|&p| p != rank) {
        tl.wait_value(&flags, peer, Cmp::Ge, epoch, Scope::System);
        tl.reduce(&mut acc, &tl.read(&slots, peer * len, len), ReduceOp::Sum);
    }
    // Nobody writes a rank's slots again before it has read them: the next call's puts wait for this.
    tl.barrier();
    tl.store(Output, &acc);
}

#[test]
fn a_one_shot_all_reduce_that_waits_for_its_call_s_epoch_is_right_on_every_call_and_as_fast_without_data() {
    let run = |timing_only: bool| {
        on_cube(4, &epoch_one_shot::KERNEL)
            .inputs(|_, rank| Tile::from_f64s(F32, &[(rank + 1) as f64; 64]))
            .window("slots", F32, 4 * 64)
            .window("flags", I64, 4)
            .calls(3)
            .timing_only(timing_only)
            .run()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let with_data = run(false);
    assert!(with_data.pes().iter().all(|p| p.output == Tile::from_f64s(F32, &[10.0; 64])));
    // The flags steer the run in a timing-only run too: the same time to the bit.
    let without = run(true);
    let time = |r: &kernbench::sim::RunReport| r.time().unwrap().completion_ns.to_bits();
    assert_eq!(time(&without), time(&with_data));
}

#[test]
fn a_communicator_keeps_its_windows_across_calls_and_says_why_it_cannot_check_them_exactly() {
    use kernbench::samples::sample_tensor;
    use kernbench::{CallOptions, Collective, Communicator, DpPolicy, KernelSet, RegistrySpec};
    let mut kernels = KernelSet::new();
    kernels.register(&epoch_one_shot::KERNEL);
    let spec: RegistrySpec = serde_json::from_value(serde_json::json!({
        "algorithms": {"epoch_one_shot": {
            "collective": "all_reduce", "kernel": "epoch_one_shot", "topology": "full",
            "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "hbm", "params": {},
            "summary": "one-shot all-reduce on windows, flags at the call's generation"
        }},
        "selection": {}
    }))
    .unwrap();
    let mut registry = kernbench::algorithms::default_registry();
    registry.merge(spec, &kernels).unwrap();
    let system = System::shape(4, 1, 1, 1).unwrap();
    let tensor = sample_tensor(&system, 64, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let mut comm = Communicator::with_registry(system, registry);
    comm.register_window("slots", F32, 4 * 64).unwrap();
    comm.register_window("flags", I64, 4).unwrap();
    assert!(comm.register_window("flags", I64, 4).is_err());
    let options = CallOptions { algorithm: Some("epoch_one_shot".to_owned()), generation: None, counts: None };
    for call in 1..=3 {
        let (_, report) = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap();
        assert!(report.postcondition.held, "{report}");
        // Each call left its generation in every peer's flag.
        let flags = comm.windows().copy(0, "flags").unwrap().to_vec::<i64>().unwrap();
        assert_eq!(flags, [0, call, call, call], "call {call}");
    }
    // The provenance run carries i64 provenance, which windows of the call's data cannot hold.
    let mut exact = std::mem::replace(&mut comm, Communicator::new(System::builtin())).exact(true);
    let error = exact.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap_err();
    assert!(error.to_string().contains("no exact check of a call with windows [slots, flags]"), "{error}");
}

/// As [`takes_a_ticket`], but rank 1 first writes 256 KiB into its own memory, so its request lands
/// later than the others'.
#[ccl_kernel]
fn takes_a_ticket_late_on_rank_one(tl: &Tl) {
    let counter = tl.symmetric("counter", I64, 1);
    if tl.rank() == 1 {
        let scratch = tl.symmetric("scratch", F32, 1 << 16);
        tl.write(&scratch, 0, &Tile::zeros(F32, 1 << 16));
    }
    let ticket = tl.atomic_fetch_add(0, &counter, 0, 1, MemoryOrder::Relaxed, Scope::System);
    tl.store(Output, &Tile::filled(F32, 1, ticket as f64));
}

#[test]
fn a_schedule_reorders_only_ties_unless_a_jitter_lets_operations_close_in_time_swap() {
    let run = || on_cube(3, &takes_a_ticket_late_on_rank_one::KERNEL);
    // Rank 2's request lands first, whatever the seed.
    assert_eq!(outputs(run().run()), [0.0, 2.0, 1.0]);
    assert_eq!(run().schedules(1..=16).unwrap().differs, None);
    // With a jitter of a second, every request may land first.
    let jittered = run().schedule_jitter(1e9).schedules(1..=16).unwrap();
    let divergence = jittered.differs.expect("a seed applies rank 1's request first");
    let replay = outputs(run().schedule_jitter(1e9).schedule(Some(divergence.seed)).run());
    assert_eq!(replay, [0.0, 1.0, 2.0], "seed {}", divergence.seed);
}

/// Rank 0 adds to rank 1's counter and ends without a quiet; rank 1 never looks.
#[ccl_kernel]
fn adds_and_leaves(tl: &Tl, quiet: bool) {
    let counter = tl.symmetric("counter", I64, 1);
    if tl.rank() == 0 {
        tl.atomic_add(1, &counter, 0, 1, MemoryOrder::Relaxed, Scope::System); // add
        if quiet {
            tl.quiet();
        }
    }
}

#[test]
fn an_atomic_add_nothing_completed_is_reported_as_a_put_that_did_not_land() {
    let run = |quiet: bool| on_cube(2, &adds_and_leaves::KERNEL).params(serde_json::json!({ "quiet": quiet })).run();
    run(true).unwrap_or_else(|e| panic!("{e}"));
    let Err(MockError::Run(RunError::PutNotLanded { put, to, buffer, .. })) = run(false) else {
        panic!("expected PutNotLanded")
    };
    assert_eq!((put.op, put.scope, to, buffer), (Op::AtomicAdd, Some(Scope::System), PeId::new(0, 0, 1), "counter"));
}

/// Lane 1 waits on a flag of its own PE's copy that lane 0 sets, after writing the data: with a
/// releasing swap, or (`plain`) with a plain write.
#[ccl_kernel(lanes = 2)]
fn lanes_hand_over_through_a_flag(tl: &Tl, plain: bool) {
    let flag = tl.symmetric("flag", I32, 1);
    let data = tl.symmetric("data", F32, 4);
    if tl.lane() == 0 {
        tl.write(&data, 0, &Tile::filled(F32, 4, 7.0));
        if plain {
            tl.write(&flag, 0, &Tile::filled(I32, 1, 5.0)); // plain flag
        } else {
            tl.atomic_swap(tl.rank(), &flag, 0, 5, MemoryOrder::Release, Scope::Pe);
        }
    } else {
        let seen = tl.wait_value(&flag, 0, Cmp::Eq, 5, Scope::Pe); // wait
        tl.note("seen", seen);
        tl.store(Output, &tl.read(&data, 0, 1));
    }
}

#[test]
fn a_lane_waits_for_another_lane_s_release_and_a_plain_flag_write_is_a_race_with_the_wait() {
    let run =
        |plain: bool| on_cube(1, &lanes_hand_over_through_a_flag::KERNEL).params(serde_json::json!({ "plain": plain }));
    let report = run(false).run().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((report.pes()[0].notes["seen"].as_str(), report.pes()[0].output.to_f64_vec()), ("5", vec![7.0]));
    // A plain store and an atomic load of the same bytes are a data race in the PTX model.
    let Err(MockError::Run(error)) = run(true).run() else { panic!("expected the race") };
    let Some(KernelError::Race(race)) = error.kernel() else { panic!("{error}") };
    assert_eq!(
        (race.first.op, race.first.scope, race.second.op, race.second.scope),
        (Op::Write, None, Op::WaitValue, Some(Scope::Pe))
    );
}

//! The bugs of one-sided GPU libraries, each written here the way a buggy kernel writes it, and the
//! named error each ends in: on 1, 2 and 4 threads, the same error, naming rank, lane, operation,
//! scope where it matters, and the kernel's source line. Where a bug needs two calls, the kernel runs
//! twice on windows, as a communicator runs it.

use std::time::{Duration, Instant};

use kernbench::prelude::*;
use kernbench::sim::RunError;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::symmetric::{Access, Race};
use kernbench::{Op, System};

/// The error of the run `make` builds, on 1, 2 and 4 threads: the same on each, within seconds. Each
/// run's wall time is printed (`cargo test --release -p kernbench-tests --test integration
/// one_sided_bugs -- --nocapture --test-threads 1`).
fn same_error_on_any_thread_count<'a>(make: impl Fn() -> MockRun<'a>) -> MockError {
    let mut first: Option<String> = None;
    let mut error = None;
    let case = std::thread::current().name().unwrap_or("a case").to_owned();
    for threads in [1, 2, 4] {
        let start = Instant::now();
        let result = make().threads(threads).parallel_min_ready(1).run();
        let took = start.elapsed();
        println!("{case}: {threads} thread(s), {:.2} ms to its error", took.as_secs_f64() * 1e3);
        // Well under a second in a release build; seconds allow for a debug build on a loaded machine.
        assert!(took < Duration::from_secs(5), "{threads} threads took {took:?}");
        let e = result.expect_err("the bug ends the run");
        match &first {
            None => first = Some(e.to_string()),
            Some(first) => assert_eq!(&e.to_string(), first, "{threads} threads report another error"),
        }
        error = Some(e);
    }
    error.expect("three runs")
}

fn race_of(error: &MockError) -> &Race {
    match error {
        MockError::Run(RunError::Kernel(KernelError::Race(race)))
        | MockError::Call { source: RunError::Kernel(KernelError::Race(race)), .. } => race,
        other => panic!("expected a race, got {other}"),
    }
}

/// That `access` is lane 0 of rank `rank` (of one-PE SIPs) in `op`, made at the line of this file
/// that contains `line_of`.
#[track_caller]
fn assert_side(access: &Access, rank: u32, op: Op, line_of: &str) {
    assert_eq!((access.pe, access.lane, access.op), (PeId::new(rank, 0, 0), 0, op), "{access}");
    let source = include_str!("one_sided_bugs.rs");
    let line = source.lines().nth(access.site.0.line() as usize - 1).unwrap_or_default();
    assert!(
        access.site.0.file().ends_with("one_sided_bugs.rs") && line.contains(line_of),
        "{access} is not at `{line_of}`"
    );
}

/// `sips` GPUs (SIPs of one PE), every pair linked.
fn gpus(sips: usize) -> &'static System {
    Box::leak(Box::new(System::shape(sips, 1, 1, 1).unwrap()))
}

// --- a lock released at GPU scope ---

/// Every rank adds to rank 0's total under a spin lock on rank 0, and gives the lock back with a
/// release at the scope of its own GPU: a peer on another GPU, spinning at system scope, is not
/// guaranteed to see it (on hardware, an intermittent hang).
#[ccl_kernel]
fn unlocks_at_gpu_scope(tl: &Tl) {
    let lock = tl.symmetric("lock", I64, 1);
    while tl.atomic_compare_swap(0, &lock, 0, 0, 1, MemoryOrder::Acquire, Scope::System) != 0 {} // take
    tl.note("held", 1);
    tl.atomic_swap(0, &lock, 0, 0, MemoryOrder::Release, Scope::Sip); // give back
}

#[test]
fn a_lock_released_at_gpu_scope_is_a_race_naming_both_scopes() {
    let error =
        same_error_on_any_thread_count(|| MockRun::new(gpus(2), "full", "leader_only", &unlocks_at_gpu_scope::KERNEL));
    let race = race_of(&error);
    assert_eq!((race.owner, race.buffer), (PeId::new(0, 0, 0), "lock"));
    assert_side(&race.first, 0, Op::AtomicSwap, "// give back");
    assert_side(&race.second, 1, Op::AtomicCompareSwap, "// take");
    assert_eq!((race.first.scope, race.second.scope), (Some(Scope::Sip), Some(Scope::System)));
    let text = error.to_string();
    assert!(text.contains("at scope sip") && text.contains("at scope system"), "{text}");
    assert!(text.contains("must each include the other's lane"), "{text}");
}

// --- a one-shot all-reduce that waits for a hard-coded flag value ---

/// One-shot all-reduce on windows: each rank puts its input into its slot of every peer's `slots`,
/// then sets its flag there to 1; each waits for every peer's flag to be 1 and reduces. The second
/// call finds every flag still 1 from the first.
#[ccl_kernel]
fn one_shot_waiting_for_flag_one(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let data = tl.load(Input);
    let len = data.len();
    let slots = tl.window("slots");
    let flags = tl.window("flags");
    for peer in (0..n).filter(|&p| p != rank) {
        tl.put(peer, &slots, rank * len, &data); // put the input
        tl.fence();
        tl.atomic_swap(peer, &flags, rank, 1, MemoryOrder::Release, Scope::System);
    }
    let mut acc = data.clone();
    for peer in (0..n).filter(|&p| p != rank) {
        tl.wait_value(&flags, peer, Cmp::Eq, 1, Scope::System);
        tl.reduce(&mut acc, &tl.read(&slots, peer * len, len), ReduceOp::Sum); // read the peer's slot
    }
    tl.store(Output, &acc);
}

fn one_shot_on_windows(kernel: &'static kernbench::KernelDef, calls: u64) -> MockRun<'static> {
    MockRun::new(gpus(4), "full", "leader_only", kernel)
        .inputs(|_, rank| Tile::from_f64s(F32, &[(rank + 1) as f64; 16]))
        .window("slots", F32, 4 * 16)
        .window("flags", I64, 4)
        .calls(calls)
}

#[test]
fn a_flag_waited_for_at_a_hard_coded_value_is_a_race_in_the_second_call() {
    // One call is right.
    let report = one_shot_on_windows(&one_shot_waiting_for_flag_one::KERNEL, 1).run().unwrap();
    assert!(report.pes().iter().all(|p| p.output == Tile::from_f64s(F32, &[10.0; 16])));
    let error = same_error_on_any_thread_count(|| one_shot_on_windows(&one_shot_waiting_for_flag_one::KERNEL, 2));
    assert!(matches!(error, MockError::Call { call: 2, calls: 2, .. }), "{error}");
    let race = race_of(&error);
    assert_eq!(race.buffer, "slots");
    assert!(race.window);
    // A peer's put of the second call and the owner's read, of the first call or of the second (whose
    // wait the first call's flag ended at once): nothing orders them.
    let (put, read) = if race.first.op == Op::Put { (&race.first, &race.second) } else { (&race.second, &race.first) };
    assert_side(put, put.pe.sip, Op::Put, "// put the input");
    assert_side(read, race.owner.sip, Op::Read, "// read the peer's slot");
    assert!(error.to_string().contains("a window keeps its values across calls"), "{error}");
}

#[test]
fn the_same_all_reduce_waiting_for_its_call_s_generation_is_right_on_every_call() {
    let report =
        one_shot_on_windows(&crate::atomics::epoch_one_shot::KERNEL, 4).run().unwrap_or_else(|e| panic!("{e}"));
    assert!(report.pes().iter().all(|p| p.output == Tile::from_f64s(F32, &[10.0; 16])));
}

// --- a completion counter reused without a reset ---

/// Every rank puts its input into rank 0's `gathered` and counts itself done on rank 0's counter;
/// rank 0 waits until the counter says every peer is done. Nothing resets the counter: the second
/// call finds it done already.
#[ccl_kernel]
fn counter_never_reset(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let data = tl.load(Input);
    let len = data.len();
    let gathered = tl.window("slots");
    let done = tl.window("flags");
    if rank != 0 {
        tl.put(0, &gathered, rank * len, &data); // gather
        tl.fence();
        tl.atomic_add(0, &done, 0, 1, MemoryOrder::Release, Scope::System);
        tl.quiet();
    } else {
        tl.wait_value(&done, 0, Cmp::Ge, (n - 1) as i64, Scope::System);
        let mut acc = data.clone();
        for peer in 1..n {
            tl.reduce(&mut acc, &tl.read(&gathered, peer * len, len), ReduceOp::Sum); // sum what came
        }
        tl.store(Output, &acc);
    }
}

#[test]
fn a_completion_counter_reused_across_calls_without_a_reset_is_a_race_in_the_second_call() {
    let report = one_shot_on_windows(&counter_never_reset::KERNEL, 1).run().unwrap();
    assert_eq!(report.pes()[0].output, Tile::from_f64s(F32, &[10.0; 16]));
    let error = same_error_on_any_thread_count(|| one_shot_on_windows(&counter_never_reset::KERNEL, 2));
    assert!(matches!(error, MockError::Call { call: 2, .. }), "{error}");
    let race = race_of(&error);
    assert_eq!((race.owner, race.buffer), (PeId::new(0, 0, 0), "slots"));
    let (put, read) = if race.first.op == Op::Put { (&race.first, &race.second) } else { (&race.second, &race.first) };
    assert_side(put, put.pe.sip, Op::Put, "// gather");
    assert_side(read, 0, Op::Read, "// sum what came");
}

// --- a multimem reduction before every rank joined ---

/// Every rank reduces its input into the multicast object through the switch, then tells rank 3 it
/// may join: rank 3 joins last, after the reductions reached it.
#[ccl_kernel]
fn reduces_before_every_rank_joined(tl: &Tl) {
    let data = tl.load(Input);
    if tl.rank() == 3 {
        tl.wait_until(0, 3);
        tl.multicast("sums", data.dtype(), data.len()); // join late
    } else {
        let sums = tl.multicast("sums", data.dtype(), data.len());
        tl.multimem_red(&sums, 0, &data, ReduceOp::Sum); // reduce into every member
        tl.quiet();
        tl.signal(3, 0, 1);
    }
}

#[test]
fn a_multimem_reduction_issued_before_every_rank_joined_is_named_with_the_rank_that_had_not() {
    let system: &'static System = Box::leak(Box::new(
        System::from_json_str(
            r#"{"sips": 4, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
                "switch": {"multicast": true, "reduce_gbps": 100}}"#,
        )
        .unwrap(),
    ));
    let error = same_error_on_any_thread_count(|| {
        MockRun::new(system, "multicast", "leader_only", &reduces_before_every_rank_joined::KERNEL)
    });
    let MockError::Run(RunError::Kernel(KernelError::MulticastNotJoined { pe, op, site, member, multicast })) = &error
    else {
        panic!("expected MulticastNotJoined, got {error}")
    };
    assert_eq!((*op, *member, multicast.name), (Op::MultimemRed, 3, "sums"));
    let site = site.expect("the site of an operation of this process");
    let source = include_str!("one_sided_bugs.rs");
    let line = source.lines().nth(site.0.line() as usize - 1).unwrap_or_default();
    assert!(line.contains("// reduce into every member"), "{error} is at `{line}`");
    assert!(pe.sip < 3, "{error}");
    assert!(error.to_string().contains("which has not joined it yet"), "{error}");
}

// --- ranks that take different paths to a collective allocation ---

/// Even ranks allocate a scratch buffer collectively, odd ranks skip it and meet them at a barrier.
#[ccl_kernel]
fn allocates_on_even_ranks_only(tl: &Tl) {
    if tl.rank() % 2 == 0 {
        tl.alloc("scratch", F32, 64); // allocate
    }
    tl.barrier();
}

#[test]
fn ranks_meeting_at_an_allocation_and_a_barrier_are_told_both() {
    let error = same_error_on_any_thread_count(|| {
        MockRun::new(gpus(4), "full", "leader_only", &allocates_on_even_ranks_only::KERNEL)
    });
    let MockError::Run(RunError::Kernel(KernelError::CollectiveMismatch { pe, mine, other_pe, theirs })) = &error
    else {
        panic!("expected CollectiveMismatch, got {error}")
    };
    assert_eq!((*pe, *other_pe), (PeId::new(0, 0, 0), PeId::new(1, 0, 0)));
    assert!(mine.starts_with("alloc of `scratch` (f32[64]) at ") && mine.contains("one_sided_bugs.rs"), "{mine}");
    assert_eq!(theirs, "a barrier");
    assert!(error.to_string().contains("every rank must make the same collective calls in the same order"), "{error}");
}

/// Rank 0 returns early; the others allocate and wait for it for ever.
#[ccl_kernel]
fn allocates_without_rank_zero(tl: &Tl) {
    if tl.rank() != 0 {
        tl.alloc("scratch", F32, 64); // allocate
    }
}

#[test]
fn ranks_left_at_an_allocation_are_reported_as_a_deadlock_naming_it() {
    let error = same_error_on_any_thread_count(|| {
        MockRun::new(gpus(4), "full", "leader_only", &allocates_without_rank_zero::KERNEL)
    });
    let MockError::Run(RunError::Deadlock(report)) = &error else { panic!("expected a deadlock, got {error}") };
    assert_eq!(report.blocked.len(), 3);
    assert!(report.blocked.iter().all(|b| b.op == Op::Alloc), "{report}");
    let text = report.to_string();
    assert!(text.contains("waits in alloc for every rank to allocate `scratch` (f32[64]) at "), "{text}");
}

//! The mock runtime: credits, diagnosed failures with deliberately broken kernels, determinism across
//! thread counts, and the hierarchical all-reduce on 16 PEs, each holding `rank + 1`.

use kernbench::prelude::*;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::sim::{BlockedPe, Call, Leftover, RunError, RunReport, Runtime, SpanKind, Timing};
use kernbench::{KernelDef, KernelFuture, Launch, Op, System};
use serde_json::json;

fn one_cube(pes: usize) -> System {
    System::shape(1, 1, 1, pes).expect("a valid shape")
}

fn pe(index: u32) -> PeId {
    PeId::new(0, 0, index)
}

fn run_ring(system: &System, kernel: &KernelDef) -> Result<RunReport, MockError> {
    MockRun::new(system, "ring_1d", "all_pes", kernel).run()
}

fn run_error(result: Result<RunReport, MockError>) -> RunError {
    match result {
        Err(MockError::Run(e)) => e,
        other => panic!("expected a run error, got {other:?}"),
    }
}

/// Rank 0 sends `count` numbered messages east; rank 1 receives them and records whether they came in
/// order.
#[ccl_kernel]
fn stream(tl: &Tl, count: u32) {
    if tl.rank() == 0 {
        for i in 0..count {
            tl.send(E, &Tile::filled(F32, 4, f64::from(i)));
        }
    } else {
        let mut in_order = true;
        for i in 0..count {
            let got = tl.recv(W, 4, F32);
            in_order &= got == Tile::filled(F32, 4, f64::from(i));
        }
        tl.store(Output, &Tile::filled(F32, 4, if in_order { 1.0 } else { 0.0 }));
    }
}

#[test]
fn a_full_queue_makes_the_sender_wait_for_credits_and_messages_stay_in_order() {
    let system = one_cube(2);
    let report = MockRun::new(&system, "ring_1d", "all_pes", &stream::KERNEL)
        .params(json!({"count": 10}))
        .inputs(|_, _| Tile::zeros(F32, 4))
        .run()
        .unwrap();
    let [sender, receiver] = report.pes() else { panic!("two PEs") };
    assert_eq!(receiver.output, Tile::filled(F32, 4, 1.0), "messages arrived out of order");
    assert_eq!((sender.figures.messages_sent, receiver.figures.messages_received), (10, 10));
    // Depth 4 and 10 messages: the sender must have waited for credits, at least twice.
    assert_eq!(system.ipcq_depth(), 4);
    assert!(sender.figures.credit_waits >= 2, "{:?}", sender.figures);
}

#[ccl_kernel]
fn sends_north(tl: &Tl) {
    let x = tl.load(Input);
    tl.send(N, &x);
}

#[ccl_kernel]
fn receives_from_north(tl: &Tl) {
    let _ = tl.recv(N, 16, F32);
}

#[test]
fn send_on_a_missing_direction_names_the_pe_and_lists_the_directions_it_has() {
    let err = run_error(run_ring(&one_cube(4), &sends_north::KERNEL));
    assert_eq!(
        err,
        RunError::Kernel(KernelError::NoSuchDirection { pe: pe(0), op: Op::Send, direction: N, available: vec![E, W] })
    );
    assert!(err.to_string().contains("it has [E, W]"), "{err}");
}

#[test]
fn recv_on_a_missing_direction_is_reported_as_a_recv() {
    let err = run_error(run_ring(&one_cube(4), &receives_from_north::KERNEL));
    assert!(matches!(err, RunError::Kernel(KernelError::NoSuchDirection { op: Op::Recv, direction: N, .. })), "{err}");
}

#[ccl_kernel]
fn expects_f16(tl: &Tl) {
    tl.send(E, &Tile::zeros(F32, 8));
    let _ = tl.recv(W, 8, F16);
}

#[test]
fn recv_of_another_dtype_says_both_and_who_sent_it() {
    let err = run_error(run_ring(&one_cube(3), &expects_f16::KERNEL));
    assert_eq!(
        err,
        RunError::Kernel(KernelError::RecvMismatch {
            pe: pe(0),
            direction: W,
            expected_dtype: F16,
            expected_len: 8,
            got_dtype: F32,
            got_len: 8,
            from: pe(2),
        })
    );
}

#[ccl_kernel]
fn expects_other_length(tl: &Tl) {
    tl.send(E, &Tile::zeros(F32, 8));
    let _ = tl.recv(W, 6, F32);
}

#[test]
fn recv_of_another_length_says_both() {
    let err = run_error(run_ring(&one_cube(3), &expects_other_length::KERNEL));
    assert!(matches!(err, RunError::Kernel(KernelError::RecvMismatch { expected_len: 6, got_len: 8, .. })), "{err}");
}

/// Rank 0 sends in phase 2 while its east neighbour still receives in phase 1.
#[ccl_kernel]
fn phase_skew(tl: &Tl) {
    if tl.rank() == 0 {
        tl.phase(2);
        tl.send(E, &Tile::zeros(F32, 4));
    } else if tl.rank() == 1 {
        let _ = tl.recv(W, 4, F32);
    }
}

#[test]
fn a_message_of_another_generation_is_rejected_not_mixed() {
    let system = one_cube(2);
    let err = run_error(
        MockRun::new(&system, "ring_1d", "all_pes", &phase_skew::KERNEL)
            .call(Call { generation: 5, ..Call::default() })
            .run(),
    );
    // Call 5 owns generations 13, 14, 15: the receiver is in phase 1 (13), the sender in phase 2 (14).
    assert_eq!(
        err,
        RunError::Kernel(KernelError::GenerationMismatch {
            pe: pe(1),
            direction: W,
            expected: 13,
            got: 14,
            from: pe(0)
        })
    );
}

#[test]
fn generation_zero_is_an_error() {
    let system = one_cube(2);
    let err = run_error(
        MockRun::new(&system, "ring_1d", "all_pes", &stream::KERNEL)
            .params(json!({"count": 1}))
            .call(Call { generation: 0, ..Call::default() })
            .run(),
    );
    assert_eq!(err, RunError::ZeroGeneration);
}

#[ccl_kernel]
fn receive_first(tl: &Tl) {
    let x = tl.recv(W, 16, F32);
    tl.send(E, &x);
}

#[test]
fn a_receive_cycle_is_a_deadlock_listing_every_blocked_pe() {
    let err = run_error(run_ring(&one_cube(3), &receive_first::KERNEL));
    let RunError::Deadlock(report) = &err else { panic!("expected a deadlock, got {err}") };
    let expected: Vec<BlockedPe> = (0..3)
        .map(|i| BlockedPe {
            pe: pe(i),
            lane: None,
            channel: 0,
            op: Op::Recv,
            direction: Some(W),
            peer: Some(pe((i + 2) % 3)),
            queued: 0,
            credits: 4,
            depth: 4,
            signal: None,
            waits_for: None,
        })
        .collect();
    assert_eq!(report.blocked, expected);
    assert_eq!((report.finished, report.total), (0, 3));
    assert!(err.to_string().contains("(sip 0, cube 0, pe 1) waits in recv on W (peer (sip 0, cube 0, pe 0))"), "{err}");
}

#[ccl_kernel]
fn send_too_many_first(tl: &Tl) {
    for _ in 0..5 {
        tl.send(E, &Tile::zeros(F32, 1));
    }
    for _ in 0..5 {
        let _ = tl.recv(W, 1, F32);
    }
}

#[test]
fn senders_out_of_credits_are_a_deadlock_showing_full_queues() {
    let err = run_error(run_ring(&one_cube(2), &send_too_many_first::KERNEL));
    let RunError::Deadlock(report) = &err else { panic!("expected a deadlock, got {err}") };
    let expected: Vec<BlockedPe> = (0..2)
        .map(|i| BlockedPe {
            pe: pe(i),
            lane: None,
            channel: 0,
            op: Op::Send,
            direction: Some(E),
            peer: Some(pe(1 - i)),
            queued: 4,
            credits: 0,
            depth: 4,
            signal: None,
            waits_for: None,
        })
        .collect();
    assert_eq!(report.blocked, expected);
}

#[ccl_kernel]
fn sends_one_too_many(tl: &Tl) {
    if tl.rank() == 0 {
        tl.send(E, &Tile::zeros(F32, 2));
        tl.send(E, &Tile::zeros(F32, 2));
    } else {
        let _ = tl.recv(W, 2, F32);
    }
}

#[test]
fn messages_left_in_queues_after_every_kernel_finished_are_an_error() {
    let err = run_error(run_ring(&one_cube(2), &sends_one_too_many::KERNEL));
    assert_eq!(
        err,
        RunError::LeftoverMessages(vec![Leftover {
            receiver: pe(1),
            direction: W,
            channel: 0,
            sender: pe(0),
            messages: 1
        }])
    );
}

#[ccl_kernel]
fn rank_two_panics(tl: &Tl) {
    let x = tl.load(Input);
    if tl.rank() == 2 {
        panic!("rank two gives up");
    }
    tl.send(E, &x);
    let _ = tl.recv(W, x.len(), x.dtype());
}

#[test]
fn a_panic_in_one_kernel_ends_the_run_with_that_pes_name() {
    let err = run_error(run_ring(&one_cube(4), &rank_two_panics::KERNEL));
    assert_eq!(err, RunError::Panicked { pe: pe(2), message: "rank two gives up".to_owned() });
}

/// Rank `late` reduces `elements` elements, so that it reaches the barrier last; everyone then waits
/// at the barrier.
#[ccl_kernel]
fn late_to_the_barrier(tl: &Tl, late: usize, elements: usize) {
    if tl.rank() == late {
        let mut acc = Tile::zeros(F32, elements);
        tl.reduce(&mut acc, &Tile::zeros(F32, elements), ReduceOp::Sum);
    }
    tl.barrier();
}

/// With rank `late` arriving last, every PE leaves the barrier when it arrives: the others wait for
/// it from their start, it does not wait at all.
fn barrier_waits_for(late: usize) {
    let system = one_cube(3);
    let report = MockRun::new(&system, "ring_1d", "all_pes", &late_to_the_barrier::KERNEL)
        .params(json!({"late": late, "elements": 4096}))
        .timing(Some(Timing { trace: true, ..Timing::default() }))
        .run()
        .unwrap();
    let pes = &report.time().expect("the run was timed").pes;
    let spans_of = |rank: usize, kind: SpanKind| pes[rank].spans.iter().filter(|s| s.kind == kind).collect::<Vec<_>>();
    let [reduce] = spans_of(late, SpanKind::Reduce)[..] else { panic!("one reduction on rank {late}") };
    let arrival = reduce.end_ns;
    assert!(arrival > 0.0);
    for (rank, pe) in pes.iter().enumerate() {
        assert_eq!(pe.finish_ns, arrival, "rank {rank} left the barrier at another time than rank {late} arrived");
        let waited: Vec<(f64, f64)> =
            spans_of(rank, SpanKind::Barrier).iter().map(|s| (s.start_ns, s.end_ns)).collect();
        let want = if rank == late { vec![] } else { vec![(0.0, arrival)] };
        assert_eq!(waited, want, "rank {rank}'s wait at the barrier");
    }
}

#[test]
fn a_barrier_releases_everyone_together_at_the_last_arrival() {
    for late in 0..3 {
        barrier_waits_for(late);
    }
}

#[ccl_kernel]
fn barrier_then_exchange(tl: &Tl, skip_rank: usize) {
    if tl.rank() != skip_rank {
        tl.barrier();
    }
    tl.barrier();
}

#[test]
fn a_barrier_some_pe_never_reaches_is_a_deadlock() {
    let system = one_cube(3);
    let err = run_error(
        MockRun::new(&system, "ring_1d", "all_pes", &barrier_then_exchange::KERNEL)
            .params(json!({"skip_rank": 1}))
            .run(),
    );
    let RunError::Deadlock(report) = &err else { panic!("expected a deadlock, got {err}") };
    // Rank 1's one barrier completes the others' first: it finishes, they wait at their second.
    assert_eq!((report.blocked.len(), report.finished, report.total), (2, 1, 3), "{err}");
    assert_eq!(report.blocked.iter().map(|b| b.pe).collect::<Vec<_>>(), [pe(0), pe(2)], "{err}");
    assert!(report.blocked.iter().all(|b| b.op == Op::Barrier), "{err}");
}

/// The hierarchical all-reduce on `system`: every PE's tile is rank + 1; every PE must end with the sum.
fn hierarchical_rank_sum(system: &System, dtype: Dtype, threads: usize) -> RunReport {
    let report =
        MockRun::new(system, "hierarchical_3level", "all_pes", &kernbench::algorithms::hierarchical_allreduce::KERNEL)
            .params(json!({"chunks": 2}))
            .inputs(|_, rank| Tile::filled(dtype, 128, (rank + 1) as f64))
            .threads(threads)
            .parallel_min_ready(1)
            .run()
            .unwrap();
    let n = report.pes().len() as f64;
    let want = Tile::filled(dtype, 128, n * (n + 1.0) / 2.0);
    for p in report.pes() {
        assert_eq!(p.output, want, "{} holds the wrong sum", p.pe);
    }
    report
}

fn sixteen_pes() -> System {
    System::shape(2, 2, 1, 4).unwrap()
}

#[test]
fn hierarchical_allreduce_sums_1_to_16_in_f32() {
    let report = hierarchical_rank_sum(&sixteen_pes(), F32, 1);
    assert_eq!(report.output(PeId::new(1, 1, 3)), Some(&Tile::filled(F32, 128, 136.0)));
}

#[test]
fn hierarchical_allreduce_sums_1_to_16_in_f16() {
    let report = hierarchical_rank_sum(&sixteen_pes(), F16, 1);
    assert_eq!(report.output(PeId::new(0, 0, 0)), Some(&Tile::filled(F16, 128, 136.0)));
}

#[test]
fn hierarchical_allreduce_is_identical_single_and_multi_threaded() {
    for dtype in [F32, F16] {
        assert_eq!(
            hierarchical_rank_sum(&sixteen_pes(), dtype, 1),
            hierarchical_rank_sum(&sixteen_pes(), dtype, 2),
            "{dtype}"
        );
    }
}

#[test]
fn a_thousand_pe_run_is_identical_on_one_thread_and_two() {
    let system = System::shape(4, 4, 4, 16).unwrap();
    assert_eq!(hierarchical_rank_sum(&system, F32, 1), hierarchical_rank_sum(&system, F32, 2));
}

/// 16,384 PEs: a run large enough that its rounds ask the CPU ahead for what the polls, merges and
/// placements a few PEs on will read (a hint that must change nothing).
#[test]
fn a_run_large_enough_to_ask_ahead_is_right_and_identical_on_one_thread_and_two() {
    let system = System::shape(16, 4, 4, 64).unwrap();
    assert_eq!(hierarchical_rank_sum(&system, I64, 1), hierarchical_rank_sum(&system, I64, 2));
}

/// Ring `count` messages round every PE, each lane naming what it reads when woken (`hint`): a
/// slice of a long log (longer than a hint asks for), a whole tile, or nothing.
#[ccl_kernel]
fn hinted_ring(tl: &Tl, count: u32, hint: bool) {
    let log = vec![0u64; 1 << 12];
    let mut sum = Tile::zeros(F32, 4);
    for i in 0..count {
        tl.send(E, &Tile::filled(F32, 4, f64::from(i) + tl.rank() as f64));
        if hint {
            kernbench::kernel::hint::prefetch_when_woken(&log[(i as usize * 7) % 64..]);
            kernbench::kernel::hint::prefetch_when_woken(&sum);
        }
        let got = tl.recv(W, 4, F32);
        tl.reduce(&mut sum, &got, ReduceOp::Sum);
    }
    tl.store(Output, &sum);
}

/// What a kernel names for the runtime to ask the CPU for before its lane's next poll is a hint: a run
/// with hints is the same bits as one without, timed, on one thread and on two polling in parallel.
/// 32 PEs: a round asks for the hints of the tasks a few on from the one it polls.
#[test]
fn a_kernels_wake_hints_change_no_result_or_time_on_one_thread_or_two() {
    let system = one_cube(32);
    let run = |hint: bool, threads: usize| {
        MockRun::new(&system, "ring_1d", "all_pes", &hinted_ring::KERNEL)
            .params(json!({"count": 20, "hint": hint}))
            .inputs(|_, _| Tile::zeros(F32, 4))
            .timing(Some(Timing::default()))
            .threads(threads)
            .parallel_min_ready(1)
            .run()
            .unwrap()
    };
    let plain = run(false, 1);
    // Every PE received 20 messages from its west neighbour: sum of i + (rank - 1 mod 32).
    let expected = |rank: usize| (0..20).map(|i| f64::from(i) + ((rank + 31) % 32) as f64).sum::<f64>();
    for (rank, pe) in plain.pes().iter().enumerate() {
        assert_eq!(pe.output, Tile::filled(F32, 4, expected(rank)), "rank {rank}");
    }
    assert!(plain.completion_ns().is_some_and(|ns| ns > 0.0));
    assert_eq!(run(true, 1), plain);
    assert_eq!(run(true, 2), plain);
}

#[test]
fn a_hundred_thousand_threads_are_refused_quickly_before_any_is_started() {
    let system = sixteen_pes();
    let kernel = &kernbench::algorithms::hierarchical_allreduce::KERNEL;
    for threads in [100_000, Runtime::MAX_THREADS + 1] {
        let start = std::time::Instant::now();
        let error = run_error(
            MockRun::new(&system, "hierarchical_3level", "all_pes", kernel)
                .params(json!({"chunks": 2}))
                .threads(threads)
                .run(),
        );
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "{threads} threads took {:?}", start.elapsed());
        assert_eq!(error, RunError::TooManyThreads { threads, max: Runtime::MAX_THREADS });
        assert!(error.to_string().contains(&format!("expected 1..={}", Runtime::MAX_THREADS)), "{error}");
    }
    assert_eq!(
        hierarchical_rank_sum(&system, F32, Runtime::MAX_THREADS),
        hierarchical_rank_sum(&system, F32, 1),
        "the largest thread count allowed runs, with the same result"
    );
}

/// Writes `[program_id(0), program_id(1), program_id(2), num_programs(0), num_programs(1),
/// num_programs(2)]` and whether axis 3 is refused.
#[ccl_kernel]
fn where_am_i(tl: &Tl) {
    let mut facts: Vec<i64> = Vec::new();
    for axis in 0..3 {
        facts.push(tl.program_id(axis) as i64);
    }
    for axis in 0..3 {
        facts.push(tl.num_programs(axis) as i64);
    }
    let ctx = tl.context();
    let refused = KernelError::BadAxis { pe: ctx.pe, axis: 3 };
    let bad = kernbench::Tl::new(ctx.clone());
    facts.push(i64::from(bad.program_id(3) == Err(refused.clone()) && bad.num_programs(3) == Err(refused)));
    tl.store(Output, &Tile::from_vec(facts));
}

#[test]
fn program_ids_and_extents_count_axes_from_the_pe_out() {
    let system = System::shape(2, 2, 1, 3).unwrap();
    let report = MockRun::new(&system, "ring_1d", "all_pes", &where_am_i::KERNEL)
        .outputs(|_, _, _| Tile::zeros(I64, 7))
        .run()
        .unwrap();
    assert_eq!(report.pes().len(), 12);
    for p in report.pes() {
        let (pe, cube, sip) = (i64::from(p.pe.pe), i64::from(p.pe.cube), i64::from(p.pe.sip));
        assert_eq!(p.output.to_vec::<i64>().unwrap(), vec![pe, cube, sip, 3, 2, 2, 1], "{}", p.pe);
    }
}

/// Every shipped algorithm with every round polled in parallel (in jobs as small as rayon takes):
/// outputs, per-PE figures, simulated times and the trace are the same bits on 1, 2 and 4 threads.
#[test]
fn every_shipped_algorithm_is_identical_bit_for_bit_on_one_two_and_four_threads() {
    let shape = System::shape(4, 2, 2, 4).unwrap();
    let registry = kernbench::algorithms::default_registry();
    let timing = Timing { trace: true, ..Timing::default() };
    let mut compared = 0;
    for algorithm in registry.algorithms() {
        let system = crate::system_for(algorithm, &shape);
        let (topology, mapper) = (algorithm.topology.name(), algorithm.mapper.name());
        let ranks = kernbench::InstallPlan::build(&system, topology, mapper)
            .unwrap_or_else(|e| panic!("{}: {e}", algorithm.name))
            .len();
        let run = |threads: usize| {
            let report = MockRun::new(&system, topology, mapper, algorithm.kernel)
                .params(serde_json::Value::Object(algorithm.params.clone()))
                .inputs(|_, rank| {
                    let values: Vec<f32> = (0..96).map(|i| ((rank * 5 + i * 3) % 7) as f32 - 3.0).collect();
                    Tile::from_vec(values)
                })
                .counts(crate::counts_for(algorithm.collective, ranks, 96))
                .collective(algorithm.collective)
                .timing(Some(timing.clone()))
                .threads(threads)
                .parallel_min_ready(1)
                .run()
                .unwrap_or_else(|e| panic!("{} on {threads} thread(s): {e}", algorithm.name));
            // serde_json writes each f64 as its shortest round-trip text, so equal text is equal bits.
            let time = serde_json::to_string(report.time().expect("timed")).unwrap();
            assert!(time.contains("\"spans\":[{"), "{}: the run was traced", algorithm.name);
            (report, time)
        };
        let one = run(1);
        for threads in [2, 4] {
            let other = run(threads);
            assert!(one.0 == other.0, "{}: outputs or figures differ on {threads} threads", algorithm.name);
            assert!(one.1 == other.1, "{}: times or trace differ on {threads} threads", algorithm.name);
        }
        compared += 1;
    }
    assert!(compared >= 20, "only {compared} algorithms compared");
}

/// Stores the input's elements `1..8` at `offset` of the output, as two pieces written in place
/// (`store_parts_at`) or joined first (`store_at` of their concatenation).
#[ccl_kernel]
fn store_pieces(tl: &Tl, in_place: bool, offset: usize) {
    let data = tl.load(Input);
    let parts = [tl.slice(&data, 1, 3), tl.slice(&data, 4, 4)];
    if in_place {
        tl.store_parts_at(Output, offset, &parts);
    } else {
        tl.store_at(Output, offset, &tl.concat(&parts));
    }
}

#[test]
fn storing_pieces_writes_and_charges_what_storing_them_joined_does() {
    let system = System::shape(1, 1, 1, 2).unwrap();
    let run = |in_place: bool, offset: usize, out_len: usize| {
        MockRun::new(&system, "ring_1d", "all_pes", &store_pieces::KERNEL)
            .params(json!({"in_place": in_place, "offset": offset}))
            .inputs(|_, rank| Tile::from_vec((0..8).map(|i| (rank * 100 + i) as f32).collect::<Vec<_>>()))
            .outputs(|_, _, _| Tile::zeros(F32, out_len))
            .run()
            .unwrap()
    };
    // The pieces filling the whole output (7 of 7 elements), and a part of it (7 at 2 of 12).
    for (offset, out_len) in [(0, 7), (2, 12)] {
        let (pieces, joined) = (run(true, offset, out_len), run(false, offset, out_len));
        assert_eq!(pieces, joined, "offset {offset}: outputs, figures or times differ");
        let want: Vec<f32> = (0..out_len)
            .map(|i| if (offset..offset + 7).contains(&i) { (i - offset + 1) as f32 } else { 0.0 })
            .collect();
        assert_eq!(pieces.output(PeId::new(0, 0, 0)), Some(&Tile::from_vec(want)), "offset {offset}");
        assert_eq!(pieces.totals().memory_bytes, joined.totals().memory_bytes);
    }
}

/// The ring all-reduce of 64 KiB of f32 on each of 4 PEs, in 4 parts of 4 KiB, on `lanes` lanes: every
/// PE's output holds the parts it received (or reduced last) and shares them with every other PE,
/// none copied, and equals the sum.
fn ring_outputs_share_their_parts(lanes: usize) {
    let system = System::shape(1, 1, 1, 4).unwrap();
    let len = 16 * 1024;
    let report = MockRun::new(&system, "ring_1d", "all_pes", &kernbench::algorithms::ring_allreduce::KERNEL)
        .params(json!({"chunks": 1, "lanes": lanes}))
        .inputs(|_, rank| Tile::filled(F32, len, rank as f64 + 1.0))
        .run()
        .unwrap();
    let outputs: Vec<&Tile> = (0..4).map(|pe| report.output(PeId::new(0, 0, pe)).unwrap()).collect();
    for (rank, output) in outputs.iter().enumerate() {
        assert_eq!(**output, Tile::filled(F32, len, 10.0), "{lanes} lane(s), rank {rank}: the sum");
        let pieces = output.pieces();
        assert_eq!(pieces.len(), 4 * lanes, "{lanes} lane(s), rank {rank}: a part a rank and lane, joined");
        for other in outputs.iter().filter(|o| !std::ptr::eq(**o, *output)) {
            let theirs = other.pieces();
            assert!(
                pieces.iter().zip(&theirs).all(|(mine, theirs)| mine.shares_buffer_with(theirs)),
                "{lanes} lane(s), rank {rank}: its parts are copies of another rank's"
            );
        }
    }
}

#[test]
fn a_ring_all_reduce_output_is_the_parts_every_rank_received_not_a_copy() {
    ring_outputs_share_their_parts(1);
}

#[test]
fn a_ring_all_reduce_output_stored_a_lane_at_a_time_is_not_copied_either() {
    ring_outputs_share_their_parts(2);
}

/// A kernel written by hand that does not use `tl`: it stays pending for `pending` polls, each time
/// waking itself through the waker its poll is given, `wakes` times over, by reference or (`owned`)
/// through a clone woken by value; and a clone kept from one poll is woken in the next, after the poll
/// it was cloned in has ended.
struct WakesItself {
    pending: usize,
    wakes: usize,
    owned: bool,
}

impl Launch for WakesItself {
    fn launch(&self, _tl: Tl) -> KernelFuture {
        let (mut pending, wakes, owned) = (self.pending, self.wakes, self.owned);
        let mut kept: Option<std::task::Waker> = None;
        Box::pin(std::future::poll_fn(move |cx| {
            if let Some(waker) = kept.take() {
                // Cloned in the previous poll: it outlives the poll it came from.
                waker.wake();
            }
            if pending == 0 {
                return std::task::Poll::Ready(Ok(()));
            }
            pending -= 1;
            for _ in 0..wakes {
                if owned {
                    // A clone, woken by value: the waker that owns its handle on the ready lists.
                    let clone = cx.waker().clone();
                    clone.wake();
                } else {
                    cx.waker().wake_by_ref();
                }
            }
            if owned {
                kept = Some(cx.waker().clone());
            }
            std::task::Poll::Pending
        }))
    }
}

#[test]
fn a_kernel_that_wakes_itself_through_its_waker_is_polled_once_the_next_round_however_often_it_woke() {
    for owned in [false, true] {
        let kernel = WakesItself { pending: 2, wakes: 3, owned };
        let report = MockRun::launch(&one_cube(4), "ring_1d", "all_pes", &kernel).run().unwrap();
        // Pending, pending, done: three polls in three rounds, whatever woke each task and how often.
        assert_eq!(report.rounds(), 3, "owned: {owned}");
        assert!(report.pes().iter().all(|p| p.figures.polls == 3), "owned: {owned}");
    }
}

#[test]
fn a_kernel_pending_with_nothing_to_wake_it_is_a_deadlock() {
    let kernel = WakesItself { pending: 1, wakes: 0, owned: false };
    let err = run_error(MockRun::launch(&one_cube(2), "ring_1d", "all_pes", &kernel).run());
    let RunError::Deadlock(report) = &err else { panic!("expected a deadlock, got {err}") };
    assert_eq!((report.finished, report.total), (0, 2));
    assert!(report.blocked.iter().all(|b| b.op == Op::External), "{err}");
}

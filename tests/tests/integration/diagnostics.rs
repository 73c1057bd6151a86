//! Kernels that never end, kernels that fail on their own terms, and what the errors of broken runs
//! say: the watchdog's budgets, `?` on a kernel's own `Result`, a deadlock's unreceived messages, a
//! store of the wrong shape, tiles too large to make, averages of nobody, which `tl` call failed, and
//! the kernel API a new user reaches for first.

use std::time::{Duration, Instant};

use kernbench::prelude::*;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::sim::{DEFAULT_LOOP_BUDGET, RunError, RunReport, Unreceived};
use kernbench::{KernelDef, Op, System, TileError, WatchdogBudget};
use serde_json::json;

fn one_cube(pes: usize) -> System {
    System::shape(1, 1, 1, pes).expect("a valid shape")
}

fn pe(index: u32) -> PeId {
    PeId::new(0, 0, index)
}

fn ring<'a>(system: &'a System, kernel: &'a KernelDef) -> MockRun<'a> {
    MockRun::new(system, "ring_1d", "all_pes", kernel)
}

/// The run's error, and that it came within seconds of wall time (the budgets of these tests are
/// small: a hang or a budget that is not enforced fails here rather than in CI's timeout).
fn timed_error(run: MockRun<'_>) -> RunError {
    let start = Instant::now();
    let result = run.run();
    assert!(start.elapsed() < Duration::from_secs(5), "the run took {:?}", start.elapsed());
    match result {
        Err(MockError::Run(error)) => error,
        other => panic!("expected a run error, got {other:?}"),
    }
}

/// Every rank exchanges once with its neighbours; then rank 1 spins without ever taking a step.
#[ccl_kernel]
fn spins_between_steps(tl: &Tl) {
    let x = tl.load(Input);
    tl.send(E, &x);
    let _ = tl.recv_like(W, &x);
    if tl.rank() == 1 {
        loop {}
    }
    tl.barrier();
}

#[test]
fn a_loop_without_steps_ends_in_the_watchdog_naming_the_pe_and_how_far_it_got() {
    let system = one_cube(3);
    let error = timed_error(ring(&system, &spins_between_steps::KERNEL).loop_budget(1000));
    assert_eq!(
        error,
        RunError::Kernel(KernelError::Watchdog {
            pe: pe(1),
            budget: WatchdogBudget::LoopIterations(1000),
            iterations: 1000,
            steps: 2,
            last_op: Some(Op::Recv),
            last_direction: Some(W),
        })
    );
    let message = error.to_string();
    assert!(message.starts_with("(sip 0, cube 0, pe 1): the watchdog stopped the kernel"), "{message}");
    assert!(
        message.contains("budget of 1000 loop iterations") && message.contains("last step: recv on W"),
        "{message}"
    );
}

/// Rank 0 sends forever; rank 1 receives forever: never stuck, never done.
#[ccl_kernel]
fn streams_forever(tl: &Tl) {
    let x = tl.load(Input);
    if tl.rank() == 0 {
        loop {
            tl.send(E, &x);
        }
    } else {
        loop {
            let _ = tl.recv_like(W, &x);
        }
    }
}

#[test]
fn sending_forever_into_a_peer_that_receives_forever_ends_in_the_step_budget() {
    let system = one_cube(2);
    let error = timed_error(ring(&system, &streams_forever::KERNEL).step_budget(100));
    let RunError::Kernel(KernelError::Watchdog { pe: who, budget, iterations, steps, last_op, .. }) = &error else {
        panic!("expected the watchdog, got {error}");
    };
    // The sender runs ahead of the receiver by a queue's depth, so it uses its budget up first, in the
    // loop iteration after its 100th send (one iteration since its last step).
    assert_eq!(
        (*who, *budget, *iterations, *steps, *last_op),
        (pe(0), WatchdogBudget::Steps(100), 1, 100, Some(Op::Send)),
        "{error}"
    );
    assert!(error.to_string().contains("(sip 0, cube 0, pe 0)"), "{error}");
}

/// Rank 0 sends `count` tiles east and rank 1 receives them, one per loop iteration.
#[ccl_kernel]
fn counted_stream(tl: &Tl, count: u32) {
    let x = tl.load(Input);
    for _ in 0..count {
        if tl.rank() == 0 {
            tl.send(E, &x);
        } else {
            let _ = tl.recv_like(W, &x);
        }
    }
}

/// Every rank exchanges with its neighbours, makes `count` loop iterations without a step, and
/// exchanges again.
#[ccl_kernel]
fn loops_between_steps(tl: &Tl, count: u32) {
    let x = tl.load(Input);
    tl.send(E, &x);
    let _ = tl.recv_like(W, &x);
    for _ in 0..count {}
    tl.send(E, &x);
    let _ = tl.recv_like(W, &x);
}

#[test]
fn budgets_are_the_most_a_kernel_may_use_so_one_less_stops_it() {
    let system = one_cube(2);
    let looping = |budget| ring(&system, &loops_between_steps::KERNEL).params(json!({"count": 10})).loop_budget(budget);
    looping(10).run().expect("a kernel within its loop budget finishes");
    assert!(
        matches!(
            timed_error(looping(9)),
            RunError::Kernel(KernelError::Watchdog { budget: WatchdogBudget::LoopIterations(9), iterations: 9, .. })
        ),
        "one loop iteration short must stop the kernel"
    );
    let streaming = ring(&system, &counted_stream::KERNEL).params(json!({"count": 10}));
    streaming.step_budget(10).run().expect("a kernel within its step budget finishes");
    let short_of_steps = ring(&system, &counted_stream::KERNEL).params(json!({"count": 10})).step_budget(9);
    assert!(
        matches!(
            timed_error(short_of_steps),
            RunError::Kernel(KernelError::Watchdog { budget: WatchdogBudget::Steps(9), steps: 9, .. })
        ),
        "one step short must stop the kernel"
    );
}

#[test]
fn the_loop_budget_counts_iterations_since_the_last_step_so_a_long_loop_of_steps_never_uses_it_up() {
    let system = one_cube(2);
    // Ten iterations, each with a step: a budget of one iteration between steps is enough.
    ring(&system, &counted_stream::KERNEL)
        .params(json!({"count": 10}))
        .loop_budget(1)
        .run()
        .expect("every iteration takes a step");
}

/// Spins on its own id, never taking a step.
#[ccl_kernel]
fn spins_on_its_id(tl: &Tl) {
    loop {
        let _ = tl.program_id(0);
    }
}

#[test]
fn a_kernel_that_takes_no_step_ends_in_the_watchdog_in_seconds_with_the_default_budget() {
    let system = System::builtin();
    let start = Instant::now();
    let result = MockRun::new(&system, "ring_1d", "leader_only", &spins_on_its_id::KERNEL).run();
    let took = start.elapsed();
    let Err(MockError::Run(error)) = result else { panic!("expected the watchdog, got {result:?}") };
    assert!(
        matches!(
            error.kernel(),
            Some(KernelError::Watchdog { pe, budget: WatchdogBudget::LoopIterations(DEFAULT_LOOP_BUDGET), steps: 0, .. })
                if *pe == PeId::new(0, 0, 0)
        ),
        "expected rank 0's watchdog, got {error}"
    );
    // Minutes before the loop budget existed; a few seconds in a debug build on a loaded machine.
    assert!(took < Duration::from_secs(10), "the watchdog took {took:?}");
}

/// Rank 2 reads a count from its parameter and fails with `?` when it is not a number.
#[ccl_kernel]
fn parses_its_parameter(tl: &Tl, count: String) {
    let x = tl.load(Input);
    if tl.rank() == 2 {
        let count: usize = count.parse()?;
        tl.note("count", count);
    }
    tl.store(Output, &x);
}

#[test]
fn a_kernels_own_error_via_question_mark_names_the_pe_and_the_message() {
    let system = one_cube(4);
    let error = timed_error(ring(&system, &parses_its_parameter::KERNEL).params(json!({"count": "four"})));
    assert_eq!(
        error,
        RunError::Kernel(KernelError::Kernel { pe: pe(2), message: "invalid digit found in string".to_owned() })
    );
    assert_eq!(error.to_string(), "(sip 0, cube 0, pe 2): the kernel failed: invalid digit found in string");
    let report = ring(&system, &parses_its_parameter::KERNEL).params(json!({"count": "4"})).run().unwrap();
    assert_eq!(report.pes()[2].notes["count"], "4");
}

/// Sends to the direct peer `offset` places after it, named from a signed index.
#[ccl_kernel]
fn sends_to_a_peer_by_offset(tl: &Tl, offset: i64) {
    let x = tl.load(Input);
    let j = tl.rank() as i64 + offset;
    tl.send(Direction::peer(j)?, &x);
    let _ = tl.recv_like(Direction::peer(tl.rank() as i64 - offset)?, &x);
    tl.store(Output, &x);
}

#[test]
fn a_peer_index_no_direction_can_hold_is_the_pes_error() {
    let system = one_cube(4);
    let run = MockRun::new(&system, "full", "all_pes", &sends_to_a_peer_by_offset::KERNEL);
    let error = timed_error(run.params(json!({"offset": -1})));
    assert_eq!(
        error.to_string(),
        "(sip 0, cube 0, pe 0): the kernel failed: peer index -1 is not a direction: expected 0..=4294967295"
    );
}

/// Rank 0 sends a tile east and then waits on the west, where nobody sends; rank 1 waits on the east.
#[ccl_kernel]
fn sends_then_waits_on_the_wrong_side(tl: &Tl) {
    if tl.rank() == 0 {
        tl.send(E, &Tile::zeros(F32, 8));
        let _ = tl.recv(W, 8, F32);
    } else {
        let _ = tl.recv(E, 8, F32);
    }
}

#[test]
fn a_deadlock_lists_the_messages_waiting_unreceived() {
    let system = one_cube(2);
    let error = timed_error(ring(&system, &sends_then_waits_on_the_wrong_side::KERNEL));
    let RunError::Deadlock(report) = &error else { panic!("expected a deadlock, got {error}") };
    assert_eq!(
        report.unreceived,
        [Unreceived { receiver: pe(1), direction: W, channel: 0, sender: pe(0), dtype: F32, len: 8, generation: 1 }]
    );
    let message = error.to_string();
    assert!(
        message.contains(
            "1 message(s) wait unreceived:\n  for (sip 0, cube 0, pe 1) on W from (sip 0, cube 0, pe 0): f32[8] of generation 1"
        ),
        "{message}"
    );
}

/// Stores half a tile into the output buffer.
#[ccl_kernel]
fn stores_half_the_output(tl: &Tl) {
    let x = tl.load(Input);
    tl.store(Output, &tl.slice(&x, 0, x.len() / 2));
}

#[test]
fn a_store_of_the_wrong_length_says_the_length_expected() {
    let system = one_cube(2);
    let error = timed_error(ring(&system, &stores_half_the_output::KERNEL));
    assert_eq!(
        error,
        RunError::Kernel(KernelError::StoreMismatch {
            pe: pe(0),
            buffer: Output,
            expected_dtype: F32,
            expected_len: 16,
            got_dtype: F32,
            got_len: 8,
        })
    );
    assert!(error.to_string().contains("expected a tile of f32[16]") && error.to_string().contains("got f32[8]"));
}

/// Rank 1 asks for 2^36 f32 zeros (256 GiB); the others finish normally.
#[ccl_kernel]
fn asks_for_256_gib_on_rank_1(tl: &Tl) {
    let x = tl.load(Input);
    if tl.rank() == 1 {
        let huge = tl.zeros(F32, 1 << 36);
        tl.store(Output, &huge);
    }
    tl.store(Output, &x);
}

#[test]
fn a_tile_too_large_to_make_is_out_of_memory_naming_the_pe_not_an_abort() {
    let system = one_cube(3);
    let error = timed_error(ring(&system, &asks_for_256_gib_on_rank_1::KERNEL));
    assert_eq!(
        error,
        RunError::Kernel(KernelError::OutOfMemory {
            pe: pe(1),
            op: Op::Zeros,
            source: TileError::TooLarge { dtype: F32, len: 1 << 36, bytes: 1 << 38, max: Tile::MAX_BYTES },
        })
    );
    assert!(
        error.to_string().starts_with(
            "(sip 0, cube 0, pe 1): zeros: out of memory: a tile of 68719476736 f32 elements (274877906944 bytes)"
        ),
        "{error}"
    );
}

/// Rank 0 concatenates 2^15 views of one 4 MiB tile: 128 GiB in one tile.
#[ccl_kernel]
fn concatenates_128_gib(tl: &Tl) {
    let x = tl.load(Input);
    if tl.rank() == 0 {
        let block = tl.zeros(F32, 1 << 20);
        let joined = tl.concat(&vec![block; 1 << 15]);
        tl.store(Output, &joined);
    }
    tl.store(Output, &x);
}

#[test]
fn a_concat_too_large_to_make_is_out_of_memory_of_concat() {
    let system = one_cube(2);
    let error = timed_error(ring(&system, &concatenates_128_gib::KERNEL));
    let RunError::Kernel(KernelError::OutOfMemory {
        pe: who,
        op: Op::Concat,
        source: TileError::TooLarge { bytes, .. },
    }) = &error
    else {
        panic!("expected concat's out of memory, got {error}")
    };
    assert_eq!((*who, *bytes), (pe(0), 1 << 37), "{error}");
}

/// Every rank finishes an average of its input over `contributions` contributions.
#[ccl_kernel]
fn averages_over(tl: &Tl, contributions: usize) {
    let mut x = tl.load(Input);
    tl.finish(&mut x, ReduceOp::Avg, contributions);
    tl.store(Output, &x);
}

#[test]
fn finishing_an_average_of_zero_contributions_is_the_pes_error() {
    let system = one_cube(2);
    let error = timed_error(ring(&system, &averages_over::KERNEL).params(json!({"contributions": 0})));
    assert_eq!(
        error,
        RunError::Kernel(KernelError::Tile { pe: pe(0), op: Op::Finish, source: TileError::NoContributions })
    );
    assert_eq!(
        error.to_string(),
        "(sip 0, cube 0, pe 0): finish: cannot finish an average of 0 contributions: expected at least 1"
    );
    let report = ring(&system, &averages_over::KERNEL)
        .params(json!({"contributions": 4}))
        .inputs(|_, _| Tile::filled(F32, 2, 8.0))
        .run()
        .unwrap();
    assert!(report.pes().iter().all(|p| p.output == Tile::filled(F32, 2, 2.0)));
}

/// Takes chunk 3 of 3 (one past the last) on the `chunk` path, or concatenates no tiles otherwise.
#[ccl_kernel]
fn bad_chunk_or_concat(tl: &Tl, chunk: bool) {
    let x = tl.load(Input);
    let y = if chunk { tl.chunk(&x, 3, 3) } else { tl.concat(&[]) };
    tl.store(Output, &y);
}

#[test]
fn chunk_and_concat_errors_name_their_own_call() {
    let system = one_cube(2);
    let chunk = timed_error(ring(&system, &bad_chunk_or_concat::KERNEL).params(json!({"chunk": true})));
    assert_eq!(
        chunk,
        RunError::Kernel(KernelError::Tile {
            pe: pe(0),
            op: Op::Chunk,
            source: TileError::BadChunk { index: 3, count: 3 }
        })
    );
    assert!(chunk.to_string().starts_with("(sip 0, cube 0, pe 0): chunk: chunk 3 of 3 does not exist"), "{chunk}");
    let concat = timed_error(ring(&system, &bad_chunk_or_concat::KERNEL).params(json!({"chunk": false})));
    assert_eq!(
        concat,
        RunError::Kernel(KernelError::Tile { pe: pe(0), op: Op::Concat, source: TileError::EmptyConcat })
    );
    assert!(concat.to_string().starts_with("(sip 0, cube 0, pe 0): concat: cannot concatenate"), "{concat}");
}

/// Every rank passes its input east and keeps what comes from the west, received by its shape.
#[ccl_kernel]
fn shift_east(tl: &Tl) {
    let x = tl.load(Input);
    tl.send(E, &x);
    let from_west = tl.recv_like(W, &x);
    tl.store(Output, &from_west);
}

#[test]
fn recv_like_receives_a_tile_of_the_given_tiles_shape() {
    let system = one_cube(3);
    let report: RunReport = ring(&system, &shift_east::KERNEL)
        .inputs(|_, rank| Tile::from_vec(vec![f16::from_f32(rank as f32 + 0.5); 4]))
        .run()
        .unwrap();
    let outputs: Vec<Vec<f16>> = report.pes().iter().map(|p| p.output.to_vec::<f16>().unwrap()).collect();
    let expected: Vec<Vec<f16>> = [2.5f32, 0.5, 1.5].iter().map(|&v| vec![f16::from_f32(v); 4]).collect();
    assert_eq!(outputs, expected);
    assert_eq!(bf16::from_f32(1.0).to_f32(), 1.0, "bf16 comes with the prelude too");
}

/// Branches on its first element: a kernel that reads its data cannot run without it.
#[ccl_kernel]
fn branches_on_its_data(tl: &Tl) {
    let x = tl.load(Input);
    let values: Vec<f32> = x.to_vec()?;
    if values[0] > 0.0 {
        tl.send(E, &x);
        let _ = tl.recv_like(W, &x);
    }
    tl.store(Output, &x);
}

#[test]
fn a_kernel_that_reads_its_data_in_a_timing_only_run_is_the_pes_error_naming_the_read() {
    let system = one_cube(2);
    let run = |timing_only| ring(&system, &branches_on_its_data::KERNEL).timing_only(timing_only).run();
    run(false).expect("with data it runs");
    let error = timed_error(ring(&system, &branches_on_its_data::KERNEL).timing_only(true));
    let Some(KernelError::Kernel { pe: who, message }) = error.kernel() else {
        panic!("expected the PE's error, got {error}")
    };
    assert_eq!(*who, pe(0), "{error}");
    assert!(message.contains("reading the values of a f32[16] tile that carries no data"), "{message}");
    assert!(message.contains("timing-only"), "{message}");
}

/// Notes whether its run is timing-only.
#[ccl_kernel]
fn says_whether_it_is_timing_only(tl: &Tl) {
    tl.note("timing_only", tl.timing_only());
    tl.store(Output, &tl.load(Input));
}

#[test]
fn a_kernel_knows_whether_its_run_is_timing_only() {
    let system = one_cube(2);
    for timing_only in [false, true] {
        let report = ring(&system, &says_whether_it_is_timing_only::KERNEL).timing_only(timing_only).run().unwrap();
        for pe in report.pes() {
            assert_eq!(pe.notes["timing_only"], timing_only.to_string(), "{:?}", pe.pe);
        }
    }
}

#[test]
fn rings_keep_their_times_and_shapes_timing_only_with_parts_of_unequal_lengths() {
    // 5 ranks and 1,003 elements: every ring's parts and pieces are near-equal, some one element
    // longer than others (a reduce-scatter's parts are a lane's shares of near-equal parts, an
    // all-gather's the ranks' blocks).
    let system = one_cube(5);
    let kernels = [
        (&kernbench::algorithms::ring_allreduce::KERNEL, json!({"chunks": 3, "lanes": 2}), 1),
        (&kernbench::algorithms::bidirectional_ring_allreduce::KERNEL, json!({"chunks": 2, "lanes": 1}), 1),
        (&kernbench::algorithms::ring_reduce_scatter::KERNEL, json!({"chunks": 2, "lanes": 3}), 1),
        (&kernbench::algorithms::ring_allgather::KERNEL, json!({"chunks": 3, "lanes": 2}), 5),
    ];
    for (kernel, params, blocks) in kernels {
        let run = |timing_only| {
            ring(&system, kernel)
                .params(params.clone())
                .inputs(|_, rank| Tile::filled(F32, 1003, rank as f64))
                .outputs(|_, _, input| Tile::zeros(input.dtype(), blocks * input.len()))
                .timing_only(timing_only)
                .run()
                .unwrap()
        };
        let (with_data, without) = (run(false), run(true));
        assert_eq!(with_data.time(), without.time(), "{}: the same simulated times, to the bit", kernel.name);
        assert_eq!(with_data.totals(), without.totals(), "{}", kernel.name);
        for (a, b) in with_data.pes().iter().zip(without.pes()) {
            assert!(!b.output.has_data(), "{}", kernel.name);
            assert_eq!((a.output.dtype(), a.output.len()), (b.output.dtype(), b.output.len()), "{}", kernel.name);
        }
    }
}

#[test]
fn a_timing_only_run_keeps_shapes_and_times_and_drops_the_bytes() {
    let system = one_cube(4);
    let kernel = &kernbench::algorithms::ring_allreduce::KERNEL;
    let run = |timing_only| {
        MockRun::new(&system, "ring_1d", "all_pes", kernel)
            .params(json!({"chunks": 2, "lanes": 2}))
            .inputs(|_, rank| Tile::filled(F32, 1000, rank as f64))
            .timing_only(timing_only)
            .run()
            .unwrap()
    };
    let (with_data, without) = (run(false), run(true));
    assert_eq!(with_data.time(), without.time(), "the same simulated times, to the bit");
    assert_eq!(with_data.totals(), without.totals(), "the same messages, bytes and work");
    for (a, b) in with_data.pes().iter().zip(without.pes()) {
        assert!(a.output.has_data() && !b.output.has_data());
        assert_eq!((a.output.dtype(), a.output.len()), (b.output.dtype(), b.output.len()));
    }
    // Without a timing model a timing-only run would compute nothing.
    let untimed = ring(&system, kernel).params(json!({"chunks": 1})).timing(None).timing_only(true).run();
    assert!(matches!(untimed, Err(MockError::Run(RunError::TimingOnlyUntimed))), "{untimed:?}");
}

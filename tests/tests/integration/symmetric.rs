//! Symmetric memory: one-sided puts, gets and signals, the race detector's broken-kernel corpus (each
//! kernel ends in its named error naming what went wrong, on any thread count), clean exits, and the
//! time of one-sided operations against closed forms.

use kernbench::prelude::*;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::sim::{LeftRaised, RunError, RunReport, SignalWait};
use kernbench::symmetric::Access;
use kernbench::{KernelDef, Op, System, chunk_range, chunk_start};
use serde_json::json;

const DATA: usize = 0;
const DONE: usize = 1;

fn one_cube(pes: usize) -> System {
    System::shape(1, 1, 1, pes).expect("a valid shape")
}

fn pe(index: u32) -> PeId {
    PeId::new(0, 0, index)
}

/// `kernel` on every PE of a cube of `pes`, every pair linked (`full`).
fn run_full(pes: usize, kernel: &'static KernelDef) -> MockRun<'static> {
    let system: &'static System = Box::leak(Box::new(one_cube(pes)));
    MockRun::new(system, "full", "all_pes", kernel).inputs(|_, rank| Tile::filled(F32, 8, (rank + 1) as f64))
}

fn run_error(result: Result<RunReport, MockError>) -> RunError {
    match result {
        Err(MockError::Run(e)) => e,
        other => panic!("expected a run error, got {other:?}"),
    }
}

/// The error of the run `make` builds, on 1, 2 and 4 threads, which must be the same.
fn same_error_on_any_thread_count<'a>(make: impl Fn() -> MockRun<'a>) -> RunError {
    let first = run_error(make().run());
    for threads in [2, 4] {
        let again = run_error(make().threads(threads).parallel_min_ready(1).run());
        assert_eq!(again, first, "{threads} threads report another error");
    }
    first
}

fn race(error: &RunError) -> &kernbench::symmetric::Race {
    match error {
        RunError::Kernel(KernelError::Race(race)) => race,
        other => panic!("expected a race, got {other}"),
    }
}

#[track_caller]
fn assert_side(access: &Access, pe: PeId, op: Op, line_of: &str) {
    assert_eq!((access.pe, access.lane, access.op), (pe, 0, op), "{access}");
    assert!(access.site.0.file().ends_with("symmetric.rs"), "{access}");
    let source = include_str!("symmetric.rs");
    let line = source.lines().nth(access.site.0.line() as usize - 1).unwrap_or_default();
    assert!(line.contains(line_of), "{access} points at `{line}`, not at `{line_of}`");
}

// --- the corpus ---

/// Rank 0 tells rank 1 to go ahead with a message sent before its put; rank 1 reads what the put
/// wrote before it waits on the put's signal. The put lands before the read in every schedule here, so
/// the data read is even right: the race is that nothing orders them.
#[ccl_kernel]
fn reads_without_waiting(tl: &Tl) {
    let inbox = tl.symmetric("inbox", F32, 8);
    if tl.rank() == 0 {
        tl.send(Direction::Peer(1), &Tile::zeros(F32, 1));
        tl.put_signal(1, &inbox, 0, &tl.load(Input), DATA, 1);
    } else {
        let _ = tl.recv(Direction::Peer(0), 1, F32);
        let _ = tl.read(&inbox, 0, 8); // the racy read
        tl.wait_until(DATA, 1);
    }
}

#[test]
fn a_put_read_by_the_peer_without_waiting_on_its_signal_is_a_race_naming_both_sides() {
    let error = same_error_on_any_thread_count(|| run_full(2, &reads_without_waiting::KERNEL));
    let race = race(&error);
    assert_eq!((race.owner, race.buffer, race.bytes.clone()), (pe(1), "inbox", 0..32));
    assert_side(&race.first, pe(0), Op::PutSignal, "tl.put_signal(1, &inbox, 0, &tl.load(Input), DATA, 1);");
    assert_side(&race.second, pe(1), Op::Read, "the racy read");
    let text = error.to_string();
    assert!(text.starts_with("data race on (sip 0, cube 0, pe 1)'s `inbox` bytes 0..32:"), "{text}");
    // With the detector off the same kernel runs to the end.
    run_full(2, &reads_without_waiting::KERNEL).race_detector(false).run().unwrap();
}

/// A put, then a separate signal: without a fence the signal may overtake the data.
#[ccl_kernel]
fn put_then_signal(tl: &Tl, fence: bool) {
    let inbox = tl.symmetric("inbox", F32, 8);
    if tl.rank() == 0 {
        tl.put(1, &inbox, 0, &tl.load(Input));
        if fence {
            tl.fence();
        }
        tl.signal(1, DATA, 1);
    } else {
        tl.wait_until(DATA, 1);
        tl.store(Output, &tl.read(&inbox, 0, 8)); // reads the put
    }
}

#[test]
fn a_put_then_a_separate_signal_without_a_fence_is_a_race_and_with_one_is_not() {
    let error =
        same_error_on_any_thread_count(|| run_full(2, &put_then_signal::KERNEL).params(json!({"fence": false})));
    let race = race(&error);
    assert_side(&race.first, pe(0), Op::Put, "tl.put(1, &inbox, 0, &tl.load(Input));");
    assert_side(&race.second, pe(1), Op::Read, "reads the put");
    let report = run_full(2, &put_then_signal::KERNEL).params(json!({"fence": true})).run().unwrap();
    assert_eq!(report.pes()[1].output, Tile::filled(F32, 8, 1.0));
}

/// Rank 0 raises rank 1's signal; nobody waits on it.
#[ccl_kernel]
fn raises_and_leaves(tl: &Tl) {
    if tl.rank() == 0 {
        tl.signal(1, DONE, 3);
    }
}

#[test]
fn a_signal_left_raised_at_exit_is_an_error_naming_it() {
    let error = same_error_on_any_thread_count(|| run_full(2, &raises_and_leaves::KERNEL));
    let left = LeftRaised { pe: pe(1), signal: DONE, generation: 1, value: 3, waited: 0 };
    assert_eq!(error, RunError::SignalsLeftRaised(vec![left]));
    let expected = "(sip 0, cube 0, pe 1)'s signal 1 holds 3 of generation 1 but waits took it only to 0";
    assert!(error.to_string().contains(expected), "{error}");
}

/// Ranks 1 and 2 both put into bytes 16..32 of rank 0's buffer.
#[ccl_kernel]
fn overlapping_puts(tl: &Tl) {
    let inbox = tl.symmetric("inbox", F32, 16);
    match tl.rank() {
        0 => tl.wait_until(DATA, 2),
        rank => tl.put_signal(0, &inbox, 4 * rank, &tl.load(Input), DATA, 1), // overlapping
    }
}

#[test]
fn two_peers_putting_into_overlapping_ranges_is_a_race() {
    let error = same_error_on_any_thread_count(|| run_full(3, &overlapping_puts::KERNEL));
    let race = race(&error);
    assert_eq!((race.owner, race.bytes.clone()), (pe(0), 32..48));
    assert_side(&race.first, pe(1), Op::PutSignal, "overlapping");
    assert_side(&race.second, pe(2), Op::PutSignal, "overlapping");
}

/// The shipped two-shot all-reduce with rank `skip_from`'s all-gather put to rank `skip_to` left out.
#[ccl_kernel]
fn two_shot_missing_a_signal(tl: &Tl, skip_from: usize, skip_to: usize) {
    let (rank, n, op) = (tl.rank(), tl.size(), tl.op());
    let data = tl.load(Input);
    let (len, dtype) = (data.len(), data.dtype());
    let slot = chunk_range(len, 0, n)?.len();
    let parts = tl.symmetric("parts", dtype, n * slot);
    for peer in (1..n).map(|s| (rank + s) % n) {
        tl.put_signal(peer, &parts, rank * slot, &tl.chunk(&data, peer, n), DATA, 1);
    }
    let own = tl.chunk(&data, rank, n);
    tl.wait_until(DATA, (n - 1) as u64);
    let mut acc = own.clone();
    for j in (1..n).map(|s| (rank + s) % n) {
        tl.reduce(&mut acc, &tl.read(&parts, j * slot, own.len()), op);
    }
    let gathered = tl.symmetric("gathered", dtype, len);
    let start = chunk_start(len, rank, n);
    for peer in (1..n).map(|s| (rank + s) % n) {
        if (rank, peer) != (skip_from, skip_to) {
            tl.put_signal(peer, &gathered, start, &acc, DONE, 1);
        }
    }
    tl.store_at(Output, start, &acc);
    tl.wait_until(DONE, (n - 1) as u64);
}

#[test]
fn a_two_shot_with_one_signal_missing_is_a_deadlock_naming_the_waiter_and_its_signal() {
    let error = same_error_on_any_thread_count(|| {
        run_full(4, &two_shot_missing_a_signal::KERNEL).params(json!({"skip_from": 2, "skip_to": 1}))
    });
    let RunError::Deadlock(report) = &error else { panic!("expected a deadlock, got {error}") };
    assert_eq!((report.finished, report.total, report.blocked.len()), (3, 4, 1));
    let waiter = &report.blocked[0];
    assert_eq!((waiter.pe, waiter.op), (pe(1), Op::WaitSignal));
    assert_eq!(
        waiter.signal,
        Some(SignalWait { signal: DONE, cmp: Cmp::Ge, until: 3, holds: 2, other_generations: 0 })
    );
    let text = error.to_string();
    assert!(text.contains("(sip 0, cube 0, pe 1) waits in wait_until on signal 1 for >= 3; it holds 2"), "{text}");
}

/// Rank 0 raises rank 1's signal in phase 2 of the call; rank 1 waits in phase 1.
#[ccl_kernel]
fn raises_in_another_phase(tl: &Tl) {
    if tl.rank() == 0 {
        tl.phase(2);
        tl.signal(1, DATA, 1);
    } else {
        tl.wait_until(DATA, 1);
    }
}

#[test]
fn a_raise_of_another_phase_or_call_cannot_satisfy_a_wait() {
    let error = same_error_on_any_thread_count(|| run_full(2, &raises_in_another_phase::KERNEL));
    let RunError::Deadlock(report) = &error else { panic!("expected a deadlock, got {error}") };
    let waiter = &report.blocked[0];
    assert_eq!(
        waiter.signal,
        Some(SignalWait { signal: DATA, cmp: Cmp::Ge, until: 1, holds: 0, other_generations: 1 })
    );
    let expected = "waits in wait_until on signal 0 for >= 1; it holds 0 (and 1 raised in another call or phase";
    assert!(error.to_string().contains(expected), "{error}");
}

/// Rank 0 gets a range of rank 1's buffer that nobody wrote.
#[ccl_kernel]
fn gets_unwritten(tl: &Tl) {
    let buffer = tl.symmetric("buffer", F32, 8);
    if tl.rank() == 0 {
        let _ = tl.get(1, &buffer, 2, 4); // unwritten
    }
}

#[test]
fn a_get_of_a_range_nobody_wrote_is_uninitialised_naming_the_reader_and_bytes() {
    let error = same_error_on_any_thread_count(|| run_full(2, &gets_unwritten::KERNEL));
    let RunError::Kernel(KernelError::Uninitialised(read)) = &error else {
        panic!("expected uninitialised, got {error}")
    };
    assert_eq!((read.owner, read.buffer, read.bytes.clone()), (pe(1), "buffer", 8..24));
    assert_side(&read.reader, pe(0), Op::Get, "unwritten");
    assert!(error.to_string().contains("which nobody wrote"), "{error}");
}

/// Rank 0 puts to rank 2, which a ring does not link it to.
#[ccl_kernel]
fn puts_across_the_ring(tl: &Tl) {
    let inbox = tl.symmetric("inbox", F32, 8);
    if tl.rank() == 0 {
        tl.put(2, &inbox, 0, &tl.load(Input));
    }
}

#[test]
fn a_put_to_a_pe_outside_the_plan_names_the_ranks_it_reaches() {
    let system = one_cube(4);
    let error = same_error_on_any_thread_count(|| {
        MockRun::new(&system, "ring_1d", "all_pes", &puts_across_the_ring::KERNEL).inputs(|_, _| Tile::zeros(F32, 8))
    });
    assert_eq!(
        error,
        RunError::Kernel(KernelError::NotAPeer { pe: pe(0), rank: 0, op: Op::Put, peer: 2, reachable: vec![1, 3] })
    );
}

/// Two lanes of each PE: lane 0 writes the PE's own buffer, before the barrier (`late: false`) or
/// after it; lane 1 reads it after the barrier.
#[ccl_kernel(lanes = 2)]
fn lanes_share_a_buffer(tl: &Tl, late: bool) {
    let scratch = tl.symmetric("scratch", F32, 8);
    if tl.lane() == 0 && !late {
        tl.write(&scratch, 0, &tl.load(Input));
    }
    tl.barrier_in(Group::Cube);
    if tl.lane() == 0 && late {
        tl.write(&scratch, 0, &tl.load(Input)); // lane 0 writes late
    }
    if tl.lane() == 1 {
        let _ = tl.read(&scratch, 0, 8); // lane 1 reads
    }
}

#[test]
fn lanes_of_one_pe_race_like_pes_naming_both_lanes_and_a_barrier_orders_them() {
    run_full(2, &lanes_share_a_buffer::KERNEL).params(json!({"late": false})).run().unwrap();
    let error =
        same_error_on_any_thread_count(|| run_full(2, &lanes_share_a_buffer::KERNEL).params(json!({"late": true})));
    let RunError::InLane { lane: 1, error, .. } = &error else { panic!("expected lane 1's error, got {error}") };
    let race = race(error);
    assert_side(&race.first, pe(0), Op::Write, "lane 0 writes late");
    assert_eq!((race.second.pe, race.second.lane, race.second.op), (pe(0), 1, Op::Read));
    assert!(race.to_string().contains("(sip 0, cube 0, pe 0) lane 1 (read at "), "{race}");
}

// --- clean exits and ordering that holds ---

/// Rank 0 puts without a signal; rank 1 never looks.
#[ccl_kernel]
fn put_and_forget(tl: &Tl, quiet: bool) {
    let inbox = tl.symmetric("inbox", F32, 8);
    if tl.rank() == 0 {
        tl.put(1, &inbox, 0, &tl.load(Input));
        if quiet {
            tl.quiet();
        }
    }
}

#[test]
fn a_put_that_nothing_completes_is_an_error_and_a_quiet_completes_it() {
    let error = same_error_on_any_thread_count(|| run_full(2, &put_and_forget::KERNEL).params(json!({"quiet": false})));
    let RunError::PutNotLanded { put, to, buffer, bytes } = &error else {
        panic!("expected PutNotLanded, got {error}")
    };
    assert_eq!((put.pe, *to, *buffer, bytes.clone()), (pe(0), pe(1), "inbox", 0..32));
    run_full(2, &put_and_forget::KERNEL).params(json!({"quiet": true})).run().unwrap();
}

/// Every rank writes its own copy, then a barrier, then every rank gets a neighbour's copy.
#[ccl_kernel]
fn write_barrier_get(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let mine = tl.symmetric("mine", F32, 8);
    tl.write(&mine, 0, &tl.load(Input));
    tl.barrier();
    let theirs = tl.get((rank + 1) % n, &mine, 0, 8);
    tl.barrier();
    tl.store(Output, &theirs);
}

#[test]
fn a_barrier_orders_writes_before_gets_and_a_get_returns_the_peers_data() {
    for threads in [1, 2] {
        let report = run_full(4, &write_barrier_get::KERNEL).threads(threads).parallel_min_ready(1).run().unwrap();
        for (rank, pe) in report.pes().iter().enumerate() {
            assert_eq!(pe.output, Tile::filled(F32, 8, ((rank + 1) % 4 + 1) as f64), "rank {rank}");
        }
    }
}

/// Ranks of a group barrier: every PE of a cube waits for the others of its cube only.
#[ccl_kernel]
fn cube_barrier(tl: &Tl) {
    let late = tl.program_id(0) == 0;
    if late {
        // Time passes on the first PE of each cube before it reaches the barrier.
        tl.store(Output, &tl.load(Input));
    }
    tl.barrier_in(Group::Cube);
}

#[test]
fn a_cube_barrier_waits_for_its_cube_and_not_for_the_others() {
    let system = System::shape(1, 2, 1, 2).unwrap();
    let report = MockRun::new(&system, "ring_1d", "all_pes", &cube_barrier::KERNEL)
        .inputs(|pe, _| Tile::zeros(F32, if pe.cube == 0 { 1 << 20 } else { 1 << 10 }))
        .run()
        .unwrap();
    let t = report.time().unwrap();
    // Each cube is released when its first PE has stored its input; the big cube later.
    assert_eq!(t.pes[0].finish_ns, t.pes[1].finish_ns);
    assert_eq!(t.pes[2].finish_ns, t.pes[3].finish_ns);
    assert!(t.pes[0].finish_ns > t.pes[2].finish_ns, "{t:?}");
    assert!(t.pes[1].blocked_ns > 0.0 && t.pes[1].busy_ns == 0.0, "{:?}", t.pes[1]);
}

/// Every PE stores its input, then waits at its SIP's barrier.
#[ccl_kernel]
fn sip_barrier(tl: &Tl) {
    tl.store(Output, &tl.load(Input));
    tl.barrier_in(Group::Sip);
}

#[test]
fn a_sip_barrier_waits_for_its_sip_and_not_for_the_others() {
    let system = System::shape(2, 2, 1, 1).unwrap();
    let report = MockRun::new(&system, "ring_1d", "all_pes", &sip_barrier::KERNEL)
        .inputs(|pe, _| Tile::zeros(F32, if (pe.sip, pe.cube) == (0, 0) { 1 << 20 } else { 1 << 10 }))
        .run()
        .unwrap();
    let t = report.time().unwrap();
    // SIP 0 waits for its slow PE; SIP 1's PEs leave as soon as both have stored.
    assert_eq!(t.pes[0].finish_ns, t.pes[1].finish_ns);
    assert_eq!(t.pes[2].finish_ns, t.pes[3].finish_ns);
    assert!(t.pes[1].finish_ns > t.pes[3].finish_ns, "{t:?}");
}

/// A wait for a signal only some of whose raises have come in waits on.
#[ccl_kernel]
fn counts_raises(tl: &Tl) {
    let n = tl.size();
    if tl.rank() == 0 {
        tl.wait_until(DATA, (n - 1) as u64);
        tl.store(Output, &Tile::filled(F32, 8, 1.0));
    } else {
        tl.signal(0, DATA, 1);
    }
}

#[test]
fn a_wait_until_counts_every_raise() {
    let report = run_full(5, &counts_raises::KERNEL).run().unwrap();
    assert_eq!(report.pes()[0].output, Tile::filled(F32, 8, 1.0));
}

#[ccl_kernel]
fn past_the_end(tl: &Tl) {
    let inbox = tl.symmetric("inbox", F32, 8);
    tl.put((tl.rank() + 1) % 2, &inbox, 4, &tl.load(Input));
}

#[ccl_kernel]
fn shapes_disagree(tl: &Tl) {
    let _ = tl.symmetric("inbox", F32, 8 + tl.rank());
    tl.barrier();
    let _ = tl.symmetric("inbox", F32, 8);
}

#[ccl_kernel]
fn no_such_signal(tl: &Tl) {
    tl.wait_until(1 << 20, 1);
}

#[test]
fn bad_one_sided_calls_are_named_errors() {
    let error = run_error(run_full(2, &past_the_end::KERNEL).run());
    assert!(matches!(&error, RunError::Kernel(KernelError::BadSymmetricAccess { offset: 4, len: 8, .. })), "{error}");
    let expected = "put of f32[8] at element 4 of `inbox` (f32[8]): expected f32[n] with offset + n <= 8";
    assert!(error.to_string().contains(expected), "{error}");
    let error = run_error(run_full(2, &shapes_disagree::KERNEL).run());
    let expected = "symmetric buffer `inbox` is declared as f32[8] here but exists as f32[9]";
    assert!(error.to_string().contains(expected), "{error}");
    let error = run_error(run_full(1, &no_such_signal::KERNEL).run());
    let expected = "wait_until on signal 1048576, which does not exist: expected 0..65536";
    assert!(error.to_string().contains(expected), "{error}");
}

// --- time ---

/// Injection, ns; inter-SIP latency, ns; bandwidth, GB/s.
const O: f64 = 10.0;
const L: f64 = 500.0;
const B: f64 = 64.0;

fn sips(p: usize, interconnect: &str) -> System {
    let spec = json!({
        "sips": p, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1,
        "links": {"inter_sip": {"latency_ns": L, "bandwidth_gbps": B}},
        "sip_interconnect": interconnect,
        "pe": {"compute_gflops": 1e300, "memory_gbps": 1e300, "injection_ns": O}
    });
    System::from_json_str(&spec.to_string()).unwrap()
}

#[track_caller]
fn assert_close(what: &str, got: f64, want: f64, wrong: &[f64]) {
    let close = |x: f64| (got - x).abs() <= 1e-9 * x.abs().max(1.0);
    assert!(close(want), "{what}: simulated {got} ns, closed form {want} ns");
    for &w in wrong {
        assert!(!close(w), "{what}: a wrong formula ({w} ns) would pass too");
    }
}

fn completion(system: &System, topology: &str, kernel: &KernelDef, elements: usize, out: usize) -> f64 {
    let report = MockRun::new(system, topology, "leader_only", kernel)
        .inputs(|_, rank| Tile::filled(F32, elements, rank as f64))
        .outputs(|_, _, _| Tile::zeros(F32, out))
        .run()
        .unwrap_or_else(|e| panic!("{}: {e}", kernel.name));
    report.time().unwrap().completion_ns
}

#[test]
fn the_one_sided_algorithms_take_their_closed_forms() {
    let p = 4;
    let system = sips(p, "fully_connected");
    let n = 1 << 14;
    let bytes = (n * 4) as f64;
    let pf = p as f64;
    let alg = |name: &str| kernbench::algorithms::KERNELS.iter().find(|k| k.name == name).copied().unwrap();

    // One-shot: p - 1 puts injected back to back on separate links; the last lands L + N/b later.
    let got = completion(&system, "full", alg("symmetric_one_shot_allreduce"), n, n);
    let one_step = (pf - 1.0) * O + L + bytes / B;
    assert_close("one-shot", got, one_step, &[(pf - 1.0) * (O + L + bytes / B), O + L + bytes / B]);

    // Two-shot: two such steps of N/p each.
    let got = completion(&system, "full", alg("symmetric_two_shot_allreduce"), n, n);
    let step = (pf - 1.0) * O + L + bytes / (pf * B);
    assert_close("two-shot", got, 2.0 * step, &[step, 2.0 * ((pf - 1.0) * O + L + bytes / B)]);

    // All-gather: one step of the whole input; all-to-all: one step of a block.
    let got = completion(&system, "full", alg("symmetric_allgather"), n, p * n);
    assert_close("all-gather", got, one_step, &[pf * O + L + bytes / B]);
    let got = completion(&system, "full", alg("symmetric_alltoall"), n, n);
    assert_close("all-to-all", got, step, &[(pf - 1.0) * (O + L + bytes / (pf * B))]);
}

/// Rank 1 writes its copy and signals rank 0, which then gets it.
#[ccl_kernel]
fn signal_then_get(tl: &Tl) {
    let buffer = tl.symmetric("buffer", F32, tl.buffer_len(Input));
    if tl.rank() == 1 {
        tl.write(&buffer, 0, &tl.load(Input));
        tl.signal(0, DATA, 1);
    } else {
        tl.wait_until(DATA, 1);
        let got = tl.get(1, &buffer, 0, tl.buffer_len(Input));
        tl.store(Output, &got);
    }
}

#[test]
fn a_signal_is_a_small_message_and_a_get_is_a_request_and_a_response() {
    let system = sips(2, "ring");
    let n = 1 << 12;
    let bytes = (n * 4) as f64;
    let got = completion(&system, "ring_1d", &signal_then_get::KERNEL, n, n);
    // The signal (8 bytes) lands at o + L + 8/b; the get's request another o + L + 8/b later, and its
    // response L + N/b after that.
    let signal = O + L + 8.0 / B;
    let want = 2.0 * signal + L + bytes / B;
    assert_close("signal then get", got, want, &[signal + O + L + bytes / B, 2.0 * signal + O + L + bytes / B]);
}

/// Rank 0 puts `n` elements to rank 1, sends as many on the same link, and quiets.
#[ccl_kernel]
fn put_then_send(tl: &Tl) {
    let data = tl.load(Input);
    let inbox = tl.symmetric("inbox", F32, data.len());
    if tl.rank() == 0 {
        tl.put(1, &inbox, 0, &data);
        tl.send(E, &data);
        tl.quiet();
    } else {
        let _ = tl.recv(W, data.len(), F32);
    }
}

#[test]
fn a_put_shares_its_link_with_a_send_as_a_send_would() {
    let system = sips(2, "ring");
    let n = 1 << 14;
    let bytes = (n * 4) as f64;
    assert!(bytes / B > O);
    let got = completion(&system, "ring_1d", &put_then_send::KERNEL, n, n);
    // The send leaves after the put's injection and its own, but waits for the put to clear the link.
    let want = O + 2.0 * bytes / B + L;
    assert_close("put then send", got, want, &[2.0 * O + bytes / B + L]);
}

//! Lanes: several coroutines per PE, each on its own channels with its own queues and credits, sharing
//! the PE's links and compute; their errors and deadlocks name the lane, and results do not depend on
//! the thread count.

use std::sync::Arc;

use kernbench::prelude::*;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::sim::{Call, PeBuffers, RunError, RunReport, Runtime, SpanKind, Timing};
use kernbench::{InstallPlan, KernelDef, KernelFuture, Launch, Op, System};
use serde_json::json;

/// Inter-SIP latency and bandwidth (ns, GB/s), and a compute rate (elements per ns) slow enough to see.
const L: f64 = 500.0;
const B: f64 = 50.0;
const COMPUTE: f64 = 2.0;

/// `p` SIPs of one PE in a ring, no injection, free memory, compute at `COMPUTE`.
fn ring_of(p: usize) -> System {
    let spec = json!({
        "sips": p, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1,
        "links": {"inter_sip": {"latency_ns": L, "bandwidth_gbps": B}},
        "sip_interconnect": "ring", "ipcq_depth": 4,
        "pe": {"compute_gflops": COMPUTE, "memory_gbps": 1e300, "injection_ns": 0}
    });
    System::from_json_str(&spec.to_string()).unwrap()
}

fn run(system: &System, kernel: &KernelDef, params: serde_json::Value) -> Result<RunReport, MockError> {
    MockRun::new(system, "ring_1d", "leader_only", kernel).params(params).inputs(|_, rank| filled(rank)).run()
}

fn filled(rank: usize) -> Tile {
    Tile::filled(F32, 8, rank as f64 + 1.0)
}

fn run_error(result: Result<RunReport, MockError>) -> RunError {
    match result {
        Err(MockError::Run(e)) => e,
        other => panic!("expected a run error, got {other:?}"),
    }
}

/// Every lane of rank 0 sends `messages` tiles holding its lane index east before rank 1 receives any;
/// rank 1's lanes then each receive theirs and store whether every one held their own lane's index.
#[ccl_kernel(lanes = lanes)]
fn lanes_stream(tl: &Tl, lanes: usize, messages: usize) {
    let mark = Tile::filled(F32, 8, tl.lane() as f64);
    if tl.rank() == 0 {
        for _ in 0..messages {
            tl.send(E, &mark);
        }
        // Every lane of rank 0 has sent all of its messages before rank 1 takes one.
        tl.barrier();
    } else {
        tl.barrier();
        let mut own = true;
        for _ in 0..messages {
            own &= tl.recv(W, 8, F32) == mark;
        }
        tl.store_at(Output, tl.lane(), &Tile::filled(F32, 1, if own { 1.0 } else { 0.0 }));
    }
}

#[test]
fn each_lane_has_its_own_queue_and_credits_and_receives_only_its_own_messages() {
    let system = ring_of(2);
    let depth = system.ipcq_depth();
    // Each of 3 lanes sends a full queue's worth before anything is received: with credits shared
    // between lanes this would deadlock at the barrier.
    let report = run(&system, &lanes_stream::KERNEL, json!({"lanes": 3, "messages": depth})).unwrap();
    let receiver = &report.pes()[1];
    assert_eq!(receiver.output.slice(0..3).unwrap(), Tile::filled(F32, 3, 1.0), "a lane got another's message");
    assert_eq!(receiver.lanes.len(), 3);
    for lane in &receiver.lanes {
        assert_eq!((lane.messages_received, lane.recv_waits), (depth as u64, 0), "{lane:?}");
    }
    let sender = &report.pes()[0];
    assert_eq!(sender.figures.messages_sent, 3 * depth as u64);
    assert!(sender.lanes.iter().all(|l| l.credit_waits == 0), "{:?}", sender.lanes);
    // One message more than its depth makes a lane wait for a credit: it would pass only on a queue
    // it shared with the other lanes' credits. Here it deadlocks at the sender's credit.
    let err = run_error(run(&system, &lanes_stream::KERNEL, json!({"lanes": 3, "messages": depth + 1})));
    assert!(matches!(err, RunError::Deadlock(_)), "{err}");
}

/// Lane 1 sends on channel 0, which lane 0 has used first.
#[ccl_kernel(lanes = 2)]
fn lanes_share_a_channel(tl: &Tl) {
    let x = tl.load(Input);
    if tl.rank() == 0 {
        if tl.lane() == 0 {
            tl.send_on(E, 0, &x);
        } else {
            tl.barrier();
            tl.send_on(E, 0, &x);
        }
        if tl.lane() == 0 {
            tl.barrier();
        }
    } else {
        tl.barrier();
    }
}

#[test]
fn a_lane_sending_on_a_channel_another_lane_owns_is_refused_naming_both_lanes() {
    let err = run_error(run(&ring_of(2), &lanes_share_a_channel::KERNEL, json!({})));
    let RunError::InLane { lane: 1, lanes: 2, error } = &err else { panic!("expected lane 1's error, got {err}") };
    assert!(
        matches!(
            **error,
            RunError::Kernel(KernelError::ChannelTaken { lane: 1, owner: 0, channel: 0, op: Op::Send, .. })
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("lane 1 of 2: (sip 0, cube 0, pe 0): lane 1: send on E channel 0, which lane 0"),
        "{err}"
    );
}

#[ccl_kernel(lanes = 2)]
fn sends_on_channel_five(tl: &Tl) {
    if tl.rank() == 0 {
        tl.send_on(E, 5, &tl.load(Input));
    }
}

#[test]
fn a_channel_beyond_the_runs_lanes_is_refused_with_the_valid_range() {
    let err = run_error(run(&ring_of(2), &sends_on_channel_five::KERNEL, json!({})));
    assert!(
        err.to_string().contains("send on E channel 5, which this run does not have: expected a channel in 0..2"),
        "{err}"
    );
}

/// Rank 1 echoes every lane's message back on the same channel; on rank 0, lane 0 sends on channel 1
/// only after it has received on channel 0, and lane 1 sends on channel 0 only after it has received
/// on channel 1: each waits for the other.
#[ccl_kernel(lanes = 2)]
fn lanes_wait_on_each_other(tl: &Tl) {
    let x = tl.load(Input);
    if tl.rank() == 0 {
        let _ = tl.recv(W, 8, F32);
        tl.send_on(E, 1 - tl.lane(), &x);
    } else {
        let got = tl.recv(W, 8, F32);
        tl.send(E, &got);
    }
}

#[test]
fn a_deadlock_between_two_lanes_of_one_pe_lists_each_lane_and_its_channel() {
    let err = run_error(run(&ring_of(2), &lanes_wait_on_each_other::KERNEL, json!({})));
    let RunError::Deadlock(report) = &err else { panic!("expected a deadlock, got {err}") };
    assert_eq!((report.finished, report.total), (0, 4), "{err}");
    let blocked: Vec<_> = report.blocked.iter().map(|b| (b.pe.sip, b.lane, b.op, b.channel)).collect();
    assert_eq!(
        blocked,
        [(0, Some(0), Op::Recv, 0), (0, Some(1), Op::Recv, 1), (1, Some(0), Op::Recv, 0), (1, Some(1), Op::Recv, 1)]
    );
    let text = err.to_string();
    assert!(text.contains("(sip 0, cube 0, pe 0) lane 0 waits in recv on W (peer (sip 1, cube 0, pe 0))"), "{text}");
    assert!(
        text.contains("(sip 0, cube 0, pe 0) lane 1 waits in recv on W channel 1 (peer (sip 1, cube 0, pe 0))"),
        "{text}"
    );
}

/// Every lane reduces `elements` elements at once.
#[ccl_kernel(lanes = lanes)]
fn lanes_reduce(tl: &Tl, lanes: usize, elements: usize) {
    let mut acc = Tile::zeros(F32, elements);
    tl.reduce(&mut acc, &Tile::filled(F32, elements, 1.0), ReduceOp::Sum);
}

#[test]
fn the_lanes_of_a_pe_share_its_compute_one_reduction_at_a_time() {
    let elements = 1000;
    let one = elements as f64 / COMPUTE;
    for lanes in [1, 2, 3] {
        let report = run(&ring_of(2), &lanes_reduce::KERNEL, json!({"lanes": lanes, "elements": elements})).unwrap();
        let time = report.time().unwrap();
        assert_eq!(time.completion_ns, lanes as f64 * one, "{lanes} lanes");
        let pe = &time.pes[0];
        if lanes > 1 {
            // Lane l waited for l reductions before its own.
            for (l, lane) in pe.lanes.iter().enumerate() {
                assert_eq!((lane.finish_ns, lane.blocked_ns), ((l + 1) as f64 * one, l as f64 * one), "lane {l}");
            }
            assert_eq!(pe.busy_ns, lanes as f64 * one);
        }
    }
}

/// [`ring_of`] with `engines` engines per PE.
fn ring_with_engines(p: usize, engines: usize) -> System {
    let mut spec = ring_of(p).spec().clone();
    spec.pe.engines = engines;
    System::from_spec(spec).unwrap()
}

#[test]
fn a_pe_with_several_engines_reduces_on_as_many_lanes_at_once() {
    let elements = 1000;
    let one = elements as f64 / COMPUTE;
    for (engines, lanes) in [(2usize, 1usize), (2, 2), (2, 3), (2, 4), (3, 4), (4, 4), (8, 4)] {
        let system = ring_with_engines(2, engines);
        let params = json!({"lanes": lanes, "elements": elements});
        let time = run(&system, &lanes_reduce::KERNEL, params).unwrap().time().unwrap().clone();
        // Lanes go in waves of `engines`: the last wave ends after ceil(lanes / engines) reductions.
        let waves = lanes.div_ceil(engines);
        assert_eq!(time.completion_ns, waves as f64 * one, "{engines} engines, {lanes} lanes");
        let blocked: f64 = time.pes[0].blocked_ns;
        let want: f64 = (0..lanes).map(|l| (l / engines) as f64 * one).sum();
        assert_eq!(blocked, want, "{engines} engines, {lanes} lanes: lane l waits for l / engines waves");
    }
}

#[test]
fn a_calls_launch_time_delays_every_kernel_and_adds_to_its_time() {
    let elements = 25_000;
    let base = run(&ring_of(2), &lanes_send_once::KERNEL, json!({"lanes": 2, "elements": elements})).unwrap();
    let mut spec = ring_of(2).spec().clone();
    spec.call.launch_ns = 4321.0;
    let launched = System::from_spec(spec).unwrap();
    let late = run(&launched, &lanes_send_once::KERNEL, json!({"lanes": 2, "elements": elements})).unwrap();
    let (base, late) = (base.time().unwrap(), late.time().unwrap());
    assert_eq!(late.completion_ns, base.completion_ns + 4321.0);
    for (b, l) in base.pes.iter().zip(&late.pes) {
        assert_eq!((l.finish_ns, l.busy_ns, l.blocked_ns), (b.finish_ns + 4321.0, b.busy_ns, b.blocked_ns));
    }
}

/// Every lane sends one tile of `elements` f32 east at time 0; rank 1's lanes receive them.
#[ccl_kernel(lanes = lanes)]
fn lanes_send_once(tl: &Tl, lanes: usize, elements: usize) {
    if tl.rank() == 0 {
        tl.send(E, &Tile::zeros(F32, elements));
    } else {
        let _ = tl.recv(W, elements, F32);
    }
}

#[test]
fn the_lanes_of_a_pe_share_its_links_in_the_order_their_transfers_are_ready() {
    let elements = 25_000;
    let transfer = 4.0 * elements as f64 / B;
    for lanes in [1usize, 2, 4] {
        let report = run(&ring_of(2), &lanes_send_once::KERNEL, json!({"lanes": lanes, "elements": elements})).unwrap();
        let time = report.time().unwrap();
        // One link direction carries the lanes' messages one after another; latency overlaps.
        let want = lanes as f64 * transfer + L;
        assert!(
            (time.completion_ns - want).abs() <= 1e-9 * want,
            "{lanes} lanes: {} ns, want {want}",
            time.completion_ns
        );
    }
}

#[test]
fn lanes_give_the_same_outputs_times_and_figures_at_one_and_two_threads() {
    let system = ring_of(8);
    let kernel = &lanes_wait_free_ring::KERNEL;
    let at = |threads| {
        MockRun::new(&system, "ring_1d", "leader_only", kernel)
            .params(json!({"lanes": 3}))
            .inputs(|_, rank| Tile::from_vec((0..96).map(|i| (i * (rank + 1)) as f32).collect()))
            .timing(Some(Timing { trace: true, ..Timing::default() }))
            .threads(threads)
            .parallel_min_ready(1)
            .run()
            .unwrap()
    };
    let one = at(1);
    assert_eq!(one, at(2));
    // Every rank ends with the sum over ranks: each lane reduced its third.
    let want: Vec<f32> = (0..96).map(|i| (i * (1..=8).sum::<usize>()) as f32).collect();
    assert!(one.pes().iter().all(|p| p.output == Tile::from_vec(want.clone())));
    // The trace has one track per lane.
    let trace = serde_json::to_string(&one.trace().unwrap()).unwrap();
    assert!(trace.contains("(sip 7, cube 0, pe 0) lane 2"), "no track for lane 2");
    let spans = &one.time().unwrap().pes[3].lanes[1].spans;
    assert!(spans.iter().any(|s| s.kind == SpanKind::Recv), "{spans:?}");
}

/// A ring all-reduce per lane, each lane on its own third of the data: the plain ring, `lanes` times.
#[ccl_kernel(lanes = lanes)]
fn lanes_wait_free_ring(tl: &Tl, lanes: usize) {
    let data = tl.load(Input);
    let (n, rank) = (tl.size(), tl.rank());
    let mut mine = tl.chunk(&data, tl.lane(), tl.lanes());
    let offset = tl.lane() * mine.len();
    let mut parts = Vec::with_capacity(n);
    for i in 0..n {
        parts.push(tl.chunk(&mine, i, n));
    }
    for step in 0..n - 1 {
        let (send, recv) = ((rank + n - step) % n, (rank + n - step - 1) % n);
        tl.send(E, &parts[send]);
        let got = tl.recv(W, parts[recv].len(), F32);
        tl.reduce(&mut parts[recv], &got, ReduceOp::Sum);
    }
    for step in 0..n - 1 {
        let (send, recv) = ((rank + 1 + n - step) % n, (rank + n - step) % n);
        tl.send(E, &parts[send]);
        parts[recv] = tl.recv(W, parts[recv].len(), F32);
    }
    mine = tl.concat(&parts);
    tl.store_at(Output, offset, &mine);
}

/// A kernel that runs as `lanes[rank]` lanes: a `Launch` written by hand, as a chunk program's is.
struct PerRank {
    inner: Arc<dyn Launch>,
    lanes: Vec<usize>,
}

impl Launch for PerRank {
    fn launch(&self, tl: Tl) -> KernelFuture {
        self.inner.launch(tl)
    }

    fn lanes(&self, rank: usize, _size: usize) -> usize {
        self.lanes[rank]
    }
}

/// Rank 0 runs one lane that sends on channels 0 and 1; rank 1 runs two, lane `c` receiving channel `c`.
#[ccl_kernel]
fn one_lane_feeds_two(tl: &Tl) {
    if tl.rank() == 0 {
        tl.send_on(E, 0, &Tile::filled(F32, 2, 10.0));
        tl.send_on(E, 1, &Tile::filled(F32, 2, 11.0));
    } else {
        let got = tl.recv(W, 2, F32);
        tl.store_at(Output, 2 * tl.lane(), &got);
    }
}

fn run_per_rank(system: &System, lanes: Vec<usize>) -> Result<RunReport, RunError> {
    let plan = InstallPlan::build(system, "ring_1d", "leader_only").unwrap();
    let inner = one_lane_feeds_two::KERNEL.instantiate(&serde_json::Map::new()).unwrap();
    let buffers = (0..2).map(|_| PeBuffers { input: Tile::zeros(F32, 4), output: Tile::zeros(F32, 4) }).collect();
    Runtime::new(system).run(&plan, &PerRank { inner, lanes }, buffers, Call::default())
}

#[test]
fn lane_counts_may_differ_per_pe_and_a_lane_need_not_match_its_peers_index() {
    let report = run_per_rank(&ring_of(2), vec![1, 2]).unwrap();
    assert_eq!(report.pes()[1].output, Tile::from_vec(vec![10.0f32, 10.0, 11.0, 11.0]));
    assert_eq!(report.pes()[1].lanes.len(), 2);
    assert!(report.pes()[0].lanes.is_empty(), "a PE of one lane has its figures and no per-lane list");
    let err = run_per_rank(&ring_of(2), vec![1, 0]).unwrap_err();
    assert!(err.to_string().contains("(sip 1, cube 0, pe 0): the kernel asks for 0 lanes: expected 1..=256"), "{err}");
}

/// Does nothing: its PE finishes the moment its kernel starts.
#[ccl_kernel]
fn starts_and_ends(tl: &Tl) {
    let _ = tl.rank();
}

#[test]
fn a_thread_driving_several_gpus_launches_their_kernels_one_after_another() {
    let mut spec = ring_of(4).spec().clone();
    (spec.call.launch_ns, spec.call.launch_per_gpu_ns) = (500.0, 1000.0);
    let system = System::from_spec(spec).unwrap();
    let finishes = |gpus_per_thread: usize| -> Vec<f64> {
        let run = MockRun::new(&system, "ring_1d", "leader_only", &starts_and_ends::KERNEL)
            .inputs(|_, rank| filled(rank))
            .gpus_per_thread(gpus_per_thread)
            .run()
            .unwrap();
        run.time().unwrap().pes.iter().map(|p| p.finish_ns).collect()
    };
    // A thread a GPU: every kernel starts at the launch.
    assert_eq!(finishes(1), [500.0; 4]);
    // Two GPUs a thread: the second of each pair a launch later.
    assert_eq!(finishes(2), [500.0, 1500.0, 500.0, 1500.0]);
    assert_eq!(finishes(4), [500.0, 1500.0, 2500.0, 3500.0]);
}

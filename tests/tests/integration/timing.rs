//! The timing model against closed forms: alpha-beta costs of ring, butterfly, tree and direct
//! algorithms on contention-free systems, contention on a shared channel, an inter-SIP bottleneck,
//! cut-through against store-and-forward, stragglers, credit stalls, the accounting of every PE's time
//! and every channel's bytes, and determinism across thread counts.
//!
//! Notation: `p` ranks; `o` injection (ns); `L` a link's latency (ns); `a = o + L`; `b` bandwidth
//! (GB/s = bytes/ns); `N` bytes per SIP. Compute and memory run at 1e300 (GFLOP/s, GB/s) unless a
//! test says otherwise, so they cost nothing to f64 precision. Every closed form is also checked
//! against the nearby wrong forms (`p` for `p - 1`, no latency term, ...) to show the check can fail.

use std::collections::BTreeMap;

use kernbench::prelude::*;
use kernbench::sim::testing::{MockError, MockRun};
use kernbench::sim::{Routing, RunError, RunReport, Straggler, TimeReport, Timing};
use kernbench::{Channel, KernelDef, LinkClass, System};
use serde_json::json;

/// Injection, ns.
const O: f64 = 10.0;
/// Inter-SIP latency, ns.
const L: f64 = 500.0;
/// Inter-SIP bandwidth, GB/s.
const B: f64 = 64.0;
/// `o + L`: the cost of a one-hop message of no bytes.
const A: f64 = O + L;
/// Free compute and memory: their time vanishes next to any link's.
const FREE: f64 = 1e300;

fn system_from(spec: serde_json::Value) -> System {
    System::from_json_str(&spec.to_string()).unwrap_or_else(|e| panic!("{e}: {spec}"))
}

/// `p` SIPs of one PE each, linked by `interconnect` with inter-SIP links of latency `L` and
/// bandwidth `B`, injection `O`, free compute and memory.
fn sips(p: usize, interconnect: &str) -> System {
    system_from(json!({
        "sips": p, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1,
        "links": {"inter_sip": {"latency_ns": L, "bandwidth_gbps": B}},
        "sip_interconnect": interconnect,
        "pe": {"compute_gflops": FREE, "memory_gbps": FREE, "injection_ns": O}
    }))
}

/// Asserts `got == want` to 1e-9 relative, and that each of `wrong` (nearby wrong formulas) would
/// not have passed.
#[track_caller]
fn assert_closed_form(what: &str, got: f64, want: f64, wrong: &[f64]) {
    let close = |x: f64| (got - x).abs() <= 1e-9 * x.abs().max(1.0);
    assert!(close(want), "{what}: simulated {got} ns, closed form {want} ns");
    for &w in wrong {
        assert!(!close(w), "{what}: a wrong formula ({w} ns) would pass too, so the check proves nothing");
    }
}

/// Runs `kernel` over `topology` on the SIP leaders, every rank holding `elements` f32 (output sized
/// `output_elements`).
fn run_leaders(
    system: &System,
    topology: &str,
    kernel: &KernelDef,
    params: serde_json::Value,
    elements: usize,
    output_elements: usize,
) -> RunReport {
    let report = MockRun::new(system, topology, "leader_only", kernel)
        .params(params)
        .inputs(|_, rank| Tile::filled(F32, elements, rank as f64))
        .outputs(|_, _, _| Tile::zeros(F32, output_elements))
        .run()
        .unwrap_or_else(|e| panic!("{}: {e}", kernel.name));
    assert_accounting(&report, &Timing::default());
    report
}

fn time(report: &RunReport) -> &TimeReport {
    report.time().expect("timing is on by default")
}

fn completion(report: &RunReport) -> f64 {
    time(report).completion_ns
}

/// Every lane's busy and blocked time add up to its finish less its PE's late start, and a PE of
/// several lanes finishes with its last.
#[track_caller]
fn assert_accounting(report: &RunReport, timing: &Timing) {
    let t = time(report);
    for (pe, pt) in report.pes().iter().zip(&t.pes) {
        let delay = timing.stragglers.get(&pe.pe).map_or(0.0, |s| s.start_delay_ns);
        let lanes = if pt.lanes.is_empty() { std::slice::from_ref(pt) } else { &pt.lanes[..] };
        for (lane, lt) in lanes.iter().enumerate() {
            let worked = lt.busy_ns + lt.blocked_ns;
            let span = lt.finish_ns - delay;
            let near = (worked - span).abs() <= 1e-9 * span.max(1.0);
            assert!(near, "{} lane {lane}: busy + blocked {worked} != {span}", pe.pe);
        }
        assert_eq!(pt.finish_ns, lanes.iter().map(|l| l.finish_ns).fold(f64::MIN, f64::max), "{}", pe.pe);
    }
}

/// Every neighbour of every participant of `topology` on `system` is one channel away.
#[track_caller]
fn assert_one_hop(system: &System, topology: &str) {
    let plan = kernbench::InstallPlan::build(system, topology, "leader_only").unwrap();
    for install in plan.participants() {
        for entry in &install.neighbors {
            assert_eq!(system.route(install.pe, entry.peer).hops(), 1, "{} -> {}", install.pe, entry.peer);
        }
    }
}

// --- contention-free closed forms ---

/// A contention-free closed form: `kernel` over `topology` on the leaders of [`sips`]`(p, interconnect)`,
/// every rank holding `elements` f32 (output sized `output`), against `forms(p, bytes)` for `bytes`
/// of input a rank: the closed form and the nearby wrong ones.
struct ClosedForm {
    /// The algorithm, for messages.
    name: &'static str,
    kernel: &'static KernelDef,
    topology: &'static str,
    interconnect: &'static str,
    params: serde_json::Value,
    p: usize,
    elements: usize,
    output: usize,
    forms: fn(f64, f64) -> (f64, Vec<f64>),
}

/// Runs `case` and checks its completion time against its closed form, naming the case.
fn closed_form_case(case: &ClosedForm) {
    let system = sips(case.p, case.interconnect);
    assert_one_hop(&system, case.topology);
    let report = run_leaders(&system, case.topology, case.kernel, case.params.clone(), case.elements, case.output);
    let (want, wrong) = (case.forms)(case.p as f64, (case.elements * 4) as f64);
    assert_closed_form(&format!("{}, p = {}", case.name, case.p), completion(&report), want, &wrong);
}

/// Every algorithm with a closed form on a contention-free system, `n` elements a rank.
fn closed_forms() -> Vec<ClosedForm> {
    use kernbench::algorithms::*;
    let mut cases = Vec::new();
    for p in [4, 8] {
        // Ring all-reduce, one chunk: 2(p-1) steps of a message of N/p bytes.
        cases.push(ClosedForm {
            name: "ring all-reduce",
            kernel: &ring_allreduce::KERNEL,
            topology: "ring_1d",
            interconnect: "ring",
            params: json!({"chunks": 1}),
            p,
            elements: 1 << 16,
            output: 1 << 16,
            forms: |p, n| {
                let want = 2.0 * (p - 1.0) * (A + n / (p * B));
                (want, vec![2.0 * p * (A + n / (p * B)), 2.0 * (p - 1.0) * (A + n / B), 2.0 * (p - 1.0) * n / (p * B)])
            },
        });
        // Recursive doubling: log2(p) exchanges of all N bytes with a one-hop partner.
        cases.push(ClosedForm {
            name: "recursive doubling",
            kernel: &recursive_doubling_allreduce::KERNEL,
            topology: "hypercube",
            interconnect: "fully_connected",
            params: json!({}),
            p,
            elements: 1 << 16,
            output: 1 << 16,
            forms: |p, n| {
                let log = p.log2();
                (log * (A + n / B), vec![(p - 1.0) * (A + n / B), log * (A + n / (p * B)), (log + 1.0) * (A + n / B)])
            },
        });
    }
    // Rabenseifner: a reduce-scatter of log2(p) steps of N/2, N/4, ..., N/p, and an all-gather the same
    // back: 2 log2(p) a + 2 (p-1)/p N/b.
    cases.push(ClosedForm {
        name: "rabenseifner",
        kernel: &rabenseifner_allreduce::KERNEL,
        topology: "hypercube",
        interconnect: "fully_connected",
        params: json!({}),
        p: 8,
        elements: 1 << 16,
        output: 1 << 16,
        forms: |p, n| {
            let log = p.log2();
            let want = 2.0 * log * A + 2.0 * (p - 1.0) / p * n / B;
            (want, vec![2.0 * log * A + 2.0 * n / B, log * A + 2.0 * (p - 1.0) / p * n / B])
        },
    });
    // Ring all-gather: (p-1)(a + m/b) for m bytes contributed per rank.
    cases.push(ClosedForm {
        name: "ring all-gather",
        kernel: &ring_allgather::KERNEL,
        topology: "ring_1d",
        interconnect: "ring",
        params: json!({"chunks": 1}),
        p: 4,
        elements: 1 << 14,
        output: 4 << 14,
        forms: |p, m| ((p - 1.0) * (A + m / B), vec![p * (A + m / B), (p - 1.0) * (A + p * m / B)]),
    });
    // Recursive-doubling all-gather: step k sends 2^k blocks, log2(p) a + (p-1) m/b.
    cases.push(ClosedForm {
        name: "recursive-doubling all-gather",
        kernel: &recursive_doubling_allgather::KERNEL,
        topology: "hypercube",
        interconnect: "fully_connected",
        params: json!({}),
        p: 8,
        elements: 1 << 12,
        output: 8 << 12,
        forms: |p, m| {
            let log = p.log2();
            (log * A + (p - 1.0) * m / B, vec![log * (A + m / B), log * A + p * m / B])
        },
    });
    // Ring reduce-scatter: p-1 steps of N/p.
    cases.push(ClosedForm {
        name: "ring reduce-scatter",
        kernel: &ring_reduce_scatter::KERNEL,
        topology: "ring_1d",
        interconnect: "ring",
        params: json!({"chunks": 1}),
        p: 4,
        elements: 1 << 16,
        output: 1 << 14,
        forms: |p, n| {
            let step = A + n / (p * B);
            ((p - 1.0) * step, vec![p * step, 2.0 * (p - 1.0) * step])
        },
    });
    // Recursive-halving reduce-scatter: the message halves each step, log2(p) a + (p-1)/p N/b.
    cases.push(ClosedForm {
        name: "recursive-halving reduce-scatter",
        kernel: &recursive_halving_reduce_scatter::KERNEL,
        topology: "hypercube",
        interconnect: "fully_connected",
        params: json!({}),
        p: 8,
        elements: 1 << 16,
        output: 1 << 13,
        forms: |p, n| {
            let log = p.log2();
            (log * A + (p - 1.0) / p * n / B, vec![log * (A + n / B), log * A + n / B])
        },
    });
    // Binomial-tree broadcast from rank 0 over p = 2^d ranks: a rank passes the data on to every
    // `v + 2^k` above its highest bit, nearest first, injecting one message after another, so the rank
    // whose bits are all set gets it last, after d(o + L + N/b) = d(a + N/b).
    for p in [8, 16] {
        cases.push(ClosedForm {
            name: "tree broadcast",
            kernel: &tree_broadcast::KERNEL,
            topology: "circulant",
            interconnect: "fully_connected",
            params: json!({}),
            p,
            elements: 1 << 14,
            output: 1 << 14,
            forms: |p, n| {
                let d = p.log2();
                (d * (A + n / B), vec![d * (2.0 * O + L + n / B), (d + 1.0) * (A + n / B)])
            },
        });
    }
    // Tree all-reduce, one piece over a full tree of height h: h(a + N/b) up (children send at once),
    // h(2o + L + N/b) down (a parent injects to its children in turn).
    cases.push(ClosedForm {
        name: "tree all-reduce",
        kernel: &tree_allreduce::KERNEL,
        topology: "tree",
        interconnect: "fully_connected",
        params: json!({"chunks": 1}),
        p: 7,
        elements: 1 << 14,
        output: 1 << 14,
        forms: |p, n| {
            let (up, down) = (A + n / B, 2.0 * O + L + n / B);
            let h = (p + 1.0).log2() - 1.0;
            (h * up + h * down, vec![2.0 * h * up, 2.0 * h * down])
        },
    });
    // Pipelined ring broadcast, k = 8 chunks of N/k bytes down a chain of p ranks: the last chunk
    // reaches the end after (p-1)(o + L) + (p + k - 2) N/(k b), as long as a chunk's transfer covers an
    // injection and the credit's round trip (3 N/(k b) >= o + 2L) so neither stalls the pipe.
    cases.push(ClosedForm {
        name: "pipelined ring broadcast, k = 8",
        kernel: &ring_broadcast::KERNEL,
        topology: "ring_1d",
        interconnect: "ring",
        params: json!({"chunks": 8}),
        p: 4,
        elements: 1 << 16,
        output: 1 << 16,
        forms: |p, n| {
            let k = 8.0;
            let chunk = n / (k * B);
            assert!(3.0 * chunk >= O + 2.0 * L && chunk >= O, "a chunk covers an injection and a credit");
            let want = (p - 1.0) * (O + L) + (p + k - 2.0) * chunk;
            (want, vec![(p - 1.0) * (A + n / B), (p - 1.0) * (O + L) + (p + k - 1.0) * chunk])
        },
    });
    // One-shot all-reduce: every rank injects p - 1 copies back to back on separate channels; the last
    // one leaves after (p-1) o and arrives L + N/b later.
    cases.push(ClosedForm {
        name: "one-shot all-reduce",
        kernel: &one_shot_allreduce::KERNEL,
        topology: "full",
        interconnect: "fully_connected",
        params: json!({}),
        p: 4,
        elements: 1 << 14,
        output: 1 << 14,
        forms: |p, n| {
            let want = (p - 1.0) * O + L + n / B;
            (want, vec![(p - 1.0) * (A + n / B), A + n / B, (p - 1.0) * O + L + (p - 1.0) * n / B])
        },
    });
    // Pairwise all-to-all: p - 1 steps of one block.
    cases.push(ClosedForm {
        name: "pairwise all-to-all",
        kernel: &pairwise_alltoall::KERNEL,
        topology: "full",
        interconnect: "fully_connected",
        params: json!({}),
        p: 4,
        elements: 1 << 16,
        output: 1 << 16,
        forms: |p, n| {
            let step = A + n / (p * B);
            ((p - 1.0) * step, vec![p * step, (p - 1.0) * (A + n / B)])
        },
    });
    cases
}

#[test]
fn every_contention_free_algorithm_takes_its_closed_form() {
    let cases = closed_forms();
    assert_eq!(cases.len(), 15, "every case of the table");
    for case in &cases {
        closed_form_case(case);
    }
}

// --- pipelining ---

/// `p` SIPs of one PE on a ring of inter-SIP links (latency `L`, bandwidth `B`), queues of `depth`
/// slots, no injection, free compute and memory: only the links take time.
fn pipelined_ring(p: usize, depth: usize) -> System {
    system_from(json!({
        "sips": p, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "ipcq_depth": depth,
        "links": {"inter_sip": {"latency_ns": L, "bandwidth_gbps": B}},
        "sip_interconnect": "ring",
        "pe": {"compute_gflops": FREE, "memory_gbps": FREE, "injection_ns": 0}
    }))
}

/// How a pipelined ring all-reduce's time is bound.
#[derive(Clone, Copy, Debug)]
enum Bound {
    Bandwidth,
    Latency,
    Credit,
}

/// The pipelined ring all-reduce on [`pipelined_ring`]`(p, d)`, each of the `p` parts in `k` pieces of
/// `tau` ns on a link (`c = tau B` bytes, `S = p k c` per rank), against the closed form of `bound`.
///
/// Every rank sends `M = 2 (p - 1) k` messages; message `m` is piece `m mod k` of step `m / k`, and a
/// rank receives message `m - k` (the piece message `m` forwards) just before sending it. All ranks
/// move in step, so with `D_m` the time message `m` leaves and `A_m = D_m + tau + L` its arrival:
///
/// `D_m = max(D_{m-1} + tau, A_{m-k}, A_{m-d} + L)`
///
/// (the link is free; the piece has arrived one step earlier; the slot's credit is back, `L` after
/// the receive of message `m - d`), as long as no receive finds the PE's clock past the arrival it
/// waits for, and the call ends at the last arrival, `T = A_{M-1}`.
///
/// - Bandwidth-bound, `(k-1) tau >= L` and `(d-1) tau >= 2L`: the link term always wins, `D_m = m
///   tau`, and `T = M tau + L = 2 (p-1)/p S/B + L`.
/// - Latency-bound, `(k-1) tau < L` (with `d >= 2k`, so credits are back in time): every step's first
///   piece waits for the arrival of the step before's, `D_{sk+j} = s (tau + L) + j tau`, and
///   `T = 2 (p-1) (tau + L) + (k-1) tau`.
/// - Credit-bound, `(d-1) tau < 2L` (with `(k-1) tau >= L` and `d > k`): every `d` messages wait for
///   the credit of the first of the `d` before, `D_m = floor(m/d) (tau + 2L) + (m mod d) tau`, and
///   `T = D_{M-1} + tau + L`. This needs every receive to find its piece already waiting, which holds
///   at the points tested (`k = 3`, `d = 4`). It does not at `d = k`, where the credit comes from the
///   receive just before the send and that receive waited for the previous credit, nor at `k = 4`,
///   `d = 5`, 200 ns: there the time has no such simple form, and it is not tested.
fn pipelined_ring_allreduce_case(p: usize, k: usize, d: usize, tau: f64, bound: Bound) {
    pipelined_ring_case(p, k, d, tau, bound, Pipeline::SendAhead);
}

/// How a ring keeps `k` messages in flight per link.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pipeline {
    /// One lane sends each of its `k` pieces on as soon as it has arrived.
    SendAhead,
    /// `k` lanes run the plain ring, one piece each, on their own queues.
    Lanes,
}

/// As [`pipelined_ring_allreduce_case`], with the `k` messages in flight kept by `pipeline`. With `k`
/// lanes of one piece, lane `j`'s message of step `s` leaves `j tau` after lane 0's (the link takes
/// them one at a time), so the departures, and both closed forms, are those of `k` pieces sent ahead;
/// each lane's queue carries one message a step, so its credits are back in time whenever
/// `(d - 1) k tau >= tau + 2L`, and the credit-bound form does not arise.
fn pipelined_ring_case(p: usize, k: usize, d: usize, tau: f64, bound: Bound, pipeline: Pipeline) {
    let (pf, kf, df) = (p as f64, k as f64, d as f64);
    let data_in_time = (kf - 1.0) * tau >= L;
    let credit_in_time = match pipeline {
        Pipeline::SendAhead => (df - 1.0) * tau >= 2.0 * L,
        Pipeline::Lanes => (df - 1.0) * kf * tau >= tau + 2.0 * L,
    };
    match bound {
        Bound::Bandwidth => assert!(data_in_time && credit_in_time),
        Bound::Latency => assert!(!data_in_time && (d >= 2 * k || pipeline == Pipeline::Lanes && credit_in_time)),
        Bound::Credit => assert!(!credit_in_time && data_in_time && d > k && pipeline == Pipeline::SendAhead),
    }
    let system = pipelined_ring(p, d);
    assert_one_hop(&system, "ring_1d");
    let piece_elements = (tau * B / 4.0) as usize;
    assert_eq!((piece_elements * 4) as f64, tau * B, "a piece is a whole number of f32");
    let n = p * k * piece_elements;
    let bytes = (n * 4) as f64;
    let kernel = &kernbench::algorithms::ring_allreduce::KERNEL;
    let params = match pipeline {
        Pipeline::SendAhead => json!({"chunks": k, "lanes": 1}),
        Pipeline::Lanes => json!({"chunks": 1, "lanes": k}),
    };
    let report = run_leaders(&system, "ring_1d", kernel, params, n, n);

    let messages = 2.0 * (pf - 1.0) * kf;
    let bandwidth = messages * tau + L;
    assert_closed_form("the link bound", bandwidth, 2.0 * (pf - 1.0) / pf * bytes / B + L, &[]);
    let latency = 2.0 * (pf - 1.0) * (tau + L) + (kf - 1.0) * tau;
    let last = 2 * (p - 1) * k - 1;
    let credit = (last / d) as f64 * (tau + 2.0 * L) + (last % d) as f64 * tau + tau + L;
    let unpipelined = 2.0 * (pf - 1.0) * (kf * tau + L);
    let (want, wrong) = match bound {
        Bound::Bandwidth => (bandwidth, [latency, credit, unpipelined]),
        Bound::Latency => (latency, [bandwidth, credit, unpipelined]),
        Bound::Credit => (credit, [bandwidth, latency, unpipelined]),
    };
    let what = format!(
        "pipelined ring all-reduce ({pipeline:?}), p = {p}, k = {k}, depth {d}, {tau} ns a piece ({bound:?}-bound)"
    );
    assert_closed_form(&what, completion(&report), want, &wrong);
}

#[test]
fn a_pipelined_ring_allreduce_is_link_bound_when_the_next_piece_and_its_credit_are_ready() {
    pipelined_ring_allreduce_case(4, 2, 4, 1000.0, Bound::Bandwidth);
    pipelined_ring_allreduce_case(8, 2, 8, 600.0, Bound::Bandwidth);
    pipelined_ring_allreduce_case(4, 3, 4, 340.0, Bound::Bandwidth);
}

#[test]
fn a_pipelined_ring_allreduce_whose_pieces_are_too_small_to_cover_the_latency_is_latency_bound() {
    // (k - 1) tau = 400 < L; with 600 ns pieces the same ring is link-bound (above).
    pipelined_ring_allreduce_case(4, 2, 8, 400.0, Bound::Latency);
    pipelined_ring_allreduce_case(8, 2, 8, 400.0, Bound::Latency);
}

#[test]
fn a_pipelined_ring_allreduce_whose_queues_are_too_shallow_for_the_credits_round_trip_is_credit_bound() {
    // (d - 1) tau = 900 < 2L; with 340 ns pieces the same ring is link-bound (above).
    pipelined_ring_allreduce_case(4, 3, 4, 300.0, Bound::Credit);
    pipelined_ring_allreduce_case(6, 3, 4, 300.0, Bound::Credit);
    pipelined_ring_allreduce_case(8, 3, 4, 260.0, Bound::Credit);
}

#[test]
fn a_ring_on_lanes_is_link_bound_when_the_other_lanes_cover_the_latency() {
    // (k - 1) tau >= L with k lanes of one piece each.
    pipelined_ring_case(4, 2, 4, 1000.0, Bound::Bandwidth, Pipeline::Lanes);
    pipelined_ring_case(8, 4, 4, 200.0, Bound::Bandwidth, Pipeline::Lanes);
}

#[test]
fn a_ring_on_lanes_too_few_to_cover_the_latency_is_latency_bound() {
    // (k - 1) tau = 400 < L; with 1000 ns pieces the same ring is link-bound (above).
    pipelined_ring_case(4, 2, 4, 400.0, Bound::Latency, Pipeline::Lanes);
    pipelined_ring_case(6, 3, 4, 150.0, Bound::Latency, Pipeline::Lanes);
}

/// `configs/systems/ring16.json`: 16 SIPs on a ring of 500 ns, 50 GiB/s links, queue depth 4.
fn ring16() -> System {
    System::from_file(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systems/ring16.json")))
        .unwrap()
}

#[test]
fn the_shipped_ring_allreduce_is_within_half_a_percent_of_the_link_bound_on_ring16() {
    let system = ring16();
    let registry: serde_json::Value = serde_json::from_str(kernbench::algorithms::DEFAULT_CCL_JSON).unwrap();
    let params = registry["algorithms"]["ring"]["params"].clone();
    let (p, link) = (system.sips() as f64, system.link(LinkClass::InterSip));
    let kernel = &kernbench::algorithms::ring_allreduce::KERNEL;
    for (bytes, bound_us) in [(1usize << 20, 37.12), (16 << 20, 586.44)] {
        let report = run_leaders(&system, "ring_1d", kernel, params.clone(), bytes / 4, bytes / 4);
        let bound = 2.0 * (p - 1.0) / p * bytes as f64 / link.bandwidth_gbps + link.latency_ns;
        assert!((bound / 1e3 - bound_us).abs() < 0.005, "the link bound of {bytes} bytes is {bound} ns");
        let got = completion(&report);
        assert!(got >= bound && got <= 1.005 * bound, "{bytes} bytes with {params}: {got} ns, link bound {bound} ns");
    }
}

/// With 1, 2, 4 and 8 lanes a 16 MiB ring all-reduce on ring16 never gets slower as lanes are added:
/// the lanes' messages share each link, so more lanes only keep it busier.
#[test]
fn adding_lanes_never_slows_the_ring_allreduce_on_ring16() {
    let system = ring16();
    let kernel = &kernbench::algorithms::ring_allreduce::KERNEL;
    let elements = (16 << 20) / 4;
    let mut last = f64::INFINITY;
    for lanes in [1, 2, 4, 8] {
        let params = json!({"chunks": 2, "lanes": lanes});
        let got = completion(&run_leaders(&system, "ring_1d", kernel, params, elements, elements));
        assert!(got <= last, "{lanes} lanes: {got} ns, fewer lanes took {last} ns");
        last = got;
    }
}

/// The bidirectional ring sends half of the data each way, so its bound is half the ring's:
/// (N-1)/N x S/B + alpha, 293.47 us at 16 MiB and 18.81 us at 1 MiB on ring16. With its shipped
/// parameters it is within 1 % of it at 16 MiB and 3 % at 1 MiB.
#[test]
fn the_shipped_bidirectional_ring_is_near_its_bound_on_ring16() {
    let system = ring16();
    let registry: serde_json::Value = serde_json::from_str(kernbench::algorithms::DEFAULT_CCL_JSON).unwrap();
    let params = registry["algorithms"]["bidirectional_ring"]["params"].clone();
    let (p, link) = (system.sips() as f64, system.link(LinkClass::InterSip));
    let kernel = &kernbench::algorithms::bidirectional_ring_allreduce::KERNEL;
    for (bytes, bound_us, within) in [(1usize << 20, 18.81, 0.03), (16 << 20, 293.47, 0.01)] {
        let bound = (p - 1.0) / p * bytes as f64 / link.bandwidth_gbps + link.latency_ns;
        assert!((bound / 1e3 - bound_us).abs() < 0.005, "the bound of {bytes} bytes is {bound} ns");
        let got = completion(&run_leaders(&system, "ring_1d", kernel, params.clone(), bytes / 4, bytes / 4));
        assert!(got >= bound && got <= (1.0 + within) * bound, "{bytes} bytes: {got} ns, bound {bound} ns");
    }
}

// --- contention ---

/// Ranks 1..=senders each send `elements` f32 to rank 0, which receives them in rank order.
#[ccl_kernel]
fn incast(tl: &Tl, senders: usize, elements: usize) {
    let rank = tl.rank();
    if rank == 0 {
        for j in 1..=senders {
            let _ = tl.recv(Direction::Peer(j as u32), elements, F32);
        }
    } else if rank <= senders {
        tl.send(Direction::Peer(0), &Tile::zeros(F32, elements));
    }
}

fn incast_run(system: &System, senders: usize, elements: usize) -> RunReport {
    MockRun::new(system, "full", "leader_only", &incast::KERNEL)
        .params(json!({"senders": senders, "elements": elements}))
        .run()
        .unwrap()
}

#[test]
fn two_flows_on_one_channel_take_twice_as_long_as_one() {
    // Through a switch, SIP 1 -> SIP 0 and SIP 2 -> SIP 0 cross their own uplinks, then share the
    // switch's channel to SIP 0. One flow: o + 2L + N/b; two: the second waits for the first on the
    // shared channel, o + 2L + 2 N/b.
    let system = sips(3, "switched");
    let (to_0_from_1, to_0_from_2) =
        (system.route(PeId::new(1, 0, 0), PeId::new(0, 0, 0)), system.route(PeId::new(2, 0, 0), PeId::new(0, 0, 0)));
    assert_eq!((to_0_from_1.hops(), to_0_from_2.hops()), (2, 2));
    let shared = to_0_from_1.channels[1];
    assert_eq!(shared, to_0_from_2.channels[1]);
    let elements = 1 << 14;
    let bytes = (elements * 4) as f64;
    let one = completion(&incast_run(&system, 1, elements));
    let two_report = incast_run(&system, 2, elements);
    let two = completion(&two_report);
    let fixed = O + 2.0 * L;
    assert_closed_form("one flow", one, fixed + bytes / B, &[fixed + 2.0 * bytes / B]);
    assert_closed_form("two flows", two, fixed + 2.0 * bytes / B, &[fixed + bytes / B]);
    assert_closed_form("two flows' transfer time", two - fixed, 2.0 * (one - fixed), &[one - fixed]);
    let channel =
        time(&two_report).channels.iter().find(|c| c.channel == shared).expect("the shared channel carried data");
    assert_eq!(channel.bytes, 2 * bytes as u64);
    assert_closed_form("shared channel busy", channel.busy_ns, 2.0 * bytes / B, &[bytes / B]);

    // With no latency or injection to hide behind, the whole call takes exactly twice as long.
    let bare = system_from(json!({
        "sips": 3, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
        "links": {"inter_sip": {"latency_ns": 1e-300, "bandwidth_gbps": B}},
        "pe": {"compute_gflops": FREE, "memory_gbps": FREE, "injection_ns": 0}
    }));
    let (one, two) = (completion(&incast_run(&bare, 1, elements)), completion(&incast_run(&bare, 2, elements)));
    assert_closed_form("two flows, no latency", two, 2.0 * one, &[one]);
}

/// `s` SIPs on a ring of inter-SIP links (latency `L`, bandwidth `inter_sip_gbps`), each 2x2 cubes of
/// 4 PEs; `local` sets the other links, injection and rates.
fn hierarchical_system(s: usize, inter_sip_gbps: f64, local: serde_json::Value) -> System {
    let mut spec = json!({
        "sips": s, "mesh": {"w": 2, "h": 2}, "pes_per_cube": 4, "sip_interconnect": "ring",
        "links": {"inter_sip": {"latency_ns": L, "bandwidth_gbps": inter_sip_gbps}},
    });
    let object = spec.as_object_mut().unwrap();
    for (key, value) in local.as_object().unwrap() {
        match key.as_str() {
            "links" => object["links"].as_object_mut().unwrap().extend(value.as_object().unwrap().clone()),
            _ => {
                object.insert(key.clone(), value.clone());
            }
        }
    }
    system_from(spec)
}

fn hierarchical_completion(system: &System, elements: usize) -> f64 {
    let report =
        MockRun::new(system, "hierarchical_3level", "all_pes", &kernbench::algorithms::hierarchical_allreduce::KERNEL)
            .params(json!({"chunks": 1}))
            .inputs(|_, rank| Tile::filled(F32, elements, (rank % 5) as f64))
            .run()
            .unwrap();
    assert_accounting(&report, &Timing::default());
    completion(&report)
}

#[test]
fn a_hierarchical_allreduce_whose_inter_sip_link_is_the_bottleneck_is_bound_by_it() {
    // The SIP leaders' ring reduces to leader 0 from both sides (floor(S/2) hops on the longer side)
    // and broadcasts back the same way: 2 floor(S/2) inter-SIP messages of the per-PE block M in a
    // row, each L + M/b.
    let (s, elements) = (4, 1 << 12);
    let block = (elements * 4) as f64;
    let hops = 2.0 * (s / 2) as f64;
    // Everything but the inter-SIP link free: the call takes exactly the inter-SIP chain.
    let free_local = json!({
        "links": {"intra_cube": {"latency_ns": 1e-300, "bandwidth_gbps": FREE},
                  "inter_cube": {"latency_ns": 1e-300, "bandwidth_gbps": FREE}},
        "pe": {"compute_gflops": FREE, "memory_gbps": FREE, "injection_ns": 0}
    });
    let got = hierarchical_completion(&hierarchical_system(s, B, free_local), elements);
    let want = hops * (L + block / B);
    assert_closed_form(
        "hierarchical all-reduce, free local links",
        got,
        want,
        &[(hops - 1.0) * (L + block / B), hops * L],
    );

    // Realistic local links, compute and injection: every ns added to the inter-SIP transfers shows up
    // in the completion time, one for one, and the inter-SIP chain is the larger part of the call.
    let local = json!({"pe": {"compute_gflops": 512, "memory_gbps": 512, "injection_ns": O}});
    let fast = hierarchical_completion(&hierarchical_system(s, B, local.clone()), elements);
    let slow = hierarchical_completion(&hierarchical_system(s, B / 2.0, local), elements);
    assert_closed_form(
        "halving the inter-SIP bandwidth",
        slow - fast,
        hops * block / B,
        &[0.0, 2.0 * hops * block / B],
    );
    assert!(fast >= want && want > fast / 2.0, "inter-SIP chain {want} ns of {fast} ns");
}

// --- routing ---

/// Rank `from` sends one message of `elements` f32 to rank `to` over the `full` topology.
#[ccl_kernel]
fn point_to_point(tl: &Tl, from: usize, to: usize, elements: usize) {
    if tl.rank() == from {
        tl.send(Direction::Peer(to as u32), &Tile::zeros(F32, elements));
    } else if tl.rank() == to {
        let _ = tl.recv(Direction::Peer(from as u32), elements, F32);
    }
}

#[test]
fn cut_through_pays_the_slowest_hop_once_and_store_and_forward_pays_every_hop() {
    // PE (0,1,2) -> PE (1,1,1) on 2 SIPs of 2x1 cubes of 4 PEs crosses every link class. Cut-through:
    // o + sum(L_i) + max(N/b_i); store-and-forward: o + sum(L_i + N/b_i).
    let system = system_from(json!({
        "sips": 2, "mesh": {"w": 2, "h": 1}, "pes_per_cube": 4, "sip_interconnect": "ring",
        "links": {"intra_cube": {"latency_ns": 20, "bandwidth_gbps": 256},
                  "inter_cube": {"latency_ns": 60, "bandwidth_gbps": 128},
                  "inter_sip": {"latency_ns": L, "bandwidth_gbps": B}},
        "pe": {"compute_gflops": FREE, "memory_gbps": FREE, "injection_ns": O}
    }));
    let (a, b) = (PeId::new(0, 1, 2), PeId::new(1, 1, 1));
    let route = system.route(a, b);
    let classes: Vec<LinkClass> = route.channels.iter().map(|c| c.class).collect();
    use LinkClass::{InterCube, InterSip, IntraCube};
    assert_eq!(classes, [IntraCube, IntraCube, InterCube, InterSip, InterCube, IntraCube]);
    let elements = 1 << 14;
    let bytes = (elements * 4) as f64;
    let latency: f64 = route.channels.iter().map(|c| system.link(c.class).latency_ns).sum();
    let transfers: Vec<f64> = route.channels.iter().map(|c| bytes / system.link(c.class).bandwidth_gbps).collect();
    let slowest = transfers.iter().copied().fold(0.0, f64::max);
    let all: f64 = transfers.iter().sum();
    let rank = |pe: PeId| (pe.sip * 8 + pe.cube * 4 + pe.pe) as usize;
    let run = |routing: Routing| {
        let report = MockRun::new(&system, "full", "all_pes", &point_to_point::KERNEL)
            .params(json!({"from": rank(a), "to": rank(b), "elements": elements}))
            .timing(Some(Timing { routing, ..Timing::default() }))
            .run()
            .unwrap();
        assert_eq!(report.pes()[rank(a)].pe, a);
        completion(&report)
    };
    assert_closed_form("cut-through", run(Routing::CutThrough), O + latency + slowest, &[O + latency + all]);
    assert_closed_form("store-and-forward", run(Routing::StoreAndForward), O + latency + all, &[O + latency + slowest]);
}

// --- stragglers ---

fn ring_reduce_with(system: &System, timing: Timing, elements: usize) -> RunReport {
    let report = MockRun::new(system, "ring_1d", "leader_only", &kernbench::algorithms::ring_reduce::KERNEL)
        .params(json!({"chunks": 1}))
        .inputs(|_, rank| Tile::filled(F32, elements, rank as f64))
        .timing(Some(timing.clone()))
        .run()
        .unwrap();
    assert_accounting(&report, &timing);
    report
}

fn straggler(pe: PeId, straggler: Straggler) -> Timing {
    Timing { stragglers: BTreeMap::from([(pe, straggler)]), ..Timing::default() }
}

/// The error of a ring reduce under `timing`, which must fail.
fn ring_reduce_error(system: &System, timing: Timing) -> RunError {
    let run = MockRun::new(system, "ring_1d", "leader_only", &kernbench::algorithms::ring_reduce::KERNEL)
        .params(json!({"chunks": 1}))
        .inputs(|_, rank| Tile::filled(F32, 16, rank as f64))
        .timing(Some(timing));
    match run.run() {
        Err(MockError::Run(error)) => error,
        other => panic!("expected a run error, got {other:?}"),
    }
}

#[test]
fn a_straggler_that_would_make_a_time_not_finite_is_refused_before_any_pe_runs() {
    let system = sips(4, "ring");
    // A compute rate of 0 would make rank 2's reduction take forever, and ranks 3 and 0 wait on it.
    let stalled = Straggler { compute_gflops: Some(0.0), ..Straggler::default() };
    let error = ring_reduce_error(&system, straggler(PeId::new(2, 0, 0), stalled));
    assert!(
        matches!(&error, RunError::BadStraggler { pe, field: "compute_gflops", .. } if *pe == PeId::new(2, 0, 0)),
        "{error}"
    );
    // A NaN start delay is not the latest time of any run (f64::max passes over NaN), yet it is caught.
    let nan = Straggler { start_delay_ns: f64::NAN, ..Straggler::default() };
    let error = ring_reduce_error(&system, straggler(PeId::new(3, 0, 0), nan));
    assert!(
        matches!(&error, RunError::BadStraggler { pe, field: "start_delay_ns", .. } if *pe == PeId::new(3, 0, 0)),
        "{error}"
    );
}

#[test]
fn a_slow_reducer_on_a_chain_adds_its_reduction_time() {
    // Ring reduce to root 0, one chunk: the chain 1 -> 2 -> 3 -> 0 passes N bytes p - 1 times, and
    // each rank after the first reduces n elements on the way: (p-1)(a + N/b) + n/c for one rank
    // reducing at c elements/ns, the others free.
    let p = 4;
    let system = sips(p, "ring");
    let elements = 1 << 14;
    let bytes = (elements * 4) as f64;
    let chain = (p as f64 - 1.0) * (A + bytes / B);
    let even = completion(&ring_reduce_with(&system, Timing::default(), elements));
    assert_closed_form("ring reduce", even, chain, &[p as f64 * (A + bytes / B)]);
    let rate = 0.25;
    let slow = Straggler { compute_gflops: Some(rate), ..Straggler::default() };
    let report = ring_reduce_with(&system, straggler(PeId::new(2, 0, 0), slow), elements);
    let reduce = elements as f64 / rate;
    assert_closed_form("ring reduce, slow rank 2", completion(&report), chain + reduce, &[chain, chain + 3.0 * reduce]);
    assert!(time(&report).pes[2].busy_ns >= reduce);
}

#[test]
fn a_late_start_delays_the_chain_only_where_it_is_on_the_critical_path() {
    let p = 4;
    let system = sips(p, "ring");
    let elements = 1 << 14;
    let bytes = (elements * 4) as f64;
    let step = A + bytes / B;
    let chain = (p as f64 - 1.0) * step;
    let late = |pe: u32, delay: f64| {
        let timing = straggler(PeId::new(pe, 0, 0), Straggler { start_delay_ns: delay, ..Straggler::default() });
        ring_reduce_with(&system, timing, elements)
    };
    // Rank 1 starts the chain: everything waits for it.
    let delay = 3000.0;
    let report = late(1, delay);
    assert_closed_form("chain head starts late", completion(&report), delay + chain, &[chain]);
    // It starts late, injects its one message and is done: idle before its start and from then to the
    // end of the chain. The root receives last, so it is never idle.
    let pes = &time(&report).pes;
    assert_eq!(pes[1].finish_ns, delay + O);
    assert_closed_form("chain head's idle time", pes[1].idle_ns, delay + chain - O, &[chain - O, delay + chain]);
    assert_closed_form("root's idle time", pes[0].idle_ns, 0.0, &[delay]);
    // Rank 3 is not needed before 2 steps: a shorter delay is hidden.
    assert_closed_form("hidden late start", completion(&late(3, step)), chain, &[chain + step]);

    // Ring all-reduce: the late rank's data needs 2(p-1) steps to reach rank p-2, whose last receive
    // ends the call: D + 2(p-1)(a + N/(p b)).
    let timing = straggler(PeId::new(0, 0, 0), Straggler { start_delay_ns: delay, ..Straggler::default() });
    let report = MockRun::new(&system, "ring_1d", "leader_only", &kernbench::algorithms::ring_allreduce::KERNEL)
        .params(json!({"chunks": 1}))
        .inputs(|_, rank| Tile::filled(F32, elements, rank as f64))
        .timing(Some(timing.clone()))
        .run()
        .unwrap();
    assert_accounting(&report, &timing);
    let pf = p as f64;
    let ring = 2.0 * (pf - 1.0) * (A + bytes / (pf * B));
    assert_closed_form(
        "ring all-reduce, rank 0 late",
        completion(&report),
        delay + ring,
        &[ring, delay + ring - (A + bytes / (pf * B))],
    );
}

// --- credits ---

/// Rank 0 sends `count` messages of `elements` f32 east; rank 1 receives each and adds it up.
#[ccl_kernel]
fn slow_consumer(tl: &Tl, count: usize, elements: usize) {
    if tl.rank() == 0 {
        for _ in 0..count {
            tl.send(E, &Tile::zeros(F32, elements));
        }
    } else {
        let mut sum = Tile::zeros(F32, elements);
        for _ in 0..count {
            let got = tl.recv(W, elements, F32);
            tl.reduce(&mut sum, &got, ReduceOp::Sum);
        }
    }
}

#[test]
fn a_sender_faster_than_its_receiver_blocks_on_credits() {
    // Two PEs of a cube, queue depth 1; the receiver reduces each message in r = n/c ns, longer than
    // the o + 2L + N/b a message and its credit take. Message 0 arrives at o + L + N/b; from then on
    // the receiver takes one every r, and the sender may send message i only a credit latency L after
    // message i-1 was taken: it finishes at 2o + 2L + N/b + (k-2) r, of which k o busy.
    let (l, b, c) = (20.0, 256.0, 1.0);
    let depth_system = |depth: usize| {
        system_from(json!({
            "sips": 1, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 2, "ipcq_depth": depth,
            "links": {"intra_cube": {"latency_ns": l, "bandwidth_gbps": b}},
            "pe": {"compute_gflops": c, "memory_gbps": FREE, "injection_ns": O}
        }))
    };
    let (k, elements) = (10usize, 1024usize);
    let bytes = (elements * 4) as f64;
    let reduce = elements as f64 / c;
    assert!(reduce > O + 2.0 * l + bytes / b);
    let run = |depth: usize| {
        let report = MockRun::new(&depth_system(depth), "ring_1d", "all_pes", &slow_consumer::KERNEL)
            .params(json!({"count": k, "elements": elements}))
            .run()
            .unwrap();
        assert_accounting(&report, &Timing::default());
        report
    };
    let kf = k as f64;
    let report = run(1);
    let t = time(&report);
    let (sender, receiver) = (&t.pes[0], &t.pes[1]);
    let sender_finish = 2.0 * O + 2.0 * l + bytes / b + (kf - 2.0) * reduce;
    assert_closed_form("sender finish", sender.finish_ns, sender_finish, &[kf * O]);
    assert_closed_form("sender busy", sender.busy_ns, kf * O, &[]);
    assert_closed_form("sender blocked on credits", sender.blocked_ns, sender_finish - kf * O, &[0.0]);
    assert!(report.pes()[0].figures.credit_waits >= (k - 1) as u64, "{:?}", report.pes()[0].figures);
    assert_closed_form("receiver finish", receiver.finish_ns, O + l + bytes / b + kf * reduce, &[]);
    assert_closed_form("receiver blocked", receiver.blocked_ns, O + l + bytes / b, &[]);

    // With a slot per message the sender never waits.
    let report = run(k);
    let sender = &time(&report).pes[0];
    assert_eq!((sender.blocked_ns, sender.finish_ns), (0.0, kf * O));
}

// --- accounting ---

#[test]
fn every_channel_carries_exactly_the_bytes_routed_over_it() {
    // Pairwise all-to-all on 4 switched SIPs: the message from i to j is block j of i's input and
    // crosses i's uplink and j's downlink.
    let p = 4;
    let system = sips(p, "switched");
    let n = 1 << 12;
    let report = run_leaders(&system, "full", &kernbench::algorithms::pairwise_alltoall::KERNEL, json!({}), n, n);
    let block = (n / p * 4) as u64;
    let mut want: BTreeMap<Channel, u64> = BTreeMap::new();
    for i in 0..p as u32 {
        for j in (0..p as u32).filter(|&j| j != i) {
            for channel in system.route(PeId::new(i, 0, 0), PeId::new(j, 0, 0)).channels {
                *want.entry(channel).or_default() += block;
            }
        }
    }
    let got: BTreeMap<Channel, u64> = time(&report).channels.iter().map(|c| (c.channel, c.bytes)).collect();
    assert_eq!(got, want);
    assert_eq!(got.len(), 2 * p);
    let sent: u64 = report.pes().iter().map(|p| p.figures.bytes_sent).sum();
    assert_eq!(got.values().sum::<u64>(), 2 * sent, "every message crosses two channels");
}

#[test]
fn busy_and_blocked_time_add_up_to_the_finish_less_the_late_start() {
    let system = hierarchical_system(2, B, json!({"ipcq_depth": 1}));
    let timing = Timing {
        stragglers: BTreeMap::from([
            (
                PeId::new(0, 1, 2),
                Straggler { start_delay_ns: 700.0, compute_gflops: Some(0.5), memory_gbps: Some(1.0) },
            ),
            (PeId::new(1, 0, 0), Straggler { start_delay_ns: 50.0, ..Straggler::default() }),
        ]),
        ..Timing::default()
    };
    let report =
        MockRun::new(&system, "hierarchical_3level", "all_pes", &kernbench::algorithms::hierarchical_allreduce::KERNEL)
            .params(json!({"chunks": 2}))
            .inputs(|_, rank| Tile::filled(F32, 256, rank as f64))
            .timing(Some(timing.clone()))
            .run()
            .unwrap();
    assert_accounting(&report, &timing);
    let t = time(&report);
    assert!(t.pes.iter().any(|p| p.blocked_ns > 0.0) && t.pes.iter().all(|p| p.busy_ns > 0.0));
    assert_eq!(t.completion_ns, t.pes.iter().map(|p| p.finish_ns).fold(0.0, f64::max));
    for channel in &t.channels {
        assert!(channel.utilization > 0.0 && channel.utilization <= 1.0, "{channel:?}");
    }
}

// --- determinism ---

#[test]
fn the_same_inputs_give_the_same_times_bit_for_bit_on_one_thread_or_two() {
    let system = hierarchical_system(4, B, json!({}));
    let timing = Timing {
        stragglers: BTreeMap::from([(PeId::new(2, 3, 1), Straggler { start_delay_ns: 123.5, ..Straggler::default() })]),
        trace: true,
        ..Timing::default()
    };
    let run = |threads: usize| {
        let report = MockRun::new(
            &system,
            "hierarchical_3level",
            "all_pes",
            &kernbench::algorithms::hierarchical_allreduce::KERNEL,
        )
        .params(json!({"chunks": 2}))
        .inputs(|_, rank| Tile::filled(F32, 64, rank as f64))
        .timing(Some(timing.clone()))
        .threads(threads)
        .parallel_min_ready(1)
        .run()
        .unwrap();
        // serde_json writes each f64 as its shortest round-trip text, so equal text is equal bits.
        serde_json::to_string(time(&report)).unwrap()
    };
    let one = run(1);
    assert_eq!(one, run(1), "two runs on one thread differ");
    assert_eq!(one, run(2), "one thread and two differ");
    assert!(one.contains("\"spans\":[{"), "the run was traced");
}

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
pub(super) const O: f64 = 10.0;
/// Inter-SIP latency, ns.
pub(super) const L: f64 = 500.0;
/// Inter-SIP bandwidth, GB/s.
pub(super) const B: f64 = 64.0;
/// `o + L`: the cost of a one-hop message of no bytes.
pub(super) const A: f64 = O + L;
/// Free compute and memory: their time vanishes next to any link's.
pub(super) const FREE: f64 = 1e300;

pub(super) fn system_from(spec: serde_json::Value) -> System {
    System::from_json_str(&spec.to_string()).unwrap_or_else(|e| panic!("{e}: {spec}"))
}

/// `p` SIPs of one PE each, linked by `interconnect` with inter-SIP links of latency `L` and
/// bandwidth `B`, injection `O`, free compute and memory.
pub(super) fn sips(p: usize, interconnect: &str) -> System {
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
pub(super) fn assert_closed_form(what: &str, got: f64, want: f64, wrong: &[f64]) {
    let close = |x: f64| (got - x).abs() <= 1e-9 * x.abs().max(1.0);
    assert!(close(want), "{what}: simulated {got} ns, closed form {want} ns");
    for &w in wrong {
        assert!(!close(w), "{what}: a wrong formula ({w} ns) would pass too, so the check proves nothing");
    }
}

/// Runs `kernel` over `topology` on the SIP leaders, every rank holding `elements` f32 (output sized
/// `output_elements`).
pub(super) fn run_leaders(
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

pub(super) fn time(report: &RunReport) -> &TimeReport {
    report.time().expect("timing is on by default")
}

pub(super) fn completion(report: &RunReport) -> f64 {
    time(report).completion_ns
}

/// Every lane's busy and blocked time add up to its finish less its PE's late start, and a PE of
/// several lanes finishes with its last.
#[track_caller]
pub(super) fn assert_accounting(report: &RunReport, timing: &Timing) {
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
pub(super) fn assert_one_hop(system: &System, topology: &str) {
    let plan = kernbench::InstallPlan::build(system, topology, "leader_only").unwrap();
    for install in plan.participants() {
        for entry in &install.neighbors {
            assert_eq!(system.route(install.pe, entry.peer).hops(), 1, "{} -> {}", install.pe, entry.peer);
        }
    }
}

mod closed_forms;
mod pipelining;

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

//! Nodes of SIPs joined by NICs and a network switch: the shipped ring all-reduce across two nodes is
//! right, spreads its lanes over every rail's NICs, and with one lane is held to one rail.

use kernbench::prelude::*;
use kernbench::samples::sample_tensor;
use kernbench::sim::TimeReport;
use kernbench::sim::testing::MockRun;
use kernbench::{CallOptions, Collective, Communicator, DpPolicy, Node, System};
use serde_json::json;

/// NICs of each node in these tests, as many as its SIPs.
const NICS: usize = 4;

/// 2 nodes of 4 switched SIPs of one PE, one NIC per SIP of `nic_gbps` (1000 ns to the network
/// switch), inter-SIP links of 400 GB/s so that the NICs are the bottleneck, 4 engines a PE so that
/// lanes do not wait for each other's compute.
fn two_nodes(nic_gbps: f64) -> System {
    let spec = json!({
        "sips": 2 * NICS, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1,
        "links": {"inter_sip": {"latency_ns": 500, "bandwidth_gbps": 400}},
        "sip_interconnect": "switched", "ipcq_depth": 8,
        "pe": {"compute_gflops": 512, "memory_gbps": 512, "engines": 4},
        "nodes": {"sips_per_node": NICS, "nic": {"latency_ns": 1000, "bandwidth_gbps": nic_gbps}}
    });
    System::from_json_str(&spec.to_string()).unwrap_or_else(|e| panic!("{e}: {spec}"))
}

/// Bytes each NIC sent to the network switch, by (node, rail), in that order.
type NicBytes = Vec<((u32, u32), u64)>;

fn nic_bytes(time: &TimeReport) -> NicBytes {
    let mut out: Vec<_> = time
        .channels
        .iter()
        .filter_map(|c| match (c.channel.from, c.channel.to) {
            (Node::Nic { node, rail }, Node::Network) => Some(((node, rail), c.bytes)),
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn the_shipped_ring_allreduce_across_two_nodes_is_right_and_uses_every_nic() {
    let system = two_nodes(50.0);
    let mut comm = Communicator::new(system.clone());
    let tensor = sample_tensor(&system, 1 << 20, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let options = CallOptions { algorithm: Some("ring".to_owned()), generation: None, counts: None };
    let (_, report) = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options).unwrap();
    assert!(report.postcondition.held, "{report}");
    // The shipped ring runs 4 lanes: lane l crosses between the nodes on rail l of both of them.
    let nics = nic_bytes(report.run.time().expect("timed by default"));
    let all: Vec<(u32, u32)> = (0..2).flat_map(|node| (0..NICS as u32).map(move |rail| (node, rail))).collect();
    assert_eq!(nics.iter().map(|&(nic, _)| nic).collect::<Vec<_>>(), all, "{nics:?}");
    assert!(nics.iter().all(|&(_, bytes)| bytes > 0), "{nics:?}");
}

/// A ring all-reduce of `bytes` per SIP on `lanes` lanes: its completion, ns, and what each NIC sent.
fn ring_allreduce(system: &System, lanes: usize, bytes: usize) -> (f64, NicBytes) {
    let report = MockRun::new(system, "ring_1d", "leader_only", &kernbench::algorithms::ring_allreduce::KERNEL)
        .params(json!({"chunks": 2, "lanes": lanes}))
        .collective(Collective::AllReduce)
        .inputs(|_, rank| Tile::filled(F32, bytes / 4, rank as f64))
        .run()
        .unwrap();
    let time = report.time().expect("timed by default");
    (time.completion_ns, nic_bytes(time))
}

#[test]
fn a_ring_on_one_lane_crosses_one_rail_and_is_about_nics_times_slower_than_on_one_lane_a_rail() {
    // 4 MiB a SIP over 10 GB/s NICs: each of the two links between the nodes carries
    // 2 (n - 1) / n x 4 MiB = 7.3 MB, 734 us on one NIC, a quarter of it on four; the 400 GB/s
    // links inside a node carry it all in 18 us.
    let system = two_nodes(10.0);
    let bytes = 4 << 20;
    let (one_lane, one_lane_nics) = ring_allreduce(&system, 1, bytes);
    let (four_lanes, four_lanes_nics) = ring_allreduce(&system, NICS, bytes);
    assert!(one_lane_nics.iter().all(|&((_, rail), _)| rail == 0), "one lane, one rail: {one_lane_nics:?}");
    assert_eq!(four_lanes_nics.len(), 2 * NICS, "{four_lanes_nics:?}");
    let link_time = 2.0 * 7.0 / 8.0 * bytes as f64 / 10.0;
    assert!(one_lane >= link_time, "one lane: {one_lane} ns, its NIC alone needs {link_time} ns");
    assert!(
        four_lanes >= link_time / NICS as f64,
        "{NICS} lanes: {four_lanes} ns, below their NICs' {link_time} / {NICS} ns"
    );
    // Latency and the links inside the nodes are paid either way, so a little under NICS times.
    let ratio = one_lane / four_lanes;
    assert!(
        (0.9 * NICS as f64..=NICS as f64).contains(&ratio),
        "one lane {one_lane} ns, {NICS} lanes {four_lanes} ns: {ratio:.2} times, expected about {NICS}"
    );
}

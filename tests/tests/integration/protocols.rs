//! Protocols: Simple, LL and LL128 as a system gives them, and what they cost a call: the base latency
//! at its start, a step per message, lines on the wire, lane and PE caps; `auto` as NCCL's tuning model
//! picks, and a small call on fewer lanes.

use kernbench::prelude::*;
use kernbench::samples::sample_tensor;
use kernbench::{
    CallOptions, Collective, CommError, Communicator, DpPolicy, Protocol, Registry, RegistryError, System,
};
use serde_json::json;

/// Link latency (ns) and bandwidth (GB/s) between SIPs, the launch and each protocol's figures.
const L: f64 = 500.0;
const B: f64 = 100.0;
const LAUNCH: f64 = 1000.0;
const STEP: [(Protocol, f64, f64); 3] =
    [(Protocol::Simple, 3000.0, 8000.0), (Protocol::Ll, 500.0, 6000.0), (Protocol::Ll128, 1500.0, 12000.0)];
const LL_PE_CAP: f64 = 40.0;
const LL128_LANE_CAP: f64 = 20.0;

/// 8 SIPs of one PE on a switch, free compute and memory, no injection; with the protocols above
/// (`protocols`) or none.
fn machine(protocols: bool) -> System {
    let mut spec = json!({
        "sips": 8, "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1, "sip_interconnect": "switched",
        "links": {"inter_sip": {"latency_ns": L, "bandwidth_gbps": B,
                                "step_ns": {"simple": STEP[0].1, "ll": STEP[1].1, "ll128": STEP[2].1}}},
        "pe": {"compute_gflops": 1e9, "memory_gbps": 1e9, "injection_ns": 0, "engines": 8},
        "call": {"launch_ns": LAUNCH}
    });
    if protocols {
        spec["protocols"] = json!({
            "simple": {"base_ns": STEP[0].2},
            "ll": {"base_ns": STEP[1].2, "pe_gbps": LL_PE_CAP},
            "ll128": {"base_ns": STEP[2].2, "lane_gbps": LL128_LANE_CAP}
        });
    }
    System::from_json_str(&spec.to_string()).unwrap()
}

/// The default registry with `name`: `base`'s algorithm with `params` set.
fn registry_with(name: &str, base: &str, params: serde_json::Value) -> Registry {
    let mut registry = kernbench::algorithms::default_registry();
    let mut spec = registry.get(base).unwrap().spec();
    for (key, value) in params.as_object().unwrap() {
        spec.params.insert(key.clone(), value.clone());
    }
    let other = json!({"algorithms": {name: spec}, "selection": {}});
    registry
        .merge(serde_json::from_value::<kernbench::RegistrySpec>(other).unwrap(), &kernbench::algorithms::kernels())
        .unwrap();
    registry
}

/// One all-reduce of `bytes` per SIP by `algorithm` of `registry` on `system`, timing only.
fn all_reduce(
    system: &System,
    registry: Registry,
    algorithm: &str,
    bytes: u64,
) -> Result<kernbench::CallReport, CommError> {
    let mut tensor = sample_tensor(system, bytes, F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    let mut comm = Communicator::with_registry(system.clone(), registry).timing_only(true);
    let options = CallOptions { algorithm: Some(algorithm.to_owned()), ..CallOptions::default() };
    let (out, report) = comm.call(Collective::AllReduce, &tensor, ReduceOp::Sum, 0, &options)?;
    tensor = out;
    drop(tensor);
    Ok(report)
}

fn time(report: &kernbench::CallReport) -> &kernbench::sim::TimeReport {
    report.run.time().unwrap()
}

#[test]
fn a_protocol_adds_its_base_latency_and_a_step_and_its_lines_to_every_message_of_a_chain() {
    // The ring with one piece per part on one lane: 2 (n - 1) messages one after another on every rank.
    let bytes = 1024;
    let data =
        all_reduce(&machine(false), registry_with("chain", "ring_low_latency", json!({})), "chain", bytes).unwrap();
    let message = bytes / 8;
    for (protocol, step, base) in STEP {
        let registry = registry_with("chain", "ring_low_latency", json!({"protocol": protocol.key()}));
        let report = all_reduce(&machine(true), registry, "chain", bytes).unwrap();
        assert_eq!(time(&report).protocol, Some(protocol));
        let extra_wire = (protocol.wire_bytes(message) - message) as f64 / B;
        // The sending lane passes each message through its protocol's cap first.
        let cap = match protocol {
            Protocol::Simple => 0.0,
            Protocol::Ll => message as f64 / LL_PE_CAP,
            Protocol::Ll128 => message as f64 / LL128_LANE_CAP,
        };
        let want = time(&data).completion_ns + base + 14.0 * (step + extra_wire + cap);
        let got = time(&report).completion_ns;
        assert!((got - want).abs() <= 1e-9 * want, "{protocol}: {got} ns, want {want}");
    }
}

#[test]
fn ll_puts_two_bytes_on_the_wire_per_byte_of_data_and_ll128_128_per_120() {
    let bytes = 1 << 16;
    let carried = |protocol: &str| {
        let registry = registry_with("chain", "ring_low_latency", json!({"protocol": protocol}));
        let report = all_reduce(&machine(true), registry, "chain", bytes).unwrap();
        time(&report).channels.iter().map(|c| c.bytes).sum::<u64>()
    };
    let (simple, ll, ll128) = (carried("simple"), carried("ll"), carried("ll128"));
    assert_eq!(ll, 2 * simple);
    // Each message is 8 KiB: 69 lines of 128 bytes carry its 8192 bytes of data.
    assert_eq!(ll128 * 8192, simple * 69 * 128);
}

#[test]
fn the_pe_cap_bounds_what_a_pe_moves_over_all_its_lanes_and_the_lane_cap_each_lane() {
    let bytes = 64 << 20;
    let busbw = |protocol: &str, lanes: usize| {
        let registry = registry_with("r", "ring", json!({"protocol": protocol, "lanes": lanes, "chunks": 4}));
        let report = all_reduce(&machine(true), registry, "r", bytes).unwrap();
        2.0 * 7.0 / 8.0 * bytes as f64 / time(&report).completion_ns
    };
    // LL over 8 lanes: the link would carry 50 GB/s of data, the PE's cap 40.
    let ll = busbw("ll", 8);
    assert!((0.9 * LL_PE_CAP..=LL_PE_CAP).contains(&ll), "LL busbw {ll} GB/s");
    // LL128 over 2 lanes: 2 x 20 GB/s, far below the link's 93.75.
    let ll128 = busbw("ll128", 2);
    assert!((0.9 * 2.0 * LL128_LANE_CAP..=2.0 * LL128_LANE_CAP).contains(&ll128), "LL128 busbw {ll128} GB/s");
    // Simple has no cap: the link's bandwidth, with data as it is.
    let simple = busbw("simple", 8);
    assert!(simple > 0.9 * B && simple <= B, "Simple busbw {simple} GB/s");
}

#[test]
fn auto_picks_ll_for_a_small_call_and_simple_for_a_large_one_and_the_call_says_which() {
    let registry = registry_with("r", "ring", json!({"lanes": 8}));
    let small = all_reduce(&machine(true), registry.clone(), "r", 1024).unwrap();
    let large = all_reduce(&machine(true), registry, "r", 256 << 20).unwrap();
    assert_eq!((time(&small).protocol, time(&large).protocol), (Some(Protocol::Ll), Some(Protocol::Simple)));
}

#[test]
fn a_system_without_protocols_carries_as_data_under_auto_and_refuses_a_named_protocol() {
    let auto = all_reduce(&machine(false), registry_with("r", "ring", json!({"protocol": "auto"})), "r", 4096).unwrap();
    let plain = all_reduce(&machine(false), kernbench::algorithms::default_registry(), "ring", 4096).unwrap();
    assert_eq!(time(&auto).protocol, None);
    assert_eq!(time(&auto).completion_ns, time(&plain).completion_ns);
    let named = all_reduce(&machine(false), registry_with("r", "ring", json!({"protocol": "ll"})), "r", 4096);
    let error = named.unwrap_err().to_string();
    assert!(error.contains("protocol LL is not one of this system's: it gives none"), "{error}");
}

#[test]
fn a_protocol_the_system_leaves_out_fails_the_call_naming_those_it_gives() {
    let mut spec = machine(true).spec().clone();
    spec.protocols.as_mut().unwrap().ll128 = None;
    let system = System::from_spec(spec).unwrap();
    let error = all_reduce(&system, registry_with("r", "ring", json!({"protocol": "LL128"})), "r", 4096).unwrap_err();
    assert!(
        error.to_string().contains("protocol LL128 is not one of this system's: expected one of ll, simple"),
        "{error}"
    );
}

#[test]
fn an_unknown_protocol_parameter_is_a_registry_error_naming_the_valid_ones() {
    let mut registry = kernbench::algorithms::default_registry();
    let mut spec = registry.get("ring").unwrap().spec();
    spec.params.insert("protocol".into(), json!("ll256"));
    let other = json!({"algorithms": {"r": spec}, "selection": {}});
    let error = registry
        .merge(serde_json::from_value::<kernbench::RegistrySpec>(other).unwrap(), &kernbench::algorithms::kernels())
        .unwrap_err();
    assert!(matches!(error, RegistryError::BadProtocol { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("`algorithms.r.params.protocol`") && message.contains("auto, simple, ll or ll128"),
        "{message}"
    );
}

#[test]
fn a_small_call_runs_on_fewer_lanes_as_nccl_runs_fewer_channels() {
    let registry = registry_with("r", "ring", json!({"lanes": 8, "protocol": "simple"}));
    let lanes = |bytes| {
        let report = all_reduce(&machine(true), registry.clone(), "r", bytes).unwrap();
        time(&report).pes[0].lanes.len().max(1)
    };
    // Simple gives each of a channel's 512 threads at least 64 bytes: 32 KiB a lane.
    assert_eq!((lanes(1024), lanes(96 << 10), lanes(64 << 20)), (1, 3, 8));
}

#[test]
fn a_chunk_program_runs_by_its_own_protocol_where_the_system_gives_it() {
    // The chunk ring is written for Simple; auto would pick LL at this size.
    let report = all_reduce(&machine(true), kernbench::algorithms::default_registry(), "chunk_ring", 1024).unwrap();
    assert_eq!(time(&report).protocol, Some(Protocol::Simple));
}

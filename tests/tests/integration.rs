//! Integration tests across kernbench's crates, in one binary: the mock runtime and its diagnosed
//! failures, every shipped kernel, the Communicator and the algorithm matrix, the hierarchical
//! all-to-all, simulated time against closed forms and golden times, runs spread over processes, reading
//! nccl-tests logs, the bench / tune / trace library, and workloads (JSON, Chakra traces, schedules).
//! (The macro's trybuild UI tests are `ui.rs`; they drive rustc and need a binary of their own.)

#[path = "integration/all_to_all.rs"]
mod all_to_all;
#[path = "integration/all_to_all_v.rs"]
mod all_to_all_v;
#[path = "integration/atomics.rs"]
mod atomics;
#[path = "integration/bench.rs"]
mod bench;
#[path = "integration/chunk_programs.rs"]
mod chunk_programs;
#[path = "integration/communicator.rs"]
mod communicator;
#[path = "integration/diagnostics.rs"]
mod diagnostics;
#[path = "integration/faults.rs"]
mod faults;
#[path = "integration/golden.rs"]
mod golden;
#[path = "integration/kernels.rs"]
mod kernels;
#[path = "integration/lanes.rs"]
mod lanes;
#[path = "integration/limits.rs"]
mod limits;
#[path = "integration/log_props.rs"]
mod log_props;
#[path = "integration/multicast.rs"]
mod multicast;
#[path = "../../kernbench-core/tests/core/mutate.rs"]
mod mutate;
#[path = "integration/nodes.rs"]
mod nodes;
#[path = "integration/one_sided_bugs.rs"]
mod one_sided_bugs;
#[path = "integration/programs.rs"]
mod programs;
#[path = "integration/protocols.rs"]
mod protocols;
#[path = "integration/provenance.rs"]
mod provenance;
#[path = "integration/registry_props.rs"]
mod registry_props;
#[path = "integration/runtime.rs"]
mod runtime;
#[path = "integration/spread.rs"]
mod spread;
#[path = "integration/symmetric.rs"]
mod symmetric;
#[path = "integration/teams.rs"]
mod teams;
#[path = "integration/timing/mod.rs"]
mod timing;
#[path = "integration/together.rs"]
mod together;
#[path = "integration/workloads.rs"]
mod workloads;

/// The per-pair counts of `collective` over `ranks` ranks of `elements` each, as `bench` draws them
/// (all-to-all-v's seeded counts, send/recv's shift); `None` for the collectives that take none: what
/// the tests that run every shipped algorithm call it with.
pub(crate) fn counts_for(
    collective: kernbench::Collective,
    ranks: usize,
    elements: usize,
) -> Option<std::sync::Arc<kernbench::Counts>> {
    use kernbench_cli::sweep::{DEFAULT_COUNTS_SEED, point_counts};
    point_counts(collective, ranks, elements, DEFAULT_COUNTS_SEED).map(std::sync::Arc::new)
}

/// `system`, or, for an algorithm on the `multicast` topology (the NVLS algorithms, which plan only
/// behind a switch that multicasts), the same shape behind such a switch: what the tests that run
/// every shipped algorithm run it on.
pub(crate) fn system_for(algorithm: &kernbench::Algorithm, system: &kernbench::System) -> kernbench::System {
    if !matches!(algorithm.topology.name(), "multicast" | "multicast_nodes") {
        return system.clone();
    }
    let mut spec = system.spec().clone();
    spec.sip_interconnect = kernbench::SipInterconnect::Switched;
    spec.switch = Some(kernbench::SwitchSpec { multicast: true, reduce_gbps: 100.0 });
    kernbench::System::from_spec(spec).unwrap()
}

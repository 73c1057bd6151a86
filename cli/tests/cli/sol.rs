//! `sol`, a lower bound on a call's time over its simulated time, as `bench` computes it: never above 1
//! for any shipped algorithm on any shipped system, and near 1 where an algorithm is known to reach
//! the bound.

use std::path::Path;

use kernbench::{Collective, Communicator, System};
use kernbench_cli::sweep::{Series, Sweep};

const SYSTEMS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/systems");

/// The shipped system files the tests below name, which must be every file there is.
const SHIPPED: [&str; 10] = [
    "2x-dgx-h100-ndr.json",
    "default.json",
    "dgx-a100.json",
    "dgx-h100.json",
    "fully_connected.json",
    "ring16.json",
    "single_sip.json",
    "small_2sip.json",
    "switched.json",
    "wide_mesh.json",
];

fn shipped(name: &str) -> System {
    System::from_file(&Path::new(SYSTEMS).join(name)).unwrap()
}

/// Every algorithm of every collective on `system`, at 1K, where latency sets the bound, and at
/// 256K, where bandwidth does on every shipped system (larger sizes only take the debug build
/// longer): each point is right and its `sol` is at most 1.
fn sol_is_at_most_one_for_every_algorithm(system: System) {
    let shape = system.describe();
    let mut comm = Communicator::new(system);
    for collective in Collective::ALL {
        let series = Series::parse_list("all", comm.registry(), collective, comm.system()).unwrap();
        let rows = Sweep::new(collective, series, vec![1 << 10, 256 << 10]).run(&mut comm, |_| {}).unwrap();
        for row in rows {
            let point = format!("{collective} {} of {} bytes on {shape}", row.algorithm, row.size);
            assert_eq!(row.wrong, 0, "{point}");
            match row.sol {
                Some(sol) => {
                    assert!(sol > 0.0 && sol <= 1.0, "{point}: sol {sol} ({:?} over {} ns)", row.bound, row.time_ns)
                }
                None => assert_eq!(row.ranks, 1, "{point}: no bound, though {} ranks must exchange data", row.ranks),
            }
        }
    }
}

#[test]
fn the_tests_name_every_shipped_system() {
    let mut files: Vec<String> = std::fs::read_dir(SYSTEMS)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    assert_eq!(files, SHIPPED);
    assert_eq!(shipped("default.json"), System::builtin(), "default.json is the built-in system");
}

#[test]
fn sol_is_at_most_one_on_the_builtin_system() {
    sol_is_at_most_one_for_every_algorithm(System::builtin());
}

#[test]
fn sol_is_at_most_one_on_the_fully_connected_system() {
    sol_is_at_most_one_for_every_algorithm(shipped("fully_connected.json"));
}

#[test]
fn sol_is_at_most_one_on_ring16() {
    sol_is_at_most_one_for_every_algorithm(shipped("ring16.json"));
}

#[test]
fn sol_is_at_most_one_on_a_single_sip() {
    sol_is_at_most_one_for_every_algorithm(shipped("single_sip.json"));
}

#[test]
fn sol_is_at_most_one_on_two_sips() {
    sol_is_at_most_one_for_every_algorithm(shipped("small_2sip.json"));
}

#[test]
fn sol_is_at_most_one_on_the_switched_system() {
    sol_is_at_most_one_for_every_algorithm(shipped("switched.json"));
}

#[test]
fn sol_is_at_most_one_on_the_wide_mesh() {
    sol_is_at_most_one_for_every_algorithm(shipped("wide_mesh.json"));
}

#[test]
fn sol_is_at_most_one_on_two_nodes() {
    // Two nodes of 4 SIPs of 2x1 cubes of 2 PEs, 2 NICs a node, slower than the links inside a node.
    let json = r#"{"sips": 8, "mesh": {"w": 2, "h": 1}, "pes_per_cube": 2, "sip_interconnect": "switched",
                   "nodes": {"sips_per_node": 4, "nics_per_node": 2, "nic": {"latency_ns": 1500, "bandwidth_gbps": 25}}}"#;
    sol_is_at_most_one_for_every_algorithm(System::from_json_str(json).unwrap());
}

#[test]
fn bidirectional_ring_reaches_the_bound_on_ring16() {
    // 16 SIPs on a ring, 53.687091 GB/s each way: 16 MiB takes S / B = 312.5 us over one channel.
    // Every SIP must send 2 (n - 1) / n S over its two channels: 15/16 x 312.5 us + 0.5 us of latency
    // = 293.47 us, which a pipelined bidirectional ring nearly reaches.
    let mut comm = Communicator::new(shipped("ring16.json"));
    let series = Series::Algorithm("bidirectional_ring".into());
    let (row, _) = Sweep::new(Collective::AllReduce, vec![series.clone()], vec![16 << 20])
        .call(&mut comm, &series, 16 << 20)
        .unwrap();
    let bound = row.bound.unwrap();
    assert!((bound.ns - 293_468.75).abs() < 0.01, "{bound:?}");
    let sol = row.sol.unwrap();
    assert!((0.95..=1.0).contains(&sol), "sol {sol}: {bound:?} over {} ns", row.time_ns);
}

#[test]
fn sol_is_at_most_one_on_the_real_machine_presets() {
    for preset in ["dgx-h100.json", "dgx-a100.json", "2x-dgx-h100-ndr.json"] {
        sol_is_at_most_one_for_every_algorithm(shipped(preset));
    }
}

//! kernbench-core's tests, in one binary: the machine model (system specs, routes, topologies, mappers,
//! install plans, layouts, validators, group splits and the registry), tiles, and postconditions.
//! Scenarios are functions over their parameters; the `#[test]`s call them.

#[path = "core/layout.rs"]
mod layout;
#[path = "core/mutate.rs"]
mod mutate;
#[path = "core/partition.rs"]
mod partition;
#[path = "core/plan.rs"]
mod plan;
#[path = "core/postconditions.rs"]
mod postconditions;
#[path = "core/props.rs"]
mod props;
#[path = "core/registry.rs"]
mod registry;
#[path = "core/route.rs"]
mod route;
#[path = "core/spec.rs"]
mod spec;
#[path = "core/spec_props.rs"]
mod spec_props;
#[path = "core/tiles/mod.rs"]
mod tiles;
#[path = "core/topology.rs"]
mod topology;

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;

use kernbench_core::{Direction, InstallPlan, PeId, System, Topology};

/// A system of the given shape with default links; the shapes used here are all valid.
pub fn system(sips: usize, w: usize, h: usize, pes: usize) -> System {
    System::shape(sips, w, h, pes).expect("test shapes are valid")
}

/// The first `n` PEs of a system with one SIP, one cube and `n` PEs: `n` ranks for flat topologies.
pub fn flat(n: usize) -> (System, Vec<PeId>) {
    let system = system(1, 1, 1, n);
    let pes = system.all_pes().collect();
    (system, pes)
}

/// Rank `rank`'s links as a set, so checks do not depend on the order a topology lists them in.
pub fn links(topo: &Topology, rank: usize) -> BTreeSet<(Direction, usize)> {
    topo.neighbors[rank].iter().copied().collect()
}

/// Whether every participant of a plan can reach every other one over its neighbour tables.
pub fn connected(plan: &InstallPlan) -> bool {
    let Some(first) = plan.participants().next() else {
        return false;
    };
    let mut seen = BTreeSet::from([first.pe]);
    let mut queue = VecDeque::from([first.pe]);
    while let Some(pe) = queue.pop_front() {
        let Some(install) = plan.find(pe) else {
            return false;
        };
        for entry in &install.neighbors {
            if seen.insert(entry.peer) {
                queue.push_back(entry.peer);
            }
        }
    }
    seen.len() == plan.len()
}

/// A file under `tests/data`.
pub fn data(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(relative)
}

/// A file under the workspace's `configs/systems`.
pub fn config(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs/systems").join(name)
}

/// Asserts that `message` contains every needle, showing the message when it does not.
pub fn assert_mentions(message: &str, needles: &[&str]) {
    for needle in needles {
        assert!(message.contains(needle), "expected the message to mention `{needle}`:\n{message}");
    }
}

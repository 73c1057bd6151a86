//! The machine: what the simulated accelerator is made of and how its parts are linked. Uses nothing
//! of the crate's but its bounded file reader.
//!
//! ```text
//! system
//!  └─ SIP 0 .. S-1              (SIPs linked by UCIe: a ring, mesh, switch or full interconnect)
//!      └─ cube mesh  w x h      (cubes linked by a NoC)
//!          └─ PE 0 .. P-1       (PEs of a cube linked in a ring: E/W)
//! ```
//!
//! SIPs may group into nodes of consecutive SIPs ([`NodesSpec`]), each node switched inside and
//! joined to the others by its NICs, one per rail, through a network switch.
//!
//! A [`SystemSpec`] is a system as a JSON file writes it; a [`System`] is one that passed every check.
//! [`PeId`] names a PE, [`Direction`] names a neighbour as a kernel sees it, and [`route`] finds the
//! physical channels a message between two PEs crosses.

mod direction;
mod ids;
mod numbering;
pub mod protocol;
pub mod route;
mod spec;

pub use direction::{Direction, ParseDirectionError, PeerIndexError};
pub use ids::{CubeCoord, LinkClass, PeId};
pub use protocol::{
    Carriage, Protocol, ProtocolChoice, ProtocolNotGiven, ProtocolSpec, ProtocolsSpec, StepSpec, UnknownProtocol,
};
pub use route::{Channel, Node, Route};
pub use spec::{
    CallSpec, LinkSpec, LinksSpec, MeshSpec, MulticastError, NodesSpec, PeSpec, SipInterconnect, SpecError, SwitchSpec,
    System, SystemSpec,
};

/// A system of `sips` SIPs of `w x h` cubes of `pes_per_cube` PEs on `sip_interconnect`, the other
/// settings the spec's defaults: what tests across the crate build their machines from.
#[cfg(test)]
pub(crate) fn test_system(
    sips: usize,
    (w, h): (usize, usize),
    pes_per_cube: usize,
    sip_interconnect: SipInterconnect,
) -> System {
    System::from_spec(SystemSpec {
        sips,
        mesh: MeshSpec { w, h },
        pes_per_cube,
        sip_interconnect,
        ..SystemSpec::default()
    })
    .expect("a valid test system")
}

/// `nodes` switched nodes of `sips_per_node` SIPs and `nics` NICs each, of `w x h` cubes of
/// `pes_per_cube` PEs, the other settings the spec's defaults.
#[cfg(test)]
pub(crate) fn test_nodes(
    nodes: usize,
    sips_per_node: usize,
    nics: usize,
    (w, h): (usize, usize),
    pes_per_cube: usize,
) -> System {
    System::from_spec(SystemSpec {
        sips: nodes * sips_per_node,
        mesh: MeshSpec { w, h },
        pes_per_cube,
        sip_interconnect: SipInterconnect::Switched,
        nodes: Some(NodesSpec { sips_per_node, nics_per_node: Some(nics), nic: NodesSpec::DEFAULT_NIC }),
        ..SystemSpec::default()
    })
    .expect("a valid test system of nodes")
}

/// Every node a route could name in `system`, and some just outside it.
#[cfg(test)]
pub(crate) fn nodes_of(system: &System) -> Vec<Node> {
    let (nodes, rails) = (system.nodes() as u32, system.nics_per_node().max(2) as u32);
    let switches = (0..=nodes).map(Node::NodeSwitch);
    let nics = (0..=nodes).flat_map(|node| (0..=rails).map(move |rail| Node::Nic { node, rail }));
    system.all_pes().map(Node::Pe).chain([Node::Switch, Node::Network]).chain(switches).chain(nics).collect()
}

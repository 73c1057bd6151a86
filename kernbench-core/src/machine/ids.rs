//! Names of things in the machine: processing elements, cubes and SIPs.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A processing element, named by its SIP, its cube inside the SIP and its index inside the cube.
///
/// `PeId` orders SIP-major, then cube, then PE: the order in which participants are listed everywhere.
///
/// # Examples
/// ```
/// use kernbench_core::PeId;
/// let pe = PeId::new(1, 2, 3);
/// assert_eq!(pe.to_string(), "(sip 1, cube 2, pe 3)");
/// assert!(PeId::new(0, 9, 9) < pe);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PeId {
    /// The SIP: the package the PE sits in.
    pub sip: u32,
    /// The cube inside the SIP, row-major in the cube mesh.
    pub cube: u32,
    /// The PE inside the cube.
    pub pe: u32,
}

impl PeId {
    /// The PE `pe` of cube `cube` of SIP `sip`.
    pub const fn new(sip: u32, cube: u32, pe: u32) -> Self {
        Self { sip, cube, pe }
    }
}

impl fmt::Display for PeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(sip {}, cube {}, pe {})", self.sip, self.cube, self.pe)
    }
}

/// A cube's position in its SIP's mesh: `x` in `0..w`, `y` in `0..h`; cube index = `y * w + x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CubeCoord {
    /// Column, `0..w`.
    pub x: u32,
    /// Row, `0..h`.
    pub y: u32,
}

/// The four classes of physical link, each with its own latency and bandwidth.
///
/// Ordered from the closest to the farthest reach, so the slowest class a route crosses is its maximum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkClass {
    /// Between neighbouring PEs of one cube's ring.
    IntraCube,
    /// Between neighbouring cubes of one SIP's NoC mesh.
    InterCube,
    /// Between SIPs (UCIe) of one node, through its interconnect, and from a node's switch to its NICs.
    InterSip,
    /// Between a node's NIC and the network switch that joins the nodes: the figures of the system's
    /// `nodes.nic`.
    InterNode,
}

impl LinkClass {
    /// Every class, closest first.
    pub const ALL: [LinkClass; 4] =
        [LinkClass::IntraCube, LinkClass::InterCube, LinkClass::InterSip, LinkClass::InterNode];

    /// The name used in JSON and reports.
    pub const fn name(self) -> &'static str {
        match self {
            LinkClass::IntraCube => "intra_cube",
            LinkClass::InterCube => "inter_cube",
            LinkClass::InterSip => "inter_sip",
            LinkClass::InterNode => "inter_node",
        }
    }
}

impl fmt::Display for LinkClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

//! Install plans: per SIP, per participating PE, the neighbour table a kernel's directions resolve to.

use serde::{Deserialize, Serialize};

use crate::{Direction, LinkClass, PeId};

/// One neighbour of a PE: the direction the kernel names, the peer PE it reaches, and the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighborTableEntry {
    /// The direction the kernel sends or receives on.
    pub direction: Direction,
    /// The PE at the other end.
    pub peer: PeId,
    /// The farthest-reaching link class the route to the peer crosses.
    pub link: LinkClass,
    /// The number of physical channels the route crosses (1 for adjacent PEs).
    pub hops: u32,
}

/// One participating PE's part of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeInstall {
    /// The PE.
    pub pe: PeId,
    /// Its position among all participants, in `PeId` order (its rank in the topology).
    pub rank: usize,
    /// Its neighbour table.
    pub neighbors: Vec<NeighborTableEntry>,
}

/// One SIP's participating PEs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SipPlan {
    /// The SIP (the rank of the collective).
    pub sip: u32,
    /// Its participating PEs, in `PeId` order.
    pub pes: Vec<PeInstall>,
}

/// What a runtime installs to run one algorithm on one system.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallPlan {
    /// The topology the neighbour tables come from.
    pub topology: String,
    /// The mapper that chose the participants.
    pub mapper: String,
    /// Per SIP, in SIP order.
    pub sips: Vec<SipPlan>,
}

impl InstallPlan {
    /// Every participating PE, in rank order.
    pub fn participants(&self) -> impl Iterator<Item = &PeInstall> + '_ {
        self.sips.iter().flat_map(|s| s.pes.iter())
    }

    /// The number of participating PEs.
    pub fn len(&self) -> usize {
        self.sips.iter().map(|s| s.pes.len()).sum()
    }

    /// Whether no PE participates.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

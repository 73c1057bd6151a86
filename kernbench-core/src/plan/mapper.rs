//! Mappers: which PEs of each SIP take part in a collective, and how a tensor must be laid out for
//! each of them to hold a shard. Uses [`machine`](crate::machine) and the plan's layouts.
//!
//! Each SIP launches the collective on its part of the tensor, so a mapper decides how much of each SIP
//! works: only its leader, one PE per cube, or every PE. Every mapper returns its choice in `PeId`
//! order, the order ranks are numbered in.

use crate::machine::{PeId, System};
use crate::names::{Builtin, NamedItem, UnknownName, listing, lookup};
use crate::plan::DpPolicy;

/// A mapper's choice: the participating PEs of `system`, in `PeId` order.
pub type MapperFn = fn(&System) -> Vec<PeId>;

/// A mapper: which PEs take part, and the layout that gives each of them one shard of its SIP's
/// tensor.
#[derive(Clone, Copy, Debug)]
pub struct Mapper {
    /// The participating PEs of a system.
    pub participants: MapperFn,
    /// The layout of a tensor whose shards sit exactly on the participants.
    pub layout: DpPolicy,
}

const TABLE: [Builtin<Mapper>; 3] = [
    Builtin {
        item: NamedItem { name: "leader_only", summary: "one PE per SIP: (cube 0, pe 0)" },
        function: Mapper { participants: leader_only, layout: DpPolicy::LEADER },
    },
    Builtin {
        item: NamedItem { name: "cube_leaders", summary: "one PE per cube: pe 0 of every cube" },
        function: Mapper { participants: cube_leaders, layout: DpPolicy::CUBE_LEADERS },
    },
    Builtin {
        item: NamedItem { name: "all_pes", summary: "every PE of every SIP" },
        function: Mapper { participants: all_pes, layout: DpPolicy::EVERY_PE },
    },
];

impl Builtin<Mapper> {
    /// The participating PEs of `system`, in `PeId` order.
    pub fn participants(&self, system: &System) -> Vec<PeId> {
        (self.function.participants)(system)
    }

    /// The layout a tensor needs so that each participant holds one shard of its SIP's tensor.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{DpPolicy, mapper_by_name};
    /// assert_eq!(mapper_by_name("all_pes").unwrap().layout(), DpPolicy::EVERY_PE);
    /// assert_eq!(mapper_by_name("leader_only").unwrap().layout(), DpPolicy::LEADER);
    /// ```
    pub fn layout(&self) -> DpPolicy {
        self.function.layout
    }
}

/// Every built-in mapper, by name, for listings.
pub const MAPPERS: &[NamedItem] = &listing(&TABLE);

/// The built-in mapper called `name`.
///
/// # Errors
/// [`UnknownName`] listing the built-in mappers.
///
/// # Examples
/// ```
/// use kernbench_core::{System, mapper_by_name};
/// let system = System::shape(2, 2, 2, 4).unwrap();
/// assert_eq!(mapper_by_name("cube_leaders").unwrap().participants(&system).len(), 8);
/// assert!(mapper_by_name("leaders").unwrap_err().to_string().contains("leader_only"));
/// ```
pub fn mapper_by_name(name: &str) -> Result<Builtin<Mapper>, UnknownName> {
    lookup("mapper", &TABLE, name)
}

/// `(sip, cube 0, pe 0)` of every SIP: one participant per SIP.
pub fn leader_only(system: &System) -> Vec<PeId> {
    let (sips, _, _) = system.extents();
    (0..sips).map(|sip| PeId::new(sip, 0, 0)).collect()
}

/// PE 0 of every cube of every SIP.
pub fn cube_leaders(system: &System) -> Vec<PeId> {
    let (sips, cubes, _) = system.extents();
    (0..sips).flat_map(|sip| (0..cubes).map(move |cube| PeId::new(sip, cube, 0))).collect()
}

/// Every PE of the system.
pub fn all_pes(system: &System) -> Vec<PeId> {
    system.all_pes().collect()
}

//! Mappers: which PEs of each SIP take part in a collective.
//!
//! Each SIP launches the collective on its part of the tensor, so a mapper decides how much of each SIP
//! works: only its leader, one PE per cube, or every PE. Every mapper returns its choice in `PeId` order, the order ranks are numbered in.

use crate::machine::{PeId, System};
use crate::names::{Builtin, NamedItem, UnknownName, listing, lookup};

/// A mapper: the participating PEs of `system`, in `PeId` order.
pub type MapperFn = fn(&System) -> Vec<PeId>;

const TABLE: [Builtin<MapperFn>; 3] = [
    Builtin {
        item: NamedItem { name: "leader_only", summary: "one PE per SIP: (cube 0, pe 0)" },
        function: leader_only,
    },
    Builtin {
        item: NamedItem { name: "cube_leaders", summary: "one PE per cube: pe 0 of every cube" },
        function: cube_leaders,
    },
    Builtin { item: NamedItem { name: "all_pes", summary: "every PE of every SIP" }, function: all_pes },
];

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
/// assert_eq!((mapper_by_name("cube_leaders").unwrap().function)(&system).len(), 8);
/// assert!(mapper_by_name("leaders").unwrap_err().to_string().contains("leader_only"));
/// ```
pub fn mapper_by_name(name: &str) -> Result<Builtin<MapperFn>, UnknownName> {
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

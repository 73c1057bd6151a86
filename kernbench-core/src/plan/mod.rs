//! Plans: who takes part in a collective, who their neighbours are, and whether a tensor fits.
//!
//! ```text
//! mapper(system)              -> participating PEs           (leader_only, cube_leaders, all_pes)
//! topology(participants)      -> neighbours per participant  (ring_1d, hypercube, tree, ...)
//! InstallPlan::build          -> per PE: direction -> peer PE and link class, checked for symmetry
//! validator(plan, layout)     -> whether a tensor's layout fits the plan
//! ```
//!
//! A [`Mapper`] carries the layout ([`DpPolicy`]) a tensor needs for each of its participants to hold
//! a shard; a [`DistTensor`] is a tensor laid out over PEs by such a policy; [`partition`] splits ranks
//! into the groups of a hierarchical collective; [`samples`] makes sample tensors for runs and tests.
//! Uses [`machine`](crate::machine) and [`tile`](crate::tile); knows nothing of collectives, kernels
//! or registries.

mod install;
mod layout;
mod mapper;
pub mod partition;
pub mod samples;
mod topology;
mod validator;

/// [`samples`] by another name, for code that imports it as `workload` (a word meant for workload
/// graphs, not sample tensors).
#[doc(hidden)]
pub use samples as workload;

pub use install::{CheckedPlan, InstallPlan, NeighborTableEntry, PeInstall, PlanError, PlanLinks, SipPlan, check_plan};
pub use layout::{DistTensor, DpPolicy, Layout, LayoutError, LayoutKind, Split};
pub use mapper::{MAPPERS, Mapper, MapperFn, all_pes, cube_leaders, leader_only, mapper_by_name};
pub use topology::{
    FULL_MAX_PARTICIPANTS, HYPERCUBE_MAX_PARTICIPANTS, TOPOLOGIES, Topology, TopologyFn, circulant, double_binary_tree,
    full, hierarchical_3level, hypercube, intercube, mesh_2d, mesh_2d_grid, multicast, multicast_nodes, ring_1d,
    topology_by_name, tree,
};
pub use validator::{
    VALIDATORS, ValidationError, ValidatorFn, any, multi_pe_sip_local, replicated, single_shard, validator_by_name,
};

//! kernbench's core: the simulated machine, tiles, the `tl` API kernels are written against, and the
//! registry that turns "this collective at this size" into an algorithm and per-PE install plans.
//!
//! ```text
//! system
//!  └─ SIP 0 .. S-1              (rank = SIP; SIPs linked by UCIe)
//!      └─ cube mesh  w x h      (cubes linked by a NoC)
//!          └─ PE 0 .. P-1       (PEs of a cube linked in a ring: E/W)
//! ```

mod collective;
mod direction;
mod dtype;
mod error;
mod ids;
mod kernel;
mod layout;
mod mapper;
mod names;
pub mod partition;
mod plan;
pub mod postcondition;
mod registry;
pub mod route;
mod spec;
mod tile;
pub mod tl;
mod topology;
mod validator;

pub use collective::{Collective, ParseCollectiveError};
pub use direction::{Direction, ParseDirectionError, PeerIndexError};
pub use dtype::{Dtype, ParseDtypeError, ParseReduceOpError, ReduceOp};
pub use error::{KernelError, Op, WatchdogBudget};
/// Half-precision element types (from the `half` crate), for `F16` and `BF16` tiles.
pub use half::{bf16, f16};
pub use ids::{CubeCoord, LinkClass, PeId};
pub use kernbench_macros::ccl_kernel;
pub use kernel::{ArgsError, Instantiate, KernelDef, KernelFuture, KernelSet, Launch, ParamDef, Params, UnknownKernel};
pub use layout::{DistTensor, DpPolicy, Layout, LayoutError, LayoutKind, Split};
pub use mapper::{MAPPERS, MapperFn, all_pes, cube_leaders, leader_only, mapper_by_name};
pub use names::{NamedItem, UnknownName};
pub use plan::{InstallPlan, NeighborTableEntry, PeInstall, PlanError, SipPlan, build_install_plans, check_plan};
pub use registry::{
    AlgorithmEntry, AlgorithmSpec, BufferKind, Registry, RegistryError, RegistrySpec, Selection, SelectionRule,
};
pub use route::{Channel, Node, Route};
pub use spec::{LinkSpec, LinksSpec, MeshSpec, PeSpec, SipInterconnect, SpecError, System, SystemSpec};
pub use tile::{Element, Tile, TileError, chunk_range, chunk_start};
pub use tl::{Buffer, Tl, TlContext};
pub use topology::{
    FULL_MAX_PARTICIPANTS, TOPOLOGIES, Topology, TopologyFn, double_binary_tree, full, hierarchical_3level, hypercube,
    intercube, mesh_2d, mesh_2d_grid, ring_1d, topology_by_name, tree,
};
pub use validator::{
    VALIDATORS, ValidationError, ValidatorFn, any, multi_pe_sip_local, replicated, single_shard, validator_by_name,
};

/// Everything a kernel author needs: `use kernbench::prelude::*;`.
pub mod prelude {
    pub use crate::Buffer::{self, Input, Output, Scratch};
    pub use crate::Direction::{self, E, N, S, W};
    pub use crate::Dtype::{self, BF16, F16, F32, I32, I64};
    pub use crate::{KernelError, PeId, ReduceOp, Tile, Tl, bf16, ccl_kernel, f16};
}

/// What `#[ccl_kernel]`'s expansion names; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::tl::count_loop;
    pub use crate::{ArgsError, KernelDef, KernelError, KernelFuture, Launch, ParamDef, Tl};
    pub use serde;
    pub use serde_json;
    pub use std::boxed::Box;
    pub use std::clone::Clone;
    pub use std::fmt::Debug;
    pub use std::result::Result;
    pub use std::string::String;
    pub use std::sync::Arc;

    /// What `expr?` on a kernel's own `Result` becomes: its error, by its `Display`, as the PE's
    /// [`KernelError::Kernel`]. Taking any `Display` keeps one rule for every error type (a
    /// `KernelError` given this way, from a hand-written function, keeps only its message).
    ///
    /// # Errors
    /// `result`'s error, as [`KernelError::Kernel`] naming the PE.
    pub fn kernel_result<T, E: std::fmt::Display>(tl: &Tl, result: Result<T, E>) -> Result<T, KernelError> {
        result.map_err(|error| KernelError::kernel(tl.pe(), error))
    }
}

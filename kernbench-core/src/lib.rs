//! kernbench's core: the simulated machine, the kernel API, the plans that place a collective on the
//! machine, and the registry that turns "this collective at this size" into an algorithm.
//!
//! One module per concept, each using only those above it:
//!
//! | module | what lives there | uses |
//! |---|---|---|
//! | [`machine`] | system specs, PE ids, directions, routes | nothing of ours |
//! | [`tile`] | tiles, dtypes, reduction operators, near-equal chunks | nothing of ours |
//! | [`counts`] | per-pair element counts of all-to-all-v and send/recv | nothing of ours |
//! | [`plan`] | mappers (with the layout each needs), topologies, install plans, validators, layouts, group splits, sample tensors | `machine`, `tile` |
//! | [`collective`] | collective kinds, postconditions, provenance, time bounds, cost estimates | `machine`, `tile`, `counts`, `plan` |
//! | [`kernel`] | `tl`, symmetric memory, kernel definitions, run-time errors | `machine`, `tile`, `counts` (and names `collective`'s items for code that imports them from it) |
//! | [`program`] | chunk programs (MSCCL's model), MSCCL-IR XML in and out, the kernel that runs them | `machine`, `tile`, `collective`, `kernel` |
//! | [`registry`] | typed algorithms, selection rules, the JSON format | `machine`, `collective`, `kernel`, `plan` |
//!
//! Beside them, private helpers every module may use: named tables of built-ins (`names`), quoting
//! in messages (`quote`) and reading files (`files`).
//!
//! ```text
//! system
//!  └─ SIP 0 .. S-1              (SIPs linked by UCIe)
//!      └─ cube mesh  w x h      (cubes linked by a NoC)
//!          └─ PE 0 .. P-1       (PEs of a cube linked in a ring: E/W)
//! ```
//!
//! Every public item is also re-exported here, in the order of the concepts.

#![warn(unreachable_pub)]

pub mod collective;
pub mod counts;
mod files;
pub mod kernel;
pub mod machine;
mod names;
pub mod plan;
pub mod program;
mod quote;
pub mod registry;
pub mod tile;

pub use machine::{
    CallSpec, Channel, CubeCoord, Direction, LinkClass, LinkSpec, LinksSpec, MeshSpec, MulticastError, Node, NodesSpec,
    ParseDirectionError, PeId, PeSpec, PeerIndexError, Protocol, ProtocolChoice, Route, SipInterconnect, SpecError,
    SwitchSpec, System, SystemSpec,
};
pub use machine::{Carriage, protocol, route};

pub use tile::{
    Dtype, Element, ParseDtypeError, ParseReduceOpError, ReduceOp, Tile, TileError, bf16, chunk_range, chunk_start, f16,
};

pub use counts::{Counts, CountsError, Transfer};

pub use collective::{Collective, ParseCollectiveError};
pub use collective::{bound, postcondition, provenance};

pub use kernbench_macros::ccl_kernel;
pub use kernel::{
    ArgsError, Buffer, CallContext, Group, Instantiate, KernelDef, KernelError, KernelFuture, KernelSet, Launch,
    Multicast, Op, ParamDef, Params, Symmetric, Team, Tl, TlContext, UnknownKernel, WatchdogBudget,
};
pub use kernel::{atomic, symmetric, tl};

pub use files::{MAX_FILE_BYTES, read_bounded};
pub use names::{Builtin, NamedItem, UnknownName};
#[doc(hidden)]
pub use plan::workload;
pub use plan::{
    CheckedPlan, DistTensor, DpPolicy, FULL_MAX_PARTICIPANTS, HYPERCUBE_MAX_PARTICIPANTS, InstallPlan, Layout,
    LayoutError, LayoutKind, MAPPERS, Mapper, MapperFn, NeighborTableEntry, PeInstall, PlanError, PlanLinks, SipPlan,
    Split, TOPOLOGIES, Topology, TopologyFn, VALIDATORS, ValidationError, ValidatorFn, all_pes, any, check_plan,
    circulant, cube_leaders, double_binary_tree, full, hierarchical_3level, hypercube, intercube, leader_only,
    mapper_by_name, mesh_2d, mesh_2d_grid, multi_pe_sip_local, multicast, multicast_nodes, replicated, ring_1d,
    single_shard, topology_by_name, tree, validator_by_name,
};
pub use plan::{partition, samples};
pub use quote::{Quoted, decoder_message};

pub use registry::{
    Algorithm, AlgorithmSpec, BufferKind, Registry, RegistryError, RegistrySpec, Selection, SelectionRule, Tuned,
};

/// Everything a kernel author needs: `use kernbench::prelude::*;`.
pub mod prelude {
    pub use crate::kernel::Buffer::{self, Input, Output, Scratch};
    pub use crate::kernel::atomic::{Cmp, MemoryOrder, Scope};
    pub use crate::kernel::{Group, KernelError, Multicast, Symmetric, Team, Tl};
    pub use crate::machine::Direction::{self, E, N, S, W};
    pub use crate::machine::PeId;
    pub use crate::tile::Dtype::{self, BF16, F16, F32, I32, I64};
    pub use crate::tile::{ReduceOp, Tile, bf16, f16};
    pub use kernbench_macros::ccl_kernel;
}

/// What `#[ccl_kernel]`'s expansion names; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::kernel::tl::count_loop;
    pub use crate::kernel::{ArgsError, KernelDef, KernelError, KernelFuture, Launch, ParamDef, Tl};
    pub use serde;
    pub use serde_json;
    pub use std::boxed::Box;
    pub use std::clone::Clone;
    pub use std::fmt::Debug;
    pub use std::option::Option;
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

//! The kernel API: what a kernel is written against and what it must compute.
//!
//! [`Tl`] is the handle a kernel talks to its PE through; [`Tile`]s of a [`Dtype`] are what it moves
//! and reduces; [`KernelDef`] is what `#[ccl_kernel]` generates so a registry can start it by name;
//! [`KernelError`] is what a step raises at run time. A [`Collective`] says what a kernel computes,
//! [`postcondition`] checks that it did and [`bound`] says how soon any kernel could have. Uses [`machine`](crate::machine) for PEs and directions; knows
//! nothing of plans, registries or any runtime.

pub mod bound;
mod collective;
mod def;
mod dtype;
mod error;
pub mod postcondition;
pub mod provenance;
pub mod symmetric;
mod tile;
pub mod tl;

pub use collective::{Collective, ParseCollectiveError};
pub use def::{ArgsError, Instantiate, KernelDef, KernelFuture, KernelSet, Launch, ParamDef, Params, UnknownKernel};
pub use dtype::{Dtype, ParseDtypeError, ParseReduceOpError, ReduceOp};
pub use error::{KernelError, Op, WatchdogBudget};
/// Half-precision element types (from the `half` crate), for `F16` and `BF16` tiles.
pub use half::{bf16, f16};
pub use symmetric::{Group, Symmetric};
pub use tile::{Element, Tile, TileError, chunk_range, chunk_start};
pub use tl::{Buffer, Tl, TlContext};

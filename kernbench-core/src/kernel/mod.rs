//! The kernel API: what a kernel is written against. Uses [`machine`](crate::machine) for PEs and
//! directions, [`tile`](crate::tile) for the data it moves and [`counts`](crate::counts) for the
//! per-pair counts of uneven exchanges; knows nothing of plans, registries or
//! any runtime.
//!
//! [`Tl`] is the handle a kernel talks to its PE through; [`Tile`]s of a [`Dtype`] are what it moves
//! and reduces; [`symmetric`] memory is what its one-sided operations address; [`KernelDef`] is what
//! `#[ccl_kernel]` generates so a registry can start it by name; [`KernelError`] is what a step raises
//! at run time; [`hint`]s ask the host's CPU for what a kernel reads next. What a kernel must compute is
//! the [`collective`](crate::collective)'s.

pub mod atomic;
mod def;
mod error;
pub mod hint;
pub mod symmetric;
pub mod tl;

pub use def::{ArgsError, Instantiate, KernelDef, KernelFuture, KernelSet, Launch, ParamDef, Params, UnknownKernel};
pub use error::{KernelError, Op, WatchdogBudget};
pub use symmetric::{Group, Multicast, Symmetric, Team};
pub use tl::{Buffer, CallContext, Tl, TlContext};

/// The data a kernel moves, also named from here for code that imports it through `kernel`.
#[doc(hidden)]
pub use crate::tile::{
    Dtype, Element, ParseDtypeError, ParseReduceOpError, ReduceOp, Tile, TileError, bf16, chunk_range, chunk_start, f16,
};

/// What a collective computes, also named from here for code that imports it through `kernel`.
#[doc(hidden)]
pub use crate::collective::{Collective, ParseCollectiveError, bound, postcondition, provenance};

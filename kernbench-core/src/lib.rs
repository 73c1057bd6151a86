//! kernbench's core: the simulated machine, tiles, the `tl` API kernels are written against, and the
//! registry that turns "this collective at this size" into an algorithm and per-PE install plans.
//!
//! ```text
//! system
//!  └─ SIP 0 .. S-1              (rank = SIP; SIPs linked by UCIe)
//!      └─ cube mesh  w x h      (cubes linked by a NoC)
//!          └─ PE 0 .. P-1       (PEs of a cube linked in a ring: E/W)
//! ```

mod direction;
mod dtype;
mod error;
mod ids;
mod kernel;
mod plan;
mod spec;
mod tile;
pub mod tl;

pub use direction::{Direction, ParseDirectionError};
pub use dtype::{Dtype, ParseDtypeError, ParseReduceOpError, ReduceOp};
pub use error::{KernelError, Op};
pub use ids::{CubeCoord, LinkClass, PeId};
pub use kernel::{ArgsError, KernelDef, KernelFuture, KernelSet, Launch, ParamDef, UnknownKernel};
pub use kernbench_macros::ccl_kernel;
pub use tile::{Element, Tile, TileError, chunk_range};
pub use plan::{InstallPlan, NeighborTableEntry, PeInstall, SipPlan};
pub use spec::{LinkSpec, PeSpec, SipInterconnect};
pub use tl::{Buffer, Tl, TlContext};

/// Everything a kernel author needs: `use kernbench::prelude::*;`.
pub mod prelude {
    pub use crate::Buffer::{self, Input, Output, Scratch};
    pub use crate::Direction::{self, E, N, S, W};
    pub use crate::Dtype::{self, BF16, F16, F32, I32, I64};
    pub use crate::{KernelError, PeId, ReduceOp, Tile, Tl, ccl_kernel};
}

/// What `#[ccl_kernel]`'s expansion names; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::{ArgsError, KernelDef, KernelError, KernelFuture, Launch, ParamDef, Tl};
    pub use serde;
    pub use serde_json;
    pub use std::boxed::Box;
    pub use std::result::Result;
    pub use std::sync::Arc;
}

//! Errors a kernel's `tl` operations raise at run time.

use std::fmt;

use crate::names::comma_list;
use crate::kernel::{Dtype, TileError};
use crate::machine::{Direction, PeId};

/// A `tl` operation, as named in errors and traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// `tl.send`.
    Send,
    /// `tl.recv`.
    Recv,
    /// `tl.store` / `tl.store_at`.
    Store,
    /// `tl.reduce`.
    Reduce,
    /// `tl.barrier`.
    Barrier,
    /// `tl.chunk` / `tl.slice` / `tl.concat`.
    Slice,
    /// A future that is not a `tl` operation (a hand-written `Launch` awaiting something else).
    External,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Send => "send",
            Op::Recv => "recv",
            Op::Store => "store",
            Op::Reduce => "reduce",
            Op::Barrier => "barrier",
            Op::Slice => "slice",
            Op::External => "a non-tl future",
        })
    }
}

/// Why a kernel's `tl` operation failed. Every variant names the PE that ran it.
///
/// All of these are the kernel's fault (or its registry entry's: a kernel run on a topology that lacks
/// the directions it uses).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// A send or recv on a direction that the PE's neighbour table does not have.
    #[error("{pe}: {op} on direction {direction}, which this PE does not have; it has [{}]", comma_list(available))]
    NoSuchDirection {
        /// The PE that ran the operation.
        pe: PeId,
        /// `Send` or `Recv`.
        op: Op,
        /// The direction asked for.
        direction: Direction,
        /// The directions in the PE's neighbour table.
        available: Vec<Direction>,
    },
    /// A recv expected another dtype or length than the oldest message holds.
    #[error(
        "{pe}: recv from {direction} expected {expected_dtype}[{expected_len}] but the message from {from} holds {got_dtype}[{got_len}]"
    )]
    RecvMismatch {
        /// The receiving PE.
        pe: PeId,
        /// The direction received from.
        direction: Direction,
        /// The dtype the kernel asked for.
        expected_dtype: Dtype,
        /// The length the kernel asked for.
        expected_len: usize,
        /// The dtype the message holds.
        got_dtype: Dtype,
        /// The length the message holds.
        got_len: usize,
        /// The sender.
        from: PeId,
    },
    /// A message of another collective call, or of another phase of this call, arrived.
    #[error(
        "{pe}: recv from {direction} expected a message of generation {expected} but the message from {from} is of generation {got} (call k owns generations 3k-2..=3k, one per phase)"
    )]
    GenerationMismatch {
        /// The receiving PE.
        pe: PeId,
        /// The direction received from.
        direction: Direction,
        /// The generation of the receiver's call.
        expected: u64,
        /// The generation the message carries.
        got: u64,
        /// The sender.
        from: PeId,
    },
    /// An axis other than 0 (PE in cube), 1 (cube in SIP) or 2 (SIP).
    #[error("{pe}: program_id/num_programs axis {axis} does not exist: expected 0 (PE), 1 (cube) or 2 (SIP)")]
    BadAxis {
        /// The PE.
        pe: PeId,
        /// The axis asked for.
        axis: usize,
    },
    /// A phase outside 1..=3.
    #[error("{pe}: phase {phase} does not exist: expected 1, 2 or 3")]
    BadPhase {
        /// The PE.
        pe: PeId,
        /// The phase asked for.
        phase: u8,
    },
    /// Tile arithmetic, slicing or a store that does not fit.
    #[error("{pe}: {op}: {source}")]
    Tile {
        /// The PE.
        pe: PeId,
        /// The operation.
        op: Op,
        /// What did not fit.
        source: TileError,
    },
}

impl KernelError {
    /// The PE whose operation failed.
    pub fn pe(&self) -> PeId {
        match self {
            KernelError::NoSuchDirection { pe, .. }
            | KernelError::RecvMismatch { pe, .. }
            | KernelError::GenerationMismatch { pe, .. }
            | KernelError::BadAxis { pe, .. }
            | KernelError::BadPhase { pe, .. }
            | KernelError::Tile { pe, .. } => *pe,
        }
    }
}

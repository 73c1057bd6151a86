//! Collectives: what a collective call must compute and what it costs. Uses [`machine`](crate::machine)
//! (the channels a bound counts), [`tile`](crate::tile) (the references a postcondition computes),
//! [`counts`](crate::counts) (what all-to-all-v and send/recv move) and [`plan`](crate::plan) (the install plan a message estimate counts over); knows nothing of kernels,
//! registries or any runtime.
//!
//! - [`Collective`]: the kinds of collective, with nccl-tests' bus-bandwidth factor of each;
//! - [`postcondition`]: what every participant's output must hold, and the check of a run against it;
//! - [`provenance`]: the exact form of that check, by which contributions each element holds;
//! - [`bound`]: how soon any kernel could finish a call on a system, the numerator of `sol`;
//! - [`estimate`]: a call's peak memory and messages, estimated before it runs;
//! - [`tuning`]: NCCL's tuning model, which picks a call's protocol.

pub mod bound;
pub mod estimate;
mod kind;
pub mod postcondition;
pub mod provenance;
pub mod tuning;

pub use kind::{Collective, ParseCollectiveError};

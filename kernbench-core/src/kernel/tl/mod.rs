//! The `tl` API: what a kernel can do on the PE it runs on.
//!
//! A kernel receives `tl: &Tl`. The methods that can wait for another PE (`send`, `recv`, `recv_like`,
//! `barrier`, and of symmetric memory `get`, the waits, `quiet`, the fetching atomics and `alloc`) are
//! `async` (or return a future);
//! every other method returns at once, with a `Result` where it can fail.
//! `#[ccl_kernel]` adds what each call needs, so the author writes plain calls and the expansion reads:
//!
//! ```text
//! let n = tl.size();                      // never waits, never fails: left as written
//! let x = tl.load(Input)?;                // never waits, can fail: its error is propagated
//! let y = tl.recv(W, n, F32).await?;      // can wait: awaited, its error propagated
//! ```
//!
//! The macro keeps the list of waiting methods; a test here checks it against the methods of [`Tl`]
//! in this module's files, so the two cannot drift apart.
//!
//! # The watchdog
//!
//! A coroutine cannot be pre-empted, so a kernel that loops without end would hang its runtime. The
//! macro therefore puts a budget check at the top of every `loop`, `while` and `for` body in a
//! `#[ccl_kernel]` function (as Go's compiler inserts pre-emption points); a runtime that counts them
//! ([`Backend::loops_left`]) ends a runaway kernel with [`KernelError::Watchdog`]. Loops in plain
//! functions that a kernel calls are not checked: put long loops in the kernel or in a
//! `#[ccl_kernel(helper)]`.
//!
//! `Tl` knows nothing of any simulator. The runtime that polls a PE's kernel lends it a [`Backend`]
//! for the duration of the poll ([`enter`]); the operations reach it from there. So the same kernel can
//! run on the mock runtime or on any other backend.

mod atomics;
mod backend;
mod buffers;
mod messages;
mod one_sided;
mod teams;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub(super) use backend::wake_hint;
pub use backend::{
    Backend, MAX_GENERATION, PHASES_PER_CALL, Work, count_loop, enter, lend_loops, loops_left, message_generation,
    polling_kernel,
};

use crate::counts::Counts;
use crate::kernel::KernelError;
use crate::machine::{Direction, PeId};
use crate::tile::ReduceOp;
use backend::with;

/// One of a PE's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Buffer {
    /// The PE's contribution to the collective (its shard of the tensor).
    Input,
    /// Where the PE's result goes; sized by the collective (for all-gather, every rank's data).
    Output,
    /// Free space for the kernel; empty until the kernel stores a tile there.
    Scratch,
}

/// The axes of `program_id` and `num_programs`: PE, cube, SIP.
const AXES: usize = 3;

/// Where `axis` (counted from the innermost) sits in an outermost-first triple.
fn outermost_index(pe: PeId, axis: usize) -> Result<usize, KernelError> {
    if axis < AXES { Ok(AXES - 1 - axis) } else { Err(KernelError::BadAxis { pe, axis }) }
}

/// The fixed facts of one PE's run, given by the runtime when it creates the PE's [`Tl`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlContext {
    /// The PE.
    pub pe: PeId,
    /// The system's extents outermost first, as [`PeId`] orders its fields: SIPs, cubes per SIP, PEs
    /// per cube.
    pub extents: [usize; 3],
    /// The PE's position among the participants of the algorithm's topology (its rank in the ring).
    pub rank: usize,
    /// The number of participants.
    pub size: usize,
    /// The reduction operator of the call.
    pub op: ReduceOp,
    /// The root rank of a rooted collective (broadcast, reduce); 0 otherwise.
    pub root: usize,
    /// The per-pair counts of all-to-all-v and send/recv; `None` for the other collectives.
    pub counts: Option<Arc<Counts>>,
    /// The call's generation (1, 2, ... per communicator); messages carry
    /// [`message_generation`]`(generation, phase)`.
    pub generation: u64,
    /// Which of the PE's lanes this is: 0..`lanes`.
    pub lane: usize,
    /// How many lanes the kernel runs as on this PE ([`crate::kernel::Launch::lanes`]).
    pub lanes: usize,
    /// The slots of each queue: how many messages a lane may send on a channel before its receiver
    /// takes one.
    pub queue_depth: usize,
}

/// The handle a kernel uses to talk to its PE, its neighbours and its buffers.
///
/// The methods that wait (`send`, `recv`, `recv_like`, `barrier`, `get`, the waits, `quiet`, the
/// fetching atomics, `alloc`) are `async`; the others return at once. One-sided operations on
/// symmetric memory are described in [`crate::kernel::symmetric`], atomics in
/// [`crate::kernel::atomic`].
/// In a `#[ccl_kernel]` the macro adds `.await` where a call waits and `?` where it can fail, so kernels
/// read like Triton: `let x = tl.recv(W, n, F32);`.
#[derive(Debug)]
pub struct Tl {
    pe: PeId,
    /// A `u32` (a run has at most [`System::MAX_PES`](crate::System::MAX_PES) participants), in the
    /// room the PE's three `u32`s leave in a word: every PE's coroutine holds its `Tl`.
    rank: u32,
    lane: usize,
    lanes: usize,
    /// The facts its call's PEs share: held once for the call, not in every PE's coroutine (a
    /// million-PE run holds a million of them).
    call: Arc<CallContext>,
}

/// What every PE of one call shares of its [`TlContext`] (the fields of the same names): a runtime
/// makes it once per call and each PE's [`Tl`] from it ([`Tl::of_call`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallContext {
    /// SIPs, cubes per SIP, PEs per cube.
    pub extents: [usize; 3],
    /// The number of participants.
    pub size: usize,
    /// The reduction operator.
    pub op: ReduceOp,
    /// The root rank (0 for a collective without one).
    pub root: usize,
    /// The per-pair counts of all-to-all-v and send/recv.
    pub counts: Option<Arc<Counts>>,
    /// The call's generation.
    pub generation: u64,
    /// The slots of each queue.
    pub queue_depth: usize,
}

impl Tl {
    /// The handle for one PE's run; called by runtimes.
    ///
    /// # Panics
    /// As [`Tl::of_call`].
    pub fn new(ctx: TlContext) -> Tl {
        let TlContext { pe, extents, rank, size, op, root, counts, generation, lane, lanes, queue_depth } = ctx;
        let call = Arc::new(CallContext { extents, size, op, root, counts, generation, queue_depth });
        Tl::of_call(&call, pe, rank, (lane, lanes))
    }

    /// The handle of PE `pe` at `rank`, lane `lane` of `lanes`, in the call `call` describes: what a
    /// runtime starting many PEs of one call makes each one's from, sharing `call` among them.
    ///
    /// # Panics
    /// When `rank` is 2^32 or more, which no run's participant is (a run has at most
    /// [`System::MAX_PES`](crate::System::MAX_PES)).
    pub fn of_call(call: &Arc<CallContext>, pe: PeId, rank: usize, (lane, lanes): (usize, usize)) -> Tl {
        let rank = u32::try_from(rank).expect("a participant's rank is below 2^32");
        Tl { pe, rank, lane, lanes, call: Arc::clone(call) }
    }

    /// The fixed facts of this run.
    pub fn context(&self) -> TlContext {
        let call = &*self.call;
        TlContext {
            pe: self.pe,
            extents: call.extents,
            rank: self.rank(),
            size: call.size,
            op: call.op,
            root: call.root,
            counts: call.counts.clone(),
            generation: call.generation,
            lane: self.lane,
            lanes: self.lanes,
            queue_depth: call.queue_depth,
        }
    }

    /// The PE's index along `axis`: 0 = PE in its cube, 1 = cube in its SIP, 2 = SIP. Axes count from
    /// the innermost, as Triton's `program_id` does; [`Tl::rank`] is the PE's place among the
    /// participants.
    ///
    /// # Errors
    /// [`KernelError::BadAxis`] for an axis above 2.
    pub fn program_id(&self, axis: usize) -> Result<usize, KernelError> {
        let pe = self.pe;
        let outermost_first = [pe.sip, pe.cube, pe.pe];
        Ok(outermost_first[outermost_index(pe, axis)?] as usize)
    }

    /// The extent of `axis`: PEs per cube, cubes per SIP, or SIPs.
    ///
    /// # Errors
    /// [`KernelError::BadAxis`] for an axis above 2.
    pub fn num_programs(&self, axis: usize) -> Result<usize, KernelError> {
        Ok(self.call.extents[outermost_index(self.pe, axis)?])
    }

    /// The PE this kernel runs on.
    pub fn pe(&self) -> PeId {
        self.pe
    }

    /// The PE's position among the topology's participants.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// The number of participants in the topology.
    pub fn size(&self) -> usize {
        self.call.size
    }

    /// The reduction operator of this call.
    pub fn op(&self) -> ReduceOp {
        self.call.op
    }

    /// The root rank of a rooted collective.
    pub fn root(&self) -> usize {
        self.call.root
    }

    /// The call's per-pair counts: what each rank sends to each (all-to-all-v, send/recv).
    ///
    /// # Errors
    /// [`KernelError::NoCounts`] when the call has none: it is of another collective.
    pub fn counts(&self) -> Result<&Counts, KernelError> {
        self.call.counts.as_deref().ok_or(KernelError::NoCounts { pe: self.pe })
    }

    /// Which of its PE's lanes this coroutine is, from 0. A kernel runs as [`Tl::lanes`] concurrent
    /// lanes per PE (NCCL's channels, MSCCL's thread blocks); by default a lane sends and receives on
    /// the channel of its own index.
    pub fn lane(&self) -> usize {
        self.lane
    }

    /// How many lanes the kernel runs as on this PE.
    pub fn lanes(&self) -> usize {
        self.lanes
    }

    /// The slots of each queue (the system's `ipcq_depth`): a lane can send this many messages on a
    /// channel before its receiver takes one, so a kernel that sends `k` messages ahead of its receives
    /// needs `k` at most this.
    pub fn queue_depth(&self) -> usize {
        self.call.queue_depth
    }

    /// Whether the run is timing-only: its tiles carry their dtype and length but no data, and any
    /// size runs in the memory of its messages. A kernel's messages, reductions and their simulated
    /// times are the same either way; what it may do differently is what it keeps, as a pipelined
    /// ring does: a piece without data is its shape, which it can cut again when it needs it rather
    /// than hold thousands through the run.
    pub fn timing_only(&self) -> bool {
        crate::tile::made_without_data()
    }

    /// Moves this PE to `phase` (1, 2 or 3) of its call. Messages carry their sender's phase and a
    /// receiver accepts only its own, so the phases of a multi-phase collective (gather, exchange,
    /// scatter) cannot mix even where they share a queue. Every PE starts in phase 1.
    ///
    /// # Errors
    /// [`KernelError::BadPhase`] for a phase outside 1..=3.
    pub fn phase(&self, phase: u8) -> Result<(), KernelError> {
        if !(1..=PHASES_PER_CALL as u8).contains(&phase) {
            return Err(KernelError::BadPhase { pe: self.pe, phase });
        }
        with(|b| b.set_phase(phase));
        Ok(())
    }

    /// Records `key = value` in this PE's part of the run report (the last value of a key wins): which
    /// path an algorithm took, or what it held at its peak.
    pub fn note(&self, key: &str, value: impl std::fmt::Display) {
        let value = value.to_string();
        with(|b| b.note(key, value));
    }

    /// Whether the PE has a neighbour in `direction`.
    pub fn has(&self, direction: Direction) -> bool {
        with(|b| b.has(direction))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// `(name, is async, returns Result)` of every `pub fn` taking `&self` in the `impl Tl` blocks,
    /// read from this module's source files.
    fn tl_methods() -> Vec<(String, bool, bool)> {
        let sources = [
            include_str!("mod.rs"),
            include_str!("messages.rs"),
            include_str!("one_sided.rs"),
            include_str!("buffers.rs"),
            include_str!("teams.rs"),
            include_str!("atomics.rs"),
        ];
        let mut methods = Vec::new();
        for source in sources {
            let start = source.find("impl Tl {").expect("each file has `impl Tl`");
            let body = &source[start..];
            let end = body.find("\n}\n").expect("`impl Tl` ends");
            for (i, _) in body[..end].match_indices("    pub ") {
                let rest = &body[i + "    pub ".len()..];
                let is_async = rest.starts_with("async fn ");
                let Some(rest) = rest.strip_prefix("async fn ").or_else(|| rest.strip_prefix("fn ")) else { continue };
                let signature = &rest[..rest.find('{').expect("a method has a body")];
                if !signature.contains("&self") {
                    continue;
                }
                let name = signature[..signature.find(['(', '<']).expect("a method has parameters")].to_owned();
                // A method that returns a future (to capture its caller's location first) waits too.
                let is_async = is_async || signature.contains("-> impl Future<");
                methods.push((name, is_async, signature.contains("Result<")));
            }
        }
        methods
    }

    #[test]
    fn the_macro_awaits_exactly_the_async_methods_of_tl() {
        let methods = tl_methods();
        assert!(methods.len() > 20, "found {methods:?}");
        let is_async: BTreeSet<&str> =
            methods.iter().filter(|(_, is_async, _)| *is_async).map(|(name, ..)| name.as_str()).collect();
        let waiting: BTreeSet<&str> = kernbench_macros::__waiting_tl_methods!().into_iter().collect();
        assert_eq!(waiting, is_async, "the macro's list of waiting tl methods differs from `Tl`'s async methods");
    }

    #[test]
    fn the_macro_propagates_errors_of_exactly_the_fallible_methods_of_tl() {
        let methods = tl_methods();
        let infallible: BTreeSet<&str> =
            methods.iter().filter(|(_, _, fallible)| !*fallible).map(|(name, ..)| name.as_str()).collect();
        let listed: BTreeSet<&str> = kernbench_macros::__infallible_tl_methods!().into_iter().collect();
        assert_eq!(listed, infallible, "the macro's list of infallible tl methods differs from `Tl`'s");
        assert!(infallible.contains("size") && !infallible.contains("load"), "{infallible:?}");
    }
}

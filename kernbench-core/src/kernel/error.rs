//! Errors a kernel's `tl` operations raise at run time.

use std::fmt;

use crate::kernel::Buffer;
use crate::kernel::symmetric::{CallSite, Race, Symmetric, Team, TeamSplitError, Uninitialised};
use crate::machine::{Direction, MulticastError, PeId};
use crate::names::comma_list;
use crate::tile::{Dtype, TileError};

/// A `tl` operation, as named in errors and traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
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
    /// `tl.slice`.
    Slice,
    /// `tl.chunk`.
    Chunk,
    /// `tl.concat`.
    Concat,
    /// `tl.zeros`.
    Zeros,
    /// `tl.finish`.
    Finish,
    /// `tl.symmetric`.
    Declare,
    /// `tl.read` of a symmetric buffer.
    Read,
    /// `tl.write` of a symmetric buffer.
    Write,
    /// `tl.put`.
    Put,
    /// `tl.put_signal`.
    PutSignal,
    /// `tl.get`.
    Get,
    /// `tl.signal`.
    Signal,
    /// `tl.wait_until`.
    WaitSignal,
    /// `tl.reset_signal`.
    ResetSignal,
    /// `tl.quiet`.
    Quiet,
    /// `tl.multicast`.
    Multicast,
    /// `tl.multimem_ld_reduce`.
    MultimemLdReduce,
    /// `tl.multimem_st`.
    MultimemSt,
    /// `tl.multimem_red`.
    MultimemRed,
    /// A team constructor: `tl.team_split_strided`, `tl.team_split_2d`, `tl.team_sip`, `tl.team_node`.
    TeamSplit,
    /// `tl.barrier_team`.
    BarrierTeam,
    /// `tl.multicast_team`.
    MulticastTeam,
    /// `tl.atomic_add`.
    AtomicAdd,
    /// `tl.atomic_fetch_add`.
    AtomicFetchAdd,
    /// `tl.atomic_compare_swap`.
    AtomicCompareSwap,
    /// `tl.atomic_swap`.
    AtomicSwap,
    /// `tl.atomic_fetch_max`.
    AtomicFetchMax,
    /// `tl.atomic_fetch_min`.
    AtomicFetchMin,
    /// `tl.wait_value`.
    WaitValue,
    /// `tl.window`.
    Window,
    /// `tl.alloc`.
    Alloc,
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
            Op::Chunk => "chunk",
            Op::Concat => "concat",
            Op::Zeros => "zeros",
            Op::Finish => "finish",
            Op::Declare => "symmetric",
            Op::Read => "read",
            Op::Write => "write",
            Op::Put => "put",
            Op::PutSignal => "put_signal",
            Op::Get => "get",
            Op::Signal => "signal",
            Op::WaitSignal => "wait_until",
            Op::ResetSignal => "reset_signal",
            Op::Quiet => "quiet",
            Op::Multicast => "multicast",
            Op::MultimemLdReduce => "multimem_ld_reduce",
            Op::MultimemSt => "multimem_st",
            Op::MultimemRed => "multimem_red",
            Op::TeamSplit => "team split",
            Op::BarrierTeam => "barrier_team",
            Op::MulticastTeam => "multicast_team",
            Op::AtomicAdd => "atomic_add",
            Op::AtomicFetchAdd => "atomic_fetch_add",
            Op::AtomicCompareSwap => "atomic_compare_swap",
            Op::AtomicSwap => "atomic_swap",
            Op::AtomicFetchMax => "atomic_fetch_max",
            Op::AtomicFetchMin => "atomic_fetch_min",
            Op::WaitValue => "wait_value",
            Op::Window => "window",
            Op::Alloc => "alloc",
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
    /// A send or recv on a channel the run does not have: a run has as many channels per direction as
    /// the most lanes any PE runs.
    #[error(
        "{pe}: {op} on {direction} channel {channel}, which this run does not have: expected a channel in 0..{channels} (one per lane of the PE with the most lanes)"
    )]
    NoSuchChannel {
        /// The PE that ran the operation.
        pe: PeId,
        /// `Send` or `Recv`.
        op: Op,
        /// The direction.
        direction: Direction,
        /// The channel asked for.
        channel: usize,
        /// The channels each direction has.
        channels: usize,
    },
    /// A lane sent (or received) on a channel that another lane of its PE owns: the first lane to send
    /// on a (direction, channel) owns its sending side for the run, and the first to receive its
    /// receiving side, so lanes cannot take each other's messages or credits.
    #[error("{pe}: lane {lane}: {op} on {direction} channel {channel}, which lane {owner} of this PE owns for {op}")]
    ChannelTaken {
        /// The PE.
        pe: PeId,
        /// The lane that ran the operation.
        lane: usize,
        /// `Send` or `Recv`.
        op: Op,
        /// The direction.
        direction: Direction,
        /// The channel.
        channel: usize,
        /// The lane that owns that side of the channel.
        owner: usize,
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
    /// `tl.counts()` in a call without per-pair counts: the kernel is for all-to-all-v or send/recv
    /// and was run as another collective (the configuration's fault).
    #[error("{pe}: the call has no per-pair counts: expected the kernel to run as all_to_all_v or send_recv")]
    NoCounts {
        /// The PE.
        pe: PeId,
    },
    /// A tile the kernel asked for (`tl.zeros`, `tl.concat`) could not be made: it is larger than
    /// [`Tile::MAX_BYTES`](crate::kernel::Tile::MAX_BYTES) (`source` is [`TileError::TooLarge`]), or
    /// the allocator could not provide it (`source` is [`TileError::OutOfMemory`]). The kernel's fault
    /// for an absurd size; for a plausible one, the machine is too small for the run.
    #[error("{pe}: {op}: out of memory: {source}")]
    OutOfMemory {
        /// The PE.
        pe: PeId,
        /// The operation that allocated.
        op: Op,
        /// How many bytes it asked for, and why it did not get them.
        source: TileError,
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
    /// A `tl.store` replacing the input or output buffer with a tile of another shape: those buffers
    /// keep the shape the collective gave them (write part of one with `tl.store_at`).
    #[error(
        "{pe}: store into {buffer:?} expected a tile of {expected_dtype}[{expected_len}] (the buffer's shape, set by the collective) but got {got_dtype}[{got_len}]; write part of the buffer with tl.store_at"
    )]
    StoreMismatch {
        /// The PE.
        pe: PeId,
        /// The buffer stored into.
        buffer: Buffer,
        /// The buffer's dtype.
        expected_dtype: Dtype,
        /// The buffer's length in elements.
        expected_len: usize,
        /// The dtype of the tile given.
        got_dtype: Dtype,
        /// The length of the tile given.
        got_len: usize,
    },
    /// The kernel used up a budget of its runtime's watchdog: it looped without taking a step, or never
    /// finished while still taking steps (the kernel's fault, or a budget set too low for it).
    #[error(
        "{pe}: the watchdog stopped the kernel after {iterations} loop iterations since its last step and {steps} waiting steps in all (last step: {}): it used up its budget of {budget}; a kernel that loops without taking a step, or never finishes while taking steps, ends here (if it is meant to run this long, raise the runtime's budget)",
        last_step(*last_op, *last_direction)
    )]
    Watchdog {
        /// The PE.
        pe: PeId,
        /// The budget it used up.
        budget: WatchdogBudget,
        /// Loop iterations the kernel had made since its last waiting step.
        iterations: u64,
        /// Waiting `tl` steps (send, recv, barrier) the kernel had completed.
        steps: u64,
        /// The last waiting step it completed, if any.
        last_op: Option<Op>,
        /// That step's direction (none for a barrier).
        last_direction: Option<Direction>,
    },
    /// A one-sided operation addressed a rank that the PE's install plan does not reach (as a send on a
    /// direction it does not have): peers are the ranks at the other end of the PE's neighbour table.
    #[error("{pe}: {op} to rank {peer}, which this PE's install plan does not reach: it reaches ranks [{}]{hint}", comma_list(reachable), hint = if *peer == *rank { " (its own copy is read and written with tl.read and tl.write)" } else { "" })]
    NotAPeer {
        /// The PE.
        pe: PeId,
        /// Its rank.
        rank: usize,
        /// The operation.
        op: Op,
        /// The rank addressed.
        peer: usize,
        /// The ranks it reaches.
        reachable: Vec<usize>,
    },
    /// Two declarations of a symmetric buffer of one name disagree on its dtype or length (on this PE,
    /// or between it and a peer that put into it first).
    #[error(
        "{pe}: symmetric buffer `{name}` is declared as {got} here but exists as {existing}: every PE must declare it with the same dtype and length"
    )]
    SymmetricMismatch {
        /// The PE.
        pe: PeId,
        /// The buffer's name.
        name: &'static str,
        /// The shape it exists with, `dtype[len]`.
        existing: String,
        /// The shape asked for.
        got: String,
    },
    /// A one-sided access that does not fit its symmetric buffer: past its end, or of another dtype.
    #[error("{pe}: {op} of {dtype}[{len}] at element {offset} of {buffer}: expected {}[n] with offset + n <= {}", buffer.dtype, buffer.len)]
    BadSymmetricAccess {
        /// The PE.
        pe: PeId,
        /// The operation.
        op: Op,
        /// The buffer.
        buffer: Symmetric,
        /// The first element accessed.
        offset: usize,
        /// The elements accessed.
        len: usize,
        /// Their dtype.
        dtype: Dtype,
    },
    /// A signal number out of range.
    #[error("{pe}: {op} on signal {signal}, which does not exist: expected 0..{max}")]
    NoSuchSignal {
        /// The PE.
        pe: PeId,
        /// The operation.
        op: Op,
        /// The signal asked for.
        signal: usize,
        /// [`MAX_SIGNALS`](crate::kernel::symmetric::MAX_SIGNALS).
        max: usize,
    },
    /// An atomic (or a wait on an element) that does not fit its buffer: past its end, or on a float
    /// buffer.
    #[error("{pe}: {op} on element {index} of {buffer}: expected an i32 or i64 buffer and an element below {}", buffer.len)]
    BadAtomic {
        /// The PE.
        pe: PeId,
        /// The operation.
        op: Op,
        /// The buffer.
        buffer: Symmetric,
        /// The element asked for.
        index: usize,
    },
    /// `tl.window` of a name the communicator registered no window under.
    #[error(
        "{pe}: window `{name}` is not registered: expected one of [{}] (a communicator registers its windows before its calls)",
        comma_list(registered)
    )]
    NoSuchWindow {
        /// The PE.
        pe: PeId,
        /// The name asked for.
        name: String,
        /// The windows registered.
        registered: Vec<&'static str>,
    },
    /// Ranks met at different collective calls: a collective allocation on one, another allocation or
    /// a barrier on another. Every rank must make the same collective calls in the same order.
    #[error(
        "{pe}: {mine} but {other_pe} is at {theirs}: every rank must make the same collective calls in the same order"
    )]
    CollectiveMismatch {
        /// The PE.
        pe: PeId,
        /// Where this PE is: `alloc of `x` (f32[16]) at file:line:col`, or `barrier`.
        mine: String,
        /// A PE at another collective call.
        other_pe: PeId,
        /// Where that PE is.
        theirs: String,
    },
    /// A multimem operation reached a member that had not joined the multicast object yet (every
    /// member must make it, and a barrier follow, before any member uses it).
    #[error("{pe}: {op}{} through the multicast object of {multicast} reached rank {member}, which has not joined it yet: every member must call tl.multicast (then a barrier) before any uses it", site.map(|s| format!(" at {s}")).unwrap_or_default())]
    MulticastNotJoined {
        /// The PE that issued the operation.
        pe: PeId,
        /// The operation.
        op: Op,
        /// Where in the kernel (unknown for an operation read from another process).
        site: Option<CallSite>,
        /// The multicast object's buffer.
        multicast: Symmetric,
        /// The member that had not joined.
        member: usize,
    },
    /// Two unordered accesses to the same bytes of symmetric memory, at least one a write: see
    /// [`Race`].
    #[error("{0}")]
    Race(Box<Race>),
    /// A read of symmetric memory nobody wrote: see [`Uninitialised`].
    #[error("{0}")]
    Uninitialised(Box<Uninitialised>),
    /// An error raised for this PE in another process of a run spread over several (the target of
    /// its `get` is there), as it read there.
    #[error("{message}")]
    Relayed {
        /// The PE.
        pe: PeId,
        /// The error.
        message: String,
    },
    /// A multicast object asked for where the system cannot make one: its switch does not multicast,
    /// or the run's ranks are not all behind one switch. The configuration's fault (the system, or
    /// the algorithm's mapper).
    #[error("{pe}: {op}: {source}")]
    NoMulticast {
        /// The PE.
        pe: PeId,
        /// The operation.
        op: Op,
        /// Why the ranks cannot share a multicast object.
        source: MulticastError,
    },
    /// A multimem operation in a run spread over several processes: a multicast object spans
    /// every rank's heap, which such a run splits between processes.
    #[error(
        "{pe}: {op}: rank {member}'s heap is in another process of this spread run: multicast objects are modelled in a run of one process (run without --spread)"
    )]
    MulticastSpread {
        /// The PE.
        pe: PeId,
        /// The operation.
        op: Op,
        /// A member held by another process.
        member: usize,
    },
    /// A team split that names no valid team ([`TeamSplitError`] says what would be valid).
    #[error("{pe}: {op}: {source}")]
    BadTeamSplit {
        /// The PE.
        pe: PeId,
        /// The split.
        op: Op,
        /// What is wrong with it.
        source: TeamSplitError,
    },
    /// A team operation by a rank that is not one of the team's members: only members barrier or
    /// multicast over a team.
    #[error("{pe}: {op} by rank {rank}, which is not a member of {team}: only the team's members may call it")]
    NotInTeam {
        /// The PE.
        pe: PeId,
        /// Its rank.
        rank: usize,
        /// The operation.
        op: Op,
        /// The team (as the rank was handed it).
        team: Team,
    },
    /// A team that needs the run's PEs (`tl.team_sip`, `tl.team_node`) asked of a runtime that does
    /// not say where other ranks run.
    #[error("{pe}: {op}: this runtime does not say which PE rank {peer} runs on")]
    UnknownPlacement {
        /// The PE.
        pe: PeId,
        /// The operation.
        op: Op,
        /// The rank whose PE was asked for.
        peer: usize,
    },
    /// A one-sided operation on a backend that has no symmetric memory.
    #[error("{pe}: {op}: this runtime has no symmetric memory")]
    Unsupported {
        /// The PE.
        pe: PeId,
        /// The operation.
        op: Op,
    },
    /// The kernel failed on its own terms: in a `#[ccl_kernel]`, `?` on a `Result` of the kernel's own
    /// (any error that implements `Display`, such as a parse error or [`PeerIndexError`](crate::machine::PeerIndexError))
    /// becomes this, with the error's message; a hand-written `Launch` returns it with
    /// [`KernelError::kernel`]. The kernel's fault, by its own account.
    #[error("{pe}: the kernel failed: {message}")]
    Kernel {
        /// The PE.
        pe: PeId,
        /// The error's message (its `Display`).
        message: String,
    },
}

/// A budget of a runtime's watchdog, with its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchdogBudget {
    /// Loop iterations in a row without a waiting step, counted at the top of every loop body of a
    /// `#[ccl_kernel]`.
    LoopIterations(u64),
    /// Waiting `tl` steps (send, recv, barrier) per PE.
    Steps(u64),
}

impl fmt::Display for WatchdogBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WatchdogBudget::LoopIterations(limit) => write!(f, "{limit} loop iterations without a step"),
            WatchdogBudget::Steps(limit) => write!(f, "{limit} waiting steps"),
        }
    }
}

fn last_step(op: Option<Op>, direction: Option<Direction>) -> String {
    match (op, direction) {
        (Some(op), Some(direction)) => format!("{op} on {direction}"),
        (Some(op), None) => op.to_string(),
        (None, _) => "none".to_owned(),
    }
}

impl KernelError {
    /// The kernel's own error on `pe`: what `?` on a kernel's own `Result` becomes in a `#[ccl_kernel]`.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{KernelError, PeId};
    /// let error = KernelError::kernel(PeId::new(0, 1, 2), "no data for chunk 3");
    /// assert!(error.to_string().ends_with("the kernel failed: no data for chunk 3"), "{error}");
    /// ```
    pub fn kernel(pe: PeId, message: impl fmt::Display) -> KernelError {
        KernelError::Kernel { pe, message: message.to_string() }
    }

    /// The PE whose operation failed.
    pub fn pe(&self) -> PeId {
        match self {
            KernelError::NoSuchDirection { pe, .. }
            | KernelError::NoSuchChannel { pe, .. }
            | KernelError::ChannelTaken { pe, .. }
            | KernelError::RecvMismatch { pe, .. }
            | KernelError::GenerationMismatch { pe, .. }
            | KernelError::BadAxis { pe, .. }
            | KernelError::BadPhase { pe, .. }
            | KernelError::NoCounts { pe }
            | KernelError::OutOfMemory { pe, .. }
            | KernelError::Tile { pe, .. }
            | KernelError::StoreMismatch { pe, .. }
            | KernelError::Watchdog { pe, .. }
            | KernelError::NotAPeer { pe, .. }
            | KernelError::SymmetricMismatch { pe, .. }
            | KernelError::BadSymmetricAccess { pe, .. }
            | KernelError::NoSuchSignal { pe, .. }
            | KernelError::BadAtomic { pe, .. }
            | KernelError::NoSuchWindow { pe, .. }
            | KernelError::CollectiveMismatch { pe, .. }
            | KernelError::MulticastNotJoined { pe, .. }
            | KernelError::Unsupported { pe, .. }
            | KernelError::BadTeamSplit { pe, .. }
            | KernelError::NotInTeam { pe, .. }
            | KernelError::UnknownPlacement { pe, .. }
            | KernelError::NoMulticast { pe, .. }
            | KernelError::MulticastSpread { pe, .. }
            | KernelError::Relayed { pe, .. }
            | KernelError::Kernel { pe, .. } => *pe,
            KernelError::Race(race) => race.second.pe,
            KernelError::Uninitialised(read) => read.reader.pe,
        }
    }
}

//! Symmetric memory: buffers that exist at the same name on every participant, which a PE reads and
//! writes one-sidedly on its peers (`tl.put`, `tl.get`), with signals to say when data has landed.
//!
//! This is the model of NVSHMEM, MSCCL++ and NCCL's symmetric kernels, with NVSHMEM's ordering rules:
//!
//! - a put and a later signal (or send) of the same lane are ordered only through `tl.fence()` or
//!   `tl.quiet()` between them; `tl.put_signal` orders its own data before its signal;
//! - `tl.wait_until(signal, v)` orders after the wait everything that was ordered before the raises
//!   that brought the signal to `v`;
//! - sends and receives, barriers (which also complete the lane's puts, as `quiet` does) order as
//!   messages do.
//!
//! Signals are counters per PE (`0..MAX_SIGNALS`). A raise carries its raiser's message generation
//! (call and phase, [`crate::kernel::tl::message_generation`]) and counts only for waits of the same, so a
//! flag of another phase or call never satisfies a wait. A runtime makes the heap at the start of a
//! call and drops it at the end; a window (`tl.window`), which a communicator registers once, outlives
//! its calls, and nothing tags what a call wrote to it. Atomics, with their orders and scopes, are
//! [`atomic`](crate::kernel::atomic)'s.
//!
//! A runtime that checks these rules (the mock runtime's race detector) reports two accesses to
//! overlapping bytes that they leave unordered, at least one a write, as a [`Race`], and a read of
//! bytes nobody wrote as [`Uninitialised`], naming both sides and the kernel's source lines.

use std::fmt;
use std::ops::Range;
use std::panic::Location;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::kernel::atomic::{AtomicOp, Cmp, MemoryOrder, Scope};
use crate::kernel::{KernelError, Op};
use crate::machine::PeId;
use crate::tile::{Dtype, ReduceOp, Tile};

/// A buffer of the symmetric heap: the name every participant knows it by, its dtype and length in
/// elements. `tl.symmetric(name, dtype, len)` declares it on the calling PE; a peer's put to it
/// creates it there if the peer has not declared it yet, and the two must agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Symmetric {
    /// Its name, the same on every PE.
    pub name: &'static str,
    /// Its elements' dtype.
    pub dtype: Dtype,
    /// Its length in elements.
    pub len: usize,
}

impl Symmetric {
    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * self.dtype.size()
    }

    /// The bytes of elements `offset..offset + len`, or `None` when they reach past the end.
    pub fn byte_range(&self, offset: usize, len: usize) -> Option<Range<u64>> {
        let end = offset.checked_add(len).filter(|&end| end <= self.len)?;
        let size = self.dtype.size() as u64;
        Some(offset as u64 * size..end as u64 * size)
    }
}

impl fmt::Display for Symmetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` ({}[{}])", self.name, self.dtype, self.len)
    }
}

/// A multicast object: symmetric buffer `buffer` spanned on every member, so that one operation
/// through the switch reaches every member's copy (NVLS's `multimem` address). `tl.multicast` makes
/// one over every rank of the run, `tl.multicast_team` one over a [`Team`]'s members.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Multicast {
    /// The buffer it spans, declared on every member.
    pub buffer: Symmetric,
    /// The global ranks it spans, in the order the switch combines their copies (ascending for a
    /// team's; `0..size` for `tl.multicast`'s). Shared, so the handle stays cheap to clone.
    pub members: Arc<[usize]>,
}

impl fmt::Display for Multicast {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the multicast object of {} over ranks {}", self.buffer, RankList(&self.members))
    }
}

/// A store through a multicast object as the kernel asked for it: `tl.multimem_st` (`reduce: None`),
/// or `tl.multimem_red`, which reduces `tile` into every member's copy.
#[derive(Clone, Copy, Debug)]
pub struct MultimemStore<'a> {
    /// The multicast object.
    pub multicast: &'a Multicast,
    /// The first element written.
    pub offset: usize,
    /// The data.
    pub tile: &'a Tile,
    /// The reduction of `multimem_red`.
    pub reduce: Option<ReduceOp>,
    /// The call in the kernel.
    pub site: CallSite,
}

/// The PEs a barrier spans.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Group {
    /// Every participant.
    #[default]
    All,
    /// The participants on the caller's SIP.
    Sip,
    /// The participants in the caller's cube.
    Cube,
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Group::All => "every participant",
            Group::Sip => "the SIP",
            Group::Cube => "the cube",
        })
    }
}

/// A team: a subset of the run's ranks that synchronise and multicast among themselves, numbered
/// `0..size` in the order of their global ranks (NVSHMEM's `nvshmem_team_t`, NCCL's device teams).
///
/// Every member computes its teams locally from the run's ranks (and, for [`Tl::team_sip`] and
/// [`Tl::team_node`], their PEs), so teams cost no communication and two members that split the same
/// way hold equal teams. One-sided operations take global ranks: address a team's member `r` with
/// `tl.put(team.global(r)?, ...)`. A team's own operations are [`Tl::barrier_team`] and
/// [`Tl::multicast_team`].
///
/// [`Tl::team_sip`]: crate::kernel::Tl::team_sip
/// [`Tl::team_node`]: crate::kernel::Tl::team_node
/// [`Tl::barrier_team`]: crate::kernel::Tl::barrier_team
/// [`Tl::multicast_team`]: crate::kernel::Tl::multicast_team
///
/// # Examples
/// ```
/// use kernbench_core::symmetric::Team;
/// // Of 8 ranks, the even ones; rank 6 is their member 3.
/// let evens = Team::strided(0, 2, 4, 8, 6).unwrap().unwrap();
/// assert_eq!((evens.rank(), evens.size(), evens.members()), (3, 4, &[0, 2, 4, 6][..]));
/// assert_eq!(evens.global(1), Ok(2));
/// assert!(evens.global(4).is_err());
/// // Rank 5 is not in it.
/// assert_eq!(Team::strided(0, 2, 4, 8, 5), Ok(None));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Team {
    /// The members' global ranks, ascending.
    members: Arc<[usize]>,
    /// The caller's index in `members`.
    rank: usize,
}

impl Team {
    /// The team of `members` (global ranks, in any order; repeats count once) as seen by global rank
    /// `caller`, or `None` when `caller` is not one of them. Members are numbered in ascending order
    /// of their global ranks, so every member numbers them alike.
    pub fn of(members: impl Into<Vec<usize>>, caller: usize) -> Option<Team> {
        let mut members = members.into();
        members.sort_unstable();
        members.dedup();
        let rank = members.binary_search(&caller).ok()?;
        Some(Team { members: members.into(), rank })
    }

    /// Every rank of a run of `world` ranks, as seen by `caller` (NVSHMEM's `TEAM_WORLD`).
    ///
    /// # Errors
    /// [`TeamSplitError::CallerOutside`] when `caller` is not below `world` (a runtime that gave a PE
    /// a rank outside its run).
    pub fn world(world: usize, caller: usize) -> Result<Team, TeamSplitError> {
        Team::of((0..world).collect::<Vec<_>>(), caller).ok_or(TeamSplitError::CallerOutside { caller, world })
    }

    /// The ranks `start + k * stride` for `k < size` of a run of `world` ranks, as seen by `caller`
    /// (NVSHMEM's `team_split_strided` of the world team): `None` when `caller` is not among them.
    ///
    /// # Errors
    /// [`TeamSplitError`] for a team of no members, a stride of 0 with more than one member, or
    /// members past the run's last rank.
    pub fn strided(
        start: usize,
        stride: usize,
        size: usize,
        world: usize,
        caller: usize,
    ) -> Result<Option<Team>, TeamSplitError> {
        if size == 0 {
            return Err(TeamSplitError::Empty { start, stride });
        }
        if stride == 0 && size > 1 {
            return Err(TeamSplitError::ZeroStride { start, size });
        }
        let last = stride.checked_mul(size - 1).and_then(|span| span.checked_add(start));
        if last.is_none_or(|last| last >= world) {
            return Err(TeamSplitError::PastTheRun { start, stride, size, last, world });
        }
        let members: Vec<usize> = (0..size).map(|k| start + k * stride).collect();
        Ok(Team::of(members, caller))
    }

    /// NVSHMEM's `team_split_2d` of a run of `world` ranks as seen by `caller`: its x team (the
    /// `x_size` consecutive ranks from `caller / x_size * x_size`, fewer in a last partial row) and
    /// its y team (the ranks with the same index `caller % x_size` in their x team). An `x_size`
    /// above `world` is taken as `world`, as NVSHMEM does.
    ///
    /// # Errors
    /// [`TeamSplitError::ZeroXSize`] for an `x_size` of 0, [`TeamSplitError::CallerOutside`] as
    /// [`Team::world`].
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::symmetric::Team;
    /// // 6 ranks as rows of 4: rank 5 is in row [4, 5], column [1, 5].
    /// let (x, y) = Team::split_2d(4, 6, 5).unwrap();
    /// assert_eq!((x.members(), x.rank()), (&[4, 5][..], 1));
    /// assert_eq!((y.members(), y.rank()), (&[1, 5][..], 1));
    /// ```
    pub fn split_2d(x_size: usize, world: usize, caller: usize) -> Result<(Team, Team), TeamSplitError> {
        if x_size == 0 {
            return Err(TeamSplitError::ZeroXSize { world });
        }
        let outside = TeamSplitError::CallerOutside { caller, world };
        let x_size = x_size.min(world);
        if caller >= world {
            return Err(outside);
        }
        let row = caller / x_size * x_size;
        let x: Vec<usize> = (row..(row + x_size).min(world)).collect();
        let y: Vec<usize> = (caller % x_size..world).step_by(x_size).collect();
        // Below `world`, the caller is in its own row and column.
        let (x, y) = Team::of(x, caller).zip(Team::of(y, caller)).ok_or(outside)?;
        Ok((x, y))
    }

    /// The caller's index among the members.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many members the team has.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// The members' global ranks, in team-rank order.
    pub fn members(&self) -> &[usize] {
        &self.members
    }

    /// The members' global ranks, shared (what a multicast object over the team holds).
    pub fn shared_members(&self) -> &Arc<[usize]> {
        &self.members
    }

    /// The global rank of the team's member `team_rank`: what one-sided operations take
    /// (`tl.put(team.global(r)?, ...)`).
    ///
    /// # Errors
    /// [`TeamRankError`] when `team_rank` is not below [`Team::size`].
    pub fn global(&self, team_rank: usize) -> Result<usize, TeamRankError> {
        self.members.get(team_rank).copied().ok_or_else(|| TeamRankError { team_rank, team: self.members.clone() })
    }

    /// Whether global rank `rank` is a member.
    pub fn contains(&self, rank: usize) -> bool {
        self.members.binary_search(&rank).is_ok()
    }
}

impl fmt::Display for Team {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the team of ranks {}", RankList(&self.members))
    }
}

/// Ranks for messages: `[0, 2, 4]`, or `[0, 1, ..., 63]` (first, second, last) when long.
struct RankList<'a>(&'a [usize]);

impl fmt::Display for RankList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [first, second, .., last] if self.0.len() > 8 => write!(f, "[{first}, {second}, ..., {last}]"),
            ranks => {
                let ranks: Vec<String> = ranks.iter().map(usize::to_string).collect();
                write!(f, "[{}]", ranks.join(", "))
            }
        }
    }
}

/// A team split that names no valid team: the kernel's fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TeamSplitError {
    /// A strided split of size 0.
    #[error("a strided team of size 0 (start {start}, stride {stride}): expected size >= 1")]
    Empty {
        /// The first member asked for.
        start: usize,
        /// The stride asked for.
        stride: usize,
    },
    /// A stride of 0 with more than one member: every member would be rank `start`.
    #[error("a strided team of stride 0 and size {size} repeats rank {start}: expected stride >= 1 (or size 1)")]
    ZeroStride {
        /// The first member asked for.
        start: usize,
        /// The size asked for.
        size: usize,
    },
    /// Members past the run's last rank.
    #[error(
        "a strided team from rank {start} by {stride} of size {size} reaches rank {}, past the run's {world} ranks: expected start + (size - 1) * stride < {world}",
        last.map_or_else(|| "beyond usize".to_owned(), |last| last.to_string())
    )]
    PastTheRun {
        /// The first member asked for.
        start: usize,
        /// The stride asked for.
        stride: usize,
        /// The size asked for.
        size: usize,
        /// The last member it would have (`None`: past `usize`).
        last: Option<usize>,
        /// The run's ranks.
        world: usize,
    },
    /// A split asked for by a rank outside the run: the runtime's fault, not the kernel's.
    #[error("rank {caller} asked for a team of a run of {world} ranks, which it is not one of")]
    CallerOutside {
        /// The caller's rank.
        caller: usize,
        /// The run's ranks.
        world: usize,
    },
    /// A 2-D split with rows of 0 ranks.
    #[error("a 2-D team split with x_size 0: expected x_size in 1..={world}")]
    ZeroXSize {
        /// The run's ranks.
        world: usize,
    },
}

/// A team rank past the team's last member, given to [`Team::global`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("team rank {team_rank} of a team of {} members (ranks {}): expected a team rank in 0..{}", team.len(), RankList(team), team.len())]
pub struct TeamRankError {
    /// The team rank asked for.
    pub team_rank: usize,
    /// The team's members.
    pub team: Arc<[usize]>,
}

/// Where in a kernel's source an operation was called: `file:line:column`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallSite(pub &'static Location<'static>);

/// The old name of [`CallSite`].
#[deprecated(note = "renamed to CallSite")]
pub type Site = CallSite;

impl fmt::Display for CallSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.0.file(), self.0.line(), self.0.column())
    }
}

/// One side of a race: which lane of which PE accessed the bytes, how, and where in its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// The PE whose kernel made the access.
    pub pe: PeId,
    /// Its lane.
    pub lane: usize,
    /// `put`, `put_signal`, `get`, `read`, `write` or a `multimem_*` operation.
    pub op: Op,
    /// The call in the kernel's source.
    pub site: CallSite,
    /// An atomic's scope (`None` for a plain access).
    pub scope: Option<Scope>,
    /// The call (communicator generation) it was made in, when that was an earlier call than the
    /// other side's: windows keep accesses across calls.
    pub call: Option<u64>,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} lane {} ({}", self.pe, self.lane, self.op)?;
        if let Some(scope) = self.scope {
            write!(f, " at scope {scope}")?;
        }
        write!(f, " at {}", self.site)?;
        if let Some(call) = self.call {
            write!(f, ", in call {call}")?;
        }
        f.write_str(")")
    }
}

/// Two accesses to overlapping bytes of a PE's symmetric buffer, at least one a write, that nothing
/// orders: the result depends on which lands first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Race {
    /// The PE whose copy of the buffer both touched.
    pub owner: PeId,
    /// The buffer's name.
    pub buffer: &'static str,
    /// The bytes both touched.
    pub bytes: Range<u64>,
    /// The access recorded first.
    pub first: Access,
    /// The access that found it unordered.
    pub second: Access,
    /// Whether the buffer is a window, whose values outlive a call.
    pub window: bool,
}

impl fmt::Display for Race {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "data race on {}'s `{}` bytes {}..{}: {} and {} are not ordered by any signal, wait, fence, barrier or message",
            self.owner, self.buffer, self.bytes.start, self.bytes.end, self.first, self.second
        )?;
        match (self.first.scope, self.second.scope) {
            (Some(a), Some(b)) => write!(
                f,
                ", and as atomics they are not atomic with each other: scope {a} and scope {b} must each include the other's lane (a release at a narrow scope is not seen beyond it)"
            ),
            (Some(_), None) | (None, Some(_)) => f.write_str(
                " (a plain access and an atomic of the same bytes are a race unless something orders them: set and read a flag with atomics)",
            ),
            _ if self.window => f.write_str(
                " (a window keeps its values across calls: a flag or counter an earlier call left can end a wait of this call at once, and the next call's writes can land while this one still reads; wait for a value only this call writes, such as its generation, and order calls that reuse a buffer)",
            ),
            _ => f.write_str(
                " (a put is ordered before a later signal only by tl.fence or tl.quiet; tl.put_signal orders itself)",
            ),
        }
    }
}

/// A read of bytes of a symmetric buffer that nobody has written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uninitialised {
    /// The PE whose copy of the buffer was read.
    pub owner: PeId,
    /// The buffer's name.
    pub buffer: &'static str,
    /// The first run of bytes read that nobody wrote.
    pub bytes: Range<u64>,
    /// The read.
    pub reader: Access,
}

impl fmt::Display for Uninitialised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "read of uninitialised memory: {} read {}'s `{}` bytes {}..{}, which nobody wrote",
            self.reader, self.owner, self.buffer, self.bytes.start, self.bytes.end
        )
    }
}

/// A put as the kernel asked for it.
#[derive(Clone, Copy, Debug)]
pub struct Put<'a> {
    /// The peer's rank.
    pub peer: usize,
    /// The buffer, by its declaration.
    pub buffer: &'a Symmetric,
    /// The first element written.
    pub offset: usize,
    /// The data.
    pub tile: &'a Tile,
    /// `(signal, add)`: a signal of the peer raised by `add` once the data has landed.
    pub signal: Option<(usize, u64)>,
    /// The call in the kernel.
    pub site: CallSite,
}

/// An atomic as the kernel asked for it.
#[derive(Clone, Copy, Debug)]
pub struct Atomic<'a> {
    /// The rank whose copy it addresses (the caller's own rank for its own copy).
    pub peer: usize,
    /// The buffer.
    pub buffer: &'a Symmetric,
    /// The element.
    pub index: usize,
    /// What it does.
    pub op: AtomicOp,
    /// Whether the caller waits for the old value (`atomic_fetch_*`) or not (`atomic_add`).
    pub fetch: bool,
    /// Its memory order.
    pub order: MemoryOrder,
    /// Its scope.
    pub scope: Scope,
    /// The call in the kernel.
    pub site: CallSite,
}

/// A wait on an element of this PE's copy of a symmetric buffer (NVSHMEM's `wait_until` on a
/// symmetric variable): an atomic load at `scope`, repeated until `value cmp operand`, that acquires.
#[derive(Clone, Copy, Debug)]
pub struct ValueWait<'a> {
    /// The buffer.
    pub buffer: &'a Symmetric,
    /// The element.
    pub index: usize,
    /// The comparison.
    pub cmp: Cmp,
    /// The operand.
    pub operand: i64,
    /// The load's scope.
    pub scope: Scope,
    /// The call in the kernel.
    pub site: CallSite,
}

/// A collective allocation as the kernel asked for it: every rank allocates the same buffer at the
/// same point, and waits for the others (NVSHMEM's `nvshmem_malloc`, a barrier over every rank).
#[derive(Clone, Copy, Debug)]
pub struct Allocation {
    /// The buffer.
    pub buffer: Symmetric,
    /// The call in the kernel.
    pub site: CallSite,
}

/// What a runtime with symmetric memory provides, beside [`Backend`](crate::kernel::tl::Backend)'s messages.
/// `poll_*` methods follow [`std::future::Future::poll`].
pub trait OneSided {
    /// Declares `buffer` on this PE (a no-op when it exists with the same shape).
    fn declare(&mut self, buffer: &Symmetric) -> Result<(), KernelError>;
    /// Reads elements `offset..offset + len` of this PE's copy of `buffer`.
    fn read(&mut self, buffer: &Symmetric, offset: usize, len: usize, site: CallSite) -> Result<Tile, KernelError>;
    /// Writes `tile` into this PE's copy of `buffer` at `offset`.
    fn write(&mut self, buffer: &Symmetric, offset: usize, tile: &Tile, site: CallSite) -> Result<(), KernelError>;
    /// Starts a put; it lands on the peer after the time its bytes take on the route.
    fn put(&mut self, put: Put<'_>) -> Result<(), KernelError>;
    /// Reads `len` elements of the peer's copy of `buffer` from `offset`: a request, then the data.
    fn poll_get(
        &mut self,
        peer: usize,
        buffer: &Symmetric,
        offset: usize,
        len: usize,
        site: CallSite,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Tile, KernelError>>;
    /// Raises the peer's `signal` by `add` (a small message).
    fn signal(&mut self, peer: usize, signal: usize, add: u64) -> Result<(), KernelError>;
    /// Waits until this PE's `signal` holds a value `v` with `v cmp value`; returns it.
    fn poll_wait(
        &mut self,
        signal: usize,
        cmp: Cmp,
        value: u64,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u64, KernelError>>;
    /// Sets this PE's `signal` back to 0.
    fn reset(&mut self, signal: usize) -> Result<(), KernelError>;
    /// Orders this lane's earlier puts before its later puts and signals.
    fn fence(&mut self);
    /// Waits until every put of this lane has landed.
    fn poll_quiet(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), KernelError>>;
    /// Declares `buffer` on this PE and spans it with a multicast object over global ranks `members`
    /// (ascending, this PE's among them).
    fn multicast(&mut self, buffer: &Symmetric, members: &Arc<[usize]>) -> Result<Multicast, KernelError>;
    /// Starts a store (or reduction) through a multicast object into every member's copy; it lands
    /// like a plain put, once on each member.
    fn multimem_store(&mut self, store: MultimemStore<'_>) -> Result<(), KernelError>;
    /// Reads elements `offset..offset + len` of every member's copy, reduced by `op` in the switch.
    fn poll_multimem_ld_reduce(
        &mut self,
        multicast: &Multicast,
        offset: usize,
        len: usize,
        op: ReduceOp,
        site: CallSite,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Tile, KernelError>>;
    /// Starts an atomic that does not fetch (its own copy's at once, a peer's when it lands).
    fn atomic(&mut self, atomic: Atomic<'_>) -> Result<(), KernelError>;
    /// An atomic that fetches: the element's old value.
    fn poll_fetch(&mut self, atomic: Atomic<'_>, cx: &mut Context<'_>) -> Poll<Result<i64, KernelError>>;
    /// Waits until an element of this PE's copy compares as asked; returns its value.
    fn poll_wait_value(&mut self, wait: ValueWait<'_>, cx: &mut Context<'_>) -> Poll<Result<i64, KernelError>>;
    /// The window registered as `name`.
    fn window(&mut self, name: &str) -> Result<Symmetric, KernelError>;
    /// Declares the buffer, then waits for every rank to reach the same allocation.
    fn poll_alloc(&mut self, allocation: Allocation, cx: &mut Context<'_>) -> Poll<Result<(), KernelError>>;
}

/// The most signals a PE has: signals are numbered `0..MAX_SIGNALS`.
pub const MAX_SIGNALS: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::{Team, TeamSplitError};

    /// `(team rank, members)` of `team`, or `None`.
    fn seen(team: Option<Team>) -> Option<(usize, Vec<usize>)> {
        team.map(|t| (t.rank(), t.members().to_vec()))
    }

    #[test]
    fn a_strided_split_has_nvshmem_s_members_and_ranks() {
        // NVSHMEM: team_split_strided(WORLD, 1, 3, 3) of 10 PEs is PEs 1, 4, 7.
        for caller in 0..10 {
            let expected = [1, 4, 7].iter().position(|&m| m == caller).map(|i| (i, vec![1, 4, 7]));
            assert_eq!(seen(Team::strided(1, 3, 3, 10, caller).unwrap()), expected, "caller {caller}");
        }
        // Stride 0 is allowed for one member; the last rank may be a member.
        assert_eq!(seen(Team::strided(9, 0, 1, 10, 9).unwrap()), Some((0, vec![9])));
        assert_eq!(seen(Team::strided(0, 9, 2, 10, 9).unwrap()), Some((1, vec![0, 9])));
    }

    #[test]
    fn bad_strided_splits_say_what_would_be_valid() {
        assert_eq!(Team::strided(0, 0, 2, 4, 0), Err(TeamSplitError::ZeroStride { start: 0, size: 2 }));
        assert_eq!(Team::strided(3, 1, 0, 4, 0), Err(TeamSplitError::Empty { start: 3, stride: 1 }));
        let past = Team::strided(1, 2, 3, 4, 0).unwrap_err();
        assert_eq!(past, TeamSplitError::PastTheRun { start: 1, stride: 2, size: 3, last: Some(5), world: 4 });
        assert!(past.to_string().ends_with("expected start + (size - 1) * stride < 4"), "{past}");
        let overflow = Team::strided(1, usize::MAX, 3, 4, 0).unwrap_err();
        assert!(matches!(overflow, TeamSplitError::PastTheRun { last: None, .. }), "{overflow:?}");
        assert!(overflow.to_string().contains("reaches rank beyond usize"), "{overflow}");
    }

    #[test]
    fn a_2d_split_has_nvshmem_s_rows_and_columns() {
        // 7 ranks in rows of 3: [0 1 2] [3 4 5] [6]; columns [0 3 6] [1 4] [2 5].
        let rows = [vec![0, 1, 2], vec![3, 4, 5], vec![6]];
        let columns = [vec![0, 3, 6], vec![1, 4], vec![2, 5]];
        for caller in 0..7 {
            let (x, y) = Team::split_2d(3, 7, caller).unwrap();
            assert_eq!(seen(Some(x)), Some((caller % 3, rows[caller / 3].clone())), "caller {caller}");
            assert_eq!(seen(Some(y)), Some((caller / 3, columns[caller % 3].clone())), "caller {caller}");
        }
        // Rows longer than the run are the run, as in NVSHMEM.
        let (x, y) = Team::split_2d(9, 4, 2).unwrap();
        assert_eq!((seen(Some(x)), seen(Some(y))), (Some((2, vec![0, 1, 2, 3])), Some((0, vec![2]))));
        assert_eq!(Team::split_2d(0, 4, 2), Err(TeamSplitError::ZeroXSize { world: 4 }));
    }

    #[test]
    fn global_maps_team_ranks_and_names_one_past_the_team() {
        let team = Team::of(vec![2, 5, 9], 5).unwrap();
        assert_eq!((team.rank(), team.size()), (1, 3));
        assert_eq!((team.global(0), team.global(2)), (Ok(2), Ok(9)));
        let error = team.global(3).unwrap_err();
        assert_eq!(
            error.to_string(),
            "team rank 3 of a team of 3 members (ranks [2, 5, 9]): expected a team rank in 0..3"
        );
        assert!(team.contains(9) && !team.contains(3));
        assert_eq!(Team::of(vec![2, 5, 9], 4), None);
        assert_eq!(Team::of(vec![9, 2, 5, 2], 5), Some(team));
        assert_eq!(Team::world(3, 2).unwrap().members(), &[0, 1, 2]);
        assert_eq!(Team::world(3, 3), Err(TeamSplitError::CallerOutside { caller: 3, world: 3 }));
        assert_eq!(Team::split_2d(2, 3, 3), Err(TeamSplitError::CallerOutside { caller: 3, world: 3 }));
    }

    #[test]
    fn long_rank_lists_are_shortened_in_messages() {
        let team = Team::world(64, 0).unwrap();
        assert_eq!(team.to_string(), "the team of ranks [0, 1, ..., 63]");
    }
}

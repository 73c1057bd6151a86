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
//! call and drops it at the end.
//!
//! A runtime that checks these rules (the mock runtime's race detector) reports two accesses to
//! overlapping bytes that they leave unordered, at least one a write, as a [`Race`], and a read of
//! bytes nobody wrote as [`Uninitialised`], naming both sides and the kernel's source lines.

use std::fmt;
use std::ops::Range;
use std::panic::Location;
use std::task::{Context, Poll};

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

/// A multicast object: symmetric buffer `buffer` spanned on every member (every rank of the run), so
/// that one operation through the switch reaches every member's copy (NVLS's `multimem` address).
/// `tl.multicast` makes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Multicast {
    /// The buffer it spans, declared on every member.
    pub buffer: Symmetric,
    /// How many ranks it spans: ranks `0..members`.
    pub members: usize,
}

impl fmt::Display for Multicast {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the multicast object of {} over {} ranks", self.buffer, self.members)
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
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} lane {} ({} at {})", self.pe, self.lane, self.op, self.site)
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
}

impl fmt::Display for Race {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "data race on {}'s `{}` bytes {}..{}: {} and {} are not ordered by any signal, wait, fence, barrier or message (a put is ordered before a later signal only by tl.fence or tl.quiet; tl.put_signal orders itself)",
            self.owner, self.buffer, self.bytes.start, self.bytes.end, self.first, self.second
        )
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
    /// Waits until this PE's `signal` holds at least `value`.
    fn poll_wait(&mut self, signal: usize, value: u64, cx: &mut Context<'_>) -> Poll<Result<(), KernelError>>;
    /// Sets this PE's `signal` back to 0.
    fn reset(&mut self, signal: usize) -> Result<(), KernelError>;
    /// Orders this lane's earlier puts before its later puts and signals.
    fn fence(&mut self);
    /// Waits until every put of this lane has landed.
    fn poll_quiet(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), KernelError>>;
    /// Declares `buffer` on this PE and spans it with a multicast object over every rank.
    fn multicast(&mut self, buffer: &Symmetric) -> Result<Multicast, KernelError>;
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
}

/// The most signals a PE has: signals are numbered `0..MAX_SIGNALS`.
pub const MAX_SIGNALS: usize = 1 << 16;

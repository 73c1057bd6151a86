//! The `tl` API: what a kernel can do on the PE it runs on.
//!
//! A kernel receives `tl: &Tl`. The methods that can wait for another PE (`send`, `recv`, `recv_like`,
//! `barrier`, and of symmetric memory `get`, `wait_until` and `quiet`) are `async` (or return a future);
//! every other method returns at once, with a `Result` where it can fail.
//! `#[ccl_kernel]` adds what each call needs, so the author writes plain calls and the expansion reads:
//!
//! ```text
//! let n = tl.size();                      // never waits, never fails: left as written
//! let x = tl.load(Input)?;                // never waits, can fail: its error is propagated
//! let y = tl.recv(W, n, F32).await?;      // can wait: awaited, its error propagated
//! ```
//!
//! The macro keeps the list of waiting methods; a test here checks it against this file, so the two
//! cannot drift apart.
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

use std::cell::Cell;
use std::future::{Future, poll_fn};
use std::ptr::NonNull;
use std::task::{Context, Poll};

use serde::{Deserialize, Serialize};

use crate::kernel::symmetric::{Group, OneSided, Put, Site, Symmetric};
use crate::kernel::{KernelError, Op};
use crate::machine::{Direction, PeId};
use crate::tile::{Dtype, ReduceOp, Tile, TileError};

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

/// Work that takes a PE's time: the timing model charges it at the PE's compute or memory rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// An elementwise reduction of `elements` elements of `dtype`.
    Reduce {
        /// Elements combined.
        elements: usize,
        /// Their dtype.
        dtype: Dtype,
    },
    /// Moving `bytes` between a buffer and the PE (a load or a store).
    Memory {
        /// Bytes moved.
        bytes: usize,
    },
}

/// What a runtime provides to the kernel of the PE it is polling.
///
/// `poll_*` methods follow [`std::future::Future::poll`]: `Pending` means "wake me when the queue or
/// barrier may have changed", and the runtime must poll again later.
pub trait Backend {
    /// Sends `tile` to the neighbour in `direction` on `channel`: takes a credit of that channel's
    /// queue, or waits while there is none.
    fn poll_send(
        &mut self,
        direction: Direction,
        channel: usize,
        tile: &Tile,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), KernelError>>;
    /// Receives the oldest message from `direction` on `channel`, checked against `len` and `dtype`,
    /// and returns its credit to the sender; waits while the queue is empty.
    fn poll_recv(
        &mut self,
        direction: Direction,
        channel: usize,
        len: usize,
        dtype: Dtype,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Tile, KernelError>>;
    /// Waits until every lane of every participant in the caller's `group` has reached the barrier.
    fn poll_barrier(&mut self, group: Group, cx: &mut Context<'_>) -> Poll<Result<(), KernelError>>;
    /// The backend's symmetric memory, if it has one: `None` (the default) makes every one-sided
    /// operation fail with [`KernelError::Unsupported`].
    fn one_sided(&mut self) -> Option<&mut dyn OneSided> {
        None
    }
    /// Whether the PE's neighbour table has `direction`.
    fn has(&self, direction: Direction) -> bool;
    /// The current contents of `buffer` (sharing its storage).
    fn load(&mut self, buffer: Buffer) -> Result<Tile, KernelError>;
    /// Replaces `buffer` with `tile` (`offset: None`) or writes `tile` into it at `offset`.
    fn store(&mut self, buffer: Buffer, offset: Option<usize>, tile: &Tile) -> Result<(), KernelError>;
    /// Accounts for `work` done by the PE.
    fn charge(&mut self, work: Work);
    /// Moves the PE to sub-generation `phase` (1..=3) of its call: see [`Tl::phase`].
    fn set_phase(&mut self, phase: u8);
    /// Records a fact about this PE's run for the report: see [`Tl::note`].
    fn note(&mut self, key: &str, value: String);
    /// Loop iterations the PE's kernel may still make. [`enter`] lends them to the poll, so that the
    /// check `#[ccl_kernel]` puts at the top of every loop body is a thread-local decrement, and gives
    /// back what is left with [`Backend::set_loops_left`]. A backend that keeps no budget keeps this
    /// default.
    fn loops_left(&self) -> u64 {
        u64::MAX
    }
    /// Takes back what the kernel left of [`Backend::loops_left`] after a poll (or when it ran out).
    fn set_loops_left(&mut self, _left: u64) {}
    /// Called when the kernel has used up [`Backend::loops_left`] and starts another loop iteration.
    ///
    /// # Errors
    /// [`KernelError::Watchdog`] to stop the kernel; `Ok` lends it `loops_left()` more. A backend that
    /// keeps no budget keeps this default, which never fails.
    fn out_of_loops(&mut self) -> Result<(), KernelError> {
        Ok(())
    }
}

/// Sub-generations per call: a call of generation `k` owns the message generations `3k-2`, `3k-1`
/// and `3k`, one per phase, so the phases of one call and consecutive calls never share a generation.
pub const PHASES_PER_CALL: u64 = 3;

/// The largest call generation whose phases still have message generations that fit a `u64`.
pub const MAX_GENERATION: u64 = u64::MAX / PHASES_PER_CALL;

/// The message generation of `phase` (1..=3) of the call of generation `call` (calls count from 1, up
/// to [`MAX_GENERATION`]).
///
/// # Examples
/// ```
/// use kernbench_core::tl::message_generation;
/// assert_eq!(message_generation(1, 1), 1);
/// assert_eq!(message_generation(2, 3), 6);
/// ```
pub const fn message_generation(call: u64, phase: u8) -> u64 {
    PHASES_PER_CALL * call.saturating_sub(1) + phase as u64
}

thread_local! {
    static CURRENT: Cell<Option<NonNull<dyn Backend + 'static>>> = const { Cell::new(None) };
    /// What the kernel being polled on this thread may still make of its loop iterations: lent by its
    /// backend for the poll ([`Backend::loops_left`]).
    static LOOPS_LEFT: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// Runs `f` (a poll of a PE's kernel) with `backend` serving every `tl` operation made in it.
///
/// Generic rather than taking `&mut dyn Backend`, so that lending the loop budget at each poll costs no
/// virtual calls.
pub fn enter<B: Backend, R>(backend: &mut B, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<NonNull<dyn Backend + 'static>>, u64);
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.set(self.0);
            LOOPS_LEFT.set(self.1);
        }
    }
    let lent = backend.loops_left();
    let ptr: NonNull<dyn Backend + '_> = NonNull::from(&mut *backend as &mut dyn Backend);
    // SAFETY: only the lifetime is erased. The pointer is reachable through CURRENT only while this
    // call holds the unique borrow of `backend`: `Reset` restores the previous value when `f` returns
    // or unwinds, before `backend` is used again below.
    let ptr: NonNull<dyn Backend + 'static> = unsafe { std::mem::transmute(ptr) };
    let (result, left) = {
        let _reset = Reset(CURRENT.replace(Some(ptr)), LOOPS_LEFT.replace(lent));
        let result = f();
        (result, LOOPS_LEFT.get())
    };
    backend.set_loops_left(left);
    result
}

/// Whether a kernel is being polled on this thread, outside its `tl` operations: a panic raised now is
/// the kernel's, which its runtime catches and reports.
pub fn polling_kernel() -> bool {
    CURRENT.get().is_some()
}

/// Loop iterations the kernel being polled on this thread may still make (for a backend that reports
/// how far a kernel got while its own count is lent out); `u64::MAX` outside a poll.
pub fn loops_left() -> u64 {
    LOOPS_LEFT.get()
}

/// Counts one loop iteration of the kernel being polled on this thread: what `#[ccl_kernel]` inserts at
/// the top of every loop body. It runs once per iteration of every kernel loop, so its usual path is
/// one thread-local decrement.
///
/// # Errors
/// The backend's [`KernelError::Watchdog`] once the PE's loop budget is used up.
#[doc(hidden)]
#[inline]
pub fn count_loop() -> Result<(), KernelError> {
    let counted = LOOPS_LEFT.with(|left| match left.get() {
        0 => false,
        n => {
            left.set(n - 1);
            true
        }
    });
    if counted { Ok(()) } else { out_of_loops() }
}

/// The kernel used up the loop iterations lent to it: asks the backend whether it may go on.
#[cold]
fn out_of_loops() -> Result<(), KernelError> {
    // Outside a runtime's poll there is nothing to count against.
    if CURRENT.get().is_none() {
        LOOPS_LEFT.set(u64::MAX);
        return Ok(());
    }
    with(|b| {
        b.set_loops_left(0);
        b.out_of_loops()?;
        LOOPS_LEFT.set(b.loops_left());
        Ok(())
    })
}

/// Runs `f` with the backend lent by the enclosing [`enter`].
///
/// # Panics
/// When no runtime is polling a kernel on this thread (a `tl` future polled by hand), or when called
/// from inside `f` itself.
fn with<R>(f: impl FnOnce(&mut dyn Backend) -> R) -> R {
    struct Restore(NonNull<dyn Backend + 'static>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.set(Some(self.0));
        }
    }
    let ptr = CURRENT
        .take()
        .expect("a tl operation was polled outside a runtime: kernels run only inside a backend's `enter`");
    let restore = Restore(ptr);
    // SAFETY: `enter` holds the unique borrow behind `ptr` for as long as it is in CURRENT. Taking it
    // out of CURRENT until `restore` drops means no other `with` can make a second reference.
    f(unsafe { &mut *restore.0.as_ptr() })
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
    /// The call's generation (1, 2, ... per communicator); messages carry
    /// [`message_generation`]`(generation, phase)`.
    pub generation: u64,
    /// Which of the PE's lanes this is: 0..`lanes`.
    pub lane: usize,
    /// How many lanes the kernel runs as on this PE ([`crate::Launch::lanes`]).
    pub lanes: usize,
    /// The slots of each queue: how many messages a lane may send on a channel before its receiver
    /// takes one.
    pub queue_depth: usize,
}

/// The handle a kernel uses to talk to its PE, its neighbours and its buffers.
///
/// The methods that wait (`send`, `recv`, `recv_like`, `barrier`, `get`, `wait_until`, `quiet`) are
/// `async`; the others return at once. One-sided operations on symmetric memory are described in
/// [`crate::kernel::symmetric`].
/// In a `#[ccl_kernel]` the macro adds `.await` where a call waits and `?` where it can fail, so kernels
/// read like Triton: `let x = tl.recv(W, n, F32);`.
#[derive(Debug)]
pub struct Tl {
    ctx: TlContext,
}

impl Tl {
    /// The handle for one PE's run; called by runtimes.
    pub fn new(ctx: TlContext) -> Tl {
        Tl { ctx }
    }

    /// The fixed facts of this run.
    pub fn context(&self) -> &TlContext {
        &self.ctx
    }

    /// The PE's index along `axis`: 0 = PE in its cube, 1 = cube in its SIP, 2 = SIP. Axes count from
    /// the innermost, as Triton's `program_id` does; [`Tl::rank`] is the PE's place among the
    /// participants.
    ///
    /// # Errors
    /// [`KernelError::BadAxis`] for an axis above 2.
    pub fn program_id(&self, axis: usize) -> Result<usize, KernelError> {
        let pe = self.ctx.pe;
        let outermost_first = [pe.sip, pe.cube, pe.pe];
        Ok(outermost_first[outermost_index(pe, axis)?] as usize)
    }

    /// The extent of `axis`: PEs per cube, cubes per SIP, or SIPs.
    ///
    /// # Errors
    /// [`KernelError::BadAxis`] for an axis above 2.
    pub fn num_programs(&self, axis: usize) -> Result<usize, KernelError> {
        Ok(self.ctx.extents[outermost_index(self.ctx.pe, axis)?])
    }

    /// The PE this kernel runs on.
    pub fn pe(&self) -> PeId {
        self.ctx.pe
    }

    /// The PE's position among the topology's participants.
    pub fn rank(&self) -> usize {
        self.ctx.rank
    }

    /// The number of participants in the topology.
    pub fn size(&self) -> usize {
        self.ctx.size
    }

    /// The reduction operator of this call.
    pub fn op(&self) -> ReduceOp {
        self.ctx.op
    }

    /// The root rank of a rooted collective.
    pub fn root(&self) -> usize {
        self.ctx.root
    }

    /// Which of its PE's lanes this coroutine is, from 0. A kernel runs as [`Tl::lanes`] concurrent
    /// lanes per PE (NCCL's channels, MSCCL's thread blocks); by default a lane sends and receives on
    /// the channel of its own index.
    pub fn lane(&self) -> usize {
        self.ctx.lane
    }

    /// How many lanes the kernel runs as on this PE.
    pub fn lanes(&self) -> usize {
        self.ctx.lanes
    }

    /// The slots of each queue (the system's `ipcq_depth`): a lane can send this many messages on a
    /// channel before its receiver takes one, so a kernel that sends `k` messages ahead of its receives
    /// needs `k` at most this.
    pub fn queue_depth(&self) -> usize {
        self.ctx.queue_depth
    }

    /// Moves this PE to `phase` (1, 2 or 3) of its call. Messages carry their sender's phase and a
    /// receiver accepts only its own, so the phases of a multi-phase collective (gather, exchange,
    /// scatter) cannot mix even where they share a queue. Every PE starts in phase 1.
    ///
    /// # Errors
    /// [`KernelError::BadPhase`] for a phase outside 1..=3.
    pub fn phase(&self, phase: u8) -> Result<(), KernelError> {
        if !(1..=PHASES_PER_CALL as u8).contains(&phase) {
            return Err(KernelError::BadPhase { pe: self.ctx.pe, phase });
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

    /// Sends `tile` to the neighbour in `direction` on this lane's channel (its index), waiting for a
    /// credit if the queue is full. The tile is not copied. Returns once the message is queued: its
    /// transfer takes the link's time, not the PE's.
    ///
    /// # Errors
    /// As [`Tl::send_on`].
    pub async fn send(&self, direction: Direction, tile: &Tile) -> Result<(), KernelError> {
        // Polled here rather than through `send_on`: one future less on the hottest path.
        let channel = self.ctx.lane;
        poll_fn(|cx| with(|b| b.poll_send(direction, channel, tile, cx))).await
    }

    /// Sends `tile` to the neighbour in `direction` on `channel`: each (direction, channel) has its own
    /// queue and credits, and the first lane of the PE to send on it owns it for the run.
    ///
    /// # Errors
    /// [`KernelError::NoSuchDirection`] when the PE has no such neighbour, [`KernelError::NoSuchChannel`]
    /// for a channel the run does not have, [`KernelError::ChannelTaken`] when another lane of the PE
    /// owns the channel.
    pub async fn send_on(&self, direction: Direction, channel: usize, tile: &Tile) -> Result<(), KernelError> {
        poll_fn(|cx| with(|b| b.poll_send(direction, channel, tile, cx))).await
    }

    /// Receives the oldest message from `direction` on this lane's channel (its index), which must hold
    /// `len` elements of `dtype`.
    ///
    /// # Errors
    /// As [`Tl::recv_on`].
    pub async fn recv(&self, direction: Direction, len: usize, dtype: Dtype) -> Result<Tile, KernelError> {
        let channel = self.ctx.lane;
        poll_fn(|cx| with(|b| b.poll_recv(direction, channel, len, dtype, cx))).await
    }

    /// Receives the oldest message from `direction` on `channel`; the first lane of the PE to receive
    /// on it owns it for the run.
    ///
    /// # Errors
    /// [`KernelError::NoSuchDirection`], [`KernelError::NoSuchChannel`], [`KernelError::ChannelTaken`],
    /// [`KernelError::RecvMismatch`] or [`KernelError::GenerationMismatch`].
    pub async fn recv_on(
        &self,
        direction: Direction,
        channel: usize,
        len: usize,
        dtype: Dtype,
    ) -> Result<Tile, KernelError> {
        poll_fn(|cx| with(|b| b.poll_recv(direction, channel, len, dtype, cx))).await
    }

    /// Receives the oldest message from `direction`, which must hold a tile of `like`'s dtype and
    /// length: the usual partner of a send of a tile shaped like `like`.
    ///
    /// # Errors
    /// As [`Tl::recv`].
    pub async fn recv_like(&self, direction: Direction, like: &Tile) -> Result<Tile, KernelError> {
        self.recv(direction, like.len(), like.dtype()).await
    }

    /// Waits until every lane of every participant has reached the barrier. Under symmetric memory it
    /// also completes the lane's puts first, as `tl.quiet()` does (NVSHMEM's `barrier_all`).
    pub async fn barrier(&self) -> Result<(), KernelError> {
        poll_fn(|cx| with(|b| b.poll_barrier(Group::All, cx))).await
    }

    /// Waits until every lane of every participant in this PE's `group` (all, its SIP, its cube) has
    /// reached the barrier; completes the lane's puts first.
    pub async fn barrier_in(&self, group: Group) -> Result<(), KernelError> {
        poll_fn(|cx| with(|b| b.poll_barrier(group, cx))).await
    }

    /// Declares the symmetric buffer `name` of `len` elements of `dtype` on this PE and returns its
    /// handle; every PE that takes part declares it with the same shape (a size derived from the input,
    /// `tl.buffer_len(Input)`, is the same everywhere). A peer may put into it before this PE declares
    /// it: the buffer exists from the start of the run, as registered memory does.
    ///
    /// # Errors
    /// [`KernelError::SymmetricMismatch`] when it exists with another shape.
    pub fn symmetric(&self, name: &'static str, dtype: Dtype, len: usize) -> Result<Symmetric, KernelError> {
        let buffer = Symmetric { name, dtype, len };
        self.one_sided(Op::Declare, |b| b.declare(&buffer))?;
        Ok(buffer)
    }

    /// Reads `len` elements of this PE's copy of `buffer` from `offset`, charged as a load.
    ///
    /// # Errors
    /// [`KernelError::BadSymmetricAccess`] past the end; [`KernelError::Race`] or
    /// [`KernelError::Uninitialised`] when the race detector finds the read unordered with a write, or
    /// of bytes nobody wrote.
    #[track_caller]
    pub fn read(&self, buffer: &Symmetric, offset: usize, len: usize) -> Result<Tile, KernelError> {
        let site = Site(std::panic::Location::caller());
        let tile = self.one_sided(Op::Read, |b| b.read(buffer, offset, len, site))?;
        with(|b| b.charge(Work::Memory { bytes: tile.bytes() }));
        Ok(tile)
    }

    /// Writes `tile` into this PE's copy of `buffer` at `offset`, charged as a store.
    ///
    /// # Errors
    /// As [`Tl::read`]; a tile of another dtype is [`KernelError::BadSymmetricAccess`].
    #[track_caller]
    pub fn write(&self, buffer: &Symmetric, offset: usize, tile: &Tile) -> Result<(), KernelError> {
        let site = Site(std::panic::Location::caller());
        self.one_sided(Op::Write, |b| b.write(buffer, offset, tile, site))?;
        with(|b| b.charge(Work::Memory { bytes: tile.bytes() }));
        Ok(())
    }

    /// Writes `tile` into rank `peer`'s copy of `buffer` at `offset`, without waiting: the bytes take
    /// the route's time as a send of them would. Nothing tells the peer they have landed: follow with
    /// `tl.fence()` and `tl.signal`, or use [`Tl::put_signal`].
    ///
    /// # Errors
    /// [`KernelError::NotAPeer`] for a rank the install plan does not reach,
    /// [`KernelError::BadSymmetricAccess`] for a range past the end or another dtype.
    #[track_caller]
    pub fn put(&self, peer: usize, buffer: &Symmetric, offset: usize, tile: &Tile) -> Result<(), KernelError> {
        let site = Site(std::panic::Location::caller());
        self.one_sided(Op::Put, |b| b.put(Put { peer, buffer, offset, tile, signal: None, site }))
    }

    /// [`Tl::put`], then raises the peer's `signal` by `add` once the data has landed: a waiter that
    /// sees the raise sees the data.
    ///
    /// # Errors
    /// As [`Tl::put`], and [`KernelError::NoSuchSignal`].
    #[track_caller]
    pub fn put_signal(
        &self,
        peer: usize,
        buffer: &Symmetric,
        offset: usize,
        tile: &Tile,
        signal: usize,
        add: u64,
    ) -> Result<(), KernelError> {
        let site = Site(std::panic::Location::caller());
        self.one_sided(Op::PutSignal, |b| b.put(Put { peer, buffer, offset, tile, signal: Some((signal, add)), site }))
    }

    /// Reads `len` elements of rank `peer`'s copy of `buffer` from `offset`: a request crosses to the
    /// peer and the data comes back.
    ///
    /// # Errors
    /// As [`Tl::put`], and as [`Tl::read`] for what the peer holds.
    #[track_caller]
    pub fn get(
        &self,
        peer: usize,
        buffer: &Symmetric,
        offset: usize,
        len: usize,
    ) -> impl Future<Output = Result<Tile, KernelError>> + '_ {
        let (site, buffer) = (Site(std::panic::Location::caller()), *buffer);
        poll_fn(move |cx| {
            with(|b| match b.one_sided() {
                Some(one_sided) => one_sided.poll_get(peer, &buffer, offset, len, site, cx),
                None => Poll::Ready(Err(KernelError::Unsupported { pe: self.ctx.pe, op: Op::Get })),
            })
        })
    }

    /// Raises rank `peer`'s `signal` by `add`; `peer` may be this PE's own rank, a raise between its
    /// lanes that lands at once. Puts of this lane before it are ordered before it only through
    /// `tl.fence()` or `tl.quiet()`.
    ///
    /// # Errors
    /// [`KernelError::NotAPeer`], [`KernelError::NoSuchSignal`].
    pub fn signal(&self, peer: usize, signal: usize, add: u64) -> Result<(), KernelError> {
        self.one_sided(Op::Signal, |b| b.signal(peer, signal, add))
    }

    /// Waits until this PE's `signal` holds at least `value`.
    ///
    /// # Errors
    /// [`KernelError::NoSuchSignal`].
    pub async fn wait_until(&self, signal: usize, value: u64) -> Result<(), KernelError> {
        poll_fn(|cx| {
            with(|b| match b.one_sided() {
                Some(one_sided) => one_sided.poll_wait(signal, value, cx),
                None => Poll::Ready(Err(KernelError::Unsupported { pe: self.ctx.pe, op: Op::WaitSignal })),
            })
        })
        .await
    }

    /// Sets this PE's `signal` back to 0, for the next use.
    ///
    /// # Errors
    /// [`KernelError::NoSuchSignal`].
    pub fn reset_signal(&self, signal: usize) -> Result<(), KernelError> {
        self.one_sided(Op::ResetSignal, |b| b.reset(signal))
    }

    /// Orders this lane's puts so far before its later puts and signals (NVSHMEM's `fence`).
    pub fn fence(&self) {
        with(|b| {
            if let Some(one_sided) = b.one_sided() {
                one_sided.fence();
            }
        });
    }

    /// Waits until every put of this lane has landed (NVSHMEM's `quiet`).
    pub async fn quiet(&self) -> Result<(), KernelError> {
        poll_fn(|cx| {
            with(|b| match b.one_sided() {
                Some(one_sided) => one_sided.poll_quiet(cx),
                None => Poll::Ready(Err(KernelError::Unsupported { pe: self.ctx.pe, op: Op::Quiet })),
            })
        })
        .await
    }

    /// Runs `f` on the backend's symmetric memory, or fails `op` when it has none.
    fn one_sided<R>(
        &self,
        op: Op,
        f: impl FnOnce(&mut dyn OneSided) -> Result<R, KernelError>,
    ) -> Result<R, KernelError> {
        with(|b| match b.one_sided() {
            Some(one_sided) => f(one_sided),
            None => Err(KernelError::Unsupported { pe: self.ctx.pe, op }),
        })
    }

    /// The contents of one of the PE's buffers.
    pub fn load(&self, buffer: Buffer) -> Result<Tile, KernelError> {
        with(|b| {
            let tile = b.load(buffer)?;
            b.charge(Work::Memory { bytes: tile.bytes() });
            Ok(tile)
        })
    }

    /// The length in elements of one of the PE's buffers (scratch: what the kernel last stored there).
    pub fn buffer_len(&self, buffer: Buffer) -> Result<usize, KernelError> {
        with(|b| b.load(buffer)).map(|tile| tile.len())
    }

    /// The `len` elements of one of the PE's buffers from `start` (sharing its storage): what a lane
    /// working on a slice reads, charged for those bytes only.
    ///
    /// # Errors
    /// [`KernelError::Tile`] when the range reaches past the buffer's end.
    pub fn load_slice(&self, buffer: Buffer, start: usize, len: usize) -> Result<Tile, KernelError> {
        let whole = with(|b| b.load(buffer))?;
        let slice = self.slice(&whole, start, len)?;
        with(|b| b.charge(Work::Memory { bytes: slice.bytes() }));
        Ok(slice)
    }

    /// Replaces the contents of one of the PE's buffers with `tile`.
    ///
    /// # Errors
    /// [`KernelError::Tile`] when `tile` does not match the buffer's dtype and length.
    pub fn store(&self, buffer: Buffer, tile: &Tile) -> Result<(), KernelError> {
        with(|b| {
            b.store(buffer, None, tile)?;
            b.charge(Work::Memory { bytes: tile.bytes() });
            Ok(())
        })
    }

    /// Writes `tile` into one of the PE's buffers at element `offset`.
    ///
    /// # Errors
    /// [`KernelError::Tile`] when `tile` does not fit at `offset` or has another dtype.
    pub fn store_at(&self, buffer: Buffer, offset: usize, tile: &Tile) -> Result<(), KernelError> {
        with(|b| {
            b.store(buffer, Some(offset), tile)?;
            b.charge(Work::Memory { bytes: tile.bytes() });
            Ok(())
        })
    }

    /// Writes `parts` one after the other into `buffer` from element `offset`, as [`Tl::store_at`] of
    /// their concatenation would, without making it (a result held in pieces is not copied twice), and
    /// charged the same: one store of all their bytes.
    ///
    /// # Errors
    /// As [`Tl::store_at`], for the first part that does not fit.
    pub fn store_parts_at(&self, buffer: Buffer, offset: usize, parts: &[Tile]) -> Result<(), KernelError> {
        let whole = offset == 0 && parts.iter().map(Tile::len).sum::<usize>() == self.buffer_len(buffer)?;
        if whole && !parts.is_empty() {
            // The whole buffer: one new buffer of the parts, where writing them into the old one would
            // first copy what they are about to replace.
            return self.store(buffer, &self.concat(parts)?);
        }
        with(|b| {
            let mut at = offset;
            for part in parts {
                b.store(buffer, Some(at), part)?;
                at += part.len();
            }
            b.charge(Work::Memory { bytes: parts.iter().map(Tile::bytes).sum() });
            Ok(())
        })
    }

    /// Combines `other` into `acc` elementwise under `op` (`Avg` sums; see [`Tl::finish`]).
    ///
    /// # Errors
    /// [`KernelError::Tile`] on a dtype or length mismatch.
    pub fn reduce(&self, acc: &mut Tile, other: &Tile, op: ReduceOp) -> Result<(), KernelError> {
        acc.reduce_in_place(other, op).map_err(|source| self.tile_error(Op::Reduce, source))?;
        with(|b| b.charge(Work::Reduce { elements: other.len(), dtype: other.dtype() }));
        Ok(())
    }

    /// Ends a reduction of `contributions` inputs: divides by the count for `Avg`, nothing otherwise.
    ///
    /// # Errors
    /// [`KernelError::Tile`] for an `Avg` of 0 contributions.
    pub fn finish(&self, acc: &mut Tile, op: ReduceOp, contributions: usize) -> Result<(), KernelError> {
        acc.finish_reduction(op, contributions).map_err(|source| self.tile_error(Op::Finish, source))?;
        if op == ReduceOp::Avg {
            with(|b| b.charge(Work::Reduce { elements: acc.len(), dtype: acc.dtype() }));
        }
        Ok(())
    }

    /// [`Tl::finish`] of a result held in `parts`: each part divided for `Avg`, charged as one finish of
    /// all their elements.
    ///
    /// # Errors
    /// As [`Tl::finish`].
    pub fn finish_parts(&self, parts: &mut [Tile], op: ReduceOp, contributions: usize) -> Result<(), KernelError> {
        for part in parts.iter_mut() {
            part.finish_reduction(op, contributions).map_err(|source| self.tile_error(Op::Finish, source))?;
        }
        if op == ReduceOp::Avg {
            if let Some(first) = parts.first() {
                let elements = parts.iter().map(Tile::len).sum();
                with(|b| b.charge(Work::Reduce { elements, dtype: first.dtype() }));
            }
        }
        Ok(())
    }

    /// Chunk `index` of `count` near-equal chunks of `tile`, without copying.
    ///
    /// # Errors
    /// [`KernelError::Tile`] when `index >= count`.
    pub fn chunk(&self, tile: &Tile, index: usize, count: usize) -> Result<Tile, KernelError> {
        tile.chunk(index, count).map_err(|source| self.tile_error(Op::Chunk, source))
    }

    /// The `len` elements of `tile` from `start`, without copying.
    ///
    /// # Errors
    /// [`KernelError::Tile`] when the range reaches past the end.
    pub fn slice(&self, tile: &Tile, start: usize, len: usize) -> Result<Tile, KernelError> {
        let end = start.checked_add(len).ok_or(TileError::OutOfRange { start, end: usize::MAX, len: tile.len() });
        end.and_then(|end| tile.slice(start..end)).map_err(|source| self.tile_error(Op::Slice, source))
    }

    /// The tiles one after the other, in a new tile.
    ///
    /// # Errors
    /// [`KernelError::Tile`] for no tiles or mixed dtypes, [`KernelError::OutOfMemory`] when the result
    /// is larger than [`Tile::MAX_BYTES`] or cannot be allocated.
    pub fn concat(&self, tiles: &[Tile]) -> Result<Tile, KernelError> {
        Tile::concat(tiles).map_err(|source| self.tile_error(Op::Concat, source))
    }

    /// A new tile of `len` zeros of `dtype`.
    ///
    /// # Errors
    /// [`KernelError::OutOfMemory`] when the tile is larger than [`Tile::MAX_BYTES`] or cannot be
    /// allocated.
    pub fn zeros(&self, dtype: Dtype, len: usize) -> Result<Tile, KernelError> {
        Tile::try_zeros(dtype, len).map_err(|source| self.tile_error(Op::Zeros, source))
    }

    /// `source` as the error of `op` on this PE: an allocation refused is [`KernelError::OutOfMemory`],
    /// anything else [`KernelError::Tile`].
    fn tile_error(&self, op: Op, source: TileError) -> KernelError {
        let pe = self.ctx.pe;
        match source {
            TileError::TooLarge { .. } | TileError::OutOfMemory { .. } => KernelError::OutOfMemory { pe, op, source },
            source => KernelError::Tile { pe, op, source },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// `(name, is async, returns Result)` of every `pub fn` taking `&self` in `impl Tl`, read from this
    /// file's source.
    fn tl_methods() -> Vec<(String, bool, bool)> {
        let source = include_str!("tl.rs");
        let start = source.find("impl Tl {").expect("tl.rs has `impl Tl`");
        let body = &source[start..];
        let end = body.find("\n}\n").expect("`impl Tl` ends");
        let mut methods = Vec::new();
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

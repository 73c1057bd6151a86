//! How a runtime serves a kernel: the [`Backend`] it implements, the [`Work`] it charges, and the
//! thread-local loan ([`enter`]) through which `tl` operations reach it while it polls a kernel. Uses
//! the rest of [`tl`](super) and [`symmetric`](crate::kernel::symmetric) memory's [`OneSided`].

use std::cell::Cell;
use std::ptr::NonNull;
use std::task::{Context, Poll};

use super::Buffer;
use crate::kernel::KernelError;
use crate::kernel::symmetric::{Group, OneSided, Team};
use crate::machine::{Direction, PeId};
use crate::tile::{Dtype, Tile};

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
    /// Waits until every lane of every member of `team` has reached the barrier (the caller is a
    /// member: [`Tl::barrier_team`](super::Tl::barrier_team) checks). Members of another team, even
    /// one overlapping this, do not take part.
    fn poll_barrier_team(&mut self, team: &Team, cx: &mut Context<'_>) -> Poll<Result<(), KernelError>>;
    /// Where rank `rank` of the run runs: its PE and its node (the system's `nodes`; 0 in a system of
    /// one), or `None` past the run's ranks. Teams of a SIP or a node are computed from it. The
    /// default, for a runtime that does not know, is `None`: such teams then fail by name.
    fn placement(&self, rank: usize) -> Option<(PeId, u32)> {
        let _ = rank;
        None
    }
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
    /// Moves the PE to sub-generation `phase` (1..=3) of its call: see [`Tl::phase`](super::Tl::phase).
    fn set_phase(&mut self, phase: u8);
    /// Records a fact about this PE's run for the report: see [`Tl::note`](super::Tl::note).
    fn note(&mut self, key: &str, value: String);
    /// Remembers the `bytes` from `start` as what the polled lane reads first when it is next woken,
    /// for a runtime that asks the CPU for them before that poll: see
    /// [`prefetch_when_woken`](crate::kernel::hint::prefetch_when_woken). A hint: a backend may ignore
    /// it, as this default does.
    fn wake_hint(&mut self, start: *const u8, bytes: usize) {
        let _ = (start, bytes);
    }
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

// On the paths taken per poll and per operation they are written with `with(|cell| cell.set(..))`:
// `LocalKey::set` goes through the lazy-initialisation path, a dozen instructions more each time.
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
            CURRENT.with(|current| current.set(self.0));
            LOOPS_LEFT.with(|left| left.set(self.1));
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

/// [`Backend::wake_hint`] of the backend polling a kernel on this thread; nothing outside a poll.
#[inline]
pub(in crate::kernel) fn wake_hint(start: *const u8, bytes: usize) {
    if polling_kernel() {
        with(|backend| backend.wake_hint(start, bytes));
    }
}

/// Loop iterations the kernel being polled on this thread may still make (for a backend that reports
/// how far a kernel got while its own count is lent out); `u64::MAX` outside a poll.
pub fn loops_left() -> u64 {
    LOOPS_LEFT.get()
}

/// Lends the kernel being polled on this thread `loops` loop iterations from now, in place of what it
/// had left: a backend calls it when the kernel completes a step, so that its budget counts the
/// iterations since its last step rather than since it started.
#[doc(hidden)]
#[inline]
pub fn lend_loops(loops: u64) {
    LOOPS_LEFT.with(|left| left.set(loops));
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
#[inline]
pub(super) fn with<R>(f: impl FnOnce(&mut dyn Backend) -> R) -> R {
    struct Restore(NonNull<dyn Backend + 'static>);
    impl Drop for Restore {
        #[inline]
        fn drop(&mut self) {
            CURRENT.with(|current| current.set(Some(self.0)));
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

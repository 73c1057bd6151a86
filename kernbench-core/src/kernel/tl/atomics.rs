//! Atomics on symmetric memory and the waits that go with them: [`atomic`](crate::kernel::atomic)'s
//! operations, each with a memory order and a scope; waits on a signal or an element with a
//! comparison; windows that outlive a call; collective allocation.

use std::future::{Future, poll_fn};
use std::task::Poll;

use super::Tl;
use super::backend::with;
use crate::kernel::atomic::{AtomicOp, Cmp, MemoryOrder, Scope};
use crate::kernel::symmetric::{Allocation, Atomic, CallSite, Symmetric, ValueWait};
use crate::kernel::{KernelError, Op};
use crate::tile::Dtype;

impl Tl {
    /// Adds `value` to element `index` of rank `peer`'s copy of `buffer` (an `i32` or `i64` buffer),
    /// without waiting: it lands as a signal would, and `tl.quiet()` completes it as it does a put.
    /// `peer` may be this PE's own rank: its own copy is changed at once.
    ///
    /// # Errors
    /// [`KernelError::BadAtomic`] for an element past the end or a buffer of a float dtype;
    /// [`KernelError::NotAPeer`]; under the race detector, [`KernelError::Race`] when the element is
    /// also accessed, unordered, by a plain access or an atomic whose scope does not include this lane.
    #[track_caller]
    pub fn atomic_add(
        &self,
        peer: usize,
        buffer: &Symmetric,
        index: usize,
        value: i64,
        order: MemoryOrder,
        scope: Scope,
    ) -> Result<(), KernelError> {
        let site = CallSite(std::panic::Location::caller());
        let atomic = Atomic { peer, buffer, index, op: AtomicOp::Add(value), fetch: false, order, scope, site };
        self.one_sided(Op::AtomicAdd, |b| b.atomic(atomic))
    }

    /// Adds `value` to element `index` of rank `peer`'s copy of `buffer` and returns what it held
    /// before: a request crosses to the peer and the old value comes back.
    ///
    /// # Errors
    /// As [`Tl::atomic_add`].
    #[track_caller]
    pub fn atomic_fetch_add(
        &self,
        peer: usize,
        buffer: &Symmetric,
        index: usize,
        value: i64,
        order: MemoryOrder,
        scope: Scope,
    ) -> impl Future<Output = Result<i64, KernelError>> + '_ {
        self.fetch(peer, buffer, index, AtomicOp::Add(value), (order, scope))
    }

    /// Sets element `index` of rank `peer`'s copy of `buffer` to `new` if it holds `expected`, and
    /// returns what it held before (so it succeeded when that is `expected`).
    ///
    /// # Errors
    /// As [`Tl::atomic_add`].
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn atomic_compare_swap(
        &self,
        peer: usize,
        buffer: &Symmetric,
        index: usize,
        expected: i64,
        new: i64,
        order: MemoryOrder,
        scope: Scope,
    ) -> impl Future<Output = Result<i64, KernelError>> + '_ {
        self.fetch(peer, buffer, index, AtomicOp::CompareSwap { expected, new }, (order, scope))
    }

    /// Sets element `index` of rank `peer`'s copy of `buffer` to `value` and returns what it held.
    ///
    /// # Errors
    /// As [`Tl::atomic_add`].
    #[track_caller]
    pub fn atomic_swap(
        &self,
        peer: usize,
        buffer: &Symmetric,
        index: usize,
        value: i64,
        order: MemoryOrder,
        scope: Scope,
    ) -> impl Future<Output = Result<i64, KernelError>> + '_ {
        self.fetch(peer, buffer, index, AtomicOp::Swap(value), (order, scope))
    }

    /// Keeps the larger of element `index` of rank `peer`'s copy of `buffer` and `value`; returns
    /// what it held.
    ///
    /// # Errors
    /// As [`Tl::atomic_add`].
    #[track_caller]
    pub fn atomic_fetch_max(
        &self,
        peer: usize,
        buffer: &Symmetric,
        index: usize,
        value: i64,
        order: MemoryOrder,
        scope: Scope,
    ) -> impl Future<Output = Result<i64, KernelError>> + '_ {
        self.fetch(peer, buffer, index, AtomicOp::Max(value), (order, scope))
    }

    /// Keeps the smaller of element `index` of rank `peer`'s copy of `buffer` and `value`; returns
    /// what it held.
    ///
    /// # Errors
    /// As [`Tl::atomic_add`].
    #[track_caller]
    pub fn atomic_fetch_min(
        &self,
        peer: usize,
        buffer: &Symmetric,
        index: usize,
        value: i64,
        order: MemoryOrder,
        scope: Scope,
    ) -> impl Future<Output = Result<i64, KernelError>> + '_ {
        self.fetch(peer, buffer, index, AtomicOp::Min(value), (order, scope))
    }

    /// Waits until element `index` of this PE's copy of `buffer` (an `i32` or `i64` buffer) holds a
    /// value `v` with `v cmp operand`, and returns it: an atomic load at `scope`, repeated, that
    /// acquires what the writes it reads from released (NVSHMEM's `wait_until` on a symmetric
    /// variable). A window keeps its values across calls: a value an earlier call left can end the
    /// wait at once.
    ///
    /// # Errors
    /// As [`Tl::atomic_add`].
    #[track_caller]
    pub fn wait_value(
        &self,
        buffer: &Symmetric,
        index: usize,
        cmp: Cmp,
        operand: i64,
        scope: Scope,
    ) -> impl Future<Output = Result<i64, KernelError>> + '_ {
        let (site, buffer) = (CallSite(std::panic::Location::caller()), *buffer);
        poll_fn(move |cx| {
            let wait = ValueWait { buffer: &buffer, index, cmp, operand, scope, site };
            with(|b| match b.one_sided() {
                Some(one_sided) => one_sided.poll_wait_value(wait, cx),
                None => Poll::Ready(Err(KernelError::Unsupported { pe: self.pe, op: Op::WaitValue })),
            })
        })
    }

    /// Waits until this PE's `signal` holds a value `v` with `v cmp value`, and returns it
    /// (NVSHMEM's `signal_wait_until`); [`Tl::wait_until`] is `cmp` [`Cmp::Ge`].
    ///
    /// # Errors
    /// [`KernelError::NoSuchSignal`].
    pub fn signal_wait_until(
        &self,
        signal: usize,
        cmp: Cmp,
        value: u64,
    ) -> impl Future<Output = Result<u64, KernelError>> + '_ {
        poll_fn(move |cx| {
            with(|b| match b.one_sided() {
                Some(one_sided) => one_sided.poll_wait(signal, cmp, value, cx),
                None => Poll::Ready(Err(KernelError::Unsupported { pe: self.pe, op: Op::WaitSignal })),
            })
        })
    }

    /// The window `name`: a symmetric buffer its communicator registered once, which keeps its values
    /// across the communicator's calls (the heap of [`Tl::symmetric`] lives for one call). Its copy on
    /// every rank starts as zeros when it is registered; nothing resets it between calls.
    ///
    /// # Errors
    /// [`KernelError::NoSuchWindow`] when the communicator registered no window of that name.
    pub fn window(&self, name: &str) -> Result<Symmetric, KernelError> {
        self.one_sided(Op::Window, |b| b.window(name))
    }

    /// Allocates the symmetric buffer `name` collectively: every rank calls it at the same point of
    /// its kernel, with the same shape, and waits for the others (NVSHMEM's `nvshmem_malloc`, which
    /// is a barrier over every PE). A rank that takes another path leaves the others waiting.
    ///
    /// # Errors
    /// [`KernelError::CollectiveMismatch`] when the ranks meet at different collective calls (another
    /// buffer, or a barrier); [`KernelError::SymmetricMismatch`] as [`Tl::symmetric`].
    #[track_caller]
    pub fn alloc(
        &self,
        name: &'static str,
        dtype: Dtype,
        len: usize,
    ) -> impl Future<Output = Result<Symmetric, KernelError>> + '_ {
        let site = CallSite(std::panic::Location::caller());
        let allocation = Allocation { buffer: Symmetric { name, dtype, len }, site };
        poll_fn(move |cx| {
            with(|b| match b.one_sided() {
                Some(one_sided) => one_sided.poll_alloc(allocation, cx).map_ok(|()| allocation.buffer),
                None => Poll::Ready(Err(KernelError::Unsupported { pe: self.pe, op: Op::Alloc })),
            })
        })
    }

    /// A fetching atomic: waits for the old value.
    #[track_caller]
    fn fetch(
        &self,
        peer: usize,
        buffer: &Symmetric,
        index: usize,
        op: AtomicOp,
        (order, scope): (MemoryOrder, Scope),
    ) -> impl Future<Output = Result<i64, KernelError>> + '_ {
        let (site, buffer) = (CallSite(std::panic::Location::caller()), *buffer);
        poll_fn(move |cx| {
            let atomic = Atomic { peer, buffer: &buffer, index, op, fetch: true, order, scope, site };
            with(|b| match b.one_sided() {
                Some(one_sided) => one_sided.poll_fetch(atomic, cx),
                None => Poll::Ready(Err(KernelError::Unsupported { pe: self.pe, op: op.op(true) })),
            })
        })
    }
}

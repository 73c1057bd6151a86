//! One-sided operations on [`symmetric`](crate::kernel::symmetric) memory: declaring buffers,
//! reading and writing this PE's copy, puts to and gets from peers, signals, fences and quiets, and
//! multicast objects whose `multimem` operations the switch fans out and reduces.

use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::task::Poll;

use super::Tl;
use super::backend::{Work, with};
use crate::kernel::atomic::Cmp;
use crate::kernel::symmetric::{CallSite, Multicast, MultimemStore, OneSided, Put, Symmetric};
use crate::kernel::{KernelError, Op};
use crate::tile::{Dtype, ReduceOp, Tile};

impl Tl {
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
        let site = CallSite(std::panic::Location::caller());
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
        let site = CallSite(std::panic::Location::caller());
        self.one_sided(Op::Write, |b| b.write(buffer, offset, tile, site))?;
        with(|b| b.charge(Work::Memory { bytes: tile.bytes() }));
        Ok(())
    }

    /// Writes `tile` into rank `peer`'s copy of `buffer` at `offset`, without waiting: the bytes take
    /// the route's time as a send of them would. Nothing tells the peer they have landed: follow with
    /// `tl.fence()` and `tl.signal`, or use [`Tl::put_signal`]. `peer` is a global rank, as in every
    /// one-sided operation: a team's member `r` is `tl.put(team.global(r)?, ...)`
    /// ([`Team::global`](crate::kernel::symmetric::Team::global)).
    ///
    /// # Errors
    /// [`KernelError::NotAPeer`] for a rank the install plan does not reach,
    /// [`KernelError::BadSymmetricAccess`] for a range past the end or another dtype.
    #[track_caller]
    pub fn put(&self, peer: usize, buffer: &Symmetric, offset: usize, tile: &Tile) -> Result<(), KernelError> {
        let site = CallSite(std::panic::Location::caller());
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
        let site = CallSite(std::panic::Location::caller());
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
        let (site, buffer) = (CallSite(std::panic::Location::caller()), *buffer);
        poll_fn(move |cx| {
            with(|b| match b.one_sided() {
                Some(one_sided) => one_sided.poll_get(peer, &buffer, offset, len, site, cx),
                None => Poll::Ready(Err(KernelError::Unsupported { pe: self.pe, op: Op::Get })),
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
        self.signal_wait_until(signal, Cmp::Ge, value).await.map(|_| ())
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
                None => Poll::Ready(Err(KernelError::Unsupported { pe: self.pe, op: Op::Quiet })),
            })
        })
        .await
    }

    /// Declares the symmetric buffer `name` (as [`Tl::symmetric`]) and spans it with a multicast object
    /// over every rank of the run, behind the system's switch: NVLS's multicast object, whose
    /// `multimem` operations reach every member's copy through the switch at the cost of one. Every
    /// rank makes it with the same shape.
    ///
    /// # Errors
    /// [`KernelError::NoMulticast`] when the switch does not multicast (the spec's `switch`) or the
    /// ranks are not all SIP leaders behind one switch; [`KernelError::SymmetricMismatch`] as
    /// [`Tl::symmetric`].
    pub fn multicast(&self, name: &'static str, dtype: Dtype, len: usize) -> Result<Multicast, KernelError> {
        let buffer = Symmetric { name, dtype, len };
        let every_rank: Arc<[usize]> = (0..self.call.size).collect();
        self.one_sided(Op::Multicast, |b| b.multicast(&buffer, &every_rank))
    }

    /// Reads elements `offset..offset + len` of every member's copy of `multicast`'s buffer, reduced
    /// by `op` in the switch (`multimem.ld_reduce`): the request crosses to the switch, which reads
    /// every member's bytes, reduces them and sends the result back once. This PE does no
    /// arithmetic; the members' copies are combined in rank order, so every rank gets the same bits.
    /// `Avg` adds, as [`Tl::reduce`] does: end with [`Tl::finish`].
    ///
    /// # Errors
    /// [`KernelError::BadSymmetricAccess`] past the end; [`KernelError::Race`] or
    /// [`KernelError::Uninitialised`] when a member's bytes are unordered with a write to them, or
    /// nobody wrote them.
    #[track_caller]
    pub fn multimem_ld_reduce(
        &self,
        multicast: &Multicast,
        offset: usize,
        len: usize,
        op: ReduceOp,
    ) -> impl Future<Output = Result<Tile, KernelError>> + '_ {
        let (site, multicast) = (CallSite(std::panic::Location::caller()), multicast.clone());
        poll_fn(move |cx| {
            with(|b| match b.one_sided() {
                Some(one_sided) => one_sided.poll_multimem_ld_reduce(&multicast, offset, len, op, site, cx),
                None => Poll::Ready(Err(KernelError::Unsupported { pe: self.pe, op: Op::MultimemLdReduce })),
            })
        })
    }

    /// Writes `tile` into every member's copy of `multicast`'s buffer at `offset`, without waiting
    /// (`multimem.st`): the tile crosses to the switch once and the switch fans it out. Ordered as a
    /// plain [`Tl::put`] to every member: follow with `tl.fence()` and a signal, or a barrier.
    ///
    /// # Errors
    /// [`KernelError::BadSymmetricAccess`] for a range past the end or another dtype.
    #[track_caller]
    pub fn multimem_st(&self, multicast: &Multicast, offset: usize, tile: &Tile) -> Result<(), KernelError> {
        let site = CallSite(std::panic::Location::caller());
        self.one_sided(Op::MultimemSt, |b| {
            b.multimem_store(MultimemStore { multicast, offset, tile, reduce: None, site })
        })
    }

    /// Reduces `tile` by `op` into every member's copy of `multicast`'s buffer at `offset`
    /// (`multimem.red`): as [`Tl::multimem_st`], with the reduction done in the switch at its rate.
    /// `Avg` adds, as [`Tl::reduce`] does.
    ///
    /// # Errors
    /// As [`Tl::multimem_st`].
    #[track_caller]
    pub fn multimem_red(
        &self,
        multicast: &Multicast,
        offset: usize,
        tile: &Tile,
        op: ReduceOp,
    ) -> Result<(), KernelError> {
        let site = CallSite(std::panic::Location::caller());
        let store = MultimemStore { multicast, offset, tile, reduce: Some(op), site };
        self.one_sided(Op::MultimemRed, |b| b.multimem_store(store))
    }

    /// Runs `f` on the backend's symmetric memory, or fails `op` when it has none.
    pub(super) fn one_sided<R>(
        &self,
        op: Op,
        f: impl FnOnce(&mut dyn OneSided) -> Result<R, KernelError>,
    ) -> Result<R, KernelError> {
        with(|b| match b.one_sided() {
            Some(one_sided) => f(one_sided),
            None => Err(KernelError::Unsupported { pe: self.pe, op }),
        })
    }
}

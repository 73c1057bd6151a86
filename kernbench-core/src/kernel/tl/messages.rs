//! Two-sided traffic: sends to and receives from the PE's neighbours, by direction and channel, and
//! barriers over a group of participants.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Tl;
use super::backend::with;
use crate::kernel::KernelError;
use crate::kernel::symmetric::Group;
use crate::machine::Direction;
use crate::tile::{Dtype, Tile};

impl Tl {
    /// Sends `tile` to the neighbour in `direction` on this lane's channel (its index), waiting for a
    /// credit if the queue is full. The tile is not copied. Returns once the message is queued: its
    /// transfer takes the link's time, not the PE's.
    ///
    /// # Errors
    /// As [`Tl::send_on`].
    pub fn send(&self, direction: Direction, tile: &Tile) -> impl Future<Output = Result<(), KernelError>> {
        Sending { tile, direction, channel: self.lane }
    }

    /// Sends `tile` to the neighbour in `direction` on `channel`: each (direction, channel) has its own
    /// queue and credits, and the first lane of the PE to send on it owns it for the run.
    ///
    /// # Errors
    /// [`KernelError::NoSuchDirection`] when the PE has no such neighbour, [`KernelError::NoSuchChannel`]
    /// for a channel the run does not have, [`KernelError::ChannelTaken`] when another lane of the PE
    /// owns the channel.
    pub fn send_on(
        &self,
        direction: Direction,
        channel: usize,
        tile: &Tile,
    ) -> impl Future<Output = Result<(), KernelError>> {
        Sending { tile, direction, channel }
    }

    /// Receives the oldest message from `direction` on this lane's channel (its index), which must hold
    /// `len` elements of `dtype`.
    ///
    /// # Errors
    /// As [`Tl::recv_on`].
    pub fn recv(
        &self,
        direction: Direction,
        len: usize,
        dtype: Dtype,
    ) -> impl Future<Output = Result<Tile, KernelError>> {
        Receiving { direction, channel: self.lane, len, dtype }
    }

    /// Receives the oldest message from `direction` on `channel`; the first lane of the PE to receive
    /// on it owns it for the run.
    ///
    /// # Errors
    /// [`KernelError::NoSuchDirection`], [`KernelError::NoSuchChannel`], [`KernelError::ChannelTaken`],
    /// [`KernelError::RecvMismatch`] or [`KernelError::GenerationMismatch`].
    pub fn recv_on(
        &self,
        direction: Direction,
        channel: usize,
        len: usize,
        dtype: Dtype,
    ) -> impl Future<Output = Result<Tile, KernelError>> {
        Receiving { direction, channel, len, dtype }
    }

    /// Receives the oldest message from `direction`, which must hold a tile of `like`'s dtype and
    /// length: the usual partner of a send of a tile shaped like `like`.
    ///
    /// # Errors
    /// As [`Tl::recv`].
    pub fn recv_like(&self, direction: Direction, like: &Tile) -> impl Future<Output = Result<Tile, KernelError>> {
        self.recv(direction, like.len(), like.dtype())
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
}

/// A send waiting for its credit: what every kernel that sends holds while it waits, so it is polled
/// straight rather than through an `async` body, which would keep each argument twice.
struct Sending<'a> {
    tile: &'a Tile,
    direction: Direction,
    channel: usize,
}

impl Future for Sending<'_> {
    type Output = Result<(), KernelError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Sending { tile, direction, channel } = *self;
        with(|b| b.poll_send(direction, channel, tile, cx))
    }
}

/// A receive waiting for its message: polled straight, as [`Sending`] is.
struct Receiving {
    direction: Direction,
    channel: usize,
    len: usize,
    dtype: Dtype,
}

impl Future for Receiving {
    type Output = Result<Tile, KernelError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Receiving { direction, channel, len, dtype } = *self;
        with(|b| b.poll_recv(direction, channel, len, dtype, cx))
    }
}

//! Two-sided traffic: sends to and receives from the PE's neighbours, by direction and channel, and
//! barriers over a group of participants.

use std::future::poll_fn;

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
}

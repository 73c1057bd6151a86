//! Send and receive: a lane's two-sided operations while it is polled (rule P of the round protocol).

use std::num::NonZeroU64;
use std::task::Poll;

use kernbench_core::{Direction, Dtype, KernelError, Op, PeId, Tile};

use super::queue::{Queues, Side};
use super::slots::Message;
use super::{PeLinks, Port, TwoSided};
use crate::lanes::{LaneCtx, Tasks, Wait};
use crate::timing::SpanKind;

/// A lane being polled, with what its two-sided operations touch: its PE's ports and the run's queues.
pub(crate) struct Endpoint<'v> {
    pub(crate) ctx: LaneCtx<'v>,
    pub(crate) links: &'v mut PeLinks,
    pub(crate) run: &'v TwoSided,
    pub(crate) tasks: &'v Tasks<'v>,
}

impl Endpoint<'_> {
    #[inline]
    fn port(&self, direction: Direction, op: Op) -> Result<Port, KernelError> {
        match self.links.find(direction) {
            Some(port) => Ok(port),
            None => Err(self.no_such_direction(direction, op)),
        }
    }

    #[cold]
    fn no_such_direction(&self, direction: Direction, op: Op) -> KernelError {
        KernelError::NoSuchDirection {
            pe: self.ctx.pe_id(),
            op,
            direction,
            available: self.links.ports.iter().map(Port::direction).collect(),
        }
    }

    /// The queue of `port`'s channel `channel`, with this lane claiming its side for the run: the first
    /// lane to use a side of a channel owns it.
    #[inline]
    fn claim(&self, port: Port, channel: usize, op: Op, side: Side) -> Result<u32, KernelError> {
        let first = if side == Side::Sender { port.out_queue } else { port.in_queue };
        let channels = self.tasks.channels();
        // One channel: one lane per PE, which owns every queue it touches (and does not record it).
        if channels == 1 && channel == 0 {
            return Ok(first);
        }
        let lane = u32::from(self.ctx.lane.lane);
        // A call run together with others has channels of its own, after theirs.
        let (base, channels) = self.tasks.channels_of_call(self.ctx.lane.call);
        if channel >= channels as usize {
            return Err(KernelError::NoSuchChannel {
                pe: self.ctx.pe_id(),
                op,
                direction: port.direction(),
                channel,
                channels: channels as usize,
            });
        }
        let q = first + base + channel as u32;
        // SAFETY: rule P: this PE is the side it claims, so only its thread touches that owner.
        let owner = unsafe { self.run.queues.owner(q as usize, side) };
        match *owner {
            owner if owner == lane => Ok(q),
            Queues::UNOWNED => {
                *owner = lane;
                Ok(q)
            }
            owner => Err(KernelError::ChannelTaken {
                pe: self.ctx.pe_id(),
                lane: lane as usize,
                op,
                direction: port.direction(),
                channel,
                owner: owner as usize,
            }),
        }
    }

    /// The queue of `channel` on `direction` for `op`'s `side`, claimed for this lane.
    #[inline(always)]
    fn queue(&self, direction: Direction, channel: usize, op: Op, side: Side) -> Result<u32, KernelError> {
        self.ctx.check_steps()?;
        let port = self.port(direction, op)?;
        self.claim(port, channel, op, side)
    }

    /// The PE that sends into queue `q`.
    fn sender_of(&self, q: u32) -> PeId {
        self.tasks.pe(self.run.queues[q as usize].sender)
    }

    /// Sends `tile` on `direction`'s `channel`: takes a credit, or waits for one. Inlined into its one
    /// caller, the backend's send: a call less on every message.
    #[inline]
    pub(crate) fn poll_send(
        &mut self,
        direction: Direction,
        channel: usize,
        tile: &Tile,
    ) -> Poll<Result<(), KernelError>> {
        let q = match self.queue(direction, channel, Op::Send, Side::Sender) {
            Ok(q) => q,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let queue = &self.run.queues[q as usize];
        let bytes = tile.bytes() as u64;
        let generation = NonZeroU64::new(self.ctx.lane.generation).expect("message generations count from 1");
        let ctx = &mut self.ctx;
        let make = |credit_at: f64| {
            ctx.lane.clock.advance_to(SpanKind::CreditWait, credit_at, 0, false);
            ctx.inject(bytes);
            let now = ctx.lane.clock.now;
            Message { tile: tile.clone(), generation, at_ns: now }
        };
        // SAFETY: rule P: this PE is the queue's sender.
        if !unsafe { queue.try_push(make) } {
            if self.ctx.parked.wait != Wait::Send(q) {
                self.ctx.lane.figures.credit_waits += 1;
            }
            self.ctx.park(Wait::Send(q));
            return Poll::Pending;
        }
        // Under the race detector a message from a lane that has a place in the order carries it.
        if let (true, Some(sync)) = (self.run.detector, self.ctx.lane.sync_mut()) {
            // SAFETY: as for `try_push`.
            let position = unsafe { queue.pushed() } - 1;
            self.run.orders.carry(q, position, sync.release());
        }
        let f = &mut self.ctx.lane.figures;
        f.messages_sent += 1;
        f.bytes_sent += bytes;
        self.ctx.parked.wait = Wait::None;
        self.links.touch(q, Side::Sender);
        self.ctx.step_done(Op::Send, Some(direction));
        Poll::Ready(Ok(()))
    }

    /// Receives the oldest message on `direction`'s `channel`, checked against `len` and `dtype`, or
    /// waits for one. Inlined into its one caller, as a send is.
    #[inline]
    pub(crate) fn poll_recv(
        &mut self,
        direction: Direction,
        channel: usize,
        len: usize,
        dtype: Dtype,
    ) -> Poll<Result<Tile, KernelError>> {
        let q = match self.queue(direction, channel, Op::Recv, Side::Receiver) {
            Ok(q) => q,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let queue = &self.run.queues[q as usize];
        let pe = self.ctx.pe_id();
        // SAFETY: rule P: this PE is the queue's receiver.
        let Some(head) = (unsafe { queue.peek() }) else {
            if self.ctx.parked.wait != Wait::Recv(q) {
                self.ctx.lane.figures.recv_waits += 1;
            }
            self.ctx.park(Wait::Recv(q));
            return Poll::Pending;
        };
        let expected = self.ctx.lane.generation;
        if head.generation.get() != expected {
            let (got, from) = (head.generation.get(), self.sender_of(q));
            return Poll::Ready(Err(KernelError::GenerationMismatch { pe, direction, expected, got, from }));
        }
        if head.tile.dtype() != dtype || head.tile.len() != len {
            return Poll::Ready(Err(KernelError::RecvMismatch {
                pe,
                direction,
                expected_dtype: dtype,
                expected_len: len,
                got_dtype: head.tile.dtype(),
                got_len: head.tile.len(),
                from: self.sender_of(q),
            }));
        }
        let bytes = head.tile.bytes() as u64;
        let clock = &mut self.ctx.lane.clock;
        clock.advance_to(SpanKind::Recv, head.at_ns, bytes, false);
        let credit_at = clock.now + queue.credit_latency_ns;
        if self.run.orders.any() {
            // SAFETY: rule P: this PE is the queue's receiver.
            if let Some(order) = self.run.orders.take(q, unsafe { queue.taken() }) {
                self.ctx.sync().acquire(&order);
            }
        }
        // SAFETY: as for `peek`.
        let message = unsafe { queue.pop(credit_at) }.expect("peeked a message this poll");
        let f = &mut self.ctx.lane.figures;
        f.messages_received += 1;
        f.bytes_received += bytes;
        self.ctx.parked.wait = Wait::None;
        self.links.touch(q, Side::Receiver);
        self.ctx.step_done(Op::Recv, Some(direction));
        Poll::Ready(Ok(message.tile))
    }
}

//! One PE's state in a run, and the [`Backend`] its kernel's `tl` calls reach.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

use kernbench_core::symmetric::{CallSite as Site, OneSided, Put, Symmetric};
use kernbench_core::tl::{Backend, Work, message_generation};
use kernbench_core::{Buffer, Direction, Dtype, Group, KernelError, Op, PeId, Tile, WatchdogBudget};
use serde::{Deserialize, Serialize};

use crate::RunError;
use crate::queue::{Message, Queue, Queues, Side};
use crate::race::{LaneSync, MessageOrders, Released, Stamp};
use crate::slots::Slots;
use crate::symmetric::{
    HeapBuffer, LaneOneSided, OneSidedOp, Outgoing, PeOneSided, Raise, access, check_signal, conflict_error,
};
use crate::timing::{Bookings, Clock, SpanKind};

/// A PE's buffers at the start of a run.
#[derive(Clone, Debug)]
pub struct PeBuffers {
    /// The PE's contribution.
    pub input: Tile,
    /// The output buffer, sized and typed by the collective (its contents are the starting value).
    pub output: Tile,
}

/// What one PE (or one of its lanes) did in a run. Every count is the same on one thread or many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeFigures {
    /// Messages sent; a put, a signal and a get's request count as one each.
    pub messages_sent: u64,
    /// Payload bytes sent (a put's data; a signal and a get's request count 8).
    pub bytes_sent: u64,
    /// Messages received.
    pub messages_received: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Sends that found no credit and had to wait for one.
    pub credit_waits: u64,
    /// Receives that found their queue empty and had to wait.
    pub recv_waits: u64,
    /// Elements combined by reductions.
    pub reduced_elements: u64,
    /// Bytes moved by loads and stores.
    pub memory_bytes: u64,
    /// Rounds in which the PE's kernel was polled.
    pub polls: u64,
}

impl std::ops::AddAssign<&PeFigures> for PeFigures {
    fn add_assign(&mut self, f: &PeFigures) {
        self.messages_sent += f.messages_sent;
        self.bytes_sent += f.bytes_sent;
        self.messages_received += f.messages_received;
        self.bytes_received += f.bytes_received;
        self.credit_waits += f.credit_waits;
        self.recv_waits += f.recv_waits;
        self.reduced_elements += f.reduced_elements;
        self.memory_bytes += f.memory_bytes;
        self.polls += f.polls;
    }
}

/// A direction of a PE and the queues behind it: one per channel, numbered from the first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Port {
    /// `direction.key()`, what lookups compare.
    pub(crate) key: u64,
    pub(crate) direction: Direction,
    /// The queue of channel 0 out of the PE; channel `c`'s is `out_queue + c`.
    pub(crate) out_queue: u32,
    /// The queue of channel 0 into the PE; channel `c`'s is `in_queue + c`.
    pub(crate) in_queue: u32,
}

/// What a PE's lanes share: touched only while one of its lanes is polled or its round is merged, on
/// one thread (a PE's lanes are polled together).
pub(crate) struct PeState {
    pub(crate) pe: PeId,
    /// Sorted by direction key (so the error lists them in order).
    pub(crate) ports: Vec<Port>,
    pub(crate) input: Tile,
    pub(crate) output: Tile,
    pub(crate) scratch: Tile,
    /// Queues the PE's lanes pushed to or popped from in the current round.
    pub(crate) touched: Vec<(u32, Side)>,
    /// What the kernel recorded with `tl.note`, by key.
    pub(crate) notes: BTreeMap<String, String>,
    /// When the PE runs several lanes under the timing model: its compute's bookings, so that their
    /// injections, reductions, loads and stores run one at a time.
    pub(crate) compute: Option<Bookings>,
    /// Its symmetric memory, once a lane uses it or a peer puts into it: most PEs of most runs never
    /// do, and a million of them should not pay for it.
    pub(crate) one_sided: Option<Box<PeOneSided>>,
}

impl PeState {
    /// Its symmetric memory, made on first use.
    pub(crate) fn one_sided(&mut self) -> &mut PeOneSided {
        self.one_sided.get_or_insert_default()
    }
}

/// One lane of a PE: a coroutine with its own clock, phase, figures and watchdog count.
pub(crate) struct LaneState {
    /// Its index in its PE.
    pub(crate) lane: u32,
    pub(crate) figures: PeFigures,
    /// The generation stamped on messages sent and expected on messages received now.
    pub(crate) generation: u64,
    /// Its simulated time.
    pub(crate) clock: Clock,
    /// Why its kernel stopped, when it failed or panicked in the current round (boxed: a million
    /// lanes that do not fail would each hold an error's room).
    pub(crate) failure: Option<Box<RunError>>,
    /// What the watchdog counts.
    pub(crate) watch: Watch,
    /// Its one-sided state, once it has any.
    pub(crate) one_sided: Option<Box<LaneOneSided>>,
}

impl LaneState {
    /// Its one-sided state, made on first use.
    pub(crate) fn one_sided(&mut self) -> &mut LaneOneSided {
        self.one_sided.get_or_insert_default()
    }

    /// Its place in the happens-before order, made on first use (its task is `task`).
    pub(crate) fn sync(&mut self, task: u32) -> &mut LaneSync {
        self.one_sided().sync.get_or_insert_with(|| LaneSync::new(task))
    }

    /// Its place in the happens-before order, if it has taken one.
    pub(crate) fn sync_ref(&self) -> Option<&LaneSync> {
        self.one_sided.as_ref().and_then(|o| o.sync.as_ref())
    }
}

/// Spends `ns` of a lane's time on work of its PE: lanes of one PE share its compute (`Some` when it
/// runs several under the timing model), so the work waits for what other lanes booked first.
#[inline]
fn spend(compute: &mut Option<Bookings>, clock: &mut Clock, kind: SpanKind, ns: f64, bytes: u64) {
    if let (Some(compute), true) = (compute, clock.on) {
        let (start, _) = compute.reserve(clock.now, ns, 0.0);
        clock.advance_to(SpanKind::ComputeWait, start, 0, false);
    }
    clock.work(kind, ns, bytes);
}

/// What the watchdog has counted of a PE's kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Watch {
    /// Loop iterations the kernel may still make (counted down at the top of every loop body of a
    /// `#[ccl_kernel]`; lent to the thread while the kernel is polled).
    pub(crate) loops_left: u64,
    /// Waiting steps completed: sends, receives, barriers.
    pub(crate) steps: u64,
    /// The last waiting step completed, and its direction.
    pub(crate) last: Option<(Op, Option<Direction>)>,
}

/// The watchdog's limits per PE: see [`crate::Runtime::loop_budget`] and [`crate::Runtime::step_budget`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    pub(crate) loops: u64,
    pub(crate) steps: u64,
}

/// What a lane waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    None,
    Send(u32),
    Recv(u32),
    /// A barrier that has not released it yet.
    Barrier,
    /// A barrier that has released it.
    Released,
    /// Its own signal to reach a value.
    Signal {
        signal: u32,
        until: u64,
    },
    /// A get's reply.
    Get,
    /// Its puts of this round to be placed.
    Quiet,
}

/// The wait of a lane and the waker that resumes it. In the merge phase only the unique counterpart of
/// the queue the lane waits on touches it, so it lives apart from [`LaneState`].
pub(crate) struct WaitSlot {
    pub(crate) wait: Wait,
    pub(crate) waker: Option<Waker>,
}

impl WaitSlot {
    pub(crate) fn new() -> Self {
        WaitSlot { wait: Wait::None, waker: None }
    }

    fn park(&mut self, wait: Wait, cx: &Context<'_>) {
        self.wait = wait;
        match &self.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => self.waker = Some(cx.waker().clone()),
        }
    }
}

/// A lane at a barrier: its task, the group's key, when it arrived and what it released.
pub(crate) struct Arrival {
    pub(crate) group: u64,
    pub(crate) task: u32,
    pub(crate) at_ns: f64,
    pub(crate) clock: Option<Released>,
}

/// The barriers: lanes arrive in the poll phase; between rounds each group whose lanes have all
/// arrived is released at once.
pub(crate) struct Barrier {
    /// Whether any lane arrived this round (the check between rounds is then one load).
    pub(crate) arrived: AtomicBool,
    /// The round's arrivals.
    pub(crate) waiters: Mutex<Vec<Arrival>>,
}

/// The key of `pe`'s `group`: lanes with the same key wait for each other.
pub(crate) fn group_key(group: Group, pe: PeId) -> u64 {
    match group {
        Group::All => 0,
        Group::Sip => 1 << 62 | u64::from(pe.sip),
        Group::Cube => 2 << 62 | u64::from(pe.sip) << 32 | u64::from(pe.cube),
    }
}

/// The [`Backend`] of one lane of one PE for one poll.
pub(crate) struct PeView<'a> {
    /// The lane's task: its index among every lane of the run.
    pub(crate) task: u32,
    pub(crate) state: &'a mut PeState,
    pub(crate) lane: &'a mut LaneState,
    pub(crate) wait: &'a mut WaitSlot,
    /// Channels per direction: the most lanes of any PE.
    pub(crate) channels: u32,
    pub(crate) queues: &'a Queues,
    /// Every participant's id, by rank.
    pub(crate) pes: &'a [PeId],
    /// Per queue, how long a credit takes to get back to the sender (empty when untimed).
    pub(crate) credit_latency: &'a [f64],
    /// The call's generation, from which each phase's message generation follows.
    pub(crate) call_generation: u64,
    pub(crate) barrier: &'a Barrier,
    pub(crate) budget: Budget,
    /// Whether the race detector is on.
    pub(crate) detector: bool,
    /// What messages in flight carry of their senders' order, under the race detector.
    pub(crate) orders: &'a MessageOrders,
    /// Set when a lane starts a one-sided operation, so rounds without any skip their delivery.
    pub(crate) one_sided_used: &'a AtomicBool,
    /// Every lane's wait slot: a raise of the PE's own signal wakes its other lanes.
    pub(crate) waits: &'a Slots<WaitSlot>,
    /// Every lane's first task and every task's rank: to name the lanes of a race.
    pub(crate) first_task: &'a [u32],
    pub(crate) task_rank: &'a [u32],
}

impl PeView<'_> {
    #[inline]
    fn port(&self, direction: Direction, op: Op) -> Result<Port, KernelError> {
        match self.find(direction) {
            Some(port) => Ok(port),
            None => Err(self.no_such_direction(direction, op)),
        }
    }

    /// The port for `direction`: most tables are a handful of entries, where a scan beats a binary
    /// search; `full` topologies have hundreds.
    #[inline]
    fn find(&self, direction: Direction) -> Option<Port> {
        const SCAN: usize = 16;
        let (ports, key) = (&self.state.ports, direction.key());
        if ports.len() <= SCAN {
            ports.iter().find(|p| p.key == key).copied()
        } else {
            ports.binary_search_by_key(&key, |p| p.key).ok().map(|i| ports[i])
        }
    }

    #[cold]
    fn no_such_direction(&self, direction: Direction, op: Op) -> KernelError {
        KernelError::NoSuchDirection {
            pe: self.state.pe,
            op,
            direction,
            available: self.state.ports.iter().map(|p| p.direction).collect(),
        }
    }

    /// The queue of `port`'s channel `channel` (`first` is the port's queue of channel 0), with this
    /// lane claiming its side for the run: the first lane to use a side of a channel owns it.
    #[inline]
    fn claim(&self, port: Port, channel: usize, op: Op, side: Side) -> Result<u32, KernelError> {
        let first = if side == Side::Sender { port.out_queue } else { port.in_queue };
        // One channel: one lane per PE, which owns every queue it touches.
        if self.channels == 1 && channel == 0 {
            return Ok(first);
        }
        if channel >= self.channels as usize {
            return Err(KernelError::NoSuchChannel {
                pe: self.state.pe,
                op,
                direction: port.direction,
                channel,
                channels: self.channels as usize,
            });
        }
        let q = first + channel as u32;
        // SAFETY: poll phase, and this PE is the side it claims: only its thread touches that owner.
        let owner = unsafe { self.queues[q as usize].owner(side) };
        match *owner {
            lane if lane == self.lane.lane => Ok(q),
            Queue::UNOWNED => {
                *owner = self.lane.lane;
                Ok(q)
            }
            owner => Err(KernelError::ChannelTaken {
                pe: self.state.pe,
                lane: self.lane.lane as usize,
                op,
                direction: port.direction,
                channel,
                owner: owner as usize,
            }),
        }
    }

    /// Fails a waiting step once the lane has completed its budget of them.
    #[inline]
    fn check_steps(&self) -> Result<(), KernelError> {
        if self.lane.watch.steps >= self.budget.steps {
            return Err(self.watchdog(WatchdogBudget::Steps(self.budget.steps)));
        }
        Ok(())
    }

    /// Counts a waiting step completed.
    #[inline]
    fn step_done(&mut self, op: Op, direction: Option<Direction>) {
        let watch = &mut self.lane.watch;
        watch.steps += 1;
        watch.last = Some((op, direction));
    }

    #[cold]
    fn watchdog(&self, budget: WatchdogBudget) -> KernelError {
        let watch = &self.lane.watch;
        // While the kernel is polled its count is lent to the thread.
        let loops_left = kernbench_core::tl::loops_left().min(watch.loops_left);
        KernelError::Watchdog {
            pe: self.state.pe,
            budget,
            iterations: self.budget.loops - loops_left,
            steps: watch.steps,
            last_op: watch.last.map(|(op, _)| op),
            last_direction: watch.last.and_then(|(_, direction)| direction),
        }
    }

    /// The PE that sends into queue `q`.
    fn sender_of(&self, q: u32) -> PeId {
        self.pes[self.queues[q as usize].sender as usize]
    }

    fn touch(&mut self, queue: u32, side: Side) {
        if self.state.touched.last() != Some(&(queue, side)) {
            self.state.touched.push((queue, side));
        }
    }

    fn buffer(&mut self, buffer: Buffer) -> &mut Tile {
        match buffer {
            Buffer::Input => &mut self.state.input,
            Buffer::Output => &mut self.state.output,
            Buffer::Scratch => &mut self.state.scratch,
        }
    }
}

impl Backend for PeView<'_> {
    fn poll_send(
        &mut self,
        direction: Direction,
        channel: usize,
        tile: &Tile,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), KernelError>> {
        let q = match self.check_steps().and_then(|()| self.port(direction, Op::Send)) {
            Ok(port) => match self.claim(port, channel, Op::Send, Side::Sender) {
                Ok(q) => q,
                Err(e) => return Poll::Ready(Err(e)),
            },
            Err(e) => return Poll::Ready(Err(e)),
        };
        let queue = &self.queues[q as usize];
        let (clock, generation, compute) = (&mut self.lane.clock, self.lane.generation, &mut self.state.compute);
        let bytes = tile.bytes() as u64;
        let make = |credit_at: f64| {
            clock.advance_to(SpanKind::CreditWait, credit_at, 0, false);
            let injection = clock.injection_ns;
            spend(compute, clock, SpanKind::Send, injection, bytes);
            Message { tile: tile.clone(), generation, depart_ns: clock.now, arrive_ns: clock.now }
        };
        // SAFETY: this PE is the queue's sender and we are in the poll phase.
        if unsafe { queue.try_push(make) } {
            // Under the race detector a message from a lane that has a place in the order carries it.
            if let (true, Some(sync)) = (self.detector, self.lane.one_sided.as_mut().and_then(|o| o.sync.as_mut())) {
                // SAFETY: as for `try_push`.
                let position = unsafe { queue.pushed() } - 1;
                self.orders.carry(q, position, sync.release());
            }
            let f = &mut self.lane.figures;
            f.messages_sent += 1;
            f.bytes_sent += bytes;
            self.wait.wait = Wait::None;
            self.touch(q, Side::Sender);
            self.step_done(Op::Send, Some(direction));
            Poll::Ready(Ok(()))
        } else {
            if self.wait.wait != Wait::Send(q) {
                self.lane.figures.credit_waits += 1;
            }
            self.wait.park(Wait::Send(q), cx);
            Poll::Pending
        }
    }

    fn poll_recv(
        &mut self,
        direction: Direction,
        channel: usize,
        len: usize,
        dtype: Dtype,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Tile, KernelError>> {
        let q = match self.check_steps().and_then(|()| self.port(direction, Op::Recv)) {
            Ok(port) => match self.claim(port, channel, Op::Recv, Side::Receiver) {
                Ok(q) => q,
                Err(e) => return Poll::Ready(Err(e)),
            },
            Err(e) => return Poll::Ready(Err(e)),
        };
        let queue = &self.queues[q as usize];
        let pe = self.state.pe;
        // SAFETY: this PE is the queue's receiver and we are in the poll phase.
        let Some(head) = (unsafe { queue.peek() }) else {
            if self.wait.wait != Wait::Recv(q) {
                self.lane.figures.recv_waits += 1;
            }
            self.wait.park(Wait::Recv(q), cx);
            return Poll::Pending;
        };
        if head.generation != self.lane.generation {
            return Poll::Ready(Err(KernelError::GenerationMismatch {
                pe,
                direction,
                expected: self.lane.generation,
                got: head.generation,
                from: self.sender_of(q),
            }));
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
        let clock = &mut self.lane.clock;
        clock.advance_to(SpanKind::Recv, head.arrive_ns, head.tile.bytes() as u64, false);
        let credit_at = clock.now + self.credit_latency.get(q as usize).copied().unwrap_or(0.0);
        if self.orders.any() {
            // SAFETY: this PE is the queue's receiver and we are in the poll phase.
            if let Some(order) = self.orders.take(q, unsafe { queue.taken() }) {
                self.lane.sync(self.task).acquire(&order);
            }
        }
        // SAFETY: as for `peek`.
        let message = unsafe { queue.pop(credit_at) }.expect("peeked a message this poll");
        let f = &mut self.lane.figures;
        f.messages_received += 1;
        f.bytes_received += message.tile.bytes() as u64;
        self.wait.wait = Wait::None;
        self.touch(q, Side::Receiver);
        self.step_done(Op::Recv, Some(direction));
        Poll::Ready(Ok(message.tile))
    }

    fn poll_barrier(&mut self, group: Group, cx: &mut Context<'_>) -> Poll<Result<(), KernelError>> {
        if let Err(e) = self.check_steps() {
            return Poll::Ready(Err(e));
        }
        match self.wait.wait {
            Wait::Released => {
                self.wait.wait = Wait::None;
                self.step_done(Op::Barrier, None);
                Poll::Ready(Ok(()))
            }
            Wait::Barrier => {
                self.wait.park(Wait::Barrier, cx);
                Poll::Pending
            }
            _ => {
                // A barrier completes the lane's puts: it releases them with everything else the lane
                // did, and opens only once they have landed.
                let clock = match self.lane.one_sided.as_mut().and_then(|o| o.sync.as_mut()) {
                    Some(sync) if self.detector => {
                        sync.quiet();
                        Some(sync.release())
                    }
                    _ => None,
                };
                let arrival = Arrival {
                    group: group_key(group, self.state.pe),
                    task: self.task,
                    at_ns: self.lane.clock.now,
                    clock,
                };
                self.barrier.arrived.store(true, Ordering::Relaxed);
                self.barrier.waiters.lock().unwrap_or_else(|e| e.into_inner()).push(arrival);
                self.wait.park(Wait::Barrier, cx);
                Poll::Pending
            }
        }
    }

    fn one_sided(&mut self) -> Option<&mut dyn OneSided> {
        Some(self)
    }

    fn has(&self, direction: Direction) -> bool {
        self.find(direction).is_some()
    }

    fn load(&mut self, buffer: Buffer) -> Result<Tile, KernelError> {
        Ok(self.buffer(buffer).clone())
    }

    fn store(&mut self, buffer: Buffer, offset: Option<usize>, tile: &Tile) -> Result<(), KernelError> {
        let pe = self.state.pe;
        let target = self.buffer(buffer);
        let result = match offset {
            Some(offset) => target.write_at(offset, tile),
            // Scratch takes any tile; the input and output keep the shape the collective gave them.
            None if buffer == Buffer::Scratch => {
                *target = tile.clone();
                Ok(())
            }
            None if target.dtype() != tile.dtype() || target.len() != tile.len() => {
                return Err(KernelError::StoreMismatch {
                    pe,
                    buffer,
                    expected_dtype: target.dtype(),
                    expected_len: target.len(),
                    got_dtype: tile.dtype(),
                    got_len: tile.len(),
                });
            }
            None => {
                *target = tile.clone();
                Ok(())
            }
        };
        result.map_err(|source| KernelError::Tile { pe, op: Op::Store, source })
    }

    fn loops_left(&self) -> u64 {
        self.lane.watch.loops_left
    }

    fn set_loops_left(&mut self, left: u64) {
        self.lane.watch.loops_left = left;
    }

    fn out_of_loops(&mut self) -> Result<(), KernelError> {
        Err(self.watchdog(WatchdogBudget::LoopIterations(self.budget.loops)))
    }

    fn note(&mut self, key: &str, value: String) {
        self.state.notes.insert(key.to_owned(), value);
    }

    fn set_phase(&mut self, phase: u8) {
        self.lane.generation = message_generation(self.call_generation, phase);
    }

    fn charge(&mut self, work: Work) {
        let (f, clock) = (&mut self.lane.figures, &mut self.lane.clock);
        let (kind, ns, bytes) = match work {
            Work::Reduce { elements, dtype } => {
                f.reduced_elements += elements as u64;
                (SpanKind::Reduce, elements as f64 * clock.ns_per_element, (elements * dtype.size()) as u64)
            }
            Work::Memory { bytes } => {
                f.memory_bytes += bytes as u64;
                (SpanKind::Memory, bytes as f64 * clock.ns_per_byte, bytes as u64)
            }
        };
        spend(&mut self.state.compute, clock, kind, ns, bytes);
    }
}

impl PeView<'_> {
    /// The route to rank `peer` for a one-sided `op`: the queues of channel 0 to and from it.
    fn peer(&mut self, peer: usize, op: Op) -> Result<(u32, u32), KernelError> {
        let rank = self.task_rank[self.task as usize];
        let (ports, queues) = (&self.state.ports, self.queues);
        let one_sided = self.state.one_sided.get_or_insert_default();
        let peers = one_sided.peers.get_or_insert_with(|| one_sided_peers(rank, ports, queues));
        match peers.binary_search_by_key(&peer, |&(rank, ..)| rank as usize) {
            Ok(i) => Ok((peers[i].1, peers[i].2)),
            Err(_) => Err(KernelError::NotAPeer {
                pe: self.state.pe,
                rank: rank as usize,
                op,
                peer,
                reachable: peers.iter().map(|&(rank, ..)| rank as usize).collect(),
            }),
        }
    }

    /// The bytes of `len` elements of `dtype` at `offset` of `buffer`, or the error of `op`.
    fn range(
        &self,
        op: Op,
        buffer: &Symmetric,
        offset: usize,
        len: usize,
        dtype: Dtype,
    ) -> Result<std::ops::Range<u64>, KernelError> {
        buffer.byte_range(offset, len).filter(|_| dtype == buffer.dtype).ok_or(KernelError::BadSymmetricAccess {
            pe: self.state.pe,
            op,
            buffer: *buffer,
            offset,
            len,
            dtype,
        })
    }

    /// Injects a one-sided operation and queues it for the end of the round.
    fn start(&mut self, to: u32, route: u32, clock: Option<Released>, op: OneSidedOp) {
        let generation = self.lane.generation;
        let mut out = Outgoing { task: self.task, generation, to, route, depart_ns: 0.0, arrive_ns: 0.0, clock, op };
        let bytes = out.bytes();
        let lane_clock = &mut self.lane.clock;
        let injection = lane_clock.injection_ns;
        spend(&mut self.state.compute, lane_clock, SpanKind::Send, injection, bytes);
        (out.depart_ns, out.arrive_ns) = (lane_clock.now, lane_clock.now);
        let f = &mut self.lane.figures;
        f.messages_sent += 1;
        f.bytes_sent += bytes;
        self.state.one_sided().outbox.push(out);
        self.one_sided_used.store(true, Ordering::Relaxed);
    }

    /// This PE's copy of `buffer`, once the race detector (when on) has checked and recorded this
    /// lane's `op` (`Read` or `Write`) of `bytes` of it.
    fn local_access(
        &mut self,
        op: Op,
        buffer: &Symmetric,
        bytes: std::ops::Range<u64>,
        site: Site,
    ) -> Result<&mut HeapBuffer, KernelError> {
        let (pe, detector, task) = (self.state.pe, self.detector, self.task);
        let copy = self.state.one_sided().heap.buffer(pe, buffer, detector)?;
        if let (Some(shadow), false) = (&mut copy.shadow, bytes.is_empty()) {
            let sync = self.lane.sync(task);
            let stamp = sync.local_access(op, site);
            let checked = match op {
                Op::Write => shadow.write(bytes, stamp, sync.clock()),
                _ => shadow.read(bytes, stamp, sync.clock()),
            };
            if let Err(conflict) = checked {
                return Err(self.conflict(conflict, buffer.name, &stamp));
            }
        }
        self.state.one_sided().heap.buffer(pe, buffer, detector)
    }

    /// Wakes the other lanes of this PE that wait on `signal`: they are polled by this thread, in a
    /// later round.
    fn wake_own_waiters(&self, signal: usize) {
        let rank = self.task_rank[self.task as usize] as usize;
        for task in self.first_task[rank]..self.first_task[rank + 1] {
            if task == self.task {
                continue;
            }
            // SAFETY: poll phase; the PE's lanes and their wait slots belong to this thread, and a
            // lane other than the one being polled is not borrowed now.
            let slot = unsafe { self.waits.get_ref(task as usize) };
            if matches!(slot.wait, Wait::Signal { signal: s, .. } if s as usize == signal) {
                if let Some(waker) = &slot.waker {
                    waker.wake_by_ref();
                }
            }
        }
    }

    /// The error for what the race detector found on this PE's copy of `buffer`.
    fn conflict(&self, conflict: crate::race::Conflict, buffer: &'static str, stamp: &Stamp) -> KernelError {
        let who = |s: &Stamp| access(self.pes, self.first_task, self.task_rank, s);
        conflict_error(who, conflict, self.state.pe, buffer, stamp)
    }
}

impl OneSided for PeView<'_> {
    fn declare(&mut self, buffer: &Symmetric) -> Result<(), KernelError> {
        let (pe, detector) = (self.state.pe, self.detector);
        self.state.one_sided().heap.buffer(pe, buffer, detector).map(|_| ())
    }

    fn read(&mut self, buffer: &Symmetric, offset: usize, len: usize, site: Site) -> Result<Tile, KernelError> {
        let bytes = self.range(Op::Read, buffer, offset, len, buffer.dtype)?;
        let pe = self.state.pe;
        let copy = self.local_access(Op::Read, buffer, bytes, site)?;
        copy.data.slice(offset..offset + len).map_err(|source| KernelError::Tile { pe, op: Op::Read, source })
    }

    fn write(&mut self, buffer: &Symmetric, offset: usize, tile: &Tile, site: Site) -> Result<(), KernelError> {
        let bytes = self.range(Op::Write, buffer, offset, tile.len(), tile.dtype())?;
        let pe = self.state.pe;
        let copy = self.local_access(Op::Write, buffer, bytes, site)?;
        copy.data.write_at(offset, tile).map_err(|source| KernelError::Tile { pe, op: Op::Write, source })
    }

    fn put(&mut self, put: Put<'_>) -> Result<(), KernelError> {
        let op = if put.signal.is_some() { Op::PutSignal } else { Op::Put };
        let (route, _) = self.peer(put.peer, op)?;
        self.range(op, put.buffer, put.offset, put.tile.len(), put.tile.dtype())?;
        let signal = match put.signal {
            Some((signal, add)) => Some((check_signal(self.state.pe, op, signal)?, add)),
            None => None,
        };
        let (stamp, clock, seq) = if self.detector {
            let sync = self.lane.sync(self.task);
            match signal {
                // Its own signal releases the write: the write is ordered with the lane's accesses.
                Some(_) => {
                    let stamp = sync.put_signal(put.site);
                    (Some(stamp), Some(sync.release()), sync.all_puts)
                }
                None => {
                    let stamp = sync.put(put.site);
                    (Some(stamp), Some(sync.knowledge()), sync.all_puts)
                }
            }
        } else {
            (None, None, 0)
        };
        let tile = put.tile.clone();
        let op = OneSidedOp::Put { buffer: *put.buffer, offset: put.offset, tile, signal, seq, stamp };
        self.start(put.peer as u32, route, clock, op);
        Ok(())
    }

    fn poll_get(
        &mut self,
        peer: usize,
        buffer: &Symmetric,
        offset: usize,
        len: usize,
        site: Site,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Tile, KernelError>> {
        if self.wait.wait == Wait::Get {
            let Some((reply, at_ns)) = self.lane.one_sided().reply.take() else {
                self.wait.park(Wait::Get, cx);
                return Poll::Pending;
            };
            self.wait.wait = Wait::None;
            let bytes = reply.as_ref().map_or(0, |t| t.bytes() as u64);
            self.lane.clock.advance_to(SpanKind::Recv, at_ns, bytes, false);
            self.step_done(Op::Get, None);
            return Poll::Ready(reply);
        }
        if let Err(e) = self.check_steps() {
            return Poll::Ready(Err(e));
        }
        let (route, back) = match self.peer(peer, Op::Get) {
            Ok(routes) => routes,
            Err(e) => return Poll::Ready(Err(e)),
        };
        if let Err(e) = self.range(Op::Get, buffer, offset, len, buffer.dtype) {
            return Poll::Ready(Err(e));
        }
        let (stamp, clock) = if self.detector {
            let sync = self.lane.sync(self.task);
            (Some(sync.local_access(Op::Get, site)), Some(sync.knowledge()))
        } else {
            (None, None)
        };
        let op = OneSidedOp::Get { buffer: *buffer, offset, len, stamp, back, back_ns: 0.0 };
        self.start(peer as u32, route, clock, op);
        self.wait.park(Wait::Get, cx);
        Poll::Pending
    }

    fn signal(&mut self, peer: usize, signal: usize, add: u64) -> Result<(), KernelError> {
        let signal = check_signal(self.state.pe, Op::Signal, signal)?;
        let own = peer == self.task_rank[self.task as usize] as usize;
        let route = if own { None } else { Some(self.peer(peer, Op::Signal)?.0) };
        let clock = if self.detector { Some(self.lane.sync(self.task).release()) } else { None };
        let Some(route) = route else {
            // A raise of one's own signal (between the lanes of a PE) lands at once.
            let raise = Raise { add, at_ns: self.lane.clock.now, generation: self.lane.generation, clock };
            self.state.one_sided().signals.raise(signal, raise);
            self.wake_own_waiters(signal);
            return Ok(());
        };
        self.start(peer as u32, route, clock, OneSidedOp::Signal { signal, add });
        Ok(())
    }

    fn poll_wait(&mut self, signal: usize, until: u64, cx: &mut Context<'_>) -> Poll<Result<(), KernelError>> {
        let signal = match self.check_steps().and_then(|()| check_signal(self.state.pe, Op::WaitSignal, signal)) {
            Ok(signal) => signal,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let generation = self.lane.generation;
        let state = self.state.one_sided().signals.get(signal);
        if state.value(generation) < until {
            self.wait.park(Wait::Signal { signal: signal as u32, until }, cx);
            return Poll::Pending;
        }
        state.wait_done(generation, until);
        let raises = state.reaching(generation, until);
        if let Some(last) = raises.last() {
            self.lane.clock.advance_to(SpanKind::SignalWait, last.at_ns, 0, false);
        }
        if self.detector && raises.iter().any(|r| r.clock.is_some()) {
            let sync = self.lane.sync(self.task);
            for raise in &raises {
                if let Some(clock) = &raise.clock {
                    sync.acquire(clock);
                }
            }
        }
        self.wait.wait = Wait::None;
        self.step_done(Op::WaitSignal, None);
        Poll::Ready(Ok(()))
    }

    fn reset(&mut self, signal: usize) -> Result<(), KernelError> {
        let signal = check_signal(self.state.pe, Op::ResetSignal, signal)?;
        *self.state.one_sided().signals.get(signal) = Default::default();
        Ok(())
    }

    fn fence(&mut self) {
        if let Some(sync) = self.lane.one_sided.as_mut().and_then(|o| o.sync.as_mut()) {
            sync.fence();
        }
    }

    fn poll_quiet(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), KernelError>> {
        // Puts of this round land when the round is merged.
        if self.state.one_sided.as_ref().is_some_and(|o| o.outbox.iter().any(|o| o.task == self.task)) {
            self.wait.park(Wait::Quiet, cx);
            return Poll::Pending;
        }
        self.wait.wait = Wait::None;
        if let Some(one_sided) = self.lane.one_sided.as_mut() {
            self.lane.clock.advance_to(SpanKind::SignalWait, one_sided.landed_ns, 0, false);
            if let Some(sync) = &mut one_sided.sync {
                sync.quiet();
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// The ranks rank `rank`'s one-sided operations may address: the peers of its ports, with the queues of
/// channel 0 to and from each (their routes), sorted by rank.
fn one_sided_peers(rank: u32, ports: &[Port], queues: &Queues) -> Vec<(u32, u32, u32)> {
    let mut peers: Vec<(u32, u32, u32)> = ports
        .iter()
        .filter_map(|p| queues.get(p.out_queue as usize).map(|q| (q, p)))
        .filter(|(q, _)| q.sender == rank)
        .map(|(q, p)| (q.receiver, p.out_queue, p.in_queue))
        .collect();
    peers.sort_unstable();
    peers.dedup_by_key(|p| p.0);
    peers
}

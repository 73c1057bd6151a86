//! A lane's atomics and waits on values while it is polled: an atomic on its own PE's copy applies at
//! once, one on a peer's waits in the outbox as a put does; a wait on an element of its own copy
//! parks until a write or atomic that lands there makes the comparison hold.

use std::task::Poll;

use kernbench_core::atomic::Cmp;
use kernbench_core::symmetric::{Atomic, Symmetric, ValueWait};
use kernbench_core::{Dtype, KernelError, Op, Tile};

use super::heap::{AtomicApply, ElementAccess, check_signal};
use super::op::OneSidedOp;
use super::{Initiator, ValueWaiting, access};
use crate::lanes::Wait;
use crate::race::Released;
use crate::timing::SpanKind;

impl Initiator<'_> {
    /// `index` of `buffer` as an atomic's target: an element of an `i32` or `i64` buffer.
    fn check_atomic(&self, op: Op, buffer: &Symmetric, index: usize) -> Result<(), KernelError> {
        if matches!(buffer.dtype, Dtype::I32 | Dtype::I64) && index < buffer.len {
            Ok(())
        } else {
            Err(KernelError::BadAtomic { pe: self.ctx.pe_id(), op, buffer: *buffer, index })
        }
    }

    /// Under the race detector, the atomic's stamp and what its lane releases with it (or knows, for
    /// the check, when its order does not release).
    fn atomic_clock(&mut self, atomic: &Atomic<'_>, op: Op) -> (Option<crate::race::Stamp>, Option<Released>) {
        if !self.run.detector {
            return (None, None);
        }
        let sync = self.ctx.sync();
        let stamp = sync.atomic(op, atomic.site, atomic.scope);
        let clock = if atomic.order.releases() { sync.release() } else { sync.knowledge() };
        (Some(stamp), Some(clock))
    }

    /// Applies an atomic to this PE's own copy, at once: its old value.
    fn atomic_here(&mut self, atomic: &Atomic<'_>, op: Op) -> Result<i64, KernelError> {
        let (stamp, clock) = self.atomic_clock(atomic, op);
        let (owner, detector) = (self.ctx.pe_id(), self.run.detector);
        let apply = AtomicApply {
            owner,
            buffer: atomic.buffer,
            index: atomic.index,
            access: ElementAccess::Atomic(atomic.op, op),
            stamp,
            clock: clock.as_ref(),
            release: atomic.order.releases(),
            acquire: atomic.order.acquires(),
        };
        let (run, tasks) = (self.run, &self.lanes.tasks);
        let memory = self.pe.get_or_insert_default();
        let (old, acquired) = memory.heap.atomic(apply, detector, run.strong(tasks), |s| access(tasks, s))?;
        if let Some(acquired) = acquired {
            self.ctx.sync().acquire_clock(&acquired);
        }
        self.wake_values();
        Ok(old)
    }

    /// Starts an atomic on a peer's copy: it lands when the round is merged.
    fn start_atomic(&mut self, atomic: &Atomic<'_>, op: Op) -> Result<(), KernelError> {
        let (route, back) = self.peer(atomic.peer, op)?;
        let (stamp, clock) = self.atomic_clock(atomic, op);
        // One that fetches nothing completes as a put does: by a quiet, or its target's seeing it.
        let seq = match (self.ctx.lane.sync_mut(), atomic.fetch) {
            (Some(sync), false) => {
                sync.all_puts += 1;
                sync.all_puts
            }
            _ => 0,
        };
        let remote = OneSidedOp::Atomic {
            buffer: *atomic.buffer,
            index: atomic.index,
            op: atomic.op,
            fetch: atomic.fetch,
            release: atomic.order.releases(),
            acquire: atomic.order.acquires(),
            stamp,
            seq,
            back,
            back_ns: 0.0,
        };
        self.start(atomic.peer as u32, route, clock, remote);
        Ok(())
    }

    /// An atomic that does not fetch.
    pub(crate) fn atomic(&mut self, atomic: Atomic<'_>) -> Result<(), KernelError> {
        let op = atomic.op.op(atomic.fetch);
        self.check_atomic(op, atomic.buffer, atomic.index)?;
        if atomic.peer == self.rank() as usize {
            return self.atomic_here(&atomic, op).map(|_| ());
        }
        self.start_atomic(&atomic, op)
    }

    /// An atomic that fetches: at once on its own copy, a request and the old value back on a peer's.
    pub(crate) fn poll_fetch(&mut self, atomic: Atomic<'_>) -> Poll<Result<i64, KernelError>> {
        let op = atomic.op.op(true);
        if self.ctx.parked.wait == Wait::Get {
            return match self.take_reply(op) {
                Poll::Ready(reply) => Poll::Ready(
                    reply.map(|tile| tile.to_vec::<i64>().ok().and_then(|v| v.first().copied()).unwrap_or(0)),
                ),
                Poll::Pending => Poll::Pending,
            };
        }
        let started = self.ctx.check_steps().and_then(|()| self.check_atomic(op, atomic.buffer, atomic.index));
        if let Err(e) = started {
            return Poll::Ready(Err(e));
        }
        if atomic.peer == self.rank() as usize {
            return Poll::Ready(self.atomic_here(&atomic, op));
        }
        if let Err(e) = self.start_atomic(&atomic, op) {
            return Poll::Ready(Err(e));
        }
        self.ctx.park(Wait::Get);
        Poll::Pending
    }

    /// Waits until element `index` of this PE's copy compares as asked; then loads it atomically,
    /// acquiring, at the time the write that made it so landed.
    pub(crate) fn poll_wait_value(&mut self, wait: ValueWait<'_>) -> Poll<Result<i64, KernelError>> {
        let ValueWait { buffer, index, cmp, operand, scope, site } = wait;
        let checked = self.ctx.check_steps().and_then(|()| self.check_atomic(Op::WaitValue, buffer, index));
        if let Err(e) = checked {
            return Poll::Ready(Err(e));
        }
        let (pe, detector, task) = (self.ctx.pe_id(), self.run.detector, self.ctx.task);
        let copy = match self.pe.get_or_insert_default().heap.buffer(pe, buffer, detector) {
            Ok(copy) => copy,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let value = copy.element(index).unwrap_or(0);
        let landed_ns = copy.landed_ns;
        let memory = self.pe.as_mut().expect("made above");
        memory.value_waits.retain(|w| w.task != task);
        if !cmp.holds(value, operand) {
            let waiting = ValueWaiting { task, buffer: *buffer, index, cmp, operand, value, site };
            memory.value_waits.push(waiting);
            self.ctx.park(Wait::Value);
            return Poll::Pending;
        }
        self.ctx.parked.wait = Wait::None;
        self.ctx.lane.clock.advance_to(SpanKind::SignalWait, landed_ns, 0, false);
        if detector {
            let sync = self.ctx.sync();
            let stamp = sync.atomic(Op::WaitValue, site, scope);
            let clock = sync.knowledge();
            let apply = AtomicApply {
                owner: pe,
                buffer,
                index,
                access: ElementAccess::Waited(cmp, operand),
                stamp: Some(stamp),
                clock: Some(&clock),
                release: false,
                acquire: true,
            };
            let (run, tasks) = (self.run, &self.lanes.tasks);
            let memory = self.pe.get_or_insert_default();
            match memory.heap.atomic(apply, detector, run.strong(tasks), |s| access(tasks, s)) {
                Ok((_, Some(acquired))) => self.ctx.sync().acquire_clock(&acquired),
                Ok((_, None)) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        self.ctx.step_done(Op::WaitValue, None);
        Poll::Ready(Ok(value))
    }

    /// The window registered as `name`.
    pub(crate) fn window(&mut self, name: &str) -> Result<Symmetric, KernelError> {
        let pe = self.ctx.pe_id();
        let memory = self.pe.get_or_insert_default();
        if let Some(window) = memory.heap.windows().find(|w| w.name == name) {
            return Ok(*window);
        }
        let registered = memory.heap.windows().map(|w| w.name).collect();
        Err(KernelError::NoSuchWindow { pe, name: name.to_owned(), registered })
    }

    /// Waits until this PE's `signal` compares with `value` as asked, for the lane's generation.
    pub(crate) fn poll_wait_signal(&mut self, signal: usize, cmp: Cmp, value: u64) -> Poll<Result<u64, KernelError>> {
        let checked = self.ctx.check_steps().and_then(|()| check_signal(self.ctx.pe_id(), Op::WaitSignal, signal));
        let signal = match checked {
            Ok(signal) => signal,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let generation = self.ctx.lane.generation;
        let state = self.pe.get_or_insert_default().signals.get(signal);
        let holds = state.value(generation);
        if !cmp.holds(holds, value) {
            self.ctx.lane.set_signal_until(value);
            self.ctx.park(Wait::Signal { signal: signal as u32, cmp });
            return Poll::Pending;
        }
        // A wait for at least `value` takes that much of the signal; any other takes what it saw.
        state.wait_done(generation, if cmp == Cmp::Ge { value } else { holds });
        let raises = state.reaching(generation, cmp, value);
        if let Some(last) = raises.last() {
            self.ctx.lane.clock.advance_to(SpanKind::SignalWait, last.at_ns, 0, false);
        }
        if self.run.detector && raises.iter().any(|r| r.clock.is_some()) {
            let sync = self.ctx.lane.sync(self.ctx.task);
            for raise in &raises {
                if let Some(clock) = &raise.clock {
                    sync.acquire(clock);
                }
            }
        }
        self.ctx.parked.wait = Wait::None;
        self.ctx.step_done(Op::WaitSignal, None);
        Poll::Ready(Ok(holds))
    }

    /// The reply a parked get or fetching atomic waits for, once it has come.
    pub(crate) fn take_reply(&mut self, op: Op) -> Poll<Result<Tile, KernelError>> {
        let task = self.ctx.task;
        let replies = self.pe.as_mut().map(|m| &mut m.replies);
        let Some(at) = replies.as_ref().and_then(|r| r.iter().position(|&(t, ..)| t == task)) else {
            self.ctx.park(Wait::Get);
            return Poll::Pending;
        };
        let (_, reply, at_ns) = replies.expect("a reply was found").swap_remove(at);
        self.ctx.parked.wait = Wait::None;
        let bytes = reply.as_ref().map_or(0, |t| t.bytes() as u64);
        self.ctx.lane.clock.advance_to(SpanKind::Recv, at_ns, bytes, false);
        self.ctx.step_done(op, None);
        Poll::Ready(reply)
    }
}

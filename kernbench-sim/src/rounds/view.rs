//! The [`Backend`] a lane's `tl` calls reach while it is polled: each call goes to the traffic it
//! belongs to, with the parts of the run that traffic may touch (rule P of the round protocol).

use std::task::{Context, Poll};

use std::sync::Arc;

use kernbench_core::atomic::Cmp;
use kernbench_core::symmetric::{Allocation, Atomic, ValueWait};
use kernbench_core::symmetric::{CallSite, Multicast, MultimemStore, OneSided, Put, Symmetric, Team};
use kernbench_core::tl::{Backend, Work, message_generation};
use kernbench_core::{Buffer, Direction, Dtype, Group, KernelError, Op, PeId, ReduceOp, Tile, WatchdogBudget};

use super::Execution;
use crate::lanes::LaneCtx;
use crate::one_sided::{Initiator, PeOneSided};
use crate::timing::SpanKind;
use crate::two_sided::{BarrierKey, Endpoint, PeLinks};

/// One lane of one PE for one poll.
pub(crate) struct PeView<'v, 'a> {
    pub(crate) ctx: LaneCtx<'v>,
    pub(crate) links: &'v mut PeLinks,
    pub(crate) memory: &'v mut Option<Box<PeOneSided>>,
    pub(crate) run: &'v Execution<'a>,
}

impl PeView<'_, '_> {
    #[inline]
    fn endpoint(&mut self) -> Endpoint<'_> {
        Endpoint { ctx: self.ctx.reborrow(), links: self.links, run: &self.run.two_sided, tasks: &self.run.lanes.tasks }
    }

    #[inline]
    fn initiator(&mut self) -> Initiator<'_> {
        Initiator {
            ctx: self.ctx.reborrow(),
            pe: self.memory,
            links: self.links,
            queues: &self.run.two_sided.queues,
            run: &self.run.one_sided,
            lanes: &self.run.lanes,
        }
    }

    /// The lane's call's `buffer` (each of several calls run together has its own).
    fn buffer(&mut self, buffer: Buffer) -> &mut Tile {
        let pe = &mut *self.ctx.pe;
        if let Some(later) = (self.ctx.lane.call as usize).checked_sub(1) {
            let [input, output, scratch] = &mut pe.rare().later_calls[later];
            return match buffer {
                Buffer::Input => input,
                Buffer::Output => output,
                Buffer::Scratch => scratch,
            };
        }
        match buffer {
            Buffer::Input => &mut pe.input,
            Buffer::Output => &mut pe.output,
            Buffer::Scratch => pe.scratch(),
        }
    }

    /// Barrier `key` of the lane's call: calls run together each have their own.
    fn barrier_of_call(&self, key: BarrierKey) -> BarrierKey {
        match self.ctx.lane.call {
            0 => key,
            call => BarrierKey::Call(call, Box::new(key)),
        }
    }
}

// A lane that must wait parks (its wait set in its cell) and the runtime lists its task when what it
// waits for comes: the poll's context is not kept, in these operations or the one-sided ones.
impl Backend for PeView<'_, '_> {
    fn poll_send(
        &mut self,
        direction: Direction,
        channel: usize,
        tile: &Tile,
        _cx: &mut Context<'_>,
    ) -> Poll<Result<(), KernelError>> {
        self.endpoint().poll_send(direction, channel, tile)
    }

    fn poll_recv(
        &mut self,
        direction: Direction,
        channel: usize,
        len: usize,
        dtype: Dtype,
        _cx: &mut Context<'_>,
    ) -> Poll<Result<Tile, KernelError>> {
        self.endpoint().poll_recv(direction, channel, len, dtype)
    }

    fn poll_barrier(&mut self, group: Group, _cx: &mut Context<'_>) -> Poll<Result<(), KernelError>> {
        let key = self.barrier_of_call(BarrierKey::of_group(group, self.ctx.pe_id()));
        self.endpoint().poll_barrier(key)
    }

    fn poll_barrier_team(&mut self, team: &Team, _cx: &mut Context<'_>) -> Poll<Result<(), KernelError>> {
        let key = self.barrier_of_call(BarrierKey::Team(team.shared_members().clone()));
        self.endpoint().poll_barrier(key)
    }

    fn placement(&self, rank: usize) -> Option<(PeId, u32)> {
        let pe = *self.run.lanes.tasks.pes().get(rank)?;
        Some((pe, self.run.one_sided.system.node_of(pe.sip)))
    }

    fn one_sided(&mut self) -> Option<&mut dyn OneSided> {
        // Calls run together would share each PE's symmetric heap, which is not kept apart by call.
        (self.run.generations.len() == 1).then_some(self as &mut dyn OneSided)
    }

    fn has(&self, direction: Direction) -> bool {
        self.links.find(direction).is_some()
    }

    fn load(&mut self, buffer: Buffer) -> Result<Tile, KernelError> {
        Ok(self.buffer(buffer).clone())
    }

    fn store(&mut self, buffer: Buffer, offset: Option<usize>, tile: &Tile) -> Result<(), KernelError> {
        let pe = self.ctx.pe_id();
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
        self.ctx.lane.watch.loops_left
    }

    fn set_loops_left(&mut self, left: u64) {
        self.ctx.lane.watch.loops_left = left;
    }

    fn out_of_loops(&mut self) -> Result<(), KernelError> {
        Err(self.ctx.watchdog(WatchdogBudget::LoopIterations(self.ctx.budget.loops)))
    }

    fn note(&mut self, key: &str, value: String) {
        self.ctx.pe.rare().notes.insert(key.to_owned(), value);
    }

    fn wake_hint(&mut self, start: *const u8, bytes: usize) {
        self.run.lanes.wake_hints.set(self.ctx.task, (start, bytes));
    }

    fn set_phase(&mut self, phase: u8) {
        self.ctx.lane.generation = message_generation(self.run.generations[self.ctx.lane.call as usize], phase);
    }

    fn charge(&mut self, work: Work) {
        let rates = *self.ctx.rates();
        let lane = &mut *self.ctx.lane;
        let (kind, ns, bytes) = match work {
            Work::Reduce { elements, dtype } => {
                lane.figures.reduced_elements += elements as u64;
                (SpanKind::Reduce, elements as f64 * rates.ns_per_element, (elements * dtype.size()) as u64)
            }
            Work::Memory { bytes } => {
                lane.figures.memory_bytes += bytes as u64;
                (SpanKind::Memory, bytes as f64 * rates.ns_per_byte, bytes as u64)
            }
        };
        self.ctx.spend(kind, ns, bytes);
    }
}

impl OneSided for PeView<'_, '_> {
    fn declare(&mut self, buffer: &Symmetric) -> Result<(), KernelError> {
        self.initiator().declare(buffer)
    }

    fn read(&mut self, buffer: &Symmetric, offset: usize, len: usize, site: CallSite) -> Result<Tile, KernelError> {
        self.initiator().read(buffer, offset, len, site)
    }

    fn write(&mut self, buffer: &Symmetric, offset: usize, tile: &Tile, site: CallSite) -> Result<(), KernelError> {
        self.initiator().write(buffer, offset, tile, site)
    }

    fn put(&mut self, put: Put<'_>) -> Result<(), KernelError> {
        self.initiator().put(put)
    }

    fn poll_get(
        &mut self,
        peer: usize,
        buffer: &Symmetric,
        offset: usize,
        len: usize,
        site: CallSite,
        _cx: &mut Context<'_>,
    ) -> Poll<Result<Tile, KernelError>> {
        self.initiator().poll_get(peer, buffer, offset, len, site)
    }

    fn signal(&mut self, peer: usize, signal: usize, add: u64) -> Result<(), KernelError> {
        self.initiator().signal(peer, signal, add)
    }

    fn poll_wait(
        &mut self,
        signal: usize,
        cmp: Cmp,
        value: u64,
        _cx: &mut Context<'_>,
    ) -> Poll<Result<u64, KernelError>> {
        self.initiator().poll_wait_signal(signal, cmp, value)
    }

    fn reset(&mut self, signal: usize) -> Result<(), KernelError> {
        self.initiator().reset(signal)
    }

    fn fence(&mut self) {
        self.initiator().fence();
    }

    fn poll_quiet(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), KernelError>> {
        self.initiator().poll_quiet()
    }

    fn multicast(&mut self, buffer: &Symmetric, members: &Arc<[usize]>) -> Result<Multicast, KernelError> {
        self.initiator().multicast(buffer, members)
    }

    fn multimem_store(&mut self, store: MultimemStore<'_>) -> Result<(), KernelError> {
        self.initiator().multimem_store(store)
    }

    fn poll_multimem_ld_reduce(
        &mut self,
        multicast: &Multicast,
        offset: usize,
        len: usize,
        op: ReduceOp,
        site: CallSite,
        _cx: &mut Context<'_>,
    ) -> Poll<Result<Tile, KernelError>> {
        self.initiator().poll_multimem_ld_reduce(multicast, offset, len, op, site)
    }

    fn atomic(&mut self, atomic: Atomic<'_>) -> Result<(), KernelError> {
        self.initiator().atomic(atomic)
    }

    fn poll_fetch(&mut self, atomic: Atomic<'_>, _cx: &mut Context<'_>) -> Poll<Result<i64, KernelError>> {
        self.initiator().poll_fetch(atomic)
    }

    fn poll_wait_value(&mut self, wait: ValueWait<'_>, _cx: &mut Context<'_>) -> Poll<Result<i64, KernelError>> {
        self.initiator().poll_wait_value(wait)
    }

    fn window(&mut self, name: &str) -> Result<Symmetric, KernelError> {
        self.initiator().window(name)
    }

    fn poll_alloc(&mut self, allocation: Allocation, _cx: &mut Context<'_>) -> Poll<Result<(), KernelError>> {
        if self.ctx.parked.wait == crate::lanes::Wait::None {
            if let Err(e) = self.initiator().declare(&allocation.buffer) {
                return Poll::Ready(Err(e));
            }
        }
        let key = BarrierKey::of_group(Group::All, self.ctx.pe_id());
        self.endpoint().poll_collective(key, Some((allocation.buffer, allocation.site)))
    }
}

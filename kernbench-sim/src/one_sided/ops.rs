//! A lane's one-sided operations while it is polled (rule P of the round protocol): reads and writes of
//! its own copy of the heap at once, puts, gets and signals to the outbox until the round is merged,
//! waits on its own signals.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;

use kernbench_core::symmetric::{CallSite, Multicast, MultimemStore, Put, Symmetric};
use kernbench_core::{Dtype, KernelError, Op, PeId, ReduceOp, Tile};

use super::heap::{HeapBuffer, Raise, check_signal};
use super::op::{OneSidedOp, Outgoing, Part};
use super::{OneSidedRun, PeOneSided, access, conflict_error};
use crate::lanes::{LaneCtx, Lanes, Wait};
use crate::race::{Conflict, Released, Stamp};
use crate::timing::SpanKind;
use crate::two_sided::PeLinks;
use crate::two_sided::queue::Queues;

/// A lane being polled, as the initiator of one-sided operations, with what they touch: its PE's
/// symmetric memory, its ports (whose queues give the routes to its peers) and the run's lanes (a raise
/// of the PE's own signal wakes its other lanes).
pub(crate) struct Initiator<'v> {
    pub(crate) ctx: LaneCtx<'v>,
    pub(crate) pe: &'v mut Option<Box<PeOneSided>>,
    pub(crate) links: &'v PeLinks,
    pub(crate) queues: &'v Queues,
    pub(crate) run: &'v OneSidedRun,
    pub(crate) lanes: &'v Lanes<'v>,
}

impl Initiator<'_> {
    /// The PE's symmetric memory, made on first use.
    fn memory(&mut self) -> &mut PeOneSided {
        self.pe.get_or_insert_default()
    }

    pub(super) fn rank(&self) -> u32 {
        self.lanes.tasks.rank(self.ctx.task)
    }

    /// The route to rank `peer` for a one-sided `op`: the queues of channel 0 to and from it.
    pub(super) fn peer(&mut self, peer: usize, op: Op) -> Result<(u32, u32), KernelError> {
        let (rank, pe) = (self.rank(), self.ctx.pe_id());
        let (links, queues) = (self.links, self.queues);
        let memory = self.pe.get_or_insert_default();
        let peers = memory.peers.get_or_insert_with(|| peers_of(rank, links, queues));
        match peers.binary_search_by_key(&peer, |&(rank, ..)| rank as usize) {
            Ok(i) => Ok((peers[i].1, peers[i].2)),
            Err(_) => Err(KernelError::NotAPeer {
                pe,
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
            pe: self.ctx.pe_id(),
            op,
            buffer: *buffer,
            offset,
            len,
            dtype,
        })
    }

    /// Injects a one-sided operation and queues it for the end of the round.
    pub(super) fn start(&mut self, to: u32, route: u32, clock: Option<Released>, op: OneSidedOp) {
        let (task, generation) = (self.ctx.task, self.ctx.lane.generation);
        let mut out = Outgoing { task, generation, to, route, depart_ns: 0.0, arrive_ns: 0.0, clock, op };
        let bytes = out.bytes();
        self.ctx.inject(bytes);
        let now = self.ctx.lane.clock.now;
        (out.depart_ns, out.arrive_ns) = (now, now);
        let f = &mut self.ctx.lane.figures;
        f.messages_sent += 1;
        f.bytes_sent += bytes;
        self.memory().outbox.push(out);
        self.run.used.store(true, Ordering::Relaxed);
    }

    /// This PE's copy of `buffer`, once the race detector (when on) has checked and recorded this
    /// lane's `op` (`Read` or `Write`) of `bytes` of it.
    fn local_access(
        &mut self,
        op: Op,
        buffer: &Symmetric,
        bytes: std::ops::Range<u64>,
        site: CallSite,
    ) -> Result<&mut HeapBuffer, KernelError> {
        let (pe, detector) = (self.ctx.pe_id(), self.run.detector);
        let copy = self.pe.get_or_insert_default().heap.buffer(pe, buffer, detector)?;
        let window = copy.window;
        if let (Some(shadow), false) = (&mut copy.shadow, bytes.is_empty()) {
            let sync = self.ctx.lane.sync(self.ctx.task);
            let stamp = sync.local_access(op, site);
            let checked = match op {
                Op::Write => shadow.write(bytes, stamp, sync.clock()),
                _ => shadow.read(bytes, stamp, sync.clock()),
            };
            if let Err(conflict) = checked {
                return Err(self.conflict(conflict, (buffer.name, window), &stamp));
            }
        }
        self.memory().heap.buffer(pe, buffer, detector)
    }

    /// The error for what the race detector found on this PE's copy of `buffer`.
    fn conflict(&self, conflict: Conflict, buffer: (&'static str, bool), stamp: &Stamp) -> KernelError {
        let tasks = &self.lanes.tasks;
        conflict_error(|s| access(tasks, s), conflict, self.ctx.pe_id(), buffer, stamp)
    }

    /// Declares `buffer` on this PE.
    pub(crate) fn declare(&mut self, buffer: &Symmetric) -> Result<(), KernelError> {
        let (pe, detector) = (self.ctx.pe_id(), self.run.detector);
        self.memory().heap.buffer(pe, buffer, detector).map(|_| ())
    }

    /// Reads `len` elements at `offset` of this PE's copy of `buffer`.
    pub(crate) fn read(
        &mut self,
        buffer: &Symmetric,
        offset: usize,
        len: usize,
        site: CallSite,
    ) -> Result<Tile, KernelError> {
        let bytes = self.range(Op::Read, buffer, offset, len, buffer.dtype)?;
        let pe = self.ctx.pe_id();
        let copy = self.local_access(Op::Read, buffer, bytes, site)?;
        copy.data.slice(offset..offset + len).map_err(|source| KernelError::Tile { pe, op: Op::Read, source })
    }

    /// Writes `tile` at `offset` of this PE's copy of `buffer`.
    pub(crate) fn write(
        &mut self,
        buffer: &Symmetric,
        offset: usize,
        tile: &Tile,
        site: CallSite,
    ) -> Result<(), KernelError> {
        let bytes = self.range(Op::Write, buffer, offset, tile.len(), tile.dtype())?;
        let pe = self.ctx.pe_id();
        let copy = self.local_access(Op::Write, buffer, bytes, site)?;
        copy.write(offset, tile).map_err(|source| KernelError::Tile { pe, op: Op::Write, source })?;
        self.wake_values();
        Ok(())
    }

    /// Wakes the PE's other lanes that wait on an element's value: this lane changed its memory.
    pub(super) fn wake_values(&self) {
        if self.lanes.tasks.lanes_of(self.rank()).len() > 1 {
            // SAFETY: rule P: the PE's lanes are this thread's, and only the one polled is borrowed.
            unsafe { self.lanes.wake(self.rank(), Some(self.ctx.task), |wait| wait == Wait::Value) };
        }
    }

    /// Starts a put (with its signal, if any) into a peer's copy.
    pub(crate) fn put(&mut self, put: Put<'_>) -> Result<(), KernelError> {
        let op = if put.signal.is_some() { Op::PutSignal } else { Op::Put };
        let (route, _) = self.peer(put.peer, op)?;
        self.range(op, put.buffer, put.offset, put.tile.len(), put.tile.dtype())?;
        let signal = match put.signal {
            Some((signal, add)) => Some((check_signal(self.ctx.pe_id(), op, signal)?, add)),
            None => None,
        };
        let (stamp, clock, seq) = if self.run.detector {
            let sync = self.ctx.sync();
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

    /// Reads `len` elements at `offset` of a peer's copy: a request, then the data back.
    pub(crate) fn poll_get(
        &mut self,
        peer: usize,
        buffer: &Symmetric,
        offset: usize,
        len: usize,
        site: CallSite,
    ) -> Poll<Result<Tile, KernelError>> {
        if self.ctx.parked.wait == Wait::Get {
            return self.take_reply(Op::Get);
        }
        if let Err(e) = self.ctx.check_steps() {
            return Poll::Ready(Err(e));
        }
        let (route, back) = match self.peer(peer, Op::Get) {
            Ok(routes) => routes,
            Err(e) => return Poll::Ready(Err(e)),
        };
        if let Err(e) = self.range(Op::Get, buffer, offset, len, buffer.dtype) {
            return Poll::Ready(Err(e));
        }
        let (stamp, clock) = if self.run.detector {
            let sync = self.ctx.sync();
            (Some(sync.local_access(Op::Get, site)), Some(sync.knowledge()))
        } else {
            (None, None)
        };
        let op = OneSidedOp::Get { buffer: *buffer, offset, len, stamp, back, back_ns: 0.0 };
        self.start(peer as u32, route, clock, op);
        self.ctx.park(Wait::Get);
        Poll::Pending
    }

    /// Raises `signal` of rank `peer` by `add` (its own at once, a peer's when the round is merged).
    pub(crate) fn signal(&mut self, peer: usize, signal: usize, add: u64) -> Result<(), KernelError> {
        let signal = check_signal(self.ctx.pe_id(), Op::Signal, signal)?;
        let rank = self.rank();
        let own = peer == rank as usize;
        let route = if own { None } else { Some(self.peer(peer, Op::Signal)?.0) };
        let clock = if self.run.detector { Some(self.ctx.sync().release()) } else { None };
        let Some(route) = route else {
            // A raise of one's own signal (between the lanes of a PE) lands at once.
            let raise = Raise { add, at_ns: self.ctx.lane.clock.now, generation: self.ctx.lane.generation, clock };
            self.memory().signals.raise(signal, raise);
            // SAFETY: rule P: the PE's lanes are this thread's, and only the one polled is borrowed.
            unsafe {
                self.lanes.wake(
                    rank,
                    Some(self.ctx.task),
                    |wait| matches!(wait, Wait::Signal { signal: s, .. } if s as usize == signal),
                );
            }
            return Ok(());
        };
        self.start(peer as u32, route, clock, OneSidedOp::Signal { signal, add });
        Ok(())
    }

    /// Spans `buffer` with a multicast object over `members`, once their PEs are known to share one
    /// and the run to be in this process alone.
    pub(crate) fn multicast(&mut self, buffer: &Symmetric, members: &Arc<[usize]>) -> Result<Multicast, KernelError> {
        let pe = self.ctx.pe_id();
        let pes = self.lanes.tasks.pes();
        // Errors name the call: `tl.multicast` spans every rank, `tl.multicast_team` a team's.
        let op = if members.len() == pes.len() { Op::Multicast } else { Op::MulticastTeam };
        if let Some(&member) = members.iter().find(|&&m| m >= pes.len()) {
            let message = format!("a multicast object over rank {member}, past the run's {} ranks", pes.len());
            return Err(KernelError::kernel(pe, message));
        }
        let member_pes: Vec<PeId> = members.iter().map(|&m| pes[m]).collect();
        if let Err(source) = self.run.system.check_multicast(&member_pes) {
            return Err(KernelError::NoMulticast { pe, op, source });
        }
        // Even a team held by this process is refused in a spread run: the other processes would see
        // its transfers as plain ones, and time the run otherwise.
        if let Some(member) = (0..pes.len()).find(|&rank| !self.lanes.tasks.holds(rank as u32)) {
            return Err(KernelError::MulticastSpread { pe, op, member });
        }
        self.declare(buffer)?;
        let joined = &mut self.memory().joined;
        if !joined.contains(&buffer.name) {
            joined.push(buffer.name);
        }
        Ok(Multicast { buffer: *buffer, members: members.clone() })
    }

    /// The parts' routes of a multimem operation over every member, in member order, and the
    /// requester's own: each part's member (its global rank), [`Part`] and queues `(to, from)`, whose
    /// last and first channels are the switch's link down to the member and the member's link up (see
    /// [`Outgoing::member_legs`]). For the requester itself, any of its queues to and from a peer
    /// serves: its first channel is the requester's link up, the other's last its link down.
    ///
    /// [`Outgoing::member_legs`]: super::op::Outgoing::member_legs
    fn fan_out(&mut self, multicast: &Multicast, op: Op) -> Result<Vec<(u32, Part, u32, u32)>, KernelError> {
        let rank = self.rank() as usize;
        let Some(own) = multicast.members.iter().position(|&m| m == rank) else {
            let message = format!("{op} through {multicast}, which does not span this PE's rank {rank}");
            return Err(KernelError::kernel(self.ctx.pe_id(), message));
        };
        let others = multicast.members.iter().copied().filter(|&m| m != rank);
        let mut legs = Vec::with_capacity(multicast.members.len());
        for member in others {
            legs.push((member, self.peer(member, op)?));
        }
        let (up, down) = match legs.first() {
            Some(&(_, (to, from))) => (to, from),
            None => return Ok(Vec::new()),
        };
        legs.insert(own, (rank, (down, up)));
        let parts = legs.len() as u32;
        Ok(legs
            .into_iter()
            .enumerate()
            .map(|(part, (member, (to, from)))| (member as u32, Part { part: part as u32, parts, up, down }, to, from))
            .collect())
    }

    /// Injects the parts of a multimem operation, once for all (its bytes cross the requester's
    /// link once), and queues them for the end of the round.
    fn start_parts(&mut self, clock: Option<Released>, parts: impl Iterator<Item = (u32, u32, OneSidedOp)>) {
        let (task, generation) = (self.ctx.task, self.ctx.lane.generation);
        let mut injected = false;
        for (to, route, op) in parts {
            let mut out =
                Outgoing { task, generation, to, route, depart_ns: 0.0, arrive_ns: 0.0, clock: clock.clone(), op };
            if !injected {
                let bytes = out.bytes();
                self.ctx.inject(bytes);
                let f = &mut self.ctx.lane.figures;
                f.messages_sent += 1;
                f.bytes_sent += bytes;
                injected = true;
            }
            let now = self.ctx.lane.clock.now;
            (out.depart_ns, out.arrive_ns) = (now, now);
            self.memory().outbox.push(out);
        }
        self.run.used.store(true, Ordering::Relaxed);
    }

    /// Starts a store (or reduction) of `tile` into every member's copy through the switch. Ordered as
    /// a plain put to each member: one put of the lane, landing once on each.
    pub(crate) fn multimem_store(&mut self, store: MultimemStore<'_>) -> Result<(), KernelError> {
        let MultimemStore { multicast, offset, tile, reduce, site } = store;
        let op = if reduce.is_some() { Op::MultimemRed } else { Op::MultimemSt };
        self.range(op, &multicast.buffer, offset, tile.len(), tile.dtype())?;
        let fan = self.fan_out(multicast, op)?;
        if fan.is_empty() {
            // One member: its own copy, written here.
            return self.one_member_store(multicast, offset, tile, reduce, site, op);
        }
        let (stamp, clock, seq) = if self.run.detector {
            let sync = self.ctx.sync();
            let stamp = Stamp { op, ..sync.put(site) };
            (Some(stamp), Some(sync.knowledge()), sync.all_puts)
        } else {
            (None, None, 0)
        };
        let buffer = multicast.buffer;
        let parts = fan.into_iter().map(|(member, part, to, _)| {
            let site = Some(site);
            let op = OneSidedOp::MultiStore { buffer, offset, tile: tile.clone(), reduce, fan: part, seq, stamp, site };
            (member, to, op)
        });
        self.start_parts(clock, parts);
        Ok(())
    }

    /// A multimem store over one member: a write (or reduction) of this PE's own copy.
    fn one_member_store(
        &mut self,
        multicast: &Multicast,
        offset: usize,
        tile: &Tile,
        reduce: Option<ReduceOp>,
        site: CallSite,
        op: Op,
    ) -> Result<(), KernelError> {
        let pe = self.ctx.pe_id();
        let bytes = self.range(op, &multicast.buffer, offset, tile.len(), tile.dtype())?;
        let copy = self.local_access(Op::Write, &multicast.buffer, bytes, site)?;
        let tile_error = |source| KernelError::Tile { pe, op, source };
        let written = match reduce {
            Some(reduce) => {
                let mut acc = copy.data.slice(offset..offset + tile.len()).map_err(tile_error)?;
                acc.reduce_in_place(tile, reduce).map_err(tile_error)?;
                acc
            }
            None => tile.clone(),
        };
        copy.write(offset, &written).map_err(tile_error)?;
        self.wake_values();
        Ok(())
    }

    /// Reads `len` elements at `offset` of every member's copy, reduced by `op` in the switch: the
    /// members' parts come back together, when the switch's result reaches this PE.
    pub(crate) fn poll_multimem_ld_reduce(
        &mut self,
        multicast: &Multicast,
        offset: usize,
        len: usize,
        reduce: ReduceOp,
        site: CallSite,
    ) -> Poll<Result<Tile, KernelError>> {
        const OP: Op = Op::MultimemLdReduce;
        if self.ctx.parked.wait == Wait::Get {
            let task = self.ctx.task;
            let Some(memory) = self.pe.as_mut() else {
                self.ctx.park(Wait::Get);
                return Poll::Pending;
            };
            let arrived = memory.gathered.iter().filter(|&&(t, ..)| t == task).count();
            if arrived < multicast.members.len() {
                self.ctx.park(Wait::Get);
                return Poll::Pending;
            }
            let mut parts: Vec<(u32, Result<Tile, KernelError>, f64)> = Vec::with_capacity(arrived);
            memory.gathered.retain_mut(|(t, part, data, at)| {
                if *t != task {
                    return true;
                }
                let data = std::mem::replace(data, Ok(Tile::zeros(multicast.buffer.dtype, 0)));
                parts.push((*part, data, *at));
                false
            });
            parts.sort_by_key(|&(part, ..)| part);
            self.ctx.parked.wait = Wait::None;
            let at_ns = parts.iter().map(|&(.., at)| at).fold(0.0, f64::max);
            self.ctx.lane.clock.advance_to(SpanKind::Recv, at_ns, (len * multicast.buffer.dtype.size()) as u64, false);
            self.ctx.step_done(OP, None);
            return Poll::Ready(self.reduce_parts(parts.into_iter().map(|(_, data, _)| data), reduce));
        }
        if let Err(e) = self.ctx.check_steps() {
            return Poll::Ready(Err(e));
        }
        let checked = self.range(OP, &multicast.buffer, offset, len, multicast.buffer.dtype).and_then(|bytes| {
            let fan = self.fan_out(multicast, OP)?;
            Ok((bytes, fan))
        });
        let (bytes, fan) = match checked {
            Ok(checked) => checked,
            Err(e) => return Poll::Ready(Err(e)),
        };
        if fan.is_empty() {
            // One member: its own copy, read here.
            let pe = self.ctx.pe_id();
            let copy = match self.local_access(OP, &multicast.buffer, bytes, site) {
                Ok(copy) => copy,
                Err(e) => return Poll::Ready(Err(e)),
            };
            let read = copy.data.slice(offset..offset + len).map_err(|source| KernelError::Tile { pe, op: OP, source });
            return Poll::Ready(read);
        }
        let (stamp, clock) = if self.run.detector {
            let sync = self.ctx.sync();
            (Some(sync.local_access(OP, site)), Some(sync.knowledge()))
        } else {
            (None, None)
        };
        let buffer = multicast.buffer;
        let parts = fan.into_iter().map(|(member, part, to, from)| {
            let (back_ns, site) = (0.0, Some(site));
            let op = OneSidedOp::MultiLoad { buffer, offset, len, op: reduce, fan: part, from, stamp, back_ns, site };
            (member, to, op)
        });
        self.start_parts(clock, parts);
        self.ctx.park(Wait::Get);
        Poll::Pending
    }

    /// The members' parts of a multimem load reduced in member order, as the switch returns them;
    /// the first part that failed fails it.
    fn reduce_parts(
        &self,
        parts: impl Iterator<Item = Result<Tile, KernelError>>,
        reduce: ReduceOp,
    ) -> Result<Tile, KernelError> {
        let pe = self.ctx.pe_id();
        let mut acc: Option<Tile> = None;
        for part in parts {
            let part = part?;
            match &mut acc {
                None => acc = Some(part),
                Some(acc) => acc.reduce_in_place(&part, reduce).map_err(|source| KernelError::Tile {
                    pe,
                    op: Op::MultimemLdReduce,
                    source,
                })?,
            }
        }
        acc.ok_or_else(|| KernelError::kernel(pe, "a multimem load over no members"))
    }

    /// Sets this PE's `signal` back to 0.
    pub(crate) fn reset(&mut self, signal: usize) -> Result<(), KernelError> {
        let signal = check_signal(self.ctx.pe_id(), Op::ResetSignal, signal)?;
        *self.memory().signals.get(signal) = Default::default();
        Ok(())
    }

    /// Orders the lane's earlier puts before its later puts and signals.
    pub(crate) fn fence(&mut self) {
        if let Some(sync) = self.ctx.lane.sync_mut() {
            sync.fence();
        }
    }

    /// Waits until the lane's puts have landed.
    pub(crate) fn poll_quiet(&mut self) -> Poll<Result<(), KernelError>> {
        let task = self.ctx.task;
        // Puts of this round land when the round is merged.
        if self.pe.as_ref().is_some_and(|m| m.outbox.iter().any(|o| o.task == task)) {
            self.ctx.park(Wait::Quiet);
            return Poll::Pending;
        }
        self.ctx.parked.wait = Wait::None;
        let lane = &mut *self.ctx.lane;
        let landed_ns = lane.landed_ns();
        lane.clock.advance_to(SpanKind::SignalWait, landed_ns, 0, false);
        if let Some(sync) = lane.sync_mut() {
            sync.quiet();
        }
        Poll::Ready(Ok(()))
    }
}

/// The ranks rank `rank`'s one-sided operations may address: the peers of its ports, with the queues of
/// channel 0 to and from each (their routes), sorted by rank.
fn peers_of(rank: u32, links: &PeLinks, queues: &Queues) -> Vec<(u32, u32, u32)> {
    let mut peers: Vec<(u32, u32, u32)> = links
        .ports
        .iter()
        .filter_map(|p| queues.get(p.out_queue as usize).map(|q| (q, p)))
        .filter(|(q, _)| q.sender == rank)
        .map(|(q, p)| (q.receiver, p.out_queue, p.in_queue))
        .collect();
    peers.sort_unstable();
    peers.dedup_by_key(|p| p.0);
    peers
}

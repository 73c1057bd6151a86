//! One-sided operations in flight: what each kind is, what it puts on the wire, what it does when it
//! reaches its target, and how it crosses to another process. The one place that tells the kinds apart.

use kernbench_core::atomic::AtomicOp;
use kernbench_core::symmetric::{CallSite, Symmetric};
use kernbench_core::{KernelError, Op, ReduceOp, Tile};

use super::heap::{AtomicApply, ElementAccess, Raise, RemoteAccess as Access_};
use super::{OneSidedRun, access, morally_strong};
use crate::error::{ExchangeError, RunError};
use crate::lanes::{Lanes, Wait};
use crate::race::{Released, Stamp};
use crate::timing::{Multicast, Transfer};
use crate::wire::{Reader, Writer, read_buffer, read_tile, write_buffer, write_tile};

/// Bytes of a signal, or of a get's request, on the wire.
const CONTROL_BYTES: u64 = 8;

/// What a one-sided operation does when it reaches its target.
pub(crate) enum OneSidedOp {
    /// Writes `tile` at `offset`; raises `signal` after, if any.
    Put { buffer: Symmetric, offset: usize, tile: Tile, signal: Option<(usize, u64)>, seq: u32, stamp: Option<Stamp> },
    /// Raises `signal` by `add`.
    Signal { signal: usize, add: u64 },
    /// Reads `len` elements from `offset` and sends them back on `back` (the target's queue to the
    /// requester), arriving at `back_ns`.
    Get { buffer: Symmetric, offset: usize, len: usize, stamp: Option<Stamp>, back: u32, back_ns: f64 },
    /// One member's part of a `multimem_ld_reduce`: reads `len` elements from `offset` of the member's
    /// copy for the switch, which reduces every member's by `op`; the result reaches the requester at
    /// `back_ns`. `from` is the queue whose first channel is the member's link up to the switch.
    MultiLoad {
        buffer: Symmetric,
        offset: usize,
        len: usize,
        op: ReduceOp,
        fan: Part,
        from: u32,
        stamp: Option<Stamp>,
        back_ns: f64,
        site: Option<CallSite>,
    },
    /// One member's part of a `multimem_st` (`reduce: None`) or `multimem_red`: writes (or reduces)
    /// `tile` at `offset` of the member's copy, as a plain put does.
    MultiStore {
        buffer: Symmetric,
        offset: usize,
        tile: Tile,
        reduce: Option<ReduceOp>,
        fan: Part,
        seq: u32,
        stamp: Option<Stamp>,
        site: Option<CallSite>,
    },
    /// An atomic on element `index`; a fetching one sends the old value back on `back`, arriving at
    /// `back_ns`; one that does not completes its lane's quiet as a put does (`seq` is its put count).
    Atomic {
        buffer: Symmetric,
        index: usize,
        op: AtomicOp,
        fetch: bool,
        release: bool,
        acquire: bool,
        stamp: Option<Stamp>,
        seq: u32,
        back: u32,
        back_ns: f64,
    },
}

/// Where a part of a multimem operation sits among its parts (one per member, made together and
/// consecutive in the outbox), and the requester's own links to the switch: `up` is a queue whose
/// first channel is the requester's link to the switch, `down` one whose last channel is the
/// switch's link to it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Part {
    pub(crate) part: u32,
    pub(crate) parts: u32,
    pub(crate) up: u32,
    pub(crate) down: u32,
}

/// A one-sided operation a lane started this round.
pub(crate) struct Outgoing {
    /// The lane.
    pub(crate) task: u32,
    /// The lane's generation (call and phase) when it started it.
    pub(crate) generation: u64,
    /// The target's rank.
    pub(crate) to: u32,
    /// The queue whose route it takes (the PE's first channel to the target).
    pub(crate) route: u32,
    pub(crate) depart_ns: f64,
    /// When it reaches the target (set when the round's transfers are placed).
    pub(crate) arrive_ns: f64,
    /// What the lane had released with it (a write's check, a signal's acquire), under the detector.
    pub(crate) clock: Option<Released>,
    pub(crate) op: OneSidedOp,
}

/// A get's reply for a lane: the lane, its data or error, when it arrives.
pub(crate) type GetReply = (u32, Result<Tile, KernelError>, f64);

/// A put recorded for the check at the end of the run: it must have been completed by its lane's quiet
/// (or a barrier) or seen by a lane of its target.
pub(crate) struct PutRecord {
    pub(crate) task: u32,
    pub(crate) to: u32,
    pub(crate) seq: u32,
    pub(crate) stamp: Stamp,
    pub(crate) buffer: &'static str,
    pub(crate) bytes: std::ops::Range<u64>,
}

impl Outgoing {
    /// Bytes on the wire towards the target (for a multimem operation, from the requester to the
    /// switch, once for all its parts).
    pub(crate) fn bytes(&self) -> u64 {
        match &self.op {
            OneSidedOp::Put { tile, .. } | OneSidedOp::MultiStore { tile, .. } => tile.bytes() as u64,
            OneSidedOp::Signal { .. }
            | OneSidedOp::Get { .. }
            | OneSidedOp::MultiLoad { .. }
            | OneSidedOp::Atomic { .. } => CONTROL_BYTES,
        }
    }

    /// Whether it is a put (whose landing completes its lane's quiet): an atomic that fetches nothing
    /// is one too.
    pub(crate) fn is_put(&self) -> bool {
        matches!(
            self.op,
            OneSidedOp::Put { .. } | OneSidedOp::MultiStore { .. } | OneSidedOp::Atomic { fetch: false, .. }
        )
    }

    /// The transfer to place for it, as place `position` of its sender `sender`'s round; `None` for a
    /// multimem operation's parts after the first, whose transfer places them all.
    pub(crate) fn transfer(&self, sender: u32, position: u64) -> Option<Transfer> {
        let (reply, put_by, fan) = match &self.op {
            OneSidedOp::Get { back, len, buffer, .. } => {
                (Some((*back, (*len * buffer.dtype.size()) as u64)), None, None)
            }
            OneSidedOp::Put { .. } | OneSidedOp::Atomic { fetch: false, .. } => (None, Some(self.task), None),
            OneSidedOp::Atomic { back, .. } => (Some((*back, CONTROL_BYTES)), None, None),
            OneSidedOp::Signal { .. } => (None, None, None),
            OneSidedOp::MultiLoad { fan, .. } | OneSidedOp::MultiStore { fan, .. } if fan.part > 0 => return None,
            OneSidedOp::MultiLoad { fan, len, buffer, .. } => {
                let bytes = (*len * buffer.dtype.size()) as u64;
                (None, None, Some(Multicast::Load { parts: fan.parts, down: fan.down, bytes }))
            }
            OneSidedOp::MultiStore { fan, reduce, .. } => {
                (None, Some(self.task), Some(Multicast::Store { parts: fan.parts, reduce: reduce.is_some() }))
            }
        };
        let queue = match &self.op {
            OneSidedOp::MultiLoad { fan, .. } | OneSidedOp::MultiStore { fan, .. } => fan.up,
            _ => self.route,
        };
        Some(
            Transfer::message(self.depart_ns, sender, queue, position, self.bytes())
                .with(reply, put_by)
                .multicast_of(fan),
        )
    }

    /// The queues of a multimem part towards its member: `(to, from)`, whose last and first channels
    /// are the switch's link down to the member and the member's link up to it.
    pub(crate) fn member_legs(&self) -> (u32, u32) {
        match &self.op {
            OneSidedOp::MultiLoad { from, .. } => (self.route, *from),
            _ => (self.route, self.route),
        }
    }

    /// It reaches its target at `arrive_ns`, and a get's reply (or a multimem load's result) comes
    /// back at `back_ns`.
    pub(crate) fn arrives(&mut self, arrive_ns: f64, back_ns: Option<f64>) {
        self.arrive_ns = arrive_ns;
        if let (
            OneSidedOp::Get { back_ns: at, .. }
            | OneSidedOp::MultiLoad { back_ns: at, .. }
            | OneSidedOp::Atomic { back_ns: at, .. },
            Some(back),
        ) = (&mut self.op, back_ns)
        {
            *at = back;
        }
    }

    /// Writes it for its target's process. The race detector's clocks and stamps stay behind: a spread
    /// run does not check races.
    pub(crate) fn write(&self, w: &mut Writer) {
        w.u32(self.task);
        w.u64(self.generation);
        w.u32(self.to);
        w.u32(self.route);
        w.f64(self.depart_ns);
        match &self.op {
            OneSidedOp::Put { buffer, offset, tile, signal, seq, .. } => {
                w.u8(0);
                write_buffer(w, buffer);
                w.u64(*offset as u64);
                write_tile(w, tile);
                match signal {
                    Some((signal, add)) => {
                        w.u8(1);
                        w.u64(*signal as u64);
                        w.u64(*add);
                    }
                    None => w.u8(0),
                }
                w.u32(*seq);
            }
            OneSidedOp::Signal { signal, add } => {
                w.u8(1);
                w.u64(*signal as u64);
                w.u64(*add);
            }
            OneSidedOp::Get { buffer, offset, len, back, .. } => {
                w.u8(2);
                write_buffer(w, buffer);
                w.u64(*offset as u64);
                w.u64(*len as u64);
                w.u32(*back);
            }
            OneSidedOp::MultiLoad { buffer, offset, len, op, fan, from, .. } => {
                w.u8(3);
                write_buffer(w, buffer);
                w.u64(*offset as u64);
                w.u64(*len as u64);
                w.u8(reduce_op_code(Some(*op)));
                write_fan(w, fan);
                w.u32(*from);
            }
            OneSidedOp::MultiStore { buffer, offset, tile, reduce, fan, seq, .. } => {
                w.u8(4);
                write_buffer(w, buffer);
                w.u64(*offset as u64);
                write_tile(w, tile);
                w.u8(reduce_op_code(*reduce));
                write_fan(w, fan);
                w.u32(*seq);
            }
            OneSidedOp::Atomic { buffer, index, op, fetch, release, acquire, seq, back, .. } => {
                w.u8(5);
                write_buffer(w, buffer);
                w.u64(*index as u64);
                let (kind, a, b) = match *op {
                    AtomicOp::Add(v) => (0, v, 0),
                    AtomicOp::Swap(v) => (1, v, 0),
                    AtomicOp::CompareSwap { expected, new } => (2, expected, new),
                    AtomicOp::Max(v) => (3, v, 0),
                    AtomicOp::Min(v) => (4, v, 0),
                };
                w.u8(kind);
                w.u64(a as u64);
                w.u64(b as u64);
                w.u8(u8::from(*fetch) | u8::from(*release) << 1 | u8::from(*acquire) << 2);
                w.u32(*seq);
                w.u32(*back);
            }
        }
    }

    /// Reads what [`Outgoing::write`] wrote in another process.
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Outgoing, ExchangeError> {
        let (task, generation, to, route, depart_ns) = (r.u32()?, r.u64()?, r.u32()?, r.u32()?, r.f64()?);
        let op = match r.u8()? {
            0 => {
                let (buffer, offset, tile) = (read_buffer(r)?, r.u64()? as usize, read_tile(r)?);
                let signal = if r.u8()? == 1 { Some((r.u64()? as usize, r.u64()?)) } else { None };
                OneSidedOp::Put { buffer, offset, tile, signal, seq: r.u32()?, stamp: None }
            }
            1 => OneSidedOp::Signal { signal: r.u64()? as usize, add: r.u64()? },
            2 => {
                let (buffer, offset, len, back) = (read_buffer(r)?, r.u64()? as usize, r.u64()? as usize, r.u32()?);
                OneSidedOp::Get { buffer, offset, len, stamp: None, back, back_ns: depart_ns }
            }
            3 => {
                let (buffer, offset, len) = (read_buffer(r)?, r.u64()? as usize, r.u64()? as usize);
                let op = read_reduce_op(r)?.ok_or_else(|| r.malformed("a multimem load's reduction"))?;
                let (fan, from) = (read_fan(r)?, r.u32()?);
                OneSidedOp::MultiLoad {
                    buffer,
                    offset,
                    len,
                    op,
                    fan,
                    from,
                    stamp: None,
                    back_ns: depart_ns,
                    site: None,
                }
            }
            4 => {
                let (buffer, offset, tile) = (read_buffer(r)?, r.u64()? as usize, read_tile(r)?);
                let (reduce, fan, seq) = (read_reduce_op(r)?, read_fan(r)?, r.u32()?);
                OneSidedOp::MultiStore { buffer, offset, tile, reduce, fan, seq, stamp: None, site: None }
            }
            5 => {
                let (buffer, index) = (read_buffer(r)?, r.u64()? as usize);
                let (kind, a, b) = (r.u8()?, r.u64()? as i64, r.u64()? as i64);
                let op = match kind {
                    0 => AtomicOp::Add(a),
                    1 => AtomicOp::Swap(a),
                    2 => AtomicOp::CompareSwap { expected: a, new: b },
                    3 => AtomicOp::Max(a),
                    4 => AtomicOp::Min(a),
                    _ => return Err(r.malformed("an atomic's kind")),
                };
                let flags = r.u8()?;
                let (fetch, release, acquire) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
                let (seq, back) = (r.u32()?, r.u32()?);
                OneSidedOp::Atomic {
                    buffer,
                    index,
                    op,
                    fetch,
                    release,
                    acquire,
                    stamp: None,
                    seq,
                    back,
                    back_ns: depart_ns,
                }
            }
            _ => return Err(r.malformed("a one-sided operation's kind")),
        };
        // Its arrival is set when this process places the round's transfers (untimed: when it left).
        Ok(Outgoing { task, generation, to, route, depart_ns, arrive_ns: depart_ns, clock: None, op })
    }
}

/// A multimem store's reduction on the wire: 0 for none, then [`ReduceOp::ALL`]'s order from 1.
fn reduce_op_code(op: Option<ReduceOp>) -> u8 {
    op.and_then(|op| ReduceOp::ALL.iter().position(|&o| o == op)).map_or(0, |i| i as u8 + 1)
}

fn read_reduce_op(r: &mut Reader<'_>) -> Result<Option<ReduceOp>, ExchangeError> {
    match r.u8()? {
        0 => Ok(None),
        code => ReduceOp::ALL.get(code as usize - 1).copied().map(Some).ok_or_else(|| r.malformed("a reduction")),
    }
}

fn write_fan(w: &mut Writer, fan: &Part) {
    for field in [fan.part, fan.parts, fan.up, fan.down] {
        w.u32(field);
    }
}

fn read_fan(r: &mut Reader<'_>) -> Result<Part, ExchangeError> {
    Ok(Part { part: r.u32()?, parts: r.u32()?, up: r.u32()?, down: r.u32()? })
}

impl OneSidedRun {
    /// Applies `out` to its target (rule B) and wakes the lanes waiting on what it changes; when its lane
    /// is in this process (`origin_here`), does what it does to the lane too, else returns a get's
    /// reply for the lane's process.
    ///
    /// # Errors
    /// A race (a put's write or a get's read unordered with an access already made), or an access to a
    /// buffer declared with another shape on its target.
    pub(crate) fn apply(
        &mut self,
        out: Outgoing,
        origin_here: bool,
        lanes: &mut Lanes<'_>,
    ) -> Result<Option<GetReply>, RunError> {
        let detector = self.detector;
        let to = out.to;
        let owner = lanes.tasks.pe(to);
        let target = self.pes.get(to as usize).get_or_insert_default();
        let who = |s: &Stamp| access(&lanes.tasks, s);
        match out.op {
            OneSidedOp::Put { buffer, offset, tile, signal, seq, stamp } => {
                let write = Access_ { owner, buffer: &buffer, range: offset..offset + tile.len(), stamp, op: Op::Put };
                let (copy, recorded) = target.heap.write(write, detector, out.clock.as_ref(), who)?;
                if let (Some(bytes), Some(stamp)) = (recorded, stamp) {
                    self.puts.push(PutRecord { task: out.task, to, seq, stamp, buffer: buffer.name, bytes });
                }
                copy.write(offset, &tile).map_err(|source| KernelError::Tile { pe: owner, op: Op::Put, source })?;
                copy.landed_ns = copy.landed_ns.max(out.arrive_ns);
                if let Some((signal, add)) = signal {
                    let raise = Raise { add, at_ns: out.arrive_ns, generation: out.generation, clock: out.clock };
                    target.signals.raise(signal, raise);
                    lanes.wake_signal(to, signal);
                }
                lanes.wake_values(to);
                if origin_here {
                    lanes.land(out.task, out.arrive_ns);
                }
            }
            OneSidedOp::Signal { signal, add } => {
                let raise = Raise { add, at_ns: out.arrive_ns, generation: out.generation, clock: out.clock };
                target.signals.raise(signal, raise);
                lanes.wake_signal(to, signal);
            }
            OneSidedOp::Get { buffer, offset, len, stamp, back_ns, .. } => {
                let read = Access_ { owner, buffer: &buffer, range: offset..offset + len, stamp, op: Op::Get };
                let reply = target.heap.read(read, detector, out.clock.as_ref(), who);
                if !origin_here {
                    return Ok(Some((out.task, reply, back_ns)));
                }
                self.reply(lanes, (out.task, reply, back_ns));
            }
            OneSidedOp::MultiLoad { buffer, offset, len, fan, stamp, back_ns, site: _, op: _, from: _ } => {
                let op = Op::MultimemLdReduce;
                let read = Access_ { owner, buffer: &buffer, range: offset..offset + len, stamp, op };
                let part = target.heap.read(read, detector, out.clock.as_ref(), who);
                if !origin_here {
                    // Not reached: `tl.multicast` refuses a spread run's ranks of other processes.
                    return Ok(Some((out.task, part, back_ns)));
                }
                let origin = lanes.tasks.rank(out.task);
                let memory = self.pes.get(origin as usize).get_or_insert_default();
                memory.gathered.push((out.task, fan.part, part, back_ns));
                lanes.wake_task(out.task, Wait::Get);
            }
            OneSidedOp::MultiStore { buffer, offset, tile, reduce, seq, stamp, site: _, fan: _ } => {
                let op = if reduce.is_some() { Op::MultimemRed } else { Op::MultimemSt };
                let write = Access_ { owner, buffer: &buffer, range: offset..offset + tile.len(), stamp, op };
                let (copy, recorded) = target.heap.write(write, detector, out.clock.as_ref(), who)?;
                if let (Some(bytes), Some(stamp)) = (recorded, stamp) {
                    self.puts.push(PutRecord { task: out.task, to, seq, stamp, buffer: buffer.name, bytes });
                }
                let tile_error = |source| KernelError::Tile { pe: owner, op, source };
                let written = match reduce {
                    Some(reduce) => {
                        let mut acc = copy.data.slice(offset..offset + tile.len()).map_err(tile_error)?;
                        acc.reduce_in_place(&tile, reduce).map_err(tile_error)?;
                        acc
                    }
                    None => tile,
                };
                copy.write(offset, &written).map_err(tile_error)?;
                copy.landed_ns = copy.landed_ns.max(out.arrive_ns);
                lanes.wake_values(to);
                if origin_here {
                    lanes.land(out.task, out.arrive_ns);
                }
            }
            OneSidedOp::Atomic { buffer, index, op, fetch, release, acquire, stamp, seq, back_ns, back: _ } => {
                let apply = AtomicApply {
                    owner,
                    buffer: &buffer,
                    index,
                    access: ElementAccess::Atomic(op, op.op(fetch)),
                    stamp,
                    clock: out.clock.as_ref(),
                    release,
                    acquire,
                };
                let strong = |a: &Stamp, b: &Stamp| morally_strong((&self.system, self.call, &lanes.tasks), a, b);
                let applied = target.heap.atomic(apply, detector, strong, who);
                if let Ok(copy) = target.heap.buffer(owner, &buffer, detector) {
                    copy.landed_ns = copy.landed_ns.max(out.arrive_ns);
                }
                lanes.wake_values(to);
                let (old, acquired) = match applied {
                    Ok(applied) => applied,
                    Err(e) if fetch && !origin_here => return Ok(Some((out.task, Err(e), back_ns))),
                    Err(e) => return Err(e.into()),
                };
                if let (Some(stamp), false) = (stamp, fetch) {
                    let bytes = buffer.byte_range(index, 1).unwrap_or(0..0);
                    self.puts.push(PutRecord { task: out.task, to, seq, stamp, buffer: buffer.name, bytes });
                }
                if !fetch {
                    if origin_here {
                        lanes.land(out.task, out.arrive_ns);
                    }
                    return Ok(None);
                }
                let reply = Ok(Tile::from_vec(vec![old]));
                if !origin_here {
                    return Ok(Some((out.task, reply, back_ns)));
                }
                if let Some(acquired) = acquired {
                    lanes.states.get(out.task as usize).sync(out.task).acquire_clock(&acquired);
                }
                self.reply(lanes, (out.task, reply, back_ns));
            }
        }
        Ok(None)
    }

    /// Checks that the member a multimem operation reaches has joined its multicast object.
    ///
    /// # Errors
    /// [`KernelError::MulticastNotJoined`].
    pub(crate) fn check_joined(&mut self, out: &Outgoing, lanes: &Lanes<'_>) -> Result<(), KernelError> {
        let (buffer, op, site) = match &out.op {
            OneSidedOp::MultiLoad { buffer, site, .. } => (buffer, Op::MultimemLdReduce, *site),
            OneSidedOp::MultiStore { buffer, reduce, site, .. } => {
                (buffer, if reduce.is_some() { Op::MultimemRed } else { Op::MultimemSt }, *site)
            }
            _ => return Ok(()),
        };
        let member = self.pes.get(out.to as usize).get_or_insert_default();
        if member.joined.contains(&buffer.name) {
            return Ok(());
        }
        let pe = lanes.tasks.pe(lanes.tasks.rank(out.task));
        Err(KernelError::MulticastNotJoined { pe, op, site, multicast: *buffer, member: out.to as usize })
    }

    /// Hands a get's reply to its lane, of this process, and wakes it (rule B).
    pub(crate) fn reply(&mut self, lanes: &mut Lanes<'_>, (task, reply, at_ns): GetReply) {
        let origin = lanes.tasks.rank(task);
        self.pes.get(origin as usize).get_or_insert_default().replies.push((task, reply, at_ns));
        lanes.wake_task(task, Wait::Get);
    }
}

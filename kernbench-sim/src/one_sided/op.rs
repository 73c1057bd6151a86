//! One-sided operations in flight: what each kind is, what it puts on the wire, what it does when it
//! reaches its target, and how it crosses to another process. The one place that tells the kinds apart.

use kernbench_core::symmetric::Symmetric;
use kernbench_core::{KernelError, Op, Tile};

use super::heap::Raise;
use super::{OneSidedRun, access, conflict_error};
use crate::error::{ExchangeError, RunError};
use crate::lanes::{Lanes, Wait};
use crate::race::{Released, Stamp};
use crate::timing::Transfer;
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
    /// Bytes on the wire towards the target.
    pub(crate) fn bytes(&self) -> u64 {
        match &self.op {
            OneSidedOp::Put { tile, .. } => tile.bytes() as u64,
            OneSidedOp::Signal { .. } | OneSidedOp::Get { .. } => CONTROL_BYTES,
        }
    }

    /// Whether it is a put (whose landing completes its lane's quiet).
    pub(crate) fn is_put(&self) -> bool {
        matches!(self.op, OneSidedOp::Put { .. })
    }

    /// The transfer to place for it, as place `position` of its sender `sender`'s round.
    pub(crate) fn transfer(&self, sender: u32, position: u64) -> Transfer {
        let (reply, put_by) = match &self.op {
            OneSidedOp::Get { back, len, buffer, .. } => (Some((*back, (*len * buffer.dtype.size()) as u64)), None),
            OneSidedOp::Put { .. } => (None, Some(self.task)),
            OneSidedOp::Signal { .. } => (None, None),
        };
        Transfer { depart_ns: self.depart_ns, sender, queue: self.route, position, bytes: self.bytes(), reply, put_by }
    }

    /// It reaches its target at `arrive_ns`, and a get's reply comes back at `back_ns`.
    pub(crate) fn arrives(&mut self, arrive_ns: f64, back_ns: Option<f64>) {
        self.arrive_ns = arrive_ns;
        if let (OneSidedOp::Get { back_ns: at, .. }, Some(back)) = (&mut self.op, back_ns) {
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
            _ => return Err(r.malformed("a one-sided operation's kind")),
        };
        // Its arrival is set when this process places the round's transfers (untimed: when it left).
        Ok(Outgoing { task, generation, to, route, depart_ns, arrive_ns: depart_ns, clock: None, op })
    }
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
                let copy = target.heap.buffer(owner, &buffer, detector)?;
                let bytes = buffer.byte_range(offset, tile.len()).unwrap_or(0..0);
                if let (Some(shadow), Some(stamp), Some(clock), false) =
                    (&mut copy.shadow, stamp, &out.clock, bytes.is_empty())
                {
                    if let Err(conflict) = shadow.write(bytes.clone(), stamp, clock) {
                        return Err(conflict_error(who, conflict, owner, buffer.name, &stamp).into());
                    }
                    self.puts.push(PutRecord { task: out.task, to, seq, stamp, buffer: buffer.name, bytes });
                }
                copy.data.write_at(offset, &tile).map_err(|source| KernelError::Tile {
                    pe: owner,
                    op: Op::Put,
                    source,
                })?;
                if let Some((signal, add)) = signal {
                    let raise = Raise { add, at_ns: out.arrive_ns, generation: out.generation, clock: out.clock };
                    target.signals.raise(signal, raise);
                    lanes.wake_signal(to, signal);
                }
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
                let reply = (|| {
                    let copy = target.heap.buffer(owner, &buffer, detector)?;
                    let bytes = buffer.byte_range(offset, len).unwrap_or(0..0);
                    if let (Some(shadow), Some(stamp), Some(clock), false) =
                        (&mut copy.shadow, stamp, &out.clock, bytes.is_empty())
                    {
                        if let Err(conflict) = shadow.read(bytes, stamp, clock) {
                            return Err(conflict_error(who, conflict, owner, buffer.name, &stamp));
                        }
                    }
                    // A view: tiles copy on write, so later writes to the target's buffer leave it be.
                    copy.data.slice(offset..offset + len).map_err(|source| KernelError::Tile {
                        pe: owner,
                        op: Op::Get,
                        source,
                    })
                })();
                if !origin_here {
                    return Ok(Some((out.task, reply, back_ns)));
                }
                self.reply(lanes, (out.task, reply, back_ns));
            }
        }
        Ok(None)
    }

    /// Hands a get's reply to its lane, of this process, and wakes it (rule B).
    pub(crate) fn reply(&mut self, lanes: &mut Lanes<'_>, (task, reply, at_ns): GetReply) {
        let origin = lanes.tasks.rank(task);
        self.pes.get(origin as usize).get_or_insert_default().replies.push((task, reply, at_ns));
        lanes.wake_task(task, Wait::Get);
    }
}

//! Symmetric memory in the mock runtime: each PE's copy of the heap, its signals, and the one-sided
//! operations its lanes started in the current round.
//!
//! One-sided operations follow the round protocol of messages: a lane's puts, gets and signals wait in
//! its PE's outbox until the round is merged; then they are placed on their channels with the round's
//! messages (one order for both, so a put shares the links as a send of its bytes would), and applied
//! to their targets in rank order, lane by lane, in the order each lane made them. So a put is visible
//! from the next round, and every run gives the same bits, times and errors on any number of threads.

use kernbench_core::symmetric::{Access, MAX_SIGNALS, Race, Symmetric, Uninitialised};
use kernbench_core::{Dtype, KernelError, Op, PeId, Tile};

use crate::race::{Conflict, LaneSync, Released, Shadow, Stamp};

/// Bytes of a signal, or of a get's request, on the wire.
pub(crate) const CONTROL_BYTES: u64 = 8;

/// One PE's copy of a symmetric buffer.
pub(crate) struct HeapBuffer {
    pub(crate) decl: Symmetric,
    pub(crate) data: Tile,
    /// Who touched which bytes, when the race detector is on.
    pub(crate) shadow: Option<Shadow>,
}

/// One PE's copy of the symmetric heap: few buffers, found by name.
#[derive(Default)]
pub(crate) struct Heap {
    buffers: Vec<HeapBuffer>,
}

impl Heap {
    /// The PE's copy of `decl`, made (zeroed, and unwritten to the race detector) if it has none.
    ///
    /// # Errors
    /// [`KernelError::SymmetricMismatch`] when it exists with another shape.
    pub(crate) fn buffer(
        &mut self,
        pe: PeId,
        decl: &Symmetric,
        detector: bool,
    ) -> Result<&mut HeapBuffer, KernelError> {
        let i = match self.buffers.iter().position(|b| b.decl.name == decl.name) {
            Some(i) => i,
            None => {
                let data = Tile::try_zeros(decl.dtype, decl.len).map_err(|source| KernelError::OutOfMemory {
                    pe,
                    op: Op::Declare,
                    source,
                })?;
                self.buffers.push(HeapBuffer { decl: *decl, data, shadow: detector.then(Shadow::default) });
                self.buffers.len() - 1
            }
        };
        let buffer = &mut self.buffers[i];
        if buffer.decl != *decl {
            return Err(KernelError::SymmetricMismatch {
                pe,
                name: decl.name,
                existing: shape(buffer.decl.dtype, buffer.decl.len),
                got: shape(decl.dtype, decl.len),
            });
        }
        Ok(buffer)
    }
}

fn shape(dtype: Dtype, len: usize) -> String {
    format!("{dtype}[{len}]")
}

/// A raise that reached a signal: by how much, when it landed, in which generation (call and phase)
/// of its raiser, and what its raiser had released.
pub(crate) struct Raise {
    pub(crate) add: u64,
    pub(crate) at_ns: f64,
    pub(crate) generation: u64,
    pub(crate) clock: Option<Released>,
}

/// One signal of a PE. A raise counts only for waits of its own generation, as a message is received
/// only in its own: a raise of another call or phase cannot satisfy a wait.
#[derive(Default)]
pub(crate) struct Signal {
    /// Since the last reset, in the order they were delivered.
    pub(crate) raises: Vec<Raise>,
    /// Per generation, the highest value a wait was satisfied at since the last reset.
    pub(crate) waited: Vec<(u64, u64)>,
}

impl Signal {
    /// What the signal holds for waits of `generation`.
    pub(crate) fn value(&self, generation: u64) -> u64 {
        self.raises.iter().filter(|r| r.generation == generation).fold(0, |sum, r| sum.saturating_add(r.add))
    }

    /// What raises of generations other than `generation` add up to.
    pub(crate) fn other_generations(&self, generation: u64) -> u64 {
        self.raises.iter().filter(|r| r.generation != generation).fold(0, |sum, r| sum.saturating_add(r.add))
    }

    /// The highest value a wait of `generation` was satisfied at.
    pub(crate) fn waited(&self, generation: u64) -> u64 {
        self.waited.iter().find(|&&(g, _)| g == generation).map_or(0, |&(_, v)| v)
    }

    /// Records a wait of `generation` satisfied at `until`.
    pub(crate) fn wait_done(&mut self, generation: u64, until: u64) {
        match self.waited.iter_mut().find(|(g, _)| *g == generation) {
            Some((_, v)) => *v = (*v).max(until),
            None => self.waited.push((generation, until)),
        }
    }

    /// Every generation it was raised in, with what it holds and what waits took of it.
    pub(crate) fn generations(&self) -> Vec<(u64, u64, u64)> {
        let mut generations: Vec<u64> = self.raises.iter().map(|r| r.generation).collect();
        generations.sort_unstable();
        generations.dedup();
        generations.into_iter().map(|g| (g, self.value(g), self.waited(g))).collect()
    }

    /// The raises of `generation` that brought the signal to `until`: those that landed first in
    /// simulated time, ties in the order they were delivered.
    pub(crate) fn reaching(&self, generation: u64, until: u64) -> Vec<&Raise> {
        let mut by_time: Vec<&Raise> = self.raises.iter().filter(|r| r.generation == generation).collect();
        by_time.sort_by(|a, b| a.at_ns.total_cmp(&b.at_ns));
        let mut sum = 0u64;
        let reached = by_time.iter().position(|r| {
            sum = sum.saturating_add(r.add);
            sum >= until
        });
        by_time.truncate(reached.map_or(0, |i| i + 1));
        by_time
    }
}

/// A PE's signals, made as they are first used.
#[derive(Default)]
pub(crate) struct Signals {
    pub(crate) slots: Vec<Signal>,
}

impl Signals {
    /// Signal `signal`, made if it is new.
    pub(crate) fn get(&mut self, signal: usize) -> &mut Signal {
        if signal >= self.slots.len() {
            self.slots.resize_with(signal + 1, Signal::default);
        }
        &mut self.slots[signal]
    }

    /// Raises `signal` by `add`, landing at `at_ns`.
    pub(crate) fn raise(&mut self, signal: usize, raise: Raise) {
        self.get(signal).raises.push(raise);
    }
}

/// `signal` as a signal number, or the error of `op` naming the range.
pub(crate) fn check_signal(pe: PeId, op: Op, signal: usize) -> Result<usize, KernelError> {
    if signal < MAX_SIGNALS { Ok(signal) } else { Err(KernelError::NoSuchSignal { pe, op, signal, max: MAX_SIGNALS }) }
}

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

impl Outgoing {
    /// Bytes on the wire towards the target.
    pub(crate) fn bytes(&self) -> u64 {
        match &self.op {
            OneSidedOp::Put { tile, .. } => tile.bytes() as u64,
            OneSidedOp::Signal { .. } | OneSidedOp::Get { .. } => CONTROL_BYTES,
        }
    }
}

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

/// Who made an access, for an error: its PE and lane, from its task.
pub(crate) fn access(pes: &[PeId], first_task: &[u32], task_rank: &[u32], stamp: &Stamp) -> Access {
    let rank = task_rank[stamp.task as usize] as usize;
    Access { pe: pes[rank], lane: (stamp.task - first_task[rank]) as usize, op: stamp.op, site: stamp.site }
}

/// What the race detector found, as the error that names both sides.
pub(crate) fn conflict_error(
    who: impl Fn(&Stamp) -> Access,
    conflict: Conflict,
    owner: PeId,
    buffer: &'static str,
    stamp: &Stamp,
) -> KernelError {
    match conflict {
        Conflict::Race { earlier, bytes } => {
            KernelError::Race(Box::new(Race { owner, buffer, bytes, first: who(&earlier), second: who(stamp) }))
        }
        Conflict::Uninitialised { bytes } => {
            KernelError::Uninitialised(Box::new(Uninitialised { owner, buffer, bytes, reader: who(stamp) }))
        }
    }
}

/// A PE's symmetric memory.
#[derive(Default)]
pub(crate) struct PeOneSided {
    /// The ranks its one-sided operations may address, sorted: `(rank, the queue of channel 0 to it,
    /// the queue of channel 0 from it)`, whose routes they take; listed on first use.
    pub(crate) peers: Option<Vec<(u32, u32, u32)>>,
    /// Its copy of the heap.
    pub(crate) heap: Heap,
    pub(crate) signals: Signals,
    /// One-sided operations its lanes started this round.
    pub(crate) outbox: Vec<Outgoing>,
}

/// What a lane keeps for its one-sided operations, made when it first uses one (or first hears of
/// one, under the race detector): most lanes of most runs never do.
#[derive(Default)]
pub(crate) struct LaneOneSided {
    /// Its place in the happens-before order, under the race detector.
    pub(crate) sync: Option<LaneSync>,
    /// A get's reply, and when it arrives.
    pub(crate) reply: Option<(Result<Tile, KernelError>, f64)>,
    /// When the last of its puts lands.
    pub(crate) landed_ns: f64,
}

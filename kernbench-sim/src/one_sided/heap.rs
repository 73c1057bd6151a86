//! A PE's copy of the symmetric heap, and its signals.

use kernbench_core::symmetric::{Access, MAX_SIGNALS, Symmetric};
use kernbench_core::{Dtype, KernelError, Op, PeId, Tile};

use super::conflict_error;
use crate::race::{Released, Shadow, Stamp};

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

/// An access to a PE's copy of a symmetric buffer by a peer's one-sided operation: a get or one
/// member's part of a multimem load (reads), a put or a multimem store (writes).
pub(crate) struct RemoteAccess<'a> {
    /// The PE whose copy is read.
    pub(crate) owner: PeId,
    /// The buffer.
    pub(crate) buffer: &'a Symmetric,
    /// The elements accessed.
    pub(crate) range: std::ops::Range<usize>,
    /// The accessor's place in the happens-before order, under the race detector.
    pub(crate) stamp: Option<Stamp>,
    /// The operation, for errors.
    pub(crate) op: Op,
}

impl Heap {
    /// The copy `write` is to write, once the write is checked and recorded under the race detector
    /// (a `multimem_red` as an atomic reduction), with the bytes recorded (`None` without the detector,
    /// or for no bytes).
    ///
    /// # Errors
    /// As [`Heap::buffer`]; a race, named by `who`.
    pub(crate) fn write(
        &mut self,
        write: RemoteAccess<'_>,
        detector: bool,
        clock: Option<&Released>,
        who: impl Fn(&Stamp) -> Access,
    ) -> Result<(&mut HeapBuffer, Option<std::ops::Range<u64>>), KernelError> {
        let RemoteAccess { owner, buffer, range, stamp, op } = write;
        let copy = self.buffer(owner, buffer, detector)?;
        let bytes = buffer.byte_range(range.start, range.len()).unwrap_or(0..0);
        let mut recorded = None;
        if let (Some(shadow), Some(stamp), Some(clock), false) = (&mut copy.shadow, stamp, clock, bytes.is_empty()) {
            // The switch applies its reductions one at a time: atomic with each other, not plain writes.
            let checked = if op == Op::MultimemRed {
                shadow.reduce(bytes.clone(), stamp, clock)
            } else {
                shadow.write(bytes.clone(), stamp, clock)
            };
            if let Err(conflict) = checked {
                return Err(conflict_error(who, conflict, owner, buffer.name, &stamp));
            }
            recorded = Some(bytes);
        }
        Ok((copy, recorded))
    }

    /// The elements `read` asks for, as a view (tiles copy on write, so later writes to the copy
    /// leave it be), the read checked and recorded under the race detector first.
    ///
    /// # Errors
    /// As [`Heap::buffer`]; a race or an uninitialised read, named by `who`; the range past the end.
    pub(crate) fn read(
        &mut self,
        read: RemoteAccess<'_>,
        detector: bool,
        clock: Option<&Released>,
        who: impl Fn(&Stamp) -> Access,
    ) -> Result<Tile, KernelError> {
        let RemoteAccess { owner, buffer, range, stamp, op } = read;
        let copy = self.buffer(owner, buffer, detector)?;
        let bytes = buffer.byte_range(range.start, range.len()).unwrap_or(0..0);
        if let (Some(shadow), Some(stamp), Some(clock), false) = (&mut copy.shadow, stamp, clock, bytes.is_empty()) {
            if let Err(conflict) = shadow.read(bytes, stamp, clock) {
                return Err(conflict_error(who, conflict, owner, buffer.name, &stamp));
            }
        }
        copy.data.slice(range).map_err(|source| KernelError::Tile { pe: owner, op, source })
    }

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

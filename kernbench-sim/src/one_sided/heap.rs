//! A PE's copy of the symmetric heap, and its signals.

use kernbench_core::atomic::{AtomicOp, Cmp};
use kernbench_core::symmetric::{Access, MAX_SIGNALS, Symmetric};
use kernbench_core::{Dtype, KernelError, Op, PeId, Tile};

use super::conflict_error;
use crate::race::{AtomicAccess, AtomicValue, Released, Shadow, Stamp, VClock};

/// One PE's copy of a symmetric buffer.
pub(crate) struct HeapBuffer {
    pub(crate) decl: Symmetric,
    pub(crate) data: Tile,
    /// Who touched which bytes, when the race detector is on.
    pub(crate) shadow: Option<Shadow>,
    /// Whether it is a window's copy, kept past the call.
    pub(crate) window: bool,
    /// When the last write or atomic from a peer landed in it this call: a wait on one of its
    /// elements ends no earlier.
    pub(crate) landed_ns: f64,
}

impl HeapBuffer {
    /// Element `index` as an atomic sees it: an `i32` or `i64`, as `i64`; `None` for a float buffer,
    /// or a copy without data (a timing-only run's, never a window's or an integer buffer's).
    pub(crate) fn element(&self, index: usize) -> Option<i64> {
        match self.decl.dtype {
            Dtype::I32 => self.data.as_slice::<i32>().ok()?.get(index).map(|&v| i64::from(v)),
            Dtype::I64 => self.data.as_slice::<i64>().ok()?.get(index).copied(),
            _ => None,
        }
    }

    /// Writes `tile` at `offset`. A tile without data (a timing-only run's) leaves a copy with data as
    /// it was rather than dropping all of its data: the copy's flags and counters keep steering the run.
    pub(crate) fn write(&mut self, offset: usize, tile: &Tile) -> Result<(), kernbench_core::TileError> {
        if self.data.has_data() && !tile.has_data() {
            return self.data.check_same_dtype_fits(offset, tile).map(|_| ());
        }
        self.data.write_at(offset, tile)
    }

    /// Sets element `index` (wrapping to 32 bits in an `i32` buffer).
    pub(crate) fn set_element(&mut self, index: usize, value: i64) -> Result<(), kernbench_core::TileError> {
        let tile = match self.decl.dtype {
            Dtype::I32 => Tile::from_vec(vec![value as i32]),
            _ => Tile::from_vec(vec![value]),
        };
        self.data.write_at(index, &tile)
    }
}

/// What is applied to an element: an atomic (named by its `tl` operation, for errors), or a wait's
/// load that saw its comparison hold.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ElementAccess {
    Atomic(AtomicOp, Op),
    Waited(Cmp, i64),
}

/// An atomic or a wait's load applied to an element of a PE's copy.
pub(crate) struct AtomicApply<'a> {
    pub(crate) owner: PeId,
    pub(crate) buffer: &'a Symmetric,
    pub(crate) index: usize,
    pub(crate) access: ElementAccess,
    /// Its stamp and its lane's knowledge (or release), under the race detector.
    pub(crate) stamp: Option<Stamp>,
    pub(crate) clock: Option<&'a Released>,
    /// Whether its order releases (then `clock` is what it releases) and acquires.
    pub(crate) release: bool,
    pub(crate) acquire: bool,
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
                return Err(conflict_error(who, conflict, owner, (buffer.name, copy.window), &stamp));
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
                return Err(conflict_error(who, conflict, owner, (buffer.name, copy.window), &stamp));
            }
        }
        copy.data.slice(range).map_err(|source| KernelError::Tile { pe: owner, op, source })
    }

    /// Applies an atomic to element `index` of the PE's copy of `buffer` (checked and recorded first
    /// under the race detector, `strong` saying which pairs of atomics are morally strong): its old
    /// value, and what it acquires. A copy without data (a float buffer cannot be addressed) reads 0.
    ///
    /// # Errors
    /// As [`Heap::buffer`]; a race, named by `who`.
    pub(crate) fn atomic(
        &mut self,
        apply: AtomicApply<'_>,
        detector: bool,
        strong: impl Fn(&Stamp, &Stamp) -> bool,
        who: impl Fn(&Stamp) -> Access,
    ) -> Result<(i64, Option<VClock>), KernelError> {
        let AtomicApply { owner, buffer, index, access, stamp, clock, release, acquire } = apply;
        let copy = self.buffer(owner, buffer, detector)?;
        let old = copy.element(index).unwrap_or(0);
        let mut acquired = None;
        let window = copy.window;
        if let (Some(shadow), Some(stamp), Some(clock)) = (&mut copy.shadow, stamp, clock) {
            let bytes = buffer.byte_range(index, 1).unwrap_or(0..0);
            let value = match access {
                ElementAccess::Atomic(op, _) => AtomicValue::Leaves(op.apply(old)),
                ElementAccess::Waited(cmp, operand) => AtomicValue::Waited(cmp, operand),
            };
            let access = AtomicAccess { stamp, clock, release: release.then_some(clock), acquire, value };
            acquired = shadow
                .atomic(bytes, access, strong)
                .map_err(|conflict| conflict_error(who, conflict, owner, (buffer.name, window), &stamp))?;
        }
        if let ElementAccess::Atomic(op, name) = access {
            let new = op.apply(old);
            if new != old {
                copy.set_element(index, new).map_err(|source| KernelError::Tile { pe: owner, op: name, source })?;
            }
        }
        Ok((old, acquired))
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
                let shadow = detector.then(Shadow::default);
                self.buffers.push(HeapBuffer { decl: *decl, data, shadow, window: false, landed_ns: 0.0 });
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

impl Heap {
    /// The window copies it holds, taken out to outlive the call.
    pub(crate) fn take_windows(&mut self) -> Vec<HeapBuffer> {
        let (windows, heap) = std::mem::take(&mut self.buffers).into_iter().partition(|b| b.window);
        self.buffers = heap;
        windows
    }

    /// Takes in a rank's window copies at the start of a call.
    pub(crate) fn with_windows(windows: Vec<HeapBuffer>) -> Heap {
        Heap { buffers: windows }
    }

    /// The windows it holds, by their declarations.
    pub(crate) fn windows(&self) -> impl Iterator<Item = &Symmetric> {
        self.buffers.iter().filter(|b| b.window).map(|b| &b.decl)
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

    /// The raises of `generation` that made `value cmp until` hold: the fewest that landed first in
    /// simulated time (ties in the order they were delivered) whose sum does; all of them when no
    /// fewer do.
    pub(crate) fn reaching(&self, generation: u64, cmp: Cmp, until: u64) -> Vec<&Raise> {
        let mut by_time: Vec<&Raise> = self.raises.iter().filter(|r| r.generation == generation).collect();
        by_time.sort_by(|a, b| a.at_ns.total_cmp(&b.at_ns));
        // A wait that held before any raise took none (a wait for at least a value keeps counting
        // from the first raise, as it always has).
        if cmp != Cmp::Ge && cmp.holds(0, until) {
            by_time.clear();
            return by_time;
        }
        let mut sum = 0u64;
        let reached = by_time.iter().position(|r| {
            sum = sum.saturating_add(r.add);
            cmp.holds(sum, until)
        });
        if let Some(i) = reached {
            by_time.truncate(i + 1);
        }
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

//! The round protocol: what each thread may touch in each phase of a round, and [`Cells`], the shared
//! vectors whose `unsafe` the protocol makes sound. Every `unsafe` block of the runtime names the rule
//! it relies on. Uses nothing of the crate.
//!
//! A run goes in rounds ([`crate::rounds`] drives them). Each round has two phases, and between rounds
//! the driving thread holds the whole run:
//!
//! 1. **Poll.** Every task (one lane of a PE) woken in the previous round is polled once. A PE's woken
//!    lanes are polled together, in lane order, on one thread, and a PE is polled at most once a round.
//!    *Rule P*: while a PE is polled, its per-PE cells, its lanes' cells and the sides of queues it owns
//!    (the sending side of a queue it sends into, the receiving side of one it receives from) belong to
//!    the thread polling it; everything else is only read, and of a queue only what the last merge
//!    published.
//! 2. **Merge.** Every PE polled in the round publishes what it did to its queues and wakes the lanes
//!    waiting on them. *Rule M*: a PE's per-PE cells, its lanes' cells and the queue sides it publishes
//!    belong to the one thread merging it; the wait cells of other PEs' lanes are only read (a lane is
//!    woken by listing its task in the ready lists, which a lock guards).
//! 3. **Between rounds** *(rule B)*: the driving thread has `&mut` access to the run, so it may touch
//!    any cell through [`Cells::get`].
//!
//! Nothing a PE does in a round is visible to another PE before the merge, so the order of polls within
//! a round cannot change any result: one thread and many give the same bits.

use std::cell::UnsafeCell;

/// A vector whose elements are handed out mutably by index from a shared reference, under the round
/// protocol: see the module docs for which thread may touch which element in which phase.
///
/// In a run spread over processes a process holds the elements of its own PEs and lanes only, which
/// are consecutive (a process holds a block of whole SIPs: consecutive ranks, and their lanes): the
/// vector then holds the indices from its first, and has no cell for the others'.
pub(crate) struct Cells<T> {
    cells: Box<[UnsafeCell<T>]>,
    /// The first index held, in cell 0 (0 when every index is).
    first: usize,
}

// SAFETY: rules P and M give each element to one thread at a time within a round, and elements move
// across threads only between rounds (rule B), which rayon's joins order.
unsafe impl<T: Send> Sync for Cells<T> {}

impl<T> Cells<T> {
    pub(crate) fn new(items: Vec<T>) -> Self {
        Cells::held(items, 0)
    }

    /// Cells for the indices from `first`, holding `items` in index order.
    pub(crate) fn held(items: Vec<T>, first: usize) -> Self {
        Cells { cells: items.into_iter().map(UnsafeCell::new).collect(), first }
    }

    /// The cell of `index`: past the last cell for an index not held.
    #[inline]
    pub(crate) fn cell(&self, index: usize) -> usize {
        index.wrapping_sub(self.first)
    }

    /// The element at `index`, mutably.
    ///
    /// # Safety
    /// No other reference to this element may exist while the returned one lives: the caller names the
    /// rule (P or M) that gives the element to its thread.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub(crate) unsafe fn get_mut(&self, index: usize) -> &mut T {
        // SAFETY: the caller guarantees exclusivity.
        unsafe { &mut *self.cells[self.cell(index)].get() }
    }

    /// Asks the CPU to bring the element at `index` into its cache, without reading it: a large run's
    /// elements are far apart and each poll misses on several, which the polls ahead overlap.
    #[inline]
    pub(crate) fn prefetch(&self, index: usize) {
        if let Some(cell) = self.cells.get(self.cell(index)) {
            prefetch(cell.get().cast_const().cast(), size_of::<T>());
        }
    }

    /// The element at `index`, shared.
    ///
    /// # Safety
    /// No mutable reference to this element may exist while the returned one lives.
    #[inline]
    pub(crate) unsafe fn get_ref(&self, index: usize) -> &T {
        // SAFETY: the caller guarantees no writer.
        unsafe { &*self.cells[self.cell(index)].get() }
    }

    /// Every element held, mutably, in index order; safe because `&mut self` excludes every other
    /// access (rule B).
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.cells.iter_mut().map(UnsafeCell::get_mut)
    }

    /// Every element held, mutably, in index order, for a parallel iterator (rule B, as
    /// [`Cells::iter_mut`]).
    pub(crate) fn par_iter_mut(&mut self) -> impl rayon::iter::IndexedParallelIterator<Item = &mut T>
    where
        T: Send,
    {
        use rayon::prelude::*;
        self.cells.par_iter_mut().map(UnsafeCell::get_mut)
    }

    /// The element at `index`, through exclusive access to the whole vector (rule B).
    pub(crate) fn get(&mut self, index: usize) -> &mut T {
        let cell = self.cell(index);
        self.cells[cell].get_mut()
    }
}

/// Asks the CPU to bring the `bytes` from `start` into its cache: a hint, with no effect on what any
/// code reads (so none on a run's results), that lets the misses of what a poll will touch overlap the
/// polls before it.
pub(crate) use kernbench_core::kernel::hint::prefetch_bytes as prefetch;

/// A stretch of memory to ask the CPU for as its cache lines, in one word: the address's 48 bits
/// (every x86_64 user address an allocator hands out; a wrong one would only make the hint useless)
/// above 16 bits of lines. Where a task's coroutine lives, and what its kernel reads first when woken
/// ([`crate::lanes::WakeHints`]): a word a task, in a run of a million.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lines(pub(crate) u64);

impl Lines {
    const LINE: usize = 64;

    /// The lines `bytes` from `start` span, up to `u16::MAX` of them.
    pub(crate) fn of(start: *const u8, bytes: usize) -> Lines {
        let lines = bytes.div_ceil(Lines::LINE).min(usize::from(u16::MAX));
        Lines(((start as u64) << 16) | lines as u64)
    }

    fn start(self) -> *const u8 {
        (self.0 >> 16) as usize as *const u8
    }

    fn bytes(self) -> usize {
        (self.0 & 0xffff) as usize * Lines::LINE
    }

    pub(crate) fn prefetch(self) {
        prefetch(self.start(), self.bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::Lines;

    #[test]
    fn lines_keep_their_address_and_whole_lines_in_one_word() {
        let coroutine = [0u8; 300];
        let lines = Lines::of(coroutine.as_ptr(), coroutine.len());
        assert_eq!(size_of::<Lines>(), 8);
        assert_eq!(lines.start(), coroutine.as_ptr());
        // 300 bytes are asked for as five whole lines.
        assert_eq!(lines.bytes(), 320);
        assert_eq!(Lines::of(coroutine.as_ptr(), 0).bytes(), 0);
    }
}

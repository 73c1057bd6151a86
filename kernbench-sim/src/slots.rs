//! Per-PE and per-queue state that several threads touch within a round, each only its own part.

use std::cell::UnsafeCell;
use std::sync::Arc;

/// A vector whose elements are handed out mutably by index from a shared reference.
///
/// The round protocol of the executor guarantees exclusivity: in the poll phase a rank's elements are
/// touched only by the one thread polling that rank (a rank is polled at most once per round), and in
/// the merge phase a rank's state only by the one thread merging that rank, while wait slots are only
/// read (any thread may wake any PE). Callers state which of these holds.
pub(crate) struct Slots<T> {
    cells: Box<[UnsafeCell<T>]>,
    /// In a run spread over processes, the cell of each index this process holds ([`Slots::ABSENT`]
    /// for the others'); `None`: every index, each its own cell.
    cells_of: Option<Arc<[u32]>>,
}

// SAFETY: access is exclusive per element by the executor's round protocol (see the type's docs), and
// elements are only moved across threads between rounds, which rayon's joins order.
unsafe impl<T: Send> Sync for Slots<T> {}

impl<T> Slots<T> {
    /// The cell of an index another process holds.
    pub(crate) const ABSENT: u32 = u32::MAX;

    pub(crate) fn new(items: Vec<T>) -> Self {
        Slots { cells: items.into_iter().map(UnsafeCell::new).collect(), cells_of: None }
    }

    /// Slots for the indices `cells_of` gives a cell, holding `items` in cell order.
    pub(crate) fn some(items: Vec<T>, cells_of: Arc<[u32]>) -> Self {
        Slots { cells: items.into_iter().map(UnsafeCell::new).collect(), cells_of: Some(cells_of) }
    }

    /// The cell of `index`.
    #[inline]
    pub(crate) fn cell(&self, index: usize) -> usize {
        match &self.cells_of {
            None => index,
            Some(cells) => cells[index] as usize,
        }
    }

    /// The element at `index`, mutably.
    ///
    /// # Safety
    /// No other reference to this element may exist while the returned one lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get_mut(&self, index: usize) -> &mut T {
        // SAFETY: the caller guarantees exclusivity.
        unsafe { &mut *self.cells[self.cell(index)].get() }
    }

    /// The element at `index`, shared.
    ///
    /// # Safety
    /// No mutable reference to this element may exist while the returned one lives.
    pub(crate) unsafe fn get_ref(&self, index: usize) -> &T {
        // SAFETY: the caller guarantees no writer.
        unsafe { &*self.cells[self.cell(index)].get() }
    }

    /// Every element held, mutably, in index order; safe because `&mut self` excludes every other
    /// access.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.cells.iter_mut().map(UnsafeCell::get_mut)
    }

    /// The element at `index`, through exclusive access to the whole vector.
    pub(crate) fn get(&mut self, index: usize) -> &mut T {
        let cell = self.cell(index);
        self.cells[cell].get_mut()
    }
}

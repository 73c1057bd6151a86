//! Windows: symmetric buffers a communicator registers once and keeps across its calls, with what the
//! race detector knew of them when the last call ended.

use kernbench_core::symmetric::Symmetric;
use kernbench_core::{Dtype, PeId, Tile, TileError};

use super::PeOneSided;
use super::heap::{Heap, HeapBuffer};
use crate::lanes::Lanes;
use crate::protocol::Cells;
use crate::race::{Retirement, Shadow, VClock};

/// The windows of a communicator: each a symmetric buffer with a copy on every rank, registered once
/// ([`Windows::register`]) and kept from call to call; kernels reach one by name with `tl.window`.
/// Nothing resets a window between calls, and nothing tags what a call wrote to it: a flag or counter
/// one call leaves is what the next call finds (the bugs of one-sided libraries that reuse flags).
///
/// Under the race detector a window also keeps who last touched its bytes, and each rank what its
/// lanes knew when its kernel ended (the next kernel on a PE starts after it), so an access of the
/// next call that nothing orders after an access of this one is a race.
///
/// # Examples
/// ```
/// use kernbench_core::Dtype;
/// use kernbench_sim::Windows;
/// let mut windows = Windows::new();
/// let flags = windows.register("flags", Dtype::I64, 8).unwrap();
/// assert_eq!(flags.len, 8);
/// assert!(windows.register("flags", Dtype::I64, 8).is_err());
/// ```
#[derive(Default)]
pub struct Windows {
    registered: Vec<Symmetric>,
    /// Per rank, its copies, once a call has made them.
    copies: Vec<Vec<HeapBuffer>>,
    /// Per rank, what its lanes knew when its last kernel ended.
    carried: Vec<VClock>,
    retirement: Retirement,
}

/// A window that cannot be registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowError {
    /// A second window of one name.
    #[error("window `{name}` is registered already: expected a new name")]
    Duplicate {
        /// The name.
        name: &'static str,
    },
    /// A window too large for a tile.
    #[error("window `{name}` of {dtype}[{len}] is larger than a tile may be: {source}")]
    TooLarge {
        /// The name.
        name: &'static str,
        /// Its dtype.
        dtype: Dtype,
        /// Its length.
        len: usize,
        /// Why.
        source: TileError,
    },
}

impl std::fmt::Debug for HeapBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeapBuffer").field("decl", &self.decl).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Windows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Windows").field("registered", &self.registered).finish_non_exhaustive()
    }
}

impl Windows {
    /// No windows.
    pub fn new() -> Windows {
        Windows::default()
    }

    /// Registers window `name` of `len` elements of `dtype`: a copy on every rank, zeros at first.
    ///
    /// # Errors
    /// [`WindowError::Duplicate`] for a name already registered, [`WindowError::TooLarge`].
    pub fn register(&mut self, name: &'static str, dtype: Dtype, len: usize) -> Result<Symmetric, WindowError> {
        if self.registered.iter().any(|w| w.name == name) {
            return Err(WindowError::Duplicate { name });
        }
        let bytes = len as u128 * dtype.size() as u128;
        if bytes > Tile::MAX_BYTES as u128 {
            let source = TileError::TooLarge { dtype, len, bytes, max: Tile::MAX_BYTES };
            return Err(WindowError::TooLarge { name, dtype, len, source });
        }
        let window = Symmetric { name, dtype, len };
        self.registered.push(window);
        Ok(window)
    }

    /// The windows registered, in order.
    pub fn registered(&self) -> &[Symmetric] {
        &self.registered
    }

    /// Rank `rank`'s copy of window `name` as the last call left it (`None` before the first call, or
    /// for a name not registered).
    pub fn copy(&self, rank: usize, name: &str) -> Option<&Tile> {
        self.copies.get(rank)?.iter().find(|b| b.decl.name == name).map(|b| &b.data)
    }

    /// Rank `rank`'s heap at the start of a call: its window copies (made, zeroed, at the first call).
    pub(crate) fn heap_of(&mut self, rank: usize, ranks: usize, detector: bool) -> Result<Heap, TileError> {
        if self.copies.len() < ranks {
            self.copies.resize_with(ranks, Vec::new);
        }
        let copies = &mut self.copies[rank];
        for decl in &self.registered {
            if !copies.iter().any(|b| b.decl.name == decl.name) {
                // Made outside any timing-only poll: a window always holds its values.
                let data = kernbench_core::tile::without_data_while(false, || Tile::try_zeros(decl.dtype, decl.len))?;
                let shadow = detector.then(Shadow::default);
                copies.push(HeapBuffer { decl: *decl, data, shadow, window: true, landed_ns: 0.0 });
            }
        }
        let mut windows = std::mem::take(copies);
        for window in &mut windows {
            // Times restart with every call.
            window.landed_ns = 0.0;
        }
        Ok(Heap::with_windows(windows))
    }

    /// What rank `rank`'s lanes start knowing: what its lanes knew when its last kernel ended.
    pub(crate) fn carried(&self, rank: usize) -> Option<&VClock> {
        self.carried.get(rank)
    }

    /// Takes the windows back from the ranks of an ending call `call` (the ranks this process holds):
    /// their copies, and, under the race detector, their shadows and what each rank's lanes knew, in
    /// earlier calls' terms.
    pub(crate) fn keep(&mut self, pes: &mut Cells<Option<Box<PeOneSided>>>, lanes: &mut Lanes<'_>, call: u64) {
        if self.registered.is_empty() {
            return;
        }
        self.retirement.next_call();
        let ranks = lanes.tasks.pes().len();
        self.carried.resize_with(ranks, VClock::default);
        let tasks = &lanes.tasks;
        let place = |task: u32| -> (PeId, u32, u64) { (tasks.pe(tasks.rank(task)), tasks.lane(task), call) };
        for rank in (0..ranks as u32).filter(|&rank| tasks.holds(rank)) {
            let Some(memory) = pes.get(rank as usize) else { continue };
            let mut windows = memory.heap.take_windows();
            let retirement = &mut self.retirement;
            for window in &mut windows {
                if let Some(shadow) = &mut window.shadow {
                    shadow.retire(retirement, place);
                }
            }
            self.copies[rank as usize] = windows;
            let mut knew = VClock::default();
            for task in tasks.lanes_of(rank) {
                if let Some(sync) = lanes.states.get(task).sync_ref() {
                    sync.at_end(&mut knew);
                }
            }
            retirement.clock(&mut knew);
            // What it knew before stays known: its lanes of this call started from it.
            let carried = &mut self.carried[rank as usize];
            carried.join(&knew);
        }
    }
}

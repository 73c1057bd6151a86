//! Asking ahead: in a large round the CPU is asked for what a PE's poll and merge will read a few PEs
//! before they come to it, so that the cache misses of several PEs overlap. A million PEs' state is
//! far larger than any cache, and a poll misses in turn on its coroutine, its lane's and PE's cells
//! and the queue it waits on; one after the other, those misses were most of a large run's time. A
//! hint only ([`prefetch`]): nothing anyone reads changes, so no result does.

use super::{Execution, Merged};
use crate::lanes::Wait;
use crate::two_sided::side_owner;

/// A woken task as the polls before it see it, read before the round's polls begin (so none reads
/// another's wait while it is written): its number and the queue it waits on.
#[derive(Clone, Copy)]
pub(super) struct Ahead {
    task: u32,
    /// The queue it waits on ([`Ahead::NO_QUEUE`] if none): what woke it, so what it reads first. Not
    /// an `Option`, which would make an entry half as large again: a round can wake a million tasks.
    queue: u32,
}

impl Ahead {
    const NO_QUEUE: u32 = u32::MAX;
    /// How many tasks or PEs ahead of its own turn one's state is asked for: enough for several misses
    /// to be in flight while the turns between run, few enough that what comes is still in cache.
    pub(super) const DISTANCE: usize = 8;
    /// The fewest tasks a process must hold for asking ahead to be worth it. A smaller run's state
    /// (a KiB or two a task) stays in a large cache from one round to the next, where the misses
    /// asking saves are few and short, and the asking only costs (a ring of 4,096 tasks ran a fifth
    /// slower asking ahead); a larger one's is cold in every round, however few tasks the round
    /// wakes (a million PEs ran a third faster).
    const TASKS: usize = 1 << 14;
}

impl Execution<'_> {
    /// Whether this run is large enough to ask ahead in (see [`Ahead::TASKS`]).
    pub(super) fn asks_ahead(&self) -> bool {
        self.frames.len() >= Ahead::TASKS
    }

    /// What the polls before `task`'s see of it.
    ///
    /// # Safety
    /// Rule B: between rounds, when no thread writes a wait.
    pub(super) unsafe fn ahead(&self, task: u32) -> Ahead {
        // SAFETY: the caller's.
        let queue = match unsafe { self.lanes.parked.get_ref(task as usize) }.wait {
            Wait::Send(q) | Wait::Recv(q) => q,
            _ => Ahead::NO_QUEUE,
        };
        Ahead { task, queue }
    }

    /// Asks the CPU for what polling `ahead`'s task reads first: the queue it waits on, its coroutine
    /// and where it lies, its lane's state and wait, and its PE's cells (not its one-sided
    /// part, which only one-sided operations read).
    #[inline]
    pub(super) fn ask(&self, &Ahead { task, queue }: &Ahead) {
        if queue != Ahead::NO_QUEUE {
            self.two_sided.queues.prefetch(queue as usize);
        }
        let (task, rank) = (task as usize, self.lanes.tasks.rank(task) as usize);
        let cell = self.lanes.states.cell(task);
        self.kernels.prefetch(task);
        if let Some(frame) = self.frames.get(cell) {
            frame.prefetch();
        }
        self.lanes.states.prefetch(task);
        self.lanes.parked.prefetch(task);
        self.lanes.pes.prefetch(rank);
        self.two_sided.pes.prefetch(rank);
    }

    /// Merges `ranks` in order, in a large run asking the CPU ahead of each for what its merge reads,
    /// a step further the nearer it comes: its PE's cells; the queues its lanes touched; the waits of
    /// the lanes at their other ends.
    ///
    /// # Safety
    /// Rule M: this thread merges every rank of `ranks`.
    pub(super) unsafe fn merge_in_order(&self, ranks: &[u32], merged: &mut Merged) {
        if !self.asks_ahead() {
            // SAFETY: the caller's.
            ranks.iter().for_each(|&rank| unsafe { self.merge(rank, merged) });
            return;
        }
        let parts = (&self.two_sided, &self.lanes);
        // The lanes at the other ends of the queue sides rank `rank` touched.
        let woken = |rank: u32| {
            // SAFETY: rule M: `rank` is this thread's to merge, after the one merged now.
            let links = unsafe { self.two_sided.pes.get_ref(rank as usize) };
            // SAFETY: rule M: owners are not written while merging.
            links.touched.iter().filter_map(move |&(q, side)| unsafe { side_owner(parts, q, side.other()) })
        };
        for (i, &rank) in ranks.iter().enumerate() {
            if let Some(&far) = ranks.get(i + Ahead::DISTANCE) {
                self.two_sided.pes.prefetch(far as usize);
                self.lanes.pes.prefetch(far as usize);
            }
            if let Some(&near) = ranks.get(i + Ahead::DISTANCE / 2) {
                // SAFETY: rule M: `near` is this thread's to merge, after `rank`.
                let links = unsafe { self.two_sided.pes.get_ref(near as usize) };
                links.touched.iter().for_each(|&(q, _)| self.two_sided.queues.prefetch(q as usize));
            }
            if let Some(&soon) = ranks.get(i + Ahead::DISTANCE / 4) {
                woken(soon).for_each(|task| self.lanes.parked.prefetch(task));
            }
            // SAFETY: the caller's.
            unsafe { self.merge(rank, merged) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ahead;

    #[test]
    fn what_the_polls_ahead_keep_of_a_task_is_one_word() {
        assert_eq!(size_of::<Ahead>(), 8);
    }
}

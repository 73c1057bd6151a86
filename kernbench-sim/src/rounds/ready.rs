//! The round's ready list: the runnables woken in one round, put in task order for the next.

use std::sync::Mutex;

use async_task::Runnable;

/// Woken runnables, one list per thread so that wakes from parallel merges rarely meet on a lock.
pub(crate) struct ReadyLists {
    lists: Box<[Mutex<Vec<Runnable<u32>>>]>,
}

impl ReadyLists {
    /// Lists for a run on `threads` threads.
    pub(crate) fn new(threads: usize) -> ReadyLists {
        ReadyLists { lists: (0..threads.max(1)).map(|_| Mutex::new(Vec::new())).collect() }
    }

    pub(crate) fn push(&self, runnable: Runnable<u32>) {
        // The driving thread and pool thread 0 share a list; the lock keeps that (rare) meeting safe.
        let slot = rayon::current_thread_index().unwrap_or(0) % self.lists.len();
        lock(&self.lists[slot]).push(runnable);
    }

    /// Moves every woken runnable into `out`, each in a slot its poll takes it out of.
    #[inline]
    pub(crate) fn drain_into(&self, out: &mut Vec<Option<Runnable<u32>>>) {
        for list in &self.lists {
            out.extend(lock(list).drain(..).map(Some));
        }
    }
}

/// `x` as an integer in [`f64::total_cmp`]'s order: a sort key compared in one instruction, where a
/// float's order is a call.
pub(crate) fn total_order(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    // Negative floats count down as their bits count up: flip every bit but the sign.
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

/// Puts a round's woken runnables in task order (so rank order, each PE's lanes together). When many
/// of the tasks between the first and the last woken are, as in a ring where every PE steps each
/// round, it puts each in its slot of `by_task` (from the first woken: a process of a spread run wakes
/// only its own tasks, and slots for the tasks before them would all be written) and reads the slots
/// back in one pass, linear where a sort is not; when few are, it sorts them.
pub(crate) fn in_task_order(round: &mut Vec<Option<Runnable<u32>>>, by_task: &mut Vec<Option<Runnable<u32>>>) {
    // Below this many, a sort costs less than a pass over the slots.
    const FEW: usize = 64;
    let task = |r: &Runnable<u32>| *r.metadata() as usize;
    let span = if round.len() < FEW {
        None
    } else {
        round.iter().flatten().map(task).fold(None, |span, t| match span {
            None => Some((t, t)),
            Some((first, last)) => Some((first.min(t), last.max(t))),
        })
    };
    let Some((first, last)) = span.filter(|&(first, last)| round.len() * 8 >= last - first) else {
        round.sort_unstable_by_key(|r| r.as_ref().map(task));
        return;
    };
    let slots = last - first + 1;
    if by_task.len() < slots {
        by_task.resize_with(slots, || None);
    }
    for runnable in round.drain(..).flatten() {
        let slot = task(&runnable) - first;
        by_task[slot] = Some(runnable);
    }
    round.extend(by_task[..slots].iter_mut().filter_map(Option::take).map(Some));
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the list inconsistent (push/append only).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::total_order;

    #[test]
    fn total_order_sorts_as_total_cmp_does() {
        let values = [
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1.5,
            -1.5,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            1e300,
            -1e300,
            2.0,
        ];
        let mut by_key = values;
        by_key.sort_by_key(|&x| total_order(x));
        let mut by_cmp = values;
        by_cmp.sort_by(f64::total_cmp);
        assert_eq!(by_key.map(f64::to_bits), by_cmp.map(f64::to_bits));
    }
}

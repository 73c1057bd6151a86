//! The round's ready list: the tasks woken in one round ([`ReadyLists`]), put in task order for the
//! next, and the waker a kernel's poll is given.

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::task::{RawWaker, RawWakerVTable, Wake, Waker};

use crate::lanes::ReadyLists;

/// What the waker of a task's poll wakes: the task, in the run's ready lists. The runtime wakes a
/// parked lane itself ([`crate::lanes::Lanes::wake_if`]); this is for a kernel that awaits a future of
/// its own, which wakes through the waker it is given.
pub(crate) struct Woken<'r> {
    pub(crate) ready: &'r Arc<ReadyLists>,
    pub(crate) task: u32,
}

impl Woken<'_> {
    /// The waker of one poll: borrowed, nothing to count or free; a clone, which may outlive the poll,
    /// owns a handle on the ready lists ([`OwnedWoken`]).
    pub(crate) fn waker(&self) -> Waker {
        const BORROWED: RawWakerVTable = RawWakerVTable::new(clone_borrowed, wake_borrowed, wake_borrowed, |_| {});
        fn clone_borrowed(data: *const ()) -> RawWaker {
            // SAFETY: `data` is the `Woken` the poll's waker was made from, alive while it is used.
            let woken = unsafe { &*data.cast::<Woken<'_>>() };
            let owned = Waker::from(Arc::new(OwnedWoken { ready: Arc::clone(woken.ready), task: woken.task }));
            // Its count passes to the clone.
            let owned = ManuallyDrop::new(owned);
            RawWaker::new(owned.data(), owned.vtable())
        }
        fn wake_borrowed(data: *const ()) {
            // SAFETY: as in `clone_borrowed`.
            let woken = unsafe { &*data.cast::<Woken<'_>>() };
            woken.ready.push(woken.task);
        }
        // SAFETY: the vtable's functions treat `data` as a `Woken` (which `self` is, and outlives the
        // poll the waker is lent to: a clone made in it owns its own), and may be called from any
        // thread (the lists are locked); a wake by value frees nothing, as a drop does not.
        unsafe { Waker::from_raw(RawWaker::new(std::ptr::from_ref(self).cast(), &BORROWED)) }
    }
}

/// A task's waker cloned out of its poll.
struct OwnedWoken {
    ready: Arc<ReadyLists>,
    task: u32,
}

impl Wake for OwnedWoken {
    fn wake(self: Arc<Self>) {
        self.ready.push(self.task);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.push(self.task);
    }
}

/// `x` as an integer in [`f64::total_cmp`]'s order: a sort key compared in one instruction, where a
/// float's order is a call.
pub(crate) fn total_order(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    // Negative floats count down as their bits count up: flip every bit but the sign.
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

/// Puts a round's woken tasks in task order (so rank order, each PE's lanes together), each once.
/// When many of the tasks between the first and the last woken are, as in a ring where every PE steps
/// each round, it marks each in its slot of `by_task` (from the first woken: a process of a spread run
/// wakes only its own tasks, and slots for the tasks before them would all be written) and reads the
/// slots back in one pass, linear where a sort is not; when few are, it sorts them.
#[inline]
pub(crate) fn in_task_order(round: &mut Vec<u32>, by_task: &mut Vec<bool>) {
    // Below this many, a sort costs less than a pass over the slots.
    const FEW: usize = 64;
    let span = if round.len() < FEW {
        None
    } else {
        round.iter().fold(None, |span, &t| match span {
            None => Some((t, t)),
            Some((first, last)) => Some((first.min(t), last.max(t))),
        })
    };
    let Some((first, last)) = span.filter(|&(first, last)| round.len() * 8 >= (last - first) as usize) else {
        round.sort_unstable();
        round.dedup();
        return;
    };
    let slots = (last - first) as usize + 1;
    if by_task.len() < slots {
        by_task.resize(slots, false);
    }
    for &task in round.iter() {
        by_task[(task - first) as usize] = true;
    }
    round.clear();
    for (slot, woken) in by_task[..slots].iter_mut().enumerate() {
        if std::mem::take(woken) {
            round.push(first + slot as u32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{in_task_order, total_order};

    #[test]
    fn a_round_s_woken_tasks_come_in_task_order_each_once_whether_sorted_or_put_in_slots() {
        let few = vec![9, 3, 9, 1, 3, 3];
        // Enough, and dense enough, to be put in slots: every task twice, from 1,000.
        let many: Vec<u32> = (1000..1200).rev().chain(1000..1200).collect();
        let mut by_task = Vec::new();
        for woken in [few, many] {
            let mut round = woken.clone();
            in_task_order(&mut round, &mut by_task);
            let mut expected = woken;
            expected.sort_unstable();
            expected.dedup();
            assert_eq!(round, expected);
            // The slots are left clear for the next round.
            assert!(by_task.iter().all(|&slot| !slot));
        }
        assert!(!by_task.is_empty(), "the second round went through the slots");
    }

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

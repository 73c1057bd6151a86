//! The merge of a round, for two-sided traffic: each polled PE publishes the queue sides its lanes
//! touched and wakes the lanes waiting on the other sides (rule M of the round protocol).

use std::ops::Range;

use super::queue::Side;
use super::{PeLinks, TwoSided};
use crate::lanes::{Lanes, Wait};
use crate::timing::Transfer;

/// One side of a queue between two processes that a round's merge published: messages at
/// `positions` (the sender's side) or their credits (the receiver's).
pub(crate) struct Crossing {
    pub(crate) queue: u32,
    pub(crate) side: Side,
    pub(crate) positions: Range<u64>,
}

impl PeLinks {
    /// Publishes what rank `rank`'s lanes did to their queues this round and lists in `woken` the lanes
    /// waiting on the other sides; lists the messages it sent in `sent` when `timed`, and the sides
    /// whose other end is in another process in `crossing`.
    ///
    /// # Safety
    /// Rule M: the calling thread merges `rank`, and no other thread merges it.
    pub(crate) unsafe fn publish(
        &mut self,
        rank: u32,
        (run, lanes): (&TwoSided, &Lanes<'_>),
        timed: bool,
        sent: &mut Vec<Transfer>,
        crossing: &mut Vec<Crossing>,
        woken: &mut Vec<u32>,
    ) {
        for &(q, side) in &self.touched {
            let queue = &run.queues[q as usize];
            // SAFETY: rule M: this PE is the side it publishes.
            let (positions, other, waiting) = unsafe {
                match side {
                    Side::Sender => {
                        let new = queue.publish_tail();
                        if timed {
                            for position in new.clone() {
                                // SAFETY: positions published now were written by this PE this round,
                                // and the receiver reads nothing before the next round.
                                let (depart_ns, bytes) =
                                    queue.message_mut(position).map_or((0.0, 0), |m| (m.at_ns, m.tile.bytes() as u64));
                                sent.push(Transfer::message(depart_ns, rank, q, position, bytes));
                            }
                        }
                        (new, (queue.receiver, side.other()), Wait::Recv(q))
                    }
                    Side::Receiver => (queue.publish_head(), (queue.sender, side.other()), Wait::Send(q)),
                }
            };
            if positions.is_empty() {
                continue;
            }
            let (other_pe, other_side) = other;
            if !lanes.tasks.holds(other_pe) {
                // The other side is in another process: handed over after the round.
                crossing.push(Crossing { queue: q, side, positions });
                continue;
            }
            // SAFETY: rule M: wait cells are only read while merging.
            unsafe { wake_side((run, lanes), q, other_side, waiting, |task| woken.push(task)) };
        }
        self.touched.clear();
    }
}

/// Wakes the lane that owns `side` of queue `q` with `wake`, if it waits in `waiting`.
///
/// # Safety
/// Rule M or B: queue owners are not being written (they are only while polling), and no wait cell is
/// borrowed mutably.
pub(crate) unsafe fn wake_side(
    parts: (&TwoSided, &Lanes<'_>),
    q: u32,
    side: Side,
    waiting: Wait,
    wake: impl FnOnce(u32),
) {
    // SAFETY: the caller's.
    let Some(task) = (unsafe { side_owner(parts, q, side) }) else { return };
    // SAFETY: the caller guarantees no mutable borrow of the wait cell.
    if unsafe { parts.1.parked.get_ref(task) }.wait == waiting {
        wake(task as u32);
    }
}

/// The task that owns `side` of queue `q`, if one has used it.
///
/// # Safety
/// Rule M or B: queue owners are not being written (they are only while polling).
pub(crate) unsafe fn side_owner((run, lanes): (&TwoSided, &Lanes<'_>), q: u32, side: Side) -> Option<usize> {
    let queue = &run.queues[q as usize];
    let pe = if side == Side::Sender { queue.sender } else { queue.receiver };
    // With one channel every PE runs one lane, which owns every side it uses (and does not record it).
    // SAFETY: the caller guarantees owners are not being written.
    let tasks = &lanes.tasks;
    let lane = if tasks.channels() == 1 { Some(0) } else { unsafe { run.queues.owner_lane(q as usize, side) } }?;
    Some(tasks.task(pe, lane) as usize)
}

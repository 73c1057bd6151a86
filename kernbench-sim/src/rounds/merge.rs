//! The merge phase and the placement after it: what a round's polls did becomes visible, and the
//! round's transfers take their channels.

use crate::error::RunError;
use crate::one_sided::ONE_SIDED;
use crate::timing::Transfer;
use crate::two_sided::Crossing;

use super::Execution;
use super::ready::total_order;

/// A PE's compute with more bookings than this forgets the ones its lanes are past.
const FORGET_COMPUTE_ABOVE: usize = 64;

/// A transfer's place in the order of placement, and its index in the round's list: departure, sender
/// and queue in one integer, then position. Sorting these small keys, compared in a few instructions,
/// costs a fraction of sorting the transfers themselves.
pub(crate) type PlaceKey = (u128, u64, u32);

fn place_key((index, t): (usize, &Transfer)) -> PlaceKey {
    // The departure's total order as an unsigned number (its sign bit flipped), above sender and queue.
    let depart = (total_order(t.depart_ns) as u64) ^ (1 << 63);
    let high = (u128::from(depart) << 64) | (u128::from(t.sender) << 32) | u128::from(t.queue);
    (high, t.position, index as u32)
}

impl Execution<'_> {
    /// Orders a round's transfers of calls run together as a channel's arbiter serves the calls: by
    /// fair queueing on each transfer's first channel, so that calls whose messages wait for one
    /// channel take turns rather than the first to arrive keeping the lead. A transfer's tag is when
    /// it would finish on that channel if its call had the channel to itself from the later of its
    /// departure and its call's previous tag there; transfers go in order of tags (then as alone).
    fn fair_order(&mut self, transfers: &[Transfer], order: &mut [PlaceKey]) {
        let Some(network) = &self.network else { return };
        let (tasks, queues) = (&self.lanes.tasks, &self.two_sided.queues);
        order.sort_unstable();
        let mut tagged: Vec<(u64, PlaceKey)> = Vec::with_capacity(order.len());
        for &key in order.iter() {
            let t = &transfers[key.2 as usize];
            let call = queues.get(t.queue as usize).map_or(0, |q| tasks.call_of_channel(q.channel));
            let tag = match network.first_channel(t.queue) {
                Some((channel, ns_per_byte)) => {
                    let last = self.fair_tags.entry((call, channel)).or_insert(f64::NEG_INFINITY);
                    *last = last.max(t.depart_ns) + t.bytes as f64 * ns_per_byte;
                    *last
                }
                None => t.depart_ns,
            };
            tagged.push((total_order(tag) as u64 ^ (1 << 63), key));
        }
        tagged.sort_unstable();
        for (slot, (_, key)) in order.iter_mut().zip(tagged) {
            *slot = key;
        }
    }

    /// Publishes what polled rank `rank`'s lanes did and wakes the lanes waiting on it; lists the
    /// transfers it started in `sent` (under the timing model) and its queue sides towards other
    /// processes in `crossing`.
    ///
    /// # Safety
    /// Rule M: the calling thread merges `rank`, and no other thread merges it.
    pub(crate) unsafe fn merge(&self, rank: u32, sent: &mut Vec<Transfer>, crossing: &mut Vec<Crossing>) {
        let timed = self.network.is_some();
        // SAFETY: rule M: this thread merges `rank`, whose cells are its own.
        let links = unsafe { self.two_sided.pes.get_mut(rank as usize) };
        // SAFETY: as above.
        unsafe { links.publish(rank, (&self.two_sided, &self.lanes), timed, sent, crossing) };
        if timed {
            // SAFETY: as above.
            unsafe { self.one_sided.transfers(rank, sent) };
        }
        // SAFETY: as above.
        let pe = unsafe { self.lanes.pes.get_mut(rank as usize) };
        if let Some(compute) = pe.compute.as_mut().filter(|c| c.len() > FORGET_COMPUTE_ABOVE) {
            // No lane of the PE can start work before the earliest clock of those still running.
            let floor = self
                .lanes
                .tasks
                .lanes_of(rank)
                .filter(|&task| self.ended(task as u32).is_none())
                // SAFETY: as above: a PE's lanes are touched only by the thread merging the PE.
                .map(|task| unsafe { self.lanes.states.get_ref(task) }.clock.now)
                .fold(f64::INFINITY, f64::min);
            compute.forget_before(floor);
        }
    }

    /// Places the round's transfers on their channels, earliest departure first, and stamps each with
    /// its arrival time (rule B). Sequential, in a fixed order (earliest departure first, then sender,
    /// queue and position: no two transfers tie), so times do not depend on the thread count; every
    /// process of a spread run places every transfer. `order` is room for the sort.
    ///
    /// # Errors
    /// An exchange that failed, in a spread run; a transfer that failed links cut off
    /// ([`RunError::Unreachable`]).
    pub(crate) fn place_transfers(
        &mut self,
        transfers: &[Transfer],
        order: &mut Vec<PlaceKey>,
    ) -> Result<(), RunError> {
        if self.network.is_none() {
            return Ok(());
        }
        order.clear();
        order.extend(transfers.iter().enumerate().map(place_key));
        if self.lanes.tasks.calls() > 1 {
            self.fair_order(transfers, order);
        } else {
            order.sort_unstable();
        }
        let network = self.network.as_mut().expect("a timed run");
        for t in order.iter().map(|&(.., index)| &transfers[index as usize]) {
            if let Some(multicast) = t.multicast {
                // Its parts are in its sender's outbox, of this process: `tl.multicast` refuses a
                // spread run's ranks of other processes.
                let first = (t.position & !ONE_SIDED) as usize;
                let Some(memory) = self.one_sided.pes.get(t.sender as usize).as_mut() else { continue };
                let Some(parts) = memory.outbox.get_mut(first..first + multicast.parts() as usize) else { continue };
                let legs: Vec<(u32, u32)> = parts.iter().map(|out| out.member_legs()).collect();
                let (arrivals, back) = network.deliver_multicast(multicast, t.queue, t.depart_ns, t.bytes, &legs)?;
                for (out, arrive_ns) in parts.iter_mut().zip(arrivals) {
                    out.arrives(arrive_ns, back);
                }
                continue;
            }
            let arrive_ns = network.deliver(t.queue, t.depart_ns, t.bytes)?;
            if t.position & ONE_SIDED == 0 {
                // The message is in this process's replica of the queue when its sender or receiver is
                // here.
                let queue = self.two_sided.queues.get(t.queue as usize);
                // SAFETY: rule B: nothing else touches the queue.
                if let Some(message) = queue.and_then(|q| unsafe { q.message_mut(t.position) }) {
                    message.at_ns = arrive_ns;
                }
                continue;
            }
            // A get's reply leaves the target when the request has reached it.
            let back = t.reply.map(|(back, bytes)| network.deliver(back, arrive_ns, bytes)).transpose()?;
            let index = t.position & !ONE_SIDED;
            let out = if self.lanes.tasks.holds(t.sender) {
                self.one_sided.pes.get(t.sender as usize).as_mut().map(|m| &mut m.outbox[index as usize])
            } else {
                // Another process's: here only when its target is.
                let spread = self.spread.as_mut().expect("a rank of another process: a spread run");
                if let Some(task) = t.put_by {
                    let landed = spread.remote_landed.entry(task).or_insert(0.0);
                    *landed = landed.max(arrive_ns);
                }
                spread.inbox.get_mut(&(t.sender, index))
            };
            if let Some(out) = out {
                out.arrives(arrive_ns, back);
            }
        }
        if network.forget_due {
            // No message can leave before the clock of the earliest lane still running.
            let results = &self.results;
            // Lanes and their results are in the same (cell) order.
            let mut floor = (self.lanes.states.iter_mut().zip(results.iter()))
                .filter(|(_, ended)| ended.get().is_none())
                .map(|(s, _)| s.clock.now)
                .fold(f64::INFINITY, f64::min);
            if let Some(spread) = &self.spread {
                // Every process's model forgets the same bookings: the earliest clock of every process.
                floor = spread.gather(&floor)?.into_iter().fold(f64::INFINITY, f64::min);
            }
            network.forget_before(floor);
        }
        Ok(())
    }
}

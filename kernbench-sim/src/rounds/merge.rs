//! The merge phase and the placement after it: what a round's polls did becomes visible, and the
//! round's transfers take their channels.

use std::collections::hash_map::Entry;
use std::sync::atomic::Ordering;

use rustc_hash::FxHashMap;

use crate::error::RunError;
use crate::network::Network;
use crate::one_sided::ONE_SIDED;
use crate::protocol::prefetch;
use crate::timing::Transfer;

use super::ahead::Ahead;
use super::ready::total_order;
use super::{Execution, Merged};

/// A PE's compute with more bookings than this forgets the ones its lanes are past.
const FORGET_COMPUTE_ABOVE: usize = 64;

/// A transfer's place in the order of placement, and its index in the round's list: its
/// [`order_key`], then the index. Sorting these small keys, compared in a few instructions, costs a
/// fraction of sorting the transfers themselves.
type PlaceKey = (u128, u64, u32);

/// A departure's total order as an unsigned number (its sign bit flipped).
fn departure_key(t: &Transfer) -> u64 {
    (total_order(t.depart_ns) as u64) ^ (1 << 63)
}

/// A transfer's place in the order of placement: departure, sender and queue in one integer, then
/// position. No two transfers of a round have the same (a queue's positions, and a sender's one-sided
/// operations, are its own), so it also names a transfer between the processes of a spread run,
/// which each hold a part of the round's transfers.
pub(crate) fn order_key(t: &Transfer) -> (u128, u64) {
    let high = (u128::from(departure_key(t)) << 64) | (u128::from(t.sender) << 32) | u128::from(t.queue);
    (high, t.position)
}

fn place_key((index, t): (usize, &Transfer)) -> PlaceKey {
    let (high, position) = order_key(t);
    (high, position, index as u32)
}

/// Reorders keys sorted in placement order, as [`Execution::fair_order`] does.
type FairOrder<'a> = dyn FnMut(&mut [PlaceKey]) + 'a;

/// Room for the sort that puts a round's transfers in the order of placement, kept from round to round.
#[derive(Default)]
pub(crate) struct PlaceOrder {
    keys: Vec<PlaceKey>,
    /// The order found: departure above index, each a transfer's index in its low 32 bits.
    by_departure: Vec<u128>,
    distinct: Distinct,
}

/// Room for [`by_few_departures`], kept from round to round.
#[derive(Default)]
struct Distinct {
    /// Each distinct departure's number, in the order first met.
    numbers: FxHashMap<u64, u32>,
    /// The distinct departures by number.
    departures: Vec<u64>,
    /// Each key's departure's number.
    of_key: Vec<u32>,
    /// By number: how many keys leave then, then the next place for one of them.
    places: Vec<usize>,
    /// The numbers in order of departure.
    by_time: Vec<u32>,
    sorted: Vec<u128>,
}

/// Sorts `keys`, departures above indices listed in index order, when their departures are few (a
/// round's lanes mostly step together, so departures repeat): each key goes to the next place of its
/// departure among the distinct ones, in the order listed, so ties keep index order. Two linear
/// passes, where a comparison sort of a large round's keys takes a dozen. `false`, having sorted
/// nothing, when the departures are not few. Out of line: inlined into [`PlaceOrder::sort`], it
/// slowed the small rounds that never reach it.
#[inline(never)]
fn by_few_departures(keys: &mut Vec<u128>, room: &mut Distinct) -> bool {
    // Past this many distinct departures (or a tenth of the keys), a comparison sort is as fast.
    const MOST: usize = 1024;
    let most = MOST.min(keys.len() / 10);
    let Distinct { numbers, departures, of_key, places, by_time, sorted } = room;
    numbers.clear();
    departures.clear();
    of_key.clear();
    places.clear();
    for &key in keys.iter() {
        let departure = (key >> 64) as u64;
        let number = match numbers.entry(departure) {
            Entry::Occupied(known) => *known.get(),
            Entry::Vacant(new) => {
                if departures.len() == most {
                    return false;
                }
                departures.push(departure);
                places.push(0);
                *new.insert(departures.len() as u32 - 1)
            }
        };
        of_key.push(number);
        places[number as usize] += 1;
    }
    by_time.clear();
    by_time.extend(0..departures.len() as u32);
    by_time.sort_unstable_by_key(|&number| departures[number as usize]);
    let mut start = 0;
    for &number in by_time.iter() {
        let place = &mut places[number as usize];
        (*place, start) = (start, start + *place);
    }
    sorted.resize(keys.len(), 0);
    for (&key, &number) in keys.iter().zip(of_key.iter()) {
        let place = &mut places[number as usize];
        sorted[*place] = key;
        *place += 1;
    }
    std::mem::swap(keys, sorted);
    true
}

impl PlaceOrder {
    /// The indices of `transfers` in the order of placement (earliest departure, then sender, queue
    /// and position); `fair`, when given, reorders the keys sorted so.
    #[inline]
    fn sort(&mut self, transfers: &[Transfer], fair: Option<&mut FairOrder<'_>>) -> &[u128] {
        self.by_departure.clear();
        // A round's merges list a single call's transfers by sender, each sender's by queue and
        // position (checked: a spread run's hand-over need not): then departure and index alone sort
        // them as the whole key does, in keys half the size, compared at once.
        let by_sender = |a: &Transfer, b: &Transfer| (a.sender, a.queue, a.position) < (b.sender, b.queue, b.position);
        if fair.is_none() && transfers.windows(2).all(|w| by_sender(&w[0], &w[1])) {
            let key = |(index, t): (usize, &Transfer)| (u128::from(departure_key(t)) << 64) | index as u128;
            self.by_departure.extend(transfers.iter().enumerate().map(key));
            // Below this many, a comparison sort costs less than counting departures.
            const FEW: usize = 256;
            if self.by_departure.len() < FEW || !by_few_departures(&mut self.by_departure, &mut self.distinct) {
                self.by_departure.sort_unstable();
            }
            return &self.by_departure;
        }
        self.keys.clear();
        self.keys.extend(transfers.iter().enumerate().map(place_key));
        self.keys.sort_unstable();
        if let Some(fair) = fair {
            fair(&mut self.keys);
        }
        self.by_departure.extend(self.keys.iter().map(|&(.., index)| u128::from(index)));
        &self.by_departure
    }
}

impl Execution<'_> {
    /// Orders a round's transfers of calls run together as a channel's arbiter serves the calls: by
    /// fair queueing on each transfer's first channel, so that calls whose messages wait for one
    /// channel take turns rather than the first to arrive keeping the lead. A transfer's tag is when
    /// it would finish on that channel if its call had the channel to itself from the later of its
    /// departure and its call's previous tag there; transfers go in order of tags (then as alone,
    /// the order `order` comes in).
    fn fair_order(&mut self, transfers: &[Transfer], order: &mut [PlaceKey]) {
        let Some(network) = &self.network else { return };
        let tasks = &self.lanes.tasks;
        let mut tagged: Vec<(u64, PlaceKey)> = Vec::with_capacity(order.len());
        for &key in order.iter() {
            let t = &transfers[key.2 as usize];
            // An edge's channels are consecutive queues from a multiple of the channel count.
            let call = tasks.call_of_channel(t.queue % tasks.channels());
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

    /// Publishes what polled rank `rank`'s lanes did and lists in `merged` the lanes waiting on it
    /// that it wakes, the transfers it started (under the timing model) and its queue sides towards
    /// other processes.
    ///
    /// # Safety
    /// Rule M: the calling thread merges `rank`, and no other thread merges it.
    pub(crate) unsafe fn merge(&self, rank: u32, merged: &mut Merged) {
        let timed = self.network.is_some();
        // SAFETY: rule M: this thread merges `rank`, whose cells are its own.
        let links = unsafe { self.two_sided.pes.get_mut(rank as usize) };
        let Merged { sent, crossing, woken } = merged;
        let first = sent.len();
        // SAFETY: as above.
        unsafe { links.publish(rank, (&self.two_sided, &self.lanes), timed, sent, crossing, woken) };
        if timed {
            // A round without one-sided operations has nothing in any outbox: no PE's needs a look.
            if self.one_sided.used.load(Ordering::Relaxed) {
                // SAFETY: as above.
                unsafe { self.one_sided.transfers(rank, sent) };
            }
            // Ranks merge in order, so with its own transfers by queue and position the round's list
            // is in the order the placement sorts fastest (see `PlaceOrder::sort`). A PE sends on a
            // few queues a round: a short sort, when one is needed at all.
            let own = &mut sent[first..];
            if own.len() > 1 && !own.is_sorted_by_key(|t| (t.queue, t.position)) {
                own.sort_unstable_by_key(|t| (t.queue, t.position));
            }
        }
        // SAFETY: as above.
        let pe = unsafe { self.lanes.pes.get_mut(rank as usize) };
        let compute = pe.rare.as_mut().and_then(|rare| rare.compute.as_mut());
        if let Some(compute) = compute.filter(|c| c.len() > FORGET_COMPUTE_ABOVE) {
            // No lane of the PE can start work before the earliest clock of those still running.
            let floor = self
                .lanes
                .tasks
                .lanes_of(rank)
                // SAFETY: as above: a PE's lanes are touched only by the thread merging the PE.
                .map(|task| unsafe { self.lanes.states.get_ref(task) })
                .filter(|lane| !lane.ended)
                .map(|lane| lane.clock.now)
                .fold(f64::INFINITY, f64::min);
            compute.forget_before(floor);
        }
    }

    /// Places the round's transfers on their channels, earliest departure first, and stamps each with
    /// its arrival time (rule B). Sequential, in a fixed order (earliest departure first, then sender,
    /// queue and position: no two transfers tie), so times do not depend on the thread count; in a
    /// spread run every process places every transfer, or its own channels' part of each
    /// ([`crate::spread::Placement`]). `order` is room for the sort.
    ///
    /// # Errors
    /// An exchange that failed, in a spread run; a transfer that failed links cut off
    /// ([`RunError::Unreachable`]).
    pub(crate) fn place_transfers(&mut self, transfers: &[Transfer], order: &mut PlaceOrder) -> Result<(), RunError> {
        if self.network.is_none() {
            return Ok(());
        }
        let order = if self.lanes.tasks.calls() > 1 {
            order.sort(transfers, Some(&mut |keys: &mut [PlaceKey]| self.fair_order(transfers, keys)))
        } else {
            order.sort(transfers, None)
        };
        if self.network.as_ref().is_some_and(|n| n.divided()) {
            return self.place_divided(transfers, order);
        }
        // Out of the run while it is placed, so that each transfer's arrival is stamped as it goes.
        let mut network = self.network.take().expect("a timed run");
        let placed = self.place_whole(&mut network, transfers, order);
        self.network = Some(network);
        placed?;
        self.forget_placed()
    }

    /// Places the round's transfers in `order` on every channel, as one process does, and stamps each
    /// with its arrival time.
    ///
    /// # Errors
    /// A transfer that failed links cut off ([`RunError::Unreachable`]).
    fn place_whole(&mut self, network: &mut Network, transfers: &[Transfer], order: &[u128]) -> Result<(), RunError> {
        let asks_ahead = self.asks_ahead();
        let transfer = |i: usize| order.get(i).map(|&index| &transfers[index as u32 as usize]);
        for (i, t) in order.iter().map(|&index| &transfers[index as u32 as usize]).enumerate() {
            if asks_ahead {
                // Asks ahead for what placing the transfers a few on will read, a step further the
                // nearer they are: the transfer, its route's place and its message, its route, its
                // channels, their last bookings.
                if let Some(&index) = order.get(i + 4 * Ahead::DISTANCE) {
                    prefetch(std::ptr::from_ref(&transfers[index as u32 as usize]).cast(), size_of::<Transfer>());
                }
                if let Some(t) = transfer(i + 2 * Ahead::DISTANCE) {
                    network.ask_route(t.queue);
                    if t.position & ONE_SIDED == 0 {
                        self.two_sided.queues.prefetch_message(t.queue as usize, t.position);
                    }
                }
                if let Some(t) = transfer(i + Ahead::DISTANCE) {
                    network.ask_channels_of(t.queue);
                }
                if let Some(t) = transfer(i + Ahead::DISTANCE / 2) {
                    network.ask_channels(t.queue);
                }
                if let Some(t) = transfer(i + Ahead::DISTANCE / 4) {
                    network.ask_bookings(t.queue);
                }
            }
            if let Some(multicast) = t.multicast() {
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
            // A get's reply leaves the target when the request has reached it.
            let back = t.reply().map(|(back, bytes)| network.deliver(back, arrive_ns, bytes)).transpose()?;
            self.arrived(t, arrive_ns, back);
        }
        Ok(())
    }

    /// Places the round's transfers in `order` divided over the processes
    /// ([`crate::spread::Placement::Divided`]) and stamps each with its arrival time.
    ///
    /// # Errors
    /// An exchange that failed.
    fn place_divided(&mut self, transfers: &[Transfer], order: &[u128]) -> Result<(), RunError> {
        let (Some(network), Some(spread)) = (self.network.as_mut(), self.spread.as_ref()) else { return Ok(()) };
        let in_order = |&index: &u128| &transfers[index as u32 as usize];
        let placed = spread.place_divided(network, order.iter().map(in_order))?;
        for (place, arrive_ns, back) in placed {
            self.arrived(in_order(&order[place as usize]), arrive_ns, back);
        }
        self.forget_placed()
    }

    /// Stamps transfer `t` with its arrival time, and a get's with when its reply is back. A
    /// message's stamp, made for every timed message, is inlined where placement calls it; a
    /// one-sided operation's is a call of its own.
    #[inline]
    fn arrived(&mut self, t: &Transfer, arrive_ns: f64, back: Option<f64>) {
        if t.position & ONE_SIDED == 0 {
            // The message is in this process's replica of the queue when its sender or receiver is
            // here.
            // SAFETY: rule B: nothing else touches the queue.
            if let Some(message) = unsafe { self.two_sided.queues.message_mut(t.queue as usize, t.position) } {
                message.at_ns = arrive_ns;
            }
            return;
        }
        self.one_sided_arrived(t, arrive_ns, back);
    }

    /// [`Execution::arrived`] of a one-sided operation's transfer.
    #[inline(never)]
    fn one_sided_arrived(&mut self, t: &Transfer, arrive_ns: f64, back: Option<f64>) {
        let index = t.position & !ONE_SIDED;
        let out = if self.lanes.tasks.holds(t.sender) {
            self.one_sided.pes.get(t.sender as usize).as_mut().map(|m| &mut m.outbox[index as usize])
        } else {
            // Another process's: here only when its target is.
            let spread = self.spread.as_mut().expect("a rank of another process: a spread run");
            if let Some(task) = t.put_by() {
                let landed = spread.remote_landed.entry(task).or_insert(0.0);
                *landed = landed.max(arrive_ns);
            }
            spread.inbox.get_mut(&(t.sender, index))
        };
        if let Some(out) = out {
            out.arrives(arrive_ns, back);
        }
    }

    /// Forgets the channels' old bookings once a channel holds many (after a round's placement): a
    /// test, in the caller, on most rounds.
    ///
    /// # Errors
    /// An exchange that failed, in a spread run.
    #[inline]
    fn forget_placed(&mut self) -> Result<(), RunError> {
        if self.network.as_ref().is_some_and(|network| network.forget_due) { self.forget_bookings() } else { Ok(()) }
    }

    /// [`Execution::forget_placed`] once it is due.
    #[inline(never)]
    fn forget_bookings(&mut self) -> Result<(), RunError> {
        let Some(network) = self.network.as_mut() else { return Ok(()) };
        // No message can leave before the clock of the earliest lane still running.
        let mut floor = (self.lanes.states.iter_mut())
            .filter(|lane| !lane.ended)
            .map(|lane| lane.clock.now)
            .fold(f64::INFINITY, f64::min);
        if let Some(spread) = &self.spread {
            // Every process's model forgets the same bookings: the earliest clock of every process.
            floor = spread.gather(floor)?.into_iter().fold(f64::INFINITY, f64::min);
        }
        let longest = network.forget_before(floor);
        if network.divided()
            && let Some(spread) = &self.spread
        {
            // Each process books its own channels: the next time to forget is the busiest's.
            network.forget_after(spread.gather(longest)?.into_iter().max().unwrap_or(0));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{PlaceOrder, Transfer};
    use crate::rounds::ready::total_order;

    /// `n` transfers from a small generator: departures drawn from `spread` values past a few fixed
    /// ones (of either sign), so that many tie, and senders, queues and positions.
    fn transfers(seed: u64, n: usize, spread: u64) -> Vec<Transfer> {
        let mut x = seed;
        let mut next = move |m: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let departures = [-1.5, 0.0, 2.0, 2.5, 1e9];
        (0..n)
            .map(|_| {
                let depart = match next(departures.len() as u64 + spread) as usize {
                    fixed if fixed < departures.len() => departures[fixed],
                    spread => spread as f64 * 0.37 - 50.0,
                };
                Transfer::message(depart, next(64) as u32, next(8) as u32, next(64), 64)
            })
            .collect()
    }

    fn placed(order: &mut PlaceOrder, list: &[Transfer]) -> Vec<usize> {
        order.sort(list, None).iter().map(|&key| key as u32 as usize).collect()
    }

    #[test]
    fn a_round_listed_by_sender_or_not_is_placed_by_departure_sender_queue_and_position() {
        let mut order = PlaceOrder::default();
        // Short lists, and long ones of few departures and of many.
        let shapes = [(40, 1000), (1000, 20), (1000, 100_000)];
        for (seed, (n, spread)) in (0..60).zip(shapes.into_iter().cycle()) {
            let mut list = transfers(seed, n, spread);
            let key = |t: &Transfer| (total_order(t.depart_ns), t.sender, t.queue, t.position);
            // Out of sender order (the full sort), then in it (departure and index alone).
            let mut expected: Vec<usize> = (0..list.len()).collect();
            expected.sort_by_key(|&i| (key(&list[i]), i));
            assert_eq!(placed(&mut order, &list), expected, "seed {seed}, as listed");
            list.sort_by_key(|t| (t.sender, t.queue, t.position));
            list.dedup_by_key(|t| (t.sender, t.queue, t.position));
            let mut expected: Vec<usize> = (0..list.len()).collect();
            expected.sort_by_key(|&i| key(&list[i]));
            assert_eq!(placed(&mut order, &list), expected, "seed {seed}, by sender");
        }
    }
}

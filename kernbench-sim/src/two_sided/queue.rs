//! IPCQs: one bounded queue per directed neighbour edge and channel, with credit flow control. Uses
//! the round protocol.
//!
//! A queue is a single-producer single-consumer ring of `depth` slots. Its sender owns `tail`, its
//! receiver owns `head`, and both see the other side only through values published at the end of each
//! round (`published_tail`, `published_head`). So within a round:
//!
//! - the receiver reads slots `head..published_tail` (messages sent in earlier rounds);
//! - the sender writes slots `tail..published_head + depth` (slots freed in earlier rounds);
//!
//! and the two ranges never share a slot (this is rule P of [`crate::protocol`] for a queue's sides).
//! A message sent in round `r` is received in round `r + 1` at the earliest, and a credit returned in
//! round `r` is usable from round `r + 1`: the same on one thread or many, which makes every run
//! deterministic.

use std::cell::UnsafeCell;
use std::ptr::NonNull;

use kernbench_core::Dtype;

use super::slots::{Message, Slab, Slot};
use crate::protocol::prefetch;

/// A side of a queue: what a PE touched in a round, and what a lane owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Sender,
    Receiver,
}

impl Side {
    /// The side at the queue's other end.
    pub(crate) fn other(self) -> Side {
        match self {
            Side::Sender => Side::Receiver,
            Side::Receiver => Side::Sender,
        }
    }
}

/// One channel of a directed neighbour edge: one cache line of what its sends and receives touch
/// (a million-PE run's polls and merges miss on their queues one after another). What only a failure
/// or a run of several lanes reads is elsewhere: its directions and channel in its PEs' ports
/// ([`super::TwoSided::end_of`]), its sides' owners in [`Queues`].
#[repr(align(64))]
pub(crate) struct Queue {
    pub(crate) sender: u32,
    pub(crate) receiver: u32,
    /// Its slots less one, the index of its last (a depth is 1 to
    /// [`kernbench_core::System::MAX_IPCQ_DEPTH`], 2^16).
    last_slot: u16,
    /// Its slots lie `1 << slot_shift` slots apart in the slab ([`Queues`] says why).
    slot_shift: u8,
    /// `tail % depth`, kept as it advances: no division on the hot path.
    tail_slot: UnsafeCell<u16>,
    /// `head % depth`.
    head_slot: UnsafeCell<u16>,
    tail: UnsafeCell<u64>,
    head: UnsafeCell<u64>,
    published_tail: UnsafeCell<u64>,
    published_head: UnsafeCell<u64>,
    /// Its first slot, in the slab of its [`Queues`], which outlives it and never moves them; the
    /// others follow `1 << slot_shift` slots apart. One slab for all the queues, not a list each: a
    /// million-PE run has millions.
    slots: NonNull<UnsafeCell<Slot>>,
    /// How long a credit takes to get back to the sender: its route's latency (0 untimed). Here, not
    /// in a list by queue number, which a spread run's every process would hold whole.
    pub(crate) credit_latency_ns: f64,
}

// SAFETY: rules P and M of the round protocol, as the module docs apply them. During a round, `tail`
// and the slots being written belong to the sender's thread, `head` and the slots being read to the
// receiver's thread, and the published values are only read; between rounds each published value is
// written by the one thread merging its owner.
unsafe impl Sync for Queue {}
// SAFETY: its slots pointer reaches only its own slots, in the slab its `Queues` owns and moves with
// it; nothing else holds them.
unsafe impl Send for Queue {}

impl Queue {
    /// A queue without slots yet: [`Queues`] gives each its own.
    pub(crate) fn new((sender, receiver): (u32, u32)) -> Queue {
        Queue {
            sender,
            receiver,
            last_slot: 0,
            slot_shift: 0,
            tail_slot: UnsafeCell::new(0),
            head_slot: UnsafeCell::new(0),
            tail: UnsafeCell::new(0),
            head: UnsafeCell::new(0),
            published_tail: UnsafeCell::new(0),
            published_head: UnsafeCell::new(0),
            slots: NonNull::dangling(),
            credit_latency_ns: 0.0,
        }
    }

    /// Slot `index` (below its depth).
    #[inline]
    fn slot(&self, index: usize) -> &UnsafeCell<Slot> {
        debug_assert!(index <= usize::from(self.last_slot));
        // SAFETY: `Queues` pointed `slots` at a slot of its slab with the queue's others `1 <<
        // slot_shift` apart after it; the slab outlives this queue and does not move; `index` is below
        // the depth, as every caller keeps it.
        unsafe { self.slots.add(index << self.slot_shift).as_ref() }
    }

    /// The slot of position `position` (a count of messages pushed before it).
    fn slot_of(&self, position: u64) -> &UnsafeCell<Slot> {
        self.slot(position_slot(position, self.depth()))
    }

    /// Sender side: when a credit is free, pushes the message `make` builds from the time that credit
    /// reached the sender; `false` when there is none.
    ///
    /// # Safety
    /// Only the sender's thread, in the poll phase.
    #[inline]
    pub(crate) unsafe fn try_push(&self, make: impl FnOnce(f64) -> Message) -> bool {
        // SAFETY: `tail` is the sender's; `published_head` is read-only during the round.
        let (tail, head) = unsafe { (&mut *self.tail.get(), *self.published_head.get()) };
        if *tail - head >= self.depth() {
            return false;
        }
        // SAFETY: `tail_slot` is the sender's, and the slot is outside `head..published_tail`, the only
        // slots the receiver touches.
        let (slot_index, slot) = unsafe {
            let index = &mut *self.tail_slot.get();
            let slot = &mut *self.slot(usize::from(*index)).get();
            (index, slot)
        };
        // Below `depth` in flight, the slot at `tail` is free. On the queue's first lap it was never
        // written: free from time 0, and not read. Read first, a fresh page of the slab would be
        // mapped to the zero page and then, at the write, replaced at the cost of a TLB flush on
        // every thread of the run.
        let credit_at_ns = if *tail < self.depth() {
            0.0
        } else {
            let Some(credit_at_ns) = slot.free_from() else { return false };
            credit_at_ns
        };
        slot.hold(make(credit_at_ns));
        *tail += 1;
        *slot_index = self.next_slot(*slot_index);
        true
    }

    /// Receiver side: the oldest message visible this round, left in place.
    ///
    /// # Safety
    /// Only the receiver's thread, in the poll phase.
    pub(crate) unsafe fn peek(&self) -> Option<&Message> {
        // SAFETY: `head` is the receiver's; `published_tail` is read-only during the round; the slot at
        // `head` is below `published_tail`, so the sender does not touch it this round.
        unsafe {
            if *self.head.get() == *self.published_tail.get() {
                return None;
            }
            (*self.slot(usize::from(*self.head_slot.get())).get()).message()
        }
    }

    /// Sender side: how many messages the sender has pushed (the position of the next).
    ///
    /// # Safety
    /// Only the sender's thread, in the poll phase.
    pub(crate) unsafe fn pushed(&self) -> u64 {
        // SAFETY: `tail` is the sender's.
        unsafe { *self.tail.get() }
    }

    /// Receiver side: how many messages the receiver has taken (the position of the next).
    ///
    /// # Safety
    /// Only the receiver's thread, in the poll phase.
    pub(crate) unsafe fn taken(&self) -> u64 {
        // SAFETY: `head` is the receiver's.
        unsafe { *self.head.get() }
    }

    /// Receiver side: takes the oldest visible message; its credit returns to the sender at the next
    /// publish, usable from simulated time `credit_at_ns`.
    ///
    /// # Safety
    /// As for [`Queue::peek`].
    pub(crate) unsafe fn pop(&self, credit_at_ns: f64) -> Option<Message> {
        // SAFETY: as in `peek`.
        unsafe {
            let head = &mut *self.head.get();
            if *head == *self.published_tail.get() {
                return None;
            }
            let index = &mut *self.head_slot.get();
            let slot = &mut *self.slot(usize::from(*index)).get();
            *head += 1;
            *index = self.next_slot(*index);
            slot.free(credit_at_ns)
        }
    }

    /// The slot after `index`.
    fn next_slot(&self, index: u16) -> u16 {
        if index == self.last_slot { 0 } else { index + 1 }
    }

    /// The message at position `position` (a count of messages pushed before it).
    ///
    /// # Safety
    /// Only between rounds, and only by the thread merging the sender or placing transfers: no other
    /// access to that slot may exist (the receiver's thread may be publishing the queue's head, which
    /// touches no slot).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn message_mut(&self, position: u64) -> Option<&mut Message> {
        // SAFETY: the caller excludes every other access.
        unsafe { &mut *self.slot_of(position).get() }.message_mut()
    }

    /// Publishes the sender's side: messages pushed so far become receivable. Returns the positions
    /// published now (empty when nothing was new).
    ///
    /// # Safety
    /// Only the thread merging the sender, in the merge phase.
    pub(crate) unsafe fn publish_tail(&self) -> std::ops::Range<u64> {
        // SAFETY: merge phase; `tail` is not written and `published_tail` is the sender's to publish.
        unsafe {
            let new = *self.published_tail.get()..*self.tail.get();
            *self.published_tail.get() = new.end;
            new
        }
    }

    /// Publishes the receiver's side: credits of messages taken so far return to the sender. Returns
    /// the positions whose credits return now (empty when nothing was new).
    ///
    /// # Safety
    /// Only the thread merging the receiver, in the merge phase.
    pub(crate) unsafe fn publish_head(&self) -> std::ops::Range<u64> {
        // SAFETY: as in `publish_tail`, for the receiver's side.
        unsafe {
            let new = *self.published_head.get()..*self.head.get();
            *self.published_head.get() = new.end;
            new
        }
    }

    /// In the sender's process of a queue whose receiver is in another: takes the published message at
    /// `position` out, to hand it over. Its slot stays unusable until its credit comes back
    /// ([`Queue::credits_back`]).
    pub(crate) fn take_message(&mut self, position: u64) -> Option<Message> {
        // SAFETY: `&mut self`: nothing else reaches the queue's slots.
        let slot = unsafe { &mut *self.slot_of(position).get() };
        slot.free(0.0)
    }

    /// In the receiver's process: a message handed over from the sender's process, published as the
    /// sender's merge would have published it.
    pub(crate) fn hand_in(&mut self, position: u64, message: Message) {
        // SAFETY: as in `take_message`.
        unsafe { &mut *self.slot_of(position).get() }.fill(message);
        let tail = (*self.tail.get_mut()).max(position + 1);
        (*self.tail.get_mut(), *self.published_tail.get_mut()) = (tail, tail);
    }

    /// In the receiver's process: when the credit of the message taken at `position` reaches the
    /// sender (0 if the slot is not free).
    pub(crate) fn credit_at(&mut self, position: u64) -> f64 {
        // SAFETY: as in `take_message`.
        unsafe { &*self.slot_of(position).get() }.free_from().unwrap_or(0.0)
    }

    /// In the sender's process: the credit of the message at `position`, returned in the receiver's
    /// process, published as the receiver's merge would have published it.
    pub(crate) fn credit_back(&mut self, position: u64, credit_at_ns: f64) {
        // SAFETY: as in `take_message`.
        drop(unsafe { &mut *self.slot_of(position).get() }.free(credit_at_ns));
        let head = (*self.head.get_mut()).max(position + 1);
        (*self.head.get_mut(), *self.published_head.get_mut()) = (head, head);
        *self.head_slot.get_mut() = position_slot(head, self.depth()) as u16;
    }

    /// Messages sent and not yet received.
    pub(crate) fn in_flight(&mut self) -> u64 {
        *self.tail.get_mut() - *self.head.get_mut()
    }

    /// The dtype, length and generation of each message sent and not yet received, oldest first.
    pub(crate) fn unreceived(&mut self) -> Vec<(Dtype, usize, u64)> {
        let (head, tail) = (*self.head.get_mut(), *self.tail.get_mut());
        (head..tail)
            .filter_map(|position| {
                // SAFETY: as in `take_message`.
                let message = unsafe { &*self.slot_of(position).get() }.message();
                message.map(|m| (m.tile.dtype(), m.tile.len(), m.generation.get()))
            })
            .collect()
    }

    /// Credits the sender can use now: free slots as of the last publish.
    pub(crate) fn credits(&mut self) -> u64 {
        self.depth() - (*self.tail.get_mut() - *self.published_head.get_mut())
    }

    /// Messages the receiver can take now.
    pub(crate) fn visible(&mut self) -> u64 {
        *self.published_tail.get_mut() - *self.head.get_mut()
    }

    /// Its slots: the credits a sender starts with.
    pub(crate) fn depth(&self) -> u64 {
        u64::from(self.last_slot) + 1
    }
}

/// A run's queues by number: every one, or in a run spread over processes only those with a side in
/// this process (numbers stay the run's: the network model and the ports use them), and their slots.
pub(crate) struct Queues {
    queues: Vec<Queue>,
    /// In a spread run, the number of each queue held, in order (its place in `queues`).
    numbers: Option<Vec<u32>>,
    /// Every queue's slots, `depth` each, by blocks of `1 << shift` queues: a block holds its queues'
    /// first slots one after the other, then their second slots, and so on, so that a slot index no
    /// queue of a block uses is pages the run never touches ([`Slot`]). The queues point into it.
    slots: Slab,
    /// Every queue's depth.
    depth: usize,
    /// A block's queues, as a power of two: a queue's slots lie `1 << shift` apart.
    shift: u32,
    /// The lanes that own each held queue's sending and receiving side ([`Queues::UNOWNED`] until
    /// one uses it), in the queues' order: only when PEs run several lanes (one lane owns every side
    /// it uses, and a large run keeps no word for it).
    owners: Vec<[UnsafeCell<u32>; 2]>,
}

// SAFETY: the slab's slots are reached only through their queues, under the rules `Queue` is `Sync`
// by.
unsafe impl Sync for Queues {}

impl Queues {
    /// A lane number no lane has: a side no lane has used yet.
    pub(crate) const UNOWNED: u32 = u32::MAX;

    /// Every queue, numbered by place, with `depth` slots each, for PEs that run up to `lanes` lanes.
    pub(crate) fn all(queues: Vec<Queue>, (depth, lanes): (usize, usize)) -> Queues {
        Queues::with_slots(queues, None, (depth, lanes))
    }

    /// The queues numbered `numbers` (ascending), in that order, as [`Queues::all`] makes them.
    pub(crate) fn some(queues: Vec<Queue>, numbers: Vec<u32>, (depth, lanes): (usize, usize)) -> Queues {
        Queues::with_slots(queues, Some(numbers), (depth, lanes))
    }

    /// None at all: what a run holds once its queues are no longer needed.
    pub(crate) fn none() -> Queues {
        Queues::all(Vec::new(), (0, 1))
    }

    /// The most queues in a block of the slab: a block's slots of one index fill 40 KiB, ten pages.
    const BLOCK: usize = 1 << 10;

    fn with_slots(mut queues: Vec<Queue>, numbers: Option<Vec<u32>>, (depth, lanes): (usize, usize)) -> Queues {
        let shift = queues.len().next_power_of_two().min(Queues::BLOCK).trailing_zeros();
        let slots = Slab::zeroed((queues.len().div_ceil(1 << shift) * depth) << shift);
        // A system's depth is checked to be 1 to 2^16, so the last slot's index fits a u16.
        debug_assert!(queues.is_empty() || (1..=kernbench_core::System::MAX_IPCQ_DEPTH).contains(&depth));
        let last_slot = u16::try_from(depth.saturating_sub(1)).expect("a queue depth of at most 2^16");
        for (i, queue) in queues.iter_mut().enumerate() {
            // SAFETY: the queue's slots, from its first `1 << shift` apart, are in the slab (of whole
            // blocks), which is never grown, so its slots stay put when `Queues` moves, and is dropped
            // with the queues.
            let first = unsafe { slots.as_ptr().add(first_slot(i, depth, shift)) };
            // SAFETY: a pointer into the slab, not null.
            queue.slots = unsafe { NonNull::new_unchecked(first.cast_mut()) };
            (queue.last_slot, queue.slot_shift) = (last_slot, shift as u8);
        }
        let unowned = |_| [UnsafeCell::new(Queues::UNOWNED), UnsafeCell::new(Queues::UNOWNED)];
        let owners = if lanes > 1 { (0..queues.len()).map(unowned).collect() } else { Vec::new() };
        Queues { queues, numbers, slots, depth, shift, owners }
    }

    /// Where in the slab the first slot of the queue in place `i` is.
    fn first_slot(&self, i: usize) -> usize {
        first_slot(i, self.depth, self.shift)
    }

    /// The lane that owns `side` of queue `q`, to claim or compare. Only in runs whose PEs may run
    /// several lanes.
    ///
    /// # Safety
    /// Only that side's thread, in the poll phase.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn owner(&self, q: usize, side: Side) -> &mut u32 {
        let owners = &self.owners[self.place(q).expect("a queue with a side in this process")];
        // SAFETY: the caller is the side's thread in the poll phase, the only one that touches it then.
        unsafe { &mut *owners[side as usize].get() }
    }

    /// The lane that owns `side` of queue `q`, if one has used it. Only in runs whose PEs may run
    /// several lanes.
    ///
    /// # Safety
    /// Only in the merge phase (or between rounds), when no thread writes it.
    pub(crate) unsafe fn owner_lane(&self, q: usize, side: Side) -> Option<u32> {
        let owners = &self.owners[self.place(q)?];
        // SAFETY: the caller is in the merge phase: owners are written only while polling.
        let lane = unsafe { *owners[side as usize].get() };
        (lane != Queues::UNOWNED).then_some(lane)
    }

    fn place(&self, q: usize) -> Option<usize> {
        match &self.numbers {
            None => (q < self.queues.len()).then_some(q),
            Some(numbers) => numbers.binary_search(&(q as u32)).ok(),
        }
    }

    /// The message at `position` of queue `q`, if this process holds the queue and the message is
    /// in its slot: found in the slab without reading the queue, one cache miss fewer for each
    /// message a large run's placement stamps with its arrival.
    ///
    /// # Safety
    /// The caller excludes every other access to the slot (rule B).
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub(crate) unsafe fn message_mut(&self, q: usize, position: u64) -> Option<&mut Message> {
        let slot = self.slot(q, position)?;
        // SAFETY: the caller excludes every other access.
        unsafe { &mut *self.slots[slot].get() }.message_mut()
    }

    /// Asks the CPU for queue `q` and its slots (see [`crate::protocol::prefetch`]), if this process
    /// holds it.
    #[inline]
    pub(crate) fn prefetch(&self, q: usize) {
        if let Some(i) = self.place(q) {
            prefetch(std::ptr::from_ref(&self.queues[i]).cast(), size_of::<Queue>());
            let first = self.first_slot(i);
            for slot in (0..self.depth).map(|j| first + (j << self.shift)) {
                prefetch(self.slots.as_ptr().wrapping_add(slot).cast(), size_of::<Slot>());
            }
        }
    }

    /// Asks the CPU for the slot of the message at `position` of queue `q` (see
    /// [`Queues::message_mut`]), if this process holds the queue.
    #[inline]
    pub(crate) fn prefetch_message(&self, q: usize, position: u64) {
        if let Some(slot) = self.slot(q, position) {
            prefetch(self.slots.as_ptr().wrapping_add(slot).cast(), size_of::<Slot>());
        }
    }

    /// Where in the slab the message at `position` of queue `q` is, if this process holds the queue.
    fn slot(&self, q: usize, position: u64) -> Option<usize> {
        Some(self.first_slot(self.place(q)?) + (position_slot(position, self.depth as u64) << self.shift))
    }

    /// Queue `q`, if this process holds it.
    pub(crate) fn get(&self, q: usize) -> Option<&Queue> {
        self.place(q).map(|i| &self.queues[i])
    }

    /// Every queue held, with its number, in order.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut Queue)> {
        let numbers = self.numbers.as_deref();
        self.queues.iter_mut().enumerate().map(move |(i, q)| (numbers.map_or(i, |n| n[i] as usize), q))
    }
}

impl Drop for Queues {
    /// Drops the messages left in slots, which a slot, being maybe a message, does not drop itself.
    fn drop(&mut self) {
        for queue in &mut self.queues {
            let (head, tail) = (*queue.head.get_mut(), *queue.tail.get_mut());
            // Every slot holding a message is at a position from `head` to `tail`: below `head` they
            // were taken, and `tail` is past every one pushed or handed in.
            for position in head..tail.min(head + queue.depth()) {
                // SAFETY: `&mut self`: nothing else reaches the queue's slots.
                drop(unsafe { &mut *queue.slot_of(position).get() }.free(0.0));
            }
        }
    }
}

/// The slot of the message at `position` in a queue of `depth` slots: `position % depth`, as a mask
/// when the depth is a power of two (nearly every system's), for a division would be on the way of
/// every timed message twice: listed after its round, and stamped with its arrival.
#[inline]
fn position_slot(position: u64, depth: u64) -> usize {
    (if depth.is_power_of_two() { position & (depth - 1) } else { position % depth }) as usize
}

/// Where in a slab of queues of `depth` slots, by blocks of `1 << shift` queues, the first slot of
/// the queue in place `i` is.
fn first_slot(i: usize, depth: usize, shift: u32) -> usize {
    (((i >> shift) * depth) << shift) + (i & ((1 << shift) - 1))
}

impl std::ops::Index<usize> for Queues {
    type Output = Queue;

    /// Queue `q`; this process must hold it.
    fn index(&self, q: usize) -> &Queue {
        self.get(q).expect("a queue with a side in this process")
    }
}

impl std::ops::IndexMut<usize> for Queues {
    fn index_mut(&mut self, q: usize) -> &mut Queue {
        let i = self.place(q).expect("a queue with a side in this process");
        &mut self.queues[i]
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU64;

    use kernbench_core::{Dtype, System, Tile};

    use super::{Message, Queue, Queues, position_slot};

    #[test]
    fn a_queue_is_one_cache_line() {
        assert_eq!((size_of::<Queue>(), align_of::<Queue>()), (64, 64));
    }

    #[test]
    fn a_positions_slot_is_its_remainder_by_the_depth_whether_or_not_the_depth_is_a_power_of_two() {
        let depths = (1..=70).chain([1 << 15, (1 << 16) - 1, 1 << 16]);
        let positions = (0..300).chain([u64::from(u32::MAX), u64::MAX - 1, u64::MAX]);
        for depth in depths {
            for position in positions.clone() {
                assert_eq!(position_slot(position, depth), (position % depth) as usize, "{position} in {depth}");
            }
        }
    }

    #[test]
    fn a_slot_of_zero_bytes_is_free_from_time_zero_and_a_taken_one_is_free_from_its_credit() {
        let mut queues = Queues::all(vec![Queue::new((0, 1))], (2, 1));
        let queue = &mut queues[0];
        assert_eq!((queue.credit_at(0), queue.credit_at(1)), (0.0, 0.0));
        assert!(queue.unreceived().is_empty());
        let message = Message { tile: Tile::without_data(Dtype::F16, 3), generation: NonZeroU64::MIN, at_ns: 5.0 };
        assert!(unsafe { queue.try_push(|credit_at_ns| Message { at_ns: credit_at_ns + 5.0, ..message }) });
        assert_eq!(queue.unreceived(), [(Dtype::F16, 3, 1)]);
        let _ = unsafe { queue.publish_tail() };
        let taken = unsafe { queue.pop(7.5) }.expect("the message pushed");
        assert_eq!((taken.tile.len(), taken.at_ns), (3, 5.0));
        assert_eq!(queue.credit_at(0), 7.5);
    }

    #[test]
    fn queues_laid_out_by_blocks_keep_their_messages_apart_past_a_block_and_a_partial_one() {
        // Two whole blocks and part of a third, 3 slots each: a slot index's row of a block holds its
        // queues' messages of that index side by side.
        let count = 2 * Queues::BLOCK + 5;
        let queues = Queues::all((0..count as u32).map(|q| Queue::new((q, q + 1))).collect(), (3, 1));
        let message = |q: usize, n: usize| Message {
            tile: Tile::without_data(Dtype::F32, q * 3 + n),
            generation: NonZeroU64::MIN,
            at_ns: 0.0,
        };
        for q in 0..count {
            for n in 0..3 {
                assert!(unsafe { queues[q].try_push(|_| message(q, n)) }, "queue {q}, message {n}");
            }
        }
        for q in 0..count {
            let _ = unsafe { queues[q].publish_tail() };
            for n in 0..3 {
                let message = unsafe { queues.message_mut(q, n as u64) }.map(|m| m.tile.len());
                assert_eq!(message, Some(q * 3 + n), "queue {q}, position {n}");
                assert_eq!(unsafe { queues[q].pop(0.0) }.map(|m| m.tile.len()), Some(q * 3 + n));
            }
        }
    }

    /// Page faults this thread has taken so far.
    #[cfg(target_os = "linux")]
    fn faults() -> i64 {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes a whole rusage into the pointer it is given.
        unsafe {
            assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()), 0);
            usage.assume_init().ru_minflt
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_push_on_a_queues_first_lap_writes_its_slot_unread_so_no_fresh_page_faults_twice() {
        // A slab the OS maps (over a MiB), whose pages nothing has touched; its queues' first slots
        // are side by side, so each push below is the first write to its page.
        let count = 8 * Queues::BLOCK;
        let queues = Queues::all((0..count as u32).map(|q| Queue::new((q, q + 1))).collect(), (4, 1));
        let message = |at_ns| Message { tile: Tile::without_data(Dtype::F32, 1), generation: NonZeroU64::MIN, at_ns };
        let pages = (0..count).step_by(4096 / size_of::<super::Slot>() + 1);
        let before = faults();
        for q in pages.clone() {
            assert!(unsafe { queues[q].try_push(message) });
        }
        // Read first, each page would fault twice: mapped to the zero page, then replaced. (Fewer
        // than one a page where the OS backs the mapping with huge pages.)
        let (taken, pages_written) = (faults() - before, pages.len() as i64);
        assert!(taken < pages_written * 3 / 2, "{taken} faults for {pages_written} pages: slots read before written");
        assert!(pages.map(|q| unsafe { queues.message_mut(q, 0) }.unwrap().at_ns).all(|at| at == 0.0));
    }

    #[test]
    fn a_queue_as_deep_as_a_system_may_be_fills_every_slot_and_wraps_to_its_first() {
        let depth = System::MAX_IPCQ_DEPTH;
        let queues = Queues::all(vec![Queue::new((0, 1))], (depth, 1));
        let queue = &queues[0];
        let message =
            |n: usize| Message { tile: Tile::without_data(Dtype::F32, n), generation: NonZeroU64::MIN, at_ns: 0.0 };
        // Twice round: the slot after the last is the first. The test is each side's only thread, and
        // publishes between its sides' turns as a merge would.
        for _ in 0..2 {
            for n in 0..depth {
                assert!(unsafe { queue.try_push(|_| message(n)) }, "slot {n} of {depth} is free");
            }
            assert!(!unsafe { queue.try_push(|_| message(0)) }, "a full queue takes no more");
            let _ = unsafe { queue.publish_tail() };
            for n in 0..depth {
                assert_eq!(unsafe { queue.pop(0.0) }.map(|m| m.tile.len()), Some(n));
            }
            let _ = unsafe { queue.publish_head() };
        }
    }
}

//! The race detector: vector clocks over lanes, and a shadow of every symmetric buffer that remembers
//! who last wrote and read each byte range.
//!
//! Each lane counts two kinds of events, each its own entry of a clock (a *slot*):
//!
//! - `local`: everything the lane does in order; an access made at `local = e` is covered by a
//!   release that carries `e` or more;
//! - `puts`: its plain puts, numbered 1, 2, ... A plain put may land after anything the lane does
//!   later, so a later signal or send releases its puts only up to the last `fence` or `quiet`
//!   (`fenced`); a barrier releases all of them.
//!
//! A put-with-signal's write is recorded on the `local` slot: its own signal releases it.
//!
//! Access `a` happens before lane `L`'s access when `a` is `L`'s own (program order) or `L`'s clock
//! holds `a`'s slot at `a`'s epoch or later. Clocks are sparse (sorted `(slot, epoch)` pairs): a lane
//! only carries entries for the lanes it has heard of, so a run of a million PEs that uses no symmetric
//! memory pays nothing, and one that does pays for the edges it has.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kernbench_core::atomic::{Cmp, Scope};
use kernbench_core::symmetric::CallSite;
use kernbench_core::{Op, PeId};
use rustc_hash::FxHashMap;

/// What a lane knows of other lanes: for each slot it has heard of, the latest epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct VClock(Vec<(u32, u32)>);

impl VClock {
    pub(crate) fn get(&self, slot: u32) -> u32 {
        self.0.binary_search_by_key(&slot, |&(s, _)| s).map_or(0, |i| self.0[i].1)
    }

    fn raise(&mut self, slot: u32, epoch: u32) {
        match self.0.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(i) => self.0[i].1 = self.0[i].1.max(epoch),
            Err(i) => self.0.insert(i, (slot, epoch)),
        }
    }

    /// Takes in everything `other` knows.
    pub(crate) fn join(&mut self, other: &VClock) {
        if other.0.is_empty() {
            return;
        }
        let mut merged = Vec::with_capacity(self.0.len().max(other.0.len()));
        let (mut a, mut b) = (self.0.iter().peekable(), other.0.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(&&(sa, ea)), Some(&&(sb, eb))) if sa == sb => {
                    a.next();
                    b.next();
                    (sa, ea.max(eb))
                }
                (Some(&&x), Some(&&y)) if x.0 < y.0 => {
                    a.next();
                    x
                }
                (_, Some(&&y)) => {
                    b.next();
                    y
                }
                (Some(&&x), None) => {
                    a.next();
                    x
                }
                (None, None) => break,
            };
            merged.push(next);
        }
        self.0 = merged;
    }
}

/// What messages in flight carry of their senders' place in the order, by (queue, position): beside
/// the queues rather than in every message, so that runs without symmetric memory, whose lanes have no
/// place in the order, pay one load per receive and no memory.
#[derive(Default)]
pub(crate) struct MessageOrders {
    /// Whether any message carries one.
    any: AtomicBool,
    by_message: Mutex<FxHashMap<(u32, u64), Released>>,
}

impl MessageOrders {
    /// Message `position` of queue `queue` carries `clock`.
    pub(crate) fn carry(&self, queue: u32, position: u64, clock: Released) {
        self.any.store(true, Ordering::Relaxed);
        self.by_message.lock().unwrap_or_else(|e| e.into_inner()).insert((queue, position), clock);
    }

    /// Whether any message has carried one: until then a receive need not look.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// What message `position` of queue `queue` carries, taken as it is received. Its sender put it
    /// there in an earlier round than the receive, so the answer does not depend on threads.
    #[cold]
    pub(crate) fn take(&self, queue: u32, position: u64) -> Option<Released> {
        self.by_message.lock().unwrap_or_else(|e| e.into_inner()).remove(&(queue, position))
    }
}

/// The two slots of task `task`.
fn local_slot(task: u32) -> u32 {
    2 * task
}

fn put_slot(task: u32) -> u32 {
    2 * task + 1
}

/// One access to symmetric memory: which lane (task), when by its clock, what and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) task: u32,
    pub(crate) slot: u32,
    pub(crate) epoch: u32,
    pub(crate) op: Op,
    pub(crate) site: CallSite,
    /// An atomic's scope; `None` for a plain access.
    pub(crate) scope: Option<Scope>,
    /// For an access of an earlier call, kept by a window: its PE, lane and call. Its `task` is then
    /// [`RETIRED`], no task of the current call.
    pub(crate) retired: Option<(PeId, u32, u64)>,
}

/// The task of a stamp of an earlier call.
pub(crate) const RETIRED: u32 = u32::MAX;

impl Stamp {
    /// Whether this access happens before one made by `task` knowing `clock`.
    fn before(&self, task: u32, clock: &impl Knows) -> bool {
        self.task == task || clock.epoch(self.slot) >= self.epoch
    }

    /// Whether it is an atomic that changes the bytes (not a wait's load).
    fn atomic_write(&self) -> bool {
        self.scope.is_some() && self.op != Op::WaitValue
    }
}

/// What a clock says of a slot: the latest epoch of it that happens before.
pub(crate) trait Knows {
    fn epoch(&self, slot: u32) -> u32;
}

impl Knows for VClock {
    fn epoch(&self, slot: u32) -> u32 {
        self.get(slot)
    }
}

/// What a lane released (with a signal, a message, a barrier's arrival, a put for its write's check):
/// what it had acquired of others, shared, and its own two slots. Shared so that a lane making many
/// puts after one acquire copies nothing per put.
#[derive(Clone, Debug)]
pub(crate) struct Released {
    others: Arc<VClock>,
    /// `(task, local, fenced)` of the lane that released it; none for a barrier's join.
    own: Option<(u32, u32, u32)>,
}

impl Released {
    /// Everything each of `released` covers: what a barrier hands every lane it releases.
    pub(crate) fn join_all<'a>(released: impl Iterator<Item = &'a Released>) -> Released {
        let mut clock = VClock::default();
        for r in released {
            r.join_into(&mut clock);
        }
        Released { others: Arc::new(clock), own: None }
    }

    pub(crate) fn join_into(&self, clock: &mut VClock) {
        clock.join(&self.others);
        if let Some((task, local, fenced)) = self.own {
            clock.raise(local_slot(task), local);
            clock.raise(put_slot(task), fenced);
        }
    }
}

impl Knows for Released {
    fn epoch(&self, slot: u32) -> u32 {
        match self.own {
            Some((task, local, _)) if slot == local_slot(task) => local,
            Some((task, _, fenced)) if slot == put_slot(task) => fenced,
            _ => self.others.get(slot),
        }
    }
}

/// A lane's place in the happens-before order.
#[derive(Clone, Debug)]
pub(crate) struct LaneSync {
    task: u32,
    /// What it has acquired of other lanes (shared with what it released since).
    clock: Arc<VClock>,
    local: u32,
    /// Plain puts made.
    pub(crate) puts: u32,
    /// Plain puts a later release covers (a fence or quiet came after them).
    fenced: u32,
    /// Puts of any kind made, and how many of them a quiet or barrier has completed.
    pub(crate) all_puts: u32,
    pub(crate) quieted: u32,
}

impl LaneSync {
    pub(crate) fn new(task: u32) -> LaneSync {
        LaneSync::inheriting(task, Arc::default())
    }

    /// A lane that starts knowing `clock`: what its PE's lanes of the communicator's earlier calls
    /// did and knew (a kernel starts after the previous one on its PE ends).
    pub(crate) fn inheriting(task: u32, clock: Arc<VClock>) -> LaneSync {
        LaneSync { task, clock, local: 1, puts: 0, fenced: 0, all_puts: 0, quieted: 0 }
    }

    /// The stamp of an atomic (or a wait's atomic load) made now, at `scope`: ordered with the lane's
    /// accesses, as a local access is.
    pub(crate) fn atomic(&self, op: Op, site: CallSite, scope: Scope) -> Stamp {
        Stamp { scope: Some(scope), ..self.local_access(op, site) }
    }

    /// Everything the lane did and knew at the end of its call, its puts completed (a kernel's end
    /// completes them): what the next call's lanes of its PE start knowing.
    pub(crate) fn at_end(&self, into: &mut VClock) {
        into.join(&self.clock);
        into.raise(local_slot(self.task), self.local);
        into.raise(put_slot(self.task), self.puts);
    }

    /// Acquires `clock` (what an atomic read from releases).
    pub(crate) fn acquire_clock(&mut self, clock: &VClock) {
        Arc::make_mut(&mut self.clock).join(clock);
    }

    /// The stamp of a local access (a read, a write, a get, a put-with-signal's write) made now.
    pub(crate) fn local_access(&self, op: Op, site: CallSite) -> Stamp {
        Stamp { task: self.task, slot: local_slot(self.task), epoch: self.local, op, site, scope: None, retired: None }
    }

    /// The stamp of a plain put made now.
    pub(crate) fn put(&mut self, site: CallSite) -> Stamp {
        self.puts += 1;
        self.all_puts += 1;
        Stamp {
            task: self.task,
            slot: put_slot(self.task),
            epoch: self.puts,
            op: Op::Put,
            site,
            scope: None,
            retired: None,
        }
    }

    /// The stamp of a put-with-signal made now: its own signal releases it.
    pub(crate) fn put_signal(&mut self, site: CallSite) -> Stamp {
        self.all_puts += 1;
        self.local_access(Op::PutSignal, site)
    }

    /// What the lane knows now, with its own slots as a release covers them: for a write's check.
    pub(crate) fn knowledge(&self) -> Released {
        Released { others: Arc::clone(&self.clock), own: Some((self.task, self.local, self.fenced)) }
    }

    /// A release (a signal, a send, a barrier's arrival): what it carries; later accesses are not
    /// covered by it.
    pub(crate) fn release(&mut self) -> Released {
        let released = self.knowledge();
        self.local += 1;
        released
    }

    /// `tl.fence()`: later releases cover every put so far.
    pub(crate) fn fence(&mut self) {
        self.fenced = self.puts;
    }

    /// `tl.quiet()` (or a barrier): every put so far has landed.
    pub(crate) fn quiet(&mut self) {
        self.fence();
        self.quieted = self.all_puts;
    }

    /// What it has acquired: enough to check its own accesses (its own are ordered by task).
    pub(crate) fn clock(&self) -> &VClock {
        &self.clock
    }

    /// An acquire (a wait, a receive, a barrier's release).
    pub(crate) fn acquire(&mut self, released: &Released) {
        if released.own.is_some_and(|(task, ..)| task == self.task) {
            // Its own release (a barrier of one lane): it knew all of it already.
            return;
        }
        released.join_into(Arc::make_mut(&mut self.clock));
    }

    /// Whether the lane, as it ended, had acquired `stamp`.
    pub(crate) fn saw(&self, stamp: &Stamp) -> bool {
        stamp.before(self.task, &*self.clock)
    }
}

/// Renames the current call's slots as slots of an earlier call, when a window keeps stamps and
/// clocks past it: a call numbers its slots from 0, so a later call's would collide with them.
#[derive(Default)]
pub(crate) struct Retirement {
    renamed: FxHashMap<u32, u32>,
    next: u32,
}

impl Retirement {
    /// Slots from here on are of earlier calls.
    const FIRST: u32 = 1 << 31;

    /// Starts a call: its slots are new.
    pub(crate) fn next_call(&mut self) {
        self.renamed.clear();
    }

    fn slot(&mut self, slot: u32) -> u32 {
        if slot >= Self::FIRST {
            return slot;
        }
        let next = &mut self.next;
        *self.renamed.entry(slot).or_insert_with(|| {
            // Past 2^31 renamed slots the oldest are reused: a race across that many calls goes unseen.
            let renamed = Self::FIRST + *next;
            *next = (*next + 1) % Self::FIRST;
            renamed
        })
    }

    /// `stamp`, made by the lane at `place` (PE, lane, call) of the ending call, as one of an earlier
    /// call.
    pub(crate) fn stamp(&mut self, stamp: &mut Stamp, place: impl Fn(u32) -> (PeId, u32, u64)) {
        if stamp.retired.is_none() {
            stamp.retired = Some(place(stamp.task));
            stamp.task = RETIRED;
        }
        stamp.slot = self.slot(stamp.slot);
    }

    /// `clock` in earlier calls' slots.
    pub(crate) fn clock(&mut self, clock: &mut VClock) {
        let mut renamed: Vec<(u32, u32)> = clock.0.iter().map(|&(slot, epoch)| (self.slot(slot), epoch)).collect();
        renamed.sort_unstable();
        renamed.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 = earlier.1.max(later.1);
            }
            same
        });
        clock.0 = renamed;
    }
}

/// What an access found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Conflict {
    /// An earlier access that neither happens before it, one of the two a write.
    Race { earlier: Stamp, bytes: Range<u64> },
    /// A read of bytes nobody wrote.
    Uninitialised { bytes: Range<u64> },
}

/// A byte range of a buffer with the last write to it, and the reads and atomic reductions since.
#[derive(Clone, Debug)]
struct Segment {
    bytes: Range<u64>,
    write: Option<Stamp>,
    /// At most one per task: a later read of a task replaces its earlier one.
    reads: Vec<Stamp>,
    /// Reductions done atomically where the bytes are (a switch's `multimem_red`): atomic with each
    /// other, so unordered ones are no race, but plain accesses must be ordered with them. At most one
    /// per task, as reads.
    reductions: Vec<Stamp>,
    /// Atomics since the last plain write (and waits' loads): atomic with each other when morally
    /// strong, but plain accesses must be ordered with them. At most one per task.
    atomics: Vec<Stamp>,
    /// What the releasing atomics since the last plain write released: an acquiring atomic that
    /// reads the bytes acquires it (their release sequence).
    released: Option<VClock>,
    /// The values the atomics since the last plain write left, each with what `released` was then,
    /// oldest first (the last [`HISTORY`]): a wait acquires only what was released when its
    /// comparison last began to hold, since it may have read any value from then on.
    history: Vec<(i64, Option<VClock>)>,
}

/// How many atomic writes of a segment a wait looks back over.
const HISTORY: usize = 16;

impl Segment {
    fn empty(bytes: Range<u64>) -> Segment {
        Segment {
            bytes,
            write: None,
            reads: Vec::new(),
            reductions: Vec::new(),
            atomics: Vec::new(),
            released: None,
            history: Vec::new(),
        }
    }

    /// Whether something wrote its bytes: a plain write or an atomic.
    fn initialised(&self) -> bool {
        self.write.is_some() || self.atomics.iter().any(Stamp::atomic_write)
    }
}

/// What an atomic does, for the race detector: its stamp, what its lane knows, what it releases.
pub(crate) struct AtomicAccess<'a, K: Knows> {
    pub(crate) stamp: Stamp,
    pub(crate) clock: &'a K,
    /// What it releases, when its order releases.
    pub(crate) release: Option<&'a Released>,
    /// Whether it acquires.
    pub(crate) acquire: bool,
    /// The value it leaves (an atomic write), or the comparison it waited for (a wait's load).
    pub(crate) value: AtomicValue,
}

/// What an atomic does to an element's value, for a wait's acquire.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AtomicValue {
    /// An atomic write that leaves this value.
    Leaves(i64),
    /// A wait's load that saw its comparison hold.
    Waited(Cmp, i64),
}

/// Who touched which bytes of one PE's copy of a symmetric buffer: disjoint segments sorted by start;
/// bytes in no segment were never touched.
#[derive(Clone, Debug, Default)]
pub(crate) struct Shadow {
    segments: Vec<Segment>,
}

impl Shadow {
    /// Records a write of `bytes` by `stamp`, whose lane knows `clock`.
    pub(crate) fn write(&mut self, bytes: Range<u64>, stamp: Stamp, clock: &impl Knows) -> Result<(), Conflict> {
        let range = self.split(bytes.clone());
        for segment in &self.segments[range.clone()] {
            let unordered = |s: &&Stamp| !s.before(stamp.task, clock);
            let earlier = (segment.write.as_ref().filter(unordered))
                .or_else(|| segment.reads.iter().find(unordered))
                .or_else(|| segment.reductions.iter().find(unordered))
                .or_else(|| segment.atomics.iter().find(unordered));
            if let Some(earlier) = earlier {
                return Err(Conflict::Race { earlier: *earlier, bytes: segment.bytes.clone() });
            }
        }
        // The write replaces everything in the range: one segment, with the gaps filled.
        let written = Segment { write: Some(stamp), ..Segment::empty(bytes) };
        self.segments.splice(range, [written]);
        Ok(())
    }

    /// Records a read of `bytes` by `stamp`, whose lane knows `clock`: the bytes must have been written,
    /// and the write and every atomic reduction since must be ordered before it.
    pub(crate) fn read(&mut self, bytes: Range<u64>, stamp: Stamp, clock: &impl Knows) -> Result<(), Conflict> {
        let range = self.written(bytes, stamp, clock, |segment| (&segment.reductions, &segment.atomics))?;
        for segment in &mut self.segments[range] {
            record(&mut segment.reads, stamp);
        }
        Ok(())
    }

    /// Records an atomic reduction into `bytes` by `stamp` (a switch's `multimem_red`), whose lane
    /// knows `clock`: the bytes must have been written, and the write and every read since ordered
    /// before it; other atomic reductions need not be, as the switch applies them one at a time.
    pub(crate) fn reduce(&mut self, bytes: Range<u64>, stamp: Stamp, clock: &impl Knows) -> Result<(), Conflict> {
        let range = self.written(bytes, stamp, clock, |segment| (&segment.reads, &segment.atomics))?;
        for segment in &mut self.segments[range] {
            record(&mut segment.reductions, stamp);
        }
        Ok(())
    }

    /// Records an atomic (or a wait's atomic load) of `bytes`: earlier plain accesses must be ordered
    /// before it (a load need not be after plain reads), earlier atomics ordered before it or morally
    /// strong with it (`strong`). Bytes nobody wrote hold zeros, as registered memory does. Returns
    /// what it acquires: what the releasing atomics of the bytes released.
    pub(crate) fn atomic<K: Knows>(
        &mut self,
        bytes: Range<u64>,
        access: AtomicAccess<'_, K>,
        strong: impl Fn(&Stamp, &Stamp) -> bool,
    ) -> Result<Option<VClock>, Conflict> {
        let AtomicAccess { stamp, clock, release, acquire, value } = access;
        let range = self.cover(bytes);
        let writes = stamp.atomic_write();
        for segment in &self.segments[range.clone()] {
            let unordered = |s: &&Stamp| !s.before(stamp.task, clock);
            let conflicting = |s: &&Stamp| unordered(s) && (writes || s.atomic_write()) && !strong(s, &stamp);
            let earlier = (segment.write.as_ref().filter(unordered))
                .or_else(|| segment.reads.iter().filter(|_| writes).find(unordered))
                .or_else(|| segment.reductions.iter().find(unordered))
                .or_else(|| segment.atomics.iter().find(conflicting));
            if let Some(earlier) = earlier {
                return Err(Conflict::Race { earlier: *earlier, bytes: segment.bytes.clone() });
            }
        }
        let mut acquired: Option<VClock> = None;
        for segment in &mut self.segments[range] {
            let seen = match value {
                // A read-modify-write reads the latest value: the whole release sequence.
                AtomicValue::Leaves(_) => segment.released.as_ref(),
                AtomicValue::Waited(cmp, operand) => {
                    let held = segment.history.iter().rev().take_while(|(v, _)| cmp.holds(*v, operand)).count();
                    let since = segment.history.len() - held;
                    segment.history.get(since).and_then(|(_, released)| released.as_ref())
                }
            };
            if let (true, Some(seen)) = (acquire, seen) {
                acquired.get_or_insert_with(VClock::default).join(seen);
            }
            if let Some(release) = release {
                release.join_into(segment.released.get_or_insert_with(VClock::default));
            }
            if let AtomicValue::Leaves(left) = value {
                if segment.history.len() == HISTORY {
                    segment.history.remove(0);
                }
                segment.history.push((left, segment.released.clone()));
            }
            record(&mut segment.atomics, stamp);
        }
        Ok(acquired)
    }

    /// Splits segments at `bytes`' ends and fills the gaps inside it with untouched segments; returns
    /// the indices of the segments that cover it.
    fn cover(&mut self, bytes: Range<u64>) -> Range<usize> {
        let range = self.split(bytes.clone());
        let mut covered = Vec::with_capacity(range.len() + 1);
        let mut at = bytes.start;
        for segment in self.segments.drain(range.clone()) {
            if segment.bytes.start > at {
                covered.push(Segment::empty(at..segment.bytes.start));
            }
            at = segment.bytes.end;
            covered.push(segment);
        }
        if at < bytes.end {
            covered.push(Segment::empty(at..bytes.end));
        }
        let n = covered.len();
        self.segments.splice(range.start..range.start, covered);
        range.start..range.start + n
    }

    /// Makes every stamp and clock it holds one of an earlier call, to be kept by a window past the
    /// call; `place` says where the ending call's task ran.
    pub(crate) fn retire(&mut self, retirement: &mut Retirement, place: impl Fn(u32) -> (PeId, u32, u64)) {
        for segment in &mut self.segments {
            let stamps = segment.write.iter_mut().chain(&mut segment.reads).chain(&mut segment.reductions);
            stamps.chain(&mut segment.atomics).for_each(|stamp| retirement.stamp(stamp, &place));
            let clocks = segment.released.iter_mut().chain(segment.history.iter_mut().filter_map(|(_, c)| c.as_mut()));
            clocks.for_each(|clock| retirement.clock(clock));
        }
    }

    /// Checks that every byte of `bytes` was written, by a write ordered before `stamp`, and that the
    /// accesses of each segment that `since` names are too; returns the indices of the segments.
    fn written(
        &mut self,
        bytes: Range<u64>,
        stamp: Stamp,
        clock: &impl Knows,
        since: impl Fn(&Segment) -> (&Vec<Stamp>, &Vec<Stamp>),
    ) -> Result<Range<usize>, Conflict> {
        let range = self.split(bytes.clone());
        let mut at = bytes.start;
        for segment in &self.segments[range.clone()] {
            if segment.bytes.start > at {
                return Err(Conflict::Uninitialised { bytes: at..segment.bytes.start });
            }
            let unordered = |s: &&Stamp| !s.before(stamp.task, clock);
            if !segment.initialised() {
                return Err(Conflict::Uninitialised { bytes: segment.bytes.clone() });
            }
            let (first, second) = since(segment);
            let earlier = segment.write.as_ref().filter(unordered);
            let earlier = earlier.or_else(|| first.iter().find(unordered)).or_else(|| second.iter().find(unordered));
            if let Some(earlier) = earlier {
                return Err(Conflict::Race { earlier: *earlier, bytes: segment.bytes.clone() });
            }
            at = segment.bytes.end;
        }
        if at < bytes.end {
            return Err(Conflict::Uninitialised { bytes: at..bytes.end });
        }
        Ok(range)
    }

    /// Splits segments at `bytes`' ends; returns the indices of the segments inside `bytes`.
    fn split(&mut self, bytes: Range<u64>) -> Range<usize> {
        for cut in [bytes.start, bytes.end] {
            let i = self.segments.partition_point(|s| s.bytes.end <= cut);
            if let Some(segment) = self.segments.get(i).filter(|s| s.bytes.start < cut) {
                let mut right = segment.clone();
                right.bytes.start = cut;
                self.segments[i].bytes.end = cut;
                self.segments.insert(i + 1, right);
            }
        }
        let first = self.segments.partition_point(|s| s.bytes.end <= bytes.start);
        let last = self.segments.partition_point(|s| s.bytes.start < bytes.end);
        first..last.max(first)
    }
}

/// Adds `stamp` to `accesses`, replacing its task's earlier one: a task's later access is ordered after
/// its earlier ones, so it alone need be checked against.
fn record(accesses: &mut Vec<Stamp>, stamp: Stamp) {
    match accesses.iter_mut().find(|a| a.task == stamp.task) {
        Some(access) => *access = stamp,
        None => accesses.push(stamp),
    }
}

#[cfg(test)]
mod tests {
    use std::panic::Location;

    use super::*;

    fn site() -> CallSite {
        CallSite(Location::caller())
    }

    #[test]
    fn clocks_join_entry_by_entry() {
        let mut a = VClock::default();
        a.raise(1, 3);
        a.raise(5, 1);
        let mut b = VClock::default();
        b.raise(1, 2);
        b.raise(4, 7);
        a.join(&b);
        assert_eq!(a.0, vec![(1, 3), (4, 7), (5, 1)]);
    }

    #[test]
    fn an_unordered_write_after_a_write_is_a_race_and_an_ordered_one_is_not() {
        let mut writer = LaneSync::new(0);
        let mut reader = LaneSync::new(1);
        let mut shadow = Shadow::default();
        let first = writer.local_access(Op::Write, site());
        shadow.write(0..16, first, &writer.knowledge()).unwrap();
        // Lane 1 writes bytes 8..24 knowing nothing of lane 0.
        let second = reader.local_access(Op::Write, site());
        let conflict = shadow.write(8..24, second, &reader.knowledge()).unwrap_err();
        assert_eq!(conflict, Conflict::Race { earlier: first, bytes: 8..16 });
        // After lane 0 releases and lane 1 acquires, it is ordered.
        reader.acquire(&writer.release());
        shadow.write(8..24, second, &reader.knowledge()).unwrap();
    }

    #[test]
    fn a_plain_put_is_released_only_after_a_fence() {
        let mut putter = LaneSync::new(0);
        let mut waiter = LaneSync::new(1);
        let mut shadow = Shadow::default();
        let put = putter.put(site());
        shadow.write(0..8, put, &putter.knowledge()).unwrap();
        waiter.acquire(&putter.release());
        let read = waiter.local_access(Op::Read, site());
        assert!(matches!(shadow.read(0..8, read, &waiter.knowledge()), Err(Conflict::Race { .. })));
        putter.fence();
        waiter.acquire(&putter.release());
        shadow.read(0..8, read, &waiter.knowledge()).unwrap();
    }

    #[test]
    fn reads_of_gaps_are_uninitialised() {
        let lane = LaneSync::new(0);
        let mut shadow = Shadow::default();
        let write = lane.local_access(Op::Write, site());
        shadow.write(8..16, write, &lane.knowledge()).unwrap();
        let read = lane.local_access(Op::Read, site());
        assert_eq!(shadow.read(0..16, read, &lane.knowledge()), Err(Conflict::Uninitialised { bytes: 0..8 }));
        assert_eq!(shadow.read(8..20, read, &lane.knowledge()), Err(Conflict::Uninitialised { bytes: 16..20 }));
        shadow.read(8..16, read, &lane.knowledge()).unwrap();
    }

    #[test]
    fn atomics_are_atomic_with_each_other_only_when_morally_strong() {
        let (a, b) = (LaneSync::new(0), LaneSync::new(1));
        let mut shadow = Shadow::default();
        let add = |sync: &LaneSync, value| {
            let stamp = sync.atomic(Op::AtomicAdd, site(), Scope::System);
            (stamp, AtomicValue::Leaves(value))
        };
        let (ka, kb) = (a.knowledge(), b.knowledge());
        let (first, leaves) = add(&a, 1);
        let access = AtomicAccess { stamp: first, clock: &ka, release: None, acquire: false, value: leaves };
        shadow.atomic(0..8, access, |_, _| true).unwrap();
        let (second, leaves) = add(&b, 2);
        // Unordered, but strong: no race.
        let access = AtomicAccess { stamp: second, clock: &kb, release: None, acquire: false, value: leaves };
        shadow.atomic(0..8, access, |_, _| true).unwrap();
        // Not strong: a race with the earlier of the two.
        let access = AtomicAccess { stamp: second, clock: &kb, release: None, acquire: false, value: leaves };
        let conflict = shadow.atomic(0..8, access, |_, _| false).unwrap_err();
        assert_eq!(conflict, Conflict::Race { earlier: first, bytes: 0..8 });
        // A plain read must be ordered after both.
        let read = LaneSync::new(2).local_access(Op::Read, site());
        assert!(matches!(shadow.read(0..8, read, &VClock::default()), Err(Conflict::Race { .. })));
    }

    #[test]
    fn a_wait_acquires_only_what_was_released_when_its_comparison_began_to_hold() {
        let (mut a, mut b, waiter) = (LaneSync::new(0), LaneSync::new(1), LaneSync::new(2));
        let mut shadow = Shadow::default();
        let mut release = |sync: &mut LaneSync, value| {
            let stamp = sync.atomic(Op::AtomicSwap, site(), Scope::System);
            let released = sync.release();
            let access = AtomicAccess {
                stamp,
                clock: &released,
                release: Some(&released),
                acquire: false,
                value: AtomicValue::Leaves(value),
            };
            shadow.atomic(0..8, access, |_, _| true).unwrap();
        };
        // Lane 0 sets the flag to 1, then lane 1 sets it to 1 again.
        release(&mut a, 1);
        release(&mut b, 1);
        let stamp = waiter.atomic(Op::WaitValue, site(), Scope::System);
        let knows = waiter.knowledge();
        let value = AtomicValue::Waited(Cmp::Eq, 1);
        let access = AtomicAccess { stamp, clock: &knows, release: None, acquire: true, value };
        // A wait for 1 may have read lane 0's 1: it acquires lane 0's release, not lane 1's.
        let acquired = shadow.atomic(0..8, access, |_, _| true).unwrap().unwrap_or_default();
        assert!(acquired.get(local_slot(0)) > 0 && acquired.get(local_slot(1)) == 0, "{acquired:?}");
    }
}

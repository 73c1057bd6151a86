//! Lanes: the tasks of a run (a coroutine per lane of each participating PE), what each lane keeps,
//! what it waits for and the lists of those woken, what every kind of traffic sees of a PE, and the
//! watchdog's counts. Uses the round protocol, the timing model's clock and the race detector's lane
//! clocks.
//!
//! A PE's lanes are tasks `first..first + lanes` of the run, numbered in rank order, so tasks sorted by
//! number group each PE's lanes together, and a PE's rank is its lanes' too.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use kernbench_core::atomic::Cmp;
use kernbench_core::tl;
use kernbench_core::{Direction, Dtype, KernelError, Op, PeId, Tile, WatchdogBudget};
use serde::{Deserialize, Serialize};

use crate::error::RunError;
use crate::protocol::{Cells, Lines};
use crate::race::LaneSync;
use crate::timing::{Bookings, Clock, Engines, Rates, SpanKind};

/// What one PE (or one of its lanes) did in a run. Every count is the same on one thread or many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeFigures {
    /// Messages sent; a put, a signal and a get's request count as one each.
    pub messages_sent: u64,
    /// Payload bytes sent (a put's data; a signal and a get's request count 8).
    pub bytes_sent: u64,
    /// Messages received.
    pub messages_received: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Sends that found no credit and had to wait for one.
    pub credit_waits: u64,
    /// Receives that found their queue empty and had to wait.
    pub recv_waits: u64,
    /// Elements combined by reductions.
    pub reduced_elements: u64,
    /// Bytes moved by loads and stores.
    pub memory_bytes: u64,
    /// Rounds in which the PE's kernel was polled.
    pub polls: u64,
}

impl std::ops::AddAssign<&PeFigures> for PeFigures {
    fn add_assign(&mut self, f: &PeFigures) {
        self.messages_sent += f.messages_sent;
        self.bytes_sent += f.bytes_sent;
        self.messages_received += f.messages_received;
        self.bytes_received += f.bytes_received;
        self.credit_waits += f.credit_waits;
        self.recv_waits += f.recv_waits;
        self.reduced_elements += f.reduced_elements;
        self.memory_bytes += f.memory_bytes;
        self.polls += f.polls;
    }
}

/// In a spread run, the ranks each process holds: a block of whole SIPs each, so consecutive ranks
/// (a few words, where a list by rank would be whole in every process).
pub(crate) struct Owners {
    /// Process `p` holds ranks `starts[p]..starts[p + 1]`.
    starts: Box<[u32]>,
}

impl Owners {
    /// Owners of blocks of consecutive ranks: process `p`'s from `starts[p]` (ascending), the last's
    /// up to `ranks`.
    pub(crate) fn of_blocks(starts: impl IntoIterator<Item = u32>, ranks: u32) -> Owners {
        Owners { starts: starts.into_iter().chain([ranks]).collect() }
    }

    /// The process that holds `rank`.
    fn owner(&self, rank: u32) -> u32 {
        // The processes whose blocks end at or before it (an empty block among them included).
        self.starts[1..].partition_point(|&end| end <= rank) as u32
    }

    /// The ranks process `process` holds.
    fn ranks(&self, process: u32) -> Range<u32> {
        self.starts[process as usize]..self.starts[process as usize + 1]
    }
}

/// The run's tasks: which PE each belongs to, and in a run spread over processes, which process holds
/// each PE.
pub(crate) struct Tasks<'p> {
    /// Every participant, by rank.
    pes: &'p [PeId],
    /// Rank `r`'s lanes are tasks `first_task[r]..first_task[r + 1]`, and each task's rank: `None`
    /// when every rank runs one lane, task `r` being rank `r`'s (two lists a rank, whole in every
    /// process of a spread run, that would say only that).
    lists: Option<(Vec<u32>, Vec<u32>)>,
    /// Channels per directed edge: the most lanes any PE runs, so every lane can have its own queues.
    channels: u32,
    /// In a spread run, the process holding each rank, and this process.
    owners: Option<(Owners, u32)>,
    /// The ranks this process holds: every rank, unless the run is spread.
    held: Range<u32>,
    /// In a run of several calls together, per call the lanes it runs on each rank; a rank's lanes
    /// are its calls' in call order (empty: one call).
    calls: Vec<Vec<u32>>,
    /// In a run of several calls together, per call its first channel and its channels (the most
    /// lanes it runs on a rank): each call's queues are its own.
    call_channels: Vec<(u32, u32)>,
}

impl<'p> Tasks<'p> {
    /// The tasks of `pes`, rank `r` running `lanes[r]` lanes; `owners` in a spread run.
    pub(crate) fn new(pes: &'p [PeId], lanes: &[usize], owners: Option<(Owners, u32)>) -> Tasks<'p> {
        let lists = (lanes.len() != pes.len() || lanes.iter().any(|&n| n != 1)).then(|| {
            let mut first_task = Vec::with_capacity(pes.len() + 1);
            first_task.push(0u32);
            for &n in lanes {
                first_task.push(first_task[first_task.len() - 1] + n as u32);
            }
            let task_rank =
                lanes.iter().enumerate().flat_map(|(rank, &n)| std::iter::repeat_n(rank as u32, n)).collect();
            (first_task, task_rank)
        });
        let channels = lanes.iter().copied().max().unwrap_or(1) as u32;
        let held = owners.as_ref().map_or(0..pes.len() as u32, |(owners, me)| owners.ranks(*me));
        Tasks { pes, lists, channels, owners, held, calls: Vec::new(), call_channels: Vec::new() }
    }

    /// The tasks of several calls run together on `pes`: call `k` runs `calls[k][r]` lanes on rank
    /// `r`, after those of the calls before it.
    pub(crate) fn together(pes: &'p [PeId], calls: &[Vec<usize>]) -> Tasks<'p> {
        let lanes: Vec<usize> = (0..pes.len()).map(|rank| calls.iter().map(|c| c[rank]).sum()).collect();
        let mut tasks = Tasks::new(pes, &lanes, None);
        if calls.len() > 1 {
            tasks.calls = calls.iter().map(|c| c.iter().map(|&n| n as u32).collect()).collect();
            let mut next = 0;
            for lanes in &tasks.calls {
                let channels = lanes.iter().copied().max().unwrap_or(1);
                tasks.call_channels.push((next, channels));
                next += channels;
            }
            tasks.channels = next;
        }
        tasks
    }

    /// The call whose channels hold `channel`.
    pub(crate) fn call_of_channel(&self, channel: u32) -> u32 {
        self.call_channels.iter().rposition(|&(first, _)| first <= channel).unwrap_or(0) as u32
    }

    /// Call `call`'s first channel and its channels.
    #[inline]
    pub(crate) fn channels_of_call(&self, call: u32) -> (u32, u32) {
        self.call_channels.get(call as usize).copied().unwrap_or((0, self.channels))
    }

    /// The calls run together (1 for a run of one call).
    pub(crate) fn calls(&self) -> usize {
        self.calls.len().max(1)
    }

    /// Lane `lane` of rank `rank`'s call, its index among that call's lanes there, and how many those
    /// are.
    pub(crate) fn call_of(&self, rank: u32, lane: u32) -> (usize, u32, u32) {
        let mut first = 0;
        for (call, lanes) in self.calls.iter().enumerate() {
            let n = lanes[rank as usize];
            if lane < first + n {
                return (call, lane - first, n);
            }
            first += n;
        }
        (0, lane, self.lanes_of(rank).len() as u32)
    }

    /// The lanes (indices among rank `rank`'s) of call `call`.
    pub(crate) fn lanes_of_call(&self, rank: u32, call: usize) -> Range<u32> {
        if self.calls.is_empty() {
            return 0..self.lanes_of(rank).len() as u32;
        }
        let first: u32 = self.calls[..call].iter().map(|c| c[rank as usize]).sum();
        first..first + self.calls[call][rank as usize]
    }

    /// Every participant, by rank.
    #[inline]
    pub(crate) fn pes(&self) -> &'p [PeId] {
        self.pes
    }

    /// The PE of rank `rank`.
    #[inline]
    pub(crate) fn pe(&self, rank: u32) -> PeId {
        self.pes[rank as usize]
    }

    /// Every task of the run, in every process.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.lists.as_ref().map_or(self.pes.len(), |(_, task_rank)| task_rank.len())
    }

    /// Whether every PE runs one lane, so that a task is its PE's rank.
    pub(crate) fn one_lane_each(&self) -> bool {
        self.lists.is_none()
    }

    /// The rank of `task`'s PE.
    #[inline]
    pub(crate) fn rank(&self, task: u32) -> u32 {
        self.lists.as_ref().map_or(task, |(_, task_rank)| task_rank[task as usize])
    }

    /// The tasks of rank `rank`.
    #[inline]
    pub(crate) fn lanes_of(&self, rank: u32) -> Range<usize> {
        let r = rank as usize;
        self.lists.as_ref().map_or(r..r + 1, |(first_task, _)| first_task[r] as usize..first_task[r + 1] as usize)
    }

    /// `task`'s index among its PE's lanes.
    #[inline]
    pub(crate) fn lane(&self, task: u32) -> u32 {
        task - self.lanes_of(self.rank(task)).start as u32
    }

    /// The task of lane `lane` of rank `rank`.
    #[inline]
    pub(crate) fn task(&self, rank: u32, lane: u32) -> u32 {
        self.lanes_of(rank).start as u32 + lane
    }

    /// Channels per directed edge.
    #[inline]
    pub(crate) fn channels(&self) -> u32 {
        self.channels
    }

    /// Whether this process holds rank `rank` (every rank, unless the run is spread).
    #[inline]
    pub(crate) fn holds(&self, rank: u32) -> bool {
        self.held.contains(&rank)
    }

    /// The ranks this process holds: every rank, unless the run is spread.
    pub(crate) fn held(&self) -> Range<usize> {
        self.held.start as usize..self.held.end as usize
    }

    /// The process that holds rank `rank` (0 unless the run is spread).
    pub(crate) fn owner(&self, rank: u32) -> usize {
        self.owners.as_ref().map_or(0, |(owners, _)| owners.owner(rank) as usize)
    }

    /// The first rank and the first task this process holds, the first cells of its per-PE and
    /// per-lane [`Cells`] (0 and 0 unless the run is spread).
    pub(crate) fn first_held(&self) -> (usize, usize) {
        let rank = self.held.start as usize;
        let task = self.lists.as_ref().map_or(rank, |(first_task, _)| first_task[rank] as usize);
        (rank, task)
    }

    /// `error` of `task`, naming its lane when its PE runs several.
    pub(crate) fn in_lane(&self, task: u32, error: RunError) -> RunError {
        let lanes = self.lanes_of(self.rank(task));
        if lanes.len() == 1 {
            return error;
        }
        RunError::InLane { lane: task as usize - lanes.start, lanes: lanes.len(), error: Box::new(error) }
    }
}

/// What every kind of traffic sees of a PE: its buffers, its notes and its compute. Touched only while
/// one of its lanes is polled or its round is merged, on one thread (rules P and M).
pub(crate) struct PeCore {
    pub(crate) input: Tile,
    pub(crate) output: Tile,
    /// What few PEs have, in one box made when the first of it is: a million PEs would each hold the
    /// room of all of it.
    pub(crate) rare: Option<Box<PeRare>>,
}

impl PeCore {
    /// What few PEs have, made on first use.
    pub(crate) fn rare(&mut self) -> &mut PeRare {
        self.rare.get_or_insert_default()
    }

    /// Its scratch buffer: empty until the kernel stores one (few kernels do).
    pub(crate) fn scratch(&mut self) -> &mut Tile {
        self.rare().scratch.get_or_insert_with(|| Tile::zeros(Dtype::F32, 0))
    }

    /// What the kernel recorded with `tl.note`, taken out of the PE.
    pub(crate) fn take_notes(&mut self) -> BTreeMap<String, String> {
        self.rare.as_mut().map(|rare| std::mem::take(&mut rare.notes)).unwrap_or_default()
    }
}

/// What a PE has only in some runs: [`PeCore::rare`].
#[derive(Default)]
pub(crate) struct PeRare {
    /// What the kernel recorded with `tl.note`, by key.
    pub(crate) notes: BTreeMap<String, String>,
    /// When the PE runs more lanes than it has engines under the timing model: its engines' bookings,
    /// so that their injections, reductions, loads and stores run at most as many at a time as there
    /// are engines.
    pub(crate) compute: Option<Engines>,
    /// When the run's protocol caps what the PE moves over all its lanes (NCCL's `llMaxBw`) under the
    /// timing model: the cap in ns per byte, and when the PE's sends hold it.
    pub(crate) port: Option<(f64, Bookings)>,
    /// A straggler's rates, when they are not the run's ([`Lanes::rates`]).
    pub(crate) rates: Option<Rates>,
    /// In a run of several calls together, the input, output and scratch of every call after the
    /// first (whose are the PE's own).
    pub(crate) later_calls: Vec<[Tile; 3]>,
    /// The first call's scratch buffer, once a kernel uses one ([`PeCore::scratch`]).
    pub(crate) scratch: Option<Tile>,
}

/// One lane of a PE: a coroutine with its own clock, phase, figures and watchdog count. Every poll of
/// the lane reads it, and the lanes lie in task order, which the rounds poll in: packed, not padded to
/// whole cache lines, a million-PE run's lanes take fewer lines in all (what a poll misses on).
pub(crate) struct LaneState {
    /// Its index in its PE: a PE runs at most [`crate::Runtime::MAX_LANES`] lanes.
    pub(crate) lane: u16,
    /// Whether its kernel has ended, finished or failed: its coroutine is gone, never polled again.
    pub(crate) ended: bool,
    /// Its call, in a run of several together (0 otherwise).
    pub(crate) call: u32,
    pub(crate) figures: PeFigures,
    /// The generation stamped on messages sent and expected on messages received now.
    pub(crate) generation: u64,
    /// Its simulated time.
    pub(crate) clock: Clock,
    /// What the watchdog counts.
    pub(crate) watch: Watch,
    /// What few lanes have, in one box made when the first of it is: a million lanes would each
    /// hold the room of all of it.
    rare: Option<Box<LaneRare>>,
}

/// What a lane has only in some runs: [`LaneState`]'s rare part.
#[derive(Default)]
struct LaneRare {
    /// Why its kernel stopped, when it failed or panicked in the current round: boxed, so that a lane
    /// that has only put or waited on a signal (every lane of a one-sided kernel) holds a word for it.
    failure: Option<Box<RunError>>,
    /// Its place in the happens-before order, once it has one (under the race detector: made when the
    /// lane first touches symmetric memory or hears of a lane that did).
    sync: Option<LaneSync>,
    /// When the last of its puts lands (a quiet and a barrier wait for it), once it has put.
    landed_ns: f64,
    /// The value its last wait on a signal compared with.
    signal_until: u64,
}

impl LaneState {
    /// A lane that has not run: lane `lane` of its PE, in call `call`, its clock `clock`, its
    /// watchdog's loop budget `loops`.
    pub(crate) fn new(lane: u32, call: u32, generation: u64, clock: Clock, loops: u64) -> LaneState {
        LaneState {
            lane: u16::try_from(lane).expect("a PE runs at most Runtime::MAX_LANES lanes"),
            ended: false,
            call,
            figures: PeFigures::default(),
            generation,
            clock,
            watch: Watch { loops_left: loops, steps: 0, last: None },
            rare: None,
        }
    }

    /// Its place in the happens-before order, made on first use (its task is `task`).
    pub(crate) fn sync(&mut self, task: u32) -> &mut LaneSync {
        self.rare.get_or_insert_default().sync.get_or_insert_with(|| LaneSync::new(task))
    }

    /// Its place in the happens-before order, if it has one.
    pub(crate) fn sync_mut(&mut self) -> Option<&mut LaneSync> {
        self.rare.as_mut()?.sync.as_mut()
    }

    /// Its place in the happens-before order, if it has one.
    pub(crate) fn sync_ref(&self) -> Option<&LaneSync> {
        self.rare.as_ref()?.sync.as_ref()
    }

    /// Gives it its place in the happens-before order.
    pub(crate) fn set_sync(&mut self, sync: LaneSync) {
        self.rare.get_or_insert_default().sync = Some(sync);
    }

    /// Records why its kernel stopped this round.
    pub(crate) fn fail(&mut self, failure: RunError) {
        self.rare.get_or_insert_default().failure = Some(Box::new(failure));
    }

    /// Why its kernel stopped, taken out of the lane.
    pub(crate) fn take_failure(&mut self) -> Option<RunError> {
        self.rare.as_mut()?.failure.take().map(|failure| *failure)
    }

    /// When the last of its puts lands (0 before it puts).
    pub(crate) fn landed_ns(&self) -> f64 {
        self.rare.as_ref().map_or(0.0, |rare| rare.landed_ns)
    }

    /// The value its last wait on a signal compared with (0 before it waits on one).
    pub(crate) fn signal_until(&self) -> u64 {
        self.rare.as_ref().map_or(0, |rare| rare.signal_until)
    }

    /// Records `value` as what its wait on a signal compares with ([`Wait::Signal`]).
    pub(crate) fn set_signal_until(&mut self, value: u64) {
        self.rare.get_or_insert_default().signal_until = value;
    }

    /// A put of it landed at `arrive_ns`.
    pub(crate) fn land(&mut self, arrive_ns: f64) {
        let rare = self.rare.get_or_insert_default();
        rare.landed_ns = rare.landed_ns.max(arrive_ns);
    }
}

/// What the watchdog has counted of a lane's kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Watch {
    /// Loop iterations the kernel may still make before its next step (counted down at the top of
    /// every loop body of a `#[ccl_kernel]`, lent to the thread while the kernel is polled, and lent
    /// whole again at every step).
    pub(crate) loops_left: u64,
    /// Waiting steps completed: sends, receives, barriers, gets, waits, quiets.
    pub(crate) steps: u64,
    /// The last waiting step completed, and its direction.
    pub(crate) last: Option<(Op, Option<Direction>)>,
}

/// The watchdog's limits per lane: see [`crate::RunOptions::loop_budget`] and
/// [`crate::RunOptions::step_budget`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    pub(crate) loops: u64,
    pub(crate) steps: u64,
}

/// What a lane waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    None,
    Send(u32),
    Recv(u32),
    /// A barrier that has not released it yet.
    Barrier,
    /// A barrier that has released it.
    Released,
    /// Its own signal to compare with a value (the value, which only a deadlock's report reads, is
    /// its lane's [`LaneState::signal_until`]: a word more in every lane's wait otherwise).
    Signal {
        signal: u32,
        cmp: Cmp,
    },
    /// An element of its own copy of a buffer to compare with a value (what it waits on is its PE's
    /// `value_waits`).
    Value,
    /// A get's reply.
    Get,
    /// Its puts of this round to be placed.
    Quiet,
}

/// What a lane waits for: the runtime wakes it (lists its task for the next round) when what it
/// waits for comes ([`Lanes::wake_if`]). In the merge phase only the unique counterpart of the queue
/// the lane waits on touches it (rule M), so it lives apart from [`LaneState`].
pub(crate) struct Parked {
    pub(crate) wait: Wait,
}

impl Parked {
    pub(crate) fn new() -> Self {
        Parked { wait: Wait::None }
    }
}

/// Woken tasks, by number, one list per thread so that wakes from parallel threads rarely meet on a
/// lock: what kernels' own wakers, barriers, one-sided operations and hand-overs wake (a merge lists
/// the lanes its queues wake in its own list, [`crate::rounds`]' `Merged`, without a lock). A task woken
/// twice in a round is listed twice and polled once (the round puts them in task order, each once).
pub(crate) struct ReadyLists {
    lists: Box<[Mutex<Vec<u32>>]>,
    /// Whether any list may hold a task: set after each push, so a round in which nothing was pushed
    /// (most rounds, whose wakes the merges list) takes no lock. A push that sets it after a drain has
    /// cleared it is drained in the next round, as one that came after the drain would be.
    pushed: AtomicBool,
}

impl ReadyLists {
    /// Lists for a run on `threads` threads.
    pub(crate) fn new(threads: usize) -> ReadyLists {
        ReadyLists {
            lists: (0..threads.max(1)).map(|_| Mutex::new(Vec::new())).collect(),
            pushed: AtomicBool::new(false),
        }
    }

    pub(crate) fn push(&self, task: u32) {
        // The driving thread and pool thread 0 share a list; the lock keeps that (rare) meeting safe.
        let slot = rayon::current_thread_index().unwrap_or(0) % self.lists.len();
        lock(&self.lists[slot]).push(task);
        self.pushed.store(true, Ordering::Relaxed);
    }

    /// Wakes every task of `tasks` at once.
    pub(crate) fn wake_all(&self, tasks: impl Iterator<Item = u32>) {
        lock(&self.lists[0]).extend(tasks);
        self.pushed.store(true, Ordering::Relaxed);
    }

    /// Moves every woken task into `out`.
    #[inline]
    pub(crate) fn drain_into(&self, out: &mut Vec<u32>) {
        if !self.pushed.load(Ordering::Relaxed) {
            return;
        }
        self.pushed.store(false, Ordering::Relaxed);
        for list in &self.lists {
            out.append(&mut lock(list));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the list inconsistent (push/append only).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The run's lanes and what every kind of traffic sees of their PEs: the lane-level part of a run.
pub(crate) struct Lanes<'p> {
    pub(crate) tasks: Tasks<'p>,
    /// Per PE this process holds.
    pub(crate) pes: Cells<PeCore>,
    /// Per task this process holds.
    pub(crate) states: Cells<LaneState>,
    /// Per task this process holds.
    pub(crate) parked: Cells<Parked>,
    pub(crate) wake_hints: WakeHints,
    pub(crate) budget: Budget,
    /// The rates of every PE but a straggler.
    pub(crate) rates: Rates,
    /// The tasks woken for the next round.
    pub(crate) ready: Arc<ReadyLists>,
}

/// What each lane reads first when it is next polled, as its kernel named it
/// ([`kernbench_core::kernel::hint::prefetch_when_woken`]): [`Lines`] per task this process holds,
/// asked for a few tasks before the task's turn. Apart from the lanes' state, as words that a thread
/// polling one task writes while another reads a task a few on; made when a kernel first names one,
/// so that a run whose kernels never do holds none.
pub(crate) struct WakeHints {
    /// The tasks this process holds.
    tasks: Range<usize>,
    hints: OnceLock<Box<[AtomicU64]>>,
}

impl WakeHints {
    /// The most bytes of a hint asked for: a few lines, which a poll reads at once.
    const MOST_BYTES: usize = 512;

    /// No hint yet, for the tasks `tasks` this process holds.
    pub(crate) fn new(tasks: Range<usize>) -> WakeHints {
        WakeHints { tasks, hints: OnceLock::new() }
    }

    /// Names the `bytes` from `start` (the first [`WakeHints::MOST_BYTES`] of them) as what `task`
    /// reads first when next polled.
    pub(crate) fn set(&self, task: u32, (start, bytes): (*const u8, usize)) {
        let hints = self.hints.get_or_init(|| self.tasks.clone().map(|_| AtomicU64::new(0)).collect());
        if let Some(hint) = hints.get((task as usize).wrapping_sub(self.tasks.start)) {
            hint.store(Lines::of(start, bytes.min(WakeHints::MOST_BYTES)).0, Ordering::Relaxed);
        }
    }

    /// The hints, once a kernel has named one (a round takes them once, not at every poll).
    pub(crate) fn named(&self) -> Option<NamedHints<'_>> {
        self.hints.get().map(|hints| NamedHints { hints, first: self.tasks.start })
    }
}

/// [`WakeHints`] that kernels have named.
pub(crate) struct NamedHints<'h> {
    hints: &'h [AtomicU64],
    first: usize,
}

impl NamedHints<'_> {
    /// Asks the CPU for what `task`'s kernel named, if it named anything.
    #[inline]
    pub(crate) fn ask(&self, task: u32) {
        if let Some(hint) = self.hints.get((task as usize).wrapping_sub(self.first)) {
            Lines(hint.load(Ordering::Relaxed)).prefetch();
        }
    }
}

impl Lanes<'_> {
    /// Wakes the lanes of rank `rank` (but `except`) whose wait `wakes` picks.
    ///
    /// # Safety
    /// No wait cell of `rank`'s lanes but `except`'s may be borrowed mutably (rule P for the PE's own
    /// thread, rule M or B otherwise).
    pub(crate) unsafe fn wake(&self, rank: u32, except: Option<u32>, wakes: impl Fn(Wait) -> bool) {
        for task in self.tasks.lanes_of(rank).filter(|&t| Some(t as u32) != except) {
            // SAFETY: the caller's.
            unsafe { self.wake_if(task as u32, &wakes) };
        }
    }

    /// Wakes `task` if `wakes` picks its wait.
    ///
    /// # Safety
    /// Its wait cell is not borrowed mutably (rule P for its PE's own thread, rule M or B otherwise).
    #[inline]
    pub(crate) unsafe fn wake_if(&self, task: u32, wakes: impl FnOnce(Wait) -> bool) {
        // SAFETY: the caller's.
        if wakes(unsafe { self.parked.get_ref(task as usize) }.wait) {
            self.ready.push(task);
        }
    }

    /// Wakes `task` if it waits in `wait` (rule B).
    pub(crate) fn wake_task(&mut self, task: u32, wait: Wait) {
        // SAFETY: `&mut self` excludes every other borrow (rule B).
        unsafe { self.wake_if(task, |w| w == wait) };
    }
}

/// The lane being polled and what it may touch (rule P): its own state and wait, its PE's buffers and
/// compute, and the watchdog's budget.
pub(crate) struct LaneCtx<'a> {
    /// The lane's task.
    pub(crate) task: u32,
    /// Its PE: its rank's participant in the run's list ([`Tasks::pe`]), not a copy in every PE's
    /// core; a reference, a word where the id would be 12 bytes in every copy of the context.
    pub(crate) participant: &'a PeId,
    pub(crate) pe: &'a mut PeCore,
    pub(crate) lane: &'a mut LaneState,
    pub(crate) parked: &'a mut Parked,
    pub(crate) budget: Budget,
    /// The run's rates: its PE's unless it has its own.
    pub(crate) run_rates: &'a Rates,
}

impl LaneCtx<'_> {
    /// The same lane, borrowed for a shorter while: what an operation takes, one indirection from its
    /// fields.
    #[inline]
    pub(crate) fn reborrow(&mut self) -> LaneCtx<'_> {
        LaneCtx {
            task: self.task,
            participant: self.participant,
            pe: &mut *self.pe,
            lane: &mut *self.lane,
            parked: &mut *self.parked,
            budget: self.budget,
            run_rates: self.run_rates,
        }
    }

    /// The PE.
    #[inline]
    pub(crate) fn pe_id(&self) -> PeId {
        *self.participant
    }

    /// Fails a waiting step once the lane has completed its budget of them.
    #[inline]
    pub(crate) fn check_steps(&self) -> Result<(), KernelError> {
        if self.lane.watch.steps >= self.budget.steps {
            return Err(self.watchdog(WatchdogBudget::Steps(self.budget.steps)));
        }
        Ok(())
    }

    /// Counts a waiting step completed, and lends the kernel its whole loop budget again.
    #[inline]
    pub(crate) fn step_done(&mut self, op: Op, direction: Option<Direction>) {
        let watch = &mut self.lane.watch;
        watch.steps += 1;
        watch.last = Some((op, direction));
        watch.loops_left = self.budget.loops;
        tl::lend_loops(self.budget.loops);
    }

    #[cold]
    pub(crate) fn watchdog(&self, budget: WatchdogBudget) -> KernelError {
        let watch = &self.lane.watch;
        // While the kernel is polled its count is lent to the thread.
        let loops_left = tl::loops_left().min(watch.loops_left);
        KernelError::Watchdog {
            pe: self.pe_id(),
            budget,
            iterations: self.budget.loops - loops_left,
            steps: watch.steps,
            last_op: watch.last.map(|(op, _)| op),
            last_direction: watch.last.and_then(|(_, direction)| direction),
        }
    }

    /// The rates of the lane's PE.
    #[inline]
    pub(crate) fn rates(&self) -> &Rates {
        self.pe.rare.as_ref().and_then(|rare| rare.rates.as_ref()).unwrap_or(self.run_rates)
    }

    /// Spends `ns` of the lane's time on work of its PE: lanes of one PE share its engines (booked when
    /// it runs more lanes than engines under the timing model), so the work waits for an engine.
    #[inline]
    pub(crate) fn spend(&mut self, kind: SpanKind, ns: f64, bytes: u64) {
        let clock = &mut self.lane.clock;
        let ns = if clock.faults().is_some() { ns * clock.slowdown() } else { ns };
        if let (Some(compute), true) = (self.pe.rare.as_mut().and_then(|rare| rare.compute.as_mut()), clock.on) {
            let start = compute.reserve(clock.now, ns);
            clock.advance_to(SpanKind::ComputeWait, start, 0, false);
        }
        clock.work(kind, ns, bytes);
    }

    /// Hands `bytes` to the network: the lane's injection ([`Clock::injection`]), which ends no earlier
    /// than the bytes have passed the PE's protocol cap, which its lanes share.
    #[inline]
    pub(crate) fn inject(&mut self, bytes: u64) {
        // An untimed clock never moves: the hottest path of an untimed run skips the arithmetic, in
        // the caller (the rest is a call of its own, so that this test is always inlined).
        if self.lane.clock.on {
            self.inject_timed(bytes);
        }
    }

    fn inject_timed(&mut self, bytes: u64) {
        let mut ns = self.rates().injection(bytes);
        if let Some((ns_per_byte, port)) = self.pe.rare.as_mut().and_then(|rare| rare.port.as_mut()) {
            let now = self.lane.clock.now;
            let (_, end) = port.reserve(now, bytes as f64 * *ns_per_byte, 0.0);
            ns = ns.max(end - now);
        }
        self.spend(SpanKind::Send, ns, bytes);
    }

    /// Waits in `wait`, to be woken when it comes ([`Lanes::wake_if`]).
    #[inline]
    pub(crate) fn park(&mut self, wait: Wait) {
        self.parked.wait = wait;
    }

    /// Its place in the happens-before order, made on first use.
    pub(crate) fn sync(&mut self) -> &mut LaneSync {
        self.lane.sync(self.task)
    }
}

#[cfg(test)]
mod tests {
    use super::{LaneRare, LaneState, Owners, Parked, PeCore, WakeHints};
    use crate::protocol::Lines;

    #[test]
    fn wake_hints_are_made_by_the_first_and_keep_the_latest_few_lines_of_each_task_held() {
        let hints = WakeHints::new(100..104);
        assert!(hints.hints.get().is_none(), "no room before a kernel names anything");
        let log = [0u8; 4096];
        hints.set(101, (log.as_ptr(), 100));
        hints.set(102, (log.as_ptr(), 100));
        hints.set(102, (log[64..].as_ptr(), log.len() - 64));
        // A task of another process is not this one's to hold.
        hints.set(104, (log.as_ptr(), 8));
        let held: Vec<u64> =
            hints.hints.get().unwrap().iter().map(|h| h.load(std::sync::atomic::Ordering::Relaxed)).collect();
        let expected = [0, Lines::of(log.as_ptr(), 100).0, Lines::of(log[64..].as_ptr(), WakeHints::MOST_BYTES).0, 0];
        assert_eq!(held, expected);
        // Asking for any of them, or for a task not held, only hints.
        let named = hints.named().unwrap();
        (99..106).for_each(|task| named.ask(task));
    }

    #[test]
    fn the_owner_of_a_rank_is_the_process_whose_block_holds_it_past_an_empty_block() {
        // Process 1 holds no rank (its SIPs have no participant).
        let owners = Owners::of_blocks([0, 4, 4, 9], 12);
        let by_rank: Vec<u32> = (0..12).map(|rank| owners.owner(rank)).collect();
        assert_eq!(by_rank, [0, 0, 0, 0, 2, 2, 2, 2, 2, 3, 3, 3]);
        assert_eq!((owners.ranks(1), owners.ranks(2), owners.ranks(3)), (4..4, 4..9, 9..12));
    }

    #[test]
    fn a_lanes_state_wait_and_pes_core_hold_no_room_for_what_few_lanes_and_pes_have() {
        // A trace, faults, puts, a signal wait's value, a failure and the race detector's order are in
        // rare parts; the PE is its rank's participant.
        assert_eq!((size_of::<LaneState>(), align_of::<LaneState>()), (176, 8));
        assert_eq!(size_of::<Parked>(), 8);
        assert_eq!(size_of::<PeCore>(), 56);
        assert_eq!(size_of::<LaneRare>(), 56);
    }
}

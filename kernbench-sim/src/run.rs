//! The executor: runs one kernel coroutine per participating PE, in rounds, to completion or to a
//! diagnosed error.
//!
//! Each round has two phases:
//!
//! 1. **poll**: every PE woken in the previous round is polled once (on one thread or many); it sends
//!    while it has credits, receives what earlier rounds delivered, and parks on the first operation
//!    that cannot complete;
//! 2. **merge**: every queue a polled PE touched publishes its new messages or returned credits, and
//!    wakes the PE parked on it.
//!
//! Nothing a PE does in a round is visible to another PE before the merge, so the order of polls within
//! a round cannot change any result: one thread and many give the same bits. A round in which nobody is
//! woken while kernels remain is a deadlock, reported with every blocked PE.

use std::any::Any;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};

use async_task::Runnable;
use kernbench_core::postcondition::{CallFacts, PostconditionError, starting_output};
use kernbench_core::provenance::{self, Exactness};
use kernbench_core::tl::{self, MAX_GENERATION, TlContext, message_generation};
use kernbench_core::{
    Group, InstallPlan, KernelError, Launch, Op, PeId, PlanLinks, ReduceOp, System, Tile, Tl, check_plan,
};
use rayon::prelude::*;

use crate::error::{BlockedPe, DeadlockReport, LeftRaised, Leftover, RunError, SignalWait, Unreceived};
use crate::exchange::{Exchange, ExchangeError};
use crate::pe::{
    Arrival, Barrier, Budget, LaneState, PeBuffers, PeFigures, PeState, PeView, Port, Wait, WaitSlot, Watch, group_key,
};
use crate::queue::{Queue, Queues, Side};
use crate::race::{MessageOrders, Released, Stamp};
use crate::report::{PeReport, RunReport};
use crate::slots::Slots;
use crate::spread::{Crossing, GetReply, PeShare, RoundShare, Spread};
use crate::symmetric::{OneSidedOp, Outgoing, PutRecord, Raise, access, conflict_error};
use crate::timing::{Bookings, Clock, Network, PeTime, SpanKind, TimeReport, Timing, Transfer};

/// Below this many PEs woken in a round, the round runs on one thread by default: handing work to
/// other threads costs more than it saves.
pub const PARALLEL_MIN_READY: usize = 512;

/// Loop iterations a PE's kernel may make by default before the watchdog stops it
/// ([`Runtime::loop_budget`]).
///
/// A kernel spinning in `loop {}` reaches it in about 2.4 s in a release build (a check costs about
/// 0.55 ns: 2^30 iterations took 0.59 s on the shared 2-core development machine), well within the 10 s
/// a runaway kernel may take. The shipped kernels use far less: at most 66,690 per PE (the all-to-alls
/// at 16 MiB per rank on the built-in system, `kernbench bench all_to_all --algos all`), a margin of
/// about 64,000x; the million-PE hierarchical all-reduce of `cli/benches/runtime.rs` uses none (its loops
/// are in plain functions), and that benchmark's streaming kernel 2,000,000, a margin of about 2,000x.
pub const DEFAULT_LOOP_BUDGET: u64 = 1 << 32;

/// Waiting steps (sends, receives, barriers) a PE's kernel may complete by default before the watchdog
/// stops it ([`Runtime::step_budget`]).
///
/// A kernel sending forever into a peer that receives forever reaches it in about 3.5 s in a release
/// build (2^24 steps took 1.8 s on the shared 2-core development machine), within the 10 s a runaway
/// kernel may take. The shipped kernels use far less: at most 260 per PE (the all-to-alls at 16 MiB
/// per rank on the built-in system), a margin of about 129,000x; the million-PE hierarchical
/// all-reduce of `cli/benches/runtime.rs` uses 12, and that benchmark's streaming kernel 2,000,000
/// messages per PE, a margin of about 16x.
pub const DEFAULT_STEP_BUDGET: u64 = 1 << 25;

/// The per-call facts every PE's kernel sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// The reduction operator.
    pub op: ReduceOp,
    /// The root rank of a rooted collective.
    pub root: usize,
    /// The call's generation; every message carries it, and a receiver rejects another.
    pub generation: u64,
}

impl Default for Call {
    fn default() -> Self {
        Call { op: ReduceOp::Sum, root: 0, generation: 1 }
    }
}

/// Runs kernels on a system.
///
/// # Examples
/// See [`crate::testing::run_kernel_in_mock`] for a whole run in one call.
#[derive(Clone, Debug)]
pub struct Runtime<'s> {
    system: &'s System,
    threads: usize,
    parallel_min_ready: usize,
    timing: Option<Timing>,
    budget: Budget,
    race_detector: bool,
    exchange: Option<Arc<dyn Exchange>>,
}

/// Woken runnables, one list per thread so that wakes from parallel merges rarely meet on a lock.
struct ReadyLists {
    lists: Box<[Mutex<Vec<Runnable<u32>>>]>,
}

impl ReadyLists {
    fn push(&self, runnable: Runnable<u32>) {
        // The driving thread and pool thread 0 share a list; the lock keeps that (rare) meeting safe.
        let slot = rayon::current_thread_index().unwrap_or(0) % self.lists.len();
        lock(&self.lists[slot]).push(runnable);
    }

    /// Moves every woken runnable into `out`, each in a slot its poll takes it out of.
    #[inline]
    fn drain_into(&self, out: &mut Vec<Option<Runnable<u32>>>) {
        for list in &self.lists {
            out.extend(lock(list).drain(..).map(Some));
        }
    }
}

/// `x` as an integer in [`f64::total_cmp`]'s order: a sort key compared in one instruction, where a
/// float's order is a call.
fn total_order(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    // Negative floats count down as their bits count up: flip every bit but the sign.
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

/// Puts a round's woken runnables in task order (so rank order, each PE's lanes together). When many
/// of the run's tasks are woken, as in a ring where every PE steps each round, it puts each in its
/// task's slot of `by_task` and reads the slots back in one pass, linear where a sort is not; when few
/// are (in number, or against the tasks up to the last one woken), it sorts them.
fn in_task_order(round: &mut Vec<Option<Runnable<u32>>>, by_task: &mut Vec<Option<Runnable<u32>>>) {
    // Below this many, a sort costs less than a pass over the slots.
    const FEW: usize = 64;
    let task = |r: &Runnable<u32>| *r.metadata() as usize;
    let last = if round.len() < FEW { None } else { round.iter().flatten().map(task).max() };
    let Some(last) = last.filter(|&last| round.len() * 8 >= last) else {
        round.sort_unstable_by_key(|r| r.as_ref().map(task));
        return;
    };
    if by_task.len() <= last {
        by_task.resize_with(last + 1, || None);
    }
    for runnable in round.drain(..).flatten() {
        let slot = task(&runnable);
        by_task[slot] = Some(runnable);
    }
    round.extend(by_task[..=last].iter_mut().filter_map(Option::take).map(Some));
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the list inconsistent (push/append only).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How one poll ended.
#[derive(Clone, Copy)]
enum Polled {
    Pending,
    Finished,
    /// The error waits in the PE's `failure`, so outcomes stay small on the hot path.
    Failed,
}

/// What a round's polls add up to: lanes that finished, and the lowest task (lane of the run) that
/// failed.
#[derive(Clone, Copy, Default)]
struct Outcome {
    finished: usize,
    failed: Option<u32>,
}

impl Outcome {
    fn add(self, task: u32, polled: Polled) -> Outcome {
        match polled {
            Polled::Pending => self,
            Polled::Finished => Outcome { finished: self.finished + 1, ..self },
            Polled::Failed => self.merge(Outcome { finished: 0, failed: Some(task) }),
        }
    }

    /// Finished counts add; of two failures the lower task's (so the lower rank's) wins, so the
    /// reported error does not depend on the order of polls.
    fn merge(self, other: Outcome) -> Outcome {
        let failed = match (self.failed, other.failed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Outcome { finished: self.finished + other.finished, failed }
    }
}

impl<'s> Runtime<'s> {
    /// The most threads a runtime polls PEs on ([`Runtime::threads`]); a run asked for more ends in
    /// [`RunError::TooManyThreads`] before any thread is started.
    ///
    /// Rounds gain nothing from more threads than cores, and each thread costs a stack and a ready
    /// list; asking the OS for 100,000 made thread creation fail part way, and the process abort or
    /// hang. 1024 is far above any core count this simulator is run on.
    pub const MAX_THREADS: usize = 1024;

    /// The most lanes a kernel may run as on one PE ([`Launch::lanes`]); more ends the run in
    /// [`RunError::BadLanes`]. NCCL runs at most 32 channels, and MSCCL programs a few dozen thread
    /// blocks per GPU; each lane costs a coroutine, and each channel a queue per directed edge.
    pub const MAX_LANES: usize = 256;

    /// A single-threaded runtime for `system`.
    pub fn new(system: &'s System) -> Self {
        Runtime {
            system,
            threads: 1,
            parallel_min_ready: PARALLEL_MIN_READY,
            timing: Some(Timing::default()),
            budget: Budget { loops: DEFAULT_LOOP_BUDGET, steps: DEFAULT_STEP_BUDGET },
            race_detector: true,
            exchange: None,
        }
    }

    /// Spreads each run over the processes of `exchange` ([`crate::exchange`]): each process holds a
    /// contiguous block of SIPs ([`crate::exchange::Partition`]) and starts, polls and merges only
    /// their PEs; every process calls [`Runtime::run`] with the same arguments and gets the same
    /// report, bit for bit the report of a run in one process (its errors read the same too: the
    /// failing PE's process returns the error, the others [`RunError::Elsewhere`] with its message).
    /// Buffers of PEs another process holds are dropped at the start. A spread run does not run the
    /// race detector ([`Runtime::race_detector`]): run a kernel in one process to check it for races.
    /// One-sided operations to a PE of another process go to that process with the round's hand-over.
    pub fn exchange(mut self, exchange: Arc<dyn Exchange>) -> Self {
        self.exchange = Some(exchange);
        self
    }

    /// Checks every access to symmetric memory against the happens-before order of the run (the
    /// default), or not (`false`): see [`kernbench_core::symmetric`]. On, two unordered accesses to the
    /// same bytes (one a write) end the run in [`KernelError::Race`], a read of bytes nobody wrote in
    /// [`KernelError::Uninitialised`], and a put that neither a quiet nor its target's waits completed
    /// in [`RunError::PutNotLanded`]. Kernels that use no symmetric memory cost the same either way.
    pub fn race_detector(mut self, on: bool) -> Self {
        self.race_detector = on;
        self
    }

    /// Lets each PE's kernel (each of its lanes) make at most `iterations` loop iterations (default
    /// [`DEFAULT_LOOP_BUDGET`]); the next ends the run with [`KernelError::Watchdog`]. `#[ccl_kernel]`
    /// counts an iteration at the top of every `loop`, `while` and `for` body of a kernel or helper, so
    /// a kernel that loops without end between steps still ends; loops in plain functions it calls are
    /// not counted. Results do not depend on it, unless it stops the run.
    pub fn loop_budget(mut self, iterations: u64) -> Self {
        self.budget.loops = iterations;
        self
    }

    /// Lets each PE's kernel (each of its lanes) complete at most `steps` waiting steps (sends, receives, barriers; default
    /// [`DEFAULT_STEP_BUDGET`]); the next ends the run with [`KernelError::Watchdog`]. So a kernel that
    /// never finishes while still taking steps (sending forever into a peer that receives forever) ends
    /// too. Results do not depend on it, unless it stops the run.
    pub fn step_budget(mut self, steps: u64) -> Self {
        self.budget.steps = steps;
        self
    }

    /// Simulates time with these settings (the default: cut-through, no stragglers, no trace), or not at
    /// all with `None` (outputs and figures are the same either way).
    pub fn timing(mut self, timing: Option<Timing>) -> Self {
        self.timing = timing;
        self
    }

    /// Polls PEs on `threads` threads (at least 1, at most [`Runtime::MAX_THREADS`]: more makes
    /// [`Runtime::run`] fail). Results do not depend on it.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Polls a round on several threads only when at least `ready` PEs are woken in it (default
    /// [`PARALLEL_MIN_READY`]). Results do not depend on it.
    pub fn parallel_min_ready(mut self, ready: usize) -> Self {
        self.parallel_min_ready = ready.max(1);
        self
    }

    /// Runs `kernel` on every participant of `plan`, with `buffers` given per participant in rank
    /// order.
    ///
    /// # Errors
    /// [`RunError`]: a kernel's error, a panic, a deadlock, messages left in queues, buffers and a plan
    /// that do not fit, a straggler out of range ([`Timing::check`]), or threads that cannot be started.
    pub fn run(
        &self,
        plan: &InstallPlan,
        kernel: &dyn Launch,
        buffers: Vec<PeBuffers>,
        call: Call,
    ) -> Result<RunReport, RunError> {
        if self.threads > Runtime::MAX_THREADS {
            return Err(RunError::TooManyThreads { threads: self.threads, max: Runtime::MAX_THREADS });
        }
        if call.generation == 0 {
            return Err(RunError::ZeroGeneration);
        }
        if call.generation > MAX_GENERATION {
            return Err(RunError::GenerationTooLarge { generation: call.generation });
        }
        let pes: Vec<PeId> = plan.participants().map(|p| p.pe).collect();
        if call.root >= pes.len() {
            return Err(RunError::BadRoot { root: call.root, participants: pes.len() });
        }
        if buffers.len() != pes.len() {
            return Err(RunError::BufferCount { participants: pes.len(), buffers: buffers.len() });
        }
        check_plan(plan, self.system)?;
        if let Some(timing) = &self.timing {
            timing.check(self.system)?;
        }
        let spread = match &self.exchange {
            Some(exchange) => Spread::new(&**exchange, self.system, &pes)?,
            None => None,
        };
        let local = |rank: usize| spread.as_ref().is_none_or(|s| s.is_local(rank as u32));
        let lanes: Vec<usize> = (0..pes.len()).map(|rank| kernel.lanes(rank, pes.len())).collect();
        if let Some((rank, &bad)) = lanes.iter().enumerate().find(|(_, n)| !(1..=Runtime::MAX_LANES).contains(*n)) {
            return Err(RunError::BadLanes { pe: pes[rank], lanes: bad, max: Runtime::MAX_LANES });
        }
        // One channel per lane of the PE with the most: every lane can have its own queues.
        let channels = lanes.iter().copied().max().unwrap_or(1);
        let mut first_task = Vec::with_capacity(pes.len() + 1);
        first_task.push(0u32);
        for &n in &lanes {
            first_task.push(first_task[first_task.len() - 1] + n as u32);
        }
        // Before any PE's task exists, so a pool that cannot be built leaves nothing to clean up.
        let pool = if self.threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(self.threads)
                    .build()
                    .map_err(|e| RunError::Threads { threads: self.threads, reason: e.to_string() })?,
            )
        } else {
            None
        };
        quiet_kernel_panics();
        let installed = install_queues(self.system, plan, (self.system.ipcq_depth(), channels), local);
        let (queues, routes, ports) = (installed.queues, installed.routes, installed.ports);
        let make_network = || {
            let routes = routes.iter().copied();
            self.timing.as_ref().map(|timing| Network::new(self.system, timing, &pes, routes))
        };
        // A spread run holds the states of this process's PEs and lanes only: their cells by rank and
        // by task.
        let cells_of = |count: usize, held: &dyn Fn(usize) -> bool| -> Arc<[u32]> {
            let mut next = 0u32;
            (0..count)
                .map(|i| {
                    if held(i) {
                        next += 1;
                        next - 1
                    } else {
                        Slots::<()>::ABSENT
                    }
                })
                .collect()
        };
        let task_rank: Vec<u32> =
            lanes.iter().enumerate().flat_map(|(rank, &n)| std::iter::repeat_n(rank as u32, n)).collect();
        let cells = spread.as_ref().map(|_| {
            (
                cells_of(pes.len(), &|rank| local(rank)),
                cells_of(task_rank.len(), &|task| local(task_rank[task] as usize)),
            )
        });
        let make_states = || {
            // One empty scratch buffer for every PE until a kernel asks for one of its own.
            let no_scratch = Tile::zeros(kernbench_core::Dtype::F32, 0);
            let states: Vec<PeState> = pes
                .iter()
                .zip(ports)
                .zip(buffers)
                .zip(&lanes)
                .enumerate()
                .filter(|&(rank, _)| local(rank))
                .map(|(_, (((&pe, ports), b), &n))| PeState {
                    pe,
                    ports,
                    input: b.input,
                    output: b.output,
                    scratch: no_scratch.clone(),
                    touched: Vec::new(),
                    notes: BTreeMap::new(),
                    compute: (n > 1 && self.timing.is_some()).then(Bookings::default),
                    one_sided: None,
                })
                .collect();
            // Sized up front: a flattened iterator does not know its length, and growing by doubling
            // copies a million lanes' states again and again.
            let held: usize = (0..pes.len()).filter(|&rank| local(rank)).map(|rank| lanes[rank]).sum();
            let mut lane_states = Vec::with_capacity(held);
            let lane_state_list = (pes.iter().zip(&lanes).enumerate())
                .filter(|&(rank, _)| local(rank))
                .flat_map(|(_, (&pe, &n))| (0..n as u32).map(move |lane| (pe, lane)))
                .map(|(pe, lane)| LaneState {
                    lane,
                    figures: PeFigures::default(),
                    generation: message_generation(call.generation, 1),
                    clock: Clock::new(self.system, self.timing.as_ref(), pe),
                    failure: None,
                    watch: Watch { loops_left: self.budget.loops, steps: 0, last: None },
                    one_sided: None,
                });
            lane_states.extend(lane_state_list);
            (states, lane_states)
        };
        // The network model and the PEs' states are made side by side when there is a pool.
        let (network, (states, lane_states)) = match &pool {
            Some(pool) => pool.install(|| rayon::join(make_network, make_states)),
            None => (make_network(), make_states()),
        };
        // This process's tasks (every task, unless the run is spread).
        let held = lane_states.len();
        let tasks = task_rank.len();
        let (states, lanes_held, waits) = match &cells {
            Some((by_rank, by_task)) => (
                Slots::some(states, Arc::clone(by_rank)),
                Slots::some(lane_states, Arc::clone(by_task)),
                Slots::some((0..held).map(|_| WaitSlot::new()).collect(), Arc::clone(by_task)),
            ),
            None => {
                (Slots::new(states), Slots::new(lane_states), Slots::new((0..held).map(|_| WaitSlot::new()).collect()))
            }
        };
        let mut exec = Execution {
            pes: &pes,
            states,
            lanes: lanes_held,
            first_task,
            task_rank,
            waits,
            queues,
            channels: channels as u32,
            results: (0..held).map(|_| OnceLock::new()).collect(),
            barrier: Barrier { arrived: AtomicBool::new(false), waiters: Mutex::new(Vec::new()) },
            group_lanes: BTreeMap::new(),
            at_barrier: BTreeMap::new(),
            generation: call.generation,
            network,
            budget: self.budget,
            // A race's two sides may be in two processes: a spread run does not look for races.
            detector: self.race_detector && spread.is_none(),
            orders: MessageOrders::default(),
            one_sided_used: AtomicBool::new(false),
            puts: Vec::new(),
            spread,
            inbox: BTreeMap::new(),
            remote_landed: Default::default(),
        };
        let ready = Arc::new(ReadyLists { lists: (0..self.threads).map(|_| Mutex::new(Vec::new())).collect() });
        let results = Arc::clone(&exec.results);
        let extents = [self.system.sips(), self.system.cubes_per_sip(), self.system.pes_per_cube()];
        let (first_task, task_rank) = (&exec.first_task, &exec.task_rank);
        let lane_cell = |task: usize| exec.lanes.cell(task);
        let start = |task: usize| {
            let rank = task_rank[task] as usize;
            let ctx = TlContext {
                pe: pes[rank],
                extents,
                rank,
                size: pes.len(),
                op: call.op,
                root: call.root,
                generation: call.generation,
                lane: task - first_task[rank] as usize,
                lanes: lanes[rank],
                queue_depth: self.system.ipcq_depth(),
            };
            let future = kernel.launch(Tl::new(ctx));
            let results = Arc::clone(&results);
            let cell = lane_cell(task);
            let schedule = {
                let ready = Arc::clone(&ready);
                move |runnable| ready.push(runnable)
            };
            let (runnable, handle) = async_task::Builder::new().metadata(task as u32).spawn(
                move |_| async move {
                    let result = future.await;
                    // Set once: the task completes once.
                    let _ = results[cell].set(result.map_err(Box::new));
                },
                schedule,
            );
            handle.detach();
            runnable.schedule();
        };
        // Each task's kernel and coroutine are made (and their memory first touched) on the pool's
        // threads when there is one; the first round puts the woken tasks in task order whichever
        // thread made them.
        // A spread run starts only this process's PEs.
        let spread = &exec.spread;
        let here = |task: &usize| spread.as_ref().is_none_or(|s| s.is_local(task_rank[*task]));
        match &pool {
            Some(pool) => pool.install(|| (0..tasks).into_par_iter().with_min_len(1024).filter(here).for_each(start)),
            None => (0..tasks).filter(here).for_each(start),
        }
        exec.drive(&ready, pool.as_ref(), self.parallel_min_ready)
    }
}

impl Runtime<'_> {
    /// Runs `kernel` on provenance inputs shaped as `inputs` ([`kernbench_core::provenance`]), untimed,
    /// and checks that every output element holds exactly the contributions `call`'s collective says,
    /// the outputs starting as [`starting_output`] makes them.
    ///
    /// # Errors
    /// [`ExactRunError`]: the run's error, or a reference that cannot be made (a root out of range).
    pub fn run_exact(
        &self,
        plan: &InstallPlan,
        kernel: &dyn Launch,
        call: (CallFacts, u64),
        inputs: &[Tile],
    ) -> Result<Exactness, ExactRunError> {
        let (facts, generation) = call;
        let inputs = provenance::inputs(inputs);
        let n = inputs.len();
        let before: Vec<Tile> =
            inputs.iter().enumerate().map(|(rank, input)| starting_output(facts.collective, input, rank, n)).collect();
        let buffers = inputs.iter().zip(&before).map(|(i, o)| PeBuffers { input: i.clone(), output: o.clone() });
        let call = Call { op: provenance::call(facts).op, root: facts.root, generation };
        let run = self.clone().timing(None).run(plan, kernel, buffers.collect(), call)?;
        let outputs: Vec<Tile> = run.pes().iter().map(|p| p.output.clone()).collect();
        let pes: Vec<PeId> = run.pes().iter().map(|p| p.pe).collect();
        Ok(provenance::check(facts, &pes, &inputs, &before, &outputs)?)
    }
}

/// Why a provenance run gave no verdict.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ExactRunError {
    /// The run failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The collective's reference could not be made.
    #[error(transparent)]
    Reference(#[from] PostconditionError),
}

/// How a task's kernel ended; an error is boxed, or a million tasks that end well would each hold an
/// error's room.
type Ended = Result<(), Box<KernelError>>;

/// One run in progress. A PE's lanes are tasks `first_task[rank]..first_task[rank + 1]`, numbered in
/// rank order, so sorting woken tasks groups each PE's lanes together.
struct Execution<'p> {
    pes: &'p [PeId],
    /// Per PE.
    states: Slots<PeState>,
    /// Per task (lane of a PE).
    lanes: Slots<LaneState>,
    first_task: Vec<u32>,
    task_rank: Vec<u32>,
    /// Per task.
    waits: Slots<WaitSlot>,
    queues: Queues,
    /// Channels per directed edge.
    channels: u32,
    /// Per task, how its kernel ended.
    results: Arc<[OnceLock<Ended>]>,
    barrier: Barrier,
    /// Lanes per barrier group, counted when a group first meets.
    group_lanes: BTreeMap<u64, usize>,
    /// The lanes at each barrier group that has not opened yet.
    at_barrier: BTreeMap<u64, Vec<Arrival>>,
    generation: u64,
    /// The channels and routes, when time is simulated.
    network: Option<Network>,
    budget: Budget,
    detector: bool,
    orders: MessageOrders,
    one_sided_used: AtomicBool,
    /// Every put applied, under the race detector, for the check at the end of the run.
    puts: Vec<PutRecord>,
    /// The processes of a spread run, when there are several.
    spread: Option<Spread<'p>>,
    /// A spread run's one-sided operations of the round from other processes to this one's PEs, by
    /// sender rank and place in its outbox.
    inbox: BTreeMap<(u32, u64), Outgoing>,
    /// When the puts of lanes of other processes landed, for barriers this process releases.
    remote_landed: rustc_hash::FxHashMap<u32, f64>,
}

impl Execution<'_> {
    fn drive(
        &mut self,
        ready: &ReadyLists,
        pool: Option<&rayon::ThreadPool>,
        parallel_min_ready: usize,
    ) -> Result<RunReport, RunError> {
        // The round's runnables, taken out one by one as they are polled.
        let mut round: Vec<Option<Runnable<u32>>> = Vec::new();
        let mut by_task: Vec<Option<Runnable<u32>>> = Vec::new();
        let mut polled: Vec<u32> = Vec::new();
        let mut sent: Vec<Transfer> = Vec::new();
        let mut crossing: Vec<Crossing> = Vec::new();
        let mut finished = 0usize;
        let mut rounds = 0u64;
        // Rounds split into jobs of at least this many PEs: fewer are not worth a thread, but a test
        // that asks for parallel rounds of a few PEs gets them.
        let min_job = parallel_min_ready.clamp(1, 64);
        let one_lane_each = self.lanes_total() == self.pes.len();
        loop {
            ready.drain_into(&mut round);
            // A process of a spread run with nothing to poll still takes part in the round's hand-over:
            // the run ends when no process polled anything.
            if round.is_empty() && self.spread.is_none() {
                break;
            }
            let woken = round.len() as u64;
            in_task_order(&mut round, &mut by_task);
            polled.clear();
            if one_lane_each {
                // A task is its PE's rank.
                polled.extend(round.iter().filter_map(|r| r.as_ref().map(|r| *r.metadata())));
            } else {
                for rank in round.iter().filter_map(|r| self.rank_of(r)) {
                    if polled.last() != Some(&rank) {
                        polled.push(rank);
                    }
                }
            }
            let this = &*self;
            let same_pe = |a: &Option<Runnable<u32>>, b: &Option<Runnable<u32>>| this.rank_of(a) == this.rank_of(b);
            let parallel = pool.filter(|_| round.len() >= parallel_min_ready);
            // A PE's woken lanes are polled together; when every PE runs one lane, a PE is a slot.
            let outcome = match (parallel, one_lane_each) {
                (Some(pool), true) => pool.install(|| {
                    round
                        .par_iter_mut()
                        .with_min_len(min_job)
                        .map(|slot| this.poll_pe(std::slice::from_mut(slot)))
                        .reduce(Outcome::default, Outcome::merge)
                }),
                (Some(pool), false) => pool.install(|| {
                    round.par_chunk_by_mut(same_pe).map(|pe| this.poll_pe(pe)).reduce(Outcome::default, Outcome::merge)
                }),
                (None, true) => round
                    .iter_mut()
                    .map(|slot| this.poll_pe(std::slice::from_mut(slot)))
                    .fold(Outcome::default(), Outcome::merge),
                (None, false) => {
                    round.chunk_by_mut(same_pe).map(|pe| this.poll_pe(pe)).fold(Outcome::default(), Outcome::merge)
                }
            };
            round.clear();
            let failure = outcome.failed.map(|task| (task, self.failure(task)));
            if self.spread.is_none() {
                rounds += 1;
                finished += outcome.finished;
                if let Some((_, failure)) = failure {
                    return Err(failure);
                }
            }
            sent.clear();
            crossing.clear();
            let this = &*self;
            match pool {
                Some(pool) if polled.len() >= parallel_min_ready => {
                    let parts = pool.install(|| {
                        polled
                            .par_iter()
                            .with_min_len(min_job)
                            .fold(
                                || (Vec::new(), Vec::new()),
                                |mut part, &rank| {
                                    this.merge(rank, &mut part.0, &mut part.1);
                                    part
                                },
                            )
                            .collect::<Vec<_>>()
                    });
                    for (mut part, mut crossed) in parts {
                        sent.append(&mut part);
                        crossing.append(&mut crossed);
                    }
                }
                _ => polled.iter().for_each(|&rank| this.merge(rank, &mut sent, &mut crossing)),
            }
            let arrivals = if self.spread.is_some() {
                let share = (woken, outcome.finished as u64, failure);
                let Some((done, arrivals, one_sided)) = self.hand_over(share, &polled, &mut sent, &crossing)? else {
                    break;
                };
                rounds += 1;
                finished += done;
                Some((arrivals, one_sided))
            } else {
                None
            };
            self.place_transfers(&mut sent)?;
            let one_sided = self.one_sided_used.swap(false, Ordering::Relaxed);
            let arrivals = match arrivals {
                Some((arrivals, anywhere)) => {
                    if anywhere {
                        self.deliver_spread(&polled)?;
                    }
                    Some(arrivals)
                }
                None => {
                    if one_sided {
                        self.deliver_one_sided(&polled)?;
                    }
                    None
                }
            };
            match arrivals {
                Some(arrivals) if !arrivals.is_empty() => self.release_barriers(arrivals),
                Some(_) => {}
                None => {
                    if self.barrier.arrived.swap(false, Ordering::Relaxed) {
                        let arrivals = std::mem::take(&mut *lock(&self.barrier.waiters));
                        self.release_barriers(arrivals);
                    }
                }
            }
        }
        if finished < self.lanes_total() {
            return Err(RunError::Deadlock(self.deadlock_report(finished)?));
        }
        self.check_queues_empty()?;
        self.check_signals()?;
        self.check_puts_landed()?;
        self.report(rounds)
    }

    /// The error `task`'s failed poll left with its lane.
    fn failure(&mut self, task: u32) -> RunError {
        let failure = self.lanes.get(task as usize).failure.take();
        let failure = failure.expect("a failed poll leaves its error with the lane");
        self.in_lane(task, *failure)
    }

    /// A spread run's hand-over after a round: sends this process's part (lanes polled, finished,
    /// its lowest failure, transfers, barrier arrivals, and the messages and credits on queues to
    /// other processes), hands in what the others sent, and fills `sent` with every process's
    /// transfers. Returns the lanes every process finished and every barrier arrival of the round, or
    /// `None` when no process polled anything (the run is over).
    ///
    /// # Errors
    /// The round's lowest failure, in whichever process; an exchange that failed.
    fn hand_over(
        &mut self,
        (woken, finished, failure): (u64, u64, Option<(u32, RunError)>),
        polled: &[u32],
        sent: &mut Vec<Transfer>,
        crossing: &[Crossing],
    ) -> Result<Option<(usize, Vec<Arrival>, bool)>, RunError> {
        let arrivals = if self.barrier.arrived.swap(false, Ordering::Relaxed) {
            std::mem::take(&mut *lock(&self.barrier.waiters))
        } else {
            Vec::new()
        };
        let (mut messages, mut credits) = (Vec::new(), Vec::new());
        for c in crossing {
            let queue = &mut self.queues[c.queue as usize];
            for position in c.positions.clone() {
                match c.side {
                    Side::Sender => {
                        let message = queue.take_message(position).expect("a published message is in its slot");
                        messages.push((c.queue, queue.receiver, position, message));
                    }
                    Side::Receiver => credits.push((c.queue, queue.sender, position, queue.credit_at(position))),
                }
            }
        }
        let told = failure.as_ref().map(|(task, e)| (*task, e.to_string()));
        let spread = self.spread.as_ref().expect("a spread run");
        let one_sided = self.one_sided_used.load(Ordering::Relaxed);
        // One-sided operations to PEs of other processes go to their targets' processes; the rest,
        // and the effects on their own lanes, are delivered here after placement.
        let mut ops = Vec::new();
        for &rank in polled.iter().filter(|_| one_sided) {
            // SAFETY: between rounds: nothing writes PE states.
            let Some(state) = (unsafe { self.states.get_ref(rank as usize) }).one_sided.as_ref() else { continue };
            let remote = state.outbox.iter().enumerate().filter(|(_, out)| !spread.is_local(out.to));
            ops.extend(remote.map(|(i, out)| (rank, i as u64, out)));
        }
        let share = RoundShare {
            one_sided,
            ops,
            polled: woken,
            finished,
            failed: told,
            transfers: sent,
            arrivals: &arrivals,
            messages,
            credits,
        };
        let totals = spread.hand_over(share)?;
        if let Some((task, process, message)) = totals.failed {
            return Err(match failure {
                Some((mine, error)) if mine == task => error,
                _ => RunError::Elsewhere { process, message },
            });
        }
        if totals.polled == 0 {
            return Ok(None);
        }
        for (q, position, message) in totals.messages {
            self.queues[q as usize].hand_in(position, message);
            self.wake_side(q, Side::Receiver, Wait::Recv(q));
        }
        for (q, position, credit_at) in totals.credits {
            self.queues[q as usize].credit_back(position, credit_at);
            self.wake_side(q, Side::Sender, Wait::Send(q));
        }
        *sent = totals.transfers;
        self.inbox.extend(totals.ops.into_iter().map(|(sender, index, out)| ((sender, index), out)));
        Ok(Some((totals.finished as usize, totals.arrivals, totals.one_sided)))
    }

    /// Wakes the lane that owns `side` of queue `q`, if it waits in `waiting`.
    fn wake_side(&self, q: u32, side: Side, waiting: Wait) {
        let queue = &self.queues[q as usize];
        let pe = if side == Side::Sender { queue.sender } else { queue.receiver };
        // With one channel every PE runs one lane, which owns every side it uses (and does not record
        // it: see `PeView::claim`).
        // SAFETY: merge phase or between rounds: owners are only written while polling.
        let lane = if self.channels == 1 { Some(0) } else { unsafe { queue.owner_lane(side) } };
        let Some(lane) = lane else { return };
        let task = self.first_task[pe as usize] as usize + lane as usize;
        // SAFETY: merge phase or between rounds: wait slots are only read (the lane's own poll, which
        // writes it, is over), and waking takes a shared reference to the waker.
        let slot = unsafe { self.waits.get_ref(task) };
        if slot.wait == waiting {
            if let Some(waker) = &slot.waker {
                waker.wake_by_ref();
            }
        }
    }

    /// How `task`'s kernel ended, if it has (a task this process holds).
    fn ended(&self, task: usize) -> Option<&Ended> {
        self.results[self.lanes.cell(task)].get()
    }

    /// Whether this process holds `rank` (every rank, unless the run is spread).
    fn holds(&self, rank: u32) -> bool {
        self.spread.as_ref().is_none_or(|s| s.is_local(rank))
    }

    fn lanes_total(&self) -> usize {
        self.task_rank.len()
    }

    fn rank_of(&self, runnable: &Option<Runnable<u32>>) -> Option<u32> {
        runnable.as_ref().map(|r| self.task_rank[*r.metadata() as usize])
    }

    /// The lanes `rank` runs.
    fn lanes_of(&self, rank: usize) -> std::ops::Range<usize> {
        self.first_task[rank] as usize..self.first_task[rank + 1] as usize
    }

    /// `error` of `task`, naming its lane when its PE runs several.
    fn in_lane(&self, task: u32, error: RunError) -> RunError {
        let lanes = self.lanes_of(self.task_rank[task as usize] as usize);
        if lanes.len() == 1 {
            return error;
        }
        RunError::InLane { lane: task as usize - lanes.start, lanes: lanes.len(), error: Box::new(error) }
    }

    /// Polls the woken lanes of one PE once each, in lane order.
    fn poll_pe(&self, woken: &mut [Option<Runnable<u32>>]) -> Outcome {
        let Some(rank) = woken.first().and_then(|r| self.rank_of(r)) else { return Outcome::default() };
        // SAFETY: poll phase; a PE's woken lanes are polled together, by one thread, so only this
        // thread touches its state, and (a task is woken at most once per round) its lanes' states and
        // wait slots.
        let state = unsafe { self.states.get_mut(rank as usize) };
        state.touched.clear();
        let mut outcome = Outcome::default();
        for runnable in woken.iter_mut().filter_map(Option::take) {
            let task = *runnable.metadata();
            // SAFETY: as above.
            let (lane, wait) = unsafe { (self.lanes.get_mut(task as usize), self.waits.get_mut(task as usize)) };
            lane.figures.polls += 1;
            outcome = outcome.add(task, self.poll_lane(task, state, lane, wait, runnable));
        }
        outcome
    }

    /// Polls one lane's kernel once.
    #[inline]
    fn poll_lane(
        &self,
        task: u32,
        state: &mut PeState,
        lane: &mut LaneState,
        wait: &mut WaitSlot,
        runnable: Runnable<u32>,
    ) -> Polled {
        let pe = state.pe;
        let mut view = PeView {
            task,
            state,
            lane,
            wait,
            channels: self.channels,
            queues: &self.queues,
            pes: self.pes,
            credit_latency: self.network.as_ref().map_or(&[], |n| &n.route_latency),
            call_generation: self.generation,
            barrier: &self.barrier,
            budget: self.budget,
            detector: self.detector,
            orders: &self.orders,
            one_sided_used: &self.one_sided_used,
            waits: &self.waits,
            first_task: &self.first_task,
            task_rank: &self.task_rank,
        };
        let run = catch_unwind(AssertUnwindSafe(|| tl::enter(&mut view, || runnable.run())));
        let failure = match run {
            Err(payload) => RunError::Panicked { pe, message: panic_message(&*payload) },
            Ok(_) => match self.ended(task as usize) {
                None => return Polled::Pending,
                Some(Ok(())) => return Polled::Finished,
                Some(Err(e)) => RunError::Kernel((**e).clone()),
            },
        };
        view.lane.failure = Some(Box::new(failure));
        Polled::Failed
    }

    /// Publishes what a polled PE's lanes did to their queues and wakes the lanes waiting on them;
    /// under the timing model, lists the messages it sent in `sent`.
    fn merge(&self, rank: u32, sent: &mut Vec<Transfer>, crossing: &mut Vec<Crossing>) {
        // SAFETY: merge phase; only this thread merges `rank`, and merging reads nothing of another
        // PE's state but its lanes' wait slots below.
        let state = unsafe { self.states.get_mut(rank as usize) };
        for &(q, side) in &state.touched {
            let queue = &self.queues[q as usize];
            // SAFETY: merge phase, and this PE is the side it publishes.
            let (positions, other, waiting) = unsafe {
                match side {
                    Side::Sender => {
                        let new = queue.publish_tail();
                        if self.network.is_some() {
                            for position in new.clone() {
                                // SAFETY: positions published now were written by this PE this round,
                                // and the receiver reads nothing before the next round.
                                let (depart_ns, bytes) = queue
                                    .message_mut(position)
                                    .map_or((0.0, 0), |m| (m.depart_ns, m.tile.bytes() as u64));
                                sent.push(Transfer {
                                    depart_ns,
                                    sender: rank,
                                    queue: q,
                                    position,
                                    bytes,
                                    reply: None,
                                    put_by: None,
                                });
                            }
                        }
                        (new, (queue.receiver, Side::Receiver), Wait::Recv(q))
                    }
                    Side::Receiver => (queue.publish_head(), (queue.sender, Side::Sender), Wait::Send(q)),
                }
            };
            if positions.is_empty() {
                continue;
            }
            let (other_pe, other_side) = other;
            if self.spread.as_ref().is_some_and(|s| !s.is_local(other_pe)) {
                // The other side is in another process: handed over after the round.
                crossing.push(Crossing { queue: q, side, positions });
                continue;
            }
            self.wake_side(q, other_side, waiting);
        }
        if let (Some(one_sided), true) = (&state.one_sided, self.network.is_some()) {
            for (i, out) in one_sided.outbox.iter().enumerate() {
                let position = ONE_SIDED | i as u64;
                let (reply, put_by) = match &out.op {
                    OneSidedOp::Get { back, len, buffer, .. } => {
                        (Some((*back, (*len * buffer.dtype.size()) as u64)), None)
                    }
                    OneSidedOp::Put { .. } => (None, Some(out.task)),
                    OneSidedOp::Signal { .. } => (None, None),
                };
                let (depart_ns, queue, bytes) = (out.depart_ns, out.route, out.bytes());
                sent.push(Transfer { depart_ns, sender: rank, queue, position, bytes, reply, put_by });
            }
        }
        if state.compute.as_ref().is_some_and(|c| c.len() > FORGET_COMPUTE_ABOVE) {
            // No lane of the PE can start work before the earliest clock of those still running.
            let floor = self
                .lanes_of(rank as usize)
                .filter(|&task| self.ended(task).is_none())
                // SAFETY: merge phase: a PE's lanes are touched only by the thread merging the PE.
                .map(|task| unsafe { self.lanes.get_ref(task) }.clock.now)
                .fold(f64::INFINITY, f64::min);
            if let Some(compute) = &mut state.compute {
                compute.forget_before(floor);
            }
        }
    }

    /// Places the round's messages on their channels, earliest departure first, and stamps each with
    /// its arrival time. Sequential, in a fixed order, so times do not depend on the thread count.
    ///
    /// # Errors
    /// An exchange that failed, in a spread run.
    fn place_transfers(&mut self, transfers: &mut [Transfer]) -> Result<(), RunError> {
        let Some(network) = &mut self.network else { return Ok(()) };
        transfers.sort_unstable_by_key(|t| (total_order(t.depart_ns), t.sender, t.queue, t.position));
        for t in transfers.iter() {
            if t.position & ONE_SIDED != 0 {
                let arrive_ns = network.deliver(t.queue, t.depart_ns, t.bytes);
                // A get's reply leaves the target when the request has reached it.
                let back = t.reply.map(|(back, bytes)| network.deliver(back, arrive_ns, bytes));
                let index = t.position & !ONE_SIDED;
                let spread = self.spread.as_ref();
                let out = if spread.is_none_or(|s| s.is_local(t.sender)) {
                    Some(&mut self.states.get(t.sender as usize).one_sided().outbox[index as usize])
                } else {
                    // Another process's: here only when its target is.
                    if let Some(task) = t.put_by {
                        let landed = self.remote_landed.entry(task).or_insert(0.0);
                        *landed = landed.max(arrive_ns);
                    }
                    self.inbox.get_mut(&(t.sender, index))
                };
                if let Some(out) = out {
                    out.arrive_ns = arrive_ns;
                    if let (OneSidedOp::Get { back_ns, .. }, Some(back)) = (&mut out.op, back) {
                        *back_ns = back;
                    }
                }
                continue;
            }
            // SAFETY: between rounds, with `&mut self`: nothing else touches the queue.
            // Every process of a spread run places every transfer; the message is in this process's
            // replica of the queue when its sender or receiver is here.
            let arrive_ns = network.deliver(t.queue, t.depart_ns, t.bytes);
            let queue = self.queues.get(t.queue as usize);
            if let Some(message) = queue.and_then(|q| unsafe { q.message_mut(t.position) }) {
                message.arrive_ns = arrive_ns;
            }
        }
        if network.forget_due {
            // No message can leave before the clock of the earliest lane still running.
            let (results, spread) = (&self.results, &self.spread);
            // Lanes and their results are in the same (cell) order.
            let mut floor = (self.lanes.iter_mut().zip(results.iter()))
                .filter(|(_, ended)| ended.get().is_none())
                .map(|(s, _)| s.clock.now)
                .fold(f64::INFINITY, f64::min);
            if let Some(spread) = spread {
                // Every process's model forgets the same bookings: the earliest clock of every process.
                floor = spread.gather(&floor)?.into_iter().fold(f64::INFINITY, f64::min);
            }
            network.forget_before(floor);
        }
        Ok(())
    }

    /// Releases each barrier group whose lanes have all arrived, at the latest arrival's time (a lane's
    /// arrival waits for its puts to land); under the race detector each of its lanes acquires what
    /// all of them released.
    /// In a spread run every process releases every group, and moves on only its own lanes.
    fn release_barriers(&mut self, arrivals: Vec<Arrival>) {
        // The round's arrivals join their groups; only a group someone joined can be complete now.
        let mut joined_groups = Vec::new();
        for arrival in arrivals {
            joined_groups.push(arrival.group);
            self.at_barrier.entry(arrival.group).or_default().push(arrival);
        }
        joined_groups.sort_unstable();
        joined_groups.dedup();
        for group in joined_groups {
            let complete = self.at_barrier.get(&group).map_or(0, Vec::len) >= self.group_lanes(group);
            if !complete {
                continue;
            }
            let mut arrivals = self.at_barrier.remove(&group).unwrap_or_default();
            arrivals.sort_unstable_by_key(|a| a.task);
            let mut release = 0.0f64;
            for arrival in &arrivals {
                let landed = if self.holds(self.task_rank[arrival.task as usize]) {
                    self.lanes.get(arrival.task as usize).one_sided.as_ref().map_or(0.0, |o| o.landed_ns)
                } else {
                    self.remote_landed.get(&arrival.task).copied().unwrap_or(0.0)
                };
                release = release.max(arrival.at_ns.max(landed));
            }
            let clocks = arrivals.iter().filter_map(|a| a.clock.as_ref());
            let joined = arrivals.iter().any(|a| a.clock.is_some()).then(|| Released::join_all(clocks));
            for arrival in &arrivals {
                let task = arrival.task;
                if self.spread.as_ref().is_some_and(|s| !s.is_local(self.task_rank[task as usize])) {
                    continue;
                }
                let lane = self.lanes.get(task as usize);
                lane.clock.advance_to(SpanKind::Barrier, release, 0, false);
                if let Some(joined) = &joined {
                    lane.sync(task).acquire(joined);
                }
                let slot = self.waits.get(task as usize);
                slot.wait = Wait::Released;
                if let Some(waker) = &slot.waker {
                    waker.wake_by_ref();
                }
            }
        }
    }

    /// How many lanes a barrier `group` waits for.
    fn group_lanes(&mut self, group: u64) -> usize {
        if let Some(&n) = self.group_lanes.get(&group) {
            return n;
        }
        let n = (0..self.pes.len())
            .filter(|&rank| {
                [Group::All, Group::Sip, Group::Cube].iter().any(|&g| group_key(g, self.pes[rank]) == group)
            })
            .map(|rank| self.lanes_of(rank).len())
            .sum();
        self.group_lanes.insert(group, n);
        n
    }

    /// Applies the round's one-sided operations to their targets: rank by rank, each PE's in the order
    /// its lanes made them. Wakes the lanes waiting on what they change.
    ///
    /// # Errors
    /// A race (a put's write unordered with an access already made), or a put into a buffer declared
    /// with another shape on its target.
    fn deliver_one_sided(&mut self, polled: &[u32]) -> Result<(), RunError> {
        for &rank in polled {
            let Some(one_sided) = &mut self.states.get(rank as usize).one_sided else { continue };
            let outbox = std::mem::take(&mut one_sided.outbox);
            for out in outbox {
                self.apply(out, true)?;
            }
        }
        Ok(())
    }

    /// A spread run's delivery: applies the round's one-sided operations whose targets this process
    /// holds, in the order one process applies them (by sender rank, then as made), does what the
    /// others do to this process's lanes (a put lands, a get's reply comes back), and agrees with every
    /// process on the first that failed.
    ///
    /// # Errors
    /// As [`Execution::deliver_one_sided`], from whichever process; an exchange that failed.
    fn deliver_spread(&mut self, polled: &[u32]) -> Result<(), RunError> {
        let spread = self.spread.as_ref().expect("a spread run");
        let mut ops = std::mem::take(&mut self.inbox);
        let mut landed_elsewhere = Vec::new();
        for &rank in polled {
            let Some(one_sided) = &mut self.states.get(rank as usize).one_sided else { continue };
            for (i, out) in std::mem::take(&mut one_sided.outbox).into_iter().enumerate() {
                if spread.is_local(out.to) {
                    ops.insert((rank, i as u64), out);
                } else if matches!(out.op, OneSidedOp::Put { .. }) {
                    landed_elsewhere.push((out.task, out.arrive_ns));
                }
            }
        }
        for (task, arrive_ns) in landed_elsewhere {
            self.land(task, arrive_ns);
        }
        let (mut replies, mut failed) = (Vec::new(), None);
        for ((rank, index), out) in ops {
            let origin_here = self.holds(rank);
            match self.apply(out, origin_here) {
                Ok(Some((task, reply, back_ns))) => replies.push((rank, task, reply, back_ns)),
                Ok(None) => {}
                Err(error) => {
                    failed = Some((u64::from(rank) << 32 | index, error));
                    break;
                }
            }
        }
        let spread = self.spread.as_ref().expect("a spread run");
        for (task, reply, back_ns) in spread.hand_back(replies, failed)? {
            let pe = self.pes[self.task_rank[task as usize] as usize];
            let reply = reply.map_err(|message| KernelError::Relayed { pe, message });
            self.lanes.get(task as usize).one_sided().reply = Some((reply, back_ns));
            self.wake(task, Wait::Get);
        }
        Ok(())
    }

    /// A put of lane `task` landed at `arrive_ns`: its quiet may complete.
    fn land(&mut self, task: u32, arrive_ns: f64) {
        let putter = self.lanes.get(task as usize).one_sided();
        putter.landed_ns = putter.landed_ns.max(arrive_ns);
        self.wake(task, Wait::Quiet);
    }

    /// Applies `out` to its target; when its lane is in this process (`origin_here`), does what it
    /// does to the lane too, else returns a get's reply for the lane's process.
    fn apply(&mut self, out: Outgoing, origin_here: bool) -> Result<Option<GetReply>, RunError> {
        let (pes, first_task, task_rank, detector) = (self.pes, &self.first_task, &self.task_rank, self.detector);
        let who = |s: &Stamp| access(pes, first_task, task_rank, s);
        let to = out.to as usize;
        let state = self.states.get(to);
        let owner = state.pe;
        let target = state.one_sided();
        match out.op {
            OneSidedOp::Put { buffer, offset, tile, signal, seq, stamp } => {
                let copy = target.heap.buffer(owner, &buffer, detector)?;
                let bytes = buffer.byte_range(offset, tile.len()).unwrap_or(0..0);
                if let (Some(shadow), Some(stamp), Some(clock), false) =
                    (&mut copy.shadow, stamp, &out.clock, bytes.is_empty())
                {
                    if let Err(conflict) = shadow.write(bytes.clone(), stamp, clock) {
                        return Err(conflict_error(who, conflict, owner, buffer.name, &stamp).into());
                    }
                    self.puts.push(PutRecord { task: out.task, to: out.to, seq, stamp, buffer: buffer.name, bytes });
                }
                copy.data.write_at(offset, &tile).map_err(|source| KernelError::Tile {
                    pe: owner,
                    op: Op::Put,
                    source,
                })?;
                if let Some((signal, add)) = signal {
                    let raise = Raise { add, at_ns: out.arrive_ns, generation: out.generation, clock: out.clock };
                    target.signals.raise(signal, raise);
                    self.wake_signal(to, signal);
                }
                if origin_here {
                    self.land(out.task, out.arrive_ns);
                }
            }
            OneSidedOp::Signal { signal, add } => {
                let raise = Raise { add, at_ns: out.arrive_ns, generation: out.generation, clock: out.clock };
                target.signals.raise(signal, raise);
                self.wake_signal(to, signal);
            }
            OneSidedOp::Get { buffer, offset, len, stamp, back_ns, .. } => {
                let reply = (|| {
                    let copy = target.heap.buffer(owner, &buffer, detector)?;
                    let bytes = buffer.byte_range(offset, len).unwrap_or(0..0);
                    if let (Some(shadow), Some(stamp), Some(clock), false) =
                        (&mut copy.shadow, stamp, &out.clock, bytes.is_empty())
                    {
                        if let Err(conflict) = shadow.read(bytes, stamp, clock) {
                            return Err(conflict_error(who, conflict, owner, buffer.name, &stamp));
                        }
                    }
                    // A view: tiles copy on write, so later writes to the target's buffer leave it be.
                    copy.data.slice(offset..offset + len).map_err(|source| KernelError::Tile {
                        pe: owner,
                        op: Op::Get,
                        source,
                    })
                })();
                if !origin_here {
                    return Ok(Some((out.task, reply, back_ns)));
                }
                self.lanes.get(out.task as usize).one_sided().reply = Some((reply, back_ns));
                self.wake(out.task, Wait::Get);
            }
        }
        Ok(None)
    }

    /// Wakes `task` if it waits in `wait`.
    fn wake(&mut self, task: u32, wait: Wait) {
        let slot = self.waits.get(task as usize);
        if slot.wait == wait {
            if let Some(waker) = &slot.waker {
                waker.wake_by_ref();
            }
        }
    }

    /// Wakes the lanes of `rank` that wait on `signal`.
    fn wake_signal(&mut self, rank: usize, signal: usize) {
        for task in self.lanes_of(rank) {
            let slot = self.waits.get(task);
            if matches!(slot.wait, Wait::Signal { signal: s, .. } if s as usize == signal) {
                if let Some(waker) = &slot.waker {
                    waker.wake_by_ref();
                }
            }
        }
    }

    /// Every signal must end where a wait (or a reset) left it: a raise nobody waited for is a message
    /// nobody received.
    fn check_signals(&mut self) -> Result<(), RunError> {
        let mut left = Vec::new();
        // In a spread run, a PE's signals are in its process.
        let held: Vec<usize> = (0..self.pes.len()).filter(|&rank| self.holds(rank as u32)).collect();
        for (&rank, state) in held.iter().zip(self.states.iter_mut()) {
            let Some(one_sided) = &state.one_sided else { continue };
            for (signal, s) in one_sided.signals.slots.iter().enumerate() {
                for (generation, value, waited) in s.generations() {
                    if value > waited {
                        left.push((rank as u64, LeftRaised { pe: state.pe, signal, generation, value, waited }));
                    }
                }
            }
        }
        let left = in_run_order(&self.spread, left)?;
        if left.is_empty() { Ok(()) } else { Err(RunError::SignalsLeftRaised(left)) }
    }

    /// Under the race detector, every put must have been completed by a quiet or barrier of its lane,
    /// or seen (through a signal, message or barrier) by a lane of its target: otherwise nothing says
    /// it landed before the kernels ended.
    fn check_puts_landed(&mut self) -> Result<(), RunError> {
        let puts = std::mem::take(&mut self.puts);
        for put in &puts {
            let quieted = self.lanes.get(put.task as usize).sync_ref().is_some_and(|s| s.quieted >= put.seq);
            let seen = self.lanes_of(put.to as usize).any(|task| {
                // SAFETY: between rounds: nothing writes lane states.
                unsafe { self.lanes.get_ref(task) }.sync_ref().is_some_and(|s| s.saw(&put.stamp))
            });
            if !(quieted || seen) {
                let access = access(self.pes, &self.first_task, &self.task_rank, &put.stamp);
                return Err(RunError::PutNotLanded {
                    put: access,
                    to: self.pes[put.to as usize],
                    buffer: put.buffer,
                    bytes: put.bytes.clone(),
                });
            }
        }
        Ok(())
    }

    /// # Errors
    /// An exchange that failed, in a spread run.
    fn deadlock_report(&mut self, finished: usize) -> Result<DeadlockReport, RunError> {
        let mut blocked = Vec::new();
        for task in 0..self.lanes_total() {
            if !self.holds(self.task_rank[task]) || self.ended(task).is_some() {
                continue;
            }
            let rank = self.task_rank[task] as usize;
            let lanes = self.lanes_of(rank);
            let lane = (lanes.len() > 1).then(|| task - lanes.start);
            let pe = self.pes[rank];
            let waiting = |op, direction, peer, channel, (queued, credits, depth)| BlockedPe {
                pe,
                lane,
                channel,
                op,
                direction,
                peer,
                queued,
                credits,
                depth,
                signal: None,
            };
            let entry = match self.waits.get(task).wait {
                Wait::Send(q) => {
                    let queue = &mut self.queues[q as usize];
                    let peer = self.pes[queue.receiver as usize];
                    let state = (queue.in_flight(), queue.credits(), queue.depth());
                    waiting(Op::Send, Some(queue.send_dir), Some(peer), queue.channel as usize, state)
                }
                Wait::Recv(q) => {
                    let queue = &mut self.queues[q as usize];
                    let peer = self.pes[queue.sender as usize];
                    let state = (queue.visible(), queue.credits(), queue.depth());
                    waiting(Op::Recv, Some(queue.recv_dir), Some(peer), queue.channel as usize, state)
                }
                Wait::Barrier | Wait::Released => waiting(Op::Barrier, None, None, 0, (0, 0, 0)),
                Wait::Signal { signal, until } => {
                    let generation = self.lanes.get(task).generation;
                    let state = self.states.get(rank).one_sided().signals.get(signal as usize);
                    let (holds, other_generations) = (state.value(generation), state.other_generations(generation));
                    let mut entry = waiting(Op::WaitSignal, None, None, 0, (0, 0, 0));
                    entry.signal = Some(SignalWait { signal: signal as usize, until, holds, other_generations });
                    entry
                }
                Wait::Get => waiting(Op::Get, None, None, 0, (0, 0, 0)),
                Wait::Quiet => waiting(Op::Quiet, None, None, 0, (0, 0, 0)),
                Wait::None => waiting(Op::External, None, None, 0, (0, 0, 0)),
            };
            blocked.push((task as u64, entry));
        }
        let (pes, spread) = (self.pes, &self.spread);
        let unreceived = self
            .queues
            .iter_mut()
            .filter(|(_, q)| spread.as_ref().is_none_or(|s| s.is_local(q.receiver)))
            .flat_map(|(i, q)| {
                let (receiver, direction, sender) = (pes[q.receiver as usize], q.recv_dir, pes[q.sender as usize]);
                let channel = q.channel as usize;
                q.unreceived().into_iter().map(move |(dtype, len, generation)| {
                    (i as u64, Unreceived { receiver, direction, channel, sender, dtype, len, generation })
                })
            })
            .collect();
        let (blocked, unreceived) = (in_run_order(spread, blocked)?, in_run_order(spread, unreceived)?);
        Ok(DeadlockReport { blocked, finished, total: self.lanes_total(), unreceived })
    }

    fn check_queues_empty(&mut self) -> Result<(), RunError> {
        let (pes, spread) = (self.pes, &self.spread);
        let left: Vec<(u64, Leftover)> = self
            .queues
            .iter_mut()
            // In a spread run, the receiver's process counts a queue's messages.
            .filter(|(_, q)| spread.as_ref().is_none_or(|s| s.is_local(q.receiver)))
            .filter_map(|(i, q)| {
                let messages = q.in_flight();
                (messages > 0).then(|| {
                    (
                        i as u64,
                        Leftover {
                            receiver: pes[q.receiver as usize],
                            direction: q.recv_dir,
                            channel: q.channel as usize,
                            sender: pes[q.sender as usize],
                            messages,
                        },
                    )
                })
            })
            .collect();
        let left = in_run_order(spread, left)?;
        if left.is_empty() { Ok(()) } else { Err(RunError::LeftoverMessages(left)) }
    }

    /// The run's report.
    ///
    /// # Errors
    /// [`RunError::NonFiniteTime`] when a lane's clock is not a finite number: such a time must never be
    /// printed or written as a result.
    fn report(&mut self, rounds: u64) -> Result<RunReport, RunError> {
        let (pes, first_task, spread) = (self.pes, &self.first_task, &self.spread);
        // The PEs this process holds (all of them unless the run is spread), and their lanes' cells.
        let held: Vec<usize> = (0..pes.len()).filter(|&rank| self.holds(rank as u32)).collect();
        let cells: Vec<std::ops::Range<usize>> = held
            .iter()
            .map(|&rank| {
                let first = self.lanes.cell(first_task[rank] as usize);
                first..first + (first_task[rank + 1] - first_task[rank]) as usize
            })
            .collect();
        let mut lanes: Vec<&mut LaneState> = self.lanes.iter_mut().collect();
        if self.network.is_some() {
            // A lane waiting on one whose time is not finite inherits it: name the PE where it arose
            // (its own work or start delay) before any that only waited.
            let first = |check: fn(&Clock) -> Option<(&'static str, f64)>| {
                held.iter().zip(&cells).find_map(|(&rank, cells)| {
                    cells.clone().enumerate().find_map(|(lane, cell)| {
                        let task = u64::from(first_task[rank]) + lane as u64;
                        check(&lanes[cell].clock).map(|(what, value)| (task, pes[rank], what, value))
                    })
                })
            };
            let tasks = u64::from(first_task[pes.len()]);
            let waited = |(task, pe, what, value)| (task + tasks, pe, what, value);
            let found = first(Clock::own_non_finite).or_else(|| first(Clock::non_finite).map(waited));
            let error = found
                .map(|(key, pe, what, value)| (key, RunError::NonFiniteTime { pe, what, value: value.to_string() }));
            match spread {
                Some(spread) => spread.agree(error)?,
                None => {
                    if let Some((_, error)) = error {
                        return Err(error);
                    }
                }
            }
        }
        let mut completion = lanes.iter().map(|l| l.clock.now).fold(0.0, f64::max);
        if let (Some(spread), true) = (spread, self.network.is_some()) {
            completion = spread.gather(&completion)?.into_iter().fold(0.0, f64::max);
        }
        let mut times: Vec<Option<PeTime>> = cells
            .iter()
            .map(|cells| {
                self.network.as_ref()?;
                Some(match &mut lanes[cells.clone()] {
                    [one] => one.clock.report(completion),
                    several => PeTime::of_lanes(several.iter_mut().map(|l| l.clock.report(completion)).collect()),
                })
            })
            .collect();
        let mut per_pe: Vec<PeReport> = (cells.iter().zip(self.states.iter_mut()))
            .map(|(cells, s)| {
                let (figures, lanes) = match &lanes[cells.clone()] {
                    [one] => (one.figures, Vec::new()),
                    several => {
                        let lanes: Vec<PeFigures> = several.iter().map(|l| l.figures).collect();
                        let mut sum = PeFigures::default();
                        lanes.iter().for_each(|f| sum += f);
                        (sum, lanes)
                    }
                };
                PeReport { pe: s.pe, output: s.output.clone(), figures, lanes, notes: std::mem::take(&mut s.notes) }
            })
            .collect();
        drop(lanes);
        let channels = self.network.as_mut().map(|network| network.report(completion));
        if spread.is_some() {
            // Each process's PEs, to every process.
            let mine: Vec<(u64, PeShare)> = (held.iter().zip(per_pe.iter_mut().zip(&mut times)))
                .map(|(&rank, (pe, time))| (rank as u64, PeShare::of(pe, time.take())))
                .collect();
            drop((per_pe, times));
            // The run's queues, network model and states are no longer needed: their memory can hold
            // the other processes' PEs.
            self.queues = Queues::all(Vec::new());
            self.network = None;
            (self.states, self.lanes, self.waits) =
                (Slots::new(Vec::new()), Slots::new(Vec::new()), Slots::new(Vec::new()));
            let mut all: Vec<Option<(PeReport, Option<PeTime>)>> = Vec::new();
            all.resize_with(pes.len(), || None);
            let spread = spread.as_ref().expect("a spread run");
            spread.gather_each(&mine, |from, theirs: Vec<(u64, PeShare)>| {
                for (rank, share) in theirs {
                    let rank = rank as usize;
                    let (Some(slot), Some(&pe)) = (all.get_mut(rank), pes.get(rank)) else {
                        return Err(ExchangeError::Malformed { from, what: "a PE's rank" }.into());
                    };
                    *slot = Some(share.into_report(pe, from)?);
                }
                Ok(())
            })?;
            drop(mine);
            let missing =
                |rank| ExchangeError::Malformed { from: spread.owner(rank), what: "a report without its PEs" };
            let all: Vec<_> = (all.into_iter().enumerate())
                .map(|(rank, pe)| pe.ok_or_else(|| missing(rank as u32)))
                .collect::<Result<_, _>>()?;
            (per_pe, times) = all.into_iter().unzip();
        }
        let time = channels.map(|channels| TimeReport {
            completion_ns: completion,
            pes: times.into_iter().map(Option::unwrap_or_default).collect(),
            channels,
        });
        Ok(RunReport::new(per_pe, rounds, time))
    }
}

/// `items`, each keyed by its place in the whole run (a task, a queue), in that order; in a spread run,
/// every process's.
fn in_run_order<T: serde::Serialize + serde::de::DeserializeOwned>(
    spread: &Option<Spread<'_>>,
    mut items: Vec<(u64, T)>,
) -> Result<Vec<T>, RunError> {
    if let Some(spread) = spread {
        items = spread.gather(&items)?.into_iter().flatten().collect();
        items.sort_by_key(|(key, _)| *key);
    }
    Ok(items.into_iter().map(|(_, item)| item).collect())
}

/// The flag that marks a transfer's position as an index into its sender's outbox.
const ONE_SIDED: u64 = 1 << 63;

/// A PE's compute with more bookings than this forgets the ones its lanes are past.
const FORGET_COMPUTE_ABOVE: usize = 64;

/// Installs, once per process, a panic hook that stays silent for panics raised while a kernel is
/// polled (their message is in the run's error; [`tl::polling_kernel`] tells them apart) and hands
/// every other panic, a runtime's own included, to the hook installed before it.
///
/// Once per process rather than for the duration of each run: the hook is process-wide while runs
/// (tests, sweeps) go on in parallel threads, so a run that put back the previous hook at its end could
/// silence another run's kernels or drop a hook installed in the meantime. Chaining to the previous hook
/// keeps every other panic as it was.
fn quiet_kernel_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !tl::polling_kernel() {
                previous(info);
            }
        }));
    });
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".to_owned())
}

/// What [`install_queues`] builds.
struct Installed {
    /// The queues of the edges it keeps.
    queues: Queues,
    /// Every queue's sender and receiver rank, by number.
    routes: Vec<(u32, u32)>,
    /// Each PE's ports.
    ports: Vec<Vec<Port>>,
}

/// Builds `channels` queues of `depth` slots per directed neighbour edge and the ports of each PE, for a
/// plan that passed [`check_plan`]: of the PEs whose ranks `holds` (a spread run holds its process's),
/// and of the queues with a side in one of them. The queues a PE sends into on direction `d` are those
/// its peer receives from on the direction that pairs with `d` and names the PE back (the check makes it
/// unique); an edge's channels are consecutive queues.
fn install_queues(
    system: &System,
    plan: &InstallPlan,
    (depth, channels): (usize, usize),
    holds: impl Fn(usize) -> bool,
) -> Installed {
    let installs: Vec<_> = plan.participants().collect();
    let by_peer = PlanLinks::new(system, installs.iter().copied());
    let mut ports: Vec<Vec<Port>> = (installs.iter().enumerate())
        .map(|(rank, i)| {
            let neighbors = i.neighbors.iter().filter(|_| holds(rank));
            neighbors
                .map(|n| Port { key: n.direction.key(), direction: n.direction, out_queue: 0, in_queue: 0 })
                .collect()
        })
        .collect();
    let edges = installs.iter().map(|i| i.neighbors.len()).sum::<usize>() * channels;
    let (mut queues, mut routes, mut numbers) = (Vec::new(), Vec::with_capacity(edges), Vec::new());
    for (rank, install) in installs.iter().enumerate() {
        for (i, entry) in install.neighbors.iter().enumerate() {
            let Some(peer) = by_peer.rank(entry.peer) else { continue };
            let back = by_peer.to(peer, install.pe).find(|&(d, _)| entry.direction.pairs_with(d));
            let Some((recv_dir, back)) = back else { continue };
            let first = routes.len() as u32;
            let ends = (rank as u32, peer as u32);
            let keep = holds(rank) || holds(peer);
            for channel in 0..channels as u32 {
                if keep {
                    numbers.push(routes.len() as u32);
                    queues.push(Queue::new(ends, (entry.direction, recv_dir), channel, depth));
                }
                routes.push(ends);
            }
            // Only the ports of PEs held were made.
            if let Some(port) = ports[rank].get_mut(i) {
                port.out_queue = first;
            }
            if let Some(port) = ports[peer].get_mut(back) {
                port.in_queue = first;
            }
        }
    }
    for list in &mut ports {
        list.sort_unstable_by_key(|p| p.key);
    }
    let queues = if numbers.len() == routes.len() { Queues::all(queues) } else { Queues::some(queues, numbers) };
    Installed { queues, routes, ports }
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

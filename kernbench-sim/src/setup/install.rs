//! An installed run: every part made from a checked plan and the buffers, the kernels started, the
//! rounds driven, and the end diagnosed and reported.

use std::borrow::Cow;
use std::sync::Arc;

use kernbench_core::tl::{CallContext, message_generation};
use kernbench_core::{CheckedPlan, Dtype, KernelError, KernelFuture, Launch, Op, PeId, System, Tile, Tl};
use rayon::prelude::*;

use super::{Call, PeBuffers, RunOptions, Runtime, Together};
use crate::error::RunError;
use crate::lanes::{Budget, LaneState, Lanes, Parked, PeCore, PeRare, ReadyLists, Tasks, WakeHints};
use crate::network::Network;
use crate::one_sided::{OneSidedRun, PeOneSided, Windows};
use crate::protocol::{Cells, Lines};
use crate::race::{LaneSync, MessageOrders};
use crate::report::RunReport;
use crate::rounds::{Execution, Polling, quiet_kernel_panics};
use crate::spread::Spread;
use crate::timing::{Bookings, Clock, Engines, Rates};
use crate::two_sided::{Barriers, Installed, TwoSided, install};

/// A call's kernel and facts.
type Kernel<'k> = (&'k dyn Launch, Call);

/// Runs each call's kernel on the participants `pes` of a checked `plan` with its buffers (rank
/// order), the calls together (one report each); `windows` only with one call.
pub(super) fn run(
    system: &System,
    options: &RunOptions,
    (plan, pes): (Cow<'_, CheckedPlan>, &[PeId]),
    calls: Vec<Together<'_>>,
    mut windows: Option<&mut Windows>,
) -> Result<Vec<RunReport>, RunError> {
    let together = calls.len() > 1;
    let spread = match &options.spread {
        Some(exchange) => Spread::new(&**exchange, system, pes, (options.report_to, options.release_memory))?,
        None => None,
    };
    let (spread, owners) = spread.map_or((None, None), |(spread, owners)| {
        let me = spread.me();
        (Some(spread), Some((owners, me)))
    });
    // What making the plan and the buffers freed is handed back before the set-up's lists come.
    if let Some(spread) = &spread {
        spread.release_memory();
    }
    let most = options.max_lanes.unwrap_or(usize::MAX);
    let lanes_of = |kernel: &dyn Launch| (0..pes.len()).map(|rank| kernel.lanes(rank, pes.len()).min(most)).collect();
    let call_lanes: Vec<Vec<usize>> = calls.iter().map(|c| lanes_of(c.kernel)).collect();
    let lanes: Vec<usize> = (0..pes.len()).map(|rank| call_lanes.iter().map(|c| c[rank]).sum()).collect();
    // Each call's lanes on each rank, then their sums: the `at`-th is rank `at mod ranks`'s.
    let mut each = call_lanes.iter().flatten().chain(&lanes).enumerate();
    if let Some((at, &bad)) = each.find(|(_, n)| !(1..=Runtime::MAX_LANES).contains(*n)) {
        return Err(RunError::BadLanes { pe: pes[at % pes.len()], lanes: bad, max: Runtime::MAX_LANES });
    }
    check_lane_total(lanes.iter().copied())?;
    let tasks = if together { Tasks::together(pes, &call_lanes) } else { Tasks::new(pes, &lanes, owners) };
    // Before any PE's task exists, so a pool that cannot be built leaves nothing to clean up.
    let pool = if options.threads > 1 {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(options.threads).build();
        Some(pool.map_err(|e| RunError::Threads { threads: options.threads, reason: e.to_string() })?)
    } else {
        None
    };
    quiet_kernel_panics();
    let holds = |rank: usize| tasks.holds(rank as u32);
    let owner = |rank: u32| tasks.owner(rank) as u32;
    let generations: Vec<u64> = calls.iter().map(|c| c.call.generation).collect();
    let starts: Vec<f64> = calls.iter().map(|c| c.start_ns).collect();
    // A spread run's buffers of the other processes' PEs stand in for them: only this process's block
    // of ranks is kept (a million PEs' list is 48 MiB, in every process, beside the install).
    let held_ranks = tasks.held();
    let (kernels, calls_buffers): (Vec<Kernel<'_>>, Vec<Vec<PeBuffers>>) = (calls.into_iter())
        .map(|c| {
            let mut buffers = c.buffers;
            if held_ranks.len() < buffers.len() {
                buffers.truncate(held_ranks.end);
                buffers.drain(..held_ranks.start);
                buffers.shrink_to_fit();
            }
            ((c.kernel, c.call), buffers)
        })
        .unzip();
    let call = kernels[0].1;
    let (by_rank, by_task) = tasks.first_held();
    let carriage = options.carriage(system)?;
    // The queues and ports, then the network model of their routes; the plan goes in, to be freed
    // once they are made.
    let (channels, spread_ref, carriage_ref) = ((system.ipcq_depth(), tasks.channels() as usize), &spread, &carriage);
    let make_links = move || {
        let Installed { queues, routes, links } = install(system, &plan, channels, holds);
        // Nothing reads the plan from here on: one the run owns is freed before the rounds.
        drop(plan);
        // The install's lists, and the plan when it was the run's, were whole in every process of a
        // spread run: given back before the network model (whole too, unless placed divided) takes
        // fresh memory.
        if let Some(spread) = spread_ref {
            spread.release_memory();
        }
        let network = options.timing.as_ref().map(|timing| {
            // Each process keeps the figures of its own channels; the last also those of channels a
            // detour adds.
            let last = spread_ref.as_ref().is_none_or(|spread| spread.me() as usize + 1 == spread.processes());
            // Divided or not, the same in every process: by the options and the whole run's queues.
            let divided =
                spread_ref.is_some() && options.placement.divides(routes.len(), options.undividable(system).is_some());
            let me = spread_ref.as_ref().map_or(0, |spread| spread.me());
            let held = (owner, me, last, divided);
            Network::new(system, timing, carriage_ref, pes, routes.iter().copied(), held)
        });
        (queues, links, network)
    };
    let make_lanes = || {
        // One empty scratch buffer for every later call of a PE until a kernel asks for one of its
        // own (the first call's is made when used: `PeCore::scratch`).
        let no_scratch = Tile::zeros(Dtype::F32, 0);
        let timed = options.timing.is_some();
        let engines = system.pe_spec().engines;
        // A timing-only run keeps the buffers' shapes, not their bytes.
        let kept = |tile: Tile| if options.timing_only { Tile::without_data(tile.dtype(), tile.len()) } else { tile };
        let mut buffers: Vec<std::vec::IntoIter<PeBuffers>> = calls_buffers.into_iter().map(Vec::into_iter).collect();
        let mut cores = Vec::with_capacity(held_ranks.len());
        let timing = options.timing.as_ref();
        for (&pe, &n) in pes.iter().zip(&lanes).take(held_ranks.end).skip(held_ranks.start) {
            let mut each = buffers.iter_mut().map(|b| b.next().expect("a buffer per held rank and call"));
            let first = each.next().expect("a call");
            let rare = PeRare {
                notes: Default::default(),
                compute: (n > engines && timed).then(|| Engines::new(engines)),
                port: (carriage.pe_ns_per_byte > 0.0 && timed).then(|| (carriage.pe_ns_per_byte, Bookings::default())),
                rates: timing
                    .filter(|timing| timing.stragglers.contains_key(&pe))
                    .map(|_| Rates::of(system, timing, &carriage, Some(pe))),
                later_calls: each.map(|b| [kept(b.input), kept(b.output), no_scratch.clone()]).collect(),
                scratch: None,
            };
            let needed =
                rare.compute.is_some() || rare.port.is_some() || rare.rates.is_some() || !rare.later_calls.is_empty();
            cores.push(PeCore {
                input: kept(first.input),
                output: kept(first.output),
                rare: needed.then(|| Box::new(rare)),
            });
        }
        // Sized up front: a flattened iterator does not know its length, and growing by doubling
        // copies a million lanes' states again and again.
        let held: usize = (0..pes.len()).filter(|&rank| holds(rank)).map(|rank| lanes[rank]).sum();
        let mut states = Vec::with_capacity(held);
        let tasks = &tasks;
        states.extend(
            (pes.iter().zip(&lanes).enumerate())
                .filter(|&(rank, _)| holds(rank))
                .flat_map(|(rank, (&pe, &n))| (0..n as u32).map(move |lane| (rank as u32, pe, lane)))
                .map(|(rank, pe, lane)| {
                    let (call, ..) = tasks.call_of(rank, lane);
                    let mut clock = Clock::new(system, options.timing.as_ref(), &carriage, pe, options.gpus_per_thread);
                    clock.start_later(starts[call]);
                    let generation = message_generation(generations[call], 1);
                    LaneState::new(lane, call as u32, generation, clock, options.loop_budget)
                }),
        );
        (cores, states)
    };
    // The queues with the network model, and the PEs' states, are made side by side when there is
    // a pool (the install, a walk of every edge in order, has nothing to share with the states).
    let ((mut queues, links, network), (cores, states)) = match &pool {
        Some(pool) => pool.install(|| rayon::join(make_links, make_lanes)),
        None => (make_links(), make_lanes()),
    };
    // What only the set-up reads is not held through the rounds (a million PEs' lane counts).
    drop((lanes, call_lanes));
    let held = states.len();
    // A race's two sides may be in two processes: a spread run does not look for races.
    let detector = options.race_detector && spread.is_none();
    let mut memories = Vec::new();
    for rank in (0..pes.len()).filter(|&rank| holds(rank)) {
        let memory = match windows.as_deref_mut().filter(|w| !w.registered().is_empty()) {
            Some(windows) => {
                let heap = windows.heap_of(rank, pes.len(), detector).map_err(|source| {
                    RunError::Kernel(KernelError::OutOfMemory { pe: pes[rank], op: Op::Window, source })
                })?;
                Some(Box::new(PeOneSided { heap, ..PeOneSided::default() }))
            }
            None => None,
        };
        memories.push(memory);
    }
    let mut network = network;
    if let Some(latency) = network.as_mut().map(Network::take_route_latency) {
        for (q, queue) in queues.iter_mut() {
            queue.credit_latency_ns = latency[q];
        }
    }
    let two_sided = TwoSided {
        queues,
        pes: Cells::held(links, by_rank),
        orders: MessageOrders::default(),
        detector,
        barriers: Barriers::default(),
    };
    let one_sided = OneSidedRun::new(
        Cells::held(memories, by_rank),
        detector,
        system.clone(),
        (call.generation, options.schedule, options.schedule_jitter_ns),
    );
    let mut lanes = Lanes {
        pes: Cells::held(cores, by_rank),
        states: Cells::held(states, by_task),
        parked: Cells::held((0..held).map(|_| Parked::new()).collect(), by_task),
        wake_hints: WakeHints::new(by_task..by_task + held),
        tasks,
        budget: Budget { loops: options.loop_budget, steps: options.step_budget },
        rates: Rates::of(system, options.timing.as_ref(), &carriage, None),
        ready: Arc::new(ReadyLists::new(options.threads)),
    };
    if let (Some(windows), true) = (windows.as_deref(), detector) {
        // A kernel starts after the previous one on its PE ended: its lanes know what those knew.
        for task in 0..lanes.tasks.len() as u32 {
            let rank = lanes.tasks.rank(task);
            if let (true, Some(knew)) = (lanes.tasks.holds(rank), windows.carried(rank as usize)) {
                let sync = LaneSync::inheriting(task, Arc::new(knew.clone()));
                lanes.states.get(task as usize).set_sync(sync);
            }
        }
    }
    let (frames, coroutines) = start(&lanes, (&kernels, system, options), pool.as_ref());
    let kernels = (generations, Cells::held(coroutines, by_task), frames);
    let parts = (two_sided, one_sided);
    let mut exec = Execution::new(lanes, kernels, parts, (network, spread), options.timing_only);
    let polling = Polling { pool: pool.as_ref(), parallel_min_ready: options.parallel_min_ready };
    let driven = exec.drive(polling);
    if let Some(windows) = windows {
        windows.keep(&mut exec.one_sided.pes, &mut exec.lanes, call.generation);
    }
    let driven = driven?;
    if driven.finished < exec.lanes.tasks.len() {
        return Err(RunError::Deadlock(exec.deadlock_report(driven.finished)?));
    }
    exec.check_leftovers()?;
    let report = exec.report(driven.rounds, pool.as_ref())?;
    Ok(if together { exec.split_by_call(report) } else { vec![report] })
}

/// Starts the kernel of every task this process holds, all woken at once for the first round: its
/// coroutine and where it lies, in task order. Each coroutine is made (and its memory first touched)
/// on the pool's threads when there is one.
fn start(
    lanes: &Lanes<'_>,
    (kernels, system, options): (&[Kernel<'_>], &System, &RunOptions),
    pool: Option<&rayon::ThreadPool>,
) -> (Vec<Lines>, Vec<Option<KernelFuture>>) {
    let tasks = &lanes.tasks;
    let extents = [system.sips(), system.cubes_per_sip(), system.pes_per_cube()];
    // What every PE of a call shares, a copy for each block of `SHARED_BY` tasks.
    let blocks = tasks.len().div_ceil(SHARED_BY);
    let calls: Vec<Vec<Arc<CallContext>>> = (kernels.iter())
        .map(|(_, call)| {
            let context = CallContext {
                extents,
                size: tasks.pes().len(),
                op: call.op,
                root: call.root,
                counts: options.counts.clone(),
                generation: call.generation,
                queue_depth: system.ipcq_depth(),
            };
            (0..blocks).map(|_| Arc::new(context.clone())).collect()
        })
        .collect();
    let start = |task: usize| {
        let rank = tasks.rank(task as u32);
        let (k, lane, lanes_of_call) = tasks.call_of(rank, tasks.lane(task as u32));
        let call = &calls[k][task / SHARED_BY];
        let tl = Tl::of_call(call, tasks.pe(rank), rank as usize, (lane as usize, lanes_of_call as usize));
        let coroutine = kernels[k].0.launch(tl);
        (Lines::of(std::ptr::from_ref(&*coroutine).cast(), size_of_val(&*coroutine)), Some(coroutine))
    };
    // A spread run starts only this process's PEs.
    let here = |task: &usize| tasks.holds(tasks.rank(*task as u32));
    lanes.ready.wake_all((0..tasks.len()).filter(here).map(|task| task as u32));
    match pool {
        Some(pool) => {
            pool.install(|| (0..tasks.len()).into_par_iter().with_min_len(1024).filter(here).map(start).unzip())
        }
        None => (0..tasks.len()).filter(here).map(start).unzip(),
    }
}

/// The tasks that share one copy of their call's context: a copy for every block of consecutive
/// tasks, so that threads starting and ending different blocks' kernels do not take turns on one
/// count of references (with one copy, every PE's start and end wrote the same cache line from
/// every thread, and a million PEs' starts took longer on two threads than on one).
const SHARED_BY: usize = 1024;

/// Refuses a run whose lanes, every PE's added up, a `u32` cannot number (as it numbers the PEs:
/// System::MAX_PES PEs of Runtime::MAX_LANES lanes each would pass it).
///
/// # Errors
/// [`RunError::TooManyLanes`].
fn check_lane_total(lanes: impl Iterator<Item = usize>) -> Result<(), RunError> {
    let total: u64 = lanes.map(|n| n as u64).sum();
    if total > u64::from(u32::MAX) {
        return Err(RunError::TooManyLanes { lanes: total, max: u64::from(u32::MAX) });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_more_lanes_than_a_u32_numbers_is_refused() {
        let most_pes = kernbench_core::System::MAX_PES;
        assert_eq!(check_lane_total(std::iter::repeat_n(255, most_pes)), Ok(()));
        let err = check_lane_total(std::iter::repeat_n(Runtime::MAX_LANES, most_pes)).unwrap_err();
        assert_eq!(err, RunError::TooManyLanes { lanes: 1 << 32, max: u64::from(u32::MAX) });
        assert!(err.to_string().contains("add up to 4294967296: expected at most 4294967295"), "{err}");
    }
}

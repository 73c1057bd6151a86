//! Rounds: the executor that runs every lane's coroutine of an installed run, round by round, to
//! completion or to the first failure. Uses lanes, both kinds of traffic, the spread and the timing
//! model; the round protocol says what each phase may touch.
//!
//! Each round: every lane woken in the previous round is polled once ([`poll`]); every polled PE
//! publishes what it did and wakes the lanes waiting on it ([`merge`]); in a spread run the processes
//! hand over what crossed between them; the round's transfers are placed on their channels; one-sided
//! operations are applied to their targets; barriers whose lanes have all arrived open. A round in
//! which nobody was woken while lanes remain means the run is stuck: the caller diagnoses it.

mod ahead;
mod merge;
mod poll;
mod ready;
mod view;

pub(crate) use poll::quiet_kernel_panics;

use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use kernbench_core::KernelFuture;
use rayon::prelude::*;

use crate::error::RunError;
use crate::lanes::Lanes;
use crate::network::Network;
use crate::one_sided::OneSidedRun;
use crate::protocol::{Cells, Lines};
use crate::spread::{RoundEnd, Spread};
use crate::timing::Transfer;
use crate::two_sided::{Arrival, Crossing, TwoSided};
use ahead::Ahead;
use merge::PlaceOrder;
pub(crate) use merge::order_key;
use poll::Outcome;
use ready::in_task_order;

/// What merges of a round list: the transfers their PEs started (under the timing model), their
/// queue sides towards other processes, and the lanes they woke. Each block of ranks merged in
/// parallel its own, joined after the merge: a wake is a push, not a lock (a streaming run wakes a
/// lane a round a queue).
#[derive(Default)]
pub(crate) struct Merged {
    pub(crate) sent: Vec<Transfer>,
    pub(crate) crossing: Vec<Crossing>,
    pub(crate) woken: Vec<u32>,
}

impl Merged {
    /// Takes `other`'s lists after its own.
    pub(crate) fn append(&mut self, other: &mut Merged) {
        self.sent.append(&mut other.sent);
        self.crossing.append(&mut other.crossing);
        self.woken.append(&mut other.woken);
    }
}

/// An installed run: its lanes and each kind of traffic's part, as set-up made them.
pub(crate) struct Execution<'p> {
    pub(crate) lanes: Lanes<'p>,
    /// Each call's generation (one unless calls run together), from which each phase's message
    /// generation follows.
    pub(crate) generations: Vec<u64>,
    /// Per task this process holds, its kernel's coroutine until it ends (or fails).
    pub(crate) kernels: Cells<Option<KernelFuture>>,
    pub(crate) two_sided: TwoSided,
    pub(crate) one_sided: OneSidedRun,
    /// The channels and routes, when time is simulated. Boxed: a round's placement takes it out of
    /// the run and puts it back, a pointer rather than the whole model (half a KiB) each way.
    pub(crate) network: Option<Box<Network>>,
    /// The processes of a spread run, when there are several.
    pub(crate) spread: Option<Spread<'p>>,
    /// Whether its tiles carry no data (a timing-only run): the tiles its kernels and its heaps make too.
    pub(crate) without_data: bool,
    /// The lowest task that failed in the current round (`u32::MAX`: none).
    lowest_failure: AtomicU32,
    /// In a run of calls together, per call and channel the fair-queueing tag of the call's last
    /// transfer there ([`Execution::fair_order`]).
    fair_tags: rustc_hash::FxHashMap<(u32, u32), f64>,
    /// Per task this process holds, in its lane's cell order, where its coroutine lives.
    pub(crate) frames: Vec<Lines>,
}

/// How the rounds ended: every lane finished or stuck.
pub(crate) struct Driven {
    /// Rounds run.
    pub(crate) rounds: u64,
    /// Lanes that finished, in every process.
    pub(crate) finished: usize,
}

/// How to poll a round: on a pool of threads when at least `parallel_min_ready` lanes are woken.
#[derive(Clone, Copy)]
pub(crate) struct Polling<'t> {
    pub(crate) pool: Option<&'t rayon::ThreadPool>,
    pub(crate) parallel_min_ready: usize,
}

impl<'p> Execution<'p> {
    pub(crate) fn new(
        lanes: Lanes<'p>,
        (generations, kernels, frames): (Vec<u64>, Cells<Option<KernelFuture>>, Vec<Lines>),
        (two_sided, one_sided): (TwoSided, OneSidedRun),
        (network, spread): (Option<Network>, Option<Spread<'p>>),
        without_data: bool,
    ) -> Execution<'p> {
        let lowest_failure = AtomicU32::new(u32::MAX);
        let fair_tags = Default::default();
        Execution {
            lanes,
            generations,
            kernels,
            two_sided,
            one_sided,
            network: network.map(Box::new),
            spread,
            without_data,
            lowest_failure,
            fair_tags,
            frames,
        }
    }

    /// Runs rounds until no lane is woken (in any process).
    ///
    /// # Errors
    /// The lowest failure of the first round with one; an exchange, a placement or an application of
    /// one-sided operations that failed.
    pub(crate) fn drive(&mut self, polling: Polling<'_>) -> Result<Driven, RunError> {
        // Between rounds too: the heaps that one-sided operations make on their targets.
        kernbench_core::tile::without_data_while(self.without_data, || self.rounds(polling))
    }

    fn rounds(&mut self, polling: Polling<'_>) -> Result<Driven, RunError> {
        let Polling { pool, parallel_min_ready } = polling;
        let ready = Arc::clone(&self.lanes.ready);
        // The round's woken tasks.
        let mut round: Vec<u32> = Vec::new();
        let mut by_task: Vec<bool> = Vec::new();
        let mut polled: Vec<u32> = Vec::new();
        let mut ahead: Vec<Ahead> = Vec::new();
        let mut merged = Merged::default();
        let mut merge_parts = Vec::new();
        let mut placement = PlaceOrder::default();
        let (mut finished, mut rounds) = (0usize, 0u64);
        // Rounds split into jobs of at least this many PEs: fewer are not worth a thread, but a test
        // that asks for parallel rounds of a few PEs gets them.
        let min_job = parallel_min_ready.clamp(1, 64);
        let one_lane_each = self.lanes.tasks.one_lane_each();
        let asks_ahead = self.asks_ahead();
        loop {
            ready.drain_into(&mut round);
            round.append(&mut merged.woken);
            in_task_order(&mut round, &mut by_task);
            // A task that ended (or failed) is not polled again, however it was woken; in task
            // order, the coroutines' list is read front to back.
            // SAFETY: rule B: between rounds nothing polls a kernel.
            round.retain(|&task| unsafe { self.kernels.get_ref(task as usize) }.is_some());
            // A process of a spread run with nothing to poll still takes part in the round's hand-over:
            // the run ends when no process polled anything.
            if round.is_empty() && self.spread.is_none() {
                break;
            }
            let woken = round.len() as u64;
            ahead.clear();
            if asks_ahead {
                let this = &*self;
                // SAFETY: rule B: between rounds nothing writes a wait.
                let of = |&task: &u32| unsafe { this.ahead(task) };
                match pool.filter(|_| round.len() >= parallel_min_ready) {
                    Some(pool) => pool.install(|| ahead.par_extend(round.par_iter().map(of))),
                    None => ahead.extend(round.iter().map(of)),
                }
            }
            let tasks = &self.lanes.tasks;
            let rank_of = |&task: &u32| tasks.rank(task);
            polled.clear();
            if one_lane_each {
                // A task is its PE's rank.
                polled.extend_from_slice(&round);
            } else {
                for rank in round.iter().map(rank_of) {
                    if polled.last() != Some(&rank) {
                        polled.push(rank);
                    }
                }
            }
            let this = &*self;
            let same_pe = |a: &u32, b: &u32| rank_of(a) == rank_of(b);
            let parallel = pool.filter(|_| round.len() >= parallel_min_ready);
            // Polls a PE's woken lanes, having asked for what the polls a few tasks on will read (in a
            // large run) and for what those tasks' kernels named to be asked for when they wake.
            let start = round.as_ptr() as usize;
            let hints = this.lanes.wake_hints.named();
            let poll = |pe: &[u32]| {
                if !ahead.is_empty() || hints.is_some() {
                    let at = (pe.as_ptr() as usize - start) / size_of::<u32>() + Ahead::DISTANCE;
                    ahead.get(at..at + pe.len()).into_iter().flatten().for_each(|a| this.ask(a));
                    if let Some(hints) = &hints {
                        round.get(at..at + pe.len()).into_iter().flatten().for_each(|&task| hints.ask(task));
                    }
                }
                this.poll_pe(pe)
            };
            // A PE's woken lanes are polled together; when every PE runs one lane, a PE is a task.
            let outcome = match (parallel, one_lane_each) {
                (Some(pool), true) => pool.install(|| {
                    round
                        .par_iter()
                        .with_min_len(min_job)
                        .map(|task| poll(std::slice::from_ref(task)))
                        .reduce(Outcome::default, Outcome::merge)
                }),
                (Some(pool), false) => {
                    pool.install(|| round.par_chunk_by(same_pe).map(poll).reduce(Outcome::default, Outcome::merge))
                }
                (None, true) => {
                    round.iter().map(|task| poll(std::slice::from_ref(task))).fold(Outcome::default(), Outcome::merge)
                }
                (None, false) => round.chunk_by(same_pe).map(poll).fold(Outcome::default(), Outcome::merge),
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
            merged.sent.clear();
            merged.crossing.clear();
            let merging = pool.filter(|_| polled.len() >= parallel_min_ready);
            self.merge_round(&polled, merging, &mut merged, &mut merge_parts);
            let handed = match &mut self.spread {
                Some(spread) => {
                    let polls = (woken, outcome.finished as u64, failure);
                    let parts = (&mut self.lanes, &mut self.two_sided, &self.one_sided);
                    let Some(end) = spread.hand_over(
                        polls,
                        parts,
                        &polled,
                        (&mut merged.sent, self.network.as_deref()),
                        &merged.crossing,
                    )?
                    else {
                        break;
                    };
                    rounds += 1;
                    finished += end.finished;
                    Some(end)
                }
                None => None,
            };
            self.place_transfers(&merged.sent, &mut placement)?;
            self.deliver(&polled, handed)?;
        }
        Ok(Driven { rounds, finished })
    }

    /// The merge phase: every polled PE's, on `pool` when there is one, into `merged`. There each
    /// thread merges blocks of ranks into `parts`, one a block, kept from round to round: lists made
    /// afresh each round would grow by doubling into fresh memory every time, which in a large run
    /// costs more than the merge itself.
    fn merge_round(
        &self,
        polled: &[u32],
        pool: Option<&rayon::ThreadPool>,
        merged: &mut Merged,
        parts: &mut Vec<Merged>,
    ) {
        // SAFETY (every merge below): rule M: each polled rank is merged once, by one thread, and a
        // block's ranks are all its thread's.
        match pool {
            Some(pool) => {
                // A few blocks a thread, so that a thread done early takes another.
                let blocks = 4 * pool.current_num_threads();
                parts.resize_with(blocks.max(parts.len()), Merged::default);
                let block = polled.len().div_ceil(blocks).max(1);
                pool.install(|| {
                    (parts.par_iter_mut().zip(polled.par_chunks(block)))
                        .for_each(|(part, ranks)| unsafe { self.merge_in_order(ranks, part) });
                });
                // In rank order, as one thread would have listed them; the parts keep their room.
                for part in parts.iter_mut() {
                    merged.append(part);
                }
            }
            None => unsafe { self.merge_in_order(polled, merged) },
        }
    }

    /// After placement (rule B): applies the round's one-sided operations and opens the barriers whose
    /// lanes have all arrived; in a spread run, with what the hand-over brought.
    fn deliver(&mut self, polled: &[u32], handed: Option<RoundEnd>) -> Result<(), RunError> {
        let arrivals: Vec<Arrival> = match handed {
            Some(end) => {
                // Between rounds nothing else touches the flags: taken as plain words, not by an atomic
                // swap, which costs a short round a good part of its time.
                *self.one_sided.used.get_mut() = false;
                if end.one_sided {
                    let spread = self.spread.as_mut().expect("a hand-over: a spread run");
                    spread.deliver(polled, &mut self.lanes, &mut self.one_sided)?;
                }
                end.arrivals
            }
            None => {
                if std::mem::take(self.one_sided.used.get_mut()) {
                    self.one_sided.deliver(polled, &mut self.lanes)?;
                }
                self.two_sided.barriers.take_arrivals()
            }
        };
        if !arrivals.is_empty() {
            let remote = self.spread.as_ref().map(|s| &s.remote_landed);
            let landed_elsewhere = |task| remote.and_then(|r| r.get(&task)).copied().unwrap_or(0.0);
            self.two_sided.barriers.release(arrivals, &mut self.lanes, landed_elsewhere);
        }
        Ok(())
    }

    /// The error `task`'s failed poll left with its lane, naming the lane when its PE runs several (a
    /// failed PE is every lane's).
    fn failure(&mut self, task: u32) -> RunError {
        let failure = self.lanes.states.get(task as usize).take_failure();
        match failure.expect("a failed poll leaves its error with the lane") {
            failed @ RunError::PeFailed { .. } => failed,
            error => self.lanes.tasks.in_lane(task, error),
        }
    }
}

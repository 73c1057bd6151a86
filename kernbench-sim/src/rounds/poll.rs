//! The poll phase: each woken PE's lanes polled once, in lane order, and how the polls ended.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use kernbench_core::{tile, tl};

use super::Execution;
use super::ready::Woken;
use super::view::PeView;
use crate::error::RunError;
use crate::lanes::LaneCtx;

/// How one poll ended.
#[derive(Clone, Copy)]
enum Polled {
    Pending,
    Finished,
    /// The error waits in the lane's `failure`, so outcomes stay small on the hot path.
    Failed,
}

/// What a round's polls add up to: lanes that finished, and the lowest task (lane of the run) that
/// failed.
#[derive(Clone, Copy, Default)]
pub(crate) struct Outcome {
    pub(crate) finished: usize,
    pub(crate) failed: Option<u32>,
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
    pub(crate) fn merge(self, other: Outcome) -> Outcome {
        let failed = match (self.failed, other.failed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Outcome { finished: self.finished + other.finished, failed }
    }
}

impl Execution<'_> {
    /// Polls the woken lanes of one PE once each, in lane order (rule P: they are this thread's).
    ///
    /// A lane above the lowest task that already failed this round is not polled: the run ends with
    /// the lowest failure whatever it would do, so the round need not wait for it (a kernel spinning
    /// until its watchdog stops it would otherwise spin once per PE). The lowest failing task is never
    /// skipped, so the error does not depend on the order of polls.
    pub(crate) fn poll_pe(&self, woken: &[u32]) -> Outcome {
        let tasks = &self.lanes.tasks;
        let Some(rank) = woken.first().map(|&task| tasks.rank(task)) else {
            return Outcome::default();
        };
        // SAFETY: rule P: a PE's woken lanes are polled together, by one thread, so only this thread
        // touches its cells, and (a task is woken at most once per round) its lanes' cells.
        let (pe, links, memory) = unsafe {
            let rank = rank as usize;
            (self.lanes.pes.get_mut(rank), self.two_sided.pes.get_mut(rank), self.one_sided.pes.get_mut(rank))
        };
        let mut outcome = Outcome::default();
        for &task in woken {
            if task > self.lowest_failure.load(Ordering::Relaxed) {
                continue;
            }
            // SAFETY: as above.
            let (lane, parked) =
                unsafe { (self.lanes.states.get_mut(task as usize), self.lanes.parked.get_mut(task as usize)) };
            lane.figures.polls += 1;
            let (participant, budget, run_rates) = (&tasks.pes()[rank as usize], self.lanes.budget, &self.lanes.rates);
            let ctx = LaneCtx { task, participant, pe: &mut *pe, lane, parked, budget, run_rates };
            let mut view = PeView { ctx, links: &mut *links, memory: &mut *memory, run: self };
            let polled = self.poll_lane(&mut view);
            if let Polled::Failed = polled {
                self.lowest_failure.fetch_min(task, Ordering::Relaxed);
            }
            outcome = outcome.add(task, polled);
        }
        outcome
    }

    /// Polls one lane's kernel once; one that ends has its end recorded and its coroutine freed.
    #[inline]
    fn poll_lane(&self, view: &mut PeView<'_, '_>) -> Polled {
        let (task, pe) = (view.ctx.task, view.ctx.pe_id());
        // SAFETY: rule P: the lane is this thread's, as its PE is.
        let kernel = unsafe { self.kernels.get_mut(task as usize) };
        let mut ended = None;
        let run = catch_unwind(AssertUnwindSafe(|| {
            let Some(coroutine) = kernel.as_mut() else { return };
            let woken = Woken { ready: &self.lanes.ready, task };
            let waker = woken.waker();
            let mut cx = Context::from_waker(&waker);
            let polled =
                tile::without_data_while(self.without_data, || tl::enter(view, || coroutine.as_mut().poll(&mut cx)));
            if let Poll::Ready(result) = polled {
                ended = Some(result);
                *kernel = None;
            }
        }));
        // A kernel ends once: its coroutine is gone after, and the lane is never polled again.
        view.ctx.lane.ended |= ended.is_some();
        let failure = match run {
            Err(payload) => {
                // A coroutine that panicked is never polled again; its drop (of what it still held)
                // may panic too, and is its failure's, not the run's.
                let _ = catch_unwind(AssertUnwindSafe(|| *kernel = None));
                RunError::Panicked { pe, message: panic_message(&*payload) }
            }
            Ok(_) => {
                let clock = &view.ctx.lane.clock;
                // A PE that failed before its lane got this far: neither pending nor finished.
                if let Some(fault) = clock.faults().and_then(|f| f.failed_by(clock.now)) {
                    let rank = self.lanes.tasks.rank(task);
                    RunError::PeFailed { rank, pe, fault: fault.to_string(), at_ns: format!("{:.0}", fault.at_ns) }
                } else {
                    match ended {
                        None => return Polled::Pending,
                        Some(Ok(())) => return Polled::Finished,
                        Some(Err(e)) => RunError::Kernel(e),
                    }
                }
            }
        };
        view.ctx.lane.fail(failure);
        Polled::Failed
    }
}

/// Installs, once per process, a panic hook that stays silent for panics raised while a kernel is
/// polled (their message is in the run's error; [`tl::polling_kernel`] tells them apart) and hands
/// every other panic, a runtime's own included, to the hook installed before it.
///
/// Once per process rather than for the duration of each run: the hook is process-wide while runs
/// (tests, sweeps) go on in parallel threads, so a run that put back the previous hook at its end could
/// silence another run's kernels or drop a hook installed in the meantime. Chaining to the previous hook
/// keeps every other panic as it was.
pub(crate) fn quiet_kernel_panics() {
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

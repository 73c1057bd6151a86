//! Diagnosis: why a run that stopped is not done (a deadlock, with every blocked lane and what it waits
//! for), and what a run whose kernels all finished left behind (messages in queues, signals raised
//! beyond every wait, puts nothing completed). Uses the rounds' installed run and the spread.

use kernbench_core::Op;

use crate::error::{BlockedPe, DeadlockReport, Leftover, RunError, SignalWait, Unreceived};
use crate::lanes::Wait;
use crate::rounds::Execution;
use crate::spread::in_run_order;
use crate::two_sided::queue::Side;

impl Execution<'_> {
    /// Why the run is stuck with `finished` lanes done: every blocked lane of every process, and every
    /// message sent that nobody received.
    ///
    /// # Errors
    /// An exchange that failed, in a spread run.
    pub(crate) fn deadlock_report(&mut self, finished: usize) -> Result<DeadlockReport, RunError> {
        let mut blocked = Vec::new();
        let total = self.lanes.tasks.len();
        for task in 0..total as u32 {
            let rank = self.lanes.tasks.rank(task);
            if !self.lanes.tasks.holds(rank) || self.lanes.states.get(task as usize).ended {
                continue;
            }
            let lanes = self.lanes.tasks.lanes_of(rank);
            let lane = (lanes.len() > 1).then(|| task as usize - lanes.start);
            let pe = self.lanes.tasks.pe(rank);
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
                waits_for: None,
            };
            let (pes, channels) = (self.lanes.tasks.pes(), self.lanes.tasks.channels());
            let entry = match self.lanes.parked.get(task as usize).wait {
                Wait::Send(q) => {
                    let queue = &mut self.two_sided.queues[q as usize];
                    let peer = pes[queue.receiver as usize];
                    let state = (queue.in_flight(), queue.credits(), queue.depth());
                    let (direction, channel) = self.two_sided.pes.get(rank as usize).end_of(q, Side::Sender, channels);
                    waiting(Op::Send, Some(direction), Some(peer), channel, state)
                }
                Wait::Recv(q) => {
                    let queue = &mut self.two_sided.queues[q as usize];
                    let peer = pes[queue.sender as usize];
                    let state = (queue.visible(), queue.credits(), queue.depth());
                    let (direction, channel) =
                        self.two_sided.pes.get(rank as usize).end_of(q, Side::Receiver, channels);
                    waiting(Op::Recv, Some(direction), Some(peer), channel, state)
                }
                Wait::Barrier | Wait::Released => {
                    let label = self.two_sided.barriers.label_of(task);
                    let op = if label.is_some() { Op::Alloc } else { Op::Barrier };
                    let mut entry = waiting(op, None, None, 0, (0, 0, 0));
                    entry.waits_for = label.map(|(buffer, site)| {
                        format!("every rank to allocate {buffer} at {site} (a rank that takes another path never does)")
                    });
                    entry
                }
                Wait::Signal { signal, cmp } => {
                    let lane = self.lanes.states.get(task as usize);
                    let (generation, until) = (lane.generation, lane.signal_until());
                    let memory = self.one_sided.pes.get(rank as usize).get_or_insert_default();
                    let state = memory.signals.get(signal as usize);
                    let (holds, other_generations) = (state.value(generation), state.other_generations(generation));
                    let mut entry = waiting(Op::WaitSignal, None, None, 0, (0, 0, 0));
                    entry.signal = Some(SignalWait { signal: signal as usize, cmp, until, holds, other_generations });
                    entry
                }
                Wait::Value => {
                    let memory = self.one_sided.pes.get(rank as usize).get_or_insert_default();
                    let mut entry = waiting(Op::WaitValue, None, None, 0, (0, 0, 0));
                    entry.waits_for = memory.value_waits.iter().find(|w| w.task == task).map(|w| {
                        let (name, index, cmp, operand, value, site) =
                            (w.buffer.name, w.index, w.cmp, w.operand, w.value, w.site);
                        format!("`{name}`[{index}] {cmp} {operand} at {site}; it holds {value}")
                    });
                    entry
                }
                Wait::Get => waiting(Op::Get, None, None, 0, (0, 0, 0)),
                Wait::Quiet => waiting(Op::Quiet, None, None, 0, (0, 0, 0)),
                Wait::None => waiting(Op::External, None, None, 0, (0, 0, 0)),
            };
            blocked.push((u64::from(task), entry));
        }
        let tasks = &self.lanes.tasks;
        let mut unreceived = Vec::new();
        for (i, q) in self.two_sided.queues.iter_mut().filter(|(_, q)| tasks.holds(q.receiver)) {
            let (receiver, sender, messages) = (q.receiver, tasks.pe(q.sender), q.unreceived());
            if messages.is_empty() {
                continue;
            }
            let links = self.two_sided.pes.get(receiver as usize);
            let (direction, channel) = links.end_of(i as u32, Side::Receiver, tasks.channels());
            let receiver = tasks.pe(receiver);
            unreceived.extend(messages.into_iter().map(|(dtype, len, generation)| {
                (i as u64, Unreceived { receiver, direction, channel, sender, dtype, len, generation })
            }));
        }
        let spread = self.spread.as_ref();
        let (blocked, unreceived) = (in_run_order(spread, blocked)?, in_run_order(spread, unreceived)?);
        Ok(DeadlockReport { blocked, finished, total, unreceived })
    }

    /// Every kernel finished: checks that nothing was left behind. Messages left in queues come first,
    /// then signals left raised, then (under the race detector) a put that nothing completed.
    ///
    /// # Errors
    /// [`RunError::LeftoverMessages`], [`RunError::SignalsLeftRaised`], [`RunError::PutNotLanded`]; an
    /// exchange that failed.
    pub(crate) fn check_leftovers(&mut self) -> Result<(), RunError> {
        let tasks = &self.lanes.tasks;
        // In a spread run, the receiver's process counts a queue's messages.
        let mut left = Vec::new();
        for (i, q) in self.two_sided.queues.iter_mut().filter(|(_, q)| tasks.holds(q.receiver)) {
            let messages = q.in_flight();
            if messages == 0 {
                continue;
            }
            let (receiver, sender) = (q.receiver, tasks.pe(q.sender));
            let links = self.two_sided.pes.get(receiver as usize);
            let (direction, channel) = links.end_of(i as u32, Side::Receiver, tasks.channels());
            left.push((i as u64, Leftover { receiver: tasks.pe(receiver), direction, channel, sender, messages }));
        }
        let left = in_run_order(self.spread.as_ref(), left)?;
        if !left.is_empty() {
            return Err(RunError::LeftoverMessages(left));
        }
        // In a spread run, a PE's signals are in its process.
        let raised = self.one_sided.left_raised(&self.lanes);
        let raised = in_run_order(self.spread.as_ref(), raised)?;
        if !raised.is_empty() {
            return Err(RunError::SignalsLeftRaised(raised));
        }
        match self.one_sided.unlanded_put(&mut self.lanes) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

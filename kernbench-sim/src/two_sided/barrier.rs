//! Barriers: lanes arrive while they are polled; between rounds each group whose lanes have all
//! arrived is released at once, at the latest arrival (a lane's arrival waits for its puts to land).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use kernbench_core::symmetric::{CallSite, Symmetric};
use kernbench_core::{Group, KernelError, Op, PeId};

use super::send_recv::Endpoint;
use crate::lanes::{Lanes, Tasks, Wait};
use crate::race::Released;
use crate::timing::SpanKind;

/// A lane at a barrier: its task, the group's key, when it arrived and what it released, and the
/// collective allocation it is part of (`None`: a plain barrier).
pub(crate) struct Arrival {
    pub(crate) group: BarrierKey,
    pub(crate) task: u32,
    pub(crate) at_ns: f64,
    pub(crate) clock: Option<Released>,
    pub(crate) label: Option<(Symmetric, CallSite)>,
}

/// What a lane is at, in words: a barrier, or a collective allocation.
fn describe(label: Option<&(Symmetric, CallSite)>) -> String {
    match label {
        Some((buffer, site)) => format!("alloc of {buffer} at {site}"),
        None => "a barrier".to_owned(),
    }
}

/// The run's barriers.
#[derive(Default)]
pub(crate) struct Barriers {
    /// Whether any lane arrived this round (the check between rounds is then one load).
    arrived: AtomicBool,
    /// The round's arrivals.
    waiters: Mutex<Vec<Arrival>>,
    /// Lanes per group, counted when a group first meets.
    group_lanes: BTreeMap<BarrierKey, usize>,
    /// The lanes at each group that has not opened yet.
    at_barrier: BTreeMap<BarrierKey, Vec<Arrival>>,
    /// The error of each lane released from a group whose lanes were at different collective calls.
    mismatched: Mutex<BTreeMap<u32, KernelError>>,
}

/// Which lanes a barrier waits for: lanes with the same key wait for each other.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum BarrierKey {
    /// A [`Group`] of the arriving PE, by [`group_key`].
    Group(u64),
    /// A team's members (global ranks, ascending): teams of the same members share a barrier, as
    /// the members cannot tell them apart.
    Team(Arc<[usize]>),
    /// A barrier of call `k` (from 1) of several run together: only its lanes wait at it (call 0's
    /// are the plain keys).
    Call(u32, Box<BarrierKey>),
}

impl BarrierKey {
    /// The key of `pe`'s `group`.
    pub(crate) fn of_group(group: Group, pe: PeId) -> BarrierKey {
        BarrierKey::Group(group_key(group, pe))
    }
}

/// The number of `pe`'s `group`, unique among groups.
fn group_key(group: Group, pe: PeId) -> u64 {
    match group {
        Group::All => 0,
        Group::Sip => 1 << 62 | u64::from(pe.sip),
        Group::Cube => 2 << 62 | u64::from(pe.sip) << 32 | u64::from(pe.cube),
    }
}

impl Barriers {
    /// The collective allocation lane `task` waits at, if it waits at one.
    pub(crate) fn label_of(&self, task: u32) -> Option<(Symmetric, CallSite)> {
        self.at_barrier.values().flatten().find(|a| a.task == task).and_then(|a| a.label)
    }

    /// The error of lane `task`, released from a barrier whose lanes were at different collective calls.
    pub(crate) fn mismatch(&self, task: u32) -> Option<KernelError> {
        self.mismatched.lock().unwrap_or_else(|e| e.into_inner()).remove(&task)
    }

    /// The round's arrivals, taken (rule B).
    pub(crate) fn take_arrivals(&mut self) -> Vec<Arrival> {
        // `&mut self`: a plain read and write, not an atomic swap (a round of two PEs costs tens of ns).
        if std::mem::take(self.arrived.get_mut()) {
            std::mem::take(self.waiters.get_mut().unwrap_or_else(|e| e.into_inner()))
        } else {
            Vec::new()
        }
    }

    /// Releases each group whose lanes have all arrived, at the latest arrival's time, no earlier than
    /// the arrivals' puts landed (`landed_elsewhere` for the lanes of other processes); under the race
    /// detector each of its lanes acquires what all of them released. In a spread run every process
    /// releases every group, and moves on only its own lanes (rule B).
    pub(crate) fn release(
        &mut self,
        arrivals: Vec<Arrival>,
        lanes: &mut Lanes<'_>,
        landed_elsewhere: impl Fn(u32) -> f64,
    ) {
        let tasks = &lanes.tasks;
        // The round's arrivals join their groups; only a group someone joined can be complete now.
        let mut joined_groups = Vec::new();
        for arrival in arrivals {
            joined_groups.push(arrival.group.clone());
            self.at_barrier.entry(arrival.group.clone()).or_default().push(arrival);
        }
        joined_groups.sort_unstable();
        joined_groups.dedup();
        for group in joined_groups {
            let complete = self.at_barrier.get(&group).map_or(0, Vec::len) >= self.group_lanes(&group, tasks);
            if !complete {
                continue;
            }
            let mut arrivals = self.at_barrier.remove(&group).unwrap_or_default();
            arrivals.sort_unstable_by_key(|a| a.task);
            // Labels do not cross processes: a spread run compares the lanes of each process.
            let here: Vec<&Arrival> = arrivals.iter().filter(|a| tasks.holds(tasks.rank(a.task))).collect();
            if let Some(&other) = here.iter().find(|a| a.label != here[0].label) {
                let mut mismatched = self.mismatched.lock().unwrap_or_else(|e| e.into_inner());
                for &arrival in &here {
                    // Each lane is told of one at another call than its own.
                    let theirs = if arrival.label == other.label { here[0] } else { other };
                    let error = KernelError::CollectiveMismatch {
                        pe: tasks.pe(tasks.rank(arrival.task)),
                        mine: describe(arrival.label.as_ref()),
                        other_pe: tasks.pe(tasks.rank(theirs.task)),
                        theirs: describe(theirs.label.as_ref()),
                    };
                    mismatched.insert(arrival.task, error);
                }
            }
            let mut release = 0.0f64;
            for arrival in &arrivals {
                let landed = if tasks.holds(tasks.rank(arrival.task)) {
                    lanes.states.get(arrival.task as usize).landed_ns()
                } else {
                    landed_elsewhere(arrival.task)
                };
                release = release.max(arrival.at_ns.max(landed));
            }
            let clocks = arrivals.iter().filter_map(|a| a.clock.as_ref());
            let joined = arrivals.iter().any(|a| a.clock.is_some()).then(|| Released::join_all(clocks));
            for arrival in arrivals.iter().filter(|a| tasks.holds(tasks.rank(a.task))) {
                let task = arrival.task;
                let lane = lanes.states.get(task as usize);
                lane.clock.advance_to(SpanKind::Barrier, release, 0, false);
                if let Some(joined) = &joined {
                    lane.sync(task).acquire(joined);
                }
                lanes.parked.get(task as usize).wait = Wait::Released;
                lanes.ready.push(task);
            }
        }
    }

    /// How many lanes barrier `group` waits for.
    fn group_lanes(&mut self, group: &BarrierKey, tasks: &Tasks<'_>) -> usize {
        if let Some(&lanes) = self.group_lanes.get(group) {
            return lanes;
        }
        let (call, key) = match group {
            BarrierKey::Call(call, key) => (*call as usize, &**key),
            key => (0, key),
        };
        let pes = tasks.pes();
        let lanes_of = |rank: u32| tasks.lanes_of_call(rank, call).len();
        let lanes = match key {
            BarrierKey::Group(key) => (0..pes.len() as u32)
                .filter(|&rank| {
                    let pe = pes[rank as usize];
                    [Group::All, Group::Sip, Group::Cube].iter().any(|&g| group_key(g, pe) == *key)
                })
                .map(lanes_of)
                .sum(),
            // A team's members are ranks of the run (teams are made from its size); one past it
            // would count no lanes, and the barrier would be reported stuck rather than panic.
            BarrierKey::Team(members) => {
                members.iter().filter(|&&rank| rank < pes.len()).map(|&rank| lanes_of(rank as u32)).sum()
            }
            BarrierKey::Call(..) => 0,
        };
        self.group_lanes.insert(group.clone(), lanes);
        lanes
    }
}

impl Endpoint<'_> {
    /// Waits until every lane of every participant in the lane's `group` has arrived.
    pub(crate) fn poll_barrier(&mut self, group: BarrierKey) -> Poll<Result<(), KernelError>> {
        self.poll_collective(group, None)
    }

    /// Waits at barrier `group` as part of the collective allocation `label` (`None`: a plain
    /// barrier); lanes that meet at different collective calls fail.
    pub(crate) fn poll_collective(
        &mut self,
        group: BarrierKey,
        label: Option<(Symmetric, CallSite)>,
    ) -> Poll<Result<(), KernelError>> {
        if let Err(e) = self.ctx.check_steps() {
            return Poll::Ready(Err(e));
        }
        match self.ctx.parked.wait {
            Wait::Released => {
                self.ctx.parked.wait = Wait::None;
                if let Some(error) = self.run.barriers.mismatch(self.ctx.task) {
                    return Poll::Ready(Err(error));
                }
                self.ctx.step_done(if label.is_some() { Op::Alloc } else { Op::Barrier }, None);
                Poll::Ready(Ok(()))
            }
            Wait::Barrier => {
                self.ctx.park(Wait::Barrier);
                Poll::Pending
            }
            _ => {
                // A barrier completes the lane's puts: it releases them with everything else the lane
                // did, and opens only once they have landed.
                let clock = match self.ctx.lane.sync_mut() {
                    Some(sync) if self.run.detector => {
                        sync.quiet();
                        Some(sync.release())
                    }
                    _ => None,
                };
                let arrival = Arrival { group, task: self.ctx.task, at_ns: self.ctx.lane.clock.now, clock, label };
                let barriers = &self.run.barriers;
                barriers.arrived.store(true, Ordering::Relaxed);
                barriers.waiters.lock().unwrap_or_else(|e| e.into_inner()).push(arrival);
                self.ctx.park(Wait::Barrier);
                Poll::Pending
            }
        }
    }
}

//! One-sided traffic: each PE's symmetric heap and signals, the operations a lane starts on them (with
//! multicast objects, one per member of the switch's fan-out, placed together), their
//! delivery to their targets, and the checks at the end of a run. Uses lanes, two-sided traffic (a
//! one-sided operation takes the route of the PE's first channel to its target, whatever its lane: between
//! nodes, the NICs of rail 0), the race detector and the timing model.
//!
//! One-sided operations follow the round protocol of messages: what a lane starts in a round waits in
//! its PE's outbox; when the round is merged it is placed on the channels with the round's messages, in
//! one order for both (so a put shares its links as a send of its bytes would, a signal is an 8-byte
//! message, a get a request and a response), then applied to its target rank by rank, in the order
//! each lane made them. So a put is visible from the next round, and every run gives the same bits,
//! times and errors on any number of threads. A wait on a signal completes when the raises that
//! brought it to its value have landed.

mod delivery;
mod heap;
mod op;
mod ops;

pub(crate) use delivery::ONE_SIDED;
pub(crate) use op::Outgoing;
pub(crate) use ops::Initiator;

use std::sync::atomic::AtomicBool;

use kernbench_core::symmetric::{Access, Race, Uninitialised};
use kernbench_core::{KernelError, PeId, System, Tile};

use crate::lanes::{Lanes, Tasks, Wait};
use crate::protocol::Cells;
use crate::race::{Conflict, Stamp};
use heap::{Heap, Signals};
use op::PutRecord;

/// A PE's symmetric memory, made when one of its lanes first uses it or a peer first puts into it: most
/// PEs of most runs never do, and a million of them should not pay for it.
#[derive(Default)]
pub(crate) struct PeOneSided {
    /// The ranks its one-sided operations may address, sorted: `(rank, the queue of channel 0 to it,
    /// the queue of channel 0 from it)`, whose routes they take; listed on first use.
    pub(crate) peers: Option<Vec<(u32, u32, u32)>>,
    /// Its copy of the heap.
    pub(crate) heap: Heap,
    pub(crate) signals: Signals,
    /// One-sided operations its lanes started this round.
    pub(crate) outbox: Vec<Outgoing>,
    /// Gets' replies that came back for its lanes: the lane's task, the data or error, when it arrives.
    pub(crate) replies: Vec<(u32, Result<Tile, KernelError>, f64)>,
    /// Members' parts of its lanes' multimem loads, for the switch to reduce: the lane's task, the
    /// member, the member's data or error, when the reduced result arrives.
    pub(crate) gathered: Vec<(u32, u32, Result<Tile, KernelError>, f64)>,
}

/// The run's one-sided part.
pub(crate) struct OneSidedRun {
    /// Per PE this process holds: its symmetric memory, once it has any.
    pub(crate) pes: Cells<Option<Box<PeOneSided>>>,
    /// Whether the race detector is on.
    pub(crate) detector: bool,
    /// Set when a lane starts a one-sided operation, so rounds without any skip their delivery.
    pub(crate) used: AtomicBool,
    /// Every put applied, under the race detector, for the check at the end of the run.
    puts: Vec<PutRecord>,
    /// The system, which says whether a multicast object's members can share one
    /// ([`System::check_multicast`]) and which node a rank is on (for `tl.team_node`).
    pub(crate) system: System,
}

impl OneSidedRun {
    pub(crate) fn new(pes: Cells<Option<Box<PeOneSided>>>, detector: bool, system: System) -> OneSidedRun {
        OneSidedRun { pes, detector, used: AtomicBool::new(false), puts: Vec::new(), system }
    }
}

impl Lanes<'_> {
    /// A put of lane `task` landed at `arrive_ns`: its quiet may complete (rule B).
    pub(crate) fn land(&mut self, task: u32, arrive_ns: f64) {
        let lane = self.states.get(task as usize);
        lane.landed_ns = lane.landed_ns.max(arrive_ns);
        self.wake_task(task, Wait::Quiet);
    }

    /// Wakes the lanes of `rank` that wait on `signal` (rule B).
    fn wake_signal(&mut self, rank: u32, signal: usize) {
        for task in self.tasks.lanes_of(rank) {
            self.parked
                .get(task)
                .wake_if(|wait| matches!(wait, Wait::Signal { signal: s, .. } if s as usize == signal));
        }
    }
}

/// Who made an access, for an error: its PE and lane, from its task.
fn access(tasks: &Tasks<'_>, stamp: &Stamp) -> Access {
    let pe = tasks.pe(tasks.rank(stamp.task));
    Access { pe, lane: tasks.lane(stamp.task) as usize, op: stamp.op, site: stamp.site }
}

/// What the race detector found, as the error that names both sides.
fn conflict_error(
    who: impl Fn(&Stamp) -> Access,
    conflict: Conflict,
    owner: PeId,
    buffer: &'static str,
    stamp: &Stamp,
) -> KernelError {
    match conflict {
        Conflict::Race { earlier, bytes } => {
            KernelError::Race(Box::new(Race { owner, buffer, bytes, first: who(&earlier), second: who(stamp) }))
        }
        Conflict::Uninitialised { bytes } => {
            KernelError::Uninitialised(Box::new(Uninitialised { owner, buffer, bytes, reader: who(stamp) }))
        }
    }
}

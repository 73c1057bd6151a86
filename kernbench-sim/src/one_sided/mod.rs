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

mod atomics;
mod delivery;
mod heap;
mod op;
mod ops;
mod windows;

pub(crate) use delivery::ONE_SIDED;
pub(crate) use op::Outgoing;
pub(crate) use ops::Initiator;
pub use windows::{WindowError, Windows};

use std::sync::atomic::AtomicBool;

use kernbench_core::atomic::{Cmp, LanePlace, Scope};
use kernbench_core::symmetric::{Access, CallSite, Race, Symmetric, Uninitialised};
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
    /// Its lanes' waits on elements of its copies, while they wait (for a deadlock's report).
    pub(crate) value_waits: Vec<ValueWaiting>,
    /// The buffers of the multicast objects it has joined.
    pub(crate) joined: Vec<&'static str>,
}

/// A lane's wait on an element of its PE's copy of a buffer, as the kernel asked for it, and what the
/// element held when it last looked.
#[derive(Clone, Debug)]
pub(crate) struct ValueWaiting {
    pub(crate) task: u32,
    pub(crate) buffer: Symmetric,
    pub(crate) index: usize,
    pub(crate) cmp: Cmp,
    pub(crate) operand: i64,
    pub(crate) value: i64,
    pub(crate) site: CallSite,
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
    /// The call's generation (the communicator's count of calls): which call a window's access was
    /// made in.
    pub(crate) call: u64,
    /// The seed of the order of same-time operations ([`crate::RunOptions::schedule`]), and how far
    /// apart operations may land and still swap ([`crate::RunOptions::schedule_jitter_ns`]).
    pub(crate) schedule: Option<u64>,
    pub(crate) jitter_ns: f64,
}

impl OneSidedRun {
    pub(crate) fn new(
        pes: Cells<Option<Box<PeOneSided>>>,
        detector: bool,
        system: System,
        (call, schedule, jitter_ns): (u64, Option<u64>, f64),
    ) -> OneSidedRun {
        let used = AtomicBool::new(false);
        OneSidedRun { pes, detector, used, puts: Vec::new(), system, call, schedule, jitter_ns }
    }

    /// Whether two atomics are morally strong: each one's scope includes the other's lane.
    pub(crate) fn strong<'a>(&'a self, tasks: &'a Tasks<'_>) -> impl Fn(&Stamp, &Stamp) -> bool + 'a {
        move |a, b| morally_strong((&self.system, self.call, tasks), a, b)
    }
}

impl Lanes<'_> {
    /// A put of lane `task` landed at `arrive_ns`: its quiet may complete (rule B).
    pub(crate) fn land(&mut self, task: u32, arrive_ns: f64) {
        self.states.get(task as usize).land(arrive_ns);
        self.wake_task(task, Wait::Quiet);
    }

    /// Wakes the lanes of `rank` that wait on an element's value (rule B): a write or atomic landed
    /// in its copy.
    fn wake_values(&mut self, rank: u32) {
        for task in self.tasks.lanes_of(rank) {
            // SAFETY: `&mut self` excludes every other borrow (rule B).
            unsafe { self.wake_if(task as u32, |wait| wait == Wait::Value) };
        }
    }

    /// Wakes the lanes of `rank` that wait on `signal` (rule B).
    fn wake_signal(&mut self, rank: u32, signal: usize) {
        for task in self.tasks.lanes_of(rank) {
            let wakes = |wait| matches!(wait, Wait::Signal { signal: s, .. } if s as usize == signal);
            // SAFETY: `&mut self` excludes every other borrow (rule B).
            unsafe { self.wake_if(task as u32, wakes) };
        }
    }
}

/// Whether two atomics, of the current call `call` of a run on `system` (or of earlier calls, kept
/// by a window), are morally strong: each one's scope includes the other's lane.
pub(crate) fn morally_strong((system, call, tasks): (&System, u64, &Tasks<'_>), a: &Stamp, b: &Stamp) -> bool {
    let place = |stamp: &Stamp| {
        let (pe, lane, call) = match stamp.retired {
            Some(retired) => retired,
            None => (tasks.pe(tasks.rank(stamp.task)), tasks.lane(stamp.task), call),
        };
        LanePlace { pe, node: system.node_of(pe.sip), lane, call }
    };
    match (a.scope, b.scope) {
        (Some(sa), Some(sb)) => Scope::strong(sa, &place(a), sb, &place(b)),
        _ => false,
    }
}

/// Who made an access, for an error: its PE and lane, from its task (or, for an access of an
/// earlier call that a window kept, as it was recorded then).
fn access(tasks: &Tasks<'_>, stamp: &Stamp) -> Access {
    let (pe, lane, call) = match stamp.retired {
        Some((pe, lane, call)) => (pe, lane, Some(call)),
        None => (tasks.pe(tasks.rank(stamp.task)), tasks.lane(stamp.task), None),
    };
    Access { pe, lane: lane as usize, op: stamp.op, site: stamp.site, scope: stamp.scope, call }
}

/// What the race detector found, as the error that names both sides.
fn conflict_error(
    who: impl Fn(&Stamp) -> Access,
    conflict: Conflict,
    owner: PeId,
    (buffer, window): (&'static str, bool),
    stamp: &Stamp,
) -> KernelError {
    match conflict {
        Conflict::Race { earlier, bytes } => {
            KernelError::Race(Box::new(Race { owner, buffer, bytes, first: who(&earlier), second: who(stamp), window }))
        }
        Conflict::Uninitialised { bytes } => {
            KernelError::Uninitialised(Box::new(Uninitialised { owner, buffer, bytes, reader: who(stamp) }))
        }
    }
}

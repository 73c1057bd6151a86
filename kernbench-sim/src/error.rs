//! Why a run failed: each variant says what happened, to whom, and whose fault it is.

use std::fmt;

use std::ops::Range;

use kernbench_core::atomic::Cmp;
use kernbench_core::symmetric::Access;
use kernbench_core::{Direction, Dtype, KernelError, Op, PeId, PlanError};
use serde::{Deserialize, Serialize};

/// Why a run did not complete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A kernel's `tl` operation failed (the kernel's fault). When several fail in the same round, the
    /// lowest rank's error is reported.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// An error of one lane of a PE that runs several: `error` names the PE, this the lane.
    #[error("lane {lane} of {lanes}: {error}")]
    InLane {
        /// The lane.
        lane: usize,
        /// The lanes its PE runs.
        lanes: usize,
        /// What went wrong in it.
        error: Box<RunError>,
    },
    /// A kernel asked for a number of lanes a PE cannot run (the kernel's or its parameters' fault).
    #[error("{pe}: the kernel asks for {lanes} lanes: expected 1..={max} (Runtime::MAX_LANES)")]
    BadLanes {
        /// The PE.
        pe: PeId,
        /// The lanes asked for.
        lanes: usize,
        /// [`Runtime::MAX_LANES`](crate::Runtime::MAX_LANES).
        max: usize,
    },
    /// The run's lanes, every PE's added up, are more than a run can number (the kernel's lanes on a
    /// system of close to [`System::MAX_PES`](kernbench_core::System::MAX_PES) PEs); refused before
    /// any lane runs.
    #[error("the kernel's lanes on every PE add up to {lanes}: expected at most {max}; use fewer lanes or PEs")]
    TooManyLanes {
        /// The lanes of every PE, added up.
        lanes: u64,
        /// The most a run numbers: `u32::MAX`.
        max: u64,
    },
    /// A kernel panicked (the kernel's fault); the run stopped and did not hang.
    #[error("{pe}: the kernel panicked: {message}")]
    Panicked {
        /// The PE whose kernel panicked.
        pe: PeId,
        /// The panic message.
        message: String,
    },
    /// No kernel could make progress while some had not finished (the kernel's fault, or a topology
    /// that does not fit it).
    #[error("{0}")]
    Deadlock(DeadlockReport),
    /// Every kernel finished but messages were left in queues (the kernel sent more than its peers
    /// received).
    #[error("every kernel finished but {} queue(s) still hold messages: {}", .0.len(), leftovers(.0))]
    LeftoverMessages(Vec<Leftover>),
    /// Every kernel finished but signals were left raised beyond what any wait took (the kernel raised
    /// more than its peers waited for, or forgot a wait or a reset).
    #[error("every kernel finished but {} signal(s) were left raised: {}", .0.len(), left_raised(.0))]
    SignalsLeftRaised(Vec<LeftRaised>),
    /// Under the race detector: every kernel finished, but a put was neither completed by a quiet or
    /// barrier of its lane nor seen by its target through a signal, message or barrier, so nothing says
    /// it landed before the kernels ended (the kernel's fault: end with `tl.quiet()`, or signal it).
    #[error(
        "every kernel finished but the put by {put} into {to}'s `{buffer}` bytes {}..{} may not have landed: no tl.quiet or barrier of its lane came after it, and no lane of {to} waited on a signal or message ordered after it",
        bytes.start,
        bytes.end
    )]
    PutNotLanded {
        /// The put.
        put: Access,
        /// Its target.
        to: PeId,
        /// The buffer.
        buffer: &'static str,
        /// The bytes it wrote.
        bytes: Range<u64>,
    },
    /// The buffers given do not match the plan (the caller's fault).
    #[error(
        "the plan has {participants} participating PEs but {buffers} buffers were given (one per PE, in rank order)"
    )]
    BufferCount {
        /// Participants in the plan.
        participants: usize,
        /// Buffers given.
        buffers: usize,
    },
    /// A call of generation 0: generations count from 1, so that 0 can never match a real message.
    #[error("generation 0 is not a valid call generation: generations count from 1")]
    ZeroGeneration,
    /// A call generation so large that its phases' message generations would not fit a `u64`.
    #[error("generation {generation} is too large: expected at most {max}", max = kernbench_core::tl::MAX_GENERATION)]
    GenerationTooLarge {
        /// The generation given.
        generation: u64,
    },
    /// A root rank that no participant has (the caller's fault).
    #[error("root {root} does not exist: the plan has {participants} participants, so expected 0..{participants}")]
    BadRoot {
        /// The root given.
        root: usize,
        /// Participants in the plan.
        participants: usize,
    },
    /// More threads to poll PEs on than [`Runtime::MAX_THREADS`](crate::Runtime::MAX_THREADS) (the
    /// configuration's fault); refused before any thread was started.
    #[error(
        "{threads} threads to poll PEs on are more than a runtime may start: expected 1..={max} (Runtime::MAX_THREADS); more threads than cores gain nothing"
    )]
    TooManyThreads {
        /// The threads asked for.
        threads: usize,
        /// [`Runtime::MAX_THREADS`](crate::Runtime::MAX_THREADS).
        max: usize,
    },
    /// The threads to poll PEs on could not be started (the OS refused; the threads that had started
    /// were stopped, so nothing is left running).
    #[error(
        "cannot start {threads} threads to poll PEs on: {reason}; use fewer threads (the OS limits threads and memory per process)"
    )]
    Threads {
        /// The threads asked for.
        threads: usize,
        /// What the OS or the thread pool said: its message, since the error itself (an `io::Error`
        /// inside) is neither `Clone` nor `PartialEq`, which this enum is.
        reason: String,
    },
    /// A PE's simulated time is not a finite number (the configuration's fault): a rate of 0 makes
    /// every step infinitely long, and a time that is infinite or NaN must never be printed or
    /// written as a result. System specs keep link rates at 1e-3 GB/s or more and latencies within
    /// 0..1e12 ns, and [`RunError::BadStraggler`] refuses stragglers outside those ranges before a run,
    /// so this is the last guard: no input that passes those checks is known to reach it.
    #[error(
        "{pe}: its simulated {what} time is {value} ns, not a finite number: check the link rates and latencies of the system, and the timing's stragglers (compute_gflops and memory_gbps must be above 0, start_delay_ns finite)"
    )]
    NonFiniteTime {
        /// The first PE, in rank order, whose own work or start delay is not finite; if none, the first
        /// whose waiting made its clock so.
        pe: PeId,
        /// Which of its times: `start delay`, `busy`, `finish` or `blocked`.
        what: &'static str,
        /// The value as Rust prints it (`inf`, `-inf` or `NaN`): text, so that the error stays `Eq`.
        value: String,
    },
    /// A straggler of the timing ([`Timing::stragglers`](crate::Timing::stragglers)) with a rate or delay
    /// outside the ranges a system spec allows ([`System::MIN_RATE`](kernbench_core::System::MIN_RATE),
    /// [`System::MAX_TIME_NS`](kernbench_core::System::MAX_TIME_NS)), or on a PE the system does not have
    /// (the configuration's fault); refused before any PE runs.
    #[error("timing straggler {pe}: {field} is {value}: expected {expected}")]
    BadStraggler {
        /// The straggler's PE.
        pe: PeId,
        /// `compute_gflops`, `memory_gbps`, `start_delay_ns`, or `pe` when the system has no such PE.
        field: &'static str,
        /// The value as Rust prints it: text, so that the error stays `Eq`.
        value: String,
        /// What would be valid.
        expected: String,
    },
    /// A fault of the timing ([`Timing::faults`](crate::Timing::faults)) on a part the system does not
    /// have, or with a factor or time out of range (the configuration's fault); refused before any PE
    /// runs.
    #[error("fault `{fault}`: {why}")]
    BadFault {
        /// The fault, as text.
        fault: String,
        /// What is wrong, and what would be valid.
        why: String,
    },
    /// Failed links ([`Timing::faults`](crate::Timing::faults)) cut every route from a message's
    /// sender to its receiver: the machine's fault, as the run was told to simulate it.
    #[error(transparent)]
    Unreachable(Box<Cut>),
    /// A PE failed ([`Timing::faults`](crate::Timing::faults)) before its kernel finished: the
    /// machine's fault, as the run was told to simulate it.
    #[error("rank {rank} {pe} failed at {at_ns} ns (fault `{fault}`) before its kernel finished")]
    PeFailed {
        /// Its rank.
        rank: u32,
        /// The PE.
        pe: PeId,
        /// The fault, as text.
        fault: String,
        /// When it failed, in ns (text, so that the error stays `Eq`).
        at_ns: String,
    },
    /// Calls given to [`Runtime::run_together`](crate::Runtime::run_together) that cannot run together
    /// (the caller's fault).
    #[error("calls run together: {why}")]
    Together {
        /// What is wrong, and what would be valid.
        why: String,
    },
    /// A timing-only run ([`RunOptions::timing_only`](crate::RunOptions)) without a timing model: it
    /// would compute nothing at all (the configuration's fault).
    #[error("a timing-only run needs simulated time: give it a timing (RunOptions::timing), or run it with data")]
    TimingOnlyUntimed,
    /// A spread run asked to place divided ([`crate::spread::Placement::Divided`]) that cannot (the
    /// configuration's fault).
    #[error(
        "this run cannot place its transfers divided over its processes: {why}; use Placement::Whole or Auto (on the command line, --placement whole or auto)"
    )]
    Undividable {
        /// What keeps it whole.
        why: &'static str,
    },
    /// The run's protocol ([`RunOptions::protocol`](crate::RunOptions)) is not one the system gives
    /// figures for (the configuration's fault): the message names those it gives.
    #[error(transparent)]
    Protocol(#[from] kernbench_core::machine::ProtocolNotGiven),
    /// The plan does not pass [`kernbench_core::check_plan`] on the system (the configuration's fault).
    #[error("the install plan cannot be installed: {0}")]
    Plan(#[from] PlanError),
    /// The hand-over between the processes of a spread run failed ([`crate::RunOptions::spread_over`]).
    #[error(transparent)]
    Exchange(#[from] ExchangeError),
    /// The error another process of a spread run reported: the same one-line message as there, where
    /// the failing PE's process returns the error itself.
    #[error("{message}")]
    Elsewhere {
        /// The process whose PE failed.
        process: usize,
        /// Its error, as it reads.
        message: String,
    },
}

/// Where failed links cut a message off ([`RunError::Unreachable`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "rank {from_rank} {from} cannot reach rank {to_rank} {to} at {at_ns} ns: failed {}; ranks cut off from rank {from_rank}: {}",
    .failed.join(", "),
    rank_ranges(.cut_off)
)]
pub struct Cut {
    /// The sender's rank.
    pub from_rank: u32,
    /// The sender.
    pub from: PeId,
    /// The receiver's rank.
    pub to_rank: u32,
    /// The receiver.
    pub to: PeId,
    /// When the message left, in ns (text, so that the error stays `Eq`).
    pub at_ns: String,
    /// The failed links and NICs by then, as faults' text.
    pub failed: Vec<String>,
    /// The ranks the sender no longer reaches, in order.
    pub cut_off: Vec<u32>,
}

/// Ranks as runs of consecutive numbers: `1, 4..=11`.
pub(crate) fn rank_ranges(ranks: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        out.push(if j == i { ranks[i].to_string() } else { format!("{}..={}", ranks[i], ranks[j]) });
        i = j + 1;
    }
    if out.is_empty() { "none".to_owned() } else { out.join(", ") }
}

/// Why a hand-over between processes failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// The other processes did not reach the hand-over in time: one died, hangs, or runs a round
    /// longer than the timeout ([`crate::spread::DEFAULT_TIMEOUT`], `KERNBENCH_EXCHANGE_TIMEOUT`).
    #[error(
        "exchange timeout: process {process} of {processes} waited {waited_ms} ms for the others at a hand-over between rounds; one of them died or hangs (raise KERNBENCH_EXCHANGE_TIMEOUT if a round is that long)"
    )]
    Timeout {
        /// The process that gave up.
        process: usize,
        /// The run's processes.
        processes: usize,
        /// How long it waited, in milliseconds.
        waited_ms: u128,
    },
    /// A process left the run (it ended or panicked) while the others still exchanged.
    #[error("exchange: process {gone} left the run while process {process} still exchanged")]
    Gone {
        /// The process still exchanging.
        process: usize,
        /// The process that left.
        gone: usize,
    },
    /// The transport failed.
    #[error("exchange: {0}")]
    Transport(String),
    /// Bytes from another process did not decode: processes of one run must run the same program.
    #[error(
        "exchange: process {from} sent a hand-over that does not decode ({what}); every process must run the same program"
    )]
    Malformed {
        /// The sender.
        from: usize,
        /// What did not decode.
        what: &'static str,
    },
    /// `KERNBENCH_EXCHANGE_TIMEOUT` is not a number of seconds.
    #[error("KERNBENCH_EXCHANGE_TIMEOUT is `{value}`: expected a number of seconds above 0 and at most 86400")]
    BadTimeout {
        /// What it holds.
        value: String,
    },
    /// The run's processes are more than its SIPs (each process holds at least one).
    #[error("a run on {sips} SIPs cannot be spread over {processes} processes: expected 1..={sips} processes")]
    TooManyProcesses {
        /// The run's processes.
        processes: usize,
        /// The system's SIPs.
        sips: usize,
    },
}

impl RunError {
    /// The kernel's error this is, or wraps: an error of one lane of a PE that runs several lanes
    /// comes as [`RunError::InLane`] around it. `None` for errors that are not a kernel's.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::{KernelError, PeId};
    /// use kernbench_sim::RunError;
    /// let kernel = KernelError::kernel(PeId::new(0, 0, 1), "no data");
    /// let error = RunError::InLane { lane: 1, lanes: 2, error: Box::new(RunError::Kernel(kernel.clone())) };
    /// assert_eq!(error.kernel(), Some(&kernel));
    /// assert_eq!(RunError::ZeroGeneration.kernel(), None);
    /// ```
    pub fn kernel(&self) -> Option<&KernelError> {
        match self {
            RunError::Kernel(error) => Some(error),
            RunError::InLane { error, .. } => error.kernel(),
            _ => None,
        }
    }
}

/// A queue that still held messages when every kernel had finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leftover {
    /// The PE that never received them.
    pub receiver: PeId,
    /// Its direction for the queue.
    pub direction: Direction,
    /// The queue's channel.
    pub channel: usize,
    /// The PE that sent them.
    pub sender: PeId,
    /// How many messages were left.
    pub messages: u64,
}

fn leftovers(list: &[Leftover]) -> String {
    list.iter()
        .map(|l| {
            format!(
                "{} holds {} message(s) from {} on {}",
                l.receiver,
                l.messages,
                l.sender,
                on(l.direction, l.channel)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A signal left raised beyond what any wait took when every kernel had finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftRaised {
    /// The PE whose signal it is.
    pub pe: PeId,
    /// The signal.
    pub signal: usize,
    /// The generation (call and phase) of the raises.
    pub generation: u64,
    /// What the raises of that generation add up to.
    pub value: u64,
    /// The highest value a wait of that generation took since its last reset.
    pub waited: u64,
}

fn left_raised(list: &[LeftRaised]) -> String {
    list.iter()
        .map(|l| {
            format!(
                "{}'s signal {} holds {} of generation {} but waits took it only to {}",
                l.pe, l.signal, l.value, l.generation, l.waited
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a lane blocked in `tl.wait_until` waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalWait {
    /// The signal.
    pub signal: usize,
    /// The comparison it waits for: `holds cmp until`.
    pub cmp: Cmp,
    /// The value it compares with.
    pub until: u64,
    /// What the signal holds for the lane's generation (call and phase).
    pub holds: u64,
    /// What raises of other generations add up to: they cannot satisfy the wait.
    pub other_generations: u64,
}

/// Everything needed to read a deadlock's cycle off: every blocked PE, what it waits in, and the state of
/// the queue it waits on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadlockReport {
    /// The blocked PEs, in rank order.
    pub blocked: Vec<BlockedPe>,
    /// How many kernels (lanes of PEs) had finished.
    pub finished: usize,
    /// How many kernels (lanes of PEs) ran.
    pub total: usize,
    /// Every message sent and not yet received, queue by queue (in the order queues were installed),
    /// oldest first: what a PE sent that its peer never took, often half of the cycle.
    pub unreceived: Vec<Unreceived>,
}

/// `W`, or `W channel 2` for a channel other than the first.
fn on(direction: Direction, channel: usize) -> String {
    if channel == 0 { direction.to_string() } else { format!("{direction} channel {channel}") }
}

/// A message waiting unreceived in a queue when the run deadlocked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreceived {
    /// The PE it waits for.
    pub receiver: PeId,
    /// The receiver's direction for the queue.
    pub direction: Direction,
    /// The queue's channel.
    pub channel: usize,
    /// The PE that sent it.
    pub sender: PeId,
    /// Its dtype.
    pub dtype: Dtype,
    /// Its length in elements.
    pub len: usize,
    /// The message generation it carries (call k, phase p: 3(k-1)+p).
    pub generation: u64,
}

/// Messages a deadlock report prints before it sums up the rest (the report holds them all).
const UNRECEIVED_SHOWN: usize = 32;

/// One PE (or lane of a PE) stuck in a deadlock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedPe {
    /// The PE.
    pub pe: PeId,
    /// The lane, for a PE that runs several.
    pub lane: Option<usize>,
    /// The channel of the queue it waits on (0 for a barrier).
    pub channel: usize,
    /// The operation it waits in.
    pub op: Op,
    /// The direction of that operation (none for a barrier).
    pub direction: Option<Direction>,
    /// The PE at the other end of the queue (none for a barrier).
    pub peer: Option<PeId>,
    /// Messages in the queue it waits on.
    pub queued: u64,
    /// Credits the sender has on that queue (for a send: zero, which is why it waits).
    pub credits: u64,
    /// The queue's depth.
    pub depth: u64,
    /// For a lane in `tl.wait_until`: the signal, the value it waits for and what it holds.
    pub signal: Option<SignalWait>,
    /// For a lane in `tl.wait_value` or `tl.alloc`: what it waits for, in words.
    pub waits_for: Option<String>,
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "deadlock: no kernel can make progress; {} of {} finished, {} blocked:",
            self.finished,
            self.total,
            self.blocked.len()
        )?;
        for b in &self.blocked {
            let who = match b.lane {
                Some(lane) => format!("{} lane {lane}", b.pe),
                None => b.pe.to_string(),
            };
            match (b.direction, b.peer) {
                (Some(d), Some(peer)) => writeln!(
                    f,
                    "  {who} waits in {} on {} (peer {}): {} queued, {} credits of {}",
                    b.op,
                    on(d, b.channel),
                    peer,
                    b.queued,
                    b.credits,
                    b.depth
                )?,
                _ => match b.signal {
                    Some(s) => {
                        let (op, signal, until, holds) = (b.op, s.signal, s.until, s.holds);
                        let cmp = s.cmp;
                        write!(f, "  {who} waits in {op} on signal {signal} for {cmp} {until}; it holds {holds}")?;
                        match s.other_generations {
                            0 => writeln!(f)?,
                            other => writeln!(f, " (and {other} raised in another call or phase, which do not count)")?,
                        }
                    }
                    None => match &b.waits_for {
                        Some(what) => writeln!(f, "  {who} waits in {} for {what}", b.op)?,
                        None => writeln!(f, "  {who} waits in {}", b.op)?,
                    },
                },
            }
        }
        if self.unreceived.is_empty() {
            return writeln!(f, "no message waits unreceived");
        }
        writeln!(f, "{} message(s) wait unreceived:", self.unreceived.len())?;
        for m in self.unreceived.iter().take(UNRECEIVED_SHOWN) {
            writeln!(
                f,
                "  for {} on {} from {}: {}[{}] of generation {}",
                m.receiver,
                on(m.direction, m.channel),
                m.sender,
                m.dtype,
                m.len,
                m.generation
            )?;
        }
        if self.unreceived.len() > UNRECEIVED_SHOWN {
            writeln!(f, "  ... and {} more", self.unreceived.len() - UNRECEIVED_SHOWN)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::rank_ranges;

    #[test]
    fn ranks_print_as_runs() {
        assert_eq!(rank_ranges(&[1, 4, 5, 6, 7, 9]), "1, 4..=7, 9");
        assert_eq!(rank_ranges(&[]), "none");
    }
}

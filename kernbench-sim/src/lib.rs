//! kernbench's mock runtime: one coroutine per participating PE, over credit-controlled IPCQs.
//!
//! ```text
//!   PE (0,0,0) ──E──▶ [IPCQ, depth slots] ──W──▶ PE (0,0,1)
//!              ◀──W── [IPCQ, depth slots] ◀──E──
//! ```
//!
//! Each directed neighbour edge of the install plan gets its own queue of `ipcq_depth` slots per
//! channel. `send` takes a credit (a free slot) and waits while there is none; `recv` takes the oldest
//! message, checks its dtype, length and generation, and hands the credit back. Runs are
//! deterministic: the round protocol (module `protocol`) makes one thread and many give the same bits.
//!
//! # The crate by concept
//!
//! Each module uses only those above it in this table (and `error` is used by all):
//!
//! | module | what lives there |
//! |---|---|
//! | `protocol`, `timing`, `race`, `wire`, `error` | the round protocol and the cells it makes safe to share; the timing model (clocks, channels, time reports); the race detector's clocks and shadows; the bytes between processes; why a run failed |
//! | `lanes` | the tasks (a lane of a PE each), what a lane keeps and waits for, what every kind of traffic sees of a PE, the watchdog's counts |
//! | `two_sided` | queues and credits, ports, send and receive, barriers, what a merge publishes |
//! | `one_sided` | each PE's symmetric heap and signals, one-sided operations, their delivery, the checks at the end |
//! | [`spread`] | a run over several processes: who holds which PE, each round's hand-over, the transports |
//! | `rounds` | the executor: poll, merge, placement of transfers, delivery, barriers, round after round |
//! | `diagnosis`, `report`, `trace` | why a stuck run is stuck and what a finished one left behind; the report; its spans as a Chrome / Perfetto trace |
//! | `setup` | [`Runtime`] and [`RunOptions`]: a run from a plan and buffers, installed, driven, diagnosed, reported |
//! | [`testing`] | [`testing::MockRun`]: a whole run in one call |
//!
//!
//! # Lanes
//!
//! A kernel may run as several *lanes* per PE ([`kernbench_core::Launch::lanes`],
//! `#[ccl_kernel(lanes = ...)]`): concurrent coroutines, as NCCL runs a collective over channels and an
//! MSCCL program over thread blocks. A run has as many channels per directed edge as the most lanes any
//! PE runs, each channel its own queue and credits. `tl.send` and `tl.recv` use the channel of the
//! lane's own index; `tl.send_on` and `tl.recv_on` name one. The first lane of a PE to send on a
//! (direction, channel) owns that sending side for the run, and the first to receive its receiving
//! side, so lanes never take each other's messages or credits; another lane that tries is stopped with
//! [`kernbench_core::KernelError::ChannelTaken`]. Lanes need not have their peer's index (message k on
//! A -> B, channel c goes to whichever lane of B receives from A on c), and the count may differ per PE.
//!
//! What a PE's lanes share, and how:
//!
//! - **buffers and notes**: one input, output and scratch per PE; a PE's woken lanes are polled
//!   together, in lane order, on one thread, so they see each other's stores at once;
//! - **links**: every lane's transfers are placed on the PE's channels like any transfer, in order of
//!   departure, so two lanes sending at once share the link (one message after the other);
//! - **compute**: a PE does one piece of work at a time, whichever lane asks: injecting a message,
//!   reducing, loading, storing. A lane's work starts at the earliest free interval of the PE's compute
//!   at or after the lane's clock (the wait shows as `compute wait` in traces). So more lanes hide
//!   latency but pay an injection per message on one engine: small messages favour few lanes.
//!
//! Each lane has its own clock, phase, watchdog count and figures; a PE's time is its last lane's,
//! its figures the sum of its lanes'. A barrier waits for every lane of every participant.
//!
//! # Symmetric memory
//!
//! A kernel's one-sided operations ([`kernbench_core::symmetric`]: `tl.put`, `tl.get`, signals,
//! fences, group barriers) follow the round protocol too: what a lane starts in a round waits in its
//! PE's outbox; when the round is merged it is placed on the channels with the round's messages, in the
//! same order (so a put shares its links as a send of its bytes would, a signal is an 8-byte message,
//! a get a request and a response), then applied to its target rank by rank, in the order each lane
//! made it. A wait on a signal completes when the raises that brought it to its value have landed.
//!
//! The race detector (on by default, [`RunOptions::race_detector`]) keeps a vector clock per lane, made
//! when the lane first touches symmetric memory or hears of a lane that did, and a shadow of each
//! symmetric buffer: who last wrote each byte range and who read it since. Signals, waits, messages
//! and barriers carry clocks; a plain put is released only by a later fence or quiet. Every access is
//! checked when it is made (a put's when it lands), so an unordered pair is reported whichever came
//! first, the same on any thread count. Kernels that use no symmetric memory carry no clocks.
//!
//! # Spread over processes
//!
//! [`RunOptions::spread_over`] spreads a run over the processes of an MPI job (`spread::Mpi`, with the
//! `mpi` feature) or of an in-memory group ([`spread::InMemory`]): each holds a block of SIPs and polls
//! only their PEs, and the rounds become bulk-synchronous steps with one hand-over each. Every process
//! returns the single-process run's report, bit for bit (or process 0 alone, the others their own
//! PEs' part of it: [`spread::ReportTo`]): see [`spread`] for what crosses
//! and why the bits do not depend on the number of processes.
//!
//! A broken kernel ends in an error, never a hang. A deadlock reads like this:
//!
//! ```text
//! deadlock: no kernel can make progress; 0 of 2 finished, 2 blocked:
//!   (sip 0, cube 0, pe 0) waits in recv on W (peer (sip 0, cube 0, pe 1)): 0 queued, 4 credits of 4
//!   (sip 0, cube 0, pe 1) waits in recv on W (peer (sip 0, cube 0, pe 0)): 0 queued, 4 credits of 4
//! no message waits unreceived
//! ```
//!
//! and lists, when there are some, the messages sent that nobody received (sender, dtype, length,
//! generation); a lane in `tl.wait_until` shows the signal, the value it waits for and what it holds.
//! Every kernel ending is not enough either: messages left in queues, signals raised beyond every wait
//! and (under the race detector) puts that nothing completed are errors too. A kernel that panics ends the run with its PE and message, without printing a panic
//! message or backtrace; a kernel that never ends is stopped by the runtime's watchdog
//! ([`RunOptions::loop_budget`]: iterations in a row without a step; [`RunOptions::step_budget`]).

mod diagnosis;
mod error;
mod faults;
mod lanes;
mod network;
mod one_sided;
mod protocol;
mod race;
mod report;
mod rounds;
mod setup;
pub mod spread;
pub mod testing;
mod timing;
mod trace;
mod two_sided;
mod wire;

pub use error::{
    BlockedPe, Cut, DeadlockReport, ExchangeError, LeftRaised, Leftover, RunError, SignalWait, Unreceived,
};
pub use faults::{Effect, Fault, FaultSyntaxError, Part};
pub use lanes::PeFigures;
pub use one_sided::{WindowError, Windows};
pub use report::{PeReport, RunReport};
pub use setup::{
    Call, DEFAULT_LOOP_BUDGET, DEFAULT_STEP_BUDGET, ExactRunError, PARALLEL_MIN_READY, PeBuffers, RunOptions, Runtime,
    Together,
};
/// The list type of a report's rarely filled fields (spans, lanes): read as a slice, and one word when
/// empty, so a million PEs' report holds no three-word empty list for each.
pub use thin_vec::ThinVec;
pub use timing::{ChannelTime, PeTime, Routing, Span, SpanKind, Straggler, TimeReport, Timing};
pub use trace::Trace;

/// The runtime under its earlier module path.
#[doc(hidden)]
pub mod run {
    pub use crate::setup::{
        Call, DEFAULT_LOOP_BUDGET, DEFAULT_STEP_BUDGET, ExactRunError, PARALLEL_MIN_READY, Runtime,
    };
}

/// The spread over processes under its earlier module path.
#[doc(hidden)]
pub use spread as exchange;

/// Asks the C allocator to keep memory it has freed for later allocations instead of handing it back to
/// the OS, and to serve large buffers from that pool too.
///
/// Tiles of a large collective are allocated and freed by the megabyte. Memory fresh from the OS must be
/// zeroed (and on a virtual machine, backed by the host) before first use, which can cost more than the
/// collective itself; reused memory costs nothing. Programs on glibc that run many large collectives
/// call this once at start: later calls of a size run faster, but the first can be slower (large
/// buffers then come from the heap, whose growth costs more than glibc's own mapping of them; the
/// README's Speed section has the figures). The `kernbench` binary runs on mimalloc instead. Affects
/// only glibc on Linux; elsewhere it does nothing.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning parameters; any value is valid for these two.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

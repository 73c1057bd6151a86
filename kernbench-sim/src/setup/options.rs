//! How a run goes: threads, the watchdog's budgets, the race detector, the timing model and the
//! processes it is spread over. One value, held by [`crate::Runtime`], the test harness's `MockRun`
//! and the facade's `Communicator`, each with the same builder methods ([`run_option_setters`]).

use std::sync::Arc;

use kernbench_core::counts::Counts;
use kernbench_core::{Carriage, Protocol, System};

use crate::error::RunError;
use crate::spread::{Exchange, Placement, ReportTo};
use crate::timing::Timing;

/// The most threads a run polls PEs on: see [`crate::Runtime::MAX_THREADS`].
pub(crate) const MAX_THREADS: usize = 1024;

/// Below this many PEs woken in a round, the round runs on one thread by default: handing work to
/// other threads costs more than it saves.
pub const PARALLEL_MIN_READY: usize = 512;

/// Loop iterations a lane's kernel may make in a row without completing a waiting step (a send,
/// receive, barrier, get or wait) before the watchdog stops it ([`RunOptions::loop_budget`]).
///
/// A kernel that loops without taking a step (spinning on a value that never changes, say) reaches it
/// within a second even in a debug build. The shipped kernels loop at most over their peers, chunks or
/// steps between two waits: a test runs each of them with a budget thousands of times smaller.
pub const DEFAULT_LOOP_BUDGET: u64 = 1 << 23;

/// Waiting steps (sends, receives, barriers, gets, waits) a lane's kernel may complete by default
/// before the watchdog stops it ([`RunOptions::step_budget`]): a kernel sending forever into a peer
/// that receives forever ends too. The shipped kernels use at most a few hundred per lane at the
/// sizes the command line runs.
pub const DEFAULT_STEP_BUDGET: u64 = 1 << 25;

/// How a run goes. Results never depend on the threads, the parallelism threshold or the processes;
/// the budgets only decide whether a run that takes too long is stopped; the race detector only whether
/// a race is reported; timing whether time is simulated.
///
/// # Examples
/// ```
/// use kernbench_sim::RunOptions;
/// let options = RunOptions::default().threads(2).race_detector(false);
/// assert_eq!((options.threads, options.race_detector), (2, false));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RunOptions {
    /// Threads to poll PEs on (at least 1, at most [`crate::Runtime::MAX_THREADS`]).
    pub threads: usize,
    /// A round is polled on several threads only when at least this many PEs are woken in it.
    pub parallel_min_ready: usize,
    /// The timing model's settings, or `None` for a run without simulated time.
    pub timing: Option<Timing>,
    /// Loop iterations a lane may make in a row without a waiting step.
    pub loop_budget: u64,
    /// Waiting steps a lane may complete.
    pub step_budget: u64,
    /// Whether the race detector checks symmetric memory.
    pub race_detector: bool,
    /// The processes the run is spread over, if any.
    pub spread: Option<Arc<dyn Exchange>>,
    /// Which processes of a spread run get the whole report.
    pub report_to: ReportTo,
    /// How the processes of a spread run place transfers on the channels.
    pub placement: Placement,
    /// Whether tiles carry their dtype and length but no bytes: simulated time only.
    pub timing_only: bool,
    /// The protocol every message is carried by, or `None`: as data, with no protocol's costs.
    pub protocol: Option<Protocol>,
    /// The most lanes a PE runs, fewer than its kernel asks for (NCCL's channels of one call), or
    /// `None`: as many as it asks for.
    pub max_lanes: Option<usize>,
    /// How many consecutive SIPs (GPUs) one host thread launches kernels on, one after another: the
    /// run style of nccl-tests' `-g`. At least 1 (the default: a thread, or a process, per GPU).
    pub gpus_per_thread: usize,
    /// The seed of the order in which one-sided operations that land at the same simulated time are
    /// applied, or `None` (the default): in rank order, each PE's in the order its lanes made them.
    pub schedule: Option<u64>,
    /// Under a [schedule](RunOptions::schedule), how far apart in simulated ns two one-sided operations
    /// may land and still be applied in either order (0, the default: only ties).
    pub schedule_jitter_ns: f64,
    /// The per-pair counts of an all-to-all-v or send/recv call, which its kernels read with
    /// `tl.counts()`; `None` for every other collective.
    pub counts: Option<Arc<Counts>>,
    /// What a process of a spread run calls to hand memory it has freed back to the OS, or `None`.
    pub release_memory: Option<fn()>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: 1,
            parallel_min_ready: PARALLEL_MIN_READY,
            timing: Some(Timing::default()),
            loop_budget: DEFAULT_LOOP_BUDGET,
            step_budget: DEFAULT_STEP_BUDGET,
            race_detector: true,
            spread: None,
            report_to: ReportTo::Every,
            placement: Placement::Auto,
            timing_only: false,
            protocol: None,
            max_lanes: None,
            gpus_per_thread: 1,
            schedule: None,
            schedule_jitter_ns: 0.0,
            counts: None,
            release_memory: None,
        }
    }
}

/// The builder methods of [`RunOptions`], for a type that holds one and can lend it mutably through
/// `fn options_mut(&mut self) -> &mut RunOptions`: one definition for [`RunOptions`] itself,
/// [`crate::Runtime`], `MockRun` and the facade's `Communicator`.
#[doc(hidden)]
#[macro_export]
macro_rules! run_option_setters {
    () => {
        /// Polls PEs on `threads` threads (at least 1; more than `Runtime::MAX_THREADS` fails the run
        /// before any thread starts). Results do not depend on it.
        pub fn threads(mut self, threads: usize) -> Self {
            self.options_mut().threads = threads.max(1);
            self
        }

        /// Polls a round on several threads only when at least `ready` PEs are woken in it (default
        /// 512). Results do not depend on it.
        pub fn parallel_min_ready(mut self, ready: usize) -> Self {
            self.options_mut().parallel_min_ready = ready.max(1);
            self
        }

        /// Simulates time with these settings (the default: cut-through, no stragglers, no trace), or
        /// not at all with `None` (outputs and figures are the same either way).
        pub fn timing(mut self, timing: ::std::option::Option<$crate::Timing>) -> Self {
            self.options_mut().timing = timing;
            self
        }

        /// Simulates time with links, NICs and PEs that slow down or fail ([`Fault`]($crate::Fault)),
        /// under the timing it has (or the default one): a failure the call cannot route round ends
        /// it with a named error.
        pub fn faults(mut self, faults: ::std::vec::Vec<$crate::Fault>) -> Self {
            self.options_mut().timing.get_or_insert_with(::std::default::Default::default).faults = faults;
            self
        }

        /// Lets each lane's kernel make at most `iterations` loop iterations in a row without completing
        /// a waiting step (a send, receive, barrier, get or wait; default 2^23); the next ends the run
        /// with the watchdog's `KernelError::Watchdog`. `#[ccl_kernel]` counts an iteration at the top
        /// of every `loop`, `while` and `for` body of a kernel or helper, so a kernel that loops without
        /// end between steps still ends; loops in plain functions it calls are not counted. Results do
        /// not depend on it, unless it stops the run.
        pub fn loop_budget(mut self, iterations: u64) -> Self {
            self.options_mut().loop_budget = iterations;
            self
        }

        /// Lets each lane's kernel complete at most `steps` waiting steps (sends, receives, barriers,
        /// gets, waits; default 2^25); the next ends the run with the watchdog's error. So a kernel that
        /// never finishes while still taking steps (sending forever into a peer that receives forever)
        /// ends too. Results do not depend on it, unless it stops the run.
        pub fn step_budget(mut self, steps: u64) -> Self {
            self.options_mut().step_budget = steps;
            self
        }

        /// Checks every access to symmetric memory against the happens-before order of the run (the
        /// default), or not (`false`). On, two unordered accesses to the same bytes (one a write) end
        /// the run in `KernelError::Race`, a read of bytes nobody wrote in `KernelError::Uninitialised`,
        /// and a put that neither a quiet nor its target's waits completed in `RunError::PutNotLanded`.
        /// Kernels that use no symmetric memory cost the same either way. A spread run does not look
        /// for races (a race's two sides may be in two processes).
        pub fn race_detector(mut self, on: bool) -> Self {
            self.options_mut().race_detector = on;
            self
        }

        /// Spreads each run over the processes of `exchange` (`kernbench_sim::spread`): each process
        /// holds a contiguous block of SIPs and starts, polls and merges only their PEs; every process
        /// makes the same calls and gets the same report, bit for bit the report of a run in one
        /// process (or process 0 alone does, the others their part: `report_to`); a run's errors read
        /// the same in every process (the failing PE's process returns the error, the others
        /// `RunError::Elsewhere` with its message).
        pub fn spread_over(mut self, exchange: ::std::sync::Arc<dyn $crate::spread::Exchange>) -> Self {
            self.options_mut().spread = ::std::option::Option::Some(exchange);
            self
        }

        /// Simulates time only (`true`; the default is `false`): tiles carry their dtype and length but
        /// no bytes, so a call of any size costs the memory and time of its messages, not of its data.
        /// Every operation is charged as with data, so simulated times are the same bits either way;
        /// outputs carry no data, and a kernel that reads a value out of a tile ends in the tile's
        /// `TileError::NoData`, naming its PE and what read it.
        pub fn timing_only(mut self, on: bool) -> Self {
            self.options_mut().timing_only = on;
            self
        }

        /// Carries every message by `protocol` (`None`, the default: as data, which a system without
        /// protocols does anyway): its lines on the wire, its step cost per message, its per-lane cap
        /// and its base latency, at the system's figures (`kernbench_core::machine::protocol`). A
        /// protocol the system gives no figures for fails the run before it starts.
        pub fn protocol(mut self, protocol: ::std::option::Option<::kernbench_core::Protocol>) -> Self {
            self.options_mut().protocol = protocol;
            self
        }

        /// Runs at most `lanes` lanes per PE (`None`, the default: as many as the kernel asks for), as
        /// NCCL runs a small call on fewer channels. A kernel that splits its data over `tl.lanes()`
        /// computes the same on fewer lanes.
        pub fn max_lanes(mut self, lanes: ::std::option::Option<usize>) -> Self {
            self.options_mut().max_lanes = lanes.map(|lanes| lanes.max(1));
            self
        }

        /// Launches the kernels of `gpus` consecutive SIPs from one host thread, one after another (1, the
        /// default: one thread or process per GPU): the kernel of the `k`-th of them starts `k` times the
        /// system's `call.launch_per_gpu_ns` after the first, as under nccl-tests' `-g`.
        pub fn gpus_per_thread(mut self, gpus: usize) -> Self {
            self.options_mut().gpus_per_thread = gpus.max(1);
            self
        }

        /// Applies one-sided operations that land at the same simulated time in the order seed `seed`
        /// picks (`None`, the default: in rank order): where atomics make the outcome depend on which
        /// lands first, another seed shows another outcome, and the same seed the same one again.
        /// Operations of one lane keep their order; times never change.
        pub fn schedule(mut self, seed: ::std::option::Option<u64>) -> Self {
            self.options_mut().schedule = seed;
            self
        }

        /// Under a schedule, lets one-sided operations that land up to `ns` apart be applied in
        /// either order (each lane's shifted by its own offset below `ns`, drawn from the seed): a
        /// bounded latency jitter for the order of application, which leaves times as they are.
        /// Negative or not finite counts as 0.
        pub fn schedule_jitter(mut self, ns: f64) -> Self {
            self.options_mut().schedule_jitter_ns = if ns.is_finite() { ns.max(0.0) } else { 0.0 };
            self
        }

        /// Runs the call with these per-pair counts (`None`, the default, for every collective but
        /// all-to-all-v and send/recv): what its kernels read with `tl.counts()`, and what its
        /// postcondition holds it to.
        pub fn counts(
            mut self,
            counts: ::std::option::Option<::std::sync::Arc<::kernbench_core::counts::Counts>>,
        ) -> Self {
            self.options_mut().counts = counts;
            self
        }

        /// In each process of a spread run, calls `release` (`None`, the default: nothing) whenever the
        /// run has freed a large part of its memory: as it starts (what making its plan and buffers
        /// freed), before its set-up's lists are made; the set-up's lists, before the network model is
        /// made; the network model, once its channels' times are reported; the PEs' states, before the
        /// report is gathered. It is for an allocator that keeps freed memory for its next allocations
        /// (mimalloc, glibc's) to hand it back to the OS. What a spread process frees there is largely
        /// what it held whole (the plan, every queue's route, the network model), and what it allocates
        /// next is large blocks the allocator takes from the OS anyway (the network model, the report's
        /// lists): kept, the freed memory would add to every process's peak. One process needs none
        /// of it, and is not asked. The `kernbench` binary passes mimalloc's collection (which, from
        /// then on, also has mimalloc purge what is freed at once). Results do not depend on it.
        pub fn release_memory(mut self, release: ::std::option::Option<fn()>) -> Self {
            self.options_mut().release_memory = release;
            self
        }

        /// Every option at once.
        pub fn options(mut self, options: $crate::RunOptions) -> Self {
            *self.options_mut() = options;
            self
        }
    };
    // The simulator's own builders choose who gets a spread run's report (the facade's communicator
    // returns every output in every process, so its runs report to every process).
    (with exchange and report_to) => {
        $crate::run_option_setters!(with exchange);

        /// Which processes of a spread run get the whole report: every process (the default), or
        /// process 0 alone, the others their own PEs' part (`kernbench_sim::spread::ReportTo`).
        pub fn report_to(mut self, to: $crate::spread::ReportTo) -> Self {
            self.options_mut().report_to = to;
            self
        }
    };
    // The builders of runs that can be spread: how their processes place transfers, and the earlier
    // name of `spread_over` (which they had).
    (with exchange) => {
        $crate::run_option_setters!();

        /// How the processes of a spread run place transfers on the channels: whole in every
        /// process, divided among them, or divided when the run is large (the default;
        /// `kernbench_sim::spread::Placement`). Results do not depend on it. A run that cannot
        /// place divided, asked to, fails before it starts.
        pub fn placement(mut self, placement: $crate::spread::Placement) -> Self {
            self.options_mut().placement = placement;
            self
        }

        /// Spreads each run over the processes of `exchange`: the earlier name of `spread_over`.
        #[deprecated(note = "renamed to spread_over")]
        pub fn exchange(self, exchange: ::std::sync::Arc<dyn $crate::spread::Exchange>) -> Self {
            self.spread_over(exchange)
        }
    };
}

impl RunOptions {
    /// Checks the options against `system` before anything is started.
    ///
    /// # Errors
    /// [`RunError::TooManyThreads`]; [`RunError::TimingOnlyUntimed`]; [`RunError::Protocol`];
    /// [`RunError::Undividable`]; [`RunError::BadStraggler`] from [`Timing::check`].
    pub fn check(&self, system: &System) -> Result<(), RunError> {
        if self.threads > MAX_THREADS {
            return Err(RunError::TooManyThreads { threads: self.threads, max: MAX_THREADS });
        }
        if self.timing_only && self.timing.is_none() {
            return Err(RunError::TimingOnlyUntimed);
        }
        self.carriage(system)?;
        if self.placement == Placement::Divided
            && let Some(why) = self.undividable(system)
        {
            return Err(RunError::Undividable { why });
        }
        match &self.timing {
            Some(timing) => timing.check(system),
            None => Ok(()),
        }
    }

    /// What carrying the run's messages costs on `system`, by its protocol.
    ///
    /// # Errors
    /// [`RunError::Protocol`] for a protocol the system gives no figures for.
    pub fn carriage(&self, system: &System) -> Result<Carriage, RunError> {
        Ok(system.carriage(self.protocol)?)
    }

    /// Why a spread run of these options on `system` cannot place divided, if it cannot
    /// ([`Placement::refusal`]).
    pub(crate) fn undividable(&self, system: &System) -> Option<&'static str> {
        let (traced, faulted) = self.timing.as_ref().map_or((false, false), |t| (t.trace, !t.faults.is_empty()));
        Placement::refusal(traced, faulted, system.multicast_switch().is_some())
    }

    fn options_mut(&mut self) -> &mut RunOptions {
        self
    }

    run_option_setters!();
}

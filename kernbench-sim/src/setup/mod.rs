//! Set-up: the [`Runtime`] a caller builds, and a run of it, from a plan and buffers to an installed
//! run, its rounds, its diagnosis and its report. Uses every other part of the crate.

mod install;
#[macro_use]
mod options;

pub use options::{DEFAULT_LOOP_BUDGET, DEFAULT_STEP_BUDGET, PARALLEL_MIN_READY, RunOptions};

use std::borrow::Cow;

use kernbench_core::postcondition::{CallFacts, PostconditionError, starting_output};
use kernbench_core::provenance::{self, Exactness};
use kernbench_core::tl::MAX_GENERATION;
use kernbench_core::{CheckedPlan, Collective, Launch, PeId, ReduceOp, System, Tile};

use crate::error::RunError;
use crate::one_sided::Windows;
use crate::report::RunReport;
use crate::spread::ReportTo;

/// A PE's buffers at the start of a run.
#[derive(Clone, Debug)]
pub struct PeBuffers {
    /// The PE's contribution.
    pub input: Tile,
    /// The output buffer, sized and typed by the collective (its contents are the starting value).
    pub output: Tile,
}

/// The per-call facts every PE's kernel sees (an exchange by counts takes its counts as the run option
/// [`RunOptions::counts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// The reduction operator.
    pub op: ReduceOp,
    /// The root rank of a rooted collective.
    pub root: usize,
    /// The call's generation; every message carries it, and a receiver rejects another.
    pub generation: u64,
}

impl Default for Call {
    fn default() -> Self {
        Call { op: ReduceOp::Sum, root: 0, generation: 1 }
    }
}

/// One of several calls run together ([`Runtime::run_together`]).
#[derive(Clone)]
pub struct Together<'k> {
    /// Its kernel.
    pub kernel: &'k dyn Launch,
    /// Its buffers, per participant in rank order.
    pub buffers: Vec<PeBuffers>,
    /// Its facts; its generation stamps its messages.
    pub call: Call,
    /// When its kernels start, in ns of simulated time after the run's start (before their launch
    /// and protocol delays).
    pub start_ns: f64,
}

impl std::fmt::Debug for Together<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Together")
            .field("buffers", &self.buffers.len())
            .field("call", &self.call)
            .field("start_ns", &self.start_ns)
            .finish_non_exhaustive()
    }
}

/// Runs kernels on a system.
///
/// # Examples
/// See [`crate::testing::MockRun`] for a whole run in one call.
#[derive(Clone, Debug)]
pub struct Runtime<'s> {
    system: &'s System,
    options: RunOptions,
}

impl<'s> Runtime<'s> {
    /// The most threads a runtime polls PEs on ([`Runtime::threads`]); a run asked for more ends in
    /// [`RunError::TooManyThreads`] before any thread is started.
    ///
    /// Rounds gain nothing from more threads than cores, and each thread costs a stack and a ready
    /// list; asking the OS for 100,000 made thread creation fail part way, and the process abort or
    /// hang. 1024 is far above any core count this simulator is run on.
    pub const MAX_THREADS: usize = options::MAX_THREADS;

    /// The most lanes a kernel may run as on one PE ([`Launch::lanes`]); more ends the run in
    /// [`RunError::BadLanes`]. NCCL runs at most 32 channels, and MSCCL programs a few dozen thread
    /// blocks per GPU; each lane costs a coroutine, and each channel a queue per directed edge.
    pub const MAX_LANES: usize = 256;

    /// A runtime for `system` with the default options: one thread, timed, race detector on.
    pub fn new(system: &'s System) -> Self {
        Runtime { system, options: RunOptions::default() }
    }

    fn options_mut(&mut self) -> &mut RunOptions {
        &mut self.options
    }

    run_option_setters!(with exchange and report_to);

    /// How its runs go.
    pub fn run_options(&self) -> &RunOptions {
        &self.options
    }

    /// The system it runs on.
    pub fn system(&self) -> &'s System {
        self.system
    }

    /// Runs `kernel` on every participant of `plan`, with `buffers` given per participant in rank
    /// order.
    ///
    /// # Errors
    /// [`RunError`]: a kernel's error, a panic, a deadlock, messages left in queues, buffers or a plan
    /// that do not fit (a plan checked on a system of another shape), a straggler out of range
    /// ([`crate::Timing::check`]), or threads that cannot be started.
    pub fn run(
        &self,
        plan: &CheckedPlan,
        kernel: &dyn Launch,
        buffers: Vec<PeBuffers>,
        call: Call,
    ) -> Result<RunReport, RunError> {
        self.run_windowed(plan, kernel, buffers, call, None)
    }

    /// [`Runtime::run`] with the communicator's `windows` ([`Windows`]): the kernel reaches them by
    /// name (`tl.window`), finds them as the communicator's last call left them, and leaves them for
    /// its next. Calls on one `Windows` must have increasing generations.
    ///
    /// # Errors
    /// As [`Runtime::run`].
    pub fn run_windowed(
        &self,
        plan: &CheckedPlan,
        kernel: &dyn Launch,
        buffers: Vec<PeBuffers>,
        call: Call,
        windows: Option<&mut Windows>,
    ) -> Result<RunReport, RunError> {
        self.run_planned(Cow::Borrowed(plan), kernel, buffers, call, windows)
    }

    /// [`Runtime::run`] of a plan the run may own: one it owns it frees once its queues are installed,
    /// before the rounds (a million PEs' plan is a tenth of a gigabyte that nothing reads after).
    pub(crate) fn run_planned(
        &self,
        plan: Cow<'_, CheckedPlan>,
        kernel: &dyn Launch,
        buffers: Vec<PeBuffers>,
        call: Call,
        windows: Option<&mut Windows>,
    ) -> Result<RunReport, RunError> {
        self.options.check(self.system)?;
        if call.generation == 0 {
            return Err(RunError::ZeroGeneration);
        }
        if call.generation > MAX_GENERATION {
            return Err(RunError::GenerationTooLarge { generation: call.generation });
        }
        let pes: Vec<PeId> = plan.participants().map(|p| p.pe).collect();
        if call.root >= pes.len() {
            return Err(RunError::BadRoot { root: call.root, participants: pes.len() });
        }
        if buffers.len() != pes.len() {
            return Err(RunError::BufferCount { participants: pes.len(), buffers: buffers.len() });
        }
        plan.fits(self.system)?;
        let one = Together { kernel, buffers, call, start_ns: 0.0 };
        let mut reports = install::run(self.system, &self.options, (plan, &pes), vec![one], windows)?;
        Ok(reports.pop().expect("a report per call"))
    }

    /// Runs several calls on `plan` at once, each with its kernel, buffers (rank order) and facts,
    /// from its start: one report per call, in order. The calls share what calls in flight together
    /// share on a machine: every link's channels (a transfer of one waits for the other's on the same
    /// channel, as the lanes of one call do) and every PE's engines; each has its own queues (its
    /// lanes' channels), buffers and barriers, so no message or barrier crosses between them.
    ///
    /// A call's report holds its PEs' outputs and figures and its lanes' times, its completion the
    /// last of its lanes' finish; the channels are the run's, shared.
    ///
    /// # Errors
    /// [`RunError::Together`] for no calls, calls of different plans' sizes or a spread run; one-sided
    /// operations in a kernel run together end in `KernelError::Unsupported` (the calls' symmetric
    /// memory is not kept apart); and as [`Runtime::run`].
    pub fn run_together(&self, plan: &CheckedPlan, calls: Vec<Together<'_>>) -> Result<Vec<RunReport>, RunError> {
        self.options.check(self.system)?;
        if calls.is_empty() {
            return Err(RunError::Together { why: "no calls were given".to_owned() });
        }
        if self.options.spread.is_some() && calls.len() > 1 {
            return Err(RunError::Together { why: "calls run together are not spread over processes".to_owned() });
        }
        let pes: Vec<PeId> = plan.participants().map(|p| p.pe).collect();
        for (k, together) in calls.iter().enumerate() {
            let call = together.call;
            if call.generation == 0 {
                return Err(RunError::ZeroGeneration);
            }
            if call.generation > MAX_GENERATION {
                return Err(RunError::GenerationTooLarge { generation: call.generation });
            }
            if call.root >= pes.len() {
                return Err(RunError::BadRoot { root: call.root, participants: pes.len() });
            }
            if together.buffers.len() != pes.len() {
                return Err(RunError::BufferCount { participants: pes.len(), buffers: together.buffers.len() });
            }
            if !(together.start_ns.is_finite() && (0.0..=System::MAX_TIME_NS).contains(&together.start_ns)) {
                let why =
                    format!("call {k} starts at {} ns: expected 0 to {:e} ns", together.start_ns, System::MAX_TIME_NS);
                return Err(RunError::Together { why });
            }
        }
        plan.fits(self.system)?;
        install::run(self.system, &self.options, (Cow::Borrowed(plan), &pes), calls, None)
    }

    /// Runs `kernel` on provenance inputs shaped as `inputs` ([`kernbench_core::provenance`]), untimed,
    /// and checks that every output element holds exactly the contributions `call`'s collective says,
    /// the outputs starting as [`starting_output`] makes them.
    ///
    /// # Errors
    /// [`ExactRunError`]: the run's error, or a reference that cannot be made (a root out of range).
    pub fn run_exact(
        &self,
        plan: &CheckedPlan,
        kernel: &dyn Launch,
        call: (CallFacts, u64),
        inputs: &[Tile],
    ) -> Result<Exactness, ExactRunError> {
        let (facts, generation) = call;
        let inputs = provenance::inputs(inputs);
        let n = inputs.len();
        let before: Vec<Tile> =
            inputs.iter().enumerate().map(|(rank, input)| starting_output(&facts, input, rank, n)).collect();
        let buffers = inputs.iter().zip(&before).map(|(i, o)| PeBuffers { input: i.clone(), output: o.clone() });
        let op = provenance::call(&facts).op;
        let call = Call { op, root: facts.root, generation };
        // The check reads every PE's output, in every process.
        let runtime = self.clone().timing(None).counts(facts.counts.clone()).report_to(ReportTo::Every);
        let run = runtime.run(plan, kernel, buffers.collect(), call)?;
        let outputs: Vec<Tile> = run.pes().iter().map(|p| p.output.clone()).collect();
        let pes: Vec<PeId> = run.pes().iter().map(|p| p.pe).collect();
        Ok(provenance::check(&facts, &pes, &inputs, &before, &outputs)?)
    }

    /// Runs `kernel` ([`Runtime::run_windowed`]), then, when `exact` names the call's collective,
    /// again on provenance inputs shaped as the run's ([`Runtime::run_exact`]): the report, and the
    /// exact check's verdict or why it gave none (a call with windows gets none:
    /// [`ExactRunError::Windows`]).
    ///
    /// # Errors
    /// The first run's [`RunError`].
    #[allow(clippy::type_complexity)]
    pub fn run_then_exact(
        &self,
        plan: &CheckedPlan,
        kernel: &dyn Launch,
        buffers: Vec<PeBuffers>,
        (call, windows): (Call, Option<&mut Windows>),
        exact: Option<Collective>,
    ) -> Result<(RunReport, Option<Result<Exactness, ExactRunError>>), RunError> {
        let inputs: Option<Vec<Tile>> = exact.map(|_| buffers.iter().map(|b| b.input.clone()).collect());
        let registered: Vec<&'static str> =
            windows.as_deref().map(|w| w.registered().iter().map(|w| w.name).collect()).unwrap_or_default();
        let counts = &self.options.counts;
        let facts = |collective| CallFacts { collective, op: call.op, root: call.root, counts: counts.clone() };
        let facts = exact.map(facts);
        let generation = call.generation;
        let report = self.run_windowed(plan, kernel, buffers, call, windows)?;
        let exact = facts.zip(inputs).map(|(facts, inputs)| {
            if !registered.is_empty() {
                return Err(ExactRunError::Windows { windows: registered });
            }
            self.run_exact(plan, kernel, (facts, generation), &inputs)
        });
        Ok((report, exact))
    }
}

/// Why a provenance run gave no verdict.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ExactRunError {
    /// The run failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The collective's reference could not be made.
    #[error(transparent)]
    Reference(#[from] PostconditionError),
    /// The call uses windows: the provenance run carries `i64` provenance where the windows hold the
    /// call's data, and would start from fresh windows, not the ones the call found.
    #[error(
        "no exact check of a call with windows [{}]: the provenance run would need windows of its own i64 data, starting as the call's did",
        windows.join(", ")
    )]
    Windows {
        /// The windows registered.
        windows: Vec<&'static str>,
    },
}

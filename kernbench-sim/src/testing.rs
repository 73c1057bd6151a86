//! Mock runs in one call, for tests: build the plan, bind the kernel's arguments, fill the inputs, run,
//! and check exactly when asked.

use std::borrow::Cow;
use std::rc::Rc;

use kernbench_core::postcondition::{CallFacts, starting_output};
use kernbench_core::program::ProgramKernel;
use kernbench_core::provenance::Exactness;
use kernbench_core::{
    ArgsError, Collective, Dtype, InstallPlan, KernelDef, Launch, PeId, PlanError, ReduceOp, System, Tile,
};

use crate::error::RunError;
use crate::one_sided::{WindowError, Windows};
use crate::report::RunReport;
use crate::setup::{Call, ExactRunError, PeBuffers, RunOptions, Runtime};
use crate::spread::SipBlocks;

/// Why a mock run did not produce a report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MockError {
    /// The topology and mapper do not make a plan for the system.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The kernel's parameters do not fit its argument struct.
    #[error(transparent)]
    Args(#[from] ArgsError),
    /// Parameters were given for a kernel that is already made ([`MockRun::launch`]): its parameters
    /// are bound where it was made.
    #[error(
        "parameters {0} were given for a kernel that is already made (MockRun::launch): bind them where the kernel is made, or give MockRun::new its KernelDef"
    )]
    ParamsOfALaunch(serde_json::Value),
    /// The run failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The provenance run of [`MockRun::exact`] found an output element that does not hold exactly
    /// the contributions its collective says.
    #[error("{0}")]
    Exact(Exactness),
    /// The provenance run of [`MockRun::exact`] failed, or its reference could not be made.
    #[error(transparent)]
    ExactRun(#[from] ExactRunError),
    /// A window of [`MockRun::window`] could not be registered.
    #[error(transparent)]
    Window(#[from] WindowError),
    /// Call `call` of a run of several ([`MockRun::calls`]) failed.
    #[error("call {call} of {calls}: {source}")]
    Call {
        /// The failing call, from 1.
        call: u64,
        /// The calls asked for.
        calls: u64,
        /// Why it failed.
        source: RunError,
    },
    /// [`MockRun::exact`] with several calls or windows: the provenance run is one call on fresh
    /// memory, so it would check another run than the one asked for.
    #[error(
        "an exact check of a run of {calls} call(s) over {windows} window(s): MockRun::exact checks one call without windows"
    )]
    ExactAcrossCalls {
        /// The calls asked for.
        calls: u64,
        /// The windows registered.
        windows: usize,
    },
}

/// What [`MockRun::schedules`] found: how many seeds it ran, and the first whose outcome differs
/// from the default order's (or fails).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedules {
    /// Seeds run, up to and including the first that differs.
    pub runs: usize,
    /// The first seed whose outcome differs, if any.
    pub differs: Option<Divergence>,
}

/// A seed whose outcome differs from the default order's: replay it with
/// `MockRun::schedule(Some(seed))`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The seed.
    pub seed: u64,
    /// How its outcome differs, in words.
    pub what: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "schedule seed {}: {} (replay it with .schedule(Some({})))", self.seed, self.what, self.seed)
    }
}

/// Makes a PE's input from its id and rank.
type InputFn<'a> = Rc<dyn Fn(PeId, usize) -> Tile + 'a>;

/// Makes a PE's starting output from its id, rank and input.
type OutputFn<'a> = Rc<dyn Fn(PeId, usize, &Tile) -> Tile + 'a>;

/// The kernel of a mock run: a definition whose parameters the run binds, or a kernel already made.
#[derive(Clone, Copy)]
enum MockKernel<'a> {
    Def(&'a KernelDef),
    Made(&'a dyn Launch),
}

/// A mock run: a kernel on a topology and mapper of a system, with inputs made per PE.
///
/// Each PE's output buffer starts as a copy of its input (the in-place convention of all-reduce) or, once
/// told the collective ([`MockRun::collective`]), as that collective's usual starting buffer;
/// [`MockRun::outputs`] sets it outright.
///
/// # Examples
/// A chunk program (here the example ring all-reduce of `kernbench_core::program::examples`) run as
/// its executor runs it, checked exactly:
/// ```
/// use std::sync::Arc;
/// use kernbench_core::program::{ProgramKernel, examples};
/// use kernbench_core::{Collective, Dtype, System, Tile};
/// use kernbench_sim::testing::MockRun;
/// let system = System::shape(4, 1, 1, 1).unwrap();
/// let kernel = ProgramKernel::new(Arc::new(examples::ring_allreduce(4, 1).unwrap()));
/// let report = MockRun::program(&system, &kernel)
///     .inputs(|_pe, rank| Tile::filled(Dtype::F32, 64, (rank + 1) as f64))
///     .exact(Collective::AllReduce)
///     .run()
///     .unwrap();
/// assert!(report.pes().iter().all(|p| p.output == Tile::filled(Dtype::F32, 64, 10.0)));
/// ```
pub struct MockRun<'a> {
    system: &'a System,
    topology: &'a str,
    mapper: &'a str,
    kernel: MockKernel<'a>,
    params: serde_json::Value,
    inputs: InputFn<'a>,
    outputs: Option<OutputFn<'a>>,
    collective: Option<Collective>,
    call: Call,
    options: RunOptions,
    exact: Option<Collective>,
    windows: Vec<(&'static str, Dtype, usize)>,
    calls: u64,
}

impl std::fmt::Debug for MockRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kernel = match self.kernel {
            MockKernel::Def(def) => def.name,
            MockKernel::Made(_) => "(made)",
        };
        f.debug_struct("MockRun")
            .field("topology", &self.topology)
            .field("mapper", &self.mapper)
            .field("kernel", &kernel)
            .field("collective", &self.collective)
            .field("call", &self.call)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<'a> MockRun<'a> {
    /// A run of `kernel` over `topology` with the participants `mapper` picks; inputs default to 16
    /// f32 elements of `rank + 1`.
    pub fn new(system: &'a System, topology: &'a str, mapper: &'a str, kernel: &'a KernelDef) -> Self {
        MockRun::of(system, topology, mapper, MockKernel::Def(kernel))
    }

    /// A run of a kernel already made, such as a chunk program's [`ProgramKernel`], over `topology` with
    /// the participants `mapper` picks.
    pub fn launch(system: &'a System, topology: &'a str, mapper: &'a str, kernel: &'a dyn Launch) -> Self {
        MockRun::of(system, topology, mapper, MockKernel::Made(kernel))
    }

    /// A run of a chunk program on the SIP leaders over `full`, as its executor runs it, told the
    /// program's collective ([`MockRun::collective`]).
    pub fn program(system: &'a System, program: &'a ProgramKernel) -> Self {
        MockRun::launch(system, "full", "leader_only", program).collective(program.program().collective)
    }

    fn of(system: &'a System, topology: &'a str, mapper: &'a str, kernel: MockKernel<'a>) -> Self {
        MockRun {
            system,
            topology,
            mapper,
            kernel,
            params: serde_json::Value::Object(serde_json::Map::new()),
            inputs: Rc::new(|_, rank| Tile::filled(kernbench_core::Dtype::F32, 16, (rank + 1) as f64)),
            outputs: None,
            collective: None,
            call: Call::default(),
            options: RunOptions::default(),
            exact: None,
            windows: Vec::new(),
            calls: 1,
        }
    }

    /// Registers window `name` of `len` elements of `dtype` ([`Windows`]): the kernel reaches it with
    /// `tl.window(name)`, and it keeps its values from one of the run's [calls](MockRun::calls) to the
    /// next.
    pub fn window(mut self, name: &'static str, dtype: Dtype, len: usize) -> Self {
        self.windows.push((name, dtype, len));
        self
    }

    /// Runs the kernel `calls` times (at least once), as a communicator's consecutive calls: each call
    /// has the next generation and fresh buffers, and finds the windows as the last one left them. The
    /// report is the last call's; a failing call ends the run in [`MockError::Call`].
    pub fn calls(mut self, calls: u64) -> Self {
        self.calls = calls.max(1);
        self
    }

    fn options_mut(&mut self) -> &mut RunOptions {
        &mut self.options
    }

    crate::run_option_setters!(with exchange and report_to);

    /// The kernel's parameters as a JSON object (`json!({"chunks": 4})`); anything else is an
    /// [`ArgsError`] when the run starts.
    pub fn params(mut self, params: serde_json::Value) -> Self {
        self.params = params;
        self
    }

    /// Each PE's input, from its id and rank.
    pub fn inputs(mut self, f: impl Fn(PeId, usize) -> Tile + 'a) -> Self {
        self.inputs = Rc::new(f);
        self
    }

    /// Each PE's starting output buffer, from its id, rank and input.
    pub fn outputs(mut self, f: impl Fn(PeId, usize, &Tile) -> Tile + 'a) -> Self {
        self.outputs = Some(Rc::new(f));
        self
    }

    /// The collective the kernel computes: each PE's output then starts as the collective's usual
    /// starting buffer ([`starting_output`]: a zeroed buffer of `n` blocks for all-gather and
    /// all-to-all, one block for reduce-scatter, a copy of the input for all-reduce and reduce, zeros
    /// for broadcast), unless [`MockRun::outputs`] says otherwise.
    pub fn collective(mut self, collective: Collective) -> Self {
        self.collective = Some(collective);
        self
    }

    /// The reduction operator of the call.
    pub fn op(mut self, op: ReduceOp) -> Self {
        self.call.op = op;
        self
    }

    /// The call's facts (operator, root, generation).
    pub fn call(mut self, call: Call) -> Self {
        self.call = call;
        self
    }

    /// After the run, runs the kernel again on provenance inputs ([`kernbench_core::provenance`]) and
    /// checks that every output element holds exactly the contributions `collective` says (the outputs
    /// starting as [`starting_output`] makes them): an element that does not ends the run in
    /// [`MockError::Exact`], naming the rank, the element and the contribution at fault. The report is
    /// the first run's.
    pub fn exact(mut self, collective: Collective) -> Self {
        self.exact = Some(collective);
        self
    }

    /// Builds the plan and runs the kernel.
    ///
    /// # Errors
    /// [`MockError`] from the plan, the kernel's arguments or the run.
    pub fn run(&self) -> Result<RunReport, MockError> {
        let plan = InstallPlan::build(self.system, self.topology, self.mapper)?;
        let bound;
        let kernel: &dyn Launch = match self.kernel {
            MockKernel::Def(def) => {
                let serde_json::Value::Object(params) = &self.params else {
                    let message =
                        format!("parameters must be a JSON object such as {{\"chunks\": 4}}, got {}", self.params);
                    return Err(ArgsError::new(def.name, def.params, message).into());
                };
                bound = def.instantiate(params)?;
                &*bound
            }
            MockKernel::Made(kernel) => {
                if self.params.as_object().is_none_or(|p| !p.is_empty()) {
                    return Err(MockError::ParamsOfALaunch(self.params.clone()));
                }
                kernel
            }
        };
        let runtime = Runtime::new(self.system).options(self.options.clone());
        if self.calls == 1 && self.windows.is_empty() {
            let buffers = self.buffers(&plan);
            if self.exact.is_none() {
                // The run owns the plan, and frees it before its rounds.
                return Ok(runtime.run_planned(Cow::Owned(plan), kernel, buffers, self.call, None)?);
            }
            let (report, exact) = runtime.run_then_exact(&plan, kernel, buffers, (self.call, None), self.exact)?;
            return match exact.transpose()? {
                Some(exactness) if !exactness.held => Err(MockError::Exact(exactness)),
                _ => Ok(report),
            };
        }
        if self.exact.is_some() {
            return Err(MockError::ExactAcrossCalls { calls: self.calls, windows: self.windows.len() });
        }
        let mut windows = Windows::new();
        for &(name, dtype, len) in &self.windows {
            windows.register(name, dtype, len)?;
        }
        let mut last = None;
        for k in 0..self.calls {
            let call = Call { generation: self.call.generation + k, ..self.call };
            let buffers = self.buffers(&plan);
            let report = runtime.run_windowed(&plan, kernel, buffers, call, Some(&mut windows));
            let report = report.map_err(|source| MockError::Call { call: k + 1, calls: self.calls, source })?;
            last = Some(report);
        }
        Ok(last.expect("at least one call"))
    }

    /// Runs the kernel in the default order of same-time operations, then under each of `seeds`
    /// ([`RunOptions::schedule`]), and stops at the first seed whose outcome (every PE's output, or
    /// the error) differs from the default's. Without atomics (or with atomics whose order does not
    /// matter) every seed gives the default's outcome.
    ///
    /// # Errors
    /// [`MockError`] when the plan or the kernel's arguments fail (a failing run is an outcome).
    pub fn schedules(&self, seeds: impl IntoIterator<Item = u64>) -> Result<Schedules, MockError> {
        let outcome = |seed: Option<u64>| -> Result<Result<Vec<Tile>, String>, MockError> {
            let mut run = MockRun { options: self.options.clone(), ..self.clone_config() };
            run.options.schedule = seed;
            match run.run() {
                Ok(report) => Ok(Ok(report.pes().iter().map(|p| p.output.clone()).collect())),
                Err(e @ (MockError::Plan(_) | MockError::Args(_) | MockError::Window(_))) => Err(e),
                Err(e) => Ok(Err(e.to_string())),
            }
        };
        let default = outcome(None)?;
        let mut runs = 0;
        for seed in seeds {
            runs += 1;
            let what = match (&default, outcome(Some(seed))?) {
                (Ok(expected), Ok(got)) => match expected.iter().zip(&got).position(|(e, g)| !e.bit_eq(g)) {
                    Some(rank) => format!("rank {rank}'s output differs from the default order's"),
                    None => continue,
                },
                (Err(expected), Err(got)) if *expected == got => continue,
                (_, Err(got)) => format!("the run failed: {got}"),
                (Err(expected), Ok(_)) => format!("the run succeeded where the default order's failed: {expected}"),
            };
            return Ok(Schedules { runs, differs: Some(Divergence { seed, what }) });
        }
        Ok(Schedules { runs, differs: None })
    }

    /// The run's settings, to run again with other options.
    fn clone_config(&self) -> MockRun<'a> {
        MockRun {
            system: self.system,
            topology: self.topology,
            mapper: self.mapper,
            kernel: self.kernel,
            params: self.params.clone(),
            inputs: Rc::clone(&self.inputs),
            outputs: self.outputs.clone(),
            collective: self.collective,
            call: self.call,
            options: self.options.clone(),
            exact: self.exact,
            windows: self.windows.clone(),
            calls: self.calls,
        }
    }

    /// Every participant's buffers. In a run spread over processes only this process's PEs need theirs
    /// (the exact check compares every PE's output with every input, in every process).
    fn buffers(&self, plan: &InstallPlan) -> Vec<PeBuffers> {
        let blocks = self.options.spread.as_ref().filter(|_| self.exact.is_none()).and_then(|exchange| {
            SipBlocks::new(self.system, exchange.processes()).ok().map(|blocks| (blocks, exchange.process()))
        });
        let elsewhere = |pe: PeId| blocks.is_some_and(|(blocks, me)| blocks.process_of(pe.sip as usize) != me);
        let n = plan.len();
        // One empty tile for every PE of another process: a tile each would be an allocation each.
        let none = Tile::zeros(kernbench_core::Dtype::F32, 0);
        plan.participants()
            .map(|p| {
                if elsewhere(p.pe) {
                    return PeBuffers { input: none.clone(), output: none.clone() };
                }
                let input = (self.inputs)(p.pe, p.rank);
                let output = match (&self.outputs, self.collective) {
                    (Some(f), _) => f(p.pe, p.rank, &input),
                    (None, Some(collective)) => {
                        let facts = CallFacts {
                            collective,
                            op: self.call.op,
                            root: self.call.root,
                            counts: self.options.counts.clone(),
                        };
                        starting_output(&facts, &input, p.rank, n)
                    }
                    (None, None) => input.clone(),
                };
                PeBuffers { input, output }
            })
            .collect()
    }
}

/// Runs `kernel` with default parameters and inputs: a whole mock run in one call.
///
/// # Errors
/// As [`MockRun::run`].
pub fn run_kernel_in_mock(
    system: &System,
    topology: &str,
    mapper: &str,
    kernel: &KernelDef,
    inputs: impl Fn(PeId, usize) -> Tile,
) -> Result<RunReport, MockError> {
    MockRun::new(system, topology, mapper, kernel).inputs(inputs).run()
}

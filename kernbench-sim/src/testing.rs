//! Mock runs in one call, for tests: build the plan, bind the kernel's arguments, fill the inputs, run.

use kernbench_core::postcondition::CallFacts;
use kernbench_core::provenance::Exactness;
use kernbench_core::{ArgsError, Collective, InstallPlan, KernelDef, PeId, PlanError, ReduceOp, System, Tile};

use std::sync::Arc;

use crate::exchange::{Exchange, Partition};
use crate::{Call, ExactRunError, PeBuffers, RunError, RunReport, Runtime, Timing};

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
}

/// Makes a PE's input from its id and rank.
type InputFn<'a> = Box<dyn Fn(PeId, usize) -> Tile + 'a>;

/// Makes a PE's starting output from its id, rank and input.
type OutputFn<'a> = Box<dyn Fn(PeId, usize, &Tile) -> Tile + 'a>;

/// A mock run: a kernel on a topology and mapper of a system, with inputs made per PE.
///
/// Each PE's output buffer starts as a copy of its input (the in-place convention of all-reduce);
/// [`MockRun::outputs`] changes that.
///
/// # Examples
/// ```ignore
/// let report = MockRun::new(&system, "ring_1d", "leader_only", &ring_allreduce::KERNEL)
///     .params(serde_json::json!({"chunks": 2}))
///     .inputs(|_pe, rank| Tile::filled(Dtype::F32, 64, (rank + 1) as f64))
///     .run()?;
/// ```
pub struct MockRun<'a> {
    system: &'a System,
    topology: &'a str,
    mapper: &'a str,
    kernel: &'a KernelDef,
    params: serde_json::Value,
    inputs: InputFn<'a>,
    outputs: Option<OutputFn<'a>>,
    call: Call,
    threads: usize,
    parallel_min_ready: usize,
    timing: Option<Timing>,
    loop_budget: u64,
    step_budget: u64,
    race_detector: bool,
    exact: Option<Collective>,
    exchange: Option<Arc<dyn Exchange>>,
}

impl std::fmt::Debug for MockRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockRun")
            .field("topology", &self.topology)
            .field("mapper", &self.mapper)
            .field("kernel", &self.kernel.name)
            .field("call", &self.call)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

impl<'a> MockRun<'a> {
    /// A run of `kernel` over `topology` with the participants `mapper` picks; inputs default to 16
    /// f32 elements of `rank + 1`.
    pub fn new(system: &'a System, topology: &'a str, mapper: &'a str, kernel: &'a KernelDef) -> Self {
        MockRun {
            system,
            topology,
            mapper,
            kernel,
            params: serde_json::Value::Object(serde_json::Map::new()),
            inputs: Box::new(|_, rank| Tile::filled(kernbench_core::Dtype::F32, 16, (rank + 1) as f64)),
            outputs: None,
            call: Call::default(),
            threads: 1,
            parallel_min_ready: crate::run::PARALLEL_MIN_READY,
            timing: Some(Timing::default()),
            loop_budget: crate::run::DEFAULT_LOOP_BUDGET,
            step_budget: crate::run::DEFAULT_STEP_BUDGET,
            race_detector: true,
            exchange: None,
            exact: None,
        }
    }

    /// The kernel's parameters as a JSON object (`json!({"chunks": 4})`); anything else is an
    /// [`ArgsError`] when the run starts.
    pub fn params(mut self, params: serde_json::Value) -> Self {
        self.params = params;
        self
    }

    /// Each PE's input, from its id and rank.
    pub fn inputs(mut self, f: impl Fn(PeId, usize) -> Tile + 'a) -> Self {
        self.inputs = Box::new(f);
        self
    }

    /// Each PE's starting output buffer, from its id, rank and input.
    pub fn outputs(mut self, f: impl Fn(PeId, usize, &Tile) -> Tile + 'a) -> Self {
        self.outputs = Some(Box::new(f));
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

    /// The number of threads to poll PEs on.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Polls a round on several threads once this many PEs are woken in it.
    pub fn parallel_min_ready(mut self, ready: usize) -> Self {
        self.parallel_min_ready = ready;
        self
    }

    /// Simulates time with these settings (the default: cut-through, no stragglers, no trace), or not at
    /// all with `None`; see [`Runtime::timing`].
    pub fn timing(mut self, timing: Option<Timing>) -> Self {
        self.timing = timing;
        self
    }

    /// The watchdog's loop budget per PE; see [`Runtime::loop_budget`].
    pub fn loop_budget(mut self, iterations: u64) -> Self {
        self.loop_budget = iterations;
        self
    }

    /// The watchdog's step budget per PE; see [`Runtime::step_budget`].
    pub fn step_budget(mut self, steps: u64) -> Self {
        self.step_budget = steps;
        self
    }

    /// Whether the race detector checks symmetric memory (on by default); see [`Runtime::race_detector`].
    pub fn race_detector(mut self, on: bool) -> Self {
        self.race_detector = on;
        self
    }

    /// Spreads the run over the processes of `exchange`: every process makes the same `MockRun` and
    /// gets the same report; see [`Runtime::exchange`].
    pub fn exchange(mut self, exchange: Arc<dyn Exchange>) -> Self {
        self.exchange = Some(exchange);
        self
    }

    /// After the run, runs the kernel again on provenance inputs ([`kernbench_core::provenance`]) and
    /// checks that every output element holds exactly the contributions `collective` says (the outputs
    /// starting as [`kernbench_core::postcondition::starting_output`] makes them): an element that does
    /// not ends the run in [`MockError::Exact`], naming the rank, the element and the contribution at
    /// fault. The report is the first run's.
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
        let serde_json::Value::Object(params) = &self.params else {
            let message = format!("parameters must be a JSON object such as {{\"chunks\": 4}}, got {}", self.params);
            return Err(ArgsError::new(self.kernel.name, self.kernel.params, message).into());
        };
        let kernel = self.kernel.instantiate(params)?;
        // In a run spread over processes, only this process's PEs need their buffers (the exact check
        // compares every PE's output with every input, in every process).
        let elsewhere = |pe: PeId| {
            let exchange = self.exchange.as_ref().filter(|_| self.exact.is_none())?;
            let partition = Partition::new(self.system, exchange.processes()).ok()?;
            Some(partition.process_of(pe.sip as usize) != exchange.process())
        };
        let buffers: Vec<PeBuffers> = plan
            .participants()
            .map(|p| {
                if elsewhere(p.pe) == Some(true) {
                    let none = Tile::zeros(kernbench_core::Dtype::F32, 0);
                    return PeBuffers { input: none.clone(), output: none };
                }
                let input = (self.inputs)(p.pe, p.rank);
                let output = match &self.outputs {
                    Some(f) => f(p.pe, p.rank, &input),
                    None => input.clone(),
                };
                PeBuffers { input, output }
            })
            .collect();
        let mut runtime = Runtime::new(self.system)
            .threads(self.threads)
            .parallel_min_ready(self.parallel_min_ready)
            .timing(self.timing.clone())
            .loop_budget(self.loop_budget)
            .step_budget(self.step_budget)
            .race_detector(self.race_detector);
        if let Some(exchange) = &self.exchange {
            runtime = runtime.exchange(Arc::clone(exchange));
        }
        let inputs: Vec<Tile> = buffers.iter().map(|b| b.input.clone()).collect();
        let report = runtime.run(&plan, &*kernel, buffers, self.call)?;
        if let Some(collective) = self.exact {
            let facts = CallFacts { collective, op: self.call.op, root: self.call.root };
            let exactness = runtime.run_exact(&plan, &*kernel, (facts, self.call.generation), &inputs)?;
            if !exactness.held {
                return Err(MockError::Exact(exactness));
            }
        }
        Ok(report)
    }
}

/// Runs `kernel` with default parameters and inputs: the one-call helper of the ADR's test strategy.
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

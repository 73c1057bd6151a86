//! The front end: collectives on a system, each choosing its algorithm from the registry.
//!
//! ```text
//! Communicator::all_reduce(&mut tensor, Sum)
//!    │ registry.select(all_reduce, bytes per SIP, layout)  -> algorithm, and the rule that chose it
//!    │ algorithm.plan (once per algorithm) + its validator  -> who runs it, with which neighbours
//!    │ timing's stragglers checked against the spec's ranges
//!    │ estimate::{peak_memory, messages} against limits     -> refused before anything is allocated
//!    │ Runtime::run, one coroutine per participating PE     -> outputs and per-PE figures
//!    ▼ postcondition::check against a reference             -> right or wrong, and where
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use kernbench_core::counts::Counts;
use kernbench_core::postcondition::{Postcondition, PostconditionError};
use kernbench_core::provenance::Exactness;
use kernbench_core::{
    Algorithm, CheckedPlan, Collective, DistTensor, Dtype, Layout, LayoutError, PeId, PlanError, ReduceOp, Registry,
    RegistryError, Symmetric, System, Tile, Tuned, ValidationError,
};
use kernbench_sim::spread::Exchange;
use kernbench_sim::{ExactRunError, RunError, RunOptions, RunReport, WindowError, Windows};

use crate::estimate::{self, Checking, Estimate};

mod run;
mod together;
mod uneven;

pub use together::TogetherCall;

/// Why a collective call did not run. The postcondition failing is not an error: it is in the
/// [`CallReport`], with where it failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// No selection rule matched, or a named algorithm does not exist.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The algorithm's topology and mapper make no plan for this system.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The tensor's layout does not fit the algorithm (the validator's verdict).
    #[error("{algorithm} cannot run on this tensor: {source}")]
    Validation {
        /// The algorithm chosen.
        algorithm: String,
        /// What does not fit.
        source: ValidationError,
    },
    /// The run failed (a kernel error, a panic, a deadlock, ...).
    #[error(transparent)]
    Run(#[from] RunError),
    /// The provenance run of an exact call ([`Communicator::exact`]) failed, or its reference could not
    /// be made.
    #[error("the exact (provenance) run: {0}")]
    ExactRun(#[from] ExactRunError),
    /// The tensor cannot be read or rebuilt.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A named algorithm implements another collective.
    #[error("algorithm `{algorithm}` implements {implements}, not {asked}")]
    WrongCollective {
        /// The algorithm named.
        algorithm: String,
        /// What it implements.
        implements: Collective,
        /// What was called.
        asked: Collective,
    },
    /// A root rank the algorithm's participants do not have.
    #[error("root {root} does not exist: {algorithm} has {participants} participants, so expected 0..{participants}")]
    BadRoot {
        /// The root asked for.
        root: usize,
        /// The algorithm chosen.
        algorithm: String,
        /// Its participants.
        participants: usize,
    },
    /// A generation that is not after the communicator's last one.
    #[error(
        "generation {given} is not valid: expected a generation after {last} (generations count from 1 and never repeat)"
    )]
    Generation {
        /// The generation given.
        given: u64,
        /// The last generation used.
        last: u64,
    },
    /// Every algorithm whose selection rule matched rejects the tensor.
    #[error("no algorithm for {collective} takes this tensor; tried {}", skipped_list(tried))]
    NoAlgorithmFits {
        /// The collective.
        collective: Collective,
        /// Each algorithm tried, with why it does not fit.
        tried: Vec<Skipped>,
    },
    /// The participants' inputs cannot be combined.
    #[error("the inputs do not fit {collective}: {reason}")]
    Inputs {
        /// The collective.
        collective: Collective,
        /// What is wrong, naming the PEs.
        reason: String,
    },
    /// The call would need more memory than the communicator allows ([`Communicator::max_memory`]):
    /// refused before anything is allocated (the caller's choice of size or limit).
    #[error(
        "{collective} over {ranks} ranks of {} each needs {} {} of memory, more than the limit of {}: \
         use fewer or smaller ranks, or raise the limit (Communicator::max_memory)",
        estimate::human(*input_bytes),
        if *at_least { "at least" } else { "an estimated" },
        estimate::human(*estimate),
        estimate::human(*limit)
    )]
    TooMuchMemory {
        /// The collective.
        collective: Collective,
        /// The participants that hold data.
        ranks: usize,
        /// The largest participant's input, in bytes.
        input_bytes: u64,
        /// The estimated peak ([`estimate::peak_memory`] and the algorithm's
        /// [`estimate::symmetric_heap`]), in bytes.
        estimate: u64,
        /// The limit, in bytes.
        limit: u64,
        /// Whether `estimate` is the least any algorithm would need ([`estimate::floor`]): the call
        /// was refused before it was planned ([`Communicator::check_floor`]).
        at_least: bool,
    },
    /// The call would send more messages than the communicator allows ([`Communicator::max_messages`]):
    /// refused before anything is allocated, rather than run for minutes or hours (the caller's choice
    /// of system, algorithm or limit).
    #[error(
        "{algorithm} on {participants} participants would send an estimated {estimate} messages, more than the \
         limit of {limit}: use fewer SIPs, another algorithm, or raise the limit (Communicator::max_messages, \
         --max-messages)"
    )]
    TooManyMessages {
        /// The algorithm chosen.
        algorithm: String,
        /// Its participants.
        participants: usize,
        /// The estimated messages ([`estimate::messages`]).
        estimate: u64,
        /// The limit.
        limit: u64,
    },
    /// A call checked exactly and run timing-only: the exact check reads the outputs, which a
    /// timing-only call does not have (the caller's choice of options).
    #[error("an exact check reads the outputs, which a timing-only call does not have: choose one of them")]
    ExactTimingOnly,
    /// A prepared call was given a tensor of another layout than the one it was prepared for (the
    /// caller's fault).
    #[error("the tensor's layout is not the one {algorithm} was prepared for: prepare the call for this tensor")]
    LayoutNotPrepared {
        /// The algorithm prepared.
        algorithm: String,
    },
    /// Calls given to [`Communicator::call_together`] that cannot run together (the caller's fault).
    #[error("calls run together: {why}")]
    Together {
        /// Which call, why, and what would be valid.
        why: String,
    },
    /// Per-pair counts missing from an all-to-all-v or send/recv call, given to another collective,
    /// or not fitting the call's ranks or inputs (the caller's fault).
    #[error("{collective}: {source}")]
    Counts {
        /// The collective.
        collective: Collective,
        /// What is wrong with them.
        source: PostconditionError,
    },
    /// The reference the outputs are checked against cannot be computed from the inputs.
    #[error("the inputs do not fit {collective}: {source}")]
    Reference {
        /// The collective.
        collective: Collective,
        /// Why.
        source: PostconditionError,
    },
}

/// An algorithm a selection rule matched but that cannot take the tensor, and why.
#[derive(Debug)]
pub struct Skipped {
    /// The algorithm.
    pub algorithm: String,
    /// Why it cannot run: its plan or its validator's verdict.
    pub error: Box<CommError>,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.algorithm, self.error)
    }
}

fn skipped_list(skipped: &[Skipped]) -> String {
    skipped.iter().map(Skipped::to_string).collect::<Vec<_>>().join("; ")
}

/// What a collective call did: the algorithm, why it was chosen, whether it was right, and per-PE
/// figures.
#[derive(Clone, Debug)]
pub struct CallReport {
    /// The collective.
    pub collective: Collective,
    /// The algorithm that ran.
    pub algorithm: String,
    /// Why: the selection rule that matched, or that the caller named it.
    pub reason: String,
    /// The call's generation on its communicator.
    pub generation: u64,
    /// Bytes of each SIP's tensor: what the selection rules compare.
    pub bytes_per_sip: u64,
    /// nccl-tests' size, as `kernbench bench` reports it: the bytes of a rank's larger buffer, its
    /// input except for all-gather, whose output is `n` times the input (a rank is a participant that
    /// holds data: a SIP for one-PE layouts, a PE for multi-PE ones); for all-to-all-v and send/recv,
    /// the input.
    pub size: u64,
    /// The reduction operator.
    pub op: ReduceOp,
    /// Whether the outputs were checked: not in a timing-only call, whose tiles carry no data
    /// ([`kernbench_sim::RunOptions::timing_only`]).
    pub checked: bool,
    /// Whether every output matched the reference (when [`CallReport::checked`]).
    pub postcondition: Postcondition,
    /// For a communicator that checks exactly ([`Communicator::exact`]): whether every output element
    /// holds exactly the contributions the collective says.
    pub exact: Option<Exactness>,
    /// The plan it ran on.
    pub plan: Arc<CheckedPlan>,
    /// Per-PE outputs and figures.
    pub run: RunReport,
}

impl fmt::Display for CallReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Correct only when every check held; otherwise each check that failed, and only those.
        let verdict = match (&self.postcondition, &self.exact) {
            _ if !self.checked => "not checked: timing only".to_owned(),
            (numeric, None) if numeric.held => "correct".to_owned(),
            (numeric, Some(exact)) if numeric.held && exact.held => format!("correct ({exact})"),
            (numeric, Some(exact)) if numeric.held => exact.to_string(),
            (numeric, Some(exact)) if !exact.held => format!("{numeric}; {exact}"),
            (numeric, _) => numeric.to_string(),
        };
        let time = self.run.completion_ns().map_or(String::new(), |ns| format!(", {ns:.0} ns simulated"));
        write!(
            f,
            "{} #{}: {} on {} PEs, {} bytes per rank, op {}: {}{} [{}]",
            self.collective,
            self.generation,
            self.algorithm,
            self.run.pes().len(),
            self.size,
            self.op,
            verdict,
            time,
            self.reason
        )
    }
}

/// How to make one call: everything but the tensor is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// Run this algorithm instead of the one the registry's rules choose.
    pub algorithm: Option<String>,
    /// Use this generation (must be after the last one) instead of the next.
    pub generation: Option<u64>,
    /// The per-pair counts of all-to-all-v and send/recv ([`PreparedCall::counts`]).
    pub counts: Option<Arc<Counts>>,
}

/// A call made ready to run ([`Communicator::prepare`]): its algorithm, why it was chosen, the checked
/// plan it runs on, the layout of the tensor it takes and its estimate, each resolved once;
/// [`Communicator::run_prepared`] runs it on any tensor of that layout.
#[derive(Clone, Debug)]
pub struct PreparedCall {
    /// The collective.
    pub collective: Collective,
    /// The algorithm that runs.
    pub algorithm: Arc<Algorithm>,
    /// Why: the selection rule that matched, or that the caller named it.
    pub reason: String,
    /// The plan it runs on.
    pub plan: Arc<CheckedPlan>,
    /// The layout of the tensor it takes.
    pub layout: Layout,
    /// What it is estimated to cost.
    pub estimate: Estimate,
    /// Its protocol and lanes ([`Algorithm::tuned_on`]).
    pub tuned: Tuned,
    /// The per-pair counts of all-to-all-v and send/recv, one row and column per rank of the plan
    /// (so set once it is prepared); `None` for the other collectives.
    pub counts: Option<Arc<Counts>>,
}

impl PreparedCall {
    /// The ranks: the participants of its plan.
    pub fn ranks(&self) -> usize {
        self.plan.len()
    }

    /// Bytes of each SIP's tensor: what the selection rules compare.
    pub fn bytes_per_sip(&self) -> u64 {
        (self.layout.sip_elements() * self.layout.dtype.size()) as u64
    }
}

/// Collectives over one system with one registry: the user's entry point.
///
/// # Examples
/// ```
/// use kernbench::{Communicator, DistTensor, DpPolicy, ReduceOp, System, Tile};
/// let system = System::shape(4, 1, 1, 1).unwrap();
/// let mut comm = Communicator::new(system.clone());
/// let ranks: Vec<Tile> = (0..4).map(|r| Tile::from_vec(vec![r as f32 + 1.0; 8])).collect();
/// let mut tensor = DistTensor::distribute(&system, &ranks, 1, 8, DpPolicy::LEADER).unwrap();
/// let report = comm.all_reduce(&mut tensor, ReduceOp::Sum).unwrap();
/// assert!(report.postcondition.held, "{report}");
/// assert_eq!(tensor.gather_sip(3).unwrap().to_vec::<f32>().unwrap(), vec![10.0; 8]);
/// ```
#[derive(Debug)]
pub struct Communicator {
    system: System,
    registry: Registry,
    /// Each algorithm's plan on `system`, built the first time the algorithm is asked for.
    plans: HashMap<String, Result<Arc<CheckedPlan>, PlanError>>,
    last_generation: u64,
    options: RunOptions,
    max_memory: Option<u64>,
    max_messages: Option<u64>,
    exact: bool,
    /// The windows its calls' kernels reach by name, kept from call to call.
    windows: Windows,
}

impl Communicator {
    /// A communicator with the shipped kernels and the default `ccl.json`.
    pub fn new(system: System) -> Communicator {
        Communicator::with_registry(system, kernbench_algorithms::default_registry())
    }

    /// A communicator with a registry of the caller's (for instance the defaults with a user algorithm
    /// merged in). The registry was resolved against its kernels when it was loaded.
    pub fn with_registry(system: System, registry: Registry) -> Communicator {
        Communicator {
            system,
            registry,
            plans: HashMap::new(),
            last_generation: 0,
            // A call returns every output in every process of a spread job: its runs report to every
            // process, the default, which it has no setter to change.
            options: RunOptions::default(),
            max_memory: None,
            max_messages: Some(estimate::DEFAULT_MAX_MESSAGES),
            exact: false,
            windows: Windows::new(),
        }
    }

    /// Registers window `name` of `len` elements of `dtype`: a symmetric buffer on every rank, zeros at
    /// first, that the kernels of its calls reach with `tl.window(name)` and that keeps its values from
    /// one call to the next ([`Windows`]).
    ///
    /// # Errors
    /// [`WindowError`] for a name registered already, or a window larger than a tile may be.
    pub fn register_window(&mut self, name: &'static str, dtype: Dtype, len: usize) -> Result<Symmetric, WindowError> {
        self.windows.register(name, dtype, len)
    }

    /// Its windows, as its last call left them.
    pub fn windows(&self) -> &Windows {
        &self.windows
    }

    fn options_mut(&mut self) -> &mut RunOptions {
        &mut self.options
    }

    kernbench_sim::run_option_setters!(with exchange);

    /// How its calls run.
    pub fn run_options(&self) -> &RunOptions {
        &self.options
    }

    /// How its next calls run, changed in place (the builder methods take it by value).
    pub fn run_options_mut(&mut self) -> &mut RunOptions {
        &mut self.options
    }

    /// Refuses a call whose [estimated peak memory](estimate::peak_memory) passes `limit` bytes, with
    /// [`CommError::TooMuchMemory`] before it allocates anything; `None`, the default, is no limit.
    ///
    /// # Examples
    /// ```
    /// use kernbench::{CommError, Communicator, DpPolicy, ReduceOp, System, samples::sample_tensor};
    /// let system = System::shape(4, 1, 1, 1).unwrap();
    /// let mut tensor = sample_tensor(&system, 1 << 20, kernbench::Dtype::F32, ReduceOp::Sum, DpPolicy::LEADER).unwrap();
    /// let mut comm = Communicator::new(system).max_memory(Some(16 << 20));
    /// let refused = comm.all_reduce(&mut tensor, ReduceOp::Sum).unwrap_err();
    /// assert!(matches!(refused, CommError::TooMuchMemory { limit, .. } if limit == 16 << 20), "{refused}");
    /// ```
    pub fn max_memory(mut self, limit: Option<u64>) -> Communicator {
        self.max_memory = limit;
        self
    }

    /// Checks every call exactly too (`false` by default): after the call, its kernel runs again on
    /// provenance inputs ([`kernbench_core::provenance`]), and [`CallReport::exact`] says whether every
    /// output element holds exactly the contributions the collective says. It runs beside the numeric
    /// check, never instead; the memory estimate counts its run.
    pub fn exact(mut self, on: bool) -> Communicator {
        self.exact = on;
        self
    }

    /// The processes this communicator's calls are spread over ([`Communicator::spread_over`]), if any.
    pub fn spread(&self) -> Option<&Arc<dyn Exchange>> {
        self.options.spread.as_ref()
    }

    /// Refuses a call that moves data and whose [estimated messages](estimate::messages) pass `limit`,
    /// with [`CommError::TooManyMessages`] before it allocates anything; the default is
    /// [`estimate::DEFAULT_MAX_MESSAGES`], and `None` is no limit. A timing-only call is not refused
    /// for its messages: they count in its memory estimate ([`estimate::timing_only_memory`]), which
    /// [`Communicator::max_memory`] bounds.
    pub fn max_messages(mut self, limit: Option<u64>) -> Communicator {
        self.max_messages = limit;
        self
    }

    /// The system.
    pub fn system(&self) -> &System {
        &self.system
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The generation of the last call (0 before the first).
    pub fn generation(&self) -> u64 {
        self.last_generation
    }

    /// Every participant ends with the reduction of every participant's shard; the tensor is updated in
    /// place.
    ///
    /// # Errors
    /// [`CommError`].
    pub fn all_reduce(&mut self, tensor: &mut DistTensor, op: ReduceOp) -> Result<CallReport, CommError> {
        self.in_place(Collective::AllReduce, tensor, op, 0, &CallOptions::default())
    }

    /// Every participant's shard ends as the root's; the tensor is updated in place.
    ///
    /// # Errors
    /// [`CommError`], including [`CommError::BadRoot`].
    pub fn broadcast(&mut self, tensor: &mut DistTensor, root: usize) -> Result<CallReport, CommError> {
        self.in_place(Collective::Broadcast, tensor, ReduceOp::Sum, root, &CallOptions::default())
    }

    /// The root's shard ends as the reduction of every participant's; the others are unchanged.
    ///
    /// # Errors
    /// [`CommError`], including [`CommError::BadRoot`].
    pub fn reduce(&mut self, tensor: &mut DistTensor, op: ReduceOp, root: usize) -> Result<CallReport, CommError> {
        self.in_place(Collective::Reduce, tensor, op, root, &CallOptions::default())
    }

    /// Every participant ends with every participant's shard, in rank order.
    ///
    /// # Errors
    /// [`CommError`].
    pub fn all_gather(&mut self, tensor: &DistTensor) -> Result<(DistTensor, CallReport), CommError> {
        self.call(Collective::AllGather, tensor, ReduceOp::Sum, 0, &CallOptions::default())
    }

    /// Participant `r` ends with part `r` of the reduction of every participant's shard.
    ///
    /// # Errors
    /// [`CommError`].
    pub fn reduce_scatter(&mut self, tensor: &DistTensor, op: ReduceOp) -> Result<(DistTensor, CallReport), CommError> {
        self.call(Collective::ReduceScatter, tensor, op, 0, &CallOptions::default())
    }

    /// Participant `r` ends with block `r` of every participant's shard, in rank order (the transpose).
    ///
    /// # Errors
    /// [`CommError`].
    pub fn all_to_all(&mut self, tensor: &DistTensor) -> Result<(DistTensor, CallReport), CommError> {
        self.call(Collective::AllToAll, tensor, ReduceOp::Sum, 0, &CallOptions::default())
    }

    fn in_place(
        &mut self,
        collective: Collective,
        tensor: &mut DistTensor,
        op: ReduceOp,
        root: usize,
        options: &CallOptions,
    ) -> Result<CallReport, CommError> {
        let (out, report) = self.call(collective, tensor, op, root, options)?;
        *tensor = out;
        Ok(report)
    }

    /// Runs `collective` on `tensor`'s shards: the general form of every method above;
    /// [`Communicator::prepare`] for the tensor's layout, then [`Communicator::run_prepared`].
    ///
    /// # Errors
    /// [`CommError`].
    pub fn call(
        &mut self,
        collective: Collective,
        tensor: &DistTensor,
        op: ReduceOp,
        root: usize,
        options: &CallOptions,
    ) -> Result<(DistTensor, CallReport), CommError> {
        let algorithm = options.algorithm.as_deref().map(|name| self.algorithm(name)).transpose()?;
        let prepared =
            PreparedCall { counts: options.counts.clone(), ..self.prepare(collective, &tensor.layout(), algorithm)? };
        self.run_prepared(&prepared, tensor, op, root, options.generation)
    }

    /// What its calls move and check.
    fn checking(&self) -> Checking {
        match (self.options.timing_only, self.exact) {
            (true, _) => Checking::TimingOnly,
            (false, true) => Checking::Exact,
            (false, false) => Checking::Numeric,
        }
    }

    /// The registry's algorithm named `name`.
    ///
    /// # Errors
    /// [`CommError::Registry`] naming the algorithms there are.
    pub fn algorithm(&self, name: &str) -> Result<Arc<Algorithm>, CommError> {
        Ok(Arc::clone(self.registry.get(name)?))
    }

    /// Prepares a call of `collective` on a tensor of `layout` ([`Layout::of`] gives the layout of a
    /// tensor not yet made): runs `algorithm`, or the first algorithm whose selection rule matches the
    /// size and whose validator takes the layout; plans it on the system (once per algorithm, shared by
    /// every later call); and estimates what the call costs, refusing it when that passes this
    /// communicator's limits, before anything is allocated.
    ///
    /// # Errors
    /// [`CommError::WrongCollective`], [`CommError::Plan`], [`CommError::Validation`],
    /// [`CommError::NoAlgorithmFits`], [`CommError::Registry`] when no rule matches,
    /// [`CommError::TooManyMessages`], [`CommError::TooMuchMemory`].
    pub fn prepare(
        &mut self,
        collective: Collective,
        layout: &Layout,
        algorithm: Option<Arc<Algorithm>>,
    ) -> Result<PreparedCall, CommError> {
        // Refused on what the layout alone says before anything is planned.
        let input_bytes =
            (layout.shards.values().copied().max().unwrap_or(0) as u64).saturating_mul(layout.dtype.size() as u64);
        self.check_floor(collective, layout.shards.len(), input_bytes)?;
        let (algorithm, reason, plan) = match algorithm {
            Some(algorithm) => {
                if algorithm.collective != collective {
                    return Err(CommError::WrongCollective {
                        algorithm: algorithm.name.clone(),
                        implements: algorithm.collective,
                        asked: collective,
                    });
                }
                let plan = self.fit(&algorithm, layout)?;
                (algorithm, "named by the caller".to_owned(), plan)
            }
            None => {
                let bytes_per_sip = (layout.sip_elements() * layout.dtype.size()) as u64;
                self.choose(collective, bytes_per_sip, layout)?
            }
        };
        if self.exact && self.options.timing_only {
            return Err(CommError::ExactTimingOnly);
        }
        let estimate = estimate::call(&self.system, collective, &algorithm, &plan, layout, self.checking());
        let ranks = plan.len();
        // A timing-only call's messages count in its memory estimate, which the memory limit bounds:
        // one that fits in memory is not refused for its messages.
        let message_limit = self.max_messages.filter(|_| !self.options.timing_only);
        if let Some(limit) = message_limit.filter(|&limit| estimate.messages > limit) {
            let (algorithm, estimate) = (algorithm.name.clone(), estimate.messages);
            return Err(CommError::TooManyMessages { algorithm, participants: ranks, estimate, limit });
        }
        if let Some(limit) = self.max_memory.filter(|&limit| estimate.memory > limit) {
            let (input_bytes, estimate) = (estimate.input_bytes, estimate.memory);
            return Err(CommError::TooMuchMemory { collective, ranks, input_bytes, estimate, limit, at_least: false });
        }
        // NCCL's nBytes, which its tuning model reads: an all-gather's output, the others' input.
        let gathered = if collective == Collective::AllGather { ranks as u64 } else { 1 };
        let nccl_bytes = (layout.sip_elements() * layout.dtype.size()) as u64 * gathered;
        let tuned = algorithm.tuned_on(&self.system, &plan, nccl_bytes);
        Ok(PreparedCall { collective, algorithm, reason, plan, layout: layout.clone(), estimate, tuned, counts: None })
    }

    /// Refuses a call of `collective` on `ranks` ranks, the largest input `input_bytes`, when even the
    /// least memory any algorithm would need for it ([`estimate::floor`]) passes this communicator's
    /// limit: what [`Communicator::prepare`] checks before it plans anything, and what a caller can
    /// check before it makes even the call's layout (a map of every shard: sixteen million of them
    /// take a second and a gigabyte).
    ///
    /// # Errors
    /// [`CommError::TooMuchMemory`], with the floor as its estimate (`at_least`).
    ///
    /// # Examples
    /// ```
    /// use kernbench::{Collective, CommError, Communicator, System};
    /// let comm = Communicator::new(System::builtin()).max_memory(Some(1 << 30));
    /// assert!(comm.check_floor(Collective::AllReduce, 4, 1 << 20).is_ok());
    /// let refused = comm.check_floor(Collective::AllReduce, 1 << 24, 1 << 20).unwrap_err();
    /// assert!(matches!(refused, CommError::TooMuchMemory { ranks, .. } if ranks == 1 << 24), "{refused}");
    /// ```
    pub fn check_floor(&self, collective: Collective, ranks: usize, input_bytes: u64) -> Result<(), CommError> {
        let floor = estimate::floor(collective, ranks, input_bytes, self.checking());
        match self.max_memory.filter(|&limit| floor > limit) {
            Some(limit) => {
                Err(CommError::TooMuchMemory { collective, ranks, input_bytes, estimate: floor, limit, at_least: true })
            }
            None => Ok(()),
        }
    }

    /// The install plan of `algorithm` on this communicator's system, built on first use and shared
    /// by every later call and sweep point.
    ///
    /// # Errors
    /// [`CommError::Plan`] when its topology and mapper make no plan for this system.
    pub fn plan(&mut self, algorithm: &Algorithm) -> Result<Arc<CheckedPlan>, CommError> {
        let system = &self.system;
        let cached = self.plans.entry(algorithm.name.clone()).or_insert_with(|| algorithm.plan(system).map(Arc::new));
        Ok(cached.clone()?)
    }

    /// The plan of `algorithm` on this system, if the tensor's layout fits its validator.
    fn fit(&mut self, algorithm: &Algorithm, layout: &Layout) -> Result<Arc<CheckedPlan>, CommError> {
        let plan = self.plan(algorithm)?;
        algorithm
            .validate(&plan, layout)
            .map_err(|source| CommError::Validation { algorithm: algorithm.name.clone(), source })?;
        Ok(plan)
    }

    /// The first algorithm whose selection rule matches and whose plan and validator take the tensor:
    /// rules only see the size and whether the layout is one PE per rank or several, so a rule may
    /// match an algorithm that cannot take this exact layout (cube leaders, say); the next one is tried.
    fn choose(
        &mut self,
        collective: Collective,
        bytes: u64,
        layout: &Layout,
    ) -> Result<(Arc<Algorithm>, String, Arc<CheckedPlan>), CommError> {
        let matching: Vec<(Arc<Algorithm>, String)> = self
            .registry
            .matching(collective, bytes, layout.kind())
            .map(|selection| (Arc::clone(selection.algorithm), selection.reason))
            .collect();
        if matching.is_empty() {
            // No rule matched at all: the registry's error lists the rules.
            self.registry.select(collective, bytes, layout.kind())?;
        }
        let mut skipped: Vec<Skipped> = Vec::new();
        for (algorithm, mut reason) in matching {
            match self.fit(&algorithm, layout) {
                Ok(plan) => {
                    if !skipped.is_empty() {
                        reason = format!("{reason}; skipped {}", skipped_list(&skipped));
                    }
                    return Ok((algorithm, reason, plan));
                }
                Err(e) => skipped.push(Skipped { algorithm: algorithm.name.clone(), error: Box::new(e) }),
            }
        }
        Err(CommError::NoAlgorithmFits { collective, tried: skipped })
    }
}

/// Every participant's input must have the same dtype and length; an all-to-all contribution must be
/// `n` whole blocks, one per participant.
fn check_inputs(collective: Collective, pes: &[PeId], inputs: &[Tile]) -> Result<(), CommError> {
    let Some(first) = inputs.first() else { return Ok(()) };
    let n = inputs.len();
    for (rank, (pe, x)) in pes.iter().zip(inputs).enumerate() {
        if collective == Collective::AllToAll && x.len() % n != 0 {
            return Err(CommError::Inputs {
                collective,
                reason: format!(
                    "rank {rank} {pe} contributes {} elements, which is not {n} equal blocks (one per participant): \
                     expected a multiple of {n}",
                    x.len()
                ),
            });
        }
        if x.dtype() != first.dtype() || x.len() != first.len() {
            return Err(CommError::Inputs {
                collective,
                reason: format!(
                    "{pe} holds {}[{}] but {} holds {}[{}]; every participant must hold the same dtype and length",
                    x.dtype(),
                    x.len(),
                    pes[0],
                    first.dtype(),
                    first.len()
                ),
            });
        }
    }
    Ok(())
}

/// `shards` with each of `outputs` in place of its PE's shard. Outputs in `PeId` order (as a plan's
/// ranks come) are merged in one walk and the map built at once, not inserted a PE at a time.
fn with_outputs(shards: &BTreeMap<PeId, Tile>, outputs: impl Iterator<Item = (PeId, Tile)>) -> BTreeMap<PeId, Tile> {
    let outputs: Vec<(PeId, Tile)> = outputs.collect();
    if !outputs.is_sorted_by(|a, b| a.0 < b.0) {
        let mut shards = shards.clone();
        shards.extend(outputs);
        return shards;
    }
    let mut merged = Vec::with_capacity(shards.len().max(outputs.len()));
    let mut kept = shards.iter().peekable();
    for (pe, tile) in outputs {
        while let Some((&at, shard)) = kept.next_if(|&(&at, _)| at < pe) {
            merged.push((at, shard.clone()));
        }
        kept.next_if(|&(&at, _)| at == pe);
        merged.push((pe, tile));
    }
    merged.extend(kept.map(|(&pe, shard)| (pe, shard.clone())));
    merged.into_iter().collect()
}

/// The outputs as a tensor: the input's layout where the shape is kept, one row per shard otherwise.
fn output_tensor(
    collective: Collective,
    input: &DistTensor,
    outputs: impl Iterator<Item = (PeId, Tile)>,
) -> Result<DistTensor, CommError> {
    let shards = with_outputs(input.shards(), outputs);
    match collective {
        Collective::AllReduce | Collective::Broadcast | Collective::Reduce => Ok(input.with_shards(shards)?),
        _ => {
            let per_rank = shards.iter().fold(BTreeMap::<u32, usize>::new(), |mut m, (pe, t)| {
                *m.entry(pe.sip).or_default() += t.len();
                m
            });
            let cols = per_rank.values().copied().max().unwrap_or(0);
            Ok(DistTensor::from_shards(input.dtype(), 1, cols, shards)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_replace_the_shards_of_their_pes_in_order_or_not() {
        let pe = |p| PeId::new(0, 0, p);
        let tile = |v: f32| Tile::from_vec(vec![v]);
        let shards: BTreeMap<PeId, Tile> = [(pe(0), tile(1.0)), (pe(1), tile(2.0)), (pe(3), tile(4.0))].into();
        for outputs in [
            vec![(pe(1), tile(20.0)), (pe(2), tile(30.0)), (pe(4), tile(50.0))],
            vec![(pe(4), tile(50.0)), (pe(1), tile(20.0))],
            vec![],
        ] {
            let mut expected = shards.clone();
            expected.extend(outputs.clone());
            assert_eq!(with_outputs(&shards, outputs.clone().into_iter()), expected, "{outputs:?}");
        }
    }
}

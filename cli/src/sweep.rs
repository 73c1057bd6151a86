//! Sweeps: one collective over sizes and algorithms, timed by the simulator and reported the way
//! nccl-tests reports, plus how close each run comes to the speed of light of the system.
//!
//! ```text
//!         size         count    type  redop  ranks  algorithm          time(us)  algbw  busbw  #wrong   sol
//!      1048576        262144     f32    sum      4  ring                  ...     ...    ...       0   0.31
//! ```
//!
//! - A point of size `S` gives every SIP a tensor of `S` bytes. The collective's ranks are the PEs
//!   that hold it: the SIP leaders for `auto` and one-PE algorithms (rank = SIP), every participating
//!   PE for multi-PE algorithms (`hierarchical_allreduce` splits each SIP's tensor over all its PEs),
//!   whose rows then report per-PE figures with `n` = participants.
//! - `size` is nccl-tests' size: the bytes of a rank's larger buffer, which is its input except for
//!   all-gather, whose output is `n` times the input; so an all-gather of `1M` contributes `1M / n`
//!   bytes per rank, as `all_gather_perf -b 1M` does.
//! - `algbw` is `size / time` and `busbw` is `algbw` times nccl-tests' factor for the collective
//!   ([`busbw_factor`]): the bandwidth each rank's link would need for that time.
//! - `sol` is a lower bound on the call's time over its simulated time ([`time_bound`], from
//!   [`kernbench::bound`]): the bound holds for every algorithm on the system (it counts every link
//!   a rank, cube, SIP or half of the SIPs could send over, and the shortest routes between ranks),
//!   so `sol` is at most 1, and 1 only for an algorithm no other could beat. `-` when nothing must
//!   move (a single rank).
//! - `#wrong` is the number of wrong output elements, from the postcondition check.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kernbench::bound::{self, CallShape, Limit, TimeBound};
use kernbench::samples::{sample_tensor, shards_per_sip, tensor_without_data};
use kernbench::{CallReport, CommError, Communicator, PreparedCall};
use kernbench::{
    Collective, Counts, DistTensor, DpPolicy, Dtype, InstallPlan, Layout, PeId, ReduceOp, Registry, System,
};
use serde::Serialize;

use crate::memory;

mod error;
mod tensor;

pub use error::{Interrupted, SweepError};
pub use tensor::{DEFAULT_COUNTS_SEED, Rounding, point_counts, point_size, point_tensor};

/// What a point of a sweep runs: whatever the registry selects, or a named algorithm.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Series {
    /// The registry's choice for the size (with the one-PE layout).
    Auto,
    /// This algorithm, with the layout its mapper needs.
    Algorithm(String),
}

impl Series {
    /// `auto`, or the algorithm's name.
    pub fn label(&self) -> &str {
        match self {
            Series::Auto => "auto",
            Series::Algorithm(name) => name,
        }
    }

    /// Parses an `--algos` value: `all` (every algorithm of `collective` that has a plan on `system`,
    /// by name: an NVLS algorithm is left out on a system whose switch does not multicast), `auto`,
    /// or a comma-separated list of algorithm names, variants of them (see [`with_variants`]) and
    /// `auto`.
    ///
    /// # Errors
    /// [`SweepError::UnknownAlgorithm`] for a name that is not one of the collective's algorithms.
    ///
    /// # Examples
    /// ```
    /// use kernbench::Collective;
    /// use kernbench_cli::sweep::Series;
    /// let registry = kernbench::algorithms::default_registry();
    /// let system = kernbench::System::builtin();
    /// let list = Series::parse_list("ring,auto", &registry, Collective::AllReduce, &system).unwrap();
    /// assert_eq!(list, vec![Series::Algorithm("ring".into()), Series::Auto]);
    /// let all = Series::parse_list("all", &registry, Collective::AllReduce, &system).unwrap();
    /// assert!(all.len() > 5);
    /// // The built-in system's SIPs are on a ring, with no switch to reduce in.
    /// assert!(!all.contains(&Series::Algorithm("nvls_allreduce".into())));
    /// assert!(Series::parse_list("ring_allgather", &registry, Collective::AllReduce, &system).is_err());
    /// ```
    pub fn parse_list(
        text: &str,
        registry: &Registry,
        collective: Collective,
        system: &System,
    ) -> Result<Vec<Series>, SweepError> {
        let registry = &with_variants(text, registry, collective)?;
        let known: Vec<String> =
            registry.algorithms().filter(|a| a.collective == collective).map(|a| a.name.clone()).collect();
        if text.trim() == "all" {
            let planned = registry.algorithms().filter(|a| a.collective == collective && a.plan(system).is_ok());
            return Ok(planned.map(|a| Series::Algorithm(a.name.clone())).collect());
        }
        text.split(',')
            .map(|name| match name.trim() {
                "auto" => Ok(Series::Auto),
                name if known.iter().any(|k| k == name) => Ok(Series::Algorithm(name.to_owned())),
                name => Err(SweepError::UnknownAlgorithm { name: name.to_owned(), collective, known: known.clone() }),
            })
            .collect()
    }
}

/// `registry` with the algorithm variants `algos` names added: an `--algos` item `ring:lanes=8:chunks=2`
/// is the algorithm `ring` with its registry parameters `lanes` and `chunks` set, under that name, so
/// one table can compare an algorithm's parameters. A value is read as JSON (`8`, `true`) or else taken
/// as a string.
///
/// # Errors
/// [`SweepError::UnknownAlgorithm`] for a variant of an algorithm `collective` does not have,
/// [`SweepError::BadVariant`] for a parameter that is not `key=value`, and [`SweepError::Registry`]
/// naming the kernel's parameters when it has no such parameter or the value has the wrong type.
///
/// # Examples
/// ```
/// use kernbench::Collective;
/// use kernbench_cli::sweep::with_variants;
/// let registry = kernbench::algorithms::default_registry();
/// let varied = with_variants("ring,ring:chunks=1", &registry, Collective::AllReduce).unwrap();
/// assert_eq!(varied.get("ring:chunks=1").unwrap().params["chunks"], 1);
/// assert!(with_variants("ring:chunkz=1", &registry, Collective::AllReduce).is_err());
/// ```
pub fn with_variants(algos: &str, registry: &Registry, collective: Collective) -> Result<Registry, SweepError> {
    let mut spec = kernbench::RegistrySpec::default();
    // A variant the registry already holds (a communicator made for these `algos`) is not made again.
    for item in algos.split(',').map(str::trim).filter(|item| item.contains(':') && registry.get(item).is_err()) {
        let mut fields = item.split(':');
        let base = fields.next().unwrap_or_default();
        let algorithm = registry.get(base).ok().filter(|a| a.collective == collective).ok_or_else(|| {
            let known = registry.algorithms().filter(|a| a.collective == collective).map(|a| a.name.clone()).collect();
            SweepError::UnknownAlgorithm { name: base.to_owned(), collective, known }
        })?;
        let mut variant = algorithm.spec();
        for field in fields {
            let bad = || SweepError::BadVariant {
                text: item.to_owned(),
                expected: "expected ALGORITHM:KEY=VALUE[:KEY=VALUE...], such as ring:lanes=8",
            };
            let (key, value) = field.split_once('=').filter(|(key, _)| !key.is_empty()).ok_or_else(bad)?;
            let value = serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
            variant.params.insert(key.to_owned(), value);
        }
        spec.algorithms.insert(item.to_owned(), variant);
    }
    let mut registry = registry.clone();
    if !spec.algorithms.is_empty() {
        registry.merge(spec, &kernbench::algorithms::kernels())?;
    }
    Ok(registry)
}

/// Parses a size in bytes: `512`, `64K`, `1M`, `2G` (K, M, G are powers of 1024).
///
/// # Errors
/// [`SweepError::BadSize`] for anything else, and for 0.
///
/// # Examples
/// ```
/// assert_eq!(kernbench_cli::sweep::parse_size("64K").unwrap(), 65536);
/// assert!(kernbench_cli::sweep::parse_size("64Q").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<u64, SweepError> {
    kernbench::size::parse_size(text).map_err(|_| SweepError::BadSize {
        text: text.to_owned(),
        expected: "expected a number of bytes, at least 1, with an optional K, M or G suffix, like 64K",
    })
}

/// Parses a list of sizes: `1K..1M` (1K and every doubling up to 1M), or sizes separated by commas
/// (`1K,64K,1M`); both forms may be mixed (`1K..4K,1M`).
///
/// # Errors
/// [`SweepError::BadSize`] for a bad size or a range whose start is after its end.
///
/// # Examples
/// ```
/// use kernbench_cli::sweep::parse_sizes;
/// assert_eq!(parse_sizes("1K..8K").unwrap(), vec![1024, 2048, 4096, 8192]);
/// assert_eq!(parse_sizes("1K,1M").unwrap(), vec![1024, 1 << 20]);
/// assert!(parse_sizes("8K..1K").is_err());
/// ```
pub fn parse_sizes(text: &str) -> Result<Vec<u64>, SweepError> {
    let mut sizes = Vec::new();
    for item in text.split(',') {
        match item.split_once("..") {
            None => sizes.push(parse_size(item)?),
            Some((from, to)) => {
                let (mut size, to) = (parse_size(from)?, parse_size(to)?);
                if size > to {
                    return Err(SweepError::BadSize {
                        text: item.to_owned(),
                        expected: "expected a range FROM..TO with FROM <= TO, like 1K..16M",
                    });
                }
                while size <= to {
                    sizes.push(size);
                    let Some(next) = size.checked_mul(2) else { break };
                    size = next;
                }
            }
        }
    }
    Ok(sizes)
}

/// A size as people write it ([`kernbench::size::format_size`]).
pub use kernbench::size::format_size;

/// nccl-tests' bus-bandwidth factor: `busbw = algbw * factor`, so that busbw is the bandwidth a
/// rank's link needs for the collective's time, whatever the collective. `ranks` is `n`.
///
/// | collective | factor |
/// | --- | --- |
/// | all_reduce | 2(n-1)/n |
/// | all_gather, reduce_scatter, all_to_all, all_to_all_v | (n-1)/n |
/// | broadcast, reduce, send_recv | 1 |
///
/// # Examples
/// ```
/// use kernbench::Collective;
/// assert_eq!(kernbench_cli::sweep::busbw_factor(Collective::AllReduce, 4), 1.5);
/// assert_eq!(kernbench_cli::sweep::busbw_factor(Collective::Broadcast, 4), 1.0);
/// ```
pub fn busbw_factor(collective: Collective, ranks: usize) -> f64 {
    collective.busbw_factor(ranks)
}

/// A lower bound on the simulated time of `collective` with every rank's input `elements` long, on
/// the participants of `plan` (its ranks) from rank `root`, sending by `counts` for all-to-all-v and
/// send/recv: [`bound::lower_bound`], the numerator of `sol`. `None` when nothing must move between
/// ranks (a single rank).
///
/// # Examples
/// ```
/// use kernbench::{Collective, Dtype, InstallPlan, System};
/// let system = System::shape(4, 1, 1, 1).unwrap();
/// let plan = InstallPlan::build(&system, "ring_1d", "leader_only").unwrap();
/// // An all-reduce of 1 MiB a rank: 2 (n - 1) / n x 1 MiB over each SIP's two 64 GB/s channels,
/// // plus a hop of 500 ns and an injection of 10.
/// let bound = kernbench_cli::sweep::time_bound(&system, &plan, Collective::AllReduce, (1 << 18, Dtype::F32), (0, None));
/// assert_eq!(bound.unwrap().ns, 1.5 * 1048576.0 / 128.0 + 510.0);
/// ```
pub fn time_bound(
    system: &System,
    plan: &InstallPlan,
    collective: Collective,
    (elements, dtype): (usize, Dtype),
    (root, counts): (usize, Option<&Counts>),
) -> Option<TimeBound> {
    let ranks: Vec<PeId> = plan.participants().map(|install| install.pe).collect();
    let call = CallShape { collective, ranks: &ranks, elements, element_bytes: dtype.size(), root, counts };
    Some(bound::lower_bound(system, &call)).filter(|bound| bound.limit != Limit::Nothing)
}

/// One point of a sweep: an nccl-tests line and the speed-of-light ratio.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// nccl-tests' size, in bytes: a rank's larger buffer (its gathered output for all-gather, its
    /// input otherwise).
    pub size: u64,
    /// Elements in `size`.
    pub count: u64,
    /// The collective's ranks: the participating PEs that hold data (one per SIP for the one-PE
    /// layout), nccl-tests' `n`.
    pub ranks: usize,
    /// Bytes each rank contributes: what the registry's `min_bytes` / `max_bytes` compare.
    pub bytes_per_rank: u64,
    /// The element type.
    pub dtype: Dtype,
    /// The reduction operator.
    pub op: ReduceOp,
    /// `auto` or the algorithm named.
    pub series: String,
    /// The algorithm that ran (for `auto`, the one the registry selected).
    pub algorithm: String,
    /// The protocol its messages were carried by (the one its `auto` picked, on a system with
    /// protocols); `None`: as data.
    pub protocol: Option<kernbench::Protocol>,
    /// Simulated time of the call, ns.
    pub time_ns: f64,
    /// `size / time`, GB/s.
    pub algbw_gbps: f64,
    /// `algbw` times [`busbw_factor`], GB/s.
    pub busbw_gbps: f64,
    /// Whether the outputs were checked: not in a timing-only call, whose tiles carry no data.
    pub checked: bool,
    /// Wrong output elements (0 when the postcondition held, or when nothing was checked), by the
    /// numeric check and, on a communicator that checks exactly ([`kernbench::Communicator::exact`]),
    /// by the exact one too.
    pub wrong: usize,
    /// A lower bound on the call's time on this system, whatever the algorithm (see [`time_bound`]);
    /// `None` when nothing must move.
    pub bound: Option<TimeBound>,
    /// The bound over the simulated time: at most 1, and 1 only for an algorithm no other can beat.
    pub sol: Option<f64>,
    /// How the point's size was rounded to run, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounded: Option<Rounding>,
}

/// The column titles of [`Row::table_line`], two lines, nccl-tests style, with a `ranks` column
/// that nccl-tests does not have: `size` is per rank, and a rank is a SIP for one-PE algorithms but
/// a participating PE for multi-PE ones (`hierarchical_allreduce`: every PE of every SIP), so the
/// column says which.
///
/// # Examples
/// ```
/// let header = kernbench_cli::sweep::table_header();
/// assert!(header.lines().next().unwrap().contains("  ranks  algorithm"));
/// assert!(header.lines().nth(1).unwrap().contains("(B/rank)"));
/// ```
pub fn table_header() -> String {
    let line = |c: [&str; 11]| {
        let text = format!(
            "{:>14} {:>13} {:>7} {:>7} {:>6}  {:<34} {:>10} {:>8} {:>8} {:>7} {:>7}",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10]
        );
        format!("#{}", &text[1..])
    };
    let titles = ["size", "count", "type", "redop", "ranks", "algorithm", "time", "algbw", "busbw", "#wrong", "sol"];
    let units = ["(B/rank)", "(elements)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", ""];
    format!("{}\n{}", line(titles), line(units).trim_end())
}

impl Row {
    /// The row as a line under [`table_header`].
    pub fn table_line(&self) -> String {
        let mut algorithm = match self.series.as_str() {
            "auto" => format!("auto: {}", self.algorithm),
            _ => self.algorithm.clone(),
        };
        if let Some(protocol) = self.protocol {
            algorithm = format!("{algorithm} {protocol}");
        }
        let sol = self.sol.map_or("-".to_owned(), |s| format!("{s:.3}"));
        let wrong = if self.checked { self.wrong.to_string() } else { "-".to_owned() };
        format!(
            "{:>14} {:>13} {:>7} {:>7} {:>6}  {:<34} {:>10.2} {:>8.2} {:>8.2} {:>7} {:>7}",
            self.size,
            self.count,
            self.dtype.name(),
            self.op.name(),
            self.ranks,
            algorithm,
            self.time_ns / 1000.0,
            self.algbw_gbps,
            self.busbw_gbps,
            wrong,
            sol
        )
    }
}

/// A sweep of one collective over sizes and series (algorithms or `auto`).
///
/// # Examples
/// ```
/// use kernbench_cli::sweep::{Series, Sweep};
/// use kernbench::{Collective, Communicator, System};
/// let system = System::shape(4, 1, 1, 1).unwrap();
/// let mut comm = Communicator::new(system);
/// let sweep = Sweep::new(Collective::AllReduce, vec![Series::Algorithm("ring".into()), Series::Auto], vec![1024, 4096]);
/// let rows = sweep.run(&mut comm, |_| {}).unwrap();
/// assert_eq!(rows.len(), 4);
/// assert!(rows.iter().all(|r| r.wrong == 0 && r.time_ns > 0.0 && r.sol.unwrap() <= 1.0));
/// ```
#[derive(Clone, Debug)]
pub struct Sweep {
    collective: Collective,
    series: Vec<Series>,
    sizes: Vec<u64>,
    dtype: Dtype,
    op: ReduceOp,
    root: usize,
    /// The seed of all-to-all-v's uneven counts ([`point_counts`]).
    counts_seed: u64,
    max_memory: Option<u64>,
    /// The layout every series runs on; `None`: the one its algorithm's mapper needs.
    layout: Option<DpPolicy>,
}

impl Sweep {
    /// A sweep of `collective` at every size for every series, f32 sums from root 0, refusing points
    /// that need more than the [available](memory::available) memory.
    pub fn new(collective: Collective, series: Vec<Series>, sizes: Vec<u64>) -> Sweep {
        let max_memory = memory::available();
        let (dtype, op, root, counts_seed) = (Dtype::F32, ReduceOp::Sum, 0, DEFAULT_COUNTS_SEED);
        Sweep { collective, series, sizes, dtype, op, root, counts_seed, max_memory, layout: None }
    }

    /// Lays every point's tensor out as `policy` says, for every series, instead of the layout each
    /// algorithm's mapper needs (and the one-PE layout for `auto`); the collective's ranks are then the
    /// PEs that hold data. An algorithm that cannot run on that layout fails its points.
    ///
    /// # Examples
    /// ```
    /// use kernbench::{Collective, Communicator, System, samples::EVERY_PE};
    /// use kernbench_cli::sweep::{Series, Sweep};
    /// let mut comm = Communicator::new(System::shape(2, 1, 1, 4).unwrap());
    /// let sweep = Sweep::new(Collective::AllReduce, vec![Series::Auto], vec![1024]).layout(EVERY_PE);
    /// let (row, report) = sweep.call(&mut comm, &Series::Auto, 1024).unwrap();
    /// // A SIP's 1024 bytes over its 4 PEs: 256 bytes on each of 8 ranks.
    /// assert_eq!((row.ranks, row.size), (8, 256));
    /// assert!(report.postcondition.held);
    /// ```
    pub fn layout(mut self, policy: DpPolicy) -> Sweep {
        self.layout = Some(policy);
        self
    }

    /// The most memory a point may need, in bytes ([`kernbench::estimate::peak_memory`]); `None` for no limit.
    pub fn max_memory(mut self, limit: Option<u64>) -> Sweep {
        self.max_memory = limit;
        self
    }

    /// The element type.
    pub fn dtype(mut self, dtype: Dtype) -> Sweep {
        self.dtype = dtype;
        self
    }

    /// The reduction operator.
    pub fn op(mut self, op: ReduceOp) -> Sweep {
        self.op = op;
        self
    }

    /// The root rank of broadcast and reduce.
    pub fn root(mut self, root: usize) -> Sweep {
        self.root = root;
        self
    }

    /// The seed all-to-all-v's uneven counts are drawn from ([`point_counts`]).
    pub fn counts_seed(mut self, seed: u64) -> Sweep {
        self.counts_seed = seed;
        self
    }

    /// The collective.
    pub fn collective(&self) -> Collective {
        self.collective
    }

    /// The series, in the order each size runs them.
    pub fn series(&self) -> &[Series] {
        &self.series
    }

    /// The sizes, in the order they run.
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// The number of points: sizes times series.
    pub fn points(&self) -> usize {
        self.sizes.len() * self.series.len()
    }

    /// Runs every point, size by size, each size's series in order; calls `each` with every row as it
    /// is made.
    ///
    /// # Errors
    /// [`SweepError`] from the first point that does not run.
    pub fn run(&self, comm: &mut Communicator, each: impl FnMut(&Row)) -> Result<Vec<Row>, SweepError> {
        self.run_until(comm, &AtomicBool::new(false), each)
    }

    /// [`Sweep::run`], checking `stop` before each point and stopping when it is set.
    ///
    /// # Errors
    /// [`SweepError::Interrupted`] when `stop` was set before the last point (`each` has seen the rows
    /// that ran), and [`SweepError`] from the first point that does not run.
    pub fn run_until(
        &self,
        comm: &mut Communicator,
        stop: &AtomicBool,
        mut each: impl FnMut(&Row),
    ) -> Result<Vec<Row>, SweepError> {
        let mut rows = Vec::with_capacity(self.points());
        for &size in &self.sizes {
            for series in &self.series {
                if stop.load(Ordering::SeqCst) {
                    return Err(Interrupted { done: rows.len(), points: self.points() }.into());
                }
                let (row, _) = self.call(comm, series, size)?;
                each(&row);
                rows.push(row);
            }
        }
        Ok(rows)
    }

    /// Runs one point and returns its row and the call's full report (with the run's trace when the
    /// communicator traces): [`Sweep::point`], then [`Sweep::call_point`].
    ///
    /// # Errors
    /// [`SweepError`].
    pub fn call(&self, comm: &mut Communicator, series: &Series, size: u64) -> Result<(Row, CallReport), SweepError> {
        let point = self.point(comm, series, size)?;
        self.call_point(comm, point)
    }

    /// Makes one point ready to call: chooses its layout and ranks, checks that it fits in the memory
    /// limit, and makes its tensor, saying how its size was rounded.
    ///
    /// # Errors
    /// [`SweepError::Call`] for an algorithm the communicator does not have or cannot plan,
    /// [`SweepError::TooMuchMemory`], and [`SweepError::Layout`] when the tensor cannot be made.
    pub fn point<'s>(&self, comm: &mut Communicator, series: &'s Series, size: u64) -> Result<Point<'s>, SweepError> {
        let call_error = |e| self.call_error(series, size, e);
        let algorithm = match series {
            Series::Algorithm(name) => Some(comm.algorithm(name).map_err(call_error)?),
            Series::Auto => None,
        };
        let (policy, ranks) = match (self.layout, &algorithm) {
            (None, Some(algorithm)) => (algorithm.mapper.layout(), comm.plan(algorithm).map_err(call_error)?.len()),
            // Unless the sweep names a layout, `auto` runs on the one-PE layout, the layout every rank of
            // every collective can take.
            (layout, _) => {
                let policy = layout.unwrap_or(DpPolicy::LEADER);
                (policy, comm.system().sips() * shards_per_sip(comm.system(), policy))
            }
        };
        let system = comm.system().clone();
        let (bytes, rounded) = point_size(&system, self.collective, size, self.dtype, policy, ranks);
        let elements = usize::try_from(bytes / self.dtype.size() as u64).unwrap_or(usize::MAX);
        let too_much = |estimate, limit, at_least| SweepError::TooMuchMemory {
            collective: self.collective,
            size,
            estimate,
            limit,
            at_least,
        };
        // Refused before the layout is made, on the smallest shard a rank holds.
        let shard_bytes = (elements / shards_per_sip(&system, policy)) as u64 * self.dtype.size() as u64;
        comm.check_floor(self.collective, ranks, shard_bytes).map_err(|e| match e {
            CommError::TooMuchMemory { estimate, limit, at_least, .. } => too_much(estimate, limit, at_least),
            e => call_error(e),
        })?;
        let layout = Layout::of(&system, self.dtype, 1, elements, policy)?;
        let mut prepared = comm.prepare(self.collective, &layout, algorithm).map_err(|e| match e {
            CommError::TooMuchMemory { estimate, limit, at_least, .. } => too_much(estimate, limit, at_least),
            e => call_error(e),
        })?;
        let shard = elements / shards_per_sip(&system, policy);
        prepared.counts = point_counts(self.collective, prepared.ranks(), shard, self.counts_seed).map(Arc::new);
        if let Some(limit) = self.max_memory.filter(|&limit| prepared.estimate.memory > limit) {
            return Err(too_much(prepared.estimate.memory, limit, false));
        }
        let tensor = if comm.run_options().timing_only {
            tensor_without_data(&system, bytes, self.dtype, policy)?
        } else {
            sample_tensor(&system, bytes, self.dtype, self.op, policy)?
        };
        Ok(Point { series, size, policy, ranks, prepared, tensor, rounded })
    }

    /// Calls a point [`Sweep::point`] made and returns its row and the call's full report.
    ///
    /// # Errors
    /// [`SweepError::Call`] when the call fails, and [`SweepError::Untimed`] when the communicator does
    /// not simulate time.
    pub fn call_point(&self, comm: &mut Communicator, point: Point<'_>) -> Result<(Row, CallReport), SweepError> {
        let (called, report) = self.run_point(comm, point)?;
        Ok((self.row(comm.system(), called, &report), report))
    }

    /// Calls a point [`Sweep::point`] made and returns the call's full report without its row: the
    /// row's lower bound finds the farthest pair of ranks in three passes over every rank's route
    /// (three million routes on a million-PE system), which a caller that prints no row need not pay
    /// for.
    ///
    /// # Errors
    /// As [`Sweep::call_point`].
    pub fn call_point_report(&self, comm: &mut Communicator, point: Point<'_>) -> Result<CallReport, SweepError> {
        self.run_point(comm, point).map(|(_, report)| report)
    }

    /// Calls a point: what its row needs of it, and the call's report.
    fn run_point<'s>(&self, comm: &mut Communicator, point: Point<'s>) -> Result<(Called<'s>, CallReport), SweepError> {
        let Point { series, size, policy, ranks, prepared, tensor, rounded } = point;
        let shard_elements = (tensor.shape().1 / shards_per_sip(comm.system(), policy)) as u64;
        let (_, report) = comm
            .run_prepared(&prepared, &tensor, self.op, self.root, None)
            .map_err(|e| self.call_error(series, size, e))?;
        let time_ns = report.run.completion_ns().ok_or(SweepError::Untimed)?;
        Ok((Called { series, ranks, shard_elements, time_ns, rounded, prepared }, report))
    }

    /// The row of a call on `system`.
    fn row(&self, system: &System, called: Called<'_>, report: &CallReport) -> Row {
        let Called { series, ranks, shard_elements, time_ns, rounded, prepared } = called;
        let bound = time_bound(
            system,
            &report.plan,
            self.collective,
            (shard_elements as usize, self.dtype),
            (self.root, prepared.counts.as_deref()),
        );
        let gathered = if self.collective == Collective::AllGather { ranks as u64 } else { 1 };
        let buffer = shard_elements * self.dtype.size() as u64 * gathered;
        let algbw = buffer as f64 / time_ns;
        let busbw = algbw * busbw_factor(self.collective, ranks);
        Row {
            size: buffer,
            ranks,
            count: buffer / self.dtype.size() as u64,
            bytes_per_rank: report.bytes_per_sip,
            dtype: self.dtype,
            op: self.op,
            series: series.label().to_owned(),
            algorithm: report.algorithm.clone(),
            protocol: report.run.time().and_then(|t| t.protocol),
            time_ns,
            algbw_gbps: algbw,
            busbw_gbps: busbw,
            checked: report.checked,
            wrong: report.postcondition.wrong + report.exact.as_ref().map_or(0, |e| e.wrong),
            bound,
            sol: bound.map(|bound| bound.ns / time_ns),
            rounded,
        }
    }

    /// Why the point of `series` at `size` did not run.
    fn call_error(&self, series: &Series, size: u64, source: CommError) -> SweepError {
        SweepError::Call {
            series: series.label().to_owned(),
            collective: self.collective,
            size,
            source: Box::new(source),
        }
    }
}

/// What a point's row needs of its call, once called.
struct Called<'s> {
    series: &'s Series,
    ranks: usize,
    shard_elements: u64,
    time_ns: f64,
    rounded: Option<Rounding>,
    prepared: PreparedCall,
}

/// A point of a sweep made ready to call ([`Sweep::point`]): its tensor, laid out for the series, and
/// how its size was rounded to make it.
#[derive(Debug)]
pub struct Point<'s> {
    series: &'s Series,
    size: u64,
    policy: DpPolicy,
    /// The collective's ranks: the PEs that hold data.
    ranks: usize,
    /// The call, prepared.
    prepared: PreparedCall,
    tensor: DistTensor,
    /// How the point's size was rounded, when it was.
    pub rounded: Option<Rounding>,
}

/// The closing lines of a table: wrong elements in total and each series' average bus bandwidth.
pub fn table_footer(rows: &[Row]) -> String {
    let wrong: usize = rows.iter().map(|r| r.wrong).sum();
    let mut out = if rows.iter().all(|r| r.checked) {
        format!("# wrong elements: {wrong}\n# average busbw (GB/s):")
    } else {
        "# wrong elements: - (not checked: timing only)\n# average busbw (GB/s):".to_owned()
    };
    for s in series_in_order(rows) {
        let of: Vec<f64> = rows.iter().filter(|r| r.series == s).map(|r| r.busbw_gbps).collect();
        let _ = write!(out, " {s} {:.2};", of.iter().sum::<f64>() / of.len() as f64);
    }
    out.pop();
    out.push('\n');
    out
}

/// The series of `rows`, each once, in the order they first appear: the order of a table's summaries
/// and a plot's legend.
pub fn series_in_order(rows: &[Row]) -> Vec<&str> {
    let mut series: Vec<&str> = Vec::new();
    for row in rows {
        if !series.contains(&row.series.as_str()) {
            series.push(&row.series);
        }
    }
    series
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kernbench::estimate::Checking;

    use super::*;

    #[test]
    fn sizes_parse_as_ranges_and_lists() {
        assert_eq!(parse_sizes("1K..1K").unwrap(), vec![1024]);
        assert_eq!(parse_sizes("3..12").unwrap(), vec![3, 6, 12]);
        assert_eq!(parse_sizes("1K..4K,1G").unwrap(), vec![1024, 2048, 4096, 1 << 30]);
        assert_eq!(parse_sizes("1K..16M").unwrap().len(), 15);
        for bad in ["", "0", "1X", "K", "-1", "1K..", "..1K", "2K..1K", "99999999999999999999", "17179869184G"] {
            assert!(matches!(parse_sizes(bad), Err(SweepError::BadSize { .. })), "{bad} parsed");
        }
    }

    #[test]
    fn busbw_factors_are_nccl_tests() {
        let cases = [
            (Collective::AllReduce, 8, 1.75),
            (Collective::AllGather, 8, 0.875),
            (Collective::ReduceScatter, 4, 0.75),
            (Collective::AllToAll, 2, 0.5),
            (Collective::Broadcast, 8, 1.0),
            (Collective::Reduce, 8, 1.0),
            (Collective::AllReduce, 1, 0.0),
        ];
        for (collective, n, factor) in cases {
            assert_eq!(busbw_factor(collective, n), factor, "{collective} on {n}");
        }
    }

    #[test]
    fn an_all_gather_point_contributes_a_rank_share_and_reports_the_gathered_size() {
        let system = System::shape(4, 1, 1, 1).unwrap();
        let mut comm = Communicator::new(system);
        let sweep = Sweep::new(Collective::AllGather, vec![Series::Algorithm("ring_allgather".into())], vec![4096]);
        let rows = sweep.run(&mut comm, |_| {}).unwrap();
        assert_eq!((rows[0].size, rows[0].bytes_per_rank, rows[0].count), (4096, 1024, 1024));
        assert!((rows[0].busbw_gbps / rows[0].algbw_gbps - 0.75).abs() < 1e-12);
    }

    #[test]
    fn all_to_all_contributions_split_into_whole_blocks() {
        let system = System::shape(3, 1, 1, 1).unwrap();
        let mut comm = Communicator::new(system);
        let sweep = Sweep::new(Collective::AllToAll, vec![Series::Auto], vec![1000]);
        let rows = sweep.run(&mut comm, |_| {}).unwrap();
        // 250 f32 rounded up to 252, three blocks of 84.
        assert_eq!((rows[0].bytes_per_rank, rows[0].wrong), (1008, 0));
    }

    #[test]
    fn a_sweeps_points_share_the_plan_their_algorithm_was_prepared_with() {
        let system = System::shape(4, 1, 1, 1).unwrap();
        let mut comm = Communicator::new(system);
        let ring = Series::Algorithm("ring".into());
        let sweep = Sweep::new(Collective::AllReduce, vec![ring.clone()], vec![1024, 4096]);
        let (_, small) = sweep.call(&mut comm, &ring, 1024).unwrap();
        let (_, large) = sweep.call(&mut comm, &ring, 4096).unwrap();
        assert!(Arc::ptr_eq(&small.plan, &large.plan), "the plan was built again");
    }

    #[test]
    fn a_points_memory_check_is_the_calls_estimate_with_the_algorithms_symmetric_heap() {
        let system = System::shape(4, 1, 1, 1).unwrap();
        let mut comm = Communicator::new(system.clone());
        let one_shot = comm.algorithm("symmetric_one_shot").unwrap();
        let plan = comm.plan(&one_shot).unwrap();
        let layout = Layout::of(&system, Dtype::F32, 1, 1 << 18, DpPolicy::LEADER).unwrap();
        let estimate =
            kernbench::estimate::call(&system, Collective::AllReduce, &one_shot, &plan, &layout, Checking::Numeric)
                .memory;
        // Every rank's inbox holds every rank's input: more than the data alone.
        assert!(estimate > kernbench::estimate::peak_memory(Collective::AllReduce, 4, 1 << 20));
        let series = Series::Algorithm("symmetric_one_shot".into());
        let sweep =
            |limit| Sweep::new(Collective::AllReduce, vec![series.clone()], vec![1 << 20]).max_memory(Some(limit));
        let refused = sweep(estimate - 1).call(&mut comm, &series, 1 << 20).unwrap_err();
        assert!(matches!(refused, SweepError::TooMuchMemory { estimate: e, .. } if e == estimate), "{refused}");
        sweep(estimate).call(&mut comm, &series, 1 << 20).expect("a point within the limit runs");
    }

    #[test]
    fn rows_print_under_the_header() {
        let system = System::shape(2, 1, 1, 1).unwrap();
        let mut comm = Communicator::new(system);
        let rows = Sweep::new(Collective::Broadcast, vec![Series::Auto], vec![1 << 20]).run(&mut comm, |_| {}).unwrap();
        let line = rows[0].table_line();
        assert!(line.contains("auto: tree_broadcast") || line.contains("auto: ring_broadcast"), "{line}");
        let footer = table_footer(&rows);
        assert!(footer.contains("# average busbw (GB/s): auto "), "{footer}");
        let header = table_header();
        let header = header.lines().next().unwrap();
        assert_eq!(line.len(), header.len(), "columns line up:\n{header}\n{line}");
    }
}

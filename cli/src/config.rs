//! What a command's calls run with, validated: the system and the registry loaded, the limits parsed
//! and the MPI job of the process, built once from the arguments ([`crate::args`]) before any call;
//! and the parsers of the other values the commands share (collectives, element types).
//!
//! Uses [`crate::args`], [`crate::compare`], [`crate::files`], [`crate::memory`] and [`crate::sweep`].

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use kernbench::sim::Fault;
use kernbench::sim::spread::{Exchange, Placement};
use kernbench::{Collective, Communicator, Dtype, ReduceOp, Registry, System};

use crate::args::{DEFAULT_SIZES, ElementArgs, LimitArgs, RunnerArgs, SweepArgs, SystemArgs, TimingArgs};
use crate::compare::Comparison;
use crate::files::OutputFile;
use crate::memory;
use crate::sweep::{Series, Sweep, SweepError, parse_size, parse_sizes, with_variants};

/// The processes of the MPI job this process is one of (`mpirun -np N kernbench ...`), when there are
/// several; `None`: this process alone.
pub type Job = Option<Arc<dyn Exchange>>;

/// The system, registry, limits and threads a command's calls run with, and the processes of the MPI
/// job they are spread over. Every part was loaded or parsed when it was made, so a bad file or value
/// fails there, before any call, and [`Config::communicator`] cannot fail.
///
/// # Examples
/// ```
/// use kernbench_cli::config::Config;
/// let system = kernbench::System::shape(2, 1, 1, 1).unwrap();
/// let config = Config::new(system, kernbench::algorithms::default_registry(), None);
/// let comm = config.communicator();
/// assert_eq!(comm.system().sips(), 2);
/// assert!(config.leads());
/// ```
#[derive(Debug)]
pub struct Config {
    system: System,
    registry: Registry,
    /// The most memory a call may need, in bytes; `None` for no limit.
    max_memory: Option<u64>,
    /// The most messages a call may send; `None` for no limit.
    max_messages: Option<u64>,
    threads: usize,
    /// Whether the calls move no data: simulated time only.
    timing_only: bool,
    /// GPUs one host thread launches on, one after another.
    gpus_per_thread: usize,
    /// Links, NICs and PEs that slow down or fail.
    faults: Vec<Fault>,
    /// How the job's processes place transfers on the channels.
    placement: Placement,
    /// The processes the calls are spread over.
    job: Job,
}

impl Config {
    /// Calls on `system` with `registry`, on one thread, with a communicator's default limits, spread
    /// over the processes of `job` (`None`: this process alone).
    pub fn new(system: System, registry: Registry, job: Job) -> Config {
        let max_messages = Some(kernbench::estimate::DEFAULT_MAX_MESSAGES);
        Config {
            system,
            registry,
            max_memory: None,
            max_messages,
            threads: 1,
            timing_only: false,
            gpus_per_thread: 1,
            faults: Vec::new(),
            placement: Placement::Auto,
            job,
        }
    }

    /// The system and the registry `args` name, loaded (by default the built-in system and the shipped
    /// registry), as [`Config::new`] takes them.
    ///
    /// # Errors
    /// A file that cannot be read or does not hold a valid system or registry.
    pub fn load(args: &SystemArgs, job: Job) -> Result<Config> {
        let system = load_system(args.system.as_deref())?;
        let registry = match &args.registry {
            Some(path) => Registry::from_file(path, &kernbench::algorithms::kernels())?,
            None => kernbench::algorithms::default_registry(),
        };
        Ok(Config::new(system, registry, job))
    }

    /// [`Config::load`] with the limits and threads of `args`.
    ///
    /// # Errors
    /// As [`Config::load`] and [`Config::limits`].
    pub fn runner(args: &RunnerArgs, job: Job) -> Result<Config> {
        let config = Config::load(&args.system, job)?.limits(&args.limits)?;
        config.threads(args.threads).timing(&args.timing)
    }

    /// The sweep `args` describe (from root 0); the configuration it runs with, whose registry holds
    /// the algorithm variants `--algos` names; and the log `--compare` names, read and checked against
    /// the system, at whose sizes the sweep runs unless `--sizes` names others.
    ///
    /// # Errors
    /// A bad collective, algorithm, size, element type or reduction, a log that cannot be read, is of
    /// another collective or does not fit the system, and as [`Config::runner`].
    pub fn sweep(args: &SweepArgs, job: Job) -> Result<(Config, Sweep, Option<Comparison>)> {
        let collective: Collective = args.collective.parse()?;
        let config = Config::runner(&args.runner, job)?.with_variants(&args.algos, collective)?;
        let series = Series::parse_list(&args.algos, &config.registry, collective, &config.system)?;
        let comparison = args.compare.as_deref().map(|log| Comparison::load(log, collective, &config.system));
        let comparison = comparison.transpose()?;
        // A log's run style is the sweep's unless the command line names another.
        let logged = comparison.as_ref().and_then(|c| c.log().gpus_per_thread);
        let config = match (args.runner.timing.gpus_per_thread, logged) {
            (None, Some(gpus)) => config.gpus_per_thread(gpus),
            _ => config,
        };
        let sizes = match (&args.sizes, &comparison) {
            (Some(sizes), _) => parse_sizes(sizes)?,
            (None, Some(comparison)) => comparison.log().sizes(),
            (None, None) => parse_sizes(DEFAULT_SIZES)?,
        };
        let (dtype, op) = elements(&args.elements)?;
        let sweep = Sweep::new(collective, series, sizes).dtype(dtype).op(op).max_memory(config.max_memory);
        Ok((config, sweep.counts_seed(args.elements.counts_seed), comparison))
    }

    /// The limits `args` set: `--max-memory` or else the memory available, and `--max-messages`.
    ///
    /// # Errors
    /// A `--max-memory` that is not a size.
    pub fn limits(mut self, args: &LimitArgs) -> Result<Config> {
        self.max_memory = match &args.max_memory {
            Some(text) => Some(parse_size(text).context("bad --max-memory")?),
            None => memory::available(),
        };
        self.max_messages = Some(args.max_messages);
        Ok(self)
    }

    /// Calls polled on `threads` threads.
    pub fn threads(mut self, threads: usize) -> Config {
        self.threads = threads;
        self
    }

    /// Calls timed as `args` say: with data or not, the GPUs a host thread launches on, the faults of
    /// `--fault` and `--faults`, checked against the system, and how a job's processes place
    /// transfers.
    ///
    /// # Errors
    /// A faults file that cannot be read or does not hold faults, or a fault the system cannot have.
    pub fn timing(self, args: &TimingArgs) -> Result<Config> {
        let mut faults = args.faults.clone();
        if let Some(path) = &args.faults_file {
            faults.extend(read_faults(path)?);
        }
        let mut config = self.timing_only(args.timing_only).gpus_per_thread(args.gpus_per_thread.unwrap_or(1));
        config.placement = args.placement;
        config.faults(faults)
    }

    /// Calls under `faults`.
    ///
    /// # Errors
    /// A fault the system cannot have ([`Fault::check`]).
    pub fn faults(mut self, faults: Vec<Fault>) -> Result<Config> {
        for fault in &faults {
            fault.check(&self.system)?;
        }
        self.faults = faults;
        Ok(self)
    }

    /// Calls whose kernels one host thread launches on `gpus` consecutive GPUs, one after another.
    pub fn gpus_per_thread(mut self, gpus: usize) -> Config {
        self.gpus_per_thread = gpus.max(1);
        self
    }

    /// Calls that move no data (`true`): simulated time only, outputs not checked.
    pub fn timing_only(mut self, on: bool) -> Config {
        self.timing_only = on;
        self
    }

    /// Refuses `--exact` beside `--timing-only`: the exact check reads outputs a timing-only call
    /// does not have.
    ///
    /// # Errors
    /// When both are asked for.
    pub fn check_exact(&self, exact: bool) -> Result<()> {
        if exact && self.timing_only {
            bail!("--exact checks the outputs, which --timing-only does not make: choose one of them");
        }
        Ok(())
    }

    /// The registry with the algorithm variants (`ring:lanes=8`) that an `--algos` list for
    /// `collective` names added, as [`with_variants`] adds them.
    ///
    /// # Errors
    /// As [`with_variants`].
    pub fn with_variants(mut self, algos: &str, collective: Collective) -> Result<Config, SweepError> {
        self.registry = with_variants(algos, &self.registry, collective)?;
        Ok(self)
    }

    /// The system.
    pub fn system(&self) -> &System {
        &self.system
    }

    /// The registry, with the variants added to it.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The most memory a call may need, in bytes; `None` for no limit.
    pub fn max_memory(&self) -> Option<u64> {
        self.max_memory
    }

    /// A communicator on the system with the registry, the limits and the threads, spreading its calls
    /// over the job's processes.
    pub fn communicator(&self) -> Communicator {
        let comm = Communicator::with_registry(self.system.clone(), self.registry.clone())
            .threads(self.threads)
            .timing_only(self.timing_only)
            .gpus_per_thread(self.gpus_per_thread)
            .max_memory(self.max_memory)
            .max_messages(self.max_messages)
            .faults(self.faults.clone())
            .placement(self.placement)
            .release_memory(Some(crate::memory::Allocator::release_freed));
        match &self.job {
            Some(job) => comm.spread_over(Arc::clone(job)),
            None => comm,
        }
    }

    /// Whether this process prints and writes files: see [`leads`].
    pub fn leads(&self) -> bool {
        leads(&self.job)
    }

    /// Writes `contents` to `file` if this process [leads](Config::leads).
    ///
    /// # Errors
    /// As [`OutputFile::write`].
    pub fn write(&self, file: &OutputFile, contents: &[u8]) -> Result<()> {
        if self.leads() { file.write(contents) } else { Ok(()) }
    }
}

/// Whether a process of `job` prints and writes files: a process alone does, and in a job of several
/// only process 0, while the others compute the same and stay quiet (errors excepted).
pub fn leads(job: &Job) -> bool {
    job.as_ref().is_none_or(|job| job.process() == 0)
}

/// The system in the JSON file at `path`, or the built-in system.
///
/// # Errors
/// A file that cannot be read or does not hold a valid system.
pub fn load_system(path: Option<&Path>) -> Result<System> {
    match path {
        Some(path) => Ok(System::from_file(path)?),
        None => Ok(System::builtin()),
    }
}

/// The faults in the JSON file at `path`: a list of fault texts, or an object whose `faults` is one.
///
/// # Errors
/// A file that cannot be read, or does not hold such a list.
pub fn read_faults(path: &Path) -> Result<Vec<Fault>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read faults file {}", path.display()))?;
    let bad = || format!("faults file {}: expected a JSON list of faults, or {{\"faults\": [...]}}", path.display());
    let value: serde_json::Value = serde_json::from_str(&text).with_context(bad)?;
    let list = match value {
        serde_json::Value::Object(mut object) => object.remove("faults").with_context(bad)?,
        list => list,
    };
    serde_json::from_value(list).with_context(bad)
}

/// One collective, or every one for `all`.
///
/// # Errors
/// A name that is neither.
pub fn collectives(name: &str) -> Result<Vec<Collective>> {
    if name == "all" { Ok(Collective::ALL.to_vec()) } else { Ok(vec![name.parse()?]) }
}

/// The element type and the reduction `args` name.
///
/// # Errors
/// A name that is not one of them.
pub fn elements(args: &ElementArgs) -> Result<(Dtype, ReduceOp)> {
    Ok((args.dtype.parse()?, args.op.parse()?))
}

#[cfg(test)]
mod tests {
    use super::read_faults;

    #[test]
    fn a_faults_file_is_a_list_or_an_object_holding_one_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("kernbench-faults-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let list = read_faults(&file("list.json", r#"["link=3-4:fail@1us", "pe=1.0.0:slow=2"]"#)).unwrap();
        let object =
            read_faults(&file("object.json", r#"{"faults": ["link=3-4:fail@1us", "pe=1.0.0:slow=2"]}"#)).unwrap();
        assert_eq!((list.len(), &list), (2, &object));
        for (name, text, says) in [
            ("typo.json", r#"["link=3-4:fial"]"#, "`fial` is not an effect"),
            ("number.json", "[3]", "expected a JSON list of faults"),
            ("other.json", r#"{"links": []}"#, "expected a JSON list of faults"),
        ] {
            let error = format!("{:#}", read_faults(&file(name, text)).unwrap_err());
            assert!(error.contains(says), "{name}: {error}");
        }
        assert!(read_faults(&dir.join("missing.json")).unwrap_err().to_string().contains("cannot read faults file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

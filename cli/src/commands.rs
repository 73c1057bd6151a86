//! The subcommands: each turns parsed arguments into library calls and prints the result.

use std::cmp::Ordering;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use crate::files::OutputFile;
use crate::memory;
use crate::sweep::{
    Interrupted, Rounding, Row, Series, Sweep, SweepError, check_memory, parse_size, parse_sizes, point_tensor,
    table_footer, table_header,
};
use crate::tune::{Tuner, nccl_tuner_csv, rules_csv};
use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use kernbench::sim::Timing;
use kernbench::sim::exchange::Exchange;
use kernbench::workload::{CUBE_LEADERS, EVERY_PE, shards_per_sip};
use kernbench::{
    CallOptions, Collective, Communicator, DpPolicy, Dtype, InstallPlan, LayoutKind, MAPPERS, Quoted, ReduceOp,
    Registry, System, TOPOLOGIES, VALIDATORS,
};

/// Write, run, time and tune collective-communication kernels on a simulated accelerator.
#[derive(Debug, Parser)]
#[command(name = "kernbench", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run collectives on a system and check each against its postcondition.
    Run(RunArgs),
    /// Sweep a collective over sizes and algorithms and print an nccl-tests table of simulated times.
    Bench(BenchArgs),
    /// Find the fastest algorithm per size on a system and write it as selection rules.
    Tune(TuneArgs),
    /// Write a Chrome / Perfetto trace of one simulated call.
    Trace(TraceArgs),
    /// Draw bus bandwidth against size for several algorithms, as an SVG.
    Plot(PlotArgs),
    /// Say which rule picks which algorithm for a collective and a size, and what every algorithm
    /// of the collective would take there.
    Explain(ExplainArgs),
    /// Run an MSCCL-IR XML algorithm: check it against its collective's postcondition at every size
    /// and print an nccl-tests table of its simulated times.
    Msccl(MscclArgs),
    /// List the algorithms, kernels, topologies, mappers and validators.
    List,
    /// Print a system and an algorithm's install plan on it.
    Plan {
        /// The algorithm (see `kernbench list`).
        algorithm: String,
        /// A system JSON file (default: the built-in system).
        #[arg(long)]
        system: Option<PathBuf>,
        /// Print every SIP's PEs, not only SIP 0's.
        #[arg(long)]
        all: bool,
    },
}

/// Where to run: the system and the registry.
#[derive(Debug, clap::Args)]
struct Setup {
    /// A system JSON file (default: the built-in system).
    #[arg(long)]
    system: Option<PathBuf>,
    /// A complete registry JSON file, such as `kernbench tune --out` writes (default: the shipped ccl.json).
    #[arg(long)]
    registry: Option<PathBuf>,
}

/// How much memory a call may need and how many messages it may send.
#[derive(Debug, clap::Args)]
struct Limits {
    /// Refuse a call whose estimated peak memory passes SIZE bytes (K/M/G suffixes); default: the
    /// memory available (MemAvailable of /proc/meminfo; no limit where that is unknown).
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<String>,
    /// Refuse a call whose estimated message count passes COUNT (see kernbench::estimate); default:
    /// 67108864 (2^26).
    #[arg(long, value_name = "COUNT", default_value_t = kernbench::estimate::DEFAULT_MAX_MESSAGES)]
    max_messages: u64,
}

impl Limits {
    /// The memory limit in bytes, or `None` for none.
    fn memory(&self) -> Result<Option<u64>> {
        match &self.max_memory {
            Some(text) => Ok(Some(parse_size(text).context("bad --max-memory")?)),
            None => Ok(memory::available()),
        }
    }

    /// `comm` refusing calls past these limits.
    fn apply(&self, comm: Communicator) -> Result<Communicator> {
        Ok(comm.max_memory(self.memory()?).max_messages(Some(self.max_messages)))
    }
}

/// Where to run, and on how many threads.
#[derive(Debug, clap::Args)]
struct Simulator {
    #[command(flatten)]
    setup: Setup,
    #[command(flatten)]
    limits: Limits,
    /// Threads to poll PEs on.
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

/// What the data is.
#[derive(Debug, clap::Args)]
struct Data {
    /// Element type: f32, f16, bf16, i32, i64.
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// Reduction: sum, prod, max, min, avg.
    #[arg(long, default_value = "sum")]
    op: String,
}

impl Data {
    fn parse(&self) -> Result<(Dtype, ReduceOp)> {
        Ok((self.dtype.parse()?, self.op.parse()?))
    }
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all), or `all`.
    collective: String,
    /// Run this algorithm instead of the registry's choice.
    #[arg(long)]
    algo: Option<String>,
    #[command(flatten)]
    sim: Simulator,
    /// Bytes per rank, as nccl-tests counts them (an all-gather's gathered output); several sizes
    /// separated by commas, with K/M/G suffixes (powers of 1024).
    #[arg(long, default_value = "1K,64K,1M")]
    bytes: String,
    #[command(flatten)]
    data: Data,
    /// Root rank of broadcast and reduce.
    #[arg(long, default_value_t = 0)]
    root: usize,
    /// Where each rank's data sits: one_pe (the SIP leader), multi_pe (every PE a block) or
    /// cube_leaders (every cube's PE 0 a block).
    #[arg(long, default_value = "one_pe")]
    layout: String,
    /// Check exactly too: run each call again on provenance inputs and say whether every output
    /// element holds each of its contributions exactly once (beside the numeric check).
    #[arg(long)]
    exact: bool,
}

#[derive(Debug, clap::Args)]
struct BenchArgs {
    /// The collective: all_reduce, all_gather, reduce_scatter, broadcast, reduce or all_to_all.
    collective: String,
    /// `auto` (the registry's choice per size), `all` (every algorithm of the collective), or a
    /// comma-separated list of algorithms, variants of their parameters (`ring:lanes=8:chunks=1`) and
    /// `auto`.
    #[arg(long, default_value = "auto")]
    algos: String,
    /// nccl-tests sizes in bytes per rank: FROM..TO doubles from FROM to TO; or a comma-separated list.
    /// The runtime moves real data, so large sizes take real time and memory.
    #[arg(long, default_value = "1K..16M")]
    sizes: String,
    #[command(flatten)]
    sim: Simulator,
    #[command(flatten)]
    data: Data,
    /// Root rank of broadcast and reduce.
    #[arg(long, default_value_t = 0)]
    root: usize,
    /// Print the rows as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Check exactly too (see `run --exact`): elements holding wrong contributions count as wrong.
    #[arg(long)]
    exact: bool,
}

#[derive(Debug, clap::Args)]
struct MscclArgs {
    /// The MSCCL-IR XML file (as msccl-tools writes it, or any dialect NCCL's or RCCL's MSCCL reader
    /// takes).
    file: PathBuf,
    /// A system JSON file (default: a fully-connected system of one SIP per GPU of the file).
    #[arg(long)]
    system: Option<PathBuf>,
    /// nccl-tests sizes in bytes per rank, as for `bench`.
    #[arg(long, default_value = "1K..16M")]
    sizes: String,
    #[command(flatten)]
    limits: Limits,
    /// Threads to poll PEs on.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[command(flatten)]
    data: Data,
    /// Print the rows as JSON instead of a table (the fields of `bench --json`).
    #[arg(long)]
    json: bool,
    /// Check exactly too (see `run --exact`): elements holding wrong contributions count as wrong.
    #[arg(long)]
    exact: bool,
}

#[derive(Debug, clap::Args)]
struct TuneArgs {
    /// The collective to tune, or `all`.
    collective: String,
    /// The sizes to tune at (as for `bench`).
    #[arg(long, default_value = "1K..16M")]
    sizes: String,
    /// Tune among these algorithms (and variants, as for `bench`) only, comma-separated (default:
    /// every algorithm of the collective that runs on the one-PE layout).
    #[arg(long)]
    algos: Option<String>,
    #[command(flatten)]
    sim: Simulator,
    #[command(flatten)]
    data: Data,
    /// Write the registry with the tuned rules here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the tuned rules here as kernbench's rules CSV (kernbench's algorithm names, bytes per
    /// rank).
    #[arg(long)]
    rules_csv: Option<PathBuf>,
    /// Write the tuned rules that NCCL has algorithms for here, as a configuration file of NCCL's
    /// example tuner plugin (NCCL_TUNER_CONFIG_FILE).
    #[arg(long)]
    nccl_tuner: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct TraceArgs {
    /// The collective.
    collective: String,
    /// The algorithm, or `auto` for the registry's choice.
    #[arg(long, default_value = "auto")]
    algo: String,
    /// The nccl-tests size of the call, in bytes per rank.
    #[arg(long, default_value = "1M")]
    bytes: String,
    #[command(flatten)]
    setup: Setup,
    #[command(flatten)]
    limits: Limits,
    #[command(flatten)]
    data: Data,
    /// Root rank of broadcast and reduce.
    #[arg(long, default_value_t = 0)]
    root: usize,
    /// Where to write the trace (open it at ui.perfetto.dev or chrome://tracing).
    #[arg(long, default_value = "trace.json")]
    out: PathBuf,
}

#[derive(Debug, clap::Args)]
struct ExplainArgs {
    /// The collective.
    collective: String,
    /// The nccl-tests size, in bytes per rank (K/M/G suffixes, as for `bench`).
    size: String,
    #[command(flatten)]
    setup: Setup,
}

#[derive(Debug, clap::Args)]
struct PlotArgs {
    /// The collective.
    collective: String,
    /// The algorithms to draw, as for `bench`.
    #[arg(long, default_value = "all")]
    algos: String,
    /// The sizes, as for `bench`.
    #[arg(long, default_value = "1K..16M")]
    sizes: String,
    #[command(flatten)]
    sim: Simulator,
    #[command(flatten)]
    data: Data,
    /// Where to write the SVG.
    #[arg(long, default_value = "busbw.svg")]
    out: PathBuf,
}

/// Runs the parsed command; commands that run several points stop before the next one once `stop` is
/// set, after printing what they have.
///
/// # Errors
/// Anything that stops the command, as one line for the caller to print; [`Interrupted`] (in the
/// error's chain) when `stop` stopped it.
pub fn run(cli: Cli, out: &mut impl Write, stop: &AtomicBool) -> Result<()> {
    match cli.command {
        Command::Run(args) => run_collectives(&args, out, stop),
        Command::Bench(args) => bench(&args, out, stop),
        Command::Tune(args) => tune(&args, out, stop),
        Command::Trace(args) => trace(&args, out, stop),
        Command::Plot(args) => plot(&args, out, stop),
        Command::Explain(args) => explain(&args, out, stop),
        Command::Msccl(args) => msccl(&args, out, stop),
        Command::List => list(out),
        Command::Plan { algorithm, system, all } => plan(&algorithm, system.as_deref(), all, out),
    }
}

/// The processes of the job this command runs in (`mpirun -np N kernbench ...`), when there are
/// several: every communicator a command makes spreads its calls over them. Process-wide, as an MPI job
/// is: set by the binary before [`run`] and taken back after it, so that MPI is finalised on exit.
static JOB: std::sync::Mutex<Option<Arc<dyn Exchange>>> = std::sync::Mutex::new(None);

/// Spreads the calls of every command run from now on over `job`'s processes (`None`: this process
/// alone).
pub fn spread_over(job: Option<Arc<dyn Exchange>>) {
    *JOB.lock().unwrap_or_else(|e| e.into_inner()) = job;
}

/// `comm`, spread over the job's processes when there are several.
fn in_job(comm: Communicator) -> Communicator {
    match JOB.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        Some(job) => comm.spread_over(Arc::clone(job)),
        None => comm,
    }
}

/// Writes `contents` to `file`; in a job of several processes only process 0 does, as only it prints.
fn write_out(file: &OutputFile, contents: &[u8]) -> Result<()> {
    if JOB.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|job| job.process() != 0) {
        return Ok(());
    }
    file.write(contents)
}

fn load_system(path: Option<&Path>) -> Result<System> {
    match path {
        Some(p) => Ok(System::from_file(p)?),
        None => Ok(System::builtin()),
    }
}

impl Simulator {
    fn communicator(&self) -> Result<Communicator> {
        self.limits.apply(self.setup.communicator(self.threads)?)
    }

    /// A communicator whose registry also holds the variants (`ring:lanes=8`) that `algos` names.
    fn communicator_for(&self, algos: &str, collective: Collective) -> Result<Communicator> {
        let comm = self.communicator()?;
        if !algos.contains(':') {
            return Ok(comm);
        }
        let registry = crate::sweep::with_variants(algos, comm.registry(), collective)?;
        self.limits.apply(in_job(Communicator::with_registry(comm.system().clone(), registry).threads(self.threads)))
    }
}

impl Setup {
    /// A communicator on the chosen system with the chosen registry.
    fn communicator(&self, threads: usize) -> Result<Communicator> {
        let system = load_system(self.system.as_deref())?;
        let comm = match &self.registry {
            Some(path) => {
                Communicator::with_registry(system, Registry::from_file(path, &kernbench::algorithms::kernels())?)
            }
            None => Communicator::new(system),
        };
        Ok(in_job(comm.threads(threads)))
    }
}

/// Says on stderr, once per command, each way a size was rounded to run.
#[derive(Default)]
struct Notes {
    said: Vec<Rounding>,
}

impl Notes {
    fn note(&mut self, rounded: Option<&Rounding>, bar: Option<&ProgressBar>) {
        let Some(rounded) = rounded.filter(|r| !self.said.contains(r)) else { return };
        // Nothing is lost if stderr cannot be written: the rows say what ran.
        let say = || drop(writeln!(std::io::stderr(), "kernbench: {rounded}"));
        match bar {
            Some(bar) => bar.suspend(say),
            None => say(),
        }
        self.said.push(rounded.clone());
    }
}

/// Whether `stop` was set, as the error that says how far the command got.
fn check_stop(stop: &AtomicBool, done: usize, points: usize) -> Result<(), Interrupted> {
    if stop.load(AtomicOrdering::SeqCst) { Err(Interrupted { done, points }) } else { Ok(()) }
}

fn collective(name: &str) -> Result<Collective> {
    Ok(name.parse()?)
}

/// One collective, or every one for `all`.
fn collectives(name: &str) -> Result<Vec<Collective>> {
    if name == "all" { Ok(Collective::ALL.to_vec()) } else { Ok(vec![collective(name)?]) }
}

/// Rows printed as they come, above a progress bar on stderr when stderr is a terminal.
struct Progress {
    bar: Option<ProgressBar>,
    print: bool,
    written: std::io::Result<()>,
    notes: Notes,
}

impl Progress {
    /// Progress over `points` rows, printing each as a table line when `print`.
    fn new(points: usize, print: bool) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let style = ProgressStyle::with_template("{bar:40} {pos}/{len} points, {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            ProgressBar::new(points as u64).with_style(style)
        });
        Progress { bar, print, written: Ok(()), notes: Notes::default() }
    }

    fn row(&mut self, row: &Row, out: &mut impl Write) {
        self.notes.note(row.rounded.as_ref(), self.bar.as_ref());
        if self.print && self.written.is_ok() {
            self.written = match &self.bar {
                Some(bar) => bar.suspend(|| writeln!(out, "{}", row.table_line())),
                None => writeln!(out, "{}", row.table_line()),
            };
        }
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{} {} B", row.series, row.size));
            bar.inc(1);
        }
    }

    /// Clears the bar; the first error writing a row, if any.
    fn finish(self) -> std::io::Result<()> {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        self.written
    }
}

/// Runs `sweep`, printing each row as a table line (unless `quiet`); the rows that ran, and an error
/// if `stop` ended the sweep before its last point.
fn run_sweep(
    sweep: &Sweep,
    comm: &mut Communicator,
    quiet: bool,
    stop: &AtomicBool,
    out: &mut impl Write,
) -> Result<(Vec<Row>, Result<(), Interrupted>)> {
    let mut progress = Progress::new(sweep.points(), !quiet);
    let mut rows = Vec::new();
    let ran = sweep.run_until(comm, stop, |row| {
        progress.row(row, out);
        rows.push(row.clone());
    });
    progress.finish()?;
    match ran {
        Ok(_) => Ok((rows, Ok(()))),
        Err(SweepError::Interrupted(interrupted)) => Ok((rows, Err(interrupted))),
        Err(e) => Err(e.into()),
    }
}

fn run_collectives(args: &RunArgs, out: &mut impl Write, stop: &AtomicBool) -> Result<()> {
    let mut comm = args.sim.communicator()?.exact(args.exact);
    let system = comm.system().clone();
    let collectives = collectives(&args.collective)?;
    let (dtype, op) = args.data.parse()?;
    let layout = match args.layout.as_str() {
        "one_pe" => DpPolicy::LEADER,
        "multi_pe" => EVERY_PE,
        "cube_leaders" => CUBE_LEADERS,
        other => bail!("unknown layout `{}`: expected one_pe, multi_pe or cube_leaders", Quoted(other)),
    };
    let sizes = args.bytes.split(',').map(parse_size).collect::<Result<Vec<_>, _>>()?;
    // The collective's ranks are the PEs that hold data.
    let ranks = system.sips() * shards_per_sip(&system, layout);
    let limit = args.sim.limits.memory()?;
    writeln!(out, "{}", system.describe())?;
    let (mut wrong, mut done, mut notes) = (0, 0, Notes::default());
    let points = collectives.len() * sizes.len();
    for collective in collectives {
        for &bytes in &sizes {
            check_stop(stop, done, points)?;
            done += 1;
            let context = || format!("{collective} of {bytes} bytes");
            check_memory(&system, collective, bytes, (layout, ranks), limit)?;
            let (tensor, rounded) =
                point_tensor(&system, collective, bytes, (dtype, op), layout, ranks).with_context(context)?;
            notes.note(rounded.as_ref(), None);
            let options = CallOptions { algorithm: args.algo.clone(), generation: None };
            let (_, report) = comm.call(collective, &tensor, op, args.root, &options).with_context(context)?;
            writeln!(out, "{report}")?;
            // On stderr, as the rounding notes: it depends on the machine and the allocator, so it is no
            // part of the output a test or a README can compare; nothing is lost if it cannot be written.
            if let Some(peak) = memory::peak_resident() {
                let peak = kernbench::estimate::human(peak);
                drop(writeln!(
                    std::io::stderr(),
                    "kernbench: {collective} #{}: peak memory so far {peak}",
                    report.generation
                ));
            }
            wrong += usize::from(!report.postcondition.held || report.exact.as_ref().is_some_and(|e| !e.held));
        }
    }
    if wrong > 0 {
        bail!("{wrong} call(s) broke their postcondition");
    }
    Ok(())
}

fn bench(args: &BenchArgs, out: &mut impl Write, stop: &AtomicBool) -> Result<()> {
    let collective = collective(&args.collective)?;
    let mut comm = args.sim.communicator_for(&args.algos, collective)?.exact(args.exact);
    let series = Series::parse_list(&args.algos, comm.registry(), collective)?;
    let sizes = parse_sizes(&args.sizes)?;
    let (dtype, op) = args.data.parse()?;
    let sweep =
        Sweep::new(collective, series, sizes).dtype(dtype).op(op).root(args.root).max_memory(args.sim.limits.memory()?);
    let system = comm.system().clone();
    if args.json {
        let (rows, interrupted) = run_sweep(&sweep, &mut comm, true, stop, out)?;
        let doc = serde_json::json!({
            "collective": collective,
            "system": system.spec(),
            "rows": rows,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(interrupted?);
    }
    writeln!(out, "# kernbench bench {collective} on {}", system.describe())?;
    writeln!(out, "{}", table_header())?;
    let (rows, interrupted) = run_sweep(&sweep, &mut comm, false, stop, out)?;
    write!(out, "{}", table_footer(&rows))?;
    Ok(interrupted?)
}

/// Runs an MSCCL-IR file as the registry algorithm `msccl_program` binds it to, on `full`, over the
/// sizes of a `bench`, and says whether every point held its postcondition.
fn msccl(args: &MscclArgs, out: &mut impl Write, stop: &AtomicBool) -> Result<()> {
    let program = kernbench::program::msccl::from_file(&args.file)?;
    let system = match &args.system {
        Some(path) => System::from_file(path)?,
        None => System::from_json_str(
            &serde_json::json!({
                "sips": program.ranks.len(), "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1,
                "sip_interconnect": "fully_connected"
            })
            .to_string(),
        )?,
    };
    let collective = program.collective;
    let name = if program.name.is_empty() { "msccl".to_owned() } else { program.name.clone() };
    let registry = serde_json::json!({
        "algorithms": {&name: {
            "collective": collective, "kernel": kernbench::program::MSCCL_PROGRAM.name, "topology": "full",
            "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "hbm",
            "params": {"file": args.file}, "summary": format!("MSCCL-IR file {}", args.file.display())
        }},
        "selection": {}
    });
    let registry = Registry::from_json_str(&registry.to_string(), &kernbench::algorithms::kernels())?;
    let comm = in_job(Communicator::with_registry(system, registry).threads(args.threads).exact(args.exact));
    let mut comm = args.limits.apply(comm)?;
    let series = Series::parse_list(&name, comm.registry(), collective)?;
    let (dtype, op) = args.data.parse()?;
    let sweep =
        Sweep::new(collective, series, parse_sizes(&args.sizes)?).dtype(dtype).op(op).max_memory(args.limits.memory()?);
    let system = comm.system().clone();
    let (rows, interrupted) = if args.json {
        let (rows, interrupted) = run_sweep(&sweep, &mut comm, true, stop, out)?;
        let doc = serde_json::json!({"collective": collective, "system": system.spec(), "rows": rows});
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        (rows, interrupted)
    } else {
        let thread_blocks: usize = program.ranks.iter().map(|r| r.thread_blocks.len()).sum();
        writeln!(
            out,
            "# kernbench msccl {}: `{name}`, {collective} over {} ranks, {} chunks, {thread_blocks} thread blocks, protocol {}, on {}",
            args.file.display(),
            program.ranks.len(),
            program.chunks,
            program.protocol.name(),
            system.describe()
        )?;
        for refusal in kernbench::program::msccl::refusals(&program) {
            writeln!(out, "# {} would refuse it: {}", refusal.executor, refusal.reason)?;
        }
        writeln!(out, "{}", table_header())?;
        let (rows, interrupted) = run_sweep(&sweep, &mut comm, false, stop, out)?;
        write!(out, "{}", table_footer(&rows))?;
        (rows, interrupted)
    };
    interrupted?;
    let wrong = rows.iter().filter(|r| r.wrong > 0).count();
    if wrong > 0 {
        bail!("`{name}` broke the {collective} postcondition at {wrong} of {} sizes", rows.len());
    }
    if !args.json {
        writeln!(out, "# correct at every size")?;
    }
    Ok(())
}

fn tune(args: &TuneArgs, out: &mut impl Write, stop: &AtomicBool) -> Result<()> {
    let check = |path: &Option<PathBuf>| path.as_deref().map(OutputFile::check).transpose();
    let (registry_file, rules_file, nccl_file) = (check(&args.out)?, check(&args.rules_csv)?, check(&args.nccl_tuner)?);
    let collectives = collectives(&args.collective)?;
    // `all` is every candidate, as without the flag.
    let algos = args.algos.as_deref().filter(|algos| algos.trim() != "all");
    let mut comm = match (algos, collectives.as_slice()) {
        (None, _) => args.sim.communicator()?,
        (Some(algos), [collective]) => args.sim.communicator_for(algos, *collective)?,
        (Some(_), _) => {
            bail!("--algos chooses among one collective's algorithms: name the collective instead of `all`")
        }
    };
    let sizes = parse_sizes(&args.sizes)?;
    let data = args.data.parse()?;
    let system = comm.system().clone();
    let mut registry = comm.registry().clone();
    let mut tunings = Vec::new();
    for collective in collectives {
        writeln!(out, "# kernbench tune {collective}: {}", system.describe())?;
        let mut tuner = Tuner::new(&mut comm, collective)?.max_memory(args.sim.limits.memory()?);
        if let Some(algos) = algos {
            tuner = tuner.only(algos)?;
        }
        writeln!(out, "# candidates (one-PE layout): {}", tuner.candidates().join(", "))?;
        writeln!(out, "{}", table_header())?;
        let mut progress = Progress::new(sizes.len() * tuner.candidates().len(), true);
        let tuning = tuner.run_until(&mut comm, &sizes, data, stop, |row| progress.row(row, out));
        progress.finish()?;
        let tuning = tuning?;
        writeln!(out, "# fastest per size (bytes per SIP):")?;
        for bucket in &tuning.buckets {
            writeln!(out, "#   {bucket}")?;
        }
        registry = tuning.registry(&registry)?;
        tunings.push(tuning);
    }
    if let Some(file) = &registry_file {
        write_out(file, (serde_json::to_string_pretty(&registry)? + "\n").as_bytes())?;
        writeln!(out, "# wrote {} (use it with --registry)", file.path().display())?;
    }
    if let Some(file) = &rules_file {
        write_out(file, rules_csv(&tunings).as_bytes())?;
        writeln!(out, "# wrote {}", file.path().display())?;
    }
    if let Some(file) = &nccl_file {
        write_out(file, nccl_tuner_csv(&tunings).as_bytes())?;
        writeln!(out, "# wrote {} (NCCL_TUNER_CONFIG_FILE of NCCL's example tuner plugin)", file.path().display())?;
    }
    Ok(())
}

fn trace(args: &TraceArgs, out: &mut impl Write, stop: &AtomicBool) -> Result<()> {
    let file = OutputFile::check(&args.out)?;
    let collective = collective(&args.collective)?;
    let comm = args.limits.apply(args.setup.communicator(1)?)?;
    let mut comm = comm.timing(Some(Timing { trace: true, ..Timing::default() }));
    let series = match Series::parse_list(&args.algo, comm.registry(), collective)?.as_slice() {
        [one] => one.clone(),
        _ => bail!("bad --algo `{}`: expected one algorithm of {collective}, or auto", Quoted(&args.algo)),
    };
    let size = parse_size(&args.bytes)?;
    let (dtype, op) = args.data.parse()?;
    let sweep = Sweep::new(collective, vec![series.clone()], vec![size])
        .dtype(dtype)
        .op(op)
        .root(args.root)
        .max_memory(args.limits.memory()?);
    let (row, report) = sweep.call(&mut comm, &series, size)?;
    Notes::default().note(row.rounded.as_ref(), None);
    // Ctrl-C during the call means the trace is not wanted.
    check_stop(stop, 0, 1)?;
    let trace = report.run.trace().context("the run was not timed")?;
    let text = serde_json::to_string(&trace)?;
    write_out(&file, (text + "\n").as_bytes())?;
    writeln!(out, "{report}")?;
    let time = report.run.time();
    let channels = time.map_or(0, |t| t.channels.len());
    // A PE of one lane is one track; a PE of several, one per lane.
    let lanes: usize = time.map_or(0, |t| t.pes.iter().map(|p| p.lanes.len().max(1)).sum());
    writeln!(
        out,
        "wrote {}: {} events, a track per lane of each PE ({} PEs, {lanes} lanes) and per busy channel ({}); {:.0} ns simulated; open it at ui.perfetto.dev",
        args.out.display(),
        trace.trace_events.len(),
        report.run.pes().len(),
        channels,
        row.time_ns
    )?;
    Ok(())
}

fn plot(args: &PlotArgs, out: &mut impl Write, stop: &AtomicBool) -> Result<()> {
    let file = OutputFile::check(&args.out)?;
    let collective = collective(&args.collective)?;
    let mut comm = args.sim.communicator_for(&args.algos, collective)?;
    let series = Series::parse_list(&args.algos, comm.registry(), collective)?;
    let sizes = parse_sizes(&args.sizes)?;
    let (dtype, op) = args.data.parse()?;
    let sweep =
        Sweep::new(collective, series.clone(), sizes.clone()).dtype(dtype).op(op).max_memory(args.sim.limits.memory()?);
    let (rows, interrupted) = run_sweep(&sweep, &mut comm, true, stop, out)?;
    interrupted?;
    let title = format!("{collective} busbw on {}", comm.system().describe());
    let svg = crate::plot::busbw_svg(&title, &rows)?;
    write_out(&file, svg.as_bytes())?;
    writeln!(out, "wrote {}: busbw of {} series at {} sizes", args.out.display(), series.len(), sizes.len())?;
    Ok(())
}

fn explain(args: &ExplainArgs, out: &mut impl Write, stop: &AtomicBool) -> Result<()> {
    let collective = collective(&args.collective)?;
    let mut comm = args.setup.communicator(1)?;
    let size = parse_size(&args.size)?;
    let algorithms = Series::parse_list("all", comm.registry(), collective)?;
    let sweep = Sweep::new(collective, algorithms.clone(), vec![size]);
    let system = comm.system().clone();
    writeln!(out, "{collective} of {size} bytes per SIP (one-PE layout) on {}", system.describe())?;
    // The bytes per SIP the rules compare: those of the one-PE tensor `auto` runs on.
    let (tensor, rounded) =
        point_tensor(&system, collective, size, (Dtype::F32, ReduceOp::Sum), DpPolicy::LEADER, system.sips())?;
    let mut notes = Notes::default();
    notes.note(rounded.as_ref(), None);
    let (rows, columns) = tensor.shape();
    let bytes_per_rank = (rows * columns * tensor.dtype().size()) as u64;
    let chosen = match sweep.call(&mut comm, &Series::Auto, size) {
        Ok((_, report)) => Ok(report),
        Err(SweepError::Call { source, .. }) => Err(source),
        Err(e) => return Err(e.into()),
    };
    let chosen_name = chosen.as_ref().map_or("", |report| report.algorithm.as_str());
    writeln!(out, "selection rules, tried in order:")?;
    let registry = comm.registry();
    let matching: Vec<usize> =
        registry.matching(collective, bytes_per_rank, LayoutKind::OnePe).map(|s| s.rule_index).collect();
    let rules = registry.rules(collective);
    let chosen_rule = matching.iter().copied().find(|&i| rules[i].algorithm == chosen_name);
    for (i, rule) in rules.iter().enumerate() {
        let verdict = match (matching.contains(&i), chosen_rule.map(|c| i.cmp(&c))) {
            (false, _) => "does not match",
            (true, Some(Ordering::Equal)) => "matches: chosen",
            (true, Some(Ordering::Greater)) => "matches, not reached",
            (true, _) => "matches, but the algorithm does not take the tensor",
        };
        writeln!(out, "  {}. {rule}: {verdict}", i + 1)?;
    }
    match &chosen {
        Ok(report) => writeln!(out, "chosen: {} [{}]", report.algorithm, report.reason)?,
        Err(why) => writeln!(out, "chosen: none: {why}")?,
    }
    writeln!(
        out,
        "every algorithm of {collective} at this size (ranks: the PEs holding data, a SIP's or several per SIP):"
    )?;
    writeln!(out, "{:<34} {:>6} {:>10} {:>8}  note", "algorithm", "ranks", "time (us)", "busbw")?;
    for (done, series) in algorithms.iter().enumerate() {
        check_stop(stop, done, algorithms.len())?;
        match sweep.call(&mut comm, series, size) {
            Ok((row, _)) => {
                notes.note(row.rounded.as_ref(), None);
                let note = if row.algorithm == chosen_name { "chosen" } else { "" };
                let line = format!(
                    "{:<34} {:>6} {:>10.2} {:>8.2}  {note}",
                    row.algorithm,
                    row.ranks,
                    row.time_ns / 1000.0,
                    row.busbw_gbps
                );
                writeln!(out, "{}", line.trim_end())?;
            }
            Err(SweepError::Call { source, .. }) => {
                writeln!(out, "{:<34} {:>6} {:>10} {:>8}  cannot run: {source}", series.label(), "-", "-", "-")?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn list(out: &mut impl Write) -> Result<()> {
    let registry = kernbench::algorithms::default_registry();
    writeln!(out, "algorithms (default ccl.json):")?;
    for a in registry.algorithms() {
        writeln!(
            out,
            "  {:<34} {:<15} {:<20} {:<13} {}",
            a.name,
            a.collective.name(),
            a.topology,
            a.mapper,
            a.summary
        )?;
    }
    writeln!(out, "kernels:")?;
    for k in kernbench::algorithms::kernels().iter() {
        let params: Vec<String> = k.params.iter().map(|p| format!("{}: {}", p.name, p.ty)).collect();
        writeln!(out, "  {:<34} ({}) {}", k.name, params.join(", "), k.summary)?;
    }
    for (title, items) in [("topologies", TOPOLOGIES), ("mappers", MAPPERS), ("validators", VALIDATORS)] {
        writeln!(out, "{title}:")?;
        for item in items {
            writeln!(out, "  {:<34} {}", item.name, item.summary)?;
        }
    }
    writeln!(out, "selection rules:")?;
    for c in Collective::ALL {
        for (i, rule) in registry.rules(c).iter().enumerate() {
            writeln!(out, "  {:<15} {}. {rule}", c.name(), i + 1)?;
        }
    }
    Ok(())
}

fn plan(algorithm: &str, system: Option<&Path>, all: bool, out: &mut impl Write) -> Result<()> {
    let system = load_system(system)?;
    let registry = kernbench::algorithms::default_registry();
    let entry = registry.get(algorithm)?;
    let plan = entry.plan(&system)?;
    writeln!(out, "{}", system.describe())?;
    writeln!(
        out,
        "{}: topology {}, mapper {}, validator {}, {} participating PEs",
        entry.name,
        entry.topology,
        entry.mapper,
        entry.validator,
        plan.len()
    )?;
    print_plan(&plan, all, out)
}

fn print_plan(plan: &InstallPlan, all: bool, out: &mut impl Write) -> Result<()> {
    for sip in plan.sips.iter().take(if all { usize::MAX } else { 1 }) {
        writeln!(out, "SIP {}:", sip.sip)?;
        for pe in &sip.pes {
            let neighbors: Vec<String> = pe
                .neighbors
                .iter()
                .map(|n| {
                    format!(
                        "{} -> {} ({}, {} hop{})",
                        n.direction,
                        n.peer,
                        n.link,
                        n.hops,
                        if n.hops == 1 { "" } else { "s" }
                    )
                })
                .collect();
            writeln!(
                out,
                "  rank {:>4} {}: {}",
                pe.rank,
                pe.pe,
                if neighbors.is_empty() { "no neighbours".to_owned() } else { neighbors.join("; ") }
            )?;
        }
    }
    if !all && plan.sips.len() > 1 {
        writeln!(out, "({} more SIPs; --all prints them)", plan.sips.len() - 1)?;
    }
    Ok(())
}

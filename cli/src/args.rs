//! The command line as clap reads it: every command's arguments, as text, with the groups several
//! commands share. Nothing here is checked beyond its type; [`crate::config`] loads and validates what
//! the calls run on.
//!
//! Uses nothing of this crate.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Write, run, time and tune collective-communication kernels on a simulated accelerator.
#[derive(Debug, Parser)]
#[command(name = "kernbench", version)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
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
    /// Fit a system to nccl-tests logs: move the figures they constrain until the simulated times come
    /// closest to the measured ones, write the fitted system, and print both size by size.
    Calibrate(CalibrateArgs),
    /// Run a workload (a training step's calls and compute phases, as our JSON or Chakra execution
    /// traces) and report the step's time, each call's time and its slowdown against running alone.
    Workload(WorkloadArgs),
    /// List the algorithms, kernels, topologies, mappers and validators.
    List,
    /// Print a system and an algorithm's install plan on it.
    Plan(PlanArgs),
}

/// The system to run on and the registry that chooses the algorithms.
#[derive(Debug, clap::Args)]
pub struct SystemArgs {
    /// A system JSON file (default: the built-in system).
    #[arg(long)]
    pub system: Option<PathBuf>,
    /// A complete registry JSON file, such as `kernbench tune --out` writes (default: the shipped ccl.json).
    #[arg(long)]
    pub registry: Option<PathBuf>,
}

/// How much memory a call may need and how many messages it may send.
#[derive(Debug, clap::Args)]
pub struct LimitArgs {
    /// Refuse a call whose estimated peak memory passes SIZE bytes (K/M/G suffixes); default: the
    /// memory available (MemAvailable of /proc/meminfo; no limit where that is unknown).
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Option<String>,
    /// Refuse a call that moves data and whose estimated message count passes COUNT (see
    /// kernbench::estimate); default: 67108864 (2^26). A --timing-only call is bounded by
    /// --max-memory instead, its estimate counting its messages.
    #[arg(long, value_name = "COUNT", default_value_t = kernbench::estimate::DEFAULT_MAX_MESSAGES)]
    pub max_messages: u64,
}

/// Everything the simulator runs with: the system, the registry, the limits, the threads and whether
/// the calls move data.
#[derive(Debug, clap::Args)]
pub struct RunnerArgs {
    /// The system and the registry.
    #[command(flatten)]
    pub system: SystemArgs,
    /// The memory and message limits.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Threads to poll PEs on.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Whether the calls move data.
    #[command(flatten)]
    pub timing: TimingArgs,
}

/// The element type of the data and the reduction applied to it.
/// Whether the calls move data.
#[derive(Debug, clap::Args)]
pub struct TimingArgs {
    /// Simulate time only: tiles carry their dtype and length but no bytes, so any size runs in the
    /// memory and time of its messages, with the same simulated times; outputs are not checked.
    #[arg(long)]
    pub timing_only: bool,
    /// GPUs (SIPs) one host thread launches kernels on, one after another, as nccl-tests' `-g N`
    /// (default: 1, a process per GPU; with --compare, the log's `nGpus`). Each further GPU's kernel
    /// starts the system's `call.launch_per_gpu_ns` later.
    #[arg(long, value_name = "N")]
    pub gpus_per_thread: Option<usize>,
    /// A fault to simulate, `PART:EFFECT[@TIME]` (repeatable): `link=3-4:fail@120us` cuts the link
    /// between SIPs 3 and 4 (both ways) from 120 us on, `link=3>4:slow=2` halves one direction's
    /// bandwidth from the start, `nic=0.1:fail@1ms` (node 0's NIC of rail 1), `pe=2.0.0:fail@50us`. A
    /// message is routed round a failed link where the topology allows; otherwise the call ends with
    /// an error naming the failed links and the ranks cut off.
    #[arg(long = "fault", value_name = "FAULT", value_parser = parse_fault)]
    pub faults: Vec<kernbench::sim::Fault>,
    /// A JSON file of faults: a list of FAULT texts, or {"faults": [...]}, with any --fault.
    #[arg(long = "faults", value_name = "FILE")]
    pub faults_file: Option<PathBuf>,
    /// Under mpirun, how the processes place transfers on the channels: `whole` (every process books
    /// every channel), `divided` (each its own channels, a transfer passed on hop by hop), or `auto`
    /// (divided from 65,536 queues). Results are the same.
    #[arg(long, value_name = "HOW", default_value = "auto", value_parser = parse_placement)]
    pub placement: kernbench::sim::spread::Placement,
}

fn parse_placement(text: &str) -> Result<kernbench::sim::spread::Placement, String> {
    use kernbench::sim::spread::Placement;
    match text {
        "auto" => Ok(Placement::Auto),
        "whole" => Ok(Placement::Whole),
        "divided" => Ok(Placement::Divided),
        _ => Err(format!("`{}` is not a placement: expected auto, whole or divided", text.escape_debug())),
    }
}

fn parse_fault(text: &str) -> Result<kernbench::sim::Fault, String> {
    text.parse().map_err(|e: kernbench::sim::FaultSyntaxError| e.why)
}

#[derive(Debug, clap::Args)]
pub struct ElementArgs {
    /// Element type: f32, f16, bf16, i32, i64.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Reduction: sum, prod, max, min, avg.
    #[arg(long, default_value = "sum")]
    pub op: String,
    /// The seed of all_to_all_v's uneven per-pair counts: each rank sends its whole input, split over
    /// the ranks by weights drawn from SEED, some pairs nothing.
    #[arg(long, value_name = "SEED", default_value_t = crate::sweep::DEFAULT_COUNTS_SEED, value_parser = parse_seed)]
    pub counts_seed: u64,
}

/// A seed: a whole number that fits 64 bits.
fn parse_seed(text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("`{}` is not a seed: expected a whole number from 0 to {}", text.escape_debug(), u64::MAX))
}

/// A sweep: one collective over algorithms and sizes, where and on what data (`bench`, `plot`).
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    /// The collective: all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all,
    /// all_to_all_v or send_recv (nccl-tests' names, such as alltoallv and sendrecv, too).
    pub collective: String,
    /// `auto` (the registry's choice per size), `all` (every algorithm of the collective), or a
    /// comma-separated list of algorithms, variants of their parameters (`ring:lanes=8:chunks=1`) and
    /// `auto`.
    #[arg(long, default_value = "auto")]
    pub algos: String,
    /// nccl-tests sizes in bytes per rank: FROM..TO doubles from FROM to TO; or a comma-separated list
    /// (default: 1K..16M, or the sizes of the --compare log). The runtime moves real data, so large sizes
    /// take real time and memory.
    #[arg(long)]
    pub sizes: Option<String>,
    /// The system, registry, limits and threads.
    #[command(flatten)]
    pub runner: RunnerArgs,
    /// The element type and reduction.
    #[command(flatten)]
    pub elements: ElementArgs,
    /// An nccl-tests log of the collective, on as many GPUs as the system has SIPs: its measured times
    /// beside the simulated ones.
    #[arg(long, value_name = "LOG")]
    pub compare: Option<PathBuf>,
}

/// The sizes a command sweeps unless told otherwise.
pub const DEFAULT_SIZES: &str = "1K..16M";

/// How a sweep's table is checked and printed (`bench`, `msccl`).
#[derive(Debug, clap::Args)]
pub struct TableArgs {
    /// Print the rows as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Check exactly too (see `run --exact`): elements holding wrong contributions count as wrong.
    #[arg(long)]
    pub exact: bool,
}

/// `kernbench run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all,
    /// all_to_all_v, send_recv, or nccl-tests' names), or `all`.
    pub collective: String,
    /// Run this algorithm instead of the registry's choice.
    #[arg(long)]
    pub algo: Option<String>,
    /// The system, registry, limits and threads.
    #[command(flatten)]
    pub runner: RunnerArgs,
    /// Bytes per rank, as nccl-tests counts them (an all-gather's gathered output); several sizes
    /// separated by commas, with K/M/G suffixes (powers of 1024).
    #[arg(long, default_value = "1K,64K,1M")]
    pub bytes: String,
    /// The element type and reduction.
    #[command(flatten)]
    pub elements: ElementArgs,
    /// Root rank of broadcast and reduce.
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// Where each rank's data sits: one_pe (the SIP leader), multi_pe (every PE a block) or
    /// cube_leaders (every cube's PE 0 a block).
    #[arg(long, default_value = "one_pe")]
    pub layout: String,
    /// Check exactly too: run each call again on provenance inputs and say whether every output
    /// element holds each of its contributions exactly once (beside the numeric check).
    #[arg(long)]
    pub exact: bool,
    /// Run each call again under N seeded orders of the one-sided operations that land at the same
    /// time, and say whether any changes the outcome (it can only where atomics race); a seed that
    /// does is named, to replay with --schedule.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub schedules: u64,
    /// Apply one-sided operations that land at the same time in the order of seed SEED (default: rank
    /// order): replays a seed --schedules named.
    #[arg(long, value_name = "SEED")]
    pub schedule: Option<u64>,
}

/// `kernbench bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The collective, algorithms, sizes, system and data.
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Root rank of broadcast and reduce.
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// JSON or a table, and the exact check.
    #[command(flatten)]
    pub table: TableArgs,
}

/// `kernbench msccl`.
#[derive(Debug, clap::Args)]
// Help set here is shown as written: clap drops the final period only from doc comments.
#[command(mut_arg("json", |a| a.help("Print the rows as JSON instead of a table (the fields of `bench --json`)")))]
pub struct MscclArgs {
    /// The MSCCL-IR XML file (as msccl-tools writes it, or any dialect NCCL's or RCCL's MSCCL reader
    /// takes).
    pub file: PathBuf,
    /// A system JSON file (default: a fully-connected system of one SIP per GPU of the file).
    #[arg(long)]
    pub system: Option<PathBuf>,
    /// nccl-tests sizes in bytes per rank, as for `bench`.
    #[arg(long, default_value = DEFAULT_SIZES)]
    pub sizes: String,
    /// The memory and message limits.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Threads to poll PEs on.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Whether the calls move data.
    #[command(flatten)]
    pub timing: TimingArgs,
    /// The element type and reduction.
    #[command(flatten)]
    pub elements: ElementArgs,
    /// JSON or a table, and the exact check.
    #[command(flatten)]
    pub table: TableArgs,
}

/// `kernbench tune`.
#[derive(Debug, clap::Args)]
pub struct TuneArgs {
    /// The collective to tune, or `all`.
    pub collective: String,
    /// The sizes to tune at (as for `bench`).
    #[arg(long, default_value = DEFAULT_SIZES)]
    pub sizes: String,
    /// Tune among these algorithms (and variants, as for `bench`) only, comma-separated (default:
    /// every algorithm of the collective that runs on the one-PE layout).
    #[arg(long)]
    pub algos: Option<String>,
    /// The system, registry, limits and threads.
    #[command(flatten)]
    pub runner: RunnerArgs,
    /// The element type and reduction.
    #[command(flatten)]
    pub elements: ElementArgs,
    /// Write the registry with the tuned rules here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the tuned rules here as kernbench's rules CSV (kernbench's algorithm names, bytes per
    /// rank).
    #[arg(long)]
    pub rules_csv: Option<PathBuf>,
    /// Write the tuned rules that NCCL has algorithms for here, as a configuration file of NCCL's
    /// example tuner plugin (NCCL_TUNER_CONFIG_FILE).
    #[arg(long)]
    pub nccl_tuner: Option<PathBuf>,
}

/// `kernbench trace`.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// The collective.
    pub collective: String,
    /// The algorithm, or `auto` for the registry's choice.
    #[arg(long, default_value = "auto")]
    pub algo: String,
    /// The nccl-tests size of the call, in bytes per rank.
    #[arg(long, default_value = "1M")]
    pub bytes: String,
    /// The system and the registry.
    #[command(flatten)]
    pub system: SystemArgs,
    /// The memory and message limits.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Whether the call moves data.
    #[command(flatten)]
    pub timing: TimingArgs,
    /// The element type and reduction.
    #[command(flatten)]
    pub elements: ElementArgs,
    /// Root rank of broadcast and reduce.
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// Where to write the trace (open it at ui.perfetto.dev or chrome://tracing).
    #[arg(long, default_value = "trace.json")]
    pub out: PathBuf,
}

/// `kernbench workload`.
#[derive(Debug, clap::Args)]
pub struct WorkloadArgs {
    /// The workload: a JSON file, or Chakra execution traces (a `NAME.R.et` file, the directory
    /// holding them, or the `NAME` prefix).
    pub file: PathBuf,
    /// The system and the registry.
    #[command(flatten)]
    pub system: SystemArgs,
    /// A GPU's rate for compute phases given in flops, in GFLOP/s (989000 for an H100's dense BF16):
    /// needed when the workload gives any.
    #[arg(long, value_name = "GFLOPS")]
    pub gpu_gflops: Option<f64>,
    /// Print the step as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the step as a Chrome / Perfetto trace, one track per node, to this file.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

/// `kernbench explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The collective.
    pub collective: String,
    /// The nccl-tests size, in bytes per rank (K/M/G suffixes, as for `bench`).
    pub size: String,
    /// The system and the registry.
    #[command(flatten)]
    pub system: SystemArgs,
    /// Whether the calls move data.
    #[command(flatten)]
    pub timing: TimingArgs,
}

/// `kernbench plot`: a sweep drawn, every algorithm unless `--algos` says otherwise.
#[derive(Debug, clap::Args)]
// Help set here is shown as written: clap drops the final period only from doc comments.
#[command(mut_arg("collective", |a| a.help("The collective")))]
#[command(mut_arg("algos", |a| a.default_value("all").help("The algorithms to draw, as for `bench`")))]
#[command(mut_arg("sizes", |a| a.help("The sizes, as for `bench`")))]
pub struct PlotArgs {
    /// The collective, algorithms, sizes, system and data.
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Where to write the SVG.
    #[arg(long, default_value = "busbw.svg")]
    pub out: PathBuf,
}

/// `kernbench calibrate`.
#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// nccl-tests logs of one machine (all_reduce_perf and its siblings' output), fitted together.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// The system to start from (default: the built-in system) and the registry.
    #[command(flatten)]
    pub system: SystemArgs,
    /// The algorithm to run for each log's collective, comma-separated, variants allowed
    /// (`ring:lanes=16`); default: ring, ring_allgather and ring_reduce_scatter on one lane per engine
    /// of the system's PEs, as NCCL runs a ring channel per SM.
    #[arg(long)]
    pub algos: Option<String>,
    /// Where to write the fitted system.
    #[arg(long)]
    pub out: PathBuf,
}

/// `kernbench plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The algorithm (see `kernbench list`).
    pub algorithm: String,
    /// A system JSON file (default: the built-in system).
    #[arg(long)]
    pub system: Option<PathBuf>,
    /// Print every SIP's PEs, not only SIP 0's.
    #[arg(long)]
    pub all: bool,
}

//! The commands, one module each: [`run`] hands a parsed command line to its command, which validates
//! its arguments (into a [`Config`](crate::config::Config) where it calls the simulator), calls the
//! library and prints the result; `progress` holds what they say while they run.
//!
//! Uses [`crate::args`] and [`crate::config`]; the commands also use the sweeps, tuner, plots and
//! output files of this crate.

mod bench;
mod calibrate;
mod explain;
mod list;
mod msccl;
mod plan;
mod plot;
mod progress;
mod run;
mod trace;
mod tune;
mod workload;

use std::io::Write;
use std::sync::atomic::AtomicBool;

use anyhow::Result;

use crate::args::{Cli, Command};
use crate::config::{Job, leads};

/// Runs the parsed command, spreading its calls over the processes of `job` (`mpirun -np N kernbench
/// ...`; `None`: this process alone); only process 0 of a job prints to `out` and writes files.
/// Commands that run several points stop before the next one once `stop` is set, after printing what
/// they have.
///
/// # Errors
/// Anything that stops the command, as one line for the caller to print; [`Interrupted`] (in the
/// error's chain) when `stop` stopped it.
///
/// [`Interrupted`]: crate::sweep::Interrupted
pub fn run(cli: Cli, job: Job, out: &mut dyn Write, stop: &AtomicBool) -> Result<()> {
    // The other processes of a job compute the same and stay quiet (errors excepted).
    let mut quiet = std::io::sink();
    let out: &mut dyn Write = if leads(&job) { out } else { &mut quiet };
    match cli.command {
        Command::Run(args) => run::run(&args, job, out, stop),
        Command::Bench(args) => bench::run(&args, job, out, stop),
        Command::Tune(args) => tune::run(&args, job, out, stop),
        Command::Trace(args) => trace::run(&args, job, out, stop),
        Command::Plot(args) => plot::run(&args, job, out, stop),
        Command::Explain(args) => explain::run(&args, job, out, stop),
        Command::Msccl(args) => msccl::run(&args, job, out, stop),
        Command::Calibrate(args) => calibrate::run(&args, out),
        Command::Workload(args) => workload::run(&args, out),
        Command::List => list::run(out),
        Command::Plan(args) => plan::run(&args, out),
    }
}

//! `kernbench bench`: a sweep printed as an nccl-tests table, or as JSON, beside a log's measurements
//! with `--compare`.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use anyhow::Result;

use super::progress::print_sweep;
use crate::args::BenchArgs;
use crate::config::{Config, Job};

pub(super) fn run(args: &BenchArgs, job: Job, out: &mut dyn Write, stop: &AtomicBool) -> Result<()> {
    let (config, sweep, comparison) = Config::sweep(&args.sweep, job)?;
    let sweep = sweep.root(args.root);
    config.check_exact(args.table.exact)?;
    let mut comm = config.communicator().exact(args.table.exact);
    let heading = format!("# kernbench bench {} on {}\n", sweep.collective(), config.system().describe());
    let (_, interrupted) = print_sweep(&sweep, &mut comm, args.table.json, &heading, comparison.as_ref(), stop, out)?;
    Ok(interrupted?)
}

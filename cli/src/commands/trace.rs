//! `kernbench trace`: one call, traced, written as a Chrome / Perfetto trace.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use kernbench::sim::Timing;
use kernbench::{Collective, Quoted};

use super::progress::{RoundingNotes, check_stop};
use crate::args::TraceArgs;
use crate::config::{Config, Job, elements};
use crate::files::OutputFile;
use crate::sweep::{Series, Sweep, parse_size};

pub(super) fn run(args: &TraceArgs, job: Job, out: &mut dyn Write, stop: &AtomicBool) -> Result<()> {
    let file = OutputFile::check(&args.out)?;
    let collective: Collective = args.collective.parse()?;
    let config = Config::load(&args.system, job)?.limits(&args.limits)?.timing(&args.timing)?;
    let mut comm = config.communicator();
    comm.run_options_mut().timing.get_or_insert_with(Timing::default).trace = true;
    let series = match Series::parse_list(&args.algo, comm.registry(), collective, comm.system())?.as_slice() {
        [one] => one.clone(),
        _ => bail!("bad --algo `{}`: expected one algorithm of {collective}, or auto", Quoted(&args.algo)),
    };
    let size = parse_size(&args.bytes)?;
    let (dtype, op) = elements(&args.elements)?;
    let sweep = Sweep::new(collective, vec![series.clone()], vec![size])
        .dtype(dtype)
        .op(op)
        .root(args.root)
        .counts_seed(args.elements.counts_seed)
        .max_memory(config.max_memory());
    let (row, report) = sweep.call(&mut comm, &series, size)?;
    RoundingNotes::default().note(row.rounded.as_ref(), None);
    // Ctrl-C during the call means the trace is not wanted.
    check_stop(stop, 0, 1)?;
    let trace = report.run.trace().context("the run was not timed")?;
    let text = serde_json::to_string(&trace)?;
    config.write(&file, (text + "\n").as_bytes())?;
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

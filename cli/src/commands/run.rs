//! `kernbench run`: collectives called at each size on a chosen layout, each a point of a sweep, with
//! the report of every call and whether it held its postcondition.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use anyhow::{Result, bail};
use kernbench::samples::{CUBE_LEADERS, EVERY_PE};
use kernbench::{CallReport, Collective, Communicator, DpPolicy, Quoted};

use super::progress::{RoundingNotes, check_stop};
use crate::args::RunArgs;
use crate::config::{Config, Job, collectives, elements};
use crate::memory;
use crate::sweep::{Series, Sweep, SweepError, parse_size};

pub(super) fn run(args: &RunArgs, job: Job, out: &mut dyn Write, stop: &AtomicBool) -> Result<()> {
    let config = Config::runner(&args.runner, job)?;
    config.check_exact(args.exact)?;
    let mut comm = config.communicator().exact(args.exact).schedule(args.schedule);
    let collectives = collectives(&args.collective)?;
    let (dtype, op) = elements(&args.elements)?;
    let layout = layout(&args.layout)?;
    let sizes = args.bytes.split(',').map(parse_size).collect::<Result<Vec<_>, _>>()?;
    let series = args.algo.clone().map_or(Series::Auto, Series::Algorithm);
    writeln!(out, "{}", config.system().describe())?;
    let (mut wrong, mut done, mut notes, mut diverged) = (0, 0, RoundingNotes::default(), 0);
    let points = collectives.len() * sizes.len();
    for collective in collectives {
        let sweep = Sweep::new(collective, vec![series.clone()], sizes.clone())
            .dtype(dtype)
            .op(op)
            .root(args.root)
            .counts_seed(args.elements.counts_seed)
            .max_memory(config.max_memory())
            .layout(layout);
        for &bytes in sweep.sizes() {
            check_stop(stop, done, points)?;
            done += 1;
            let point = sweep.point(&mut comm, &series, bytes).map_err(|e| in_context(e, collective, bytes))?;
            // Said before the call, so that a call that fails still says how its size was rounded.
            notes.note(point.rounded.as_ref(), None);
            let report = sweep.call_point_report(&mut comm, point).map_err(|e| in_context(e, collective, bytes))?;
            writeln!(out, "{report}")?;
            if args.schedules > 0 {
                let (agreed, line) = schedules(&mut comm, &sweep, (&series, bytes), &report, args.schedules)
                    .map_err(|e| in_context(e, collective, bytes))?;
                writeln!(out, "{line}")?;
                diverged += usize::from(!agreed);
            }
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
    if diverged > 0 {
        bail!("{diverged} call(s) gave another outcome under another order of same-time operations");
    }
    Ok(())
}

/// Runs the call of `report` again under seeds `1..=seeds` of the order of same-time one-sided
/// operations: whether every seed gave its outputs, and the line that says so (or names the first
/// seed that did not).
fn schedules(
    comm: &mut Communicator,
    sweep: &Sweep,
    (series, bytes): (&Series, u64),
    report: &CallReport,
    seeds: u64,
) -> Result<(bool, String), SweepError> {
    let default_order = comm.run_options().schedule;
    let outputs = |r: &CallReport| r.run.pes().iter().map(|p| p.output.clone()).collect::<Vec<_>>();
    let expected = outputs(report);
    let mut found = None;
    for seed in 1..=seeds {
        comm.run_options_mut().schedule = Some(seed);
        let point = sweep.point(comm, series, bytes)?;
        let again = sweep.call_point_report(comm, point)?;
        if let Some(rank) = expected.iter().zip(outputs(&again)).position(|(e, g)| !e.bit_eq(&g)) {
            found = Some((seed, rank));
            break;
        }
    }
    comm.run_options_mut().schedule = default_order;
    Ok(match found {
        None => (true, format!("schedules: {seeds} seeded orders of same-time operations give the same outputs")),
        Some((seed, rank)) => {
            (false, format!("schedules: seed {seed} changes rank {rank}'s output (replay it with --schedule {seed})"))
        }
    })
}

/// The layout `--layout` names.
fn layout(name: &str) -> Result<DpPolicy> {
    Ok(match name {
        "one_pe" => DpPolicy::LEADER,
        "multi_pe" => EVERY_PE,
        "cube_leaders" => CUBE_LEADERS,
        other => bail!("unknown layout `{}`: expected one_pe, multi_pe or cube_leaders", Quoted(other)),
    })
}

/// A point's error as `run` says it: a tensor or a call that failed, under the collective and the
/// size; a sweep's error names the series too, where `run` has only the one its command line names.
fn in_context(error: SweepError, collective: Collective, bytes: u64) -> anyhow::Error {
    let context = format!("{collective} of {bytes} bytes");
    match error {
        SweepError::Call { source, .. } => anyhow::Error::new(*source).context(context),
        SweepError::Layout(source) => anyhow::Error::new(source).context(context),
        other => other.into(),
    }
}

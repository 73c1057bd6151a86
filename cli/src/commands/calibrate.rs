//! `kernbench calibrate`: a system fitted to nccl-tests logs ([`kernbench::calibrate::fit`]), each log's
//! calls run as `bench --compare LOG --timing-only` runs them, and the fitted system's times printed
//! beside the measured ones.

use std::io::Write;

use anyhow::{Context, Result, bail};
use kernbench::calibrate::{Compared, Knob, NcclLog, fit, objective};
use kernbench::{Collective, LinkClass, Registry, System};

use crate::args::CalibrateArgs;
use crate::compare::Comparison;
use crate::config::Config;
use crate::files::OutputFile;
use crate::sweep::{Row, Series, Sweep};

/// A log, the sweep of its sizes that is set beside it, and its run style.
struct Target {
    comparison: Comparison,
    sweep: Sweep,
    /// GPUs a host thread drove (the log's `nGpus`; 1 when it does not say).
    gpus_per_thread: usize,
}

pub(super) fn run(args: &CalibrateArgs, out: &mut dyn Write) -> Result<()> {
    let file = OutputFile::check(&args.out)?;
    let mut config = Config::load(&args.system, None)?;
    let base = config.system().clone();
    let mut targets = Vec::with_capacity(args.logs.len());
    for path in &args.logs {
        let comparison = Comparison::new(NcclLog::read(path, None)?, &base)?;
        let collective = comparison.log().collective;
        let algorithm = algorithm_for(args.algos.as_deref(), collective, config.registry(), &base)
            .with_context(|| format!("for {}", comparison.log().name))?;
        config = config.with_variants(&algorithm, collective)?;
        let sweep = Sweep::new(collective, vec![Series::Algorithm(algorithm)], comparison.log().sizes());
        let gpus_per_thread = comparison.log().gpus_per_thread.unwrap_or(1);
        targets.push(Target { comparison, sweep, gpus_per_thread });
    }
    let registry = config.registry().clone();
    let styles: Vec<usize> = targets.iter().map(|t| t.gpus_per_thread).collect();
    let knobs = Knob::constrained(&base, &classes(&targets, &base, &registry)?, &styles);
    let fitted =
        fit(&base, &knobs, |system| Ok::<_, anyhow::Error>(score(&targets, &simulate(system, &registry, &targets)?)))?;
    file.write(format!("{}\n", serde_json::to_string_pretty(fitted.system.spec())?).as_bytes())?;

    writeln!(out, "# kernbench calibrate: {} log(s) on {}", targets.len(), base.describe())?;
    for moved in &fitted.moved {
        writeln!(out, "# fitted {}: {} -> {}", moved.knob, figure(moved.before), figure(moved.after))?;
    }
    writeln!(
        out,
        "# mean squared log error: {:.4} before, {:.4} after ({} systems simulated)",
        fitted.before, fitted.after, fitted.evaluations
    )?;
    writeln!(out, "# wrote {}", file.path().display())?;
    for (target, rows) in targets.iter().zip(simulate(&fitted.system, &registry, &targets)?) {
        write!(out, "{}", target.comparison.heading())?;
        writeln!(out, "{}", Comparison::table_header())?;
        for row in &rows {
            writeln!(out, "{}", target.comparison.table_line(row))?;
        }
        write!(out, "{}", target.comparison.footer(&rows))?;
    }
    Ok(())
}

/// The algorithm (or variant) of `algos` that computes `collective`, or the ring that does, on one lane
/// per engine of `system`'s PEs.
fn algorithm_for(algos: Option<&str>, collective: Collective, registry: &Registry, system: &System) -> Result<String> {
    if let Some(algos) = algos {
        let of_collective = |item: &&str| {
            let base = item.split(':').next().unwrap_or(item);
            registry.get(base).is_ok_and(|a| a.collective == collective)
        };
        return match algos.split(',').map(str::trim).find(of_collective) {
            Some(item) => Ok(item.to_owned()),
            None => bail!("--algos {algos:?} names no algorithm of {collective} (see `kernbench list`)"),
        };
    }
    let ring = match collective {
        Collective::AllReduce => "ring",
        Collective::AllGather => "ring_allgather",
        Collective::ReduceScatter => "ring_reduce_scatter",
        other => bail!("no default algorithm for {other}: name one with --algos"),
    };
    let engines = system.pe_spec().engines;
    Ok(if engines > 1 { format!("{ring}:lanes={engines}") } else { ring.to_owned() })
}

/// The link classes the logs' calls cross on `system`: the farthest class of a route from each
/// algorithm's first rank to each other rank.
fn classes(targets: &[Target], system: &System, registry: &Registry) -> Result<Vec<LinkClass>> {
    let mut comm = kernbench::Communicator::with_registry(system.clone(), registry.clone());
    let mut classes = Vec::new();
    for target in targets {
        for series in target.sweep.series() {
            let algorithm = comm.algorithm(series.label())?;
            let plan = comm.plan(&algorithm)?;
            let mut pes = plan.participants().map(|p| p.pe);
            let first = pes.next();
            for pe in pes {
                let class = first.and_then(|first| system.route_farthest_class(first, pe));
                if let Some(class) = class.filter(|c| !classes.contains(c)) {
                    classes.push(class);
                }
            }
        }
    }
    classes.sort();
    Ok(classes)
}

/// Every target's rows on `system`, timing only, each in its log's run style, in the order of its
/// sweep's sizes. A fit simulates hundreds of systems, so each target's sizes are shared out over the
/// machine's cores (every size is a call of its own).
fn simulate(system: &System, registry: &Registry, targets: &[Target]) -> Result<Vec<Vec<Row>>> {
    let config = Config::new(system.clone(), registry.clone(), None).timing_only(true);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let run = |target: &Target| -> Result<Vec<Row>> {
        let sizes = target.sweep.sizes();
        let share = |part: usize| -> Vec<u64> { sizes.iter().copied().skip(part).step_by(threads).collect() };
        let parts: Vec<Result<Vec<Row>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads.min(sizes.len()).max(1))
                .map(|part| {
                    let (config, sweep) = (&config, &target.sweep);
                    scope.spawn(move || -> Result<Vec<Row>> {
                        let mut comm = config.communicator().gpus_per_thread(target.gpus_per_thread);
                        let sweep = Sweep::new(sweep.collective(), sweep.series().to_vec(), share(part));
                        Ok(sweep.run(&mut comm, |_| {})?)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a simulation panicked"))))
                .collect()
        });
        // Part `p`'s `k`-th row is of size `p + k * threads`: put each back in its place.
        let mut placed: Vec<(usize, Row)> = Vec::with_capacity(sizes.len());
        for (part, rows) in parts.into_iter().enumerate() {
            placed.extend(rows?.into_iter().enumerate().map(|(k, row)| (part + k * threads, row)));
        }
        placed.sort_by_key(|&(at, _)| at);
        Ok(placed.into_iter().map(|(_, row)| row).collect())
    };
    targets.iter().map(run).collect()
}

/// The objective of every target's rows beside its log; infinite when no row is judged.
fn score(targets: &[Target], rows: &[Vec<Row>]) -> f64 {
    let compared: Vec<Compared<'_>> = (targets.iter().zip(rows))
        .flat_map(|(target, rows)| rows.iter().filter_map(|row| target.comparison.compared(row)))
        .collect();
    objective(&compared).unwrap_or(f64::INFINITY)
}

/// A fitted figure: whole ns or GB/s from 100 up, three decimals below.
fn figure(value: f64) -> String {
    if value >= 100.0 { format!("{value:.0}") } else { format!("{value:.3}") }
}

//! `kernbench explain`: which selection rule picks which algorithm for a collective at a size, and
//! what every algorithm of the collective takes there.

use std::cmp::Ordering;
use std::io::Write;
use std::sync::atomic::AtomicBool;

use anyhow::Result;
use kernbench::{Collective, DpPolicy, Dtype, LayoutKind};

use super::progress::{RoundingNotes, check_stop};
use crate::args::ExplainArgs;
use crate::config::{Config, Job};
use crate::sweep::{Series, Sweep, SweepError, parse_size, point_size};

pub(super) fn run(args: &ExplainArgs, job: Job, out: &mut dyn Write, stop: &AtomicBool) -> Result<()> {
    let collective: Collective = args.collective.parse()?;
    let config = Config::load(&args.system, job)?.timing(&args.timing)?;
    let mut comm = config.communicator();
    let size = parse_size(&args.size)?;
    let algorithms = Series::parse_list("all", comm.registry(), collective, comm.system())?;
    let sweep = Sweep::new(collective, algorithms.clone(), vec![size]);
    let system = config.system();
    writeln!(out, "{collective} of {size} bytes per SIP (one-PE layout) on {}", system.describe())?;
    // The bytes per SIP the rules compare: those of the one-PE tensor `auto` runs on.
    let (bytes_per_rank, rounded) = point_size(system, collective, size, Dtype::F32, DpPolicy::LEADER, system.sips());
    let mut notes = RoundingNotes::default();
    notes.note(rounded.as_ref(), None);
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

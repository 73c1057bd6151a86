//! `kernbench plan`: a system, and where a shipped algorithm installs on it: each rank's PE and its
//! neighbours.

use std::io::Write;

use anyhow::Result;
use kernbench::InstallPlan;

use crate::args::PlanArgs;
use crate::config::load_system;

pub(super) fn run(args: &PlanArgs, out: &mut dyn Write) -> Result<()> {
    let system = load_system(args.system.as_deref())?;
    let registry = kernbench::algorithms::default_registry();
    let entry = registry.get(&args.algorithm)?;
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
    print_plan(&plan, args.all, out)
}

/// Each SIP's ranks (SIP 0's only unless `all`), with their PEs and neighbours.
fn print_plan(plan: &InstallPlan, all: bool, out: &mut dyn Write) -> Result<()> {
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

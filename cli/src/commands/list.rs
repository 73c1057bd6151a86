//! `kernbench list`: the shipped algorithms, kernels, topologies, mappers, validators and selection
//! rules.

use std::io::Write;

use anyhow::Result;
use kernbench::{Collective, MAPPERS, TOPOLOGIES, VALIDATORS};

pub(super) fn run(out: &mut dyn Write) -> Result<()> {
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

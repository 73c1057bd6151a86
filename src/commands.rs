//! The subcommands: each turns parsed arguments into library calls and prints the result.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use kernbench::workload::{CUBE_LEADERS, EVERY_PE, sample_tensor};
use kernbench::{
    CallOptions, Collective, Communicator, DpPolicy, Dtype, InstallPlan, MAPPERS, ReduceOp, System, TOPOLOGIES,
    VALIDATORS,
};

/// Write, run and check collective-communication kernels on a simulated accelerator.
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

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all), or `all`.
    collective: String,
    /// Run this algorithm instead of the registry's choice.
    #[arg(long)]
    algo: Option<String>,
    /// A system JSON file (default: the built-in system).
    #[arg(long)]
    system: Option<PathBuf>,
    /// Bytes per rank; several sizes separated by commas, with K/M/G suffixes (powers of 1024).
    #[arg(long, default_value = "1K,64K,1M")]
    bytes: String,
    /// Element type: f32, f16, bf16, i32, i64.
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// Reduction: sum, prod, max, min, avg.
    #[arg(long, default_value = "sum")]
    op: String,
    /// Root rank of broadcast and reduce.
    #[arg(long, default_value_t = 0)]
    root: usize,
    /// Where each rank's data sits: one_pe (the SIP leader), multi_pe (every PE a block) or
    /// cube_leaders (every cube's PE 0 a block).
    #[arg(long, default_value = "one_pe")]
    layout: String,
    /// Threads to poll PEs on.
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

/// Runs the parsed command.
///
/// # Errors
/// Anything that stops the command, as one line for the caller to print.
pub fn run(cli: Cli, out: &mut impl Write) -> Result<()> {
    match cli.command {
        Command::Run(args) => run_collectives(&args, out),
        Command::List => list(out),
        Command::Plan { algorithm, system, all } => plan(&algorithm, system.as_deref(), all, out),
    }
}

fn load_system(path: Option<&std::path::Path>) -> Result<System> {
    match path {
        Some(p) => Ok(System::from_file(p)?),
        None => Ok(System::builtin()),
    }
}

/// Parses `1K`, `64K`, `1M`, `512` (K, M, G are powers of 1024).
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    let scale: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => bail!("bad size `{text}`: expected a number with an optional K, M or G suffix, like 64K"),
    };
    let n: u64 = digits.parse().map_err(|_| {
        anyhow::anyhow!("bad size `{text}`: expected a number with an optional K, M or G suffix, like 64K")
    })?;
    n.checked_mul(scale).with_context(|| format!("size `{text}` is too large"))
}

fn run_collectives(args: &RunArgs, out: &mut impl Write) -> Result<()> {
    let system = load_system(args.system.as_deref())?;
    let collectives: Vec<Collective> =
        if args.collective == "all" { Collective::ALL.to_vec() } else { vec![args.collective.parse()?] };
    let dtype: Dtype = args.dtype.parse()?;
    let op: ReduceOp = args.op.parse()?;
    let layout = match args.layout.as_str() {
        "one_pe" => DpPolicy::LEADER,
        "multi_pe" => EVERY_PE,
        "cube_leaders" => CUBE_LEADERS,
        other => bail!("unknown layout `{other}`: expected one_pe, multi_pe or cube_leaders"),
    };
    let sizes = args.bytes.split(',').map(parse_size).collect::<Result<Vec<_>>>()?;
    writeln!(out, "{}", system.describe())?;
    let mut comm = Communicator::new(system.clone())?.threads(args.threads);
    let mut wrong = 0;
    for collective in collectives {
        for &bytes in &sizes {
            let tensor = sample_tensor(&system, bytes, dtype, op, layout)?;
            let options = CallOptions { algorithm: args.algo.clone(), generation: None };
            let (_, report) = comm
                .call(collective, &tensor, op, args.root, &options)
                .with_context(|| format!("{collective} of {bytes} bytes per rank"))?;
            writeln!(out, "{report}")?;
            wrong += usize::from(!report.postcondition.held);
        }
    }
    if wrong > 0 {
        bail!("{wrong} call(s) broke their postcondition");
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
    for k in kernbench::algorithms::KERNELS {
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

fn plan(algorithm: &str, system: Option<&std::path::Path>, all: bool, out: &mut impl Write) -> Result<()> {
    let system = load_system(system)?;
    let registry = kernbench::algorithms::default_registry();
    let entry = registry.get(algorithm)?;
    let plan = kernbench::build_install_plans(entry, &system)?;
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

//! `kernbench msccl`: an MSCCL-IR XML file run as a registry algorithm over the sizes of a `bench`,
//! checked at every size.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::atomic::AtomicBool;

use anyhow::{Result, bail};
use kernbench::program::Program;
use kernbench::{Registry, System};

use super::progress::print_sweep;
use crate::args::MscclArgs;
use crate::config::{Config, Job, elements};
use crate::sweep::{Series, Sweep, parse_sizes};

/// Runs an MSCCL-IR file as the registry algorithm `msccl_program` binds it to, on `full`, over the
/// sizes of a `bench`, and says whether every point held its postcondition.
pub(super) fn run(args: &MscclArgs, job: Job, out: &mut dyn Write, stop: &AtomicBool) -> Result<()> {
    let program = kernbench::program::msccl::from_file(&args.file)?;
    let system = match &args.system {
        Some(path) => System::from_file(path)?,
        None => System::from_json_str(
            &serde_json::json!({
                "sips": program.ranks.len(), "mesh": {"w": 1, "h": 1}, "pes_per_cube": 1,
                "sip_interconnect": "fully_connected"
            })
            .to_string(),
        )?,
    };
    let collective = program.collective;
    let name = if program.name.is_empty() { "msccl".to_owned() } else { program.name.clone() };
    let registry = serde_json::json!({
        "algorithms": {&name: {
            "collective": collective, "kernel": kernbench::program::MSCCL_PROGRAM.name, "topology": "full",
            "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "hbm",
            "params": {"file": args.file}, "summary": format!("MSCCL-IR file {}", args.file.display())
        }},
        "selection": {}
    });
    let registry = Registry::from_json_str(&registry.to_string(), &kernbench::algorithms::kernels())?;
    let config = Config::new(system, registry, job).limits(&args.limits)?.threads(args.threads);
    let config = config.timing(&args.timing)?;
    config.check_exact(args.table.exact)?;
    let mut comm = config.communicator().exact(args.table.exact);
    let series = Series::parse_list(&name, comm.registry(), collective, comm.system())?;
    let (dtype, op) = elements(&args.elements)?;
    let sweep =
        Sweep::new(collective, series, parse_sizes(&args.sizes)?).dtype(dtype).op(op).max_memory(config.max_memory());
    let heading = heading(args, &program, &name, config.system());
    let (rows, interrupted) = print_sweep(&sweep, &mut comm, args.table.json, &heading, None, stop, out)?;
    interrupted?;
    let wrong = rows.iter().filter(|r| r.wrong > 0).count();
    if wrong > 0 {
        bail!("`{name}` broke the {collective} postcondition at {wrong} of {} sizes", rows.len());
    }
    if !args.table.json {
        let verdict = if rows.iter().all(|r| r.checked) { "correct at every size" } else { "not checked: timing only" };
        writeln!(out, "# {verdict}")?;
    }
    Ok(())
}

/// The lines above the table: what the file holds, and each executor that would refuse it and why.
fn heading(args: &MscclArgs, program: &Program, name: &str, system: &System) -> String {
    let thread_blocks: usize = program.ranks.iter().map(|r| r.thread_blocks.len()).sum();
    let mut heading = format!(
        "# kernbench msccl {}: `{name}`, {} over {} ranks, {} chunks, {thread_blocks} thread blocks, protocol {}, on {}\n",
        args.file.display(),
        program.collective,
        program.ranks.len(),
        program.chunks,
        program.protocol.name(),
        system.describe()
    );
    for refusal in kernbench::program::msccl::refusals(program) {
        // Writing to a String cannot fail.
        let _ = writeln!(heading, "# {} would refuse it: {}", refusal.executor, refusal.reason);
    }
    heading
}

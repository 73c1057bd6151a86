//! `kernbench workload`: a training step's calls and compute phases run on a system, its time and
//! every node's.

use std::io::Write;

use anyhow::{Context, Result, bail};
use kernbench::workload::Workload;

use crate::args::WorkloadArgs;
use crate::config::Config;
use crate::files::OutputFile;

pub(super) fn run(args: &WorkloadArgs, out: &mut dyn Write) -> Result<()> {
    let trace = args.trace.as_deref().map(OutputFile::check).transpose()?;
    if let Some(gflops) = args.gpu_gflops.filter(|g| !(g.is_finite() && *g > 0.0)) {
        bail!("bad --gpu-gflops {gflops}: expected a positive number of GFLOP/s");
    }
    let workload = Workload::from_file(&args.file)?;
    let config = Config::load(&args.system, None)?;
    let step = workload.run(config.system(), config.registry(), args.gpu_gflops)?;
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&step)?)?;
    } else {
        writeln!(out, "# kernbench workload {} on {}", args.file.display(), config.system().describe())?;
        write!(out, "{step}")?;
    }
    if let Some(file) = trace {
        let text = serde_json::to_string(&step.trace()).context("the trace")?;
        file.write((text + "\n").as_bytes())?;
    }
    Ok(())
}

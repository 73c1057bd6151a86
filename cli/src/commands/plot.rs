//! `kernbench plot`: a sweep's bus bandwidth against size, drawn as an SVG.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use anyhow::Result;

use super::progress::run_sweep;
use crate::args::PlotArgs;
use crate::config::{Config, Job};
use crate::files::OutputFile;

pub(super) fn run(args: &PlotArgs, job: Job, out: &mut dyn Write, stop: &AtomicBool) -> Result<()> {
    let file = OutputFile::check(&args.out)?;
    let (config, sweep) = Config::sweep(&args.sweep, job)?;
    let mut comm = config.communicator();
    let (rows, interrupted) = run_sweep(&sweep, &mut comm, true, stop, out)?;
    interrupted?;
    let title = format!("{} busbw on {}", sweep.collective(), config.system().describe());
    let svg = crate::plot::busbw_svg(&title, &rows)?;
    config.write(&file, svg.as_bytes())?;
    writeln!(
        out,
        "wrote {}: busbw of {} series at {} sizes",
        args.out.display(),
        sweep.series().len(),
        sweep.sizes().len()
    )?;
    Ok(())
}

//! `kernbench plot`: a sweep's bus bandwidth against size, drawn as an SVG, beside a log's measured
//! one with `--compare`.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use anyhow::Result;

use super::progress::run_sweep;
use crate::args::PlotArgs;
use crate::config::{Config, Job};
use crate::files::OutputFile;
use crate::plot::{busbw_svg, curves};

pub(super) fn run(args: &PlotArgs, job: Job, out: &mut dyn Write, stop: &AtomicBool) -> Result<()> {
    let file = OutputFile::check(&args.out)?;
    let (config, sweep, comparison) = Config::sweep(&args.sweep, job)?;
    let mut comm = config.communicator();
    let (rows, interrupted) = run_sweep(&sweep, &mut comm, None, stop, out)?;
    interrupted?;
    let title = format!("{} busbw on {}", sweep.collective(), config.system().describe());
    let mut curves = curves(&rows);
    curves.extend(comparison.as_ref().map(|comparison| comparison.curve(&rows)));
    config.write(&file, busbw_svg(&title, &curves)?.as_bytes())?;
    let (series, sizes) = (sweep.series().len(), sweep.sizes().len());
    let beside = comparison.map_or(String::new(), |c| format!(", beside the measured busbw of {}", c.log().name));
    writeln!(out, "wrote {}: busbw of {series} series at {sizes} sizes{beside}", args.out.display())?;
    Ok(())
}

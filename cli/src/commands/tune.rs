//! `kernbench tune`: the fastest algorithm per size for one collective or all, written as a registry
//! and as selection-rule CSVs.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use anyhow::{Result, bail};

use super::progress::Progress;
use crate::args::TuneArgs;
use crate::config::{Config, Job, collectives, elements};
use crate::files::OutputFile;
use crate::sweep::{Row, parse_sizes, table_header};
use crate::tune::{Tuner, nccl_tuner_csv, rules_csv};

pub(super) fn run(args: &TuneArgs, job: Job, out: &mut dyn Write, stop: &AtomicBool) -> Result<()> {
    let check = |path: &Option<PathBuf>| path.as_deref().map(OutputFile::check).transpose();
    let (registry_file, rules_file, nccl_file) = (check(&args.out)?, check(&args.rules_csv)?, check(&args.nccl_tuner)?);
    let collectives = collectives(&args.collective)?;
    // `all` is every candidate, as without the flag.
    let algos = args.algos.as_deref().filter(|algos| algos.trim() != "all");
    let config = match (algos, collectives.as_slice()) {
        (None, _) => Config::runner(&args.runner, job)?,
        (Some(algos), [collective]) => Config::runner(&args.runner, job)?.with_variants(algos, *collective)?,
        (Some(_), _) => {
            bail!("--algos chooses among one collective's algorithms: name the collective instead of `all`")
        }
    };
    let mut comm = config.communicator();
    let sizes = parse_sizes(&args.sizes)?;
    let elements = elements(&args.elements)?;
    let mut registry = comm.registry().clone();
    let mut tunings = Vec::new();
    for collective in collectives {
        writeln!(out, "# kernbench tune {collective}: {}", config.system().describe())?;
        let mut tuner = Tuner::new(&mut comm, collective)?.max_memory(config.max_memory());
        if let Some(algos) = algos {
            tuner = tuner.only(algos)?;
        }
        writeln!(out, "# candidates (one-PE layout): {}", tuner.candidates().join(", "))?;
        writeln!(out, "{}", table_header())?;
        let mut progress = Progress::new(sizes.len() * tuner.candidates().len(), Some(&Row::table_line));
        let tuning = tuner.run_until(&mut comm, &sizes, elements, stop, |row| progress.row(row, out));
        progress.finish()?;
        let tuning = tuning?;
        writeln!(out, "# fastest per size (bytes per SIP):")?;
        for bucket in &tuning.buckets {
            writeln!(out, "#   {bucket}")?;
        }
        registry = tuning.registry(&registry)?;
        tunings.push(tuning);
    }
    if let Some(file) = &registry_file {
        config.write(file, (serde_json::to_string_pretty(&registry)? + "\n").as_bytes())?;
        writeln!(out, "# wrote {} (use it with --registry)", file.path().display())?;
    }
    if let Some(file) = &rules_file {
        config.write(file, rules_csv(&tunings).as_bytes())?;
        writeln!(out, "# wrote {}", file.path().display())?;
    }
    if let Some(file) = &nccl_file {
        config.write(file, nccl_tuner_csv(&tunings).as_bytes())?;
        writeln!(out, "# wrote {} (NCCL_TUNER_CONFIG_FILE of NCCL's example tuner plugin)", file.path().display())?;
    }
    Ok(())
}

//! What the commands say while they run: each rounding of a size once, rows as they come above a
//! progress bar, how far they got when stopped, and a sweep printed as `bench` prints it (beside a
//! log's measurements when it has one).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use kernbench::Communicator;

use crate::compare::Comparison;
use crate::sweep::{Interrupted, Rounding, Row, Sweep, SweepError, table_footer, table_header};

/// Says on stderr, once per command, each way a size was rounded to run.
#[derive(Default)]
pub(super) struct RoundingNotes {
    said: Vec<Rounding>,
}

impl RoundingNotes {
    /// Says `rounded` unless it was said before, above `bar` if there is one.
    pub(super) fn note(&mut self, rounded: Option<&Rounding>, bar: Option<&ProgressBar>) {
        let Some(rounded) = rounded.filter(|r| !self.said.contains(r)) else { return };
        // Nothing is lost if stderr cannot be written: the rows say what ran.
        let say = || drop(writeln!(std::io::stderr(), "kernbench: {rounded}"));
        match bar {
            Some(bar) => bar.suspend(say),
            None => say(),
        }
        self.said.push(rounded.clone());
    }
}

/// Whether `stop` was set, as the error that says how far the command got.
pub(super) fn check_stop(stop: &AtomicBool, done: usize, points: usize) -> Result<(), Interrupted> {
    if stop.load(Ordering::SeqCst) { Err(Interrupted { done, points }) } else { Ok(()) }
}

/// How a row is printed: as a table line, or beside a log's.
pub(super) type Line<'a> = &'a dyn Fn(&Row) -> String;

/// Rows printed as they come, above a progress bar on stderr when stderr is a terminal.
pub(super) struct Progress<'a> {
    bar: Option<ProgressBar>,
    line: Option<Line<'a>>,
    written: std::io::Result<()>,
    notes: RoundingNotes,
}

impl<'a> Progress<'a> {
    /// Progress over `points` rows, printing each as `line` makes it, if given.
    pub(super) fn new(points: usize, line: Option<Line<'a>>) -> Progress<'a> {
        let bar = std::io::stderr().is_terminal().then(|| {
            let style = ProgressStyle::with_template("{bar:40} {pos}/{len} points, {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            ProgressBar::new(points as u64).with_style(style)
        });
        Progress { bar, line, written: Ok(()), notes: RoundingNotes::default() }
    }

    /// Notes the row's rounding, prints it if asked to, and moves the bar on.
    pub(super) fn row(&mut self, row: &Row, out: &mut dyn Write) {
        self.notes.note(row.rounded.as_ref(), self.bar.as_ref());
        if let Some(line) = self.line.filter(|_| self.written.is_ok()) {
            self.written = match &self.bar {
                Some(bar) => bar.suspend(|| writeln!(out, "{}", line(row))),
                None => writeln!(out, "{}", line(row)),
            };
        }
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{} {} B", row.series, row.size));
            bar.inc(1);
        }
    }

    /// Clears the bar; the first error writing a row, if any.
    pub(super) fn finish(self) -> std::io::Result<()> {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        self.written
    }
}

/// Runs `sweep`, printing each row as `line` makes it, if given; the rows that ran, and an error if
/// `stop` ended the sweep before its last point.
pub(super) fn run_sweep(
    sweep: &Sweep,
    comm: &mut Communicator,
    line: Option<Line<'_>>,
    stop: &AtomicBool,
    out: &mut dyn Write,
) -> Result<(Vec<Row>, Result<(), Interrupted>)> {
    let mut progress = Progress::new(sweep.points(), line);
    let mut rows = Vec::new();
    let ran = sweep.run_until(comm, stop, |row| {
        progress.row(row, out);
        rows.push(row.clone());
    });
    progress.finish()?;
    match ran {
        Ok(_) => Ok((rows, Ok(()))),
        Err(SweepError::Interrupted(interrupted)) => Ok((rows, Err(interrupted))),
        Err(e) => Err(e.into()),
    }
}

/// Runs `sweep` and prints it as `bench` does: with `json`, one document of the collective, the
/// system and the rows once they have run; else `heading`, the table's header, each row as it comes
/// and the footer. Beside a log, the rows carry its measurements and the footer its errors per size
/// band. The rows that ran, and an error if `stop` ended the sweep before its last point.
pub(super) fn print_sweep(
    sweep: &Sweep,
    comm: &mut Communicator,
    json: bool,
    heading: &str,
    beside: Option<&Comparison>,
    stop: &AtomicBool,
    out: &mut dyn Write,
) -> Result<(Vec<Row>, Result<(), Interrupted>)> {
    if json {
        let (rows, interrupted) = run_sweep(sweep, comm, None, stop, out)?;
        let rows_json = match beside {
            Some(comparison) => serde_json::to_value(comparison.json_rows(&rows)?)?,
            None => serde_json::to_value(&rows)?,
        };
        let doc = serde_json::json!({
            "collective": sweep.collective(),
            "system": comm.system().spec(),
            "rows": rows_json,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok((rows, interrupted));
    }
    write!(out, "{heading}")?;
    let (rows, interrupted) = match beside {
        Some(comparison) => {
            write!(out, "{}", comparison.heading())?;
            writeln!(out, "{}", Comparison::table_header())?;
            run_sweep(sweep, comm, Some(&|row| comparison.table_line(row)), stop, out)?
        }
        None => {
            writeln!(out, "{}", table_header())?;
            run_sweep(sweep, comm, Some(&Row::table_line), stop, out)?
        }
    };
    write!(out, "{}", table_footer(&rows))?;
    if let Some(comparison) = beside {
        write!(out, "{}", comparison.footer(&rows))?;
    }
    Ok((rows, interrupted))
}

//! Sweeps set beside nccl-tests logs (`--compare LOG`): the log read for a sweep and checked against
//! its system, the measured time and the simulated time's error beside each row, the errors per size
//! band after the table, the fields JSON rows gain, and the measured curve of a plot.
//!
//! Uses [`crate::sweep`] and [`crate::plot`]; reading logs, the noise rule and the size bands are
//! [`kernbench::calibrate`]'s.
//!
//! ```text
//! ...   time    algbw    busbw  #wrong     sol   measured     error
//! ...   (us)   (GB/s)   (GB/s)                       (us)
//! ...  26.11    40.16    60.24       0   0.490      31.40    -16.8%
//! # error, small (<= 256 KiB): ring mean 9.1% max 16.8% over 12 sizes, 1 noisy
//! ```

use std::fmt::Write as _;
use std::path::Path;

use kernbench::calibrate::{BandErrors, Compared, LogError, NcclLog, SizeBand, band_errors};
use kernbench::{Collective, System};
use serde_json::Value;

use crate::plot::Curve;
use crate::sweep::{Row, series_in_order, table_header};

/// An nccl-tests log that fits a system, whose rows a sweep's rows are set beside.
///
/// # Examples
/// ```
/// use kernbench::calibrate::NcclLog;
/// use kernbench::{Collective, Communicator, System};
/// use kernbench_cli::compare::Comparison;
/// use kernbench_cli::sweep::{Series, Sweep};
/// let rank = |r| format!("#  Rank {r} Group  0 Pid  7 on a device {r} [0x18] GPU\n");
/// let text = (0..4).map(rank).collect::<String>() + "1024 256 float sum -1 10.00 0.10 0.15 0\n";
/// let log = NcclLog::parse("x4-all_reduce.log", &text, None).unwrap();
/// let system = System::shape(4, 1, 1, 1).unwrap();
/// let comparison = Comparison::new(log, &system).unwrap();
/// let sweep = Sweep::new(Collective::AllReduce, vec![Series::Algorithm("ring".into())], vec![1024, 2048]);
/// let rows = sweep.run(&mut Communicator::new(system), |_| {}).unwrap();
/// assert_eq!(comparison.compared(&rows[0]).unwrap().measured.time_ns(), 10_000.0);
/// assert!(comparison.compared(&rows[1]).is_none(), "the log has no 2048");
/// assert!(comparison.table_line(&rows[1]).ends_with("-         -"));
/// ```
#[derive(Clone, Debug)]
pub struct Comparison {
    log: NcclLog,
}

impl Comparison {
    /// `log`, once it is checked to fit `system`.
    ///
    /// # Errors
    /// [`LogError::Misfit`] when its ranks are not the system's SIPs, [`LogError::NodeMisfit`] when its hosts
    /// are not its nodes.
    pub fn new(log: NcclLog, system: &System) -> Result<Comparison, LogError> {
        log.check_fits(system)?;
        Ok(Comparison { log })
    }

    /// Reads the log at `path`, which must have measured `collective`, and checks it fits `system`.
    ///
    /// # Errors
    /// As [`NcclLog::read`] (among them [`LogError::OtherCollective`]) and [`Comparison::new`].
    pub fn load(path: &Path, collective: Collective, system: &System) -> Result<Comparison, LogError> {
        Comparison::new(NcclLog::read(path, Some(collective))?, system)
    }

    /// The log.
    pub fn log(&self) -> &NcclLog {
        &self.log
    }

    /// `row` beside the log's row of its size, when the log has one and the row ran on the log's ranks
    /// (a multi-PE algorithm's ranks are PEs, which no log measured).
    pub fn compared(&self, row: &Row) -> Option<Compared<'_>> {
        let measured = self.log.at_size(row.size).filter(|_| row.ranks == self.log.ranks)?;
        Some(Compared { measured, simulated_ns: row.time_ns })
    }

    /// The lines above the table: the log, what it measured on, and its citation.
    pub fn heading(&self) -> String {
        let mut heading = format!("# measured: {}, {}\n", self.log.name, self.log.hardware());
        for line in &self.log.citation {
            // Writing to a String cannot fail.
            let _ = writeln!(heading, "# {line}");
        }
        heading
    }

    /// [`table_header`] with the measured columns: the measured time and the simulated time's error.
    pub fn table_header() -> String {
        let header = table_header();
        let (titles, units) = header.split_once('\n').unwrap_or((&header, ""));
        format!("{titles} {:>10} {:>9}\n{units:<width$} {:>10}", "measured", "error", "(us)", width = titles.len())
    }

    /// `row`'s line under [`Comparison::table_header`]: the measured time and the error relative to it
    /// (`noisy` for a noisy row, which is not judged); `-` where the log has no such row.
    pub fn table_line(&self, row: &Row) -> String {
        let (measured, error) = match self.compared(row) {
            Some(compared) if compared.measured.noisy() => {
                (format!("{:.2}", compared.measured.out_of_place.time_us), "noisy".to_owned())
            }
            Some(compared) => {
                (format!("{:.2}", compared.measured.out_of_place.time_us), format!("{:+.1}%", compared.error() * 100.0))
            }
            None => ("-".to_owned(), "-".to_owned()),
        };
        format!("{} {measured:>10} {error:>9}", row.table_line())
    }

    /// The lines after the table's footer: for each size band, each series' mean and largest absolute
    /// error over the sizes that are not noisy, and how many were.
    pub fn footer(&self, rows: &[Row]) -> String {
        let errors: Vec<(&str, [BandErrors; 3])> = series_in_order(rows)
            .into_iter()
            .map(|series| {
                let compared: Vec<Compared<'_>> =
                    rows.iter().filter(|row| row.series == series).filter_map(|row| self.compared(row)).collect();
                (series, band_errors(&compared))
            })
            .collect();
        let mut footer = String::new();
        for (band, index) in SizeBand::ALL.iter().zip(0..) {
            let each: Vec<String> = errors.iter().map(|(series, errors)| judged(series, &errors[index])).collect();
            let _ = writeln!(footer, "# error, {band}: {}", each.join("; "));
        }
        footer
    }

    /// `rows` as JSON, each that has a measurement with `measured_us`, `error` (relative, as
    /// [`Compared::error`]) and `noisy` added.
    ///
    /// # Errors
    /// When a row cannot be made JSON.
    pub fn json_rows(&self, rows: &[Row]) -> serde_json::Result<Vec<Value>> {
        let json_row = |row: &Row| {
            let mut value = serde_json::to_value(row)?;
            if let (Some(compared), Value::Object(fields)) = (self.compared(row), &mut value) {
                fields.insert("measured_us".to_owned(), compared.measured.out_of_place.time_us.into());
                fields.insert("error".to_owned(), compared.error().into());
                fields.insert("noisy".to_owned(), compared.measured.noisy().into());
            }
            Ok(value)
        };
        rows.iter().map(json_row).collect()
    }

    /// The measured busbw at the sizes of `rows` that the log has, as a curve named after the log:
    /// `measured (h100x8-all_reduce)`.
    pub fn curve(&self, rows: &[Row]) -> Curve {
        let mut points: Vec<(u64, f64)> = Vec::new();
        for compared in rows.iter().filter_map(|row| self.compared(row)) {
            if !points.iter().any(|&(size, _)| size == compared.measured.size) {
                points.push((compared.measured.size, compared.measured.out_of_place.busbw_gbps));
            }
        }
        let stem = Path::new(&self.log.name).file_stem().map_or(self.log.name.clone(), |s| s.to_string_lossy().into());
        Curve { name: format!("measured ({stem})"), points }
    }
}

/// One series' errors in one band: `ring mean 9.1% max 16.8% over 12 sizes, 1 noisy`.
fn judged(series: &str, errors: &BandErrors) -> String {
    let noisy = if errors.noisy > 0 { format!(", {} noisy", errors.noisy) } else { String::new() };
    match (errors.mean_abs_error, errors.max_abs_error) {
        (Some(mean), Some(max)) => {
            let sizes = if errors.judged == 1 { "1 size".to_owned() } else { format!("{} sizes", errors.judged) };
            format!("{series} mean {:.1}% max {:.1}% over {sizes}{noisy}", mean * 100.0, max * 100.0)
        }
        _ if errors.noisy > 0 => format!("{series} none judged{noisy}"),
        _ => format!("{series} no measured sizes"),
    }
}

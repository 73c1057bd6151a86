//! Simulated times judged against measured ones: the relative error of each size, and the errors of
//! the small, mid and large sizes, which a model gets right for different reasons (latency, then
//! protocol and pipelining, then bandwidth).
//!
//! Uses [`super::log`].

use std::fmt;

use super::log::LogRow;

/// A range of sizes whose errors are judged together.
///
/// # Examples
/// ```
/// use kernbench::calibrate::SizeBand;
/// assert_eq!(SizeBand::of(256 << 10), SizeBand::Small);
/// assert_eq!(SizeBand::of((256 << 10) + 1), SizeBand::Mid);
/// assert_eq!(SizeBand::of(64 << 20), SizeBand::Large);
/// assert_eq!(SizeBand::Small.to_string(), "small (<= 256 KiB)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SizeBand {
    /// Up to [`SizeBand::SMALL_MAX`] bytes: latency-bound.
    Small,
    /// Between the two.
    Mid,
    /// From [`SizeBand::LARGE_MIN`] bytes: bandwidth-bound.
    Large,
}

impl SizeBand {
    /// Every band, smallest first.
    pub const ALL: [SizeBand; 3] = [SizeBand::Small, SizeBand::Mid, SizeBand::Large];

    /// The largest small size, in bytes: 256 KiB.
    pub const SMALL_MAX: u64 = 256 << 10;

    /// The smallest large size, in bytes: 64 MiB.
    pub const LARGE_MIN: u64 = 64 << 20;

    /// The band of a size in bytes (nccl-tests' and kernbench's `size`).
    pub fn of(size: u64) -> SizeBand {
        match size {
            ..=SizeBand::SMALL_MAX => SizeBand::Small,
            SizeBand::LARGE_MIN.. => SizeBand::Large,
            _ => SizeBand::Mid,
        }
    }
}

impl fmt::Display for SizeBand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (small, large) = (SizeBand::SMALL_MAX >> 10, SizeBand::LARGE_MIN >> 20);
        match self {
            SizeBand::Small => write!(f, "small (<= {small} KiB)"),
            SizeBand::Mid => write!(f, "mid ({small} KiB to {large} MiB)"),
            SizeBand::Large => write!(f, "large (>= {large} MiB)"),
        }
    }
}

/// A simulated time beside the measured row of its size.
///
/// # Examples
/// ```
/// use kernbench::calibrate::{Compared, LogRow, Measured};
/// let measured = Measured { time_us: 100.0, algbw_gbps: 1.0, busbw_gbps: 1.0 };
/// let row = LogRow {
///     line: 1, size: 1024, count: 256, dtype: "float".into(), op: "sum".into(),
///     out_of_place: measured, in_place: None,
/// };
/// let compared = Compared { measured: &row, simulated_ns: 112_300.0 };
/// assert!((compared.error() - 0.123).abs() < 1e-12);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Compared<'a> {
    /// The log's row.
    pub measured: &'a LogRow,
    /// The simulated time of the same call, ns.
    pub simulated_ns: f64,
}

impl Compared<'_> {
    /// The simulated time's error relative to the measured (out-of-place) one: `(simulated -
    /// measured) / measured`, above 0 when the simulation is slower.
    pub fn error(&self) -> f64 {
        let measured = self.measured.time_ns();
        (self.simulated_ns - measured) / measured
    }

    /// The band of the size.
    pub fn band(&self) -> SizeBand {
        SizeBand::of(self.measured.size)
    }
}

/// How far simulated times are from measured ones over the sizes of one band.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BandErrors {
    /// The band.
    pub band: SizeBand,
    /// The sizes judged: those that are not noisy.
    pub judged: usize,
    /// The sizes not judged because their row is [noisy](LogRow::noisy).
    pub noisy: usize,
    /// The mean of the judged sizes' absolute errors ([`Compared::error`]); `None` when none was judged.
    pub mean_abs_error: Option<f64>,
    /// The largest of them.
    pub max_abs_error: Option<f64>,
}

/// The errors of `compared` in each band, smallest first, every band whether it holds sizes or not.
///
/// # Examples
/// ```
/// use kernbench::calibrate::{Compared, LogRow, Measured, SizeBand, band_errors};
/// let time = |time_us| Measured { time_us, algbw_gbps: 1.0, busbw_gbps: 1.0 };
/// let row = |size, in_place| LogRow {
///     line: 1, size, count: size / 4, dtype: "float".into(), op: "sum".into(),
///     out_of_place: time(100.0), in_place: Some(time(in_place)),
/// };
/// let (small, noisy, large) = (row(1024, 100.0), row(2048, 200.0), row(1 << 30, 100.0));
/// let compared = [
///     Compared { measured: &small, simulated_ns: 90_000.0 },
///     Compared { measured: &noisy, simulated_ns: 10_000.0 },
///     Compared { measured: &large, simulated_ns: 130_000.0 },
/// ];
/// let [small, mid, large] = band_errors(&compared);
/// assert_eq!((small.band, small.judged, small.noisy), (SizeBand::Small, 1, 1));
/// assert!((small.mean_abs_error.unwrap() - 0.1).abs() < 1e-12);
/// assert_eq!((mid.judged, mid.mean_abs_error), (0, None));
/// assert!((large.max_abs_error.unwrap() - 0.3).abs() < 1e-12);
/// ```
pub fn band_errors(compared: &[Compared<'_>]) -> [BandErrors; 3] {
    SizeBand::ALL.map(|band| {
        let (noisy, judged): (Vec<&Compared<'_>>, Vec<&Compared<'_>>) =
            compared.iter().filter(|c| c.band() == band).partition(|c| c.measured.noisy());
        let errors: Vec<f64> = judged.iter().map(|c| c.error().abs()).collect();
        let mean = (!errors.is_empty()).then(|| errors.iter().sum::<f64>() / errors.len() as f64);
        let max = errors.iter().copied().reduce(f64::max);
        BandErrors { band, judged: judged.len(), noisy: noisy.len(), mean_abs_error: mean, max_abs_error: max }
    })
}

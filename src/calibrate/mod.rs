//! Real machines: nccl-tests logs read into measured rows ([`NcclLog`]), and simulated times set
//! beside them ([`Compared`], [`BandErrors`]), for `kernbench bench --compare`, `plot --compare` and
//! fitting the model to a machine.
//!
//! Uses `kernbench_core`'s collectives, systems and quoting; nothing here runs a call: [`fit`] moves a
//! system's figures and asks its caller for the simulated times (the command line's `calibrate` runs
//! them as `bench` does).
//!
//! A log is what `all_reduce_perf` and its siblings print, kept as a file, with `## ` lines of our own
//! that say where it came from:
//!
//! ```text
//! ## source: https://example.org/h100-results
//! # nThread 1 nGpus 8 minBytes 1024 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20
//! #  Rank  0 Group  0 Pid  4321 on node1 device  0 [0x18] NVIDIA H100 80GB HBM3
//! ...
//! #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
//!         1024           256     float     sum      -1    24.10    0.04    0.07      0    23.90    0.04    0.07      0
//! ```
//!
//! A row whose out-of-place and in-place times differ by more than [`NOISE_LIMIT`] of the smaller is
//! [noisy](LogRow::noisy): shown, never judged. Errors are judged per [`SizeBand`].

mod compare;
mod fit;
mod log;

pub use compare::{BandErrors, Compared, SizeBand, band_errors};
pub use fit::{Fit, Knob, Moved, fit, objective};
pub use log::{LogError, LogRow, Measured, NOISE_LIMIT, NcclLog};

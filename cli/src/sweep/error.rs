//! Why a sweep fails, and how far it got when it was asked to stop.
//!
//! Uses nothing of this crate.

use kernbench::estimate;
use kernbench::{Collective, CommError, LayoutError, Quoted, RegistryError};

/// Why a sweep (or its arguments) failed. Each message is one line, naming what was given and what
/// was expected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SweepError {
    /// A size that is not a number with an optional K, M or G suffix, is 0, or a range whose start is
    /// after its end.
    #[error("bad size `{}`: {expected}", Quoted(text))]
    BadSize {
        /// The text given.
        text: String,
        /// What would be valid.
        expected: &'static str,
    },
    /// An algorithm the registry does not have for this collective.
    #[error("unknown algorithm `{}` for {collective}: expected all, auto or a comma-separated list of [{}]", Quoted(name), known.join(", "))]
    UnknownAlgorithm {
        /// The name given.
        name: String,
        /// The collective swept.
        collective: Collective,
        /// The collective's algorithms.
        known: Vec<String>,
    },
    /// No algorithm of the collective runs on the one-PE layout of the system, so there is nothing to
    /// tune.
    #[error("no algorithm of {collective} runs on the one-PE layout of this system: nothing to tune")]
    NoCandidates {
        /// The collective.
        collective: Collective,
    },
    /// The communicator does not simulate time, so there is nothing to report.
    #[error("the communicator runs untimed: a sweep needs simulated time (Communicator::timing(Some(..)))")]
    Untimed,
    /// A point of the sweep did not run.
    #[error("{series} for {collective} of {size} bytes: {source}")]
    Call {
        /// `auto` or the algorithm.
        series: String,
        /// The collective.
        collective: Collective,
        /// The size of the point.
        size: u64,
        /// Why it did not run.
        source: Box<CommError>,
    },
    /// The sample tensor could not be made.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A point would need more memory than it may use: refused before anything is allocated, so the
    /// process ends with this message instead of an allocation failure or the system swapping.
    #[error(
        "{collective} of {size} bytes needs {} {} of memory, more than the limit of {}: \
         pass a smaller size, or --max-memory SIZE to allow more",
        if *at_least { "at least" } else { "an estimated" },
        estimate::human(*estimate),
        estimate::human(*limit)
    )]
    TooMuchMemory {
        /// The collective.
        collective: Collective,
        /// The size of the point.
        size: u64,
        /// The estimated peak ([`estimate::peak_memory`]), in bytes.
        estimate: u64,
        /// The limit, in bytes.
        limit: u64,
        /// Whether `estimate` is the least any algorithm would need (`kernbench::estimate::floor`):
        /// the point was refused before it was planned.
        at_least: bool,
    },
    /// A tuner asked to keep an algorithm that is not one of its candidates (the collective's
    /// algorithms that run on the one-PE layout of the system).
    #[error("`{}` is not a candidate for tuning {collective} here: expected a comma-separated list of [{}]", Quoted(name), candidates.join(", "))]
    NotACandidate {
        /// The name given.
        name: String,
        /// The collective tuned.
        collective: Collective,
        /// The tuner's candidates.
        candidates: Vec<String>,
    },
    /// An `--algos` variant (`ring:lanes=8`) whose parameters are not `key=value` pairs.
    #[error("bad algorithm variant `{}`: {expected}", Quoted(text))]
    BadVariant {
        /// The variant given.
        text: String,
        /// What would be valid.
        expected: &'static str,
    },
    /// The registry could not be read or rewritten.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The sweep was asked to stop.
    #[error("{0}")]
    Interrupted(#[from] Interrupted),
}

/// A run asked to stop (Ctrl-C) before its last point: the points before that ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("interrupted after {done} of {points} points")]
pub struct Interrupted {
    /// The points that ran.
    pub done: usize,
    /// The points there were to run.
    pub points: usize,
}

//! What a run returns: every PE's output and figures.

use std::collections::BTreeMap;

use kernbench_core::{PeId, Tile};

use crate::pe::PeFigures;
use crate::timing::{TimeReport, Trace};

/// One participating PE at the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct PeReport {
    /// The PE.
    pub pe: PeId,
    /// Its output buffer.
    pub output: Tile,
    /// What it did: its lanes' figures added up.
    pub figures: PeFigures,
    /// What each of its lanes did, in lane order, when it runs several (none when it runs one: its
    /// figures are the lane's).
    pub lanes: Vec<PeFigures>,
    /// What its kernel recorded with `tl.note`, by key.
    pub notes: BTreeMap<String, String>,
}

/// The result of a completed run. Two runs of the same inputs compare equal, bit for bit, whatever the
/// thread count.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    pes: Vec<PeReport>,
    rounds: u64,
    time: Option<TimeReport>,
}

impl RunReport {
    pub(crate) fn new(pes: Vec<PeReport>, rounds: u64, time: Option<TimeReport>) -> Self {
        RunReport { pes, rounds, time }
    }

    /// The simulated time, when the run was timed.
    pub fn time(&self) -> Option<&TimeReport> {
        self.time.as_ref()
    }

    /// When the last kernel finished in simulated time, ns (when the run was timed).
    pub fn completion_ns(&self) -> Option<f64> {
        self.time.as_ref().map(|t| t.completion_ns)
    }

    /// The run as a Chrome / Perfetto trace, when it was timed with `trace` on (empty tracks otherwise).
    pub fn trace(&self) -> Option<Trace> {
        let pes: Vec<PeId> = self.pes.iter().map(|p| p.pe).collect();
        self.time.as_ref().map(|time| Trace::new(&pes, time))
    }

    /// Every participant, in rank order.
    pub fn pes(&self) -> &[PeReport] {
        &self.pes
    }

    /// The output of `pe`, if it participated.
    pub fn output(&self, pe: PeId) -> Option<&Tile> {
        self.pes.binary_search_by_key(&pe, |p| p.pe).ok().map(|i| &self.pes[i].output)
    }

    /// The number of rounds the executor ran (the length of the longest chain of dependent steps).
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// The distinct values PEs recorded for `key` with `tl.note`, with how many PEs recorded each.
    pub fn note(&self, key: &str) -> BTreeMap<&str, usize> {
        let mut values = BTreeMap::new();
        for p in &self.pes {
            if let Some(v) = p.notes.get(key) {
                *values.entry(v.as_str()).or_default() += 1;
            }
        }
        values
    }

    /// The figures of all PEs added up.
    pub fn totals(&self) -> PeFigures {
        self.pes.iter().fold(PeFigures::default(), |mut t, p| {
            t += &p.figures;
            t
        })
    }
}

//! Tuning: simulate every candidate algorithm of a collective at each size on a system, and write
//! selection rules that choose the fastest, so that the registry's `auto` choice is the fastest at
//! every size tuned.
//!
//! Candidates are the collective's algorithms that run on the one-PE layout (each rank's tensor on
//! its SIP leader, the layout `auto` sweeps use): those whose plan builds on the system and whose
//! validator accepts that layout. Multi-PE algorithms (`hierarchical_allreduce`) are not candidates,
//! so the tuned rules are for the one-PE layout only; the registry's rules for other layouts are
//! kept, ahead of the tuned ones.
//!
//! Sizes become buckets of bytes per rank: the winner at tuned size `s_i` covers
//! `s_(i-1) + 1 ..= s_i`, the first bucket has no lower bound and the last no upper bound, and
//! neighbouring buckets with the same winner merge.

use std::fmt;
use std::fmt::Write as _;

use kernbench_core::{
    Collective, DpPolicy, Dtype, LayoutKind, ReduceOp, Registry, RegistryError, SelectionRule,
};
use serde::Serialize;

use crate::communicator::Communicator;
use crate::sweep::{Row, Series, Sweep, SweepError};
use crate::workload::sample_tensor;

/// A range of bytes per rank and the algorithm that was fastest in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// The smallest size it covers (inclusive); `None`: from 0.
    pub min_bytes: Option<u64>,
    /// The largest size it covers (inclusive); `None`: no limit.
    pub max_bytes: Option<u64>,
    /// The fastest candidate at every tuned size in the range.
    pub algorithm: String,
}

impl fmt::Display for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min_bytes, self.max_bytes) {
            (None, None) => write!(f, "every size: {}", self.algorithm),
            (None, Some(max)) => write!(f, "up to {max} bytes: {}", self.algorithm),
            (Some(min), None) => write!(f, "{min} bytes and up: {}", self.algorithm),
            (Some(min), Some(max)) => write!(f, "{min} to {max} bytes: {}", self.algorithm),
        }
    }
}

/// The outcome of tuning one collective on one system.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tuning {
    /// The collective.
    pub collective: Collective,
    /// The candidates, by name.
    pub candidates: Vec<String>,
    /// Every candidate at every size.
    pub rows: Vec<Row>,
    /// The fastest candidate per range of bytes per rank, smallest first.
    pub buckets: Vec<Bucket>,
    /// SIPs of the system (NCCL's nodes), and the collective's ranks (one per SIP).
    pub nodes: usize,
}

/// Tuning of one collective on one system: its candidates, found once, and the sweep over them.
///
/// # Examples
/// ```
/// use kernbench::{Collective, Communicator, Dtype, ReduceOp, System, tune::Tuner};
/// let mut comm = Communicator::new(System::shape(4, 1, 1, 1).unwrap());
/// let tuner = Tuner::new(&comm, Collective::Broadcast).unwrap();
/// let tuning = tuner.run(&mut comm, &[1024, 1 << 20], (Dtype::F32, ReduceOp::Sum), |_| {}).unwrap();
/// assert_eq!(tuning.rows.len(), 2 * tuner.candidates().len());
/// assert!(tuning.buckets.first().unwrap().min_bytes.is_none() && tuning.buckets.last().unwrap().max_bytes.is_none());
/// ```
#[derive(Clone, Debug)]
pub struct Tuner {
    collective: Collective,
    candidates: Vec<String>,
}

impl Tuner {
    /// The tuner of `collective` on the communicator's system; its candidates are the collective's
    /// algorithms that run on the one-PE layout there: their plan builds and their validator accepts
    /// the layout.
    ///
    /// # Errors
    /// [`SweepError::NoCandidates`] when no algorithm of the collective runs on that layout, and
    /// [`SweepError::Layout`] when the one-PE tensor that layouts are checked with cannot be made.
    pub fn new(comm: &Communicator, collective: Collective) -> Result<Tuner, SweepError> {
        let system = comm.system();
        // One element per rank splits into whole blocks for every collective, all-to-all included.
        let probe = sample_tensor(system, system.sips() as u64 * 4, Dtype::F32, ReduceOp::Sum, DpPolicy::LEADER)?;
        let layout = probe.layout();
        let candidates: Vec<String> = comm
            .registry()
            .algorithms()
            .filter(|algorithm| algorithm.collective == collective)
            .filter(|algorithm| algorithm.plan(system).is_ok_and(|plan| algorithm.validate(&plan, &layout).is_ok()))
            .map(|algorithm| algorithm.name.clone())
            .collect();
        if candidates.is_empty() {
            return Err(SweepError::NoCandidates { collective });
        }
        Ok(Tuner { collective, candidates })
    }

    /// The candidates, by name, in the registry's order.
    pub fn candidates(&self) -> &[String] {
        &self.candidates
    }

    /// Runs every candidate at every size (nccl-tests sizes, as [`Sweep`] takes them) on `comm`, the
    /// communicator the tuner was made for, and picks the fastest per size; `each` sees every row as
    /// it is made.
    ///
    /// # Errors
    /// [`SweepError`] from the first point that does not run.
    pub fn run(
        &self,
        comm: &mut Communicator,
        sizes: &[u64],
        (dtype, op): (Dtype, ReduceOp),
        each: impl FnMut(&Row),
    ) -> Result<Tuning, SweepError> {
        let series = self.candidates.iter().cloned().map(Series::Algorithm).collect();
        let rows = Sweep::new(self.collective, series, sizes.to_vec()).dtype(dtype).op(op).run(comm, each)?;
        Ok(Tuning {
            collective: self.collective,
            candidates: self.candidates.clone(),
            buckets: buckets(&rows),
            rows,
            nodes: comm.system().sips(),
        })
    }
}

/// The fastest row per bytes per rank (the first of equals, in the order rows were made), merged
/// into buckets.
fn buckets(rows: &[Row]) -> Vec<Bucket> {
    let mut winners: Vec<&Row> = Vec::new();
    for row in rows {
        match winners.iter_mut().find(|w| w.bytes_per_rank == row.bytes_per_rank) {
            Some(best) if row.time_ns < best.time_ns => *best = row,
            Some(_) => {}
            None => winners.push(row),
        }
    }
    winners.sort_by_key(|w| w.bytes_per_rank);
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut previous_max: Option<u64> = None;
    for w in winners {
        match buckets.last_mut() {
            Some(last) if last.algorithm == w.algorithm => last.max_bytes = Some(w.bytes_per_rank),
            _ => buckets.push(Bucket {
                min_bytes: previous_max.map(|m| m + 1),
                max_bytes: Some(w.bytes_per_rank),
                algorithm: w.algorithm.clone(),
            }),
        }
        previous_max = Some(w.bytes_per_rank);
    }
    if let Some(last) = buckets.last_mut() {
        last.max_bytes = None;
    }
    buckets
}

impl Tuning {
    /// The buckets as selection rules, smallest sizes first, each for the one-PE layout the
    /// candidates were timed on.
    pub fn rules(&self) -> Vec<SelectionRule> {
        self.buckets
            .iter()
            .map(|b| SelectionRule {
                algorithm: b.algorithm.clone(),
                min_bytes: b.min_bytes,
                max_bytes: b.max_bytes,
                layout: Some(LayoutKind::OnePe),
            })
            .collect()
    }

    /// `base` with the collective's rules replaced: its rules for other layouts than one-PE first (as
    /// they were), then the tuned buckets.
    ///
    /// # Errors
    /// [`RegistryError`] when a tuned algorithm is not in `base`.
    pub fn registry(&self, base: &Registry) -> Result<Registry, RegistryError> {
        let kept = base.rules(self.collective).iter().filter(|r| r.layout.is_some_and(|l| l != LayoutKind::OnePe));
        let rules = kept.cloned().chain(self.rules()).collect();
        let mut tuned = base.clone();
        tuned.set_rules(self.collective, rules)?;
        Ok(tuned)
    }

    /// The buckets in the columns of NCCL's tuner-plugin CSV, one line per bucket after a `#` header
    /// line (NCCL's parser skips such lines):
    ///
    /// | column | here |
    /// | --- | --- |
    /// | `collective_type` | the collective (`all_reduce`, ...) |
    /// | `min_bytes`, `max_bytes` | the bucket, inclusive (0 and 18446744073709551615 when open) |
    /// | `algorithm` | the registry's algorithm name |
    /// | `protocol`, `channels` | -1: not modelled |
    /// | `nNodes`, `nRanks` | SIPs and ranks of the system tuned on |
    /// | `numPipeOps`, `regBuff` | -1: any |
    pub fn csv(&self) -> String {
        let mut out =
            "# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff\n"
                .to_owned();
        for b in &self.buckets {
            let _ = writeln!(
                out,
                "{},{},{},{},-1,-1,{},{},-1,-1",
                self.collective,
                b.min_bytes.unwrap_or(0),
                b.max_bytes.unwrap_or(u64::MAX),
                b.algorithm,
                self.nodes,
                self.nodes
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_core::System;

    fn row(bytes: u64, algorithm: &str, time_ns: f64) -> Row {
        Row {
            size: bytes,
            count: bytes / 4,
            ranks: 4,
            bytes_per_rank: bytes,
            dtype: Dtype::F32,
            op: ReduceOp::Sum,
            series: algorithm.to_owned(),
            algorithm: algorithm.to_owned(),
            time_ns,
            algbw_gbps: 0.0,
            busbw_gbps: 0.0,
            wrong: 0,
            slowest_link: None,
            sol: None,
        }
    }

    #[test]
    fn the_fastest_per_size_becomes_merged_buckets() {
        let rows = [
            row(1024, "a", 1.0),
            row(1024, "b", 2.0),
            row(2048, "a", 1.0),
            row(2048, "b", 1.0),
            row(4096, "b", 3.0),
            row(4096, "a", 4.0),
        ];
        let got = buckets(&rows);
        let want = [
            Bucket { min_bytes: None, max_bytes: Some(2048), algorithm: "a".into() },
            Bucket { min_bytes: Some(2049), max_bytes: None, algorithm: "b".into() },
        ];
        assert_eq!(got, want);
        assert_eq!(
            got.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["up to 2048 bytes: a", "2049 bytes and up: b"]
        );
    }

    #[test]
    fn the_tuned_registry_keeps_other_layouts_rules_and_writes_a_csv_line_per_bucket() {
        let mut comm = Communicator::new(System::shape(4, 1, 1, 2).unwrap());
        let tuner = Tuner::new(&comm, Collective::AllReduce).unwrap();
        let tuning = tuner.run(&mut comm, &[1024, 1 << 20], (Dtype::F32, ReduceOp::Sum), |_| {}).unwrap();
        assert!(!tuning.candidates.contains(&"hierarchical_allreduce".to_owned()), "{:?}", tuning.candidates);
        assert!(tuning.candidates.contains(&"ring".to_owned()));
        let registry = tuning.registry(comm.registry()).unwrap();
        let rules = registry.rules(Collective::AllReduce);
        let kept = rules.iter().take_while(|r| r.layout == Some(LayoutKind::MultiPe)).count();
        assert_eq!(kept, 2, "the default's two multi-PE rules come first: {rules:?}");
        assert_eq!(rules.len(), kept + tuning.buckets.len());
        // A multi-PE tensor still gets the kept multi-PE rule, never a tuned one-PE algorithm.
        let multi_pe: Vec<&str> = registry
            .matching(Collective::AllReduce, 1024, LayoutKind::MultiPe)
            .map(|s| s.algorithm.name.as_str())
            .collect();
        assert_eq!(multi_pe, ["hierarchical_allreduce", "intercube_allreduce"]);
        let csv = tuning.csv();
        assert_eq!(csv.lines().count(), 1 + tuning.buckets.len());
        assert!(csv.lines().nth(1).unwrap().starts_with("all_reduce,0,"), "{csv}");
        assert!(csv.trim_end().ends_with(",-1,-1,4,4,-1,-1"), "{csv}");
    }

    #[test]
    fn tuned_rules_match_only_the_one_pe_layout_their_candidates_ran_on() {
        // Broadcast has no multi-PE rule to keep: a tuned rule for any layout would hand a multi-PE
        // tensor to a one-PE algorithm.
        let mut comm = Communicator::new(System::shape(4, 1, 1, 2).unwrap());
        let tuner = Tuner::new(&comm, Collective::Broadcast).unwrap();
        let tuning = tuner.run(&mut comm, &[1024], (Dtype::F32, ReduceOp::Sum), |_| {}).unwrap();
        let registry = tuning.registry(comm.registry()).unwrap();
        assert!(registry.rules(Collective::Broadcast).iter().all(|r| r.layout == Some(LayoutKind::OnePe)));
        assert!(registry.select(Collective::Broadcast, 1024, LayoutKind::OnePe).is_ok());
        assert!(matches!(
            registry.select(Collective::Broadcast, 1024, LayoutKind::MultiPe),
            Err(RegistryError::NoRule { .. })
        ));
    }

    #[test]
    fn a_collective_without_one_pe_algorithms_has_nothing_to_tune() {
        let system = System::shape(2, 1, 1, 1).unwrap();
        let comm = Communicator::with_registry(system, Registry::new());
        assert!(matches!(Tuner::new(&comm, Collective::Broadcast), Err(SweepError::NoCandidates { .. })));
    }
}

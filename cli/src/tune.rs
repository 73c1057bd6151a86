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
//!
//! The buckets leave as a registry ([`Tuning::registry`]), as kernbench's own rules CSV
//! ([`rules_csv`]), and as the configuration file of NCCL's example tuner plugin for the buckets NCCL
//! has an algorithm for ([`nccl_tuner_csv`], [`nccl_algorithm`]).

use std::fmt;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use kernbench::{Collective, DpPolicy, Dtype, Layout, LayoutKind, ReduceOp, Registry, RegistryError, SelectionRule};
use serde::Serialize;

use crate::memory;
use crate::sweep::{Row, Series, Sweep, SweepError};
use kernbench::Communicator;

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
    /// SIPs of the system: the collective's ranks (one per SIP).
    pub sips: usize,
}

/// Tuning of one collective on one system: its candidates, found once, and the sweep over them.
///
/// # Examples
/// ```
/// use kernbench::{Collective, Communicator, Dtype, ReduceOp, System};
/// use kernbench_cli::tune::Tuner;
/// let mut comm = Communicator::new(System::shape(4, 1, 1, 1).unwrap());
/// let tuner = Tuner::new(&mut comm, Collective::Broadcast).unwrap();
/// let tuning = tuner.run(&mut comm, &[1024, 1 << 20], (Dtype::F32, ReduceOp::Sum), |_| {}).unwrap();
/// assert_eq!(tuning.rows.len(), 2 * tuner.candidates().len());
/// assert!(tuning.buckets.first().unwrap().min_bytes.is_none() && tuning.buckets.last().unwrap().max_bytes.is_none());
/// ```
#[derive(Clone, Debug)]
pub struct Tuner {
    collective: Collective,
    candidates: Vec<String>,
    max_memory: Option<u64>,
}

impl Tuner {
    /// The tuner of `collective` on the communicator's system; its candidates are the collective's
    /// algorithms that run on the one-PE layout there: their plan builds and their validator accepts
    /// the layout.
    ///
    /// # Errors
    /// [`SweepError::NoCandidates`] when no algorithm of the collective runs on that layout, and
    /// [`SweepError::Layout`] when the one-PE layout they are checked with cannot be made.
    pub fn new(comm: &mut Communicator, collective: Collective) -> Result<Tuner, SweepError> {
        let system = comm.system();
        // One element per rank splits into whole blocks for every collective, all-to-all included.
        let layout = Layout::of(system, Dtype::F32, 1, system.sips(), DpPolicy::LEADER)?;
        let algorithms: Vec<_> =
            comm.registry().algorithms().filter(|a| a.collective == collective).map(Arc::clone).collect();
        // The plans are the communicator's, so the runs that follow reuse them.
        let candidates: Vec<String> = algorithms
            .into_iter()
            .filter(|algorithm| comm.plan(algorithm).is_ok_and(|plan| algorithm.validate(&plan, &layout).is_ok()))
            .map(|algorithm| algorithm.name.clone())
            .collect();
        if candidates.is_empty() {
            return Err(SweepError::NoCandidates { collective });
        }
        Ok(Tuner { collective, candidates, max_memory: memory::available() })
    }

    /// Keeps only the candidates `algos` names (a comma-separated list), in the registry's order: to
    /// find where one algorithm overtakes another, such as the ring's low-latency and streaming modes.
    ///
    /// # Errors
    /// [`SweepError::NotACandidate`] for a name that is not a candidate, listing the candidates.
    pub fn only(mut self, algos: &str) -> Result<Tuner, SweepError> {
        let names: Vec<&str> = algos.split(',').map(str::trim).collect();
        if let Some(unknown) = names.iter().find(|name| !self.candidates.iter().any(|c| c == *name)) {
            return Err(SweepError::NotACandidate {
                name: (*unknown).to_owned(),
                collective: self.collective,
                candidates: self.candidates.clone(),
            });
        }
        self.candidates.retain(|c| names.contains(&c.as_str()));
        Ok(self)
    }

    /// The most memory a point may need, as [`Sweep::max_memory`]; the available memory unless set.
    pub fn max_memory(mut self, limit: Option<u64>) -> Tuner {
        self.max_memory = limit;
        self
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
        data: (Dtype, ReduceOp),
        each: impl FnMut(&Row),
    ) -> Result<Tuning, SweepError> {
        self.run_until(comm, sizes, data, &AtomicBool::new(false), each)
    }

    /// [`Tuner::run`], stopping before the next point once `stop` is set, as [`Sweep::run_until`].
    ///
    /// # Errors
    /// [`SweepError::Interrupted`] when stopped, and [`SweepError`] from the first point that does not
    /// run.
    pub fn run_until(
        &self,
        comm: &mut Communicator,
        sizes: &[u64],
        (dtype, op): (Dtype, ReduceOp),
        stop: &AtomicBool,
        each: impl FnMut(&Row),
    ) -> Result<Tuning, SweepError> {
        let series = self.candidates.iter().cloned().map(Series::Algorithm).collect();
        let sweep = Sweep::new(self.collective, series, sizes.to_vec()).dtype(dtype).op(op).max_memory(self.max_memory);
        let rows = sweep.run_until(comm, stop, each)?;
        Ok(Tuning {
            collective: self.collective,
            candidates: self.candidates.clone(),
            buckets: buckets(&rows),
            rows,
            sips: comm.system().sips(),
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
}

/// The tunings' buckets as kernbench's own rules CSV: a `#` header line, then
/// `collective,min_bytes,max_bytes,algorithm,layout,sips` per bucket, with kernbench's names, bytes per
/// rank as the registry compares them, and an empty field for an open bound.
///
/// # Examples
/// ```
/// use kernbench::{Collective, Communicator, Dtype, ReduceOp, System};
/// use kernbench_cli::tune::{Tuner, rules_csv};
/// let mut comm = Communicator::new(System::shape(4, 1, 1, 1).unwrap());
/// let tuning = Tuner::new(&mut comm, Collective::AllToAll).unwrap()
///     .run(&mut comm, &[1024], (Dtype::F32, ReduceOp::Sum), |_| {}).unwrap();
/// let csv = rules_csv(&[tuning]);
/// assert_eq!(csv.lines().next(), Some("# collective,min_bytes,max_bytes,algorithm,layout,sips"));
/// assert!(csv.lines().nth(1).unwrap().starts_with("all_to_all,,,"));
/// ```
pub fn rules_csv(tunings: &[Tuning]) -> String {
    let mut out = "# collective,min_bytes,max_bytes,algorithm,layout,sips\n".to_owned();
    let bound = |b: Option<u64>| b.map_or(String::new(), |b| b.to_string());
    for tuning in tunings {
        for b in &tuning.buckets {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{}",
                tuning.collective,
                bound(b.min_bytes),
                bound(b.max_bytes),
                b.algorithm,
                LayoutKind::OnePe.name(),
                tuning.sips
            );
        }
    }
    out
}

/// The tunings' buckets as a configuration file of NCCL's example tuner plugin (`ext-tuner/example`,
/// `NCCL_TUNER_CONFIG_FILE`): `collective_type,min_bytes,max_bytes,algorithm,protocol,channels,
/// nNodes,nRanks,numPipeOps,regBuff` per bucket that has an NCCL equivalent, in NCCL's names:
///
/// | column | written |
/// | --- | --- |
/// | `collective_type` | [`nccl_collective`]: all-to-all has none, so it writes no line |
/// | `min_bytes`, `max_bytes` | the bucket in NCCL's `nBytes` (an all-gather's gathered output, so a rank's contribution times the ranks); 0 and -1 when open |
/// | `algorithm` | [`nccl_algorithm`] |
/// | `protocol` | the protocol the winning calls were carried by (`ll`, `ll128`, `simple`), a line per run of sizes that share one; `simple` on a system without protocols, whose messages move whole as Simple's do |
/// | `channels` | -1: NCCL's default |
/// | `nNodes` | -1: any (a SIP is a rank; kernbench has no hosts) |
/// | `nRanks` | the SIPs of the system tuned on |
/// | `numPipeOps`, `regBuff` | -1: any |
///
/// A bucket whose algorithm has no NCCL equivalent becomes a `#` comment saying so, which the plugin
/// skips: NCCL then chooses for those sizes itself.
pub fn nccl_tuner_csv(tunings: &[Tuning]) -> String {
    let mut out = "# NCCL tuner plugin configuration (NCCL_TUNER_CONFIG_FILE) from kernbench tune\n\
                   # collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff\n"
        .to_owned();
    for tuning in tunings {
        // NCCL's nBytes of an all-gather is its output; the buckets count a rank's contribution.
        let scale = if tuning.collective == Collective::AllGather { tuning.sips as u64 } else { 1 };
        for b in &tuning.buckets {
            match (nccl_collective(tuning.collective), nccl_algorithm(&b.algorithm)) {
                (Some(collective), Some(algorithm)) => {
                    for (min, max, protocol) in protocol_runs(tuning, b) {
                        let _ = writeln!(
                            out,
                            "{collective},{},{},{algorithm},{protocol},-1,-1,{},-1,-1",
                            min.map_or(0, |m| m.saturating_mul(scale)),
                            max.map_or("-1".to_owned(), |m| m.saturating_mul(scale).to_string()),
                            tuning.sips
                        );
                    }
                }
                (None, _) => {
                    let _ = writeln!(out, "# {} {b} (NCCL's tuner has no such collective)", tuning.collective);
                }
                (Some(_), None) => {
                    let _ = writeln!(out, "# {} {b} (no NCCL algorithm does this)", tuning.collective);
                }
            }
        }
    }
    out
}

/// Bucket `b` of `tuning` cut where the protocol of its winning calls changes: `(min, max, protocol)`
/// per run of sizes, in NCCL's names (`simple` where the calls were carried as data), covering the
/// bucket's range.
fn protocol_runs(tuning: &Tuning, b: &Bucket) -> Vec<(Option<u64>, Option<u64>, &'static str)> {
    let inside = |bytes: u64| b.min_bytes.is_none_or(|m| bytes >= m) && b.max_bytes.is_none_or(|m| bytes <= m);
    let mut winners: Vec<&Row> =
        tuning.rows.iter().filter(|r| r.algorithm == b.algorithm && inside(r.bytes_per_rank)).collect();
    winners.sort_by_key(|r| r.bytes_per_rank);
    let name = |row: &Row| row.protocol.map_or("simple", |p| p.key());
    let mut runs: Vec<(Option<u64>, Option<u64>, &'static str)> = Vec::new();
    for row in winners {
        match runs.last_mut() {
            Some(last) if last.2 == name(row) => last.1 = Some(row.bytes_per_rank),
            Some(last) => {
                let start = last.1.map(|m| m + 1);
                runs.push((start, Some(row.bytes_per_rank), name(row)));
            }
            None => runs.push((b.min_bytes, Some(row.bytes_per_rank), name(row))),
        }
    }
    match runs.last_mut() {
        Some(last) => last.1 = b.max_bytes,
        None => runs.push((b.min_bytes, b.max_bytes, "simple")),
    }
    runs
}

/// NCCL's name of a collective in its tuner plugin's configuration, if NCCL's tuner has it (it has no
/// all-to-all, all-to-all-v or send/recv).
///
/// # Examples
/// ```
/// use kernbench::Collective;
/// use kernbench_cli::tune::nccl_collective;
/// assert_eq!(nccl_collective(Collective::ReduceScatter), Some("reducescatter"));
/// assert_eq!(nccl_collective(Collective::AllToAll), None);
/// ```
pub fn nccl_collective(collective: Collective) -> Option<&'static str> {
    match collective {
        Collective::AllReduce => Some("allreduce"),
        Collective::AllGather => Some("allgather"),
        Collective::ReduceScatter => Some("reducescatter"),
        Collective::Broadcast => Some("broadcast"),
        Collective::Reduce => Some("reduce"),
        Collective::AllToAll | Collective::AllToAllV | Collective::SendRecv => None,
    }
}

/// The shipped algorithms that NCCL has an equivalent of, and its name there. NCCL's ring runs both
/// directions over its channels, as `bidirectional_ring` does, and its tree is a double binary tree;
/// its tree exists for all-reduce only. Recursive doubling and halving, Rabenseifner, one-shot,
/// 2D-mesh, Bruck, tree broadcast, pairwise all-to-all and the multi-PE algorithms have none.
const NCCL_ALGORITHMS: [(&str, &str); 11] = [
    ("ring", "ring"),
    ("bidirectional_ring", "ring"),
    ("tree", "tree"),
    ("double_binary_tree", "tree"),
    ("ring_allgather", "ring"),
    ("ring_reduce_scatter", "ring"),
    ("ring_broadcast", "ring"),
    ("ring_reduce", "ring"),
    ("nvls_allreduce", "nvls"),
    ("nvls_allgather", "nvls"),
    ("nvls_reduce_scatter", "nvls"),
];

/// NCCL's name of the algorithm that does what a shipped algorithm does, if there is one.
///
/// # Examples
/// ```
/// use kernbench_cli::tune::nccl_algorithm;
/// assert_eq!(nccl_algorithm("double_binary_tree"), Some("tree"));
/// assert_eq!(nccl_algorithm("recursive_doubling"), None);
/// ```
pub fn nccl_algorithm(algorithm: &str) -> Option<&'static str> {
    NCCL_ALGORITHMS.iter().find(|(ours, _)| *ours == algorithm).map(|(_, nccl)| *nccl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench::System;

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
            protocol: None,
            time_ns,
            algbw_gbps: 0.0,
            busbw_gbps: 0.0,
            checked: true,
            wrong: 0,
            bound: None,
            sol: None,
            rounded: None,
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
        let tuner = Tuner::new(&mut comm, Collective::AllReduce).unwrap();
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
        let csv = rules_csv(std::slice::from_ref(&tuning));
        assert_eq!(csv.lines().count(), 1 + tuning.buckets.len());
        assert!(csv.lines().nth(1).unwrap().starts_with("all_reduce,,"), "{csv}");
        let last: Vec<&str> = csv.lines().last().unwrap().split(',').collect();
        assert_eq!((last.len(), last[2], last[4], last[5]), (6, "", "one_pe", "4"), "{csv}");
    }

    /// One configuration line of NCCL's example tuner plugin, read as that plugin reads its file:
    /// lines starting with `#` and empty lines are skipped, fields are split at commas and trimmed,
    /// 8 to 10 of them; names must be ones the plugin knows (it silently falls back to allreduce,
    /// ring and simple for any other, so a name it does not know is a wrong rule); the byte bounds are
    /// unsigned, where -1 reads as the largest value (`strtoull`); the other numbers are `int`s, -1
    /// meaning "any" or "default".
    #[derive(Debug, PartialEq)]
    struct NcclLine {
        collective: String,
        min_bytes: u64,
        max_bytes: u64,
        algorithm: String,
        ranks: i32,
    }

    fn read_as_nccl_plugin(text: &str) -> Vec<NcclLine> {
        const COLLECTIVES: [&str; 5] = ["broadcast", "reduce", "allgather", "reducescatter", "allreduce"];
        const ALGORITHMS: [&str; 7] = ["tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"];
        const PROTOCOLS: [&str; 3] = ["ll", "ll128", "simple"];
        let mut lines = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let fields: Vec<&str> = line.split(',').map(|f| f.trim_matches([' ', '\t'])).collect();
            assert!((8..=10).contains(&fields.len()), "{} fields in `{line}`", fields.len());
            assert!(COLLECTIVES.contains(&fields[0]), "collective `{}` in `{line}`", fields[0]);
            assert!(ALGORITHMS.contains(&fields[3]), "algorithm `{}` in `{line}`", fields[3]);
            assert!(PROTOCOLS.contains(&fields[4]), "protocol `{}` in `{line}`", fields[4]);
            let bytes = |f: &str| {
                if f == "-1" {
                    u64::MAX
                } else {
                    f.parse::<u64>().unwrap_or_else(|_| panic!("bytes `{f}` in `{line}`"))
                }
            };
            let int = |f: &str| {
                let n: i32 = f.parse().unwrap_or_else(|_| panic!("`{f}` is not an int in `{line}`"));
                assert!(n == -1 || n > 0, "`{f}` is neither -1 nor a count in `{line}`");
                n
            };
            let ints: Vec<i32> = fields[5..].iter().map(|f| int(f)).collect();
            let (min_bytes, max_bytes) = (bytes(fields[1]), bytes(fields[2]));
            assert!(min_bytes <= max_bytes, "`{line}` covers nothing");
            lines.push(NcclLine {
                collective: fields[0].to_owned(),
                min_bytes,
                max_bytes,
                algorithm: fields[3].to_owned(),
                ranks: ints[2],
            });
        }
        lines
    }

    #[test]
    fn the_nccl_tuner_file_loads_in_nccls_example_plugin_with_a_line_per_bucket_nccl_can_run() {
        let mut comm = Communicator::new(System::shape(4, 1, 1, 2).unwrap());
        let data = (Dtype::F32, ReduceOp::Sum);
        for (collective, nccl_name, scale) in
            [(Collective::AllReduce, "allreduce", 1), (Collective::AllGather, "allgather", 4)]
        {
            let tuning =
                Tuner::new(&mut comm, collective).unwrap().run(&mut comm, &[1024, 1 << 20], data, |_| {}).unwrap();
            let text = nccl_tuner_csv(std::slice::from_ref(&tuning));
            let lines = read_as_nccl_plugin(&text);
            let mapped: Vec<&Bucket> =
                tuning.buckets.iter().filter(|b| nccl_algorithm(&b.algorithm).is_some()).collect();
            assert_eq!(lines.len(), mapped.len(), "{text}");
            for (line, bucket) in lines.iter().zip(&mapped) {
                let want = NcclLine {
                    collective: nccl_name.to_owned(),
                    min_bytes: bucket.min_bytes.map_or(0, |m| m * scale),
                    max_bytes: bucket.max_bytes.map_or(u64::MAX, |m| m * scale),
                    algorithm: nccl_algorithm(&bucket.algorithm).unwrap().to_owned(),
                    ranks: 4,
                };
                assert_eq!(*line, want, "{text}");
            }
            for bucket in tuning.buckets.iter().filter(|b| nccl_algorithm(&b.algorithm).is_none()) {
                let comment = format!("# {collective} {bucket} (no NCCL algorithm does this)");
                assert!(text.lines().any(|l| l == comment), "no `{comment}` in\n{text}");
            }
        }
    }

    #[test]
    fn the_nccl_tuner_file_says_the_protocol_of_each_run_of_sizes() {
        let carried = |bytes, protocol| Row { protocol: Some(protocol), ..row(bytes, "ring", 1.0) };
        let rows = vec![
            carried(1024, kernbench::Protocol::Ll),
            carried(2048, kernbench::Protocol::Ll),
            carried(4096, kernbench::Protocol::Ll128),
            carried(8192, kernbench::Protocol::Simple),
        ];
        let tuning = Tuning {
            collective: Collective::AllReduce,
            candidates: vec!["ring".into()],
            buckets: buckets(&rows),
            rows,
            sips: 8,
        };
        let text = nccl_tuner_csv(std::slice::from_ref(&tuning));
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            [
                "allreduce,0,2048,ring,ll,-1,-1,8,-1,-1",
                "allreduce,2049,4096,ring,ll128,-1,-1,8,-1,-1",
                "allreduce,4097,-1,ring,simple,-1,-1,8,-1,-1"
            ],
            "{text}"
        );
    }

    #[test]
    fn an_all_to_all_has_no_nccl_tuner_line() {
        let mut comm = Communicator::new(System::shape(4, 1, 1, 1).unwrap());
        let tuning = Tuner::new(&mut comm, Collective::AllToAll)
            .unwrap()
            .run(&mut comm, &[1024], (Dtype::F32, ReduceOp::Sum), |_| {})
            .unwrap();
        let text = nccl_tuner_csv(std::slice::from_ref(&tuning));
        assert!(read_as_nccl_plugin(&text).is_empty(), "{text}");
        assert!(text.contains("# all_to_all every size: "), "{text}");
        assert!(text.contains("(NCCL's tuner has no such collective)"), "{text}");
    }

    #[test]
    fn every_nccl_equivalent_names_a_shipped_algorithm_of_a_collective_nccl_tunes() {
        let registry = kernbench::algorithms::default_registry();
        for (ours, _) in NCCL_ALGORITHMS {
            let entry = registry.get(ours).unwrap();
            assert!(nccl_collective(entry.collective).is_some(), "{ours}");
        }
    }

    #[test]
    fn tuned_rules_match_only_the_one_pe_layout_their_candidates_ran_on() {
        // Broadcast has no multi-PE rule to keep: a tuned rule for any layout would hand a multi-PE
        // tensor to a one-PE algorithm.
        let mut comm = Communicator::new(System::shape(4, 1, 1, 2).unwrap());
        let tuner = Tuner::new(&mut comm, Collective::Broadcast).unwrap();
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
        let mut comm = Communicator::with_registry(system, Registry::new());
        assert!(matches!(Tuner::new(&mut comm, Collective::Broadcast), Err(SweepError::NoCandidates { .. })));
    }
}

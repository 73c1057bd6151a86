//! A workload's step run on a system: every call timed on the simulator (timing-only), calls on the
//! same GPUs that overlap run together so that they share links and GPUs, compute phases at their
//! durations or their flops at the GPU's rate the caller gives, all placed by the workload's
//! schedule.
//!
//! What shares what: calls in flight at once on the same members (different communicators of them,
//! as a data-parallel and an expert-parallel communicator of every rank) run together on the
//! simulator ([`Communicator::call_together`]), sharing every link's channels and every GPU's
//! engines, on the union of their algorithms' plans; calls that overlap and cannot (plans that share
//! a direction, or other members) are each timed as if alone, and marked. Compute phases run on the GPUs' compute,
//! one at a time per GPU, and overlap communication without slowing it, as NCCL's kernels run on SMs
//! of their own. Overlap depends on the times and the times on the overlap, so the step is scheduled
//! again with the times the calls took together until no time changes (at most [`MAX_ROUNDS`]
//! times).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use kernbench_core::{Collective, DpPolicy, Dtype, KernelError, ReduceOp, Registry, System};
use serde::Serialize;

use super::{Node, NodeId, NodeKind, Ranks, ScheduleError, Work, Workload};
use crate::{CommError, Communicator, TogetherCall};

/// The most times a step is scheduled again with the times its overlapping calls took together.
pub const MAX_ROUNDS: usize = 4;

/// Why a step could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// The workload has more ranks than the system has GPUs (SIPs).
    #[error("the workload has {ranks} ranks, and {system} has {gpus} GPUs: expected a system of at least {ranks}")]
    TooFewGpus {
        /// The workload's ranks.
        ranks: u32,
        /// The system's GPUs.
        gpus: usize,
        /// The system.
        system: String,
    },
    /// Two calls on one communicator, issued on different streams with no order between them: the
    /// ranks may issue them in different orders, which hangs NCCL.
    #[error(
        "calls `{first}` and `{second}` run on one communicator ({members}) from streams {} and {} with no order between them, which hangs NCCL when ranks issue them in different orders: make one depend on the other, or issue both on one stream",
        .streams.0, .streams.1
    )]
    UnorderedStreams {
        /// The first call's name.
        first: String,
        /// The second call's name.
        second: String,
        /// The communicator's members.
        members: String,
        /// Their streams.
        streams: (u32, u32),
    },
    /// A call failed on the simulator.
    #[error("node {id} `{name}`: {source}")]
    Call {
        /// The node's id.
        id: NodeId,
        /// Its name.
        name: String,
        /// Why.
        source: Box<CommError>,
    },
    /// The communicator of a call cannot be built on the system.
    #[error("node {id} `{name}`: no system of its {members} GPUs can be made from {system}: {why}")]
    NoSystem {
        /// The node's id.
        id: NodeId,
        /// Its name.
        name: String,
        /// Its members' count.
        members: usize,
        /// The system.
        system: String,
        /// Why.
        why: String,
    },
    /// A compute phase given in flops, with no GPU rate to run them at.
    #[error(
        "node {id} `{name}` computes {flops:e} flops, and no GPU rate was given: give one (in GFLOP/s; an H100 runs dense BF16 at about 989,000)"
    )]
    NoGpuRate {
        /// The node's id.
        id: NodeId,
        /// Its name.
        name: String,
        /// Its flops.
        flops: f64,
    },
    /// A duration was not a finite number of ns.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
}

/// One node of a step that ran.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeRun {
    /// The node's id.
    pub id: NodeId,
    /// Its name.
    pub name: String,
    /// `compute`, `send`, or the collective's name.
    pub kind: String,
    /// Its ranks' count (a transfer's: 2).
    pub ranks: usize,
    /// When it started, ns from the step's start.
    pub start_ns: f64,
    /// When it ended.
    pub end_ns: f64,
    /// A call's time alone on the machine (none for compute).
    pub alone_ns: Option<f64>,
    /// The algorithm a collective ran.
    pub algorithm: Option<String>,
    /// Whether it overlapped calls on its GPUs that it cannot run together with (their algorithms'
    /// plans share a direction, or one is one-sided), so that it was timed as if alone: its slowdown
    /// is then not known.
    pub unshared: bool,
}

impl NodeRun {
    /// Its time in the step.
    pub fn took_ns(&self) -> f64 {
        self.end_ns - self.start_ns
    }

    /// A call's time in the step over its time alone (1: nothing slowed it).
    pub fn slowdown(&self) -> Option<f64> {
        self.alone_ns.filter(|&alone| alone > 0.0).map(|alone| self.took_ns() / alone)
    }
}

/// A step that ran: its time and every node's ([`Workload::run`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    /// When the last node ended, ns.
    pub step_ns: f64,
    /// Every node, by id (a transfer's receive is not listed: its send is).
    pub nodes: Vec<NodeRun>,
    /// The times the step was scheduled (1 when no calls on the same GPUs overlapped).
    pub rounds: usize,
}

impl Step {
    /// The step as a Chrome / Perfetto trace: one track per node, named after it.
    pub fn trace(&self) -> serde_json::Value {
        let mut events = Vec::with_capacity(2 * self.nodes.len());
        for node in &self.nodes {
            let tid = node.id;
            let label = format!("{} {}", node.id, node.name);
            events.push(
                serde_json::json!({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": label}}),
            );
            events.push(serde_json::json!({
                "name": node.name, "cat": node.kind, "ph": "X", "pid": 0, "tid": tid,
                "ts": node.start_ns / 1e3, "dur": node.took_ns() / 1e3,
                "args": {"alone_us": node.alone_ns.map(|ns| ns / 1e3), "algorithm": node.algorithm}
            }));
        }
        serde_json::json!({"traceEvents": events, "displayTimeUnit": "ns"})
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "# step: {:.2} us ({} nodes, scheduled {} times)",
            self.step_ns / 1e3,
            self.nodes.len(),
            self.rounds
        )?;
        writeln!(
            f,
            "#   id  {:<24} {:<16} {:>5} {:>12} {:>12} {:>12} {:>9}  algorithm",
            "name", "kind", "ranks", "start (us)", "time (us)", "alone (us)", "slowdown"
        )?;
        for node in &self.nodes {
            let alone = node.alone_ns.map_or("-".to_owned(), |ns| format!("{:.2}", ns / 1e3));
            let slowdown = match node.slowdown() {
                Some(_) if node.unshared => "alone*".to_owned(),
                Some(s) => format!("{s:.3}"),
                None => "-".to_owned(),
            };
            writeln!(
                f,
                "{:>6}  {:<24} {:<16} {:>5} {:>12.2} {:>12.2} {:>12} {:>9}  {}",
                node.id,
                node.name,
                node.kind,
                node.ranks,
                node.start_ns / 1e3,
                node.took_ns() / 1e3,
                alone,
                slowdown,
                node.algorithm.as_deref().unwrap_or("-")
            )?;
        }
        if self.nodes.iter().any(|node| node.unshared) {
            writeln!(
                f,
                "# alone*: overlapped calls on its GPUs it cannot run with (plans sharing a direction, or one-sided), timed as if alone"
            )?;
        }
        Ok(())
    }
}

/// What a call is, for the simulator: the collective, the bytes a rank contributes and the shape of
/// its communicator (members, and members per node), which makes its system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct CallKey {
    collective: Collective,
    bytes: u64,
    members: usize,
    per_node: usize,
}

/// Calls on the same members that overlap: what runs together.
type Overlap = Vec<usize>;

impl Workload {
    /// Runs the step on `system` with `registry`'s algorithms: every call timed on the simulator
    /// without data (the registry picks each one's algorithm for its size), overlapping calls on the
    /// same GPUs together, compute phases at their durations or at `gpu_gflops` (1e9 floating-point
    /// operations a second: a system spec's rates are its PEs' reductions and copies, not their matrix
    /// units'), as the module says.
    ///
    /// # Errors
    /// [`StepError`].
    ///
    /// # Examples
    /// ```
    /// use kernbench::workload::Workload;
    /// let step = Workload::from_json_str(r#"{"ranks": 4, "nodes": [
    ///     {"id": 0, "name": "backward", "compute": {"duration_us": 100}},
    ///     {"id": 1, "name": "grads", "all_reduce": {"bytes": "1M"}, "deps": [0]}
    /// ]}"#)?;
    /// let system = kernbench::System::shape(4, 1, 1, 1)?;
    /// let ran = step.run(&system, &kernbench::algorithms::default_registry(), None)?;
    /// let call = &ran.nodes[1];
    /// assert_eq!(call.start_ns, 100_000.0);
    /// assert_eq!(ran.step_ns, call.end_ns);
    /// assert_eq!(call.slowdown(), Some(1.0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run(&self, system: &System, registry: &Registry, gpu_gflops: Option<f64>) -> Result<Step, StepError> {
        if self.ranks() as usize > system.sips() {
            let (ranks, gpus, system) = (self.ranks(), system.sips(), system.describe());
            return Err(StepError::TooFewGpus { ranks, gpus, system });
        }
        self.check_stream_orders()?;
        for node in self.nodes() {
            if let (NodeKind::Compute { work: Work::Flops(flops), .. }, None) = (&node.kind, gpu_gflops) {
                return Err(StepError::NoGpuRate { id: node.id, name: node.name.clone(), flops: *flops });
            }
        }
        // GFLOP/s is flops per ns.
        let flops_per_ns = gpu_gflops.unwrap_or(f64::NAN);
        let mut timer = Timer { system, registry, alone: BTreeMap::new(), communicators: HashMap::new() };
        // First every call alone; then, while calls on the same GPUs overlap, their time together.
        let mut together: HashMap<NodeId, f64> = HashMap::new();
        let mut unshared: std::collections::HashSet<NodeId> = std::collections::HashSet::new();
        let mut rounds = 0;
        let schedule = loop {
            rounds += 1;
            let mut failed = None;
            let schedule = self.schedule(|node, _| {
                if let Some(&ns) = together.get(&node.id) {
                    return ns;
                }
                match &node.kind {
                    NodeKind::Compute { work: Work::DurationNs(ns), .. } => *ns,
                    NodeKind::Compute { work: Work::Flops(flops), .. } => flops / flops_per_ns,
                    kind => match timer.alone(self, node, kind) {
                        Ok(ns) => ns,
                        Err(error) => {
                            failed.get_or_insert(error);
                            0.0
                        }
                    },
                }
            });
            if let Some(error) = failed {
                return Err(error);
            }
            let schedule = schedule?;
            // What overlaps in this schedule, and the times of what overlaps together: a call that no
            // longer overlaps is back to its time alone.
            let mut shared: HashMap<NodeId, f64> = HashMap::new();
            unshared.clear();
            for overlap in self.overlaps(&schedule) {
                match timer.together(self, &overlap, &schedule)? {
                    Some(times) => shared.extend(times),
                    None => unshared.extend(overlap.iter().map(|&i| self.nodes()[i].id)),
                }
            }
            let same = |a: &HashMap<NodeId, f64>, b: &HashMap<NodeId, f64>| {
                a.len() == b.len()
                    && a.iter().all(|(id, &ns)| b.get(id).is_some_and(|&o| (o - ns).abs() <= 1e-9 * ns.max(1.0)))
            };
            if same(&shared, &together) || rounds == MAX_ROUNDS {
                break schedule;
            }
            together = shared;
        };
        let nodes = (self.nodes().iter().zip(schedule.nodes()))
            .filter(|(node, _)| !matches!(node.kind, NodeKind::Recv(_)))
            .map(|(node, timed)| {
                let (kind, ranks) = match &node.kind {
                    NodeKind::Compute { ranks, .. } => ("compute".to_owned(), ranks.members(self.ranks()).len()),
                    NodeKind::Collective { collective, ranks, .. } => {
                        (collective.to_string(), ranks.members(self.ranks()).len())
                    }
                    NodeKind::Send(_) | NodeKind::Recv(_) => ("send".to_owned(), 2),
                };
                let key = timer.key(self, &node.kind);
                let alone = key.and_then(|key| timer.alone.get(&key));
                NodeRun {
                    id: node.id,
                    name: node.name.clone(),
                    kind,
                    ranks,
                    start_ns: timed.start_ns,
                    end_ns: timed.end_ns,
                    alone_ns: alone.map(|(ns, _)| *ns),
                    algorithm: alone.map(|(_, algorithm)| algorithm.clone()),
                    unshared: unshared.contains(&node.id),
                }
            })
            .collect();
        Ok(Step { step_ns: schedule.step_ns(), nodes, rounds })
    }

    /// Refuses calls on one communicator from different streams with no order between them.
    fn check_stream_orders(&self) -> Result<(), StepError> {
        let nodes = self.nodes();
        let index: HashMap<NodeId, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
        // Per node, every node it waits for, directly or not (the workload is acyclic: a checked one).
        let mut before: Vec<Option<std::collections::BTreeSet<usize>>> = vec![None; nodes.len()];
        fn ancestors(
            i: usize,
            nodes: &[Node],
            index: &HashMap<NodeId, usize>,
            memo: &mut [Option<std::collections::BTreeSet<usize>>],
        ) -> std::collections::BTreeSet<usize> {
            if let Some(known) = &memo[i] {
                return known.clone();
            }
            let mut all = std::collections::BTreeSet::new();
            for dep in nodes[i].deps().filter_map(|id| index.get(&id).copied()) {
                all.insert(dep);
                all.extend(ancestors(dep, nodes, index, memo));
            }
            memo[i] = Some(all.clone());
            all
        }
        let mut by_communicator: BTreeMap<(&Ranks, u32), Vec<(usize, u32)>> = BTreeMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if let NodeKind::Collective { ranks, comm, stream, .. } = &node.kind {
                by_communicator.entry((ranks, *comm)).or_default().push((i, *stream));
            }
        }
        for ((members, _), calls) in by_communicator {
            for (k, &(a, stream_a)) in calls.iter().enumerate() {
                for &(b, stream_b) in &calls[k + 1..] {
                    if stream_a == stream_b {
                        continue;
                    }
                    let ordered = ancestors(b, nodes, &index, &mut before).contains(&a)
                        || ancestors(a, nodes, &index, &mut before).contains(&b);
                    if !ordered {
                        return Err(StepError::UnorderedStreams {
                            first: nodes[a].name.clone(),
                            second: nodes[b].name.clone(),
                            members: describe_members(members, self.ranks()),
                            streams: (stream_a, stream_b),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// The groups of collective calls (node indices) on the same members whose times in `schedule`
    /// overlap, two or more to a group.
    fn overlaps(&self, schedule: &super::Schedule) -> Vec<Overlap> {
        let mut by_members: BTreeMap<&Ranks, Vec<usize>> = BTreeMap::new();
        for (i, node) in self.nodes().iter().enumerate() {
            if let NodeKind::Collective { ranks, .. } = &node.kind {
                by_members.entry(ranks).or_default().push(i);
            }
        }
        let mut groups = Vec::new();
        for (_, mut calls) in by_members {
            let times = schedule.nodes();
            calls.sort_by(|&a, &b| times[a].start_ns.total_cmp(&times[b].start_ns).then(a.cmp(&b)));
            let mut group: Overlap = Vec::new();
            let mut until = f64::NEG_INFINITY;
            for i in calls {
                if times[i].start_ns >= until && group.len() > 1 {
                    groups.push(std::mem::take(&mut group));
                } else if times[i].start_ns >= until {
                    group.clear();
                }
                group.push(i);
                until = until.max(times[i].end_ns);
            }
            if group.len() > 1 {
                groups.push(group);
            }
        }
        groups
    }
}

/// The members of a communicator in a message: `all 64 ranks`, or the list.
fn describe_members(members: &Ranks, ranks: u32) -> String {
    match members {
        Ranks::All => format!("all {ranks} ranks"),
        Ranks::List(list) => format!("ranks {list:?}"),
    }
}

/// Times calls on the simulator, each shape of call once alone.
struct Timer<'s> {
    system: &'s System,
    registry: &'s Registry,
    /// Per call, its time alone and its algorithm.
    alone: BTreeMap<CallKey, (f64, String)>,
    /// Per communicator shape (members, members per node), its communicator on its system.
    communicators: HashMap<(usize, usize), Communicator>,
}

impl Timer<'_> {
    /// What a call is: its collective, bytes and communicator shape (`None` for compute).
    fn key(&self, workload: &Workload, kind: &NodeKind) -> Option<CallKey> {
        let (collective, bytes, members) = match kind {
            NodeKind::Compute { .. } => return None,
            NodeKind::Collective { collective, bytes, ranks, .. } => {
                (*collective, *bytes, ranks.members(workload.ranks()))
            }
            NodeKind::Send(t) | NodeKind::Recv(t) => (Collective::SendRecv, t.bytes, vec![t.from, t.to]),
        };
        // Members spread evenly over nodes keep their nodes; otherwise they count as one node.
        let per_node = self.system.sips_per_node().max(1);
        let mut on_node: BTreeMap<u32, usize> = BTreeMap::new();
        for &rank in &members {
            *on_node.entry(rank / per_node as u32).or_default() += 1;
        }
        let even = on_node.values().all(|&n| n == on_node.values().next().copied().unwrap_or(0));
        let per_node = if even { on_node.values().next().copied().unwrap_or(1) } else { members.len() };
        Some(CallKey { collective, bytes, members: members.len(), per_node })
    }

    /// The communicator of a call of `key`'s shape, made on first use.
    fn communicator(&mut self, key: CallKey, node: &Node) -> Result<&mut Communicator, StepError> {
        let shape = (key.members, key.per_node);
        if !self.communicators.contains_key(&shape) {
            let mut spec = self.system.spec().clone();
            spec.sips = key.members;
            if let Some(nodes) = &mut spec.nodes {
                // A node of the communicator holds its members there, with as many of the node's
                // NICs (one per GPU at most).
                nodes.sips_per_node = key.per_node;
                nodes.nics_per_node = nodes.nics_per_node.map(|nics| nics.min(key.per_node));
            }
            let system = System::from_spec(spec).map_err(|e| StepError::NoSystem {
                id: node.id,
                name: node.name.clone(),
                members: key.members,
                system: self.system.describe(),
                why: e.to_string(),
            })?;
            let comm = Communicator::with_registry(system, self.registry.clone()).timing_only(true);
            self.communicators.insert(shape, comm);
        }
        Ok(self.communicators.get_mut(&shape).expect("made above"))
    }

    /// A call's time alone, simulated once per shape of call.
    fn alone(&mut self, workload: &Workload, node: &Node, kind: &NodeKind) -> Result<f64, StepError> {
        let key = self.key(workload, kind).expect("a call");
        if let Some((ns, _)) = self.alone.get(&key) {
            return Ok(*ns);
        }
        let call_error = |source| StepError::Call { id: node.id, name: node.name.clone(), source: Box::new(source) };
        let comm = self.communicator(key, node)?;
        let tensor = tensor(comm.system(), key).map_err(call_error)?;
        let report = if key.collective == Collective::SendRecv {
            let elements = (key.bytes / 4).max(1) as usize;
            let transfer = kernbench_core::Transfer { from: 0, to: 1, count: elements };
            comm.send_recv(&tensor, &[transfer]).map(|(_, report)| report)
        } else {
            let call = TogetherCall::new(key.collective, &tensor, ReduceOp::Sum);
            comm.call_together(&[call]).map(|mut runs| runs.remove(0).1)
        };
        let report = report.map_err(call_error)?;
        let ns = report.run.completion_ns().unwrap_or(0.0);
        self.alone.insert(key, (ns, report.algorithm));
        Ok(ns)
    }

    /// The times of the calls of `overlap` run together from their starts in `schedule`, or `None` when
    /// they cannot run together (plans that share a direction, a one-sided kernel): each is then as
    /// if alone.
    fn together(
        &mut self,
        workload: &Workload,
        overlap: &Overlap,
        schedule: &super::Schedule,
    ) -> Result<Option<Vec<(NodeId, f64)>>, StepError> {
        let nodes = workload.nodes();
        let first = overlap.iter().map(|&i| schedule.nodes()[i].start_ns).fold(f64::INFINITY, f64::min);
        let keys: Vec<CallKey> = overlap.iter().map(|&i| self.key(workload, &nodes[i].kind).expect("a call")).collect();
        let lead = &nodes[overlap[0]];
        let comm = self.communicator(keys[0], lead)?;
        let system = comm.system().clone();
        let call_error = |source| StepError::Call { id: lead.id, name: lead.name.clone(), source: Box::new(source) };
        let tensors: Vec<_> =
            keys.iter().map(|&key| tensor(&system, key)).collect::<Result<_, _>>().map_err(call_error)?;
        let calls: Vec<TogetherCall<'_>> = (overlap.iter().zip(&keys).zip(&tensors))
            .map(|((&i, key), tensor)| TogetherCall {
                start_ns: schedule.nodes()[i].start_ns - first,
                ..TogetherCall::new(key.collective, tensor, ReduceOp::Sum)
            })
            .collect();
        match comm.call_together(&calls) {
            Ok(runs) => Ok(Some(
                (overlap.iter().zip(&calls).zip(runs))
                    .map(|((&i, call), (_, report))| {
                        (nodes[i].id, report.run.completion_ns().unwrap_or(0.0) - call.start_ns)
                    })
                    .collect(),
            )),
            Err(CommError::Together { .. }) => Ok(None),
            // A one-sided kernel: calls run together would share its symmetric heap.
            Err(CommError::Run(error)) if matches!(error.kernel(), Some(KernelError::Unsupported { .. })) => Ok(None),
            Err(source) => Err(call_error(source)),
        }
    }
}

/// A tensor without data for a call of `key` on `system`: its bytes a rank, f32.
fn tensor(system: &System, key: CallKey) -> Result<kernbench_core::DistTensor, CommError> {
    kernbench_core::samples::tensor_without_data(system, key.bytes, Dtype::F32, DpPolicy::LEADER)
        .map_err(|e| CommError::Inputs { collective: key.collective, reason: e.to_string() })
}

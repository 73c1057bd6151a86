//! Workloads: the graph of compute phases and communication calls of a training step, checked when it
//! is built, read from its plain JSON form ([`json`]) or from Chakra execution traces ([`chakra`]), and
//! laid out in time by [`Workload::schedule`] with durations a caller supplies. Uses
//! [`Collective`] and the [`size`](crate::size) parser; nothing here runs a collective.
//!
//! A node of the graph runs on a set of ranks: a compute phase on each of its ranks, a collective on its
//! communicator's members, a send on its sender and a receive on its receiver. Nodes wait for their
//! dependencies; see [`Workload::schedule`] for what else they wait for.
//!
//! ```text
//!  backward 0 ─┬─ backward 1 ─┬─ backward 2 ...      compute, on every rank
//!              │              │
//!           bucket 0       bucket 1        ...      all-reduces, one stream, in issue order
//! ```
//!
//! # Examples
//! ```
//! use kernbench::workload::Workload;
//! let step = Workload::from_json_str(r#"{"ranks": 8, "nodes": [
//!     {"id": 0, "name": "backward", "compute": {"duration_us": 500}},
//!     {"id": 1, "name": "gradients", "all_reduce": {"bytes": "25M"}, "deps": [0]}
//! ]}"#)?;
//! // The all-reduce takes 200 us whatever its start.
//! let schedule = step.schedule(|node, _start_ns| node.fixed_duration_ns().unwrap_or(200_000.0))?;
//! assert_eq!(schedule.step_ns(), 700_000.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod chakra;
pub mod json;
mod schedule;
mod step;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};

use kernbench_core::{Collective, Quoted, decoder_message};

pub use chakra::ChakraError;
pub use schedule::{Schedule, ScheduleError, Timed};
pub use step::{MAX_ROUNDS, NodeRun, Step, StepError};

/// A node's id: unique in its workload.
pub type NodeId = u64;

/// The most ranks a workload may have: far beyond any machine simulated, and low enough that what
/// grows with the ranks (a schedule's per-GPU clocks, one Chakra trace per rank) stays small.
pub const MAX_RANKS: u32 = 1 << 20;

/// A set of ranks: all the workload's, or some of them. A checked [`Workload`] writes each set one way:
/// a list sorted, without repeats, and never of every rank (that is `All`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ranks {
    /// Every rank of the workload.
    #[default]
    All,
    /// These ranks, in increasing order.
    List(Vec<u32>),
}

impl Ranks {
    /// The members, in increasing order, in a workload of `ranks` ranks.
    pub fn members(&self, ranks: u32) -> Vec<u32> {
        match self {
            Ranks::All => (0..ranks).collect(),
            Ranks::List(list) => list.clone(),
        }
    }

    /// Whether `rank` is a member.
    pub fn contains(&self, rank: u32) -> bool {
        match self {
            Ranks::All => true,
            Ranks::List(list) => list.binary_search(&rank).is_ok(),
        }
    }

    /// The same set written one way only: sorted, without repeats, and `All` when it holds every rank,
    /// so that two equal sets compare equal.
    fn normalized(self, ranks: u32) -> Ranks {
        match self {
            Ranks::All => Ranks::All,
            Ranks::List(mut list) => {
                list.sort_unstable();
                list.dedup();
                if list.len() == ranks as usize && list.iter().zip(0..).all(|(&member, rank)| member == rank) {
                    Ranks::All
                } else {
                    Ranks::List(list)
                }
            }
        }
    }
}

/// How long a compute phase runs: a duration, or work that the caller turns into one at the GPU's rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Work {
    /// This many nanoseconds.
    DurationNs(f64),
    /// This many floating-point operations.
    Flops(f64),
}

/// A point-to-point transfer's ends, as a send and its receive both give them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PointToPoint {
    /// The sending rank.
    pub from: u32,
    /// The receiving rank.
    pub to: u32,
    /// The bytes sent.
    pub bytes: u64,
    /// Tells apart transfers between the same two ranks; a send matches the receive with its ends and tag.
    pub tag: u32,
}

/// What a node does.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    /// A compute phase that each of `ranks` runs on its own GPU.
    Compute {
        /// The ranks that run it.
        ranks: Ranks,
        /// How long it runs.
        work: Work,
    },
    /// A collective call over a communicator.
    Collective {
        /// Which collective.
        collective: Collective,
        /// The bytes each rank contributes, as nccl-tests counts them.
        bytes: u64,
        /// The communicator's members.
        ranks: Ranks,
        /// Which communicator of these members (0 unless several): calls of different communicators
        /// may be in flight together, as NCCL's users make one communicator per stream for that.
        comm: u32,
        /// The stream it is issued on: calls on one communicator and stream run one after another,
        /// and calls on one communicator from different streams must be ordered by dependencies.
        stream: u32,
    },
    /// The sending half of a point-to-point transfer.
    Send(PointToPoint),
    /// The receiving half of a point-to-point transfer.
    Recv(PointToPoint),
}

/// A node of a workload: a compute phase or a communication call, and what it waits for.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Its id, unique in the workload.
    pub id: NodeId,
    /// A name for reports and errors.
    pub name: String,
    /// What it does.
    pub kind: NodeKind,
    /// Nodes whose output it reads.
    pub data_deps: Vec<NodeId>,
    /// Nodes that must finish first for another reason (ordering, memory).
    pub ctrl_deps: Vec<NodeId>,
}

impl Node {
    /// Every node it waits for: its data dependencies, then its control dependencies.
    pub fn deps(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.data_deps.iter().chain(&self.ctrl_deps).copied()
    }

    /// Its duration when the node gives one (a compute phase with a duration), in nanoseconds.
    pub fn fixed_duration_ns(&self) -> Option<f64> {
        match self.kind {
            NodeKind::Compute { work: Work::DurationNs(ns), .. } => Some(ns),
            _ => None,
        }
    }

    fn label(&self) -> NodeLabel {
        NodeLabel { id: self.id, name: self.name.clone() }
    }
}

/// A node as errors name it: its id and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLabel {
    /// The node's id.
    pub id: NodeId,
    /// The node's name.
    pub name: String,
}

impl fmt::Display for NodeLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {} `{}`", self.id, Quoted(&self.name))
    }
}

/// A graph that is not a workload. Every variant names the node at fault; all are the file's fault.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// The workload has no ranks.
    #[error("a workload needs at least 1 rank, not 0")]
    NoRanks,
    /// The workload has more than [`MAX_RANKS`] ranks.
    #[error("a workload may have at most {max} ranks, not {ranks}")]
    TooManyRanks {
        /// The number given.
        ranks: u32,
        /// [`MAX_RANKS`].
        max: u32,
    },
    /// Two nodes have one id.
    #[error("two nodes have the id {id}: `{}` and `{}`; ids must be unique", Quoted(first), Quoted(second))]
    DuplicateId {
        /// The id.
        id: NodeId,
        /// The first node's name.
        first: String,
        /// The second node's name.
        second: String,
    },
    /// A node waits for an id that no node has.
    #[error("{node} depends on node {dependency}, which does not exist")]
    UnknownDependency {
        /// The node that waits.
        node: NodeLabel,
        /// The id it names.
        dependency: NodeId,
    },
    /// The nodes wait for each other in a circle, so none of them can start (a receive that waits for
    /// its own send is one). The message names the first few.
    #[error("these nodes wait for each other, so none can start: {}", cycle_text(nodes))]
    Cycle {
        /// The nodes on the circle, each waiting for the next (and the last for the first).
        nodes: Vec<NodeLabel>,
    },
    /// A node names a rank the workload does not have.
    #[error("{node} names rank {rank}, but the workload has ranks 0..{ranks}")]
    RankOutOfRange {
        /// The node.
        node: NodeLabel,
        /// The rank it names.
        rank: u32,
        /// The workload's number of ranks.
        ranks: u32,
    },
    /// A node names a list of ranks with none in it.
    #[error("{node} names an empty list of ranks; give at least one, or `all`")]
    NoMembers {
        /// The node.
        node: NodeLabel,
    },
    /// A compute node gives neither a duration nor flops.
    #[error("compute {node} gives no duration and no flops; give exactly one")]
    NoComputeTime {
        /// The node.
        node: NodeLabel,
    },
    /// A compute node gives both a duration and flops.
    #[error("compute {node} gives both a duration and flops; give exactly one")]
    TwoComputeTimes {
        /// The node.
        node: NodeLabel,
    },
    /// A compute node's duration or flops is negative, infinite or not a number.
    #[error("compute {node} has {what} {value}; expected a finite number, at least 0")]
    BadComputeTime {
        /// The node.
        node: NodeLabel,
        /// `duration` or `flops`.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// A send or receive whose two ends are one rank.
    #[error("{node} sends from rank {rank} to itself; a transfer needs two ranks")]
    SendToSelf {
        /// The node.
        node: NodeLabel,
        /// The rank.
        rank: u32,
    },
    /// A send without a receive with its ends and tag (the k-th send of two ranks and a tag, by id,
    /// matches the k-th receive).
    #[error(
        "{node} sends from rank {from} to rank {to} with tag {tag}, but no receive with these ends and tag is left to match it"
    )]
    UnmatchedSend {
        /// The send.
        node: NodeLabel,
        /// The sender.
        from: u32,
        /// The receiver.
        to: u32,
        /// The tag.
        tag: u32,
    },
    /// A receive without a send with its ends and tag.
    #[error(
        "{node} receives on rank {to} from rank {from} with tag {tag}, but no send with these ends and tag is left to match it"
    )]
    UnmatchedRecv {
        /// The receive.
        node: NodeLabel,
        /// The sender.
        from: u32,
        /// The receiver.
        to: u32,
        /// The tag.
        tag: u32,
    },
    /// A send and the receive it matches give different sizes.
    #[error("{send} sends {send_bytes} bytes but {recv}, its receive, expects {recv_bytes}")]
    TransferSizeMismatch {
        /// The send.
        send: NodeLabel,
        /// Its size.
        send_bytes: u64,
        /// The receive.
        recv: NodeLabel,
        /// Its size.
        recv_bytes: u64,
    },
}

/// The most nodes of a cycle an error names, so that the message stays one short line.
const MAX_CYCLE_SHOWN: usize = 6;

fn cycle_text(nodes: &[NodeLabel]) -> String {
    let mut text: Vec<String> = nodes.iter().take(MAX_CYCLE_SHOWN).map(ToString::to_string).collect();
    match nodes.first() {
        Some(first) if nodes.len() <= MAX_CYCLE_SHOWN => text.push(first.to_string()),
        _ => text.push(format!("... ({} more nodes, back to the first)", nodes.len() - MAX_CYCLE_SHOWN)),
    }
    text.join(" waits for ")
}

/// What the scheduler takes as one step: a node, or a send and its receive, which start and end together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Node(usize),
    Transfer { send: usize, recv: usize },
}

impl Unit {
    fn nodes(self) -> impl Iterator<Item = usize> {
        let (first, second) = match self {
            Unit::Node(index) => (index, None),
            Unit::Transfer { send, recv } => (send, Some(recv)),
        };
        std::iter::once(first).chain(second)
    }
}

/// A checked workload: ranks and nodes (sorted by id), every dependency known, no cycle, every rank in
/// range, every send matched by a receive.
///
/// # Examples
/// ```
/// use kernbench::Collective;
/// use kernbench::workload::{Node, NodeKind, Ranks, Work, Workload, WorkloadError};
/// let node = |id, kind, deps: Vec<u64>| Node { id, name: format!("n{id}"), kind, data_deps: deps, ctrl_deps: vec![] };
/// let compute = NodeKind::Compute { ranks: Ranks::All, work: Work::DurationNs(10.0) };
/// let reduce = NodeKind::Collective { collective: Collective::AllReduce, bytes: 1 << 20, ranks: Ranks::All, comm: 0, stream: 0 };
/// let step = Workload::new(4, vec![node(0, compute.clone(), vec![]), node(1, reduce, vec![0])])?;
/// assert_eq!(step.nodes().len(), 2);
/// let err = Workload::new(4, vec![node(0, compute, vec![7])]).unwrap_err();
/// assert!(matches!(err, WorkloadError::UnknownDependency { dependency: 7, .. }));
/// # Ok::<(), WorkloadError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    ranks: u32,
    nodes: Vec<Node>,
    /// The units in the order they are scheduled: dependencies first, ties by smallest id.
    order: Vec<Unit>,
}

impl Workload {
    /// Checks a graph: see [`WorkloadError`] for what is refused. Rank lists are sorted, their repeats
    /// dropped, and a list of every rank becomes [`Ranks::All`]; nodes are sorted by id.
    ///
    /// # Errors
    /// The first [`WorkloadError`] found.
    pub fn new(ranks: u32, mut nodes: Vec<Node>) -> Result<Workload, WorkloadError> {
        if ranks == 0 {
            return Err(WorkloadError::NoRanks);
        }
        if ranks > MAX_RANKS {
            return Err(WorkloadError::TooManyRanks { ranks, max: MAX_RANKS });
        }
        nodes.sort_by_key(|node| node.id);
        if let Some(pair) = nodes.windows(2).find(|pair| pair[0].id == pair[1].id) {
            return Err(WorkloadError::DuplicateId {
                id: pair[0].id,
                first: pair[0].name.clone(),
                second: pair[1].name.clone(),
            });
        }
        for node in &mut nodes {
            check_node(ranks, node)?;
        }
        let index: HashMap<NodeId, usize> = nodes.iter().enumerate().map(|(i, node)| (node.id, i)).collect();
        for node in &nodes {
            if let Some(dependency) = node.deps().find(|dep| !index.contains_key(dep)) {
                return Err(WorkloadError::UnknownDependency { node: node.label(), dependency });
            }
        }
        let units = match_transfers(&nodes)?;
        let order = dependency_order(&nodes, &index, units)?;
        Ok(Workload { ranks, nodes, order })
    }

    /// The number of ranks (GPUs), numbered from 0.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// The nodes, sorted by id.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node with this id.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.binary_search_by_key(&id, |node| node.id).ok().map(|index| &self.nodes[index])
    }

    /// Reads a workload from a file: plain JSON (`.json`, or any file that starts with `{`), or Chakra
    /// execution traces, one per rank, named `NAME.RANK.et`: given one of them, their prefix
    /// (`dir/NAME`) or a directory that holds one such set.
    ///
    /// # Errors
    /// [`LoadError`]: the file cannot be read, is neither form, or is not a valid workload.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Workload, LoadError> {
        let path = path.as_ref();
        if path.is_dir() {
            return chakra::read_dir(path);
        }
        if path.extension().is_some_and(|ext| ext == "json") {
            return json::read_file(path);
        }
        if let Some(prefix) = chakra::prefix_of_trace(path) {
            return chakra::read_prefix(&prefix);
        }
        if chakra::trace_path(path, 0).is_file() {
            return chakra::read_prefix(path);
        }
        if path.is_file() {
            return json::read_file(path);
        }
        Err(LoadError::NotFound { path: path.to_owned() })
    }
}

/// Checks one node alone and writes its rank sets one way.
fn check_node(ranks: u32, node: &mut Node) -> Result<(), WorkloadError> {
    let label = node.label();
    let in_range = |rank: u32| {
        if rank < ranks { Ok(()) } else { Err(WorkloadError::RankOutOfRange { node: label.clone(), rank, ranks }) }
    };
    match &mut node.kind {
        NodeKind::Compute { ranks: members, work } => {
            check_members(ranks, members, &label)?;
            let (what, value) = match *work {
                Work::DurationNs(ns) => ("duration", ns),
                Work::Flops(flops) => ("flops", flops),
            };
            if !(value.is_finite() && value >= 0.0) {
                return Err(WorkloadError::BadComputeTime { node: label, what, value });
            }
        }
        NodeKind::Collective { ranks: members, .. } => check_members(ranks, members, &label)?,
        NodeKind::Send(transfer) | NodeKind::Recv(transfer) => {
            in_range(transfer.from)?;
            in_range(transfer.to)?;
            if transfer.from == transfer.to {
                return Err(WorkloadError::SendToSelf { node: label, rank: transfer.from });
            }
        }
    }
    Ok(())
}

fn check_members(ranks: u32, members: &mut Ranks, label: &NodeLabel) -> Result<(), WorkloadError> {
    if let Ranks::List(list) = members {
        if list.is_empty() {
            return Err(WorkloadError::NoMembers { node: label.clone() });
        }
        if let Some(&rank) = list.iter().find(|&&rank| rank >= ranks) {
            return Err(WorkloadError::RankOutOfRange { node: label.clone(), rank, ranks });
        }
    }
    *members = std::mem::take(members).normalized(ranks);
    Ok(())
}

/// Pairs each send with its receive: the k-th send (by id) of two ranks and a tag with the k-th receive.
/// Returns every node as a unit, a send and its receive as one.
fn match_transfers(nodes: &[Node]) -> Result<Vec<Unit>, WorkloadError> {
    let mut sends: BTreeMap<(u32, u32, u32), VecDeque<usize>> = BTreeMap::new();
    let mut recvs: BTreeMap<(u32, u32, u32), VecDeque<usize>> = BTreeMap::new();
    let mut units = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        match node.kind {
            NodeKind::Send(t) => sends.entry((t.from, t.to, t.tag)).or_default().push_back(index),
            NodeKind::Recv(t) => recvs.entry((t.from, t.to, t.tag)).or_default().push_back(index),
            _ => units.push(Unit::Node(index)),
        }
    }
    for (&(from, to, tag), queue) in &mut sends {
        let mut matching = recvs.remove(&(from, to, tag)).unwrap_or_default();
        for send in queue.drain(..) {
            let Some(recv) = matching.pop_front() else {
                return Err(WorkloadError::UnmatchedSend { node: nodes[send].label(), from, to, tag });
            };
            let (send_bytes, recv_bytes) = (transfer_bytes(&nodes[send]), transfer_bytes(&nodes[recv]));
            if send_bytes != recv_bytes {
                return Err(WorkloadError::TransferSizeMismatch {
                    send: nodes[send].label(),
                    send_bytes,
                    recv: nodes[recv].label(),
                    recv_bytes,
                });
            }
            units.push(Unit::Transfer { send, recv });
        }
        if let Some(&recv) = matching.front() {
            return Err(WorkloadError::UnmatchedRecv { node: nodes[recv].label(), from, to, tag });
        }
    }
    if let Some((&(from, to, tag), queue)) = recvs.iter().find(|(_, queue)| !queue.is_empty()) {
        return Err(WorkloadError::UnmatchedRecv { node: nodes[queue[0]].label(), from, to, tag });
    }
    Ok(units)
}

fn transfer_bytes(node: &Node) -> u64 {
    match node.kind {
        NodeKind::Send(t) | NodeKind::Recv(t) => t.bytes,
        _ => 0,
    }
}

/// Orders the units so that each comes after every unit it depends on, choosing among the ready ones
/// the one with the smallest id, so that the order, and the schedule, never depend on a hash.
fn dependency_order(
    nodes: &[Node],
    index: &HashMap<NodeId, usize>,
    units: Vec<Unit>,
) -> Result<Vec<Unit>, WorkloadError> {
    let mut unit_of = vec![0; nodes.len()];
    for (u, unit) in units.iter().enumerate() {
        for node in unit.nodes() {
            unit_of[node] = u;
        }
    }
    let mut waiting = vec![0usize; units.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); units.len()];
    for (u, unit) in units.iter().enumerate() {
        let mut deps: Vec<usize> =
            unit.nodes().flat_map(|node| nodes[node].deps()).map(|id| unit_of[index[&id]]).collect();
        deps.sort_unstable();
        deps.dedup();
        waiting[u] = deps.len();
        for dep in deps {
            dependents[dep].push(u);
        }
    }
    let first_id = |u: usize| units[u].nodes().map(|node| nodes[node].id).min().unwrap_or(0);
    let mut ready: BinaryHeap<Reverse<(NodeId, usize)>> =
        (0..units.len()).filter(|&u| waiting[u] == 0).map(|u| Reverse((first_id(u), u))).collect();
    let mut order = Vec::with_capacity(units.len());
    while let Some(Reverse((_, u))) = ready.pop() {
        order.push(units[u]);
        for &next in &dependents[u] {
            waiting[next] -= 1;
            if waiting[next] == 0 {
                ready.push(Reverse((first_id(next), next)));
            }
        }
    }
    if order.len() < units.len() {
        let stuck: Vec<bool> = (0..nodes.len()).map(|node| waiting[unit_of[node]] > 0).collect();
        return Err(WorkloadError::Cycle { nodes: find_cycle(nodes, index, &units, &unit_of, &stuck) });
    }
    Ok(order)
}

/// A circle among the stuck nodes. Every stuck unit waits for another stuck unit, so walking from a
/// stuck node to a stuck dependency (or, for a transfer's half without one, to its other half, which
/// has one) never ends, and must come back to a node it passed.
fn find_cycle(
    nodes: &[Node],
    index: &HashMap<NodeId, usize>,
    units: &[Unit],
    unit_of: &[usize],
    stuck: &[bool],
) -> Vec<NodeLabel> {
    let partner = |node: usize| match units[unit_of[node]] {
        Unit::Transfer { send, recv } => Some(if node == send { recv } else { send }),
        Unit::Node(_) => None,
    };
    let Some(mut at) = (0..nodes.len()).find(|&node| stuck[node]) else { return Vec::new() };
    let mut path: Vec<usize> = Vec::new();
    let mut seen_at = vec![None; nodes.len()];
    while seen_at[at].is_none() {
        seen_at[at] = Some(path.len());
        path.push(at);
        let dependency = nodes[at].deps().map(|id| index[&id]).filter(|&dep| stuck[dep]).min();
        match dependency.or_else(|| partner(at)) {
            Some(next) => at = next,
            None => return path.iter().map(|&node| nodes[node].label()).collect(),
        }
    }
    let start = seen_at[at].unwrap_or(0);
    path[start..].iter().map(|&node| nodes[node].label()).collect()
}

/// A workload file or text that could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The path names no file, directory or trace prefix.
    #[error("{}: no such workload file, directory or `NAME.RANK.et` prefix", path.display())]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// The operating system could not read a file.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The text is not the plain JSON form (the decoder's message, shortened to one line, says what
    /// and where).
    #[error("{origin} is not a workload in kernbench's JSON form: {}", decoder_message(&source.to_string()))]
    Json {
        /// The file, or `the text` for a string.
        origin: String,
        /// What is wrong and where.
        source: serde_json::Error,
    },
    /// The Chakra traces cannot be read, or describe what kernbench does not model.
    #[error(transparent)]
    Chakra(#[from] ChakraError),
    /// The graph read is not a valid workload.
    #[error("{origin}: {source}")]
    Invalid {
        /// The file, or `the text` for a string.
        origin: String,
        /// What is wrong.
        source: WorkloadError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compute(id: NodeId, deps: &[NodeId]) -> Node {
        let kind = NodeKind::Compute { ranks: Ranks::All, work: Work::DurationNs(1.0) };
        Node { id, name: format!("n{id}"), kind, data_deps: deps.to_vec(), ctrl_deps: vec![] }
    }

    #[test]
    fn ties_in_the_dependency_order_go_to_the_smaller_id() {
        let step = Workload::new(1, vec![compute(5, &[]), compute(3, &[5]), compute(4, &[])]).unwrap();
        let order: Vec<NodeId> =
            step.order.iter().flat_map(|unit| unit.nodes()).map(|index| step.nodes[index].id).collect();
        assert_eq!(order, [4, 5, 3]);
    }

    #[test]
    fn a_node_that_waits_for_itself_is_a_cycle_of_one() {
        let err = Workload::new(1, vec![compute(0, &[]), compute(1, &[1])]).unwrap_err();
        assert!(matches!(&err, WorkloadError::Cycle { nodes } if nodes.len() == 1 && nodes[0].id == 1), "{err}");
    }

    #[test]
    fn a_rank_list_of_every_rank_is_all() {
        assert_eq!(Ranks::List(vec![2, 0, 1, 1]).normalized(3), Ranks::All);
        assert_eq!(Ranks::List(vec![2, 0, 2]).normalized(4), Ranks::List(vec![0, 2]));
    }
}

//! Chakra execution traces, the files ASTRA-sim's users exchange, read into a workload and written from
//! one. Uses the graph of `workload`.
//!
//! A trace is one rank's part of the step, in a file `NAME.RANK.et`: a stream of protobuf messages,
//! each after its length as a varint (protobuf's delimited form), first a `GlobalMetadata`, then
//! `Node`s, of Chakra's schema (`et_def.proto`, package `ChakraProtoMsg`). The messages below mirror the
//! fields kernbench reads and writes; protobuf skips the others.
//!
//! A node of the workload is written into the trace of every rank it runs on, under its own id, so the
//! reader takes the nodes with one id in several traces for one node: a compute phase run by each of
//! those ranks, or a collective whose communicator they are. Traces that number different operations
//! with one id are refused ([`ChakraError::Conflict`]).
//!
//! | Chakra node | attributes read | workload node |
//! | --- | --- | --- |
//! | `COMP_NODE` | `duration_micros` (the field) or else `num_ops` | compute, on the ranks whose traces hold it |
//! | `COMM_COLL_NODE` | `comm_type`, `comm_size`, `kernbench_comm` and `kernbench_stream` (0 when absent) | collective, members as for compute |
//! | `COMM_SEND_NODE` | `comm_dst`, `comm_size`, `comm_tag` (0 when absent) | send from the trace's rank |
//! | `COMM_RECV_NODE` | `comm_src`, `comm_size`, `comm_tag` | receive on the trace's rank |
//! | `METADATA_NODE` | | none: nodes that wait for it wait for what it waits for |
//!
//! Other node types are refused, as are the collectives kernbench lacks (`GATHER`, `SCATTER`,
//! `REDUCE_SCATTER_BLOCK`, `BARRIER`). `kernbench_stream` is kernbench's own attribute; other readers
//! ignore it, as they may the stream.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kernbench_core::{Collective, Quoted, read_bounded};
use prost::Message;

use super::{LoadError, Node, NodeId, NodeKind, PointToPoint, Ranks, Work, Workload};

/// Chakra's `GlobalMetadata`: the first message of a trace.
#[derive(Clone, PartialEq, Message)]
struct GlobalMetadata {
    #[prost(string, tag = "1")]
    version: String,
    #[prost(message, repeated, tag = "2")]
    attr: Vec<Attribute>,
}

/// Chakra's `Node`, the fields kernbench uses.
#[derive(Clone, PartialEq, Message)]
struct ChakraNode {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(string, tag = "2")]
    name: String,
    /// A `NodeType`.
    #[prost(int32, tag = "3")]
    node_type: i32,
    #[prost(uint64, repeated, tag = "4")]
    ctrl_deps: Vec<u64>,
    #[prost(uint64, repeated, tag = "5")]
    data_deps: Vec<u64>,
    #[prost(uint64, tag = "7")]
    duration_micros: u64,
    #[prost(message, repeated, tag = "10")]
    attr: Vec<Attribute>,
}

/// Chakra's `AttributeProto`, with the scalar values kernbench reads and writes.
#[derive(Clone, PartialEq, Message)]
struct Attribute {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(oneof = "AttributeValue", tags = "7, 9, 11, 13, 17, 27, 29")]
    value: Option<AttributeValue>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum AttributeValue {
    #[prost(int32, tag = "7")]
    Int32(i32),
    #[prost(int64, tag = "9")]
    Int64(i64),
    #[prost(uint32, tag = "11")]
    Uint32(u32),
    #[prost(uint64, tag = "13")]
    Uint64(u64),
    #[prost(sint64, tag = "17")]
    Sint64(i64),
    #[prost(bool, tag = "27")]
    Bool(bool),
    #[prost(string, tag = "29")]
    String(String),
}

/// The `NodeType`s, by number.
const NODE_TYPES: [&str; 11] = [
    "INVALID_NODE",
    "METADATA_NODE",
    "MEM_LOAD_NODE",
    "MEM_STORE_NODE",
    "COMP_NODE",
    "COMM_SEND_NODE",
    "COMM_RECV_NODE",
    "COMM_COLL_NODE",
    "STORAGE_NODE",
    "BATCH_NODE",
    "CHECKPOINT_NODE",
];
const METADATA_NODE: i32 = 1;
const COMP_NODE: i32 = 4;
const COMM_SEND_NODE: i32 = 5;
const COMM_RECV_NODE: i32 = 6;
const COMM_COLL_NODE: i32 = 7;

/// The `CollectiveCommType`s, by number, and kernbench's collective for each it has.
const COLLECTIVE_TYPES: [(&str, Option<Collective>); 10] = [
    ("ALL_REDUCE", Some(Collective::AllReduce)),
    ("REDUCE", Some(Collective::Reduce)),
    ("ALL_GATHER", Some(Collective::AllGather)),
    ("GATHER", None),
    ("SCATTER", None),
    ("BROADCAST", Some(Collective::Broadcast)),
    ("ALL_TO_ALL", Some(Collective::AllToAll)),
    ("REDUCE_SCATTER", Some(Collective::ReduceScatter)),
    ("REDUCE_SCATTER_BLOCK", None),
    ("BARRIER", None),
];

/// The schema version written in `GlobalMetadata`.
const VERSION: &str = "0.0.4";
/// kernbench's attribute for a collective's stream.
const STREAM_ATTRIBUTE: &str = "kernbench_stream";

/// kernbench's attribute for which communicator of its members a collective runs on.
const COMM_ATTRIBUTE: &str = "kernbench_comm";

/// Chakra traces that cannot be read as a workload, or a workload that Chakra cannot hold. Each
/// variant names the trace (its file, or `rank R's trace`) and the node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChakraError {
    /// A message is not protobuf of Chakra's schema (the file is not a trace, or is cut short).
    #[error("{trace}: message {message} (at byte {offset}) is not a Chakra {expected}: {source}")]
    Decode {
        /// The trace.
        trace: String,
        /// The message's number, the metadata being 0.
        message: usize,
        /// Where it starts.
        offset: usize,
        /// `GlobalMetadata` or `Node`.
        expected: &'static str,
        /// What protobuf found wrong.
        source: prost::DecodeError,
    },
    /// A trace is empty: even the `GlobalMetadata` is missing.
    #[error("{trace} is empty; a Chakra trace starts with a GlobalMetadata message")]
    Empty {
        /// The trace.
        trace: String,
    },
    /// Two nodes of one trace have one id.
    #[error("{trace}: two nodes have the id {id}; ids must be unique in a trace")]
    DuplicateId {
        /// The trace.
        trace: String,
        /// The id.
        id: NodeId,
    },
    /// A node type kernbench does not model.
    #[error(
        "{trace}: node {id} `{}` is a {node_type}; kernbench reads COMP_NODE, COMM_COLL_NODE, COMM_SEND_NODE, \
         COMM_RECV_NODE and METADATA_NODE",
        Quoted(name)
    )]
    UnsupportedNodeType {
        /// The trace.
        trace: String,
        /// The node's id.
        id: NodeId,
        /// The node's name.
        name: String,
        /// The type's name (or number, when it is none of Chakra's).
        node_type: String,
    },
    /// A collective kernbench does not have.
    #[error(
        "{trace}: node {id} `{}` is a {comm_type}, which kernbench does not have; it has ALL_REDUCE, REDUCE, \
         ALL_GATHER, BROADCAST, ALL_TO_ALL and REDUCE_SCATTER",
        Quoted(name)
    )]
    UnsupportedCollective {
        /// The trace.
        trace: String,
        /// The node's id.
        id: NodeId,
        /// The node's name.
        name: String,
        /// The `CollectiveCommType`'s name (or number).
        comm_type: String,
    },
    /// An attribute the node needs is missing or not what it should be.
    #[error("{trace}: node {id} `{}`: attribute `{attribute}` {problem}", Quoted(name))]
    Attribute {
        /// The trace.
        trace: String,
        /// The node's id.
        id: NodeId,
        /// The node's name.
        name: String,
        /// The attribute.
        attribute: &'static str,
        /// What is wrong, and what would be valid.
        problem: String,
    },
    /// Two traces give one id to different operations: traces numbered rank by rank, which the
    /// reader cannot match.
    #[error(
        "node {id} is {first_description} in {first} but {second_description} in {second}; the traces must give \
         each operation one id in every rank's trace, and a send or receive an id of its own"
    )]
    Conflict {
        /// The id.
        id: NodeId,
        /// The first trace that has it.
        first: String,
        /// What it is there.
        first_description: String,
        /// The other trace.
        second: String,
        /// What it is there.
        second_description: String,
    },
    /// A directory holds no `NAME.0.et`, or several sets of traces.
    #[error("{}: expected one set of traces NAME.0.et, NAME.1.et, ... in it, found {}", dir.display(), found_text(found))]
    TraceSets {
        /// The directory.
        dir: PathBuf,
        /// The names of the sets found.
        found: Vec<String>,
    },
    /// Writing: a node Chakra cannot hold (a collective without a `CollectiveCommType`, a time that is
    /// not a whole number of microseconds or of operations).
    #[error("node {id} `{}` cannot be written to Chakra: {reason}", Quoted(name))]
    NotRepresentable {
        /// The node's id.
        id: NodeId,
        /// The node's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// Writing: a node waits for a node that runs on none of its ranks, and a rank's trace can only
    /// name its own nodes. (A dependency that runs on some of its ranks is written in their traces
    /// only, and the reader joins the traces' dependencies again.)
    #[error(
        "node {id} `{}` waits for node {dependency}, which runs on none of its ranks; a rank's Chakra trace can only \
         wait for its own nodes",
        Quoted(name)
    )]
    CrossRankDependency {
        /// The node's id.
        id: NodeId,
        /// The node's name.
        name: String,
        /// The dependency's id.
        dependency: NodeId,
    },
    /// Writing: the operating system could not write a trace.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
}

fn found_text(found: &[String]) -> String {
    if found.is_empty() { "none".to_owned() } else { found.join(", ") }
}

impl Workload {
    /// Reads one Chakra trace per rank, rank 0 first, from their bytes (see [`chakra`](self)).
    ///
    /// # Errors
    /// [`LoadError::Chakra`] for traces that cannot be read as a workload, [`LoadError::Invalid`] for a
    /// graph that is not one.
    pub fn from_chakra_bytes(traces: &[Vec<u8>]) -> Result<Workload, LoadError> {
        let labelled: Vec<(String, &[u8])> =
            traces.iter().enumerate().map(|(rank, bytes)| (format!("rank {rank}'s trace"), bytes.as_slice())).collect();
        read_traces(&labelled, "the traces")
    }

    /// The Chakra trace of each rank, rank 0 first: the bytes [`Workload::write_chakra`] writes.
    ///
    /// # Errors
    /// [`ChakraError::NotRepresentable`] for a node that Chakra cannot hold, and
    /// [`ChakraError::CrossRankDependency`] for a node that waits for a node of other ranks only.
    /// Each rank's trace keeps the dependencies that run on that rank.
    pub fn to_chakra(&self) -> Result<Vec<Vec<u8>>, ChakraError> {
        let chakra_nodes = self.nodes.iter().map(to_chakra_node).collect::<Result<Vec<_>, _>>()?;
        for node in &self.nodes {
            let shares_a_rank = |dep: &Node| (0..self.ranks).any(|rank| runs_on(node, rank) && runs_on(dep, rank));
            if let Some(dependency) = node.deps().find(|&dep| self.node(dep).is_none_or(|dep| !shares_a_rank(dep))) {
                return Err(ChakraError::CrossRankDependency { id: node.id, name: node.name.clone(), dependency });
            }
        }
        let mut traces = Vec::with_capacity(self.ranks as usize);
        for rank in 0..self.ranks {
            let mut bytes = Vec::new();
            let metadata = GlobalMetadata { version: VERSION.to_owned(), attr: Vec::new() };
            metadata.encode_length_delimited(&mut bytes).expect("a Vec grows to hold any message");
            for (node, chakra_node) in self.nodes.iter().zip(&chakra_nodes) {
                if !runs_on(node, rank) {
                    continue;
                }
                let own = |deps: &[NodeId]| -> Vec<NodeId> {
                    deps.iter().copied().filter(|&dep| self.node(dep).is_some_and(|dep| runs_on(dep, rank))).collect()
                };
                let on_this_rank = ChakraNode {
                    data_deps: own(&chakra_node.data_deps),
                    ctrl_deps: own(&chakra_node.ctrl_deps),
                    ..chakra_node.clone()
                };
                on_this_rank.encode_length_delimited(&mut bytes).expect("a Vec grows to hold any message");
            }
            traces.push(bytes);
        }
        Ok(traces)
    }

    /// Writes the Chakra traces `dir/NAME.0.et`, `dir/NAME.1.et`, ..., one per rank, and returns their
    /// paths, rank 0 first.
    ///
    /// # Errors
    /// As [`Workload::to_chakra`], and [`ChakraError::Write`] when a file cannot be written.
    pub fn write_chakra(&self, dir: impl AsRef<Path>, name: &str) -> Result<Vec<PathBuf>, ChakraError> {
        let prefix = dir.as_ref().join(name);
        let mut paths = Vec::new();
        for (rank, bytes) in self.to_chakra()?.into_iter().enumerate() {
            let path = trace_path(&prefix, rank);
            std::fs::write(&path, bytes).map_err(|source| ChakraError::Write { path: path.clone(), source })?;
            paths.push(path);
        }
        Ok(paths)
    }
}

fn runs_on(node: &Node, rank: u32) -> bool {
    match &node.kind {
        NodeKind::Compute { ranks, .. } | NodeKind::Collective { ranks, .. } => ranks.contains(rank),
        NodeKind::Send(t) => t.from == rank,
        NodeKind::Recv(t) => t.to == rank,
    }
}

fn to_chakra_node(node: &Node) -> Result<ChakraNode, ChakraError> {
    let not_representable =
        |reason: String| ChakraError::NotRepresentable { id: node.id, name: node.name.clone(), reason };
    let whole = |x: f64, what: &str| {
        if x.fract() == 0.0 && (0.0..u64::MAX as f64).contains(&x) {
            Ok(x as u64)
        } else {
            Err(not_representable(format!("Chakra holds a whole number of {what}, not {x}")))
        }
    };
    // Chakra's converters write, and ASTRA-sim reads, these attributes as int64_val.
    let int = |name: &str, value: u64| {
        let value = i64::try_from(value)
            .map_err(|_| not_representable(format!("`{name}` is {value}, more than an int64_val holds")))?;
        Ok::<_, ChakraError>(Attribute { name: name.to_owned(), value: Some(AttributeValue::Int64(value)) })
    };
    let mut chakra_node = ChakraNode {
        id: node.id,
        name: node.name.clone(),
        node_type: 0,
        ctrl_deps: node.ctrl_deps.clone(),
        data_deps: node.data_deps.clone(),
        duration_micros: 0,
        attr: vec![Attribute { name: "is_cpu_op".to_owned(), value: Some(AttributeValue::Bool(false)) }],
    };
    match &node.kind {
        NodeKind::Compute { work, .. } => {
            chakra_node.node_type = COMP_NODE;
            match *work {
                Work::DurationNs(ns) => chakra_node.duration_micros = whole(ns / 1e3, "microseconds")?,
                Work::Flops(flops) => chakra_node.attr.push(int("num_ops", whole(flops, "operations")?)?),
            }
        }
        NodeKind::Collective { collective, bytes, comm, stream, .. } => {
            let comm_type = COLLECTIVE_TYPES
                .iter()
                .position(|(_, ours)| *ours == Some(*collective))
                .ok_or_else(|| not_representable(format!("Chakra has no collective type for {collective}")))?;
            chakra_node.node_type = COMM_COLL_NODE;
            chakra_node.attr.extend([int("comm_type", comm_type as u64)?, int("comm_size", *bytes)?]);
            if *stream != 0 {
                chakra_node.attr.push(int(STREAM_ATTRIBUTE, u64::from(*stream))?);
            }
            if *comm != 0 {
                chakra_node.attr.push(int(COMM_ATTRIBUTE, u64::from(*comm))?);
            }
        }
        NodeKind::Send(t) | NodeKind::Recv(t) => {
            chakra_node.node_type =
                if matches!(node.kind, NodeKind::Send(_)) { COMM_SEND_NODE } else { COMM_RECV_NODE };
            chakra_node.attr.extend([
                int("comm_src", u64::from(t.from))?,
                int("comm_dst", u64::from(t.to))?,
                int("comm_size", t.bytes)?,
                int("comm_tag", u64::from(t.tag))?,
            ]);
        }
    }
    Ok(chakra_node)
}

/// What one trace says of a node, before the traces are merged.
#[derive(Clone, Debug, PartialEq)]
enum Local {
    Compute(Work),
    Collective {
        collective: Collective,
        bytes: u64,
        comm: u32,
        stream: u32,
    },
    Send {
        to: u32,
        bytes: u64,
        tag: u32,
    },
    Recv {
        from: u32,
        bytes: u64,
        tag: u32,
    },
    /// A node that takes no time and stands for its dependencies.
    PassThrough,
}

/// A node as the traces read so far describe it.
struct Merged {
    name: String,
    local: Local,
    /// The trace that first had it.
    trace: String,
    ranks: Vec<u32>,
    data_deps: Vec<NodeId>,
    ctrl_deps: Vec<NodeId>,
}

fn read_traces(traces: &[(String, &[u8])], origin: &str) -> Result<Workload, LoadError> {
    let mut merged: HashMap<NodeId, Merged> = HashMap::new();
    for (rank, (trace, bytes)) in traces.iter().enumerate() {
        let rank = rank as u32;
        let mut seen = std::collections::HashSet::new();
        for chakra_node in decode_trace(trace, bytes)? {
            if !seen.insert(chakra_node.id) {
                return Err(ChakraError::DuplicateId { trace: trace.clone(), id: chakra_node.id }.into());
            }
            let local = read_node(trace, &chakra_node)?;
            match merged.get_mut(&chakra_node.id) {
                None => {
                    merged.insert(
                        chakra_node.id,
                        Merged {
                            name: chakra_node.name,
                            local,
                            trace: trace.clone(),
                            ranks: vec![rank],
                            data_deps: chakra_node.data_deps,
                            ctrl_deps: chakra_node.ctrl_deps,
                        },
                    );
                }
                Some(entry) => {
                    let shared = matches!(local, Local::Compute(_) | Local::Collective { .. } | Local::PassThrough);
                    if !shared || entry.local != local || entry.name != chakra_node.name {
                        return Err(ChakraError::Conflict {
                            id: chakra_node.id,
                            first: entry.trace.clone(),
                            first_description: describe(&entry.name, &entry.local),
                            second: trace.clone(),
                            second_description: describe(&chakra_node.name, &local),
                        }
                        .into());
                    }
                    entry.ranks.push(rank);
                    for (deps, more) in
                        [(&mut entry.data_deps, chakra_node.data_deps), (&mut entry.ctrl_deps, chakra_node.ctrl_deps)]
                    {
                        for dep in more {
                            if !deps.contains(&dep) {
                                deps.push(dep);
                            }
                        }
                    }
                }
            }
        }
    }
    let nodes = without_pass_throughs(merged);
    Workload::new(traces.len() as u32, nodes).map_err(|source| LoadError::Invalid { origin: origin.to_owned(), source })
}

/// A node as a conflict names it: its name and what the trace says it does.
fn describe(name: &str, local: &Local) -> String {
    let what = match local {
        Local::Compute(Work::DurationNs(ns)) => format!("compute of {ns} ns"),
        Local::Compute(Work::Flops(flops)) => format!("compute of {flops} flops"),
        Local::Collective { collective, bytes, comm, stream } => {
            format!("{collective} of {bytes} bytes on communicator {comm}, stream {stream}")
        }
        Local::Send { to, bytes, tag } => format!("send of {bytes} bytes to rank {to}, tag {tag}"),
        Local::Recv { from, bytes, tag } => format!("receive of {bytes} bytes from rank {from}, tag {tag}"),
        Local::PassThrough => "METADATA_NODE".to_owned(),
    };
    format!("`{}` ({what})", Quoted(name))
}

/// The workload's nodes: each merged node but the pass-throughs, which the nodes that waited for them
/// now skip, waiting for what they waited for.
fn without_pass_throughs(merged: HashMap<NodeId, Merged>) -> Vec<Node> {
    let pass_through_deps: HashMap<NodeId, Vec<NodeId>> = merged
        .iter()
        .filter(|(_, entry)| entry.local == Local::PassThrough)
        .map(|(&id, entry)| (id, entry.data_deps.iter().chain(&entry.ctrl_deps).copied().collect()))
        .collect();
    // A dependency on a pass-through becomes its dependencies, again and again; `seen` stops a circle
    // of pass-throughs, which leaves the dependency unknown, for the workload's checks to name.
    let resolve = |deps: Vec<NodeId>| {
        let mut resolved = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut pending: Vec<NodeId> = deps.into_iter().rev().collect();
        while let Some(dep) = pending.pop() {
            match pass_through_deps.get(&dep) {
                Some(further) if seen.insert(dep) => pending.extend(further.iter().rev()),
                Some(_) => {}
                None if !resolved.contains(&dep) => resolved.push(dep),
                None => {}
            }
        }
        resolved
    };
    merged
        .into_iter()
        .filter_map(|(id, entry)| {
            // A send or receive is in one trace only, its rank's: the first.
            let rank = entry.ranks[0];
            let ranks = Ranks::List(entry.ranks);
            let kind = match entry.local {
                Local::PassThrough => return None,
                Local::Compute(work) => NodeKind::Compute { ranks, work },
                Local::Collective { collective, bytes, comm, stream } => {
                    NodeKind::Collective { collective, bytes, ranks, comm, stream }
                }
                Local::Send { to, bytes, tag } => NodeKind::Send(PointToPoint { from: rank, to, bytes, tag }),
                Local::Recv { from, bytes, tag } => NodeKind::Recv(PointToPoint { from, to: rank, bytes, tag }),
            };
            Some(Node {
                id,
                name: entry.name,
                kind,
                data_deps: resolve(entry.data_deps),
                ctrl_deps: resolve(entry.ctrl_deps),
            })
        })
        .collect()
}

fn decode_trace(trace: &str, bytes: &[u8]) -> Result<Vec<ChakraNode>, ChakraError> {
    if bytes.is_empty() {
        return Err(ChakraError::Empty { trace: trace.to_owned() });
    }
    let mut rest = bytes;
    let decode_error = |message, rest: &[u8], expected, source| ChakraError::Decode {
        trace: trace.to_owned(),
        message,
        offset: bytes.len() - rest.len(),
        expected,
        source,
    };
    GlobalMetadata::decode_length_delimited(&mut rest).map_err(|e| decode_error(0, bytes, "GlobalMetadata", e))?;
    let mut nodes = Vec::new();
    while !rest.is_empty() {
        let before = rest;
        let node = ChakraNode::decode_length_delimited(&mut rest)
            .map_err(|e| decode_error(nodes.len() + 1, before, "Node", e))?;
        nodes.push(node);
    }
    Ok(nodes)
}

/// What a trace's node is, as far as that trace says.
fn read_node(trace: &str, node: &ChakraNode) -> Result<Local, ChakraError> {
    let attribute_error = |attribute: &'static str, problem: String| ChakraError::Attribute {
        trace: trace.to_owned(),
        id: node.id,
        name: node.name.clone(),
        attribute,
        problem,
    };
    let integer = |attribute: &'static str| -> Result<Option<u64>, ChakraError> {
        let Some(found) = node.attr.iter().find(|a| a.name == attribute) else { return Ok(None) };
        let value = match found.value {
            Some(AttributeValue::Int32(v)) => i64::from(v),
            Some(AttributeValue::Int64(v) | AttributeValue::Sint64(v)) => v,
            Some(AttributeValue::Uint32(v)) => i64::from(v),
            Some(AttributeValue::Uint64(v)) => return Ok(Some(v)),
            _ => {
                return Err(attribute_error(
                    attribute,
                    "is not an integer; expected an int64_val or uint64_val".into(),
                ));
            }
        };
        u64::try_from(value)
            .map(Some)
            .map_err(|_| attribute_error(attribute, format!("is {value}; expected at least 0")))
    };
    let required = |attribute: &'static str| {
        integer(attribute)?
            .ok_or_else(|| attribute_error(attribute, format!("is missing; a {} needs it", type_name(node.node_type))))
    };
    let small = |attribute: &'static str, value: u64| {
        u32::try_from(value)
            .map_err(|_| attribute_error(attribute, format!("is {value}; expected at most {}", u32::MAX)))
    };
    let optional_small = |attribute: &'static str| small(attribute, integer(attribute)?.unwrap_or(0));
    Ok(match node.node_type {
        COMP_NODE => match (node.duration_micros, integer("num_ops")?) {
            (0, Some(flops)) if flops > 0 => Local::Compute(Work::Flops(flops as f64)),
            (micros, _) => Local::Compute(Work::DurationNs(micros as f64 * 1e3)),
        },
        COMM_COLL_NODE => {
            let comm_type = required("comm_type")?;
            let collective = COLLECTIVE_TYPES.get(comm_type as usize).and_then(|(_, ours)| *ours).ok_or_else(|| {
                ChakraError::UnsupportedCollective {
                    trace: trace.to_owned(),
                    id: node.id,
                    name: node.name.clone(),
                    comm_type: COLLECTIVE_TYPES
                        .get(comm_type as usize)
                        .map_or_else(|| format!("collective type {comm_type}"), |(name, _)| (*name).to_owned()),
                }
            })?;
            Local::Collective {
                collective,
                bytes: required("comm_size")?,
                comm: optional_small(COMM_ATTRIBUTE)?,
                stream: optional_small(STREAM_ATTRIBUTE)?,
            }
        }
        COMM_SEND_NODE => Local::Send {
            to: small("comm_dst", required("comm_dst")?)?,
            bytes: required("comm_size")?,
            tag: optional_small("comm_tag")?,
        },
        COMM_RECV_NODE => Local::Recv {
            from: small("comm_src", required("comm_src")?)?,
            bytes: required("comm_size")?,
            tag: optional_small("comm_tag")?,
        },
        METADATA_NODE => Local::PassThrough,
        other => {
            return Err(ChakraError::UnsupportedNodeType {
                trace: trace.to_owned(),
                id: node.id,
                name: node.name.clone(),
                node_type: type_name(other),
            });
        }
    })
}

fn type_name(node_type: i32) -> String {
    usize::try_from(node_type)
        .ok()
        .and_then(|index| NODE_TYPES.get(index))
        .map_or_else(|| format!("node of type {node_type}"), |name| (*name).to_owned())
}

/// `prefix.RANK.et`.
pub(super) fn trace_path(prefix: &Path, rank: impl std::fmt::Display) -> PathBuf {
    let mut path = OsString::from(prefix.as_os_str());
    path.push(format!(".{rank}.et"));
    PathBuf::from(path)
}

/// `dir/NAME` for a path `dir/NAME.RANK.et`.
pub(super) fn prefix_of_trace(path: &Path) -> Option<PathBuf> {
    let file_name = path.file_name()?.to_str()?;
    let (name, rank) = file_name.strip_suffix(".et")?.rsplit_once('.')?;
    let is_rank = !rank.is_empty() && rank.bytes().all(|b| b.is_ascii_digit());
    (is_rank && !name.is_empty()).then(|| path.with_file_name(name))
}

/// Reads `prefix.0.et`, `prefix.1.et`, ... up to the first rank without a file.
pub(super) fn read_prefix(prefix: &Path) -> Result<Workload, LoadError> {
    let mut traces = Vec::new();
    loop {
        let path = trace_path(prefix, traces.len());
        if !path.is_file() {
            break;
        }
        let bytes = read_bounded(&path).map_err(|source| LoadError::Read { path: path.clone(), source })?;
        traces.push((path.display().to_string(), bytes));
    }
    if traces.is_empty() {
        return Err(LoadError::NotFound { path: prefix.to_owned() });
    }
    let labelled: Vec<(String, &[u8])> =
        traces.iter().map(|(label, bytes)| (label.clone(), bytes.as_slice())).collect();
    read_traces(&labelled, &trace_path(prefix, "*").display().to_string())
}

/// Reads the one set of traces `NAME.0.et`, `NAME.1.et`, ... in a directory.
pub(super) fn read_dir(dir: &Path) -> Result<Workload, LoadError> {
    let entries = std::fs::read_dir(dir).map_err(|source| LoadError::Read { path: dir.to_owned(), source })?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| LoadError::Read { path: dir.to_owned(), source })?;
        if let Some(name) = entry.file_name().to_str().and_then(|name| name.strip_suffix(".0.et")) {
            names.push(name.to_owned());
        }
    }
    names.sort();
    match names.as_slice() {
        [name] => read_prefix(&dir.join(name)),
        _ => Err(ChakraError::TraceSets { dir: dir.to_owned(), found: names }.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(name: &str, value: i64) -> Attribute {
        Attribute { name: name.to_owned(), value: Some(AttributeValue::Int64(value)) }
    }

    fn chakra_node(id: u64, node_type: i32, attr: Vec<Attribute>, data_deps: Vec<u64>) -> ChakraNode {
        ChakraNode { id, name: format!("n{id}"), node_type, ctrl_deps: vec![], data_deps, duration_micros: 0, attr }
    }

    fn trace(nodes: &[ChakraNode]) -> Vec<u8> {
        let mut bytes = Vec::new();
        GlobalMetadata { version: VERSION.to_owned(), attr: vec![] }.encode_length_delimited(&mut bytes).unwrap();
        for node in nodes {
            node.encode_length_delimited(&mut bytes).unwrap();
        }
        bytes
    }

    fn read_error(traces: &[Vec<u8>]) -> ChakraError {
        match Workload::from_chakra_bytes(traces) {
            Err(LoadError::Chakra(error)) => error,
            other => panic!("expected a Chakra error, got {other:?}"),
        }
    }

    fn coll(id: u64, comm_type: i64) -> ChakraNode {
        chakra_node(id, COMM_COLL_NODE, vec![int("comm_type", comm_type), int("comm_size", 64)], vec![])
    }

    #[test]
    fn a_collective_kernbench_lacks_is_named_with_its_node_and_trace() {
        let err = read_error(&[trace(&[coll(5, 3)])]);
        assert!(matches!(&err, ChakraError::UnsupportedCollective { id: 5, comm_type, .. } if comm_type == "GATHER"));
        assert!(err.to_string().starts_with("rank 0's trace: node 5 `n5` is a GATHER"), "{err}");
        let err = read_error(&[trace(&[coll(5, 42)])]);
        assert!(err.to_string().contains("collective type 42"), "{err}");
    }

    #[test]
    fn every_kernbench_collective_chakra_has_reads_back_as_itself() {
        for (comm_type, (_, ours)) in COLLECTIVE_TYPES.iter().enumerate() {
            let Some(collective) = *ours else { continue };
            let step = Workload::from_chakra_bytes(&[trace(&[coll(0, comm_type as i64)])]).unwrap();
            assert!(
                matches!(step.nodes()[0].kind, NodeKind::Collective { collective: c, bytes: 64, .. } if c == collective)
            );
        }
    }

    #[test]
    fn a_node_type_kernbench_does_not_model_is_refused() {
        let err = read_error(&[trace(&[chakra_node(2, 2, vec![], vec![])])]);
        assert!(
            matches!(&err, ChakraError::UnsupportedNodeType { id: 2, node_type, .. } if node_type == "MEM_LOAD_NODE")
        );
    }

    #[test]
    fn a_missing_or_negative_attribute_is_named() {
        let missing = chakra_node(1, COMM_COLL_NODE, vec![int("comm_type", 0)], vec![]);
        let err = read_error(&[trace(&[missing])]);
        assert!(matches!(err, ChakraError::Attribute { attribute: "comm_size", .. }), "{err}");
        assert!(err.to_string().contains("is missing; a COMM_COLL_NODE needs it"), "{err}");
        let negative = chakra_node(1, COMM_COLL_NODE, vec![int("comm_type", 0), int("comm_size", -8)], vec![]);
        assert!(read_error(&[trace(&[negative])]).to_string().contains("is -8; expected at least 0"));
    }

    #[test]
    fn one_id_for_different_operations_in_two_traces_is_a_conflict() {
        let err = read_error(&[trace(&[coll(0, 0)]), trace(&[coll(0, 2)])]);
        assert!(
            matches!(&err, ChakraError::Conflict { id: 0, first, second, .. }
            if first == "rank 0's trace" && second == "rank 1's trace"),
            "{err}"
        );
    }

    #[test]
    fn nodes_that_wait_for_a_metadata_node_wait_for_what_it_waits_for() {
        let compute = ChakraNode { duration_micros: 3, ..chakra_node(0, COMP_NODE, vec![], vec![]) };
        let metadata = chakra_node(1, METADATA_NODE, vec![], vec![0]);
        let step = Workload::from_chakra_bytes(&[trace(
            &[compute, metadata, coll(2, 0)]
                .map(|n| if n.id == 2 { ChakraNode { data_deps: vec![1], ..n } } else { n }),
        )])
        .unwrap();
        assert_eq!(
            step.nodes().iter().map(|n| (n.id, n.data_deps.clone())).collect::<Vec<_>>(),
            [(0, vec![]), (2, vec![0])]
        );
    }

    #[test]
    fn bytes_that_are_not_a_trace_say_where() {
        let mut bytes = trace(&[coll(0, 0)]);
        let whole = bytes.len();
        bytes.extend([0x05, 0xff]);
        let err = read_error(&[bytes]);
        assert!(
            matches!(err, ChakraError::Decode { message: 2, offset, expected: "Node", .. } if offset == whole),
            "{err}"
        );
        assert!(matches!(read_error(&[vec![]]), ChakraError::Empty { .. }));
        assert!(matches!(read_error(&[vec![0x01, 0x00, 0x01]]), ChakraError::Decode { .. }));
    }

    #[test]
    fn a_trace_name_is_its_prefix_and_rank() {
        assert_eq!(prefix_of_trace(Path::new("dir/step.12.et")), Some(PathBuf::from("dir/step")));
        assert_eq!(prefix_of_trace(Path::new("dir/step.et")), None);
        assert_eq!(trace_path(Path::new("dir/step"), 3), PathBuf::from("dir/step.3.et"));
    }
}

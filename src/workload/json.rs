//! The plain JSON form of a workload, written and read by hand: what a file holds (the raw form here),
//! before `Workload::new` checks it. Uses the graph of `workload` and the [`size`](crate::size) parser.
//!
//! ```json
//! {"ranks": 8, "nodes": [
//!   {"id": 0, "name": "backward 0", "compute": {"duration_us": 500}},
//!   {"id": 1, "name": "bucket 0", "all_reduce": {"bytes": "25M"}, "deps": [0]},
//!   {"id": 2, "name": "gather", "all_gather": {"bytes": "4M", "ranks": [0, 1, 2, 3], "stream": 1}, "ctrl_deps": [1]},
//!   {"id": 3, "name": "to stage 1", "send": {"from": 0, "to": 4, "bytes": "1M", "tag": 0}},
//!   {"id": 4, "name": "from stage 0", "recv": {"from": 0, "to": 4, "bytes": "1M"}}
//! ]}
//! ```
//!
//! A node has an `id` (unique), a `name` (optional), `deps` (data dependencies, optional),
//! `ctrl_deps` (control dependencies, optional) and exactly one of:
//!
//! | key | fields |
//! | --- | --- |
//! | `compute` | `duration_us` or `flops` (exactly one); `ranks` (default `"all"`) |
//! | a collective's name (`all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`, `reduce`, `all_to_all`, ..., or nccl-tests' names) | `bytes` each rank contributes; `ranks`, the communicator's members (default `"all"`); `comm`, which communicator of them (default 0); `stream` (default 0) |
//! | `send`, `recv` | `from`, `to`, `bytes`; `tag` (default 0) |
//!
//! `ranks` is `"all"`, a rank, or a list of ranks; a compute node on several ranks runs on each of
//! them. Sizes are numbers of bytes or strings such as `"25M"` (K, M, G are powers of 1024).

use std::path::Path;

use kernbench_core::{Collective, Quoted, read_bounded};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{LoadError, Node, NodeKind, PointToPoint, Ranks, Work, Workload, WorkloadError};
use crate::size::{format_size, parse_size};

impl Workload {
    /// Reads the plain JSON form (see [`json`](self)).
    ///
    /// # Errors
    /// [`LoadError::Json`] for text that is not the form (the message says where),
    /// [`LoadError::Invalid`] for a graph that is not a workload.
    ///
    /// # Examples
    /// ```
    /// use kernbench::workload::{LoadError, Workload, WorkloadError};
    /// let step = Workload::from_json_str(r#"{"ranks": 4, "nodes": [{"id": 0, "all_gather": {"bytes": "1K"}}]}"#)?;
    /// assert_eq!(step.ranks(), 4);
    /// let err = Workload::from_json_str(r#"{"ranks": 4, "nodes": [{"id": 0, "compute": {}}]}"#).unwrap_err();
    /// assert!(matches!(err, LoadError::Invalid { source: WorkloadError::NoComputeTime { .. }, .. }));
    /// # Ok::<(), LoadError>(())
    /// ```
    pub fn from_json_str(text: &str) -> Result<Workload, LoadError> {
        parse(text, "the text")
    }

    /// The plain JSON form, one node a line, nodes by id: what [`Workload::from_json_str`] reads back
    /// as this workload.
    pub fn to_json(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(|node| format!("  {}", node_line(node))).collect();
        format!("{{\"ranks\": {}, \"nodes\": [\n{}\n]}}\n", self.ranks, nodes.join(",\n"))
    }
}

pub(super) fn read_file(path: &Path) -> Result<Workload, LoadError> {
    let bytes = read_bounded(path).map_err(|source| LoadError::Read { path: path.to_owned(), source })?;
    let origin = path.display().to_string();
    let text = String::from_utf8(bytes).map_err(|error| LoadError::Read {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, error.utf8_error()),
    })?;
    parse(&text, &origin)
}

fn parse(text: &str, origin: &str) -> Result<Workload, LoadError> {
    let raw: RawWorkload =
        serde_json::from_str(text).map_err(|source| LoadError::Json { origin: origin.to_owned(), source })?;
    raw.into_workload().map_err(|source| LoadError::Invalid { origin: origin.to_owned(), source })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    ranks: u32,
    nodes: Vec<RawNode>,
}

impl RawWorkload {
    fn into_workload(self) -> Result<Workload, WorkloadError> {
        let nodes = self.nodes.into_iter().map(RawNode::into_node).collect::<Result<_, _>>()?;
        Workload::new(self.ranks, nodes)
    }
}

/// A node as written: its kind is the one key besides the common ones, so it is read from a map.
#[derive(Deserialize)]
#[serde(try_from = "Map<String, Value>")]
struct RawNode {
    id: u64,
    name: String,
    kind: RawKind,
    deps: Vec<u64>,
    ctrl_deps: Vec<u64>,
}

enum RawKind {
    Compute(RawCompute),
    Collective(Collective, RawCollective),
    Send(RawTransfer),
    Recv(RawTransfer),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCompute {
    #[serde(default)]
    ranks: RawRanks,
    duration_us: Option<f64>,
    flops: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCollective {
    bytes: Bytes,
    #[serde(default)]
    ranks: RawRanks,
    #[serde(default)]
    comm: u32,
    #[serde(default)]
    stream: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransfer {
    from: u32,
    to: u32,
    bytes: Bytes,
    #[serde(default)]
    tag: u32,
}

impl RawTransfer {
    fn ends(self) -> PointToPoint {
        PointToPoint { from: self.from, to: self.to, bytes: self.bytes.0, tag: self.tag }
    }
}

/// `"all"`, a rank, or a list of ranks.
#[derive(Default, Deserialize)]
#[serde(try_from = "Value")]
struct RawRanks(Ranks);

impl TryFrom<Value> for RawRanks {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        const EXPECTED: &str = "expected \"all\", a rank or a list of ranks";
        match value {
            Value::String(text) if text == "all" => Ok(RawRanks(Ranks::All)),
            Value::Number(_) => serde_json::from_value(value).map(|rank| RawRanks(Ranks::List(vec![rank]))),
            Value::Array(_) => serde_json::from_value(value).map(|list| RawRanks(Ranks::List(list))),
            other => return Err(format!("bad ranks {other}: {EXPECTED}")),
        }
        .map_err(|error| format!("bad ranks: {error}; {EXPECTED}"))
    }
}

/// A size: a number of bytes, or a string such as `"25M"`.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
struct Bytes(u64);

impl TryFrom<Value> for Bytes {
    type Error = String;

    fn try_from(value: Value) -> Result<Self, String> {
        match value {
            Value::String(text) => parse_size(&text).map(Bytes).map_err(|error| error.to_string()),
            Value::Number(number) => number.as_u64().map(Bytes).ok_or_else(|| {
                format!("bad size {number}: expected a whole number of bytes, at least 0, or a string like \"25M\"")
            }),
            other => Err(format!("bad size {other}: expected a number of bytes or a string like \"25M\"")),
        }
    }
}

const COMMON_KEYS: [&str; 4] = ["id", "name", "deps", "ctrl_deps"];

impl TryFrom<Map<String, Value>> for RawNode {
    type Error = String;

    fn try_from(mut map: Map<String, Value>) -> Result<Self, String> {
        let id: u64 = match map.remove("id") {
            Some(id) => serde_json::from_value(id).map_err(|error| format!("a node has a bad `id`: {error}"))?,
            None => return Err("a node has no `id`: every node needs a unique number".to_owned()),
        };
        let name = match map.remove("name") {
            Some(name) => serde_json::from_value(name).map_err(|error| format!("node {id}: bad `name`: {error}"))?,
            None => String::new(),
        };
        let mut ids = |key: &str| -> Result<Vec<u64>, String> {
            match map.remove(key) {
                Some(list) => serde_json::from_value(list)
                    .map_err(|error| format!("node {id}: bad `{key}`: {error}; expected a list of node ids")),
                None => Ok(Vec::new()),
            }
        };
        let (deps, ctrl_deps) = (ids("deps")?, ids("ctrl_deps")?);
        // The keys left are the node's kind, alone, or a mistake to name.
        let found: Vec<String> = map.keys().take(4).map(|key| format!("`{}`", Quoted(key))).collect();
        let mut entries = map.into_iter();
        let (Some((key, body)), None) = (entries.next(), entries.next()) else {
            return Err(format!(
                "node {id} must have exactly one of `compute`, `send`, `recv` or a collective's name (such as \
                 `all_reduce`) besides {}; it has {}",
                COMMON_KEYS.join(", "),
                if found.is_empty() { "none".to_owned() } else { found.join(", ") }
            ));
        };
        let body_error = |error: serde_json::Error| format!("node {id}: bad `{key}`: {error}");
        let kind = match key.as_str() {
            "compute" => RawKind::Compute(serde_json::from_value(body).map_err(body_error)?),
            "send" => RawKind::Send(serde_json::from_value(body).map_err(body_error)?),
            "recv" => RawKind::Recv(serde_json::from_value(body).map_err(body_error)?),
            other => match other.parse::<Collective>() {
                Ok(collective) => RawKind::Collective(collective, serde_json::from_value(body).map_err(body_error)?),
                Err(_) => {
                    let collectives: Vec<&str> = Collective::ALL.iter().map(|c| c.name()).collect();
                    return Err(format!(
                        "node {id}: unknown key `{}`: expected {}, and one of `compute`, `send`, `recv` or a collective: {}",
                        Quoted(other),
                        COMMON_KEYS.join(", "),
                        collectives.join(", ")
                    ));
                }
            },
        };
        Ok(RawNode { id, name, kind, deps, ctrl_deps })
    }
}

impl RawNode {
    fn into_node(self) -> Result<Node, WorkloadError> {
        let label = super::NodeLabel { id: self.id, name: self.name.clone() };
        let kind = match self.kind {
            RawKind::Compute(compute) => {
                let work = match (compute.duration_us, compute.flops) {
                    (Some(us), None) => Work::DurationNs(us * 1e3),
                    (None, Some(flops)) => Work::Flops(flops),
                    (None, None) => return Err(WorkloadError::NoComputeTime { node: label }),
                    (Some(_), Some(_)) => return Err(WorkloadError::TwoComputeTimes { node: label }),
                };
                NodeKind::Compute { ranks: compute.ranks.0, work }
            }
            RawKind::Collective(collective, call) => NodeKind::Collective {
                collective,
                bytes: call.bytes.0,
                ranks: call.ranks.0,
                comm: call.comm,
                stream: call.stream,
            },
            RawKind::Send(transfer) => NodeKind::Send(transfer.ends()),
            RawKind::Recv(transfer) => NodeKind::Recv(transfer.ends()),
        };
        Ok(Node { id: self.id, name: self.name, kind, data_deps: self.deps, ctrl_deps: self.ctrl_deps })
    }
}

/// A node's line of the JSON form: fields in the order people read them, defaults left out.
fn node_line(node: &Node) -> String {
    let mut fields = vec![("id", node.id.to_string()), ("name", Value::from(node.name.clone()).to_string())];
    let mut body: Vec<(&str, String)> = Vec::new();
    let key = match &node.kind {
        NodeKind::Compute { ranks, work } => {
            body.extend(ranks_field(ranks));
            body.push(match *work {
                Work::DurationNs(ns) => ("duration_us", number(ns / 1e3)),
                Work::Flops(flops) => ("flops", number(flops)),
            });
            "compute"
        }
        NodeKind::Collective { collective, bytes, ranks, comm, stream } => {
            body.push(("bytes", size(*bytes)));
            body.extend(ranks_field(ranks));
            if *comm != 0 {
                body.push(("comm", comm.to_string()));
            }
            if *stream != 0 {
                body.push(("stream", stream.to_string()));
            }
            collective.name()
        }
        NodeKind::Send(t) | NodeKind::Recv(t) => {
            body.extend([("from", t.from.to_string()), ("to", t.to.to_string()), ("bytes", size(t.bytes))]);
            if t.tag != 0 {
                body.push(("tag", t.tag.to_string()));
            }
            if matches!(node.kind, NodeKind::Send(_)) { "send" } else { "recv" }
        }
    };
    fields.push((key, one_line(&body)));
    for (key, deps) in [("deps", &node.data_deps), ("ctrl_deps", &node.ctrl_deps)] {
        if !deps.is_empty() {
            fields.push((key, list(deps)));
        }
    }
    one_line(&fields)
}

fn ranks_field(ranks: &Ranks) -> Option<(&'static str, String)> {
    match ranks {
        Ranks::All => None,
        Ranks::List(members) => Some(("ranks", list(members))),
    }
}

fn list<T: ToString>(items: &[T]) -> String {
    format!("[{}]", items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
}

/// A size as the form writes it: `"25M"` when it is a whole number of K, M or G, else a number.
fn size(bytes: u64) -> String {
    let text = format_size(bytes);
    if text.ends_with(|c: char| c.is_ascii_digit()) { text } else { format!("\"{text}\"") }
}

/// A whole number without a fraction (`500`, not `500.0`), any other as serde writes it.
fn number(x: f64) -> String {
    const EXACT_INTEGERS: f64 = (1u64 << 53) as f64;
    if x.fract() == 0.0 && x.abs() < EXACT_INTEGERS { (x as i64).to_string() } else { Value::from(x).to_string() }
}

/// Fields, already written, on one line with the spaces of a pretty-printed file.
fn one_line(fields: &[(&str, String)]) -> String {
    let fields: Vec<String> = fields.iter().map(|(key, value)| format!("\"{key}\": {value}")).collect();
    format!("{{{}}}", fields.join(", "))
}

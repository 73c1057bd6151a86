//! When each node of a workload runs, given each node's duration: a list schedule over the workload's
//! dependency order, with the GPUs' compute, the communicators' streams and the point-to-point channels
//! as the resources nodes queue for. Uses the graph of `workload`.

use std::collections::HashMap;

use super::{Node, NodeId, NodeKind, NodeLabel, Ranks, Unit, Workload};

/// When one node ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timed {
    /// The node's id.
    pub id: NodeId,
    /// When it started, in nanoseconds from the step's start.
    pub start_ns: f64,
    /// When it ended, in nanoseconds from the step's start.
    pub end_ns: f64,
}

/// When every node of a workload ran, and how long the step took.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    nodes: Vec<Timed>,
    calls: Vec<Timed>,
    step_ns: f64,
}

impl Schedule {
    /// The step's time: when its last node ended (0 for a workload whose nodes all take no time).
    pub fn step_ns(&self) -> f64 {
        self.step_ns
    }

    /// Every node's times, in the workload's node order (by id).
    pub fn nodes(&self) -> &[Timed] {
        &self.nodes
    }

    /// The times of the node with this id.
    pub fn node(&self, id: NodeId) -> Option<&Timed> {
        self.nodes.binary_search_by(|timed| timed.id.cmp(&id)).ok().map(|index| &self.nodes[index])
    }

    /// The communication calls, by start (ties by id): each collective, and each transfer as its send.
    pub fn calls(&self) -> &[Timed] {
        &self.calls
    }
}

/// A duration that the caller's timing gave and no schedule can use.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The duration is negative, infinite or not a number (the caller's fault, such as flops at a rate of 0).
    #[error("the timing gave {node} a duration of {duration_ns} ns; expected a finite number, at least 0")]
    BadDuration {
        /// The node.
        node: NodeLabel,
        /// The duration given.
        duration_ns: f64,
    },
}

/// What a unit queues for before it can start; each runs one unit at a time, in dependency order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Resource {
    /// A GPU's compute.
    Compute(u32),
    /// A stream of a communicator.
    Stream { members: Ranks, comm: u32, stream: u32 },
    /// The transfers from one rank to another.
    Channel { from: u32, to: u32 },
}

impl Workload {
    /// Lays the workload out in time: a node starts when every node it depends on has ended and its
    /// resources are free, and takes `duration(node, start_ns)` nanoseconds.
    ///
    /// - A compute node needs the compute of each of its ranks, which runs one node at a time.
    /// - Calls on one communicator (the same members and `comm`) and stream run one at a time, in
    ///   issue order; calls on different streams or communicators may overlap.
    /// - A send and its receive are one transfer: it starts when both are ready, once the previous
    ///   transfer between the two ranks has ended, and `duration` is asked once, with the send.
    ///
    /// Issue order is the workload's dependency order, ties broken by the smaller id, so the schedule is
    /// the same on every run. The caller supplies durations: a fixed duration
    /// ([`Node::fixed_duration_ns`]), flops at the GPU's rate, a
    /// collective's time from a model or a simulator.
    ///
    /// # Errors
    /// [`ScheduleError::BadDuration`] when `duration` gives a negative or non-finite time.
    ///
    /// # Examples
    /// ```
    /// use kernbench::workload::Workload;
    /// // Two phases of 10 us on each rank, and an all-reduce of 15 us after the first.
    /// let step = Workload::from_json_str(r#"{"ranks": 2, "nodes": [
    ///     {"id": 0, "name": "a", "compute": {"duration_us": 10}},
    ///     {"id": 1, "name": "b", "compute": {"duration_us": 10}, "deps": [0]},
    ///     {"id": 2, "name": "sync a", "all_reduce": {"bytes": "1M"}, "deps": [0]}
    /// ]}"#)?;
    /// let schedule = step.schedule(|node, _| node.fixed_duration_ns().unwrap_or(15_000.0))?;
    /// // The all-reduce overlaps the second phase and ends after it.
    /// assert_eq!(schedule.node(2).map(|t| (t.start_ns, t.end_ns)), Some((10_000.0, 25_000.0)));
    /// assert_eq!(schedule.step_ns(), 25_000.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn schedule(&self, mut duration: impl FnMut(&Node, f64) -> f64) -> Result<Schedule, ScheduleError> {
        let mut free_at: HashMap<Resource, f64> = HashMap::new();
        let mut times: Vec<Option<Timed>> = vec![None; self.nodes.len()];
        let ended = |times: &[Option<Timed>], id: NodeId| {
            self.nodes
                .binary_search_by_key(&id, |node| node.id)
                .ok()
                .and_then(|index| times[index])
                .map_or(0.0, |timed| timed.end_ns)
        };
        for &unit in &self.order {
            let ready =
                unit.nodes().flat_map(|index| self.nodes[index].deps()).map(|id| ended(&times, id)).fold(0.0, f64::max);
            let lead = match unit {
                Unit::Node(index) | Unit::Transfer { send: index, .. } => &self.nodes[index],
            };
            let resources = self.resources(&lead.kind);
            let start =
                resources.iter().map(|resource| free_at.get(resource).copied().unwrap_or(0.0)).fold(ready, f64::max);
            let took = duration(lead, start);
            if !(took.is_finite() && took >= 0.0) {
                return Err(ScheduleError::BadDuration { node: lead.label(), duration_ns: took });
            }
            let end = start + took;
            for resource in resources {
                free_at.insert(resource, end);
            }
            for index in unit.nodes() {
                times[index] = Some(Timed { id: self.nodes[index].id, start_ns: start, end_ns: end });
            }
        }
        // Every node is in exactly one unit of the order, so every time is set.
        let nodes: Vec<Timed> = times.into_iter().flatten().collect();
        let mut calls: Vec<Timed> = nodes
            .iter()
            .zip(&self.nodes)
            .filter(|(_, node)| matches!(node.kind, NodeKind::Collective { .. } | NodeKind::Send(_)))
            .map(|(timed, _)| *timed)
            .collect();
        calls.sort_by(|a, b| a.start_ns.total_cmp(&b.start_ns).then(a.id.cmp(&b.id)));
        let step_ns = nodes.iter().map(|timed| timed.end_ns).fold(0.0, f64::max);
        Ok(Schedule { nodes, calls, step_ns })
    }

    fn resources(&self, kind: &NodeKind) -> Vec<Resource> {
        match kind {
            NodeKind::Compute { ranks, .. } => ranks.members(self.ranks).into_iter().map(Resource::Compute).collect(),
            NodeKind::Collective { ranks, comm, stream, .. } => {
                vec![Resource::Stream { members: ranks.clone(), comm: *comm, stream: *stream }]
            }
            NodeKind::Send(t) | NodeKind::Recv(t) => vec![Resource::Channel { from: t.from, to: t.to }],
        }
    }
}

//! Calls in flight together on one communicator: several collectives sharing the machine's links and
//! PEs as calls on different streams do, each with its own queues, buffers, postcondition and time.

use std::collections::BTreeSet;
use std::sync::Arc;

use kernbench_core::{CheckedPlan, Collective, Direction, DistTensor, InstallPlan, ReduceOp, System};
use kernbench_sim::{Runtime, Together};

use super::{CallOptions, CallReport, CommError, Communicator, PreparedCall};

/// One of several calls run together ([`Communicator::call_together`]).
#[derive(Clone, Debug)]
pub struct TogetherCall<'t> {
    /// The collective.
    pub collective: Collective,
    /// Its tensor.
    pub tensor: &'t DistTensor,
    /// Its reduction.
    pub op: ReduceOp,
    /// Its root (broadcast and reduce).
    pub root: usize,
    /// Its algorithm, as for [`Communicator::call`] (its generation is taken in call order).
    pub options: CallOptions,
    /// When it starts, in ns of simulated time after the first call does.
    pub start_ns: f64,
}

impl<'t> TogetherCall<'t> {
    /// `collective` on `tensor` with `op`, root 0, the registry's algorithm, from the start.
    pub fn new(collective: Collective, tensor: &'t DistTensor, op: ReduceOp) -> TogetherCall<'t> {
        TogetherCall { collective, tensor, op, root: 0, options: CallOptions::default(), start_ns: 0.0 }
    }
}

impl Communicator {
    /// Runs `calls` at once, as calls issued on different streams are in flight together: they share
    /// every link's channels and every PE's engines ([`Runtime::run_together`]), so two calls that
    /// need the same links each take longer than alone. Each is checked against its postcondition and
    /// reported on its own: its outputs, its PEs' time, its completion.
    ///
    /// The calls' plans must have the same participants (the same mapper on tensors of one layout);
    /// calls on different topologies run on the union of their plans, each PE's directions of both,
    /// when no direction is in both with another peer (a ring's `E` is not a mesh's). The calls must
    /// have the same protocol and lanes' cap, and take no per-pair counts. They are not checked exactly
    /// (each report's `exact` is `None`: the provenance re-run is of one call) and see no windows.
    ///
    /// # Errors
    /// [`CommError::Together`] for calls that cannot run together; otherwise as
    /// [`Communicator::call`].
    ///
    /// # Examples
    /// ```
    /// use kernbench::{Collective, Communicator, DistTensor, DpPolicy, ReduceOp, System, Tile, TogetherCall};
    /// let system = System::shape(4, 1, 1, 1).unwrap();
    /// let tiles: Vec<Tile> = (0..4).map(|s| Tile::from_vec(vec![s as f32; 1024])).collect();
    /// let tensor = DistTensor::distribute(&system, &tiles, 1, 1024, DpPolicy::LEADER).unwrap();
    /// let mut comm = Communicator::new(system);
    /// let call = TogetherCall::new(Collective::AllReduce, &tensor, ReduceOp::Sum);
    /// let both = comm.call_together(&[call.clone(), call]).unwrap();
    /// assert!(both.iter().all(|(_, report)| report.postcondition.held));
    /// assert_eq!(both[0].0.gather_sip(3).unwrap().to_vec::<f32>().unwrap(), vec![6.0; 1024]);
    /// ```
    pub fn call_together(&mut self, calls: &[TogetherCall<'_>]) -> Result<Vec<(DistTensor, CallReport)>, CommError> {
        let together = |why: String| CommError::Together { why };
        let mut prepared: Vec<PreparedCall> = Vec::with_capacity(calls.len());
        for call in calls {
            let algorithm = call.options.algorithm.as_deref().map(|name| self.algorithm(name)).transpose()?;
            prepared.push(self.prepare(call.collective, &call.tensor.layout(), algorithm)?);
        }
        let Some(first) = prepared.first() else { return Ok(Vec::new()) };
        let plan = union_plan(&prepared, &self.system).map_err(together)?;
        for (k, (call, p)) in calls.iter().zip(&prepared).enumerate() {
            let name = &p.algorithm.name;
            if p.tuned != first.tuned {
                return Err(together(format!(
                    "call {k} ({name}) is tuned to {:?}, call 0 to {:?}",
                    p.tuned, first.tuned
                )));
            }
            if call.collective.takes_counts() || call.options.counts.is_some() {
                return Err(together(format!(
                    "call {k} ({}) takes per-pair counts, which calls run together do not",
                    call.collective
                )));
            }
        }
        let mut staged = Vec::with_capacity(calls.len());
        for (call, p) in calls.iter().zip(&prepared) {
            staged.push(self.stage(p, call.tensor, call.op, call.root, call.options.generation)?);
        }
        let runtime = Runtime::new(&self.system)
            .options(self.options.clone())
            .protocol(first.tuned.protocol)
            .max_lanes(first.tuned.lanes);
        let parts = (calls.iter().zip(&prepared).zip(&mut staged))
            .map(|((call, p), s)| Together {
                kernel: p.algorithm.launch(),
                buffers: s.buffers(),
                call: s.call,
                start_ns: call.start_ns,
            })
            .collect();
        let runs = runtime.run_together(&plan, parts)?;
        (calls.iter().zip(&prepared).zip(staged).zip(runs))
            .map(|(((call, p), staged), run)| self.finish(p, staged, call.tensor, run, None))
            .collect()
    }
}

/// The plan the calls of `prepared` run on together: their one plan, or the union of their plans'
/// neighbour tables when they differ.
///
/// # Errors
/// Why they cannot share one: other participants, or a direction two topologies both use.
fn union_plan(prepared: &[PreparedCall], system: &System) -> Result<Arc<CheckedPlan>, String> {
    let first = &prepared[0];
    if prepared.iter().all(|p| Arc::ptr_eq(&p.plan, &first.plan) || *p.plan == *first.plan) {
        return Ok(Arc::clone(&first.plan));
    }
    let mut union: InstallPlan = (**first.plan).clone();
    let mut topologies = vec![first.plan.topology.clone()];
    for (k, p) in prepared.iter().enumerate().skip(1) {
        let (name, first_name) = (&p.algorithm.name, &first.algorithm.name);
        let same_participants = p.plan.participants().map(|i| i.pe).eq(union.participants().map(|i| i.pe));
        if !same_participants {
            return Err(format!(
                "call {k} ({name}) runs on other PEs than call 0 ({first_name}): calls run together need the same participants (the same mapper, tensors of one layout)"
            ));
        }
        if topologies.contains(&p.plan.topology) {
            continue;
        }
        // Whether a direction is one of the plan's anywhere: a kernel asking `tl.has` of its own
        // directions must not find another topology's.
        let directions = |plan: &InstallPlan| -> BTreeSet<Direction> {
            plan.participants().flat_map(|i| i.neighbors.iter().map(|n| n.direction)).collect()
        };
        if let Some(shared) = directions(&union).intersection(&directions(&p.plan)).next() {
            return Err(format!(
                "call {k} ({name}, topology {}) and the calls before it ({}) both use direction {shared:?}: calls run together on different topologies need directions of their own",
                p.plan.topology,
                topologies.join(", ")
            ));
        }
        for (mine, theirs) in union.sips.iter_mut().flat_map(|s| s.pes.iter_mut()).zip(p.plan.participants()) {
            mine.neighbors.extend(theirs.neighbors.iter().cloned());
        }
        topologies.push(p.plan.topology.clone());
    }
    union.topology = topologies.join("+");
    CheckedPlan::check(union, system).map(Arc::new).map_err(|e| format!("the union of the calls' plans: {e}"))
}

//! Running a prepared call: its inputs staged, its kernels run, its outputs checked and reported.

use std::sync::Arc;

use kernbench_core::postcondition::{self, CallFacts, Postcondition, starting_output};
use kernbench_core::provenance::Exactness;
use kernbench_core::tile;
use kernbench_core::tl::MAX_GENERATION;
use kernbench_core::{Collective, DistTensor, ReduceOp, Tile, Tuned};
use kernbench_sim::{Call, PeBuffers, RunReport, Runtime};

use super::{CallReport, CommError, Communicator, PreparedCall, check_inputs, output_tensor};

impl Communicator {
    /// Runs a call [`Communicator::prepare`] made on `tensor`, which must have the layout it was prepared
    /// for, in the communicator's next generation or `generation` (after the last one).
    ///
    /// # Errors
    /// [`CommError::LayoutNotPrepared`] for a tensor of another layout, [`CommError::BadRoot`],
    /// [`CommError::Inputs`], [`CommError::Generation`], [`CommError::Run`],
    /// [`CommError::ExactRun`], [`CommError::Reference`], [`CommError::Layout`].
    pub fn run_prepared(
        &mut self,
        prepared: &PreparedCall,
        tensor: &DistTensor,
        op: ReduceOp,
        root: usize,
        generation: Option<u64>,
    ) -> Result<(DistTensor, CallReport), CommError> {
        let mut staged = self.stage(prepared, tensor, op, root, generation)?;
        let Tuned { protocol, lanes } = prepared.tuned;
        let runtime = Runtime::new(&self.system)
            .options(self.options.clone())
            .protocol(protocol)
            .max_lanes(lanes)
            .counts(prepared.counts.clone());
        let exact = self.exact.then_some(prepared.collective);
        let windows = Some(&mut self.windows).filter(|w| !w.registered().is_empty());
        let (buffers, call) = (staged.buffers(), staged.call);
        let (run, exact) =
            runtime.run_then_exact(&prepared.plan, prepared.algorithm.launch(), buffers, (call, windows), exact)?;
        self.finish(prepared, staged, tensor, run, exact.transpose()?)
    }

    /// A call of `prepared` on `tensor` made ready to run: its inputs checked, its outputs as they
    /// start, its facts and its generation taken.
    ///
    /// # Errors
    /// As [`Communicator::run_prepared`], before anything runs.
    pub(super) fn stage(
        &mut self,
        prepared: &PreparedCall,
        tensor: &DistTensor,
        op: ReduceOp,
        root: usize,
        generation: Option<u64>,
    ) -> Result<Staged, CommError> {
        let PreparedCall { collective, algorithm, plan, counts, .. } = prepared;
        let collective = *collective;
        if tensor.layout() != prepared.layout {
            return Err(CommError::LayoutNotPrepared { algorithm: algorithm.name.clone() });
        }
        let inputs: Vec<Tile> = (tensor.shards_of(plan.participants().map(|p| p.pe)))
            .map(|shard| shard.cloned().unwrap_or_else(|| Tile::zeros(tensor.dtype(), 0)))
            .collect();
        let n = inputs.len();
        let rooted = matches!(collective, Collective::Broadcast | Collective::Reduce);
        if rooted && root >= n {
            return Err(CommError::BadRoot { root, algorithm: algorithm.name.clone(), participants: n });
        }
        // Only broadcast and reduce have a root; the others ignore what the caller passed.
        let root = if rooted { root } else { 0 };
        let pes: Vec<_> = plan.participants().map(|p| p.pe).collect();
        check_inputs(collective, &pes, &inputs)?;
        let facts = CallFacts { collective, op, root, counts: counts.clone() };
        facts
            .counts_for(&inputs.iter().map(Tile::len).collect::<Vec<_>>())
            .map_err(|source| CommError::Counts { collective, source })?;
        let timing_only = self.options.timing_only;
        // A timing-only call's starting outputs carry no data, as its tiles do.
        let before: Vec<Tile> = tile::without_data_while(timing_only, || {
            (0..n).map(|rank| starting_output(&facts, &inputs[rank], rank, n)).collect()
        });
        let generation = self.take_generation(generation)?;
        let largest_input = inputs.iter().map(Tile::len).max().unwrap_or(0);
        let checked = !timing_only;
        Ok(Staged { facts, inputs, before, largest_input, checked, call: Call { op, root, generation } })
    }

    /// The report of a call `staged` for `prepared` on `tensor` that ran as `run` (with its exact
    /// check), its postcondition checked, and its output tensor.
    ///
    /// # Errors
    /// [`CommError::Reference`] when the postcondition's reference cannot be made.
    pub(super) fn finish(
        &self,
        prepared: &PreparedCall,
        staged: Staged,
        tensor: &DistTensor,
        run: RunReport,
        exact: Option<Exactness>,
    ) -> Result<(DistTensor, CallReport), CommError> {
        let PreparedCall { collective, algorithm, reason, plan, .. } = prepared;
        let collective = *collective;
        let Staged { facts, inputs, before, largest_input, call: Call { op, generation, .. }, .. } = staged;
        let timing_only = self.options.timing_only;
        let outputs: Vec<Tile> = run.pes().iter().map(|p| p.output.clone()).collect();
        let element = tensor.dtype().size() as u64;
        // What a rank sends, for the exchanges by counts, whose outputs are as uneven as their counts.
        let sized = if collective.takes_counts() { &outputs[..0] } else { &outputs[..] };
        let size = sized.iter().map(Tile::len).fold(largest_input, usize::max) as u64 * element;
        let postcondition = if timing_only {
            Postcondition::held()
        } else {
            postcondition::check(&facts, &inputs, &before, &outputs)
                .map_err(|source| CommError::Reference { collective, source })?
        };
        let out = output_tensor(collective, tensor, run.pes().iter().map(|p| (p.pe, p.output.clone())))?;
        let report = CallReport {
            collective,
            algorithm: algorithm.name.clone(),
            reason: reason.clone(),
            generation,
            bytes_per_sip: prepared.bytes_per_sip(),
            size,
            op,
            checked: !timing_only,
            postcondition,
            exact,
            plan: Arc::clone(plan),
            run,
        };
        Ok((out, report))
    }

    /// The generation of the next call: `given`, or the one after the last.
    fn take_generation(&mut self, given: Option<u64>) -> Result<u64, CommError> {
        let next = given.unwrap_or(self.last_generation.saturating_add(1));
        if next == 0 || next <= self.last_generation || next > MAX_GENERATION {
            return Err(CommError::Generation { given: next, last: self.last_generation });
        }
        self.last_generation = next;
        Ok(next)
    }
}

/// A call made ready to run ([`Communicator::stage`]).
pub(super) struct Staged {
    facts: CallFacts,
    /// Its inputs, per participant in rank order, while they are needed: to check the outputs against.
    inputs: Vec<Tile>,
    /// Its outputs as they start, as long as its inputs are kept.
    before: Vec<Tile>,
    /// The most elements a rank's input holds.
    largest_input: usize,
    /// Whether its outputs will be checked against its inputs (not in a timing-only call).
    checked: bool,
    pub(super) call: Call,
}

impl Staged {
    /// Its buffers, per participant in rank order: copies of its inputs and starting outputs when the
    /// outputs will be checked against them, else the lists themselves, which it no longer holds (a
    /// timing-only call of a million PEs would hold two tiles a rank more through its run).
    pub(super) fn buffers(&mut self) -> Vec<PeBuffers> {
        let pair = |(input, output)| PeBuffers { input, output };
        if self.checked {
            (self.inputs.iter().cloned().zip(self.before.iter().cloned())).map(pair).collect()
        } else {
            (std::mem::take(&mut self.inputs).into_iter().zip(std::mem::take(&mut self.before))).map(pair).collect()
        }
    }
}

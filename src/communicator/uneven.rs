//! The exchanges by per-pair counts on a [`Communicator`]: all-to-all-v and groups of sends and
//! receives, each the general [`Communicator::run_prepared`] with the call's counts.

use std::sync::Arc;

use kernbench_core::postcondition::PostconditionError;
use kernbench_core::{Collective, Counts, DistTensor, ReduceOp, Transfer};

use super::{CallOptions, CallReport, CommError, Communicator};

impl Communicator {
    /// All-to-all-v: participant `r` sends `counts.count(r, j)` elements of its shard to participant
    /// `j` (from the start of its shard, to participant 0 first) and ends with what every participant
    /// sent it, in rank order. A shard may hold more than its participant sends.
    ///
    /// # Errors
    /// [`CommError::Counts`] when the counts are not one row and column per participant or a
    /// participant sends more than its shard holds; otherwise as [`Communicator::call`].
    ///
    /// # Examples
    /// ```
    /// use kernbench::{Communicator, Counts, DistTensor, DpPolicy, PeId, System, Tile};
    /// let system = System::shape(2, 1, 1, 1).unwrap();
    /// let tiles = [Tile::from_vec(vec![1.0f32, 2.0, 3.0]), Tile::from_vec(vec![4.0f32, 5.0, 6.0])];
    /// let tensor = DistTensor::distribute(&system, &tiles, 1, 3, DpPolicy::LEADER).unwrap();
    /// // Rank 0 keeps 1 element and sends 2 to rank 1; rank 1 sends all 3 to rank 0.
    /// let counts = Counts::new(vec![vec![1, 2], vec![3, 0]]).unwrap();
    /// let (out, report) = Communicator::new(system).all_to_all_v(&tensor, counts).unwrap();
    /// assert!(report.postcondition.held, "{report}");
    /// // Each output is as long as what its rank receives.
    /// assert_eq!(out.shard(PeId::new(0, 0, 0)).unwrap().to_f64_vec(), [1.0, 4.0, 5.0, 6.0]);
    /// assert_eq!(out.shard(PeId::new(1, 0, 0)).unwrap().to_f64_vec(), [2.0, 3.0]);
    /// ```
    pub fn all_to_all_v(&mut self, tensor: &DistTensor, counts: Counts) -> Result<(DistTensor, CallReport), CommError> {
        let options = CallOptions { counts: Some(Arc::new(counts)), ..CallOptions::default() };
        self.call(Collective::AllToAllV, tensor, ReduceOp::Sum, 0, &options)
    }

    /// A group of point-to-point sends and receives (NCCL's `ncclSend` and `ncclRecv` between
    /// `ncclGroupStart` and `ncclGroupEnd`): each [`Transfer`] sends `count` elements from one
    /// participant to another, at most once per pair; a participant sends from the start of its
    /// shard, to the lowest rank first, and ends with what it received, from the lowest rank first.
    ///
    /// # Errors
    /// [`CommError::Counts`] naming a transfer whose rank is not a participant, a pair listed twice,
    /// or a participant sending more than its shard holds; otherwise as [`Communicator::call`].
    pub fn send_recv(
        &mut self,
        tensor: &DistTensor,
        transfers: &[Transfer],
    ) -> Result<(DistTensor, CallReport), CommError> {
        let collective = Collective::SendRecv;
        let ranks = self.prepare(collective, &tensor.layout(), None)?.ranks();
        let counts = Counts::from_transfers(ranks, transfers)
            .map_err(|e| CommError::Counts { collective, source: PostconditionError::Counts(e) })?;
        let options = CallOptions { counts: Some(Arc::new(counts)), ..CallOptions::default() };
        self.call(collective, tensor, ReduceOp::Sum, 0, &options)
    }
}

//! Teams ([`Team`]): subsets of the run's ranks split as NVSHMEM splits them, a barrier over a
//! team's members, and a multicast object over them. Uses the backend's placement of ranks for the
//! teams of a SIP or a node.

use std::future::poll_fn;

use super::Tl;
use super::backend::with;
use crate::kernel::symmetric::{Multicast, Symmetric, Team, TeamSplitError};
use crate::kernel::{KernelError, Op};
use crate::machine::PeId;
use crate::tile::Dtype;

impl Tl {
    /// Every rank of the run, this PE's rank its team rank (NVSHMEM's `NVSHMEM_TEAM_WORLD`).
    ///
    /// # Errors
    /// [`KernelError::BadTeamSplit`] only on a runtime that gave this PE a rank outside its run.
    pub fn team_world(&self) -> Result<Team, KernelError> {
        Team::world(self.call.size, self.rank()).map_err(|source| self.bad_split(source))
    }

    /// The ranks `start + k * stride` for `k < size` (NVSHMEM's `team_split_strided` of the world
    /// team), or `None` on a rank that is not among them; every rank computes it locally, members and
    /// others alike.
    ///
    /// # Errors
    /// [`KernelError::BadTeamSplit`] for size 0, stride 0 with size above 1, or members past the run's
    /// last rank.
    pub fn team_split_strided(&self, start: usize, stride: usize, size: usize) -> Result<Option<Team>, KernelError> {
        Team::strided(start, stride, size, self.call.size, self.rank()).map_err(|source| self.bad_split(source))
    }

    /// NVSHMEM's `team_split_2d`: the ranks as rows of `x_size`; returns this rank's row (its x team,
    /// `x_size` consecutive ranks) and its column (its y team, the ranks at the same place in their
    /// rows). An `x_size` above the run's size is taken as the run's size, as NVSHMEM does.
    ///
    /// # Errors
    /// [`KernelError::BadTeamSplit`] for an `x_size` of 0.
    pub fn team_split_2d(&self, x_size: usize) -> Result<(Team, Team), KernelError> {
        Team::split_2d(x_size, self.call.size, self.rank()).map_err(|source| self.bad_split(source))
    }

    /// The ranks on this PE's SIP.
    ///
    /// # Errors
    /// [`KernelError::UnknownPlacement`] on a runtime that does not say where ranks run.
    pub fn team_sip(&self) -> Result<Team, KernelError> {
        let sip = self.pe.sip;
        self.team_where(|pe, _| pe.sip == sip)
    }

    /// The ranks on this PE's node (the system's `nodes`; every rank in a system of one node): the
    /// ranks one switch connects, so the team a multicast object can span on a system of several.
    ///
    /// # Errors
    /// [`KernelError::UnknownPlacement`] on a runtime that does not say where ranks run.
    pub fn team_node(&self) -> Result<Team, KernelError> {
        let rank = self.rank();
        let (_, node) = with(|b| b.placement(rank)).ok_or_else(|| self.unknown_placement(rank))?;
        self.team_where(|_, n| n == node)
    }

    /// Waits until every lane of every member of `team` has reached the barrier, and completes the
    /// lane's puts first, as [`Tl::barrier`] does (NVSHMEM's `team_sync` with `quiet`). Ranks outside
    /// the team are not held, and other teams barrier independently. Teams of the same members share
    /// their barrier (their members cannot tell them apart); a team barrier and [`Tl::barrier`] are
    /// two barriers even over the same ranks, so every member calls the same one.
    ///
    /// # Errors
    /// [`KernelError::NotInTeam`] when this rank is not a member.
    pub async fn barrier_team(&self, team: &Team) -> Result<(), KernelError> {
        self.check_member(team, Op::BarrierTeam)?;
        poll_fn(|cx| with(|b| b.poll_barrier_team(team, cx))).await
    }

    /// [`Tl::multicast`] over `team`'s members only: declares the symmetric buffer `name` and spans
    /// it with a multicast object whose `multimem` operations reach, and `multimem_ld_reduce`
    /// combines, only the members' copies (in team-rank order). Every member makes it with the same
    /// shape. On a system of several nodes, [`Tl::team_node`]'s team is the one a switch can span.
    ///
    /// # Errors
    /// [`KernelError::NotInTeam`] when this rank is not a member; as [`Tl::multicast`] for the
    /// members' PEs.
    pub fn multicast_team(
        &self,
        team: &Team,
        name: &'static str,
        dtype: Dtype,
        len: usize,
    ) -> Result<Multicast, KernelError> {
        self.check_member(team, Op::MulticastTeam)?;
        let buffer = Symmetric { name, dtype, len };
        self.one_sided(Op::MulticastTeam, |b| b.multicast(&buffer, team.shared_members()))
    }

    /// The ranks whose PE and node satisfy `keep`, this rank among them.
    fn team_where(&self, keep: impl Fn(PeId, u32) -> bool) -> Result<Team, KernelError> {
        let mut members = Vec::new();
        for rank in 0..self.call.size {
            let (pe, node) = with(|b| b.placement(rank)).ok_or_else(|| self.unknown_placement(rank))?;
            if keep(pe, node) {
                members.push(rank);
            }
        }
        Team::of(members, self.rank())
            .ok_or_else(|| KernelError::kernel(self.pe, "the runtime places this rank outside its own SIP or node"))
    }

    fn check_member(&self, team: &Team, op: Op) -> Result<(), KernelError> {
        let rank = self.rank();
        if team.contains(rank) {
            Ok(())
        } else {
            Err(KernelError::NotInTeam { pe: self.pe, rank, op, team: team.clone() })
        }
    }

    fn bad_split(&self, source: TeamSplitError) -> KernelError {
        KernelError::BadTeamSplit { pe: self.pe, op: Op::TeamSplit, source }
    }

    fn unknown_placement(&self, peer: usize) -> KernelError {
        KernelError::UnknownPlacement { pe: self.pe, op: Op::TeamSplit, peer }
    }
}

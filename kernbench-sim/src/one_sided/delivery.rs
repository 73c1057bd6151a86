//! Between rounds: the round's one-sided operations leave for their channels and are applied to their
//! targets; at the end of a run, what they must have left behind is checked.

use kernbench_core::PeId;

use super::access;
use super::{OneSidedRun, Outgoing};
use crate::error::{LeftRaised, RunError};
use crate::lanes::Lanes;
use crate::timing::Transfer;

/// SplitMix64's finaliser: a seed's order of lanes, the same on every machine.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The flag that marks a transfer's position as an index into its sender's outbox.
pub(crate) const ONE_SIDED: u64 = 1 << 63;

impl OneSidedRun {
    /// Lists the transfers of the one-sided operations rank `rank`'s lanes started this round in `sent`.
    ///
    /// # Safety
    /// Rule M: the calling thread merges `rank`.
    pub(crate) unsafe fn transfers(&self, rank: u32, sent: &mut Vec<Transfer>) {
        // SAFETY: the caller merges `rank`, whose cells are its thread's.
        let Some(memory) = (unsafe { self.pes.get_ref(rank as usize) }) else { return };
        for (i, out) in memory.outbox.iter().enumerate() {
            sent.extend(out.transfer(rank, ONE_SIDED | i as u64));
        }
    }

    /// Applies the round's one-sided operations to their targets (rule B) in the order they land in
    /// simulated time; those that land at the same time rank by rank, each PE's in the order its lanes
    /// made them, or, under a [schedule](crate::RunOptions::schedule), lane by lane in the seed's
    /// order (and, with a jitter, operations that land close together too). Wakes the lanes waiting on
    /// what they change.
    ///
    /// # Errors
    /// A race (a put's write unordered with an access already made), or a put into a buffer declared
    /// with another shape on its target.
    pub(crate) fn deliver(&mut self, polled: &[u32], lanes: &mut Lanes<'_>) -> Result<(), RunError> {
        let mut round: Vec<Outgoing> = Vec::new();
        for &rank in polled {
            let Some(memory) = self.pes.get(rank as usize) else { continue };
            round.append(&mut memory.outbox);
        }
        self.in_delivery_order(&mut round, |out| out);
        // A multimem operation that reaches a member that has not joined fails before any of the
        // round's operations touches memory: what it would have done there is moot.
        for out in &round {
            self.check_joined(out, lanes)?;
        }
        for out in round {
            self.apply(out, true, lanes)?;
        }
        Ok(())
    }

    /// Sorts a round's operations, gathered rank by rank and each PE's in the order its lanes made them,
    /// into the order they are applied: by when they land, ties as gathered or, under a schedule, lane
    /// by lane in the seed's order (shifted by the seed's jitter). The one order of every process.
    pub(crate) fn in_delivery_order<T>(&self, round: &mut [T], out: impl Fn(&T) -> &Outgoing) {
        match self.schedule {
            // Stable: ties keep the order they were gathered in.
            None => round.sort_by(|a, b| out(a).arrive_ns.total_cmp(&out(b).arrive_ns)),
            Some(seed) => {
                let lane_order = |task: u32| splitmix(seed ^ splitmix(u64::from(task)));
                // A lane's own offset keeps its operations in their order; the jitter lets lanes'
                // operations that land close together be applied in either order.
                let unit = |task: u32| (lane_order(task) >> 11) as f64 / (1u64 << 53) as f64;
                let key = |out: &Outgoing| out.arrive_ns + self.jitter_ns * unit(out.task);
                round.sort_by(|a, b| {
                    let (a, b) = (out(a), out(b));
                    key(a).total_cmp(&key(b)).then_with(|| lane_order(a.task).cmp(&lane_order(b.task)))
                });
            }
        }
    }

    /// Every signal of this process's PEs raised beyond what waits (and resets) took, keyed by rank: a
    /// raise nobody waited for is a message nobody received.
    pub(crate) fn left_raised(&mut self, lanes: &Lanes<'_>) -> Vec<(u64, LeftRaised)> {
        let mut left = Vec::new();
        let pes = lanes.tasks.pes();
        for rank in (0..pes.len() as u32).filter(|&rank| lanes.tasks.holds(rank)) {
            let Some(memory) = self.pes.get(rank as usize) else { continue };
            for (signal, s) in memory.signals.slots.iter().enumerate() {
                for (generation, value, waited) in s.generations() {
                    if value > waited {
                        let pe: PeId = pes[rank as usize];
                        left.push((u64::from(rank), LeftRaised { pe, signal, generation, value, waited }));
                    }
                }
            }
        }
        left
    }

    /// Under the race detector: the first put that was neither completed by a quiet or barrier of its
    /// lane nor seen (through a signal, message or barrier) by a lane of its target, so that nothing
    /// says it landed before the kernels ended.
    pub(crate) fn unlanded_put(&mut self, lanes: &mut Lanes<'_>) -> Option<RunError> {
        let puts = std::mem::take(&mut self.puts);
        for put in &puts {
            let quieted = lanes.states.get(put.task as usize).sync_ref().is_some_and(|s| s.quieted >= put.seq);
            let mut target_lanes = lanes.tasks.lanes_of(put.to);
            let seen = target_lanes.any(|task| lanes.states.get(task).sync_ref().is_some_and(|s| s.saw(&put.stamp)));
            if !(quieted || seen) {
                return Some(RunError::PutNotLanded {
                    put: access(&lanes.tasks, &put.stamp),
                    to: lanes.tasks.pe(put.to),
                    buffer: put.buffer,
                    bytes: put.bytes.clone(),
                });
            }
        }
        None
    }
}

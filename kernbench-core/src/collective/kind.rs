//! The kinds of collective operation the registry selects algorithms for.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::quote::Quoted;

/// A collective operation over all ranks.
///
/// # Examples
/// ```
/// use kernbench_core::Collective;
/// assert_eq!("all_reduce".parse::<Collective>().unwrap(), Collective::AllReduce);
/// assert_eq!(Collective::ReduceScatter.to_string(), "reduce_scatter");
/// // nccl-tests' names (its programs' names without `_perf`) work too.
/// assert_eq!("alltoallv".parse::<Collective>().unwrap(), Collective::AllToAllV);
/// let err = "all_reduc".parse::<Collective>().unwrap_err();
/// assert!(err.to_string().contains("all_reduce, all_gather"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    /// Every rank ends with the reduction of all ranks' tensors.
    AllReduce,
    /// Every rank ends with every rank's tensor, in rank order.
    AllGather,
    /// Rank `r` ends with chunk `r` of the reduction of all ranks' tensors.
    ReduceScatter,
    /// Every rank ends with the root's tensor.
    Broadcast,
    /// The root ends with the reduction of all ranks' tensors.
    Reduce,
    /// Rank `r` ends with chunk `r` of every rank's tensor, in rank order.
    AllToAll,
    /// All-to-all with per-pair counts ([`Counts`](crate::counts::Counts)): rank `r` ends with what
    /// every rank sends it, in rank order.
    AllToAllV,
    /// A group of point-to-point sends and receives, also given by per-pair counts: each rank ends
    /// with what the ranks that send to it sent, in rank order.
    SendRecv,
}

impl Collective {
    /// Every collective.
    pub const ALL: [Collective; 8] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllToAll,
        Collective::AllToAllV,
        Collective::SendRecv,
    ];

    /// The name used in JSON, on the command line and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::AllToAll => "all_to_all",
            Collective::AllToAllV => "all_to_all_v",
            Collective::SendRecv => "send_recv",
        }
    }

    /// nccl-tests' name: its program's (`all_reduce_perf`, `sendrecv_perf`) without `_perf`.
    pub const fn nccl_tests_name(self) -> &'static str {
        match self {
            Collective::AllReduce => "allreduce",
            Collective::AllGather => "allgather",
            Collective::ReduceScatter => "reducescatter",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::AllToAll => "alltoall",
            Collective::AllToAllV => "alltoallv",
            Collective::SendRecv => "sendrecv",
        }
    }

    /// Whether a call of it takes per-pair [`Counts`](crate::counts::Counts).
    pub const fn takes_counts(self) -> bool {
        matches!(self, Collective::AllToAllV | Collective::SendRecv)
    }

    /// nccl-tests' bus-bandwidth factor over `ranks` ranks: `busbw = algbw * factor`, so that busbw is
    /// the bandwidth a rank's link needs for the collective's time, whatever the collective.
    ///
    /// | collective | factor |
    /// | --- | --- |
    /// | all_reduce | 2(n-1)/n |
    /// | all_gather, reduce_scatter, all_to_all, all_to_all_v | (n-1)/n |
    /// | broadcast, reduce, send_recv | 1 |
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::Collective;
    /// assert_eq!(Collective::AllReduce.busbw_factor(4), 1.5);
    /// assert_eq!(Collective::AllGather.busbw_factor(8), 0.875);
    /// assert_eq!(Collective::Broadcast.busbw_factor(4), 1.0);
    /// assert_eq!(Collective::AllReduce.busbw_factor(1), 0.0);
    /// ```
    pub fn busbw_factor(self, ranks: usize) -> f64 {
        let n = ranks.max(1) as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll | Collective::AllToAllV => {
                (n - 1.0) / n
            }
            Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
        }
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that names no collective.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown collective `{}`: expected one of all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, \
     all_to_all_v, send_recv (or nccl-tests' names: allreduce, allgather, reducescatter, alltoall, alltoallv, sendrecv)",
    Quoted(&self.0)
)]
pub struct ParseCollectiveError(pub String);

impl FromStr for Collective {
    type Err = ParseCollectiveError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Collective::ALL
            .into_iter()
            .find(|c| c.name() == s || c.nccl_tests_name() == s)
            .ok_or_else(|| ParseCollectiveError(s.to_owned()))
    }
}

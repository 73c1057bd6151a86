//! The collective operations the registry selects algorithms for.

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
/// let err = "allreduce".parse::<Collective>().unwrap_err();
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
}

impl Collective {
    /// Every collective.
    pub const ALL: [Collective; 6] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllToAll,
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
    "unknown collective `{}`: expected one of all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all",
    Quoted(&self.0)
)]
pub struct ParseCollectiveError(pub String);

impl FromStr for Collective {
    type Err = ParseCollectiveError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Collective::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| ParseCollectiveError(s.to_owned()))
    }
}

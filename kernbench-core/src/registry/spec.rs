//! The registry as a JSON file writes it: algorithms by name and selection rules per collective.
//!
//! These types are stable and serialisable, and hold names; [`Registry`](crate::registry::Registry)
//! resolves them into typed values once.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::collective::Collective;
use crate::kernel::Params;
use crate::plan::LayoutKind;

/// Where a kernel keeps its working data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BufferKind {
    /// The PE's tightly coupled memory: fast and small.
    Tcm,
    /// High-bandwidth memory: large and slower.
    Hbm,
}

impl fmt::Display for BufferKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BufferKind::Tcm => "tcm",
            BufferKind::Hbm => "hbm",
        })
    }
}

/// One algorithm as the JSON describes it (its name is its key in `algorithms`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlgorithmSpec {
    /// The collective it implements.
    pub collective: Collective,
    /// The kernel's registered name.
    pub kernel: String,
    /// A built-in topology name.
    pub topology: String,
    /// A built-in mapper name.
    pub mapper: String,
    /// A built-in validator name.
    pub validator: String,
    /// Where the kernel keeps its data.
    pub buffer_kind: BufferKind,
    /// The kernel's default scalar parameters.
    #[serde(default)]
    pub params: Params,
    /// One line for listings.
    #[serde(default)]
    pub summary: String,
}

/// One selection rule: an algorithm and the conditions under which it is chosen. A rule without
/// conditions matches everything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionRule {
    /// The algorithm chosen.
    pub algorithm: String,
    /// Matches when bytes per SIP are at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_bytes: Option<u64>,
    /// Matches when bytes per SIP are at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Matches only this kind of layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<LayoutKind>,
}

impl SelectionRule {
    /// The conditions this rule holds `bytes` and `layout` to, with whether each is met.
    pub(crate) fn conditions(&self, bytes: u64, layout: LayoutKind) -> Vec<(bool, String)> {
        let mut out = Vec::new();
        if let Some(min) = self.min_bytes {
            out.push((bytes >= min, format!("bytes {bytes} >= min_bytes {min}")));
        }
        if let Some(max) = self.max_bytes {
            out.push((bytes <= max, format!("bytes {bytes} <= max_bytes {max}")));
        }
        if let Some(want) = self.layout {
            out.push((layout == want, format!("layout {layout} is {want}")));
        }
        out
    }
}

impl fmt::Display for SelectionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut conditions = Vec::new();
        if let Some(min) = self.min_bytes {
            conditions.push(format!("min_bytes {min}"));
        }
        if let Some(max) = self.max_bytes {
            conditions.push(format!("max_bytes {max}"));
        }
        if let Some(layout) = self.layout {
            conditions.push(format!("layout {layout}"));
        }
        if conditions.is_empty() {
            write!(f, "{} (always)", self.algorithm)
        } else {
            write!(f, "{} ({})", self.algorithm, conditions.join(", "))
        }
    }
}

/// A registry file (`ccl.json`) as written, before any check.
///
/// ```json
/// {"algorithms": {
///    "ring": {"collective": "all_reduce", "kernel": "ring_allreduce", "topology": "ring_1d",
///             "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "tcm",
///             "params": {"chunks": 4}, "summary": "bandwidth-optimal ring"}},
///  "selection": {
///    "all_reduce": [{"algorithm": "recursive_doubling", "max_bytes": 65536},
///                   {"algorithm": "hierarchical_allreduce", "layout": "multi_pe"},
///                   {"algorithm": "ring"}]}}
/// ```
///
/// A selection rule's `min_bytes` and `max_bytes` are inclusive bounds on bytes per SIP; `layout`
/// is `one_pe` or `multi_pe`. Resolve it with [`Registry::from_spec`](crate::registry::Registry::from_spec).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistrySpec {
    /// Algorithms by name.
    #[serde(default)]
    pub algorithms: BTreeMap<String, AlgorithmSpec>,
    /// Selection rules per collective, tried in order.
    #[serde(default)]
    pub selection: BTreeMap<Collective, Vec<SelectionRule>>,
}

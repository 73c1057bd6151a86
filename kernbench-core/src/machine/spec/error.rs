//! Why a system spec was rejected: [`SpecError`], each variant naming the field, the value and what
//! would be valid.

use std::path::PathBuf;

use super::{SipInterconnect, System};
use crate::machine::PeId;

/// Why a system spec was rejected. Each of these is the configuration's fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The JSON is malformed, has a field the spec does not know, lacks a required one or holds a value
    /// of the wrong type. The message is the decoder's: it names the field, the expected ones, and the
    /// line and column.
    #[error("invalid system spec: {}", crate::quote::decoder_message(&error.to_string()))]
    Json {
        /// The decoder's error, also the error's [`source`](std::error::Error::source) (its line and
        /// column, its category). Its own message may quote a user's name whole and on several lines,
        /// where this one shortens and escapes it: print this one, not both.
        #[source]
        error: serde_json::Error,
    },
    /// A size that must be at least 1 is 0.
    #[error("system spec field `{field}` is 0: expected at least 1")]
    ZeroSize {
        /// `sips`, `mesh.w`, `mesh.h` or `pes_per_cube`.
        field: &'static str,
    },
    /// A bandwidth or rate below [`System::MIN_RATE`] or not a finite number: a slower one would make
    /// simulated times overflow to infinity.
    #[error(
        "system spec field `{field}` is {value:?}: expected a finite number of at least {min} (1e9 units per second)",
        min = System::MIN_RATE
    )]
    BadRate {
        /// The field's path, e.g. `links.inter_sip.bandwidth_gbps`.
        field: String,
        /// The value found.
        value: f64,
    },
    /// A latency or overhead that is negative, above [`System::MAX_TIME_NS`] or not a finite number.
    #[error(
        "system spec field `{field}` is {value:?}: expected a number of ns from 0 to {max:e}",
        max = System::MAX_TIME_NS
    )]
    BadTime {
        /// The field's path, e.g. `pe.injection_ns`.
        field: String,
        /// The value found.
        value: f64,
    },
    /// `pe.engines` is 0 or more than [`System::MAX_ENGINES`].
    #[error("system spec field `pe.engines` is {engines}: expected 1 to {limit} engines", limit = System::MAX_ENGINES)]
    BadEngines {
        /// The count given.
        engines: usize,
    },
    /// `protocols` is given but names none: no message could be carried.
    #[error("system spec field `protocols` names no protocol: expected at least one of simple, ll, ll128")]
    NoProtocols,
    /// `ipcq_depth` is 0, so no message could ever be sent.
    #[error("system spec field `ipcq_depth` is 0: expected at least 1 queue slot")]
    ZeroIpcqDepth,
    /// `ipcq_depth` is more slots than a queue may have (each directed edge allocates them all).
    #[error(
        "system spec field `ipcq_depth` is {depth}: expected at most {limit} queue slots",
        limit = System::MAX_IPCQ_DEPTH
    )]
    DeepIpcq {
        /// The depth given.
        depth: usize,
    },
    /// The system has more PEs than the simulator supports (or than a `usize` can count).
    #[error(
        "system of {sips} SIPs x {w}x{h} cubes x {pes_per_cube} PEs is too large: expected at most {limit} PEs in total",
        limit = System::MAX_PES
    )]
    TooLarge {
        /// `sips`.
        sips: usize,
        /// `mesh.w`.
        w: usize,
        /// `mesh.h`.
        h: usize,
        /// `pes_per_cube`.
        pes_per_cube: usize,
    },
    /// `sips` is not a whole number of nodes.
    #[error(
        "system spec field `sips` is {sips}, not a multiple of `nodes.sips_per_node` ({sips_per_node}): expected whole nodes, a multiple of {sips_per_node} SIPs"
    )]
    PartialNode {
        /// `sips`.
        sips: usize,
        /// `nodes.sips_per_node`.
        sips_per_node: usize,
    },
    /// `nodes.nics_per_node` is 0 or more than a node has SIPs.
    #[error(
        "system spec field `nodes.nics_per_node` is {nics}: expected 1 to {sips_per_node} NICs (at most one per SIP of a node)"
    )]
    BadNics {
        /// The count given.
        nics: usize,
        /// `nodes.sips_per_node`.
        sips_per_node: usize,
    },
    /// A system of several nodes whose SIPs are not `switched`: a node's NICs hang off its switch.
    #[error(
        "system spec field `sip_interconnect` is `{interconnect}` in a system of several nodes: expected `switched` (a node's NICs attach to its switch)"
    )]
    NodesNotSwitched {
        /// The interconnect given.
        interconnect: SipInterconnect,
    },
    /// `switch` is given on a system that is not `switched`: only a switch multicasts and reduces.
    #[error(
        "system spec field `switch` is given but `sip_interconnect` is `{interconnect}`: expected `switched` (multicast and in-switch reduction are a switch's), or no `switch`"
    )]
    SwitchNotSwitched {
        /// The interconnect given.
        interconnect: SipInterconnect,
    },
    /// The spec file could not be read.
    #[error("cannot read system spec file `{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A spec file's content was rejected; `source` says why.
    #[error("in system spec file `{}`: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with its content.
        source: Box<SpecError>,
    },
}

/// Why a multicast object cannot span a set of PEs on a system ([`System::check_multicast`]): the
/// configuration's fault (the system, or the PEs an algorithm's mapper chose).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MulticastError {
    /// The SIPs are not behind a switch.
    #[error(
        "multicast needs a switch: the system's `sip_interconnect` is `{interconnect}`; expected `switched` with `\"switch\": {{\"multicast\": true, ...}}`"
    )]
    NotSwitched {
        /// The interconnect the system has.
        interconnect: SipInterconnect,
    },
    /// The switch only forwards.
    #[error(
        "the system's switch has no multicast ({}): expected a spec with `\"switch\": {{\"multicast\": true, \"reduce_gbps\": ...}}`",
        if *given { "its `switch.multicast` is false" } else { "its spec gives no `switch`" }
    )]
    NoMulticast {
        /// Whether the spec gives a `switch` (one whose `multicast` is false).
        given: bool,
    },
    /// A member does not hang off the switch by one link: only a SIP's leader (cube 0, PE 0) does.
    #[error(
        "{member} cannot be a member of a multicast object on {system}: expected SIP leaders (cube 0, PE 0), which the switch reaches by one link (mapper leader_only)"
    )]
    OffSwitch {
        /// The member.
        member: PeId,
        /// The system's shape.
        system: String,
    },
    /// Members in two nodes: each node has its own switch, and a multicast object spans one.
    #[error(
        "{first} (node {first_node}) and {member} (node {node}) are behind different switches: a multicast object spans one node's switch; expected members of one node (two-level NVLS across nodes is not modelled)"
    )]
    AcrossNodes {
        /// The first member.
        first: PeId,
        /// Its node.
        first_node: u32,
        /// A member of another node.
        member: PeId,
        /// Its node.
        node: u32,
    },
}

impl From<serde_json::Error> for SpecError {
    fn from(error: serde_json::Error) -> Self {
        SpecError::Json { error }
    }
}

impl SpecError {
    /// The error without the file it came from: what is wrong, whichever way the spec was read.
    pub fn root(&self) -> &SpecError {
        match self {
            SpecError::InFile { source, .. } => source.root(),
            other => other,
        }
    }
}

//! A resolved algorithm: a kernel with its arguments bound, and the topology, mapper and validator that
//! place it on a system, all as values.

use std::fmt;
use std::sync::Arc;

use crate::collective::Collective;
use crate::collective::tuning::{self, Pattern};
use crate::kernel::{KernelDef, Launch, Params};
use crate::machine::{Protocol, ProtocolChoice, System};
use crate::names::Builtin;
use crate::plan::{CheckedPlan, InstallPlan, Layout, Mapper, PlanError, TopologyFn, ValidationError, ValidatorFn};
use crate::registry::{AlgorithmSpec, BufferKind};

/// One algorithm of a [`Registry`](crate::registry::Registry), resolved when the registry was loaded:
/// nothing it holds is looked up by name again.
/// See [`Registry`](crate::registry::Registry) for an example.
pub struct Algorithm {
    /// The algorithm's name in the registry.
    pub name: String,
    /// The collective it implements.
    pub collective: Collective,
    /// Its kernel.
    pub kernel: &'static KernelDef,
    /// The kernel's parameters as the registry gives them (already bound into the kernel).
    pub params: Params,
    /// The topology that links its participants.
    pub topology: Builtin<TopologyFn>,
    /// The mapper that chooses its participants.
    pub mapper: Builtin<Mapper>,
    /// The validator that checks a tensor's layout against its plan.
    pub validator: Builtin<ValidatorFn>,
    /// Where the kernel keeps its data.
    pub buffer_kind: BufferKind,
    /// One line for listings.
    pub summary: String,
    /// The protocol its `protocol` parameter names (`auto`, `simple`, `ll`, `ll128`), if it has one: a
    /// parameter of the call, which every algorithm may take and no kernel sees.
    pub protocol: Option<ProtocolChoice>,
    pub(crate) launch: Arc<dyn Launch>,
}

impl Algorithm {
    /// The kernel with the algorithm's parameters bound, ready to start on every participant.
    pub fn launch(&self) -> &dyn Launch {
        &*self.launch
    }

    /// The state, in bytes, that each PE (and each lane of a PE) holds while the kernel runs: its
    /// kernel's ([`Launch::state_bytes`](crate::kernel::Launch)).
    pub fn state_bytes(&self) -> usize {
        self.launch().state_bytes()
    }

    /// The algorithm's install plan on `system`: its mapper's participants linked by its topology.
    ///
    /// # Errors
    /// As [`InstallPlan::build_with`].
    pub fn plan(&self, system: &System) -> Result<CheckedPlan, PlanError> {
        InstallPlan::build_with(system, self.topology, self.mapper)
    }

    /// Whether a tensor of `layout` fits `plan`, by the algorithm's validator.
    ///
    /// # Errors
    /// The validator's [`ValidationError`].
    pub fn validate(&self, plan: &InstallPlan, layout: &Layout) -> Result<(), ValidationError> {
        (self.validator.function)(plan, layout)
    }

    /// Its shape as NCCL's tuning model sees it, from its topology: a ring over the ranks or a tree;
    /// `None` for any other, whose `auto` protocol is `Simple`.
    pub fn pattern(&self) -> Option<Pattern> {
        match self.topology.name() {
            "ring_1d" => Some(Pattern::Ring),
            "tree" | "double_binary_tree" => Some(Pattern::Tree),
            _ => None,
        }
    }

    /// How a call of `bytes` (NCCL's `nBytes`) runs over `plan` on `system`: its protocol
    /// ([`Algorithm::protocol_on`]) and, for a ring or tree on a system with protocols, the lanes it
    /// runs on as NCCL chooses a call's channels ([`tuning::lanes_for`]); `None`: all of its lanes.
    pub fn tuned_on(&self, system: &System, plan: &InstallPlan, bytes: u64) -> Tuned {
        let protocol = self.protocol_on(system, plan, bytes);
        let lanes = match (system.protocols(), self.pattern(), protocol) {
            (Some(_), Some(pattern), Some(protocol)) => {
                let (ranks, lanes) = (plan.len(), self.launch.lanes(0, plan.len()));
                Some(tuning::lanes_for(protocol, pattern, ranks, bytes, lanes))
            }
            _ => None,
        };
        Tuned { protocol, lanes }
    }

    /// The protocol a call of `bytes` (NCCL's `nBytes`: an all-gather's output, a reduce-scatter's
    /// input, the buffer of the others) runs by over `plan` on `system`:
    /// - the one its `protocol` parameter names, whatever the system (a run on a system without it
    ///   fails, naming those it has);
    /// - on a system without protocols, none: its messages are carried as data;
    /// - the kernel's own ([`Launch::protocol`]: an MSCCL-IR file's `proto`) when the system gives it;
    /// - otherwise (`auto`) the one NCCL's tuning model picks ([`tuning::pick`]) for a ring or tree
    ///   ([`Algorithm::pattern`]) over the farthest link class its ranks reach, on its lanes; `Simple`
    ///   (or the first the system gives) for any other algorithm.
    pub fn protocol_on(&self, system: &System, plan: &InstallPlan, bytes: u64) -> Option<Protocol> {
        if let Some(ProtocolChoice::Only(protocol)) = self.protocol {
            return Some(protocol);
        }
        let protocols = system.protocols()?;
        let ranks = plan.len();
        let own = (self.protocol.is_none()).then(|| self.launch.protocol(ranks)).flatten();
        if let Some(own) = own.filter(|&p| protocols.get(p).is_some()) {
            return Some(own);
        }
        let fallback = || if protocols.simple.is_some() { Some(Protocol::Simple) } else { protocols.given().next() };
        let Some(pattern) = self.pattern() else { return fallback() };
        let class = plan.farthest_class(system)?;
        let lanes = self.launch.lanes(0, ranks);
        tuning::pick(system, (pattern, self.collective, ranks), class, lanes, bytes).or_else(fallback)
    }

    /// The algorithm as the registry file writes it.
    pub fn spec(&self) -> AlgorithmSpec {
        AlgorithmSpec {
            collective: self.collective,
            kernel: self.kernel.name.to_owned(),
            topology: self.topology.name().to_owned(),
            mapper: self.mapper.name().to_owned(),
            validator: self.validator.name().to_owned(),
            buffer_kind: self.buffer_kind,
            params: self.params.clone(),
            summary: self.summary.clone(),
        }
    }
}

/// How one call of an algorithm runs on a system ([`Algorithm::tuned_on`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuned {
    /// The protocol its messages are carried by; `None`: as data.
    pub protocol: Option<Protocol>,
    /// The most lanes a PE runs it on; `None`: as many as its kernel has.
    pub lanes: Option<usize>,
}

impl fmt::Debug for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Algorithm")
            .field("name", &self.name)
            .field("collective", &self.collective)
            .field("kernel", &self.kernel.name)
            .field("params", &self.params)
            .field("topology", &self.topology)
            .field("mapper", &self.mapper)
            .field("validator", &self.validator)
            .field("buffer_kind", &self.buffer_kind)
            .finish_non_exhaustive()
    }
}

/// Two algorithms are equal when the registry file would write them alike: the bound kernel follows
/// from the kernel and its parameters.
impl PartialEq for Algorithm {
    fn eq(&self, other: &Algorithm) -> bool {
        self.name == other.name && self.kernel.name == other.kernel.name && self.spec() == other.spec()
    }
}

impl Eq for Algorithm {}

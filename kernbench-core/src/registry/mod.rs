//! The algorithm registry (`ccl.json`): which kernel, topology, mapper and validator make up each
//! algorithm, and which algorithm to pick for a collective, a size and a layout. Uses
//! [`machine`](crate::machine), [`collective`](crate::collective) (the kinds it selects for),
//! [`kernel`](crate::kernel) (the kernels it binds) and [`plan`](crate::plan).
//!
//! Two stages: a [`RegistrySpec`] is what the JSON says, names and all; a [`Registry`] is that spec
//! resolved against a [`KernelSet`] into [`Algorithm`]s that hold their kernel (arguments bound),
//! topology, mapper and validator as values. An unknown name fails once, at load, with the names
//! that would be valid; nothing is looked up by name after that.
//!
//! Rules are tried in order and the first that matches wins. Messages count rules from 1.

mod algorithm;
mod spec;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

pub use algorithm::{Algorithm, Tuned};
pub use spec::{AlgorithmSpec, BufferKind, RegistrySpec, SelectionRule};

use crate::collective::Collective;
use crate::kernel::{ArgsError, KernelSet, UnknownKernel};
use crate::machine::UnknownProtocol;
use crate::names::UnknownName;
use crate::plan::{LayoutKind, mapper_by_name, topology_by_name, validator_by_name};
use crate::quote::Quoted;

/// The algorithm a selection chose, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection<'a> {
    /// The chosen algorithm.
    pub algorithm: &'a Arc<Algorithm>,
    /// The index of the matching rule in [`Registry::rules`] (from 0).
    pub rule_index: usize,
    /// Why: `rule 1 of all_reduce (recursive_doubling): bytes 1024 <= max_bytes 65536` (rules counted
    /// from 1, as people count).
    pub reason: String,
}

/// Why a registry was rejected or a lookup failed. Loading errors are the registry file's fault and
/// name the field (`algorithms.ring.topology`, `selection.all_reduce rule 2`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Malformed JSON, an unknown or missing field, an unknown collective or a value of the wrong type.
    /// The decoder's message names the field, what was expected, and the line and column.
    #[error("invalid registry: {}", crate::quote::decoder_message(&error.to_string()))]
    Json {
        /// The decoder's error, also the error's [`source`](std::error::Error::source) (its line and
        /// column, its category). Its own message may quote a user's name whole and on several lines,
        /// where this one shortens and escapes it: print this one, not both.
        #[source]
        error: serde_json::Error,
    },
    /// An algorithm names a topology, mapper or validator that does not exist.
    #[error("registry field `{field}`: {source}")]
    UnknownComponent {
        /// `algorithms.<name>.topology`, `.mapper` or `.validator`, the name quoted as errors quote it.
        field: String,
        /// The name and the known ones.
        source: UnknownName,
    },
    /// A selection rule names an algorithm the registry does not have.
    #[error(
        "registry field `selection.{collective}` rule {rule}: unknown algorithm `{}`: expected one of the \
         {collective} algorithms [{}]",
        Quoted(algorithm),
        quoted_list(known)
    )]
    UnknownRuleAlgorithm {
        /// The collective.
        collective: Collective,
        /// The rule, counted from 1.
        rule: usize,
        /// The name in the rule.
        algorithm: String,
        /// The algorithms of this collective.
        known: Vec<String>,
    },
    /// A selection rule names an algorithm of another collective.
    #[error(
        "registry field `selection.{collective}` rule {rule}: algorithm `{}` implements {actual}: expected \
         an algorithm of {collective}",
        Quoted(algorithm)
    )]
    RuleCollectiveMismatch {
        /// The collective of the rule list.
        collective: Collective,
        /// The rule, counted from 1.
        rule: usize,
        /// The algorithm named.
        algorithm: String,
        /// The collective that algorithm implements.
        actual: Collective,
    },
    /// A rule whose byte bounds exclude every size.
    #[error(
        "registry field `selection.{collective}` rule {rule}: min_bytes {min} > max_bytes {max}: expected \
         min_bytes <= max_bytes (both bounds are inclusive)"
    )]
    EmptyBounds {
        /// The collective.
        collective: Collective,
        /// The rule, counted from 1.
        rule: usize,
        /// `min_bytes`.
        min: u64,
        /// `max_bytes`.
        max: u64,
    },
    /// A lookup of an algorithm name the registry does not have.
    #[error("unknown algorithm `{}`: expected one of [{}]", Quoted(name), quoted_list(known))]
    UnknownAlgorithm {
        /// The name asked for.
        name: String,
        /// The names the registry has.
        known: Vec<String>,
    },
    /// No selection rule matched.
    #[error(
        "no selection rule of {collective} matches {bytes} bytes per SIP with a {layout} layout; {}",
        describe_rules(*collective, rules)
    )]
    NoRule {
        /// The collective.
        collective: Collective,
        /// Bytes per rank asked for.
        bytes: u64,
        /// Layout asked for.
        layout: LayoutKind,
        /// The collective's rules.
        rules: Vec<SelectionRule>,
    },
    /// An algorithm's kernel is not in the kernel set.
    #[error("registry field `algorithms.{}.kernel`: {source}", Quoted(algorithm))]
    MissingKernel {
        /// The algorithm.
        algorithm: String,
        /// The kernel name and the known ones.
        source: UnknownKernel,
    },
    /// An algorithm's params do not fit its kernel's arguments.
    #[error("registry field `algorithms.{}.params`: {source}", Quoted(algorithm))]
    KernelArgs {
        /// The algorithm.
        algorithm: String,
        /// What does not fit.
        source: ArgsError,
    },
    /// An algorithm's `protocol` parameter names no protocol.
    #[error("registry field `algorithms.{}.params.protocol`: {source}", Quoted(algorithm))]
    BadProtocol {
        /// The algorithm.
        algorithm: String,
        /// The value and the valid ones.
        source: UnknownProtocol,
    },
    /// The registry file could not be read.
    #[error("cannot read registry file `{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A registry file's content was rejected; `source` says why.
    #[error("in registry file `{}`: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with its content.
        source: Box<RegistryError>,
    },
}

/// Algorithm names, which a user's registry chose, as an error lists them.
fn quoted_list(names: &[String]) -> String {
    names.iter().map(|n| Quoted(n).to_string()).collect::<Vec<_>>().join(", ")
}

impl From<serde_json::Error> for RegistryError {
    fn from(error: serde_json::Error) -> Self {
        RegistryError::Json { error }
    }
}

impl RegistryError {
    /// The error without the file it came from.
    pub fn root(&self) -> &RegistryError {
        match self {
            RegistryError::InFile { source, .. } => source.root(),
            other => other,
        }
    }
}

fn describe_rules(collective: Collective, rules: &[SelectionRule]) -> String {
    if rules.is_empty() {
        return format!("{collective} has no rules: add some under `selection.{collective}`");
    }
    let listed: Vec<String> = rules.iter().enumerate().map(|(i, r)| format!("{}: {r}", i + 1)).collect();
    format!("its rules are {}", listed.join("; "))
}

/// A resolved registry: algorithms by name and selection rules per collective.
///
/// # Examples
/// ```
/// # use std::sync::Arc;
/// # use kernbench_core::{ArgsError, KernelDef, KernelFuture, Launch, Params, Tl};
/// # struct Noop;
/// # impl Launch for Noop { fn launch(&self, _: Tl) -> KernelFuture { Box::pin(async { Ok(()) }) } }
/// # fn bind(_: &Params) -> Result<Arc<dyn Launch>, ArgsError> { Ok(Arc::new(Noop)) }
/// # static RING: KernelDef = KernelDef { name: "ring_allreduce", params: &[], summary: "", instantiate: bind };
/// # static RD: KernelDef = KernelDef { name: "rd_allreduce", params: &[], summary: "", instantiate: bind };
/// use kernbench_core::{Collective, KernelSet, LayoutKind, Registry, System};
/// let mut kernels = KernelSet::new();
/// kernels.register(&RING).register(&RD);
/// let registry = Registry::from_json_str(r#"{
///   "algorithms": {
///     "ring": {"collective": "all_reduce", "kernel": "ring_allreduce", "topology": "ring_1d",
///              "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "tcm"},
///     "rd":   {"collective": "all_reduce", "kernel": "rd_allreduce", "topology": "hypercube",
///              "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "tcm"}},
///   "selection": {"all_reduce": [{"algorithm": "rd", "max_bytes": 65536}, {"algorithm": "ring"}]}
/// }"#, &kernels).unwrap();
/// let small = registry.select(Collective::AllReduce, 1024, LayoutKind::OnePe).unwrap();
/// assert_eq!(small.algorithm.name, "rd");
/// assert_eq!(small.reason, "rule 1 of all_reduce (rd): bytes 1024 <= max_bytes 65536");
/// let large = registry.select(Collective::AllReduce, 1 << 20, LayoutKind::OnePe).unwrap();
/// assert_eq!((large.algorithm.name.as_str(), large.rule_index), ("ring", 1));
/// // The algorithm holds its topology and mapper, so its plan needs no lookup.
/// let plan = large.algorithm.plan(&System::shape(4, 1, 1, 2).unwrap()).unwrap();
/// assert_eq!((plan.len(), large.algorithm.topology.name()), (4, "ring_1d"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registry {
    algorithms: BTreeMap<String, Arc<Algorithm>>,
    selection: BTreeMap<Collective, Vec<SelectionRule>>,
}

impl From<&Registry> for RegistrySpec {
    fn from(registry: &Registry) -> Self {
        let algorithms = registry.algorithms.iter().map(|(name, a)| (name.clone(), a.spec())).collect();
        RegistrySpec { algorithms, selection: registry.selection.clone() }
    }
}

impl From<Registry> for RegistrySpec {
    fn from(registry: Registry) -> Self {
        RegistrySpec::from(&registry)
    }
}

impl Serialize for Registry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RegistrySpec::from(self).serialize(serializer)
    }
}

/// The parameter of every algorithm that names its calls' protocol.
pub const PROTOCOL_PARAM: &str = "protocol";

/// Resolves one algorithm of a spec: every name to its value, and the kernel's arguments bound.
fn resolve(name: &str, spec: AlgorithmSpec, kernels: &KernelSet) -> Result<Algorithm, RegistryError> {
    let component = |field: &str| {
        let field = format!("algorithms.{}.{field}", Quoted(name));
        move |source: UnknownName| RegistryError::UnknownComponent { field, source }
    };
    let topology = topology_by_name(&spec.topology).map_err(component("topology"))?;
    let mapper = mapper_by_name(&spec.mapper).map_err(component("mapper"))?;
    let validator = validator_by_name(&spec.validator).map_err(component("validator"))?;
    let kernel = kernels
        .get(&spec.kernel)
        .map_err(|source| RegistryError::MissingKernel { algorithm: name.to_owned(), source })?;
    // `protocol` is the call's, not the kernel's: every algorithm may carry its messages by one.
    let mut kernel_params = spec.params.clone();
    let protocol = match kernel_params.remove(PROTOCOL_PARAM) {
        None => None,
        Some(value) => {
            let text = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
            let choice =
                text.parse().map_err(|source| RegistryError::BadProtocol { algorithm: name.to_owned(), source })?;
            Some(choice)
        }
    };
    let launch = kernel
        .instantiate(&kernel_params)
        .map_err(|source| RegistryError::KernelArgs { algorithm: name.to_owned(), source })?;
    Ok(Algorithm {
        name: name.to_owned(),
        collective: spec.collective,
        kernel,
        params: spec.params,
        topology,
        mapper,
        validator,
        buffer_kind: spec.buffer_kind,
        summary: spec.summary,
        protocol,
        launch,
    })
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Resolves a registry as written against the kernels that may run it.
    ///
    /// # Errors
    /// [`RegistryError::UnknownComponent`] for an unknown topology, mapper or validator;
    /// [`RegistryError::MissingKernel`] or [`RegistryError::KernelArgs`] for a kernel that `kernels`
    /// lacks or that rejects the parameters; [`RegistryError::UnknownRuleAlgorithm`],
    /// [`RegistryError::RuleCollectiveMismatch`] or [`RegistryError::EmptyBounds`] for a bad rule.
    /// Algorithms are resolved in name order and the first error is reported.
    pub fn from_spec(spec: RegistrySpec, kernels: &KernelSet) -> Result<Registry, RegistryError> {
        let mut algorithms = BTreeMap::new();
        for (name, a) in spec.algorithms {
            let algorithm = resolve(&name, a, kernels)?;
            algorithms.insert(name, Arc::new(algorithm));
        }
        check_rules(&algorithms, &spec.selection)?;
        Ok(Registry { algorithms, selection: spec.selection })
    }

    /// Parses and resolves a registry.
    ///
    /// # Errors
    /// [`RegistryError::Json`] for malformed JSON or unknown fields; otherwise as
    /// [`Registry::from_spec`].
    pub fn from_json_str(json: &str, kernels: &KernelSet) -> Result<Registry, RegistryError> {
        Registry::from_spec(serde_json::from_str(json)?, kernels)
    }

    /// Reads, parses and resolves a registry file.
    ///
    /// # Errors
    /// [`RegistryError::Io`] when the file cannot be read, [`RegistryError::InFile`] wrapping what
    /// [`Registry::from_json_str`] says about its content.
    pub fn from_file(path: &Path, kernels: &KernelSet) -> Result<Registry, RegistryError> {
        let text =
            crate::files::read_text(path).map_err(|source| RegistryError::Io { path: path.to_owned(), source })?;
        Registry::from_json_str(&text, kernels)
            .map_err(|e| RegistryError::InFile { path: path.to_owned(), source: Box::new(e) })
    }

    /// Lays `other` over this registry: its algorithms (resolved against `kernels`) replace ones of the
    /// same name, and its rules for a collective go before the existing ones, so they are tried first.
    /// `other`'s rules may name algorithms of this registry. On error this registry is left as it was.
    ///
    /// # Errors
    /// As [`Registry::from_spec`], for `other`'s algorithms and the merged rules.
    pub fn merge(&mut self, other: impl Into<RegistrySpec>, kernels: &KernelSet) -> Result<(), RegistryError> {
        let other = other.into();
        let mut algorithms = self.algorithms.clone();
        for (name, a) in other.algorithms {
            let algorithm = resolve(&name, a, kernels)?;
            algorithms.insert(name, Arc::new(algorithm));
        }
        let mut selection = self.selection.clone();
        for (collective, mut rules) in other.selection {
            let existing = selection.entry(collective).or_default();
            rules.append(existing);
            *existing = rules;
        }
        check_rules(&algorithms, &selection)?;
        *self = Registry { algorithms, selection };
        Ok(())
    }

    /// Replaces the selection rules of `collective` (what a tuner writes). On error this registry is
    /// left as it was.
    ///
    /// # Errors
    /// As [`Registry::from_spec`] for a bad rule.
    pub fn set_rules(&mut self, collective: Collective, rules: Vec<SelectionRule>) -> Result<(), RegistryError> {
        let mut selection = self.selection.clone();
        selection.insert(collective, rules);
        check_rules(&self.algorithms, &selection)?;
        self.selection = selection;
        Ok(())
    }

    /// The algorithm called `name`.
    ///
    /// # Errors
    /// [`RegistryError::UnknownAlgorithm`] listing the known names.
    pub fn get(&self, name: &str) -> Result<&Arc<Algorithm>, RegistryError> {
        self.algorithms.get(name).ok_or_else(|| RegistryError::UnknownAlgorithm {
            name: name.to_owned(),
            known: self.algorithms.keys().cloned().collect(),
        })
    }

    /// Every algorithm, by name.
    pub fn algorithms(&self) -> impl Iterator<Item = &Arc<Algorithm>> + '_ {
        self.algorithms.values()
    }

    /// The selection rules of a collective, in the order they are tried.
    pub fn rules(&self, collective: Collective) -> &[SelectionRule] {
        self.selection.get(&collective).map_or(&[], Vec::as_slice)
    }

    /// The algorithm for `collective` at `bytes_per_sip` with a `layout` of that kind: the first
    /// rule whose every condition holds.
    ///
    /// # Errors
    /// [`RegistryError::NoRule`] listing the collective's rules when none matches.
    pub fn select(
        &self,
        collective: Collective,
        bytes_per_sip: u64,
        layout: LayoutKind,
    ) -> Result<Selection<'_>, RegistryError> {
        self.matching(collective, bytes_per_sip, layout).next().ok_or_else(|| RegistryError::NoRule {
            collective,
            bytes: bytes_per_sip,
            layout,
            rules: self.rules(collective).to_vec(),
        })
    }

    /// Every rule of `collective` whose every condition holds, in order, with its algorithm: what a
    /// caller that must also check the tensor's exact layout tries one after another.
    pub fn matching(
        &self,
        collective: Collective,
        bytes_per_sip: u64,
        layout: LayoutKind,
    ) -> impl Iterator<Item = Selection<'_>> + '_ {
        self.rules(collective).iter().enumerate().filter_map(move |(i, rule)| {
            let conditions = rule.conditions(bytes_per_sip, layout);
            if !conditions.iter().all(|(met, _)| *met) {
                return None;
            }
            let why = if conditions.is_empty() {
                "no conditions".to_owned()
            } else {
                conditions.into_iter().map(|(_, text)| text).collect::<Vec<_>>().join(" and ")
            };
            // Loading checked that every rule names an algorithm of the registry.
            let algorithm = self.algorithms.get(&rule.algorithm)?;
            let reason = format!("rule {} of {collective} ({}): {why}", i + 1, rule.algorithm);
            Some(Selection { algorithm, rule_index: i, reason })
        })
    }
}

/// Every rule names an algorithm of its own collective, with bounds that admit some size.
fn check_rules(
    algorithms: &BTreeMap<String, Arc<Algorithm>>,
    selection: &BTreeMap<Collective, Vec<SelectionRule>>,
) -> Result<(), RegistryError> {
    for (&collective, rules) in selection {
        for (i, rule) in rules.iter().enumerate() {
            let n = i + 1;
            let Some(algorithm) = algorithms.get(&rule.algorithm) else {
                return Err(RegistryError::UnknownRuleAlgorithm {
                    collective,
                    rule: n,
                    algorithm: rule.algorithm.clone(),
                    known: algorithms.values().filter(|a| a.collective == collective).map(|a| a.name.clone()).collect(),
                });
            };
            if algorithm.collective != collective {
                return Err(RegistryError::RuleCollectiveMismatch {
                    collective,
                    rule: n,
                    algorithm: rule.algorithm.clone(),
                    actual: algorithm.collective,
                });
            }
            if let (Some(min), Some(max)) = (rule.min_bytes, rule.max_bytes)
                && min > max
            {
                return Err(RegistryError::EmptyBounds { collective, rule: n, min, max });
            }
        }
    }
    Ok(())
}

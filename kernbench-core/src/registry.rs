//! The algorithm registry (`ccl.json`): which kernel, topology, mapper and validator make up each
//! algorithm, and which algorithm to pick for a collective, a size and a layout.
//!
//! The file format is documented on [`RegistrySpec`].
//!
//! Two stages: [`RegistrySpec`] is what the JSON says; [`Registry`] has checked that every topology,
//! mapper and validator exists and that every rule names an algorithm of its collective. Kernels are
//! checked separately with [`Registry::check_kernels`], because the registry is data and the kernels
//! live in whatever crates the user links.
//!
//! Rules are tried in order and the first that matches wins. Messages count rules from 1.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::names::UnknownName;
use crate::{
    ArgsError, Collective, KernelSet, LayoutKind, UnknownKernel, mapper_by_name, topology_by_name, validator_by_name,
};

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
    pub params: serde_json::Map<String, serde_json::Value>,
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
    /// Matches when bytes per rank are at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_bytes: Option<u64>,
    /// Matches when bytes per rank are at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Matches only this kind of layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<LayoutKind>,
}

impl SelectionRule {
    /// The conditions this rule holds `bytes` and `layout` to, with whether each is met.
    fn conditions(&self, bytes: u64, layout: LayoutKind) -> Vec<(bool, String)> {
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
/// A selection rule's `min_bytes` and `max_bytes` are inclusive bounds on bytes per rank; `layout`
/// is `one_pe` or `multi_pe`. Check it with [`Registry::from_spec`].
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

/// A checked registry entry: everything needed to run one algorithm.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlgorithmEntry {
    /// The algorithm's name.
    pub name: String,
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
    pub params: serde_json::Map<String, serde_json::Value>,
    /// One line for listings.
    pub summary: String,
}

/// The algorithm a selection chose, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection<'a> {
    /// The chosen algorithm.
    pub algorithm: &'a AlgorithmEntry,
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
    #[error("invalid registry: {source}")]
    Json {
        /// The decoder's error.
        #[from]
        source: serde_json::Error,
    },
    /// An algorithm names a topology, mapper or validator that does not exist.
    #[error("registry field `{field}`: {source}")]
    UnknownComponent {
        /// `algorithms.<name>.topology`, `.mapper` or `.validator`.
        field: String,
        /// The name and the known ones.
        source: UnknownName,
    },
    /// A selection rule names an algorithm the registry does not have.
    #[error(
        "registry field `selection.{collective}` rule {rule}: unknown algorithm `{algorithm}`: expected one of the \
         {collective} algorithms [{}]",
        known.join(", ")
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
        "registry field `selection.{collective}` rule {rule}: algorithm `{algorithm}` implements {actual}: expected \
         an algorithm of {collective}"
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
    #[error("unknown algorithm `{name}`: expected one of [{}]", known.join(", "))]
    UnknownAlgorithm {
        /// The name asked for.
        name: String,
        /// The names the registry has.
        known: Vec<String>,
    },
    /// No selection rule matched.
    #[error(
        "no selection rule of {collective} matches {bytes} bytes per rank with a {layout} layout; {}",
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
    #[error("registry field `algorithms.{algorithm}.kernel`: {source}")]
    MissingKernel {
        /// The algorithm.
        algorithm: String,
        /// The kernel name and the known ones.
        source: UnknownKernel,
    },
    /// An algorithm's params do not fit its kernel's arguments.
    #[error("registry field `algorithms.{algorithm}.params`: {source}")]
    KernelArgs {
        /// The algorithm.
        algorithm: String,
        /// What does not fit.
        source: ArgsError,
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

/// A checked registry: algorithms by name and selection rules per collective.
///
/// # Examples
/// ```
/// use kernbench_core::{Collective, LayoutKind, Registry};
/// let registry = Registry::from_json_str(r#"{
///   "algorithms": {
///     "ring": {"collective": "all_reduce", "kernel": "ring_allreduce", "topology": "ring_1d",
///              "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "tcm"},
///     "rd":   {"collective": "all_reduce", "kernel": "rd_allreduce", "topology": "hypercube",
///              "mapper": "leader_only", "validator": "single_shard", "buffer_kind": "tcm"}},
///   "selection": {"all_reduce": [{"algorithm": "rd", "max_bytes": 65536}, {"algorithm": "ring"}]}
/// }"#).unwrap();
/// let small = registry.select(Collective::AllReduce, 1024, LayoutKind::OnePe).unwrap();
/// assert_eq!(small.algorithm.name, "rd");
/// assert_eq!(small.reason, "rule 1 of all_reduce (rd): bytes 1024 <= max_bytes 65536");
/// let large = registry.select(Collective::AllReduce, 1 << 20, LayoutKind::OnePe).unwrap();
/// assert_eq!((large.algorithm.name.as_str(), large.rule_index), ("ring", 1));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registry {
    algorithms: BTreeMap<String, AlgorithmEntry>,
    selection: BTreeMap<Collective, Vec<SelectionRule>>,
}

impl From<Registry> for RegistrySpec {
    fn from(registry: Registry) -> Self {
        let algorithms = registry
            .algorithms
            .into_values()
            .map(|e| {
                let spec = AlgorithmSpec {
                    collective: e.collective,
                    kernel: e.kernel,
                    topology: e.topology,
                    mapper: e.mapper,
                    validator: e.validator,
                    buffer_kind: e.buffer_kind,
                    params: e.params,
                    summary: e.summary,
                };
                (e.name, spec)
            })
            .collect();
        RegistrySpec { algorithms, selection: registry.selection }
    }
}

impl Serialize for Registry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RegistrySpec::from(self.clone()).serialize(serializer)
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Checks a registry as written.
    ///
    /// # Errors
    /// [`RegistryError::UnknownComponent`] for an unknown topology, mapper or validator;
    /// [`RegistryError::UnknownRuleAlgorithm`], [`RegistryError::RuleCollectiveMismatch`] or
    /// [`RegistryError::EmptyBounds`] for a bad rule.
    pub fn from_spec(spec: RegistrySpec) -> Result<Registry, RegistryError> {
        let mut algorithms = BTreeMap::new();
        for (name, a) in spec.algorithms {
            let component = |field: &str, found: Result<(), UnknownName>| {
                found.map_err(|source| RegistryError::UnknownComponent {
                    field: format!("algorithms.{name}.{field}"),
                    source,
                })
            };
            component("topology", topology_by_name(&a.topology).map(drop))?;
            component("mapper", mapper_by_name(&a.mapper).map(drop))?;
            component("validator", validator_by_name(&a.validator).map(drop))?;
            let entry = AlgorithmEntry {
                name: name.clone(),
                collective: a.collective,
                kernel: a.kernel,
                topology: a.topology,
                mapper: a.mapper,
                validator: a.validator,
                buffer_kind: a.buffer_kind,
                params: a.params,
                summary: a.summary,
            };
            algorithms.insert(name, entry);
        }
        for (&collective, rules) in &spec.selection {
            for (i, rule) in rules.iter().enumerate() {
                let n = i + 1;
                let Some(entry) = algorithms.get(&rule.algorithm) else {
                    return Err(RegistryError::UnknownRuleAlgorithm {
                        collective,
                        rule: n,
                        algorithm: rule.algorithm.clone(),
                        known: algorithms
                            .values()
                            .filter(|e| e.collective == collective)
                            .map(|e| e.name.clone())
                            .collect(),
                    });
                };
                if entry.collective != collective {
                    return Err(RegistryError::RuleCollectiveMismatch {
                        collective,
                        rule: n,
                        algorithm: rule.algorithm.clone(),
                        actual: entry.collective,
                    });
                }
                if let (Some(min), Some(max)) = (rule.min_bytes, rule.max_bytes)
                    && min > max
                {
                    return Err(RegistryError::EmptyBounds { collective, rule: n, min, max });
                }
            }
        }
        Ok(Registry { algorithms, selection: spec.selection })
    }

    /// Parses and checks a registry.
    ///
    /// # Errors
    /// [`RegistryError::Json`] for malformed JSON or unknown fields; otherwise as
    /// [`Registry::from_spec`].
    pub fn from_json_str(json: &str) -> Result<Registry, RegistryError> {
        Registry::from_spec(serde_json::from_str(json)?)
    }

    /// Reads, parses and checks a registry file.
    ///
    /// # Errors
    /// [`RegistryError::Io`] when the file cannot be read, [`RegistryError::InFile`] wrapping what
    /// [`Registry::from_json_str`] says about its content.
    pub fn from_file(path: &Path) -> Result<Registry, RegistryError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| RegistryError::Io { path: path.to_owned(), source })?;
        Registry::from_json_str(&text).map_err(|e| RegistryError::InFile { path: path.to_owned(), source: Box::new(e) })
    }

    /// Lays `other` over this registry: its algorithms replace ones of the same name, and its rules
    /// for a collective go before the existing ones, so they are tried first. `other` may be a
    /// [`Registry`] or an unchecked [`RegistrySpec`] (whose rules may name algorithms of this
    /// registry). The result is checked as a whole; on error this registry is left as it was.
    ///
    /// # Errors
    /// As [`Registry::from_spec`], for the merged registry.
    pub fn merge(&mut self, other: impl Into<RegistrySpec>) -> Result<(), RegistryError> {
        let other = other.into();
        let mut merged = RegistrySpec::from(self.clone());
        merged.algorithms.extend(other.algorithms);
        for (collective, mut rules) in other.selection {
            let existing = merged.selection.entry(collective).or_default();
            rules.append(existing);
            *existing = rules;
        }
        *self = Registry::from_spec(merged)?;
        Ok(())
    }

    /// The algorithm called `name`.
    ///
    /// # Errors
    /// [`RegistryError::UnknownAlgorithm`] listing the known names.
    pub fn get(&self, name: &str) -> Result<&AlgorithmEntry, RegistryError> {
        self.algorithms.get(name).ok_or_else(|| RegistryError::UnknownAlgorithm {
            name: name.to_owned(),
            known: self.algorithms.keys().cloned().collect(),
        })
    }

    /// Every algorithm, by name.
    pub fn algorithms(&self) -> impl Iterator<Item = &AlgorithmEntry> + '_ {
        self.algorithms.values()
    }

    /// The selection rules of a collective, in the order they are tried.
    pub fn rules(&self, collective: Collective) -> &[SelectionRule] {
        self.selection.get(&collective).map_or(&[], Vec::as_slice)
    }

    /// The algorithm for `collective` at `bytes_per_rank` with a `layout` of that kind: the first
    /// rule whose every condition holds.
    ///
    /// # Errors
    /// [`RegistryError::NoRule`] listing the collective's rules when none matches.
    pub fn select(
        &self,
        collective: Collective,
        bytes_per_rank: u64,
        layout: LayoutKind,
    ) -> Result<Selection<'_>, RegistryError> {
        self.matching(collective, bytes_per_rank, layout).next().ok_or_else(|| RegistryError::NoRule {
            collective,
            bytes: bytes_per_rank,
            layout,
            rules: self.rules(collective).to_vec(),
        })
    }

    /// Every rule of `collective` whose every condition holds, in order, with its algorithm: what a
    /// caller that must also check the tensor's exact layout tries one after another.
    pub fn matching(
        &self,
        collective: Collective,
        bytes_per_rank: u64,
        layout: LayoutKind,
    ) -> impl Iterator<Item = Selection<'_>> + '_ {
        self.rules(collective).iter().enumerate().filter_map(move |(i, rule)| {
            let conditions = rule.conditions(bytes_per_rank, layout);
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

    /// Checks that every algorithm's kernel is in `kernels` and accepts the algorithm's params.
    ///
    /// # Errors
    /// [`RegistryError::MissingKernel`] or [`RegistryError::KernelArgs`] for the first algorithm (by
    /// name) that does not fit.
    pub fn check_kernels(&self, kernels: &KernelSet) -> Result<(), RegistryError> {
        for entry in self.algorithms.values() {
            let def = kernels
                .get(&entry.kernel)
                .map_err(|source| RegistryError::MissingKernel { algorithm: entry.name.clone(), source })?;
            def.instantiate(&entry.params)
                .map_err(|source| RegistryError::KernelArgs { algorithm: entry.name.clone(), source })?;
        }
        Ok(())
    }
}

//! Kernels as the registry sees them: a name, typed parameters, and a way to start one on a PE.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::kernel::{KernelError, Tl, TlContext};
use crate::machine::PeId;
use crate::quote::{Quoted, decoder_message};
use crate::tile::ReduceOp;

/// A running kernel on one PE: the coroutine a runtime polls.
pub type KernelFuture = Pin<Box<dyn Future<Output = Result<(), KernelError>> + Send + 'static>>;

/// The JSON parameters of a kernel, as the registry holds them: `{"chunks": 4}`.
pub type Params = serde_json::Map<String, serde_json::Value>;

/// Binds a kernel's arguments from its JSON parameters.
pub type Instantiate = fn(&Params) -> Result<Arc<dyn Launch>, ArgsError>;

/// A kernel with its arguments bound, ready to start on any number of PEs.
pub trait Launch: Send + Sync {
    /// Starts the kernel on the PE and lane that `tl` stands for.
    fn launch(&self, tl: Tl) -> KernelFuture;

    /// How many lanes (concurrent coroutines, each with its own queues and credits) the kernel runs as
    /// on the participant of rank `rank` of `size`: 1 unless the kernel says otherwise
    /// (`#[ccl_kernel(lanes = ...)]`, or a `Launch` written by hand, whose count may differ per rank
    /// and with the number of participants, as a chunk program's thread blocks do).
    fn lanes(&self, rank: usize, size: usize) -> usize {
        let _ = (rank, size);
        1
    }

    /// The protocol the kernel is written for on `size` participants (an MSCCL-IR file's `proto`),
    /// which its calls use when their algorithm names none and the system gives it; `None`: any.
    fn protocol(&self, size: usize) -> Option<crate::machine::Protocol> {
        let _ = size;
        None
    }
}

impl dyn Launch + '_ {
    /// The state, in bytes, that each lane running the kernel holds while it runs: the coroutine it
    /// starts as, its locals and those of the helpers it awaits, which a million-PE run holds a
    /// million of. The same for every PE and system: a coroutine's size is its type's.
    pub fn state_bytes(&self) -> usize {
        let ctx = TlContext {
            pe: PeId::new(0, 0, 0),
            extents: [1, 1, 1],
            rank: 0,
            size: 1,
            op: ReduceOp::Sum,
            root: 0,
            counts: None,
            generation: 1,
            lane: 0,
            lanes: 1,
            queue_depth: 1,
        };
        // Started, not polled: the coroutine is all the state it will have.
        size_of_val(&*self.launch(Tl::new(ctx)))
    }
}

/// One scalar parameter of a kernel, as its argument struct declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamDef {
    /// The parameter's name (its key in the registry's JSON).
    pub name: &'static str,
    /// Its Rust type, as written.
    pub ty: &'static str,
    /// Its value when the registry's JSON leaves it out (`#[default = 1] lanes: usize`), as written;
    /// `None`: the JSON must give it.
    pub default: Option<&'static str>,
}

/// What `#[ccl_kernel]` generates for a kernel: everything the registry needs to instantiate it by name.
#[derive(Clone, Copy)]
pub struct KernelDef {
    /// The kernel's name in the registry.
    pub name: &'static str,
    /// Its scalar parameters, in declaration order.
    pub params: &'static [ParamDef],
    /// The first paragraph of the kernel's doc comment, on one line.
    pub summary: &'static str,
    /// Binds the kernel's arguments from the registry's JSON parameters.
    pub instantiate: Instantiate,
}

impl fmt::Debug for KernelDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelDef").field("name", &self.name).field("params", &self.params).finish_non_exhaustive()
    }
}

impl KernelDef {
    /// Binds the kernel's arguments from JSON parameters (`{"chunks": 4}`).
    ///
    /// # Errors
    /// [`ArgsError`] naming a missing, unknown or mistyped parameter.
    pub fn instantiate(&self, params: &Params) -> Result<Arc<dyn Launch>, ArgsError> {
        (self.instantiate)(params)
    }
}

/// The registry's JSON parameters do not fit a kernel's argument struct.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("kernel `{kernel}` parameters: {message} (its parameters are: {expected})")]
pub struct ArgsError {
    /// The kernel.
    pub kernel: &'static str,
    /// What is wrong (from the JSON decoder: `missing field `chunks``, `unknown field ...`).
    pub message: String,
    /// The parameters it takes, `name: type`, comma-separated.
    pub expected: String,
}

impl ArgsError {
    /// The error for `def`, from the decoder's message.
    pub fn new(def_name: &'static str, params: &[ParamDef], message: impl fmt::Display) -> ArgsError {
        let expected = if params.is_empty() {
            "none".to_owned()
        } else {
            let param = |p: &ParamDef| match p.default {
                Some(default) => format!("{}: {} = {default}", p.name, p.ty),
                None => format!("{}: {}", p.name, p.ty),
            };
            params.iter().map(param).collect::<Vec<_>>().join(", ")
        };
        ArgsError { kernel: def_name, message: decoder_message(&message.to_string()), expected }
    }
}

/// The kernels a registry can name, by name.
///
/// # Examples
/// ```
/// use kernbench_core::KernelSet;
/// let set = KernelSet::new();
/// let err = set.get("ring").unwrap_err();
/// assert!(err.to_string().contains("unknown kernel `ring`"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct KernelSet {
    by_name: BTreeMap<&'static str, &'static KernelDef>,
}

/// A kernel name that the set does not hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown kernel `{}`: known kernels are {}", Quoted(name), known_list(known))]
pub struct UnknownKernel {
    /// The name asked for.
    pub name: String,
    /// The names the set holds.
    pub known: Vec<&'static str>,
}

fn known_list(known: &[&str]) -> String {
    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
}

impl KernelSet {
    /// An empty set.
    pub fn new() -> KernelSet {
        KernelSet::default()
    }

    /// Adds a kernel; a later kernel of the same name replaces an earlier one (so a user can override a
    /// shipped kernel).
    pub fn register(&mut self, def: &'static KernelDef) -> &mut KernelSet {
        self.by_name.insert(def.name, def);
        self
    }

    /// The kernel called `name`.
    ///
    /// # Errors
    /// [`UnknownKernel`] listing the known names.
    pub fn get(&self, name: &str) -> Result<&'static KernelDef, UnknownKernel> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| UnknownKernel { name: name.to_owned(), known: self.by_name.keys().copied().collect() })
    }

    /// Every kernel, by name.
    pub fn iter(&self) -> impl Iterator<Item = &'static KernelDef> + '_ {
        self.by_name.values().copied()
    }
}

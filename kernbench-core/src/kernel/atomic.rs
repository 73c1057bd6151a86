//! Atomics on symmetric memory, with the memory model of current GPUs: every atomic carries a
//! [`MemoryOrder`] and a [`Scope`], and waits compare with a [`Cmp`].
//!
//! Two atomics to the same bytes are atomic with each other (and order with each other through release
//! and acquire) only when each one's scope includes the other's lane: PTX's "morally strong". Otherwise
//! they are plain accesses, and a runtime that checks races reports them as a [`Race`] that names both
//! scopes: a lock released at `Scope::Sip` (a GPU's scope) is not seen by a peer on another GPU.
//!
//! Atomics work on `i32` and `i64` elements (values are carried as `i64`; an `i32` element wraps as
//! the hardware's 32-bit atomics do).
//!
//! [`Race`]: crate::kernel::symmetric::Race

use std::fmt;

use crate::kernel::Op;
use crate::machine::PeId;

/// The lanes an atomic is atomic with, and orders with: from one lane to the whole system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The issuing lane alone (a CUDA block's `.cta` scope).
    Lane,
    /// The lanes of the issuing PE.
    Pe,
    /// The lanes of every PE on the issuing PE's SIP (a GPU's `.gpu` scope).
    Sip,
    /// The lanes of every PE on the issuing PE's node.
    Node,
    /// Every lane of the run (`.sys` scope).
    System,
}

impl Scope {
    /// Every scope, narrowest first.
    pub const ALL: [Scope; 5] = [Scope::Lane, Scope::Pe, Scope::Sip, Scope::Node, Scope::System];

    /// Whether an atomic of this scope issued at `from` includes the lane at `other`.
    pub fn includes(self, from: &LanePlace, other: &LanePlace) -> bool {
        match self {
            Scope::Lane => from == other,
            Scope::Pe => from.pe == other.pe,
            Scope::Sip => from.pe.sip == other.pe.sip,
            Scope::Node => from.node == other.node,
            Scope::System => true,
        }
    }

    /// Whether two atomics, of scope `a` issued at `at_a` and of scope `b` issued at `at_b`, are
    /// morally strong: each one's scope includes the other's lane.
    pub fn strong(a: Scope, at_a: &LanePlace, b: Scope, at_b: &LanePlace) -> bool {
        a.includes(at_a, at_b) && b.includes(at_b, at_a)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Lane => "lane",
            Scope::Pe => "pe",
            Scope::Sip => "sip",
            Scope::Node => "node",
            Scope::System => "system",
        })
    }
}

/// Where a lane runs, as scopes see it: its PE, its node, and which lane of which call it is (a lane
/// of another call is another lane, even on the same PE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LanePlace {
    /// The PE.
    pub pe: PeId,
    /// Its node (0 in a system of one).
    pub node: u32,
    /// The lane of the PE.
    pub lane: u32,
    /// The call (the communicator's generation) the lane ran in.
    pub call: u64,
}

/// How an atomic orders the lane's other accesses around it (C++'s and PTX's orders, without
/// `seq_cst`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryOrder {
    /// Atomic, and orders nothing else.
    Relaxed,
    /// What a release it reads from covers happens before the lane's later accesses.
    Acquire,
    /// The lane's earlier accesses (and puts a fence or quiet covered) happen before whatever
    /// acquires from it.
    Release,
    /// Both.
    AcqRel,
}

impl MemoryOrder {
    /// Whether it acquires.
    pub fn acquires(self) -> bool {
        matches!(self, MemoryOrder::Acquire | MemoryOrder::AcqRel)
    }

    /// Whether it releases.
    pub fn releases(self) -> bool {
        matches!(self, MemoryOrder::Release | MemoryOrder::AcqRel)
    }
}

impl fmt::Display for MemoryOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemoryOrder::Relaxed => "relaxed",
            MemoryOrder::Acquire => "acquire",
            MemoryOrder::Release => "release",
            MemoryOrder::AcqRel => "acq_rel",
        })
    }
}

/// A wait's comparison (NVSHMEM's `NVSHMEM_CMP_*`): the wait ends when `value cmp operand` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cmp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `>=`
    Ge,
    /// `>`
    Gt,
    /// `<=`
    Le,
    /// `<`
    Lt,
}

impl Cmp {
    /// Whether `value cmp operand` holds.
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::atomic::Cmp;
    /// assert!(Cmp::Ge.holds(3, 3) && !Cmp::Gt.holds(3, 3) && Cmp::Ne.holds(2, 3));
    /// ```
    pub fn holds<T: PartialOrd>(self, value: T, operand: T) -> bool {
        match self {
            Cmp::Eq => value == operand,
            Cmp::Ne => value != operand,
            Cmp::Ge => value >= operand,
            Cmp::Gt => value > operand,
            Cmp::Le => value <= operand,
            Cmp::Lt => value < operand,
        }
    }
}

impl fmt::Display for Cmp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Ge => ">=",
            Cmp::Gt => ">",
            Cmp::Le => "<=",
            Cmp::Lt => "<",
        })
    }
}

/// What an atomic does to the element it addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Adds the value (wrapping).
    Add(i64),
    /// Replaces the element with the value.
    Swap(i64),
    /// Replaces the element with `new` when it holds `expected`.
    CompareSwap {
        /// The value it must hold.
        expected: i64,
        /// The value it then holds.
        new: i64,
    },
    /// Keeps the larger of the element and the value.
    Max(i64),
    /// Keeps the smaller of the element and the value.
    Min(i64),
}

impl AtomicOp {
    /// The element's new value, from its old one.
    pub fn apply(self, old: i64) -> i64 {
        match self {
            AtomicOp::Add(v) => old.wrapping_add(v),
            AtomicOp::Swap(v) => v,
            AtomicOp::CompareSwap { expected, new } => {
                if old == expected {
                    new
                } else {
                    old
                }
            }
            AtomicOp::Max(v) => old.max(v),
            AtomicOp::Min(v) => old.min(v),
        }
    }

    /// The `tl` operation that makes it, fetching its old value or not.
    pub fn op(self, fetch: bool) -> Op {
        match (self, fetch) {
            (AtomicOp::Add(_), false) => Op::AtomicAdd,
            (AtomicOp::Add(_), true) => Op::AtomicFetchAdd,
            (AtomicOp::Swap(_), _) => Op::AtomicSwap,
            (AtomicOp::CompareSwap { .. }, _) => Op::AtomicCompareSwap,
            (AtomicOp::Max(_), _) => Op::AtomicFetchMax,
            (AtomicOp::Min(_), _) => Op::AtomicFetchMin,
        }
    }
}

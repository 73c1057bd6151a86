//! Element types of tiles and the reduction operators over them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::quote::Quoted;

/// The element type of a tile.
///
/// # Examples
/// ```
/// use kernbench_core::Dtype;
/// assert_eq!(Dtype::F16.size(), 2);
/// assert_eq!("bf16".parse::<Dtype>().unwrap(), Dtype::BF16);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16 (`half::f16`).
    F16,
    /// bfloat16 (`half::bf16`).
    BF16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
}

impl Dtype {
    /// Every dtype.
    pub const ALL: [Dtype; 5] = [Dtype::F32, Dtype::F16, Dtype::BF16, Dtype::I32, Dtype::I64];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 | Dtype::BF16 => 2,
            Dtype::I64 => 8,
        }
    }

    /// The name used in JSON, reports and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::BF16 => "bf16",
            Dtype::I32 => "i32",
            Dtype::I64 => "i64",
        }
    }

    /// Whether the dtype is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, Dtype::F32 | Dtype::F16 | Dtype::BF16)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that names no dtype.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{}`: expected one of f32, f16, bf16, i32, i64", Quoted(&self.0))]
pub struct ParseDtypeError(pub String);

impl FromStr for Dtype {
    type Err = ParseDtypeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Dtype::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| ParseDtypeError(s.to_owned()))
    }
}

/// A reduction operator.
///
/// `Avg` accumulates as a sum; [`Tile::finish_reduction`](super::Tile::finish_reduction) divides by the number of
/// contributions once, at the end, so every algorithm rounds the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReduceOp {
    /// Sum (integers wrap on overflow).
    Sum,
    /// Product (integers wrap on overflow).
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Mean: a sum divided by the number of contributions (integers truncate toward zero).
    Avg,
}

impl ReduceOp {
    /// Every operator.
    pub const ALL: [ReduceOp; 5] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg];

    /// The name used in JSON, reports and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Avg => "avg",
        }
    }

    /// Whether `a op b` and `b op a` are the same for any two elements, so that a kernel may combine
    /// into whichever operand it holds alone: sums (and so averages) and products, whose IEEE and
    /// wrapping integer forms commute, but not max and min, whose float result for `-0.0` against
    /// `0.0` depends on the order. (A NaN result's payload is not specified by Rust in any order.)
    ///
    /// # Examples
    /// ```
    /// use kernbench_core::ReduceOp;
    /// assert!(ReduceOp::Sum.commutes() && !ReduceOp::Max.commutes());
    /// ```
    pub const fn commutes(self) -> bool {
        matches!(self, ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Avg)
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that names no reduction operator.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown reduction op `{}`: expected one of sum, prod, max, min, avg", Quoted(&self.0))]
pub struct ParseReduceOpError(pub String);

impl FromStr for ReduceOp {
    type Err = ParseReduceOpError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ReduceOp::ALL.into_iter().find(|op| op.name() == s).ok_or_else(|| ParseReduceOpError(s.to_owned()))
    }
}

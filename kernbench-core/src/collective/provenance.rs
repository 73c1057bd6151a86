//! Exact postconditions by provenance: which contributions each output element holds, and how often.
//!
//! A numeric check cannot tell `a + b + b - b` from `a + b`, nor see a contribution counted twice under
//! `max`. So a provenance run gives element `i` of rank `r`'s input the *signature* of the contribution
//! `(r, i)`: a 64-bit value drawn from a fixed hash of the pair. The kernel runs unchanged on these
//! (`i64` tiles, the reduction forced to a wrapping sum), and each output element ends with the sum of
//! the signatures of the contributions it holds, duplicates counted: a signature of the multiset of
//! `(rank, index)` pairs. The postcondition is then exact: an all-reduce element must hold every rank's
//! contribution to its index exactly once, an all-gather block one rank's input, and so on; the
//! reference is the collective's own ([`super::postcondition::reference`]) over the signatures.
//!
//! Two different multisets share a signature only by a collision of sums of 64-bit hashes (about
//! 2^-64 per element). A wrong element is explained when one contribution is wrong: one too many, one
//! missing, or one from another rank or index in place of the right one.
//!
//! It runs beside the numeric check, never instead: it cannot see a wrong dtype conversion or a
//! missing average's division.

use std::collections::HashMap;
use std::fmt;

use super::postcondition::{CallFacts, PostconditionError, Verdict, reference};
use crate::machine::PeId;
use crate::tile::{Dtype, ReduceOp, Tile};

/// The signature of contribution `(rank, index)`: SplitMix64 of the pair, never 0.
pub fn contribution(rank: usize, index: usize) -> i64 {
    let mut z = ((rank as u64) << 40 ^ index as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as i64 | 1
}

/// Provenance inputs shaped as `inputs`: element `i` of rank `r` is [`contribution`]`(r, i)`.
pub fn inputs(inputs: &[Tile]) -> Vec<Tile> {
    inputs
        .iter()
        .enumerate()
        .map(|(rank, t)| Tile::from_vec((0..t.len()).map(|i| contribution(rank, i)).collect::<Vec<i64>>()))
        .collect()
}

/// The call a provenance run makes: the same collective and root, the reduction a (wrapping) sum.
pub fn call(call: &CallFacts) -> CallFacts {
    CallFacts { op: ReduceOp::Sum, ..call.clone() }
}

/// What is wrong with one element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finding {
    /// It holds contribution `(rank, index)` once more than it should (counted twice, or not its own).
    Extra {
        /// The contribution's rank.
        rank: usize,
        /// Its index in that rank's input.
        index: usize,
    },
    /// It lacks contribution `(rank, index)`.
    Missing {
        /// The contribution's rank.
        rank: usize,
        /// Its index in that rank's input.
        index: usize,
    },
    /// It holds `holds` where it should hold `want`: a contribution from the wrong rank or index.
    Instead {
        /// The contribution it holds, `(rank, index)`.
        holds: (usize, usize),
        /// The one it should hold.
        want: (usize, usize),
    },
    /// More than one contribution is wrong.
    Unexplained,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Extra { rank, index } => {
                write!(f, "holds rank {rank}'s element {index} once too often (counted twice, or not its own)")
            }
            Finding::Missing { rank, index } => write!(f, "lacks rank {rank}'s element {index}"),
            Finding::Instead { holds, want } => write!(
                f,
                "holds rank {}'s element {} where it should hold rank {}'s element {}",
                holds.0, holds.1, want.0, want.1
            ),
            Finding::Unexplained => f.write_str("holds more than one wrong contribution"),
        }
    }
}

/// The first element whose contributions are wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExactMismatch {
    /// The rank whose output is wrong.
    pub rank: usize,
    /// Its PE, when the checker was told.
    pub pe: Option<PeId>,
    /// The element, or `None` when the whole output has the wrong length.
    pub element: Option<usize>,
    /// What is wrong with it.
    pub finding: Finding,
}

/// Whether every output element holds exactly the contributions the collective says.
pub type Exactness = Verdict<ExactMismatch>;

impl fmt::Display for Verdict<ExactMismatch> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.first {
            None => f.write_str("exact: every element holds each of its contributions once"),
            Some(m) => {
                write!(f, "exact postcondition failed: {} element(s) wrong; first at rank {}", self.wrong, m.rank)?;
                if let Some(pe) = m.pe {
                    write!(f, " ({pe})")?;
                }
                match m.element {
                    Some(e) => write!(f, " element {e}: it {}", m.finding),
                    None => write!(f, ": its output has the wrong length"),
                }
            }
        }
    }
}

/// Explanations are searched among at most this many contributions (the inputs' elements).
const EXPLAIN_AT_MOST: usize = 1 << 22;

/// Checks a provenance run's `outputs` against the collective's reference over `inputs` (as
/// [`inputs()`] makes them) and `before` (the outputs before the call); `pes` are the ranks' PEs.
///
/// # Errors
/// As [`reference()`].
pub fn check(
    call: &CallFacts,
    pes: &[PeId],
    inputs: &[Tile],
    before: &[Tile],
    outputs: &[Tile],
) -> Result<Exactness, PostconditionError> {
    let want = reference(&self::call(call), inputs, before)?;
    let mut result = Exactness::held();
    let mut explain = Explainer::new(inputs);
    for (rank, (got, want)) in outputs.iter().zip(&want).enumerate() {
        let (Ok(got), Ok(want)) = (got.as_slice::<i64>(), want.as_slice::<i64>()) else { continue };
        let pe = pes.get(rank).copied();
        if got.len() != want.len() {
            result.note(1, || ExactMismatch { rank, pe, element: None, finding: Finding::Unexplained });
            continue;
        }
        for (element, (&g, &w)) in got.iter().zip(want).enumerate() {
            if g != w {
                result.note(1, || ExactMismatch { rank, pe, element: Some(element), finding: explain.finding(g, w) });
            }
        }
    }
    Ok(result)
}

/// Finds the one contribution that explains a wrong element, by the signatures' differences.
struct Explainer<'a> {
    inputs: &'a [Tile],
    by_signature: Option<HashMap<i64, (usize, usize)>>,
}

impl<'a> Explainer<'a> {
    fn new(inputs: &'a [Tile]) -> Explainer<'a> {
        Explainer { inputs, by_signature: None }
    }

    fn finding(&mut self, got: i64, want: i64) -> Finding {
        let inputs = self.inputs;
        let total: usize = inputs.iter().map(Tile::len).sum();
        if total > EXPLAIN_AT_MOST || inputs.iter().any(|t| t.dtype() != Dtype::I64) {
            return Finding::Unexplained;
        }
        let map = self.by_signature.get_or_insert_with(|| {
            let mut map = HashMap::with_capacity(total);
            for (rank, t) in inputs.iter().enumerate() {
                for index in 0..t.len() {
                    map.insert(contribution(rank, index), (rank, index));
                }
            }
            map
        });
        let extra = got.wrapping_sub(want);
        if let Some(&(rank, index)) = map.get(&extra) {
            return Finding::Extra { rank, index };
        }
        if let Some(&(rank, index)) = map.get(&extra.wrapping_neg()) {
            return Finding::Missing { rank, index };
        }
        // got = want - c(want) + c(holds): look for the pair, in rank and index order.
        for (rank, t) in inputs.iter().enumerate() {
            for index in 0..t.len() {
                if let Some(&holds) = map.get(&extra.wrapping_add(contribution(rank, index))) {
                    return Finding::Instead { holds, want: (rank, index) };
                }
            }
        }
        Finding::Unexplained
    }
}

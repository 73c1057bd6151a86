//! Postconditions: what every collective must leave in every participant's output, computed the
//! straightforward way from the inputs, and the check of a run's outputs against it.
//!
//! Collectives are defined over the participants of an algorithm's plan, in rank order: for all-reduce,
//! every participant ends with the reduction of every participant's input (ADR-0029's T3: 16 PEs
//! holding `rank + 1` all end with 136).
//!
//! Integer results and every non-reducing collective must match bit for bit. Floating-point
//! reductions may round differently in another order, so a float element passes when it is within
//! `4 n eps` of the reference, relative to the sum of the magnitudes that went into it (to the
//! magnitude of the product for `prod`; `max` and `min` are exact).

use std::fmt;

use crate::{Collective, Dtype, ReduceOp, Tile, TileError, chunk_range};

/// The facts of one collective call that its postcondition depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallFacts {
    /// The collective.
    pub collective: Collective,
    /// The reduction operator (ignored by collectives that do not reduce).
    pub op: ReduceOp,
    /// The root rank of broadcast and reduce.
    pub root: usize,
}

/// The outputs a collective must produce, per rank, from every rank's input. `before` is each rank's
/// output buffer before the call: what `reduce` leaves on the ranks that are not the root.
///
/// # Errors
/// [`TileError`] when the inputs cannot be combined (mixed dtypes or lengths), or a root out of range.
pub fn reference(call: CallFacts, inputs: &[Tile], before: &[Tile]) -> Result<Vec<Tile>, TileError> {
    let n = inputs.len();
    let reduced = || -> Result<Tile, TileError> {
        let (first, rest) = inputs.split_first().ok_or(TileError::EmptyConcat)?;
        // A fresh copy, so the reference never shares (and so never changes) an input's buffer.
        let mut acc = Tile::concat(std::slice::from_ref(first))?;
        for x in rest {
            acc.reduce_in_place(x, call.op)?;
        }
        acc.finish_reduction(call.op, n);
        Ok(acc)
    };
    let root_input = || inputs.get(call.root).cloned().ok_or(TileError::BadChunk { index: call.root, count: n });
    Ok(match call.collective {
        Collective::AllReduce => vec![reduced()?; n],
        Collective::AllGather => vec![Tile::concat(inputs)?; n],
        Collective::ReduceScatter => {
            let all = reduced()?;
            (0..n).map(|r| all.chunk(r, n)).collect::<Result<_, _>>()?
        }
        Collective::Broadcast => vec![root_input()?; n],
        Collective::Reduce => {
            root_input()?;
            let all = reduced()?;
            (0..n).map(|r| if r == call.root { all.clone() } else { before[r].clone() }).collect()
        }
        Collective::AllToAll => (0..n)
            .map(|r| {
                let blocks = inputs.iter().map(|x| x.chunk(r, n)).collect::<Result<Vec<_>, _>>()?;
                Tile::concat(&blocks)
            })
            .collect::<Result<_, _>>()?,
    })
}

/// The first element found wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// The rank whose output is wrong.
    pub rank: usize,
    /// The element index, or `None` when the whole output has the wrong dtype or length.
    pub index: Option<usize>,
    /// What the output holds there.
    pub got: String,
    /// What the reference holds there.
    pub want: String,
}

/// Whether a run's outputs satisfy the collective's postcondition.
#[derive(Clone, Debug, PartialEq)]
pub struct Postcondition {
    /// Whether every output matched.
    pub held: bool,
    /// How many elements (or whole outputs, for a shape mismatch) were wrong: nccl-tests' `#wrong`.
    pub wrong: usize,
    /// The first wrong element, for the error message.
    pub first: Option<Mismatch>,
}

impl fmt::Display for Postcondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.first {
            None => f.write_str("postcondition held"),
            Some(m) => {
                write!(f, "postcondition failed: {} wrong; first at rank {}", self.wrong, m.rank)?;
                match m.index {
                    Some(i) => write!(f, " element {i}: got {}, want {}", m.got, m.want),
                    None => write!(f, ": got {}, want {}", m.got, m.want),
                }
            }
        }
    }
}

/// Checks `outputs` (per rank, after the call) against the [`reference`].
///
/// # Errors
/// As [`reference`].
pub fn check(call: CallFacts, inputs: &[Tile], before: &[Tile], outputs: &[Tile]) -> Result<Postcondition, TileError> {
    let want = reference(call, inputs, before)?;
    let mut result = Postcondition { held: true, wrong: 0, first: None };
    let note = |m: Mismatch, count: usize, result: &mut Postcondition| {
        result.held = false;
        result.wrong += count;
        result.first.get_or_insert(m);
    };
    let tolerance = Tolerance::new(call, inputs);
    for (rank, (got, want)) in outputs.iter().zip(&want).enumerate() {
        if got.dtype() != want.dtype() || got.len() != want.len() {
            let shape = |t: &Tile| format!("{}[{}]", t.dtype(), t.len());
            note(Mismatch { rank, index: None, got: shape(got), want: shape(want) }, 1, &mut result);
            continue;
        }
        let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
        for (index, (&gv, &wv)) in g.iter().zip(&w).enumerate() {
            if !tolerance.accepts(gv, wv, index, rank) {
                note(Mismatch { rank, index: Some(index), got: gv.to_string(), want: wv.to_string() }, 1, &mut result);
            }
        }
    }
    if outputs.len() != want.len() {
        let m = Mismatch {
            rank: outputs.len().min(want.len()),
            index: None,
            got: format!("{} outputs", outputs.len()),
            want: format!("{} outputs", want.len()),
        };
        note(m, outputs.len().abs_diff(want.len()), &mut result);
    }
    Ok(result)
}

/// How far a floating-point reduction may stray from the reference.
struct Tolerance {
    /// Relative error allowed per unit of magnitude; zero means exact.
    relative: f64,
    call: CallFacts,
    /// The inputs as `f64`, only when a tolerance applies.
    inputs: Vec<Vec<f64>>,
}

impl Tolerance {
    fn new(call: CallFacts, inputs: &[Tile]) -> Tolerance {
        let reduces = matches!(call.collective, Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce);
        let rounds = matches!(call.op, ReduceOp::Sum | ReduceOp::Avg | ReduceOp::Prod);
        let eps = match inputs.first().map(Tile::dtype) {
            Some(Dtype::F32) => f64::from(f32::EPSILON),
            Some(Dtype::F16) => f64::from(half::f16::EPSILON),
            Some(Dtype::BF16) => f64::from(half::bf16::EPSILON),
            Some(Dtype::I32 | Dtype::I64) | None => 0.0,
        };
        let relative = if reduces && rounds { 4.0 * inputs.len() as f64 * eps } else { 0.0 };
        let inputs = if relative > 0.0 { inputs.iter().map(Tile::to_f64_vec).collect() } else { Vec::new() };
        Tolerance { relative, call, inputs }
    }

    /// Whether `got` may stand for `want` at element `index` of `rank`'s output.
    fn accepts(&self, got: f64, want: f64, index: usize, rank: usize) -> bool {
        if got.to_bits() == want.to_bits() || got == want {
            return true;
        }
        if self.relative == 0.0 || !got.is_finite() || !want.is_finite() {
            return false;
        }
        // The element of each input that fed this output element.
        let n = self.inputs.len();
        let offset = match self.call.collective {
            Collective::ReduceScatter => {
                self.inputs.first().and_then(|x| chunk_range(x.len(), rank, n).ok()).map_or(0, |r| r.start)
            }
            _ => 0,
        };
        let parts = self.inputs.iter().filter_map(|x| x.get(index + offset).copied());
        let magnitude = match self.call.op {
            ReduceOp::Prod => parts.map(f64::abs).product::<f64>(),
            ReduceOp::Avg => parts.map(f64::abs).sum::<f64>() / n as f64,
            _ => parts.map(f64::abs).sum::<f64>(),
        };
        (got - want).abs() <= self.relative * magnitude.max(f64::MIN_POSITIVE)
    }
}

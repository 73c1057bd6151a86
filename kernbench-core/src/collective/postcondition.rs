//! Postconditions: what every collective must leave in every participant's output, computed the
//! straightforward way from the inputs, and the check of a run's outputs against it.
//!
//! Collectives are defined over the participants of an algorithm's plan, in rank order: for all-reduce,
//! every participant ends with the reduction of every participant's input (16 PEs holding `rank + 1`
//! all end with 136).
//!
//! Integer results, every non-reducing collective, `max`/`min`, and what `reduce` leaves on the ranks
//! that are not its root must match bit for bit. A floating-point `sum`, `avg` or `prod` may round
//! differently in another order: each of the `n - 1` combining steps of the algorithm and of the
//! reference rounds by at most half an `eps`, so an element passes when it is within `(n - 1) eps` of
//! the reference, relative to the sum of the magnitudes that went into it (the magnitude of the product
//! for `prod`).

use std::fmt;
use std::sync::Arc;

use super::Collective;
use crate::counts::{Counts, CountsError};
use crate::tile::{Dtype, ReduceOp, Tile, TileError, chunk_range};

/// The facts of one collective call that its postcondition depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallFacts {
    /// The collective.
    pub collective: Collective,
    /// The reduction operator (ignored by collectives that do not reduce).
    pub op: ReduceOp,
    /// The root rank of broadcast and reduce.
    pub root: usize,
    /// The per-pair counts of all-to-all-v and send/recv ([`Collective::takes_counts`]); `None` for
    /// the others.
    pub counts: Option<Arc<Counts>>,
}

impl From<Collective> for CallFacts {
    /// The facts of a call of `collective` summing from root 0, without counts.
    fn from(collective: Collective) -> CallFacts {
        CallFacts { collective, op: ReduceOp::Sum, root: 0, counts: None }
    }
}

impl CallFacts {
    /// The counts of a collective that takes them, checked against the inputs' lengths.
    ///
    /// # Errors
    /// [`PostconditionError::NoCounts`] when the collective takes counts and the call has none (or the
    /// other way round), [`PostconditionError::Counts`] when they do not fit the inputs.
    pub fn counts_for(&self, input_lengths: &[usize]) -> Result<Option<&Counts>, PostconditionError> {
        match (self.collective.takes_counts(), &self.counts) {
            (true, Some(counts)) => {
                counts.fit(input_lengths)?;
                Ok(Some(counts))
            }
            (false, None) => Ok(None),
            (takes, _) => Err(PostconditionError::NoCounts { collective: self.collective, takes }),
        }
    }
}

/// A participant's output buffer before a call: sized and typed by the collective, as every kernel of
/// that collective expects it. An all-reduce or reduce starts from a copy of the input (so `reduce`
/// leaves the other ranks' buffers as they were); every other output starts zeroed, so a kernel that
/// forgets to write it is caught.
///
/// The output of all-to-all-v and send/recv holds what `rank` receives, by `call`'s counts (empty
/// without them: [`check`] names the missing counts).
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use kernbench_core::{Collective, Counts, Dtype, Tile, postcondition::{CallFacts, starting_output}};
/// let input = Tile::filled(Dtype::F32, 10, 1.0);
/// assert_eq!(starting_output(&Collective::AllGather.into(), &input, 0, 4).len(), 40);
/// assert_eq!(starting_output(&Collective::ReduceScatter.into(), &input, 3, 4).len(), 2); // chunks 3, 3, 2, 2
/// let counts = Some(Arc::new(Counts::new(vec![vec![1, 9], vec![3, 7]]).unwrap()));
/// let call = CallFacts { counts, ..Collective::AllToAllV.into() };
/// assert_eq!(starting_output(&call, &input, 1, 2).len(), 16);
/// ```
pub fn starting_output(call: &CallFacts, input: &Tile, rank: usize, n: usize) -> Tile {
    let part = chunk_range(input.len(), rank, n).map_or(0, |r| r.len());
    let received = call.counts.as_ref().filter(|c| rank < c.ranks()).map_or(0, |c| c.received_by(rank));
    match call.collective {
        Collective::AllReduce | Collective::Reduce => input.clone(),
        Collective::Broadcast => Tile::zeros(input.dtype(), input.len()),
        Collective::AllGather => Tile::zeros(input.dtype(), input.len() * n),
        Collective::ReduceScatter => Tile::zeros(input.dtype(), part),
        Collective::AllToAll => Tile::zeros(input.dtype(), part * n),
        Collective::AllToAllV | Collective::SendRecv => Tile::zeros(input.dtype(), received),
    }
}

/// Why a reference could not be computed: the call's facts and tiles do not fit together.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PostconditionError {
    /// The inputs cannot be combined (mixed dtypes or lengths).
    #[error("the inputs cannot be combined: {0}")]
    Tile(#[from] TileError),
    /// A root that is not a rank.
    #[error("root {root} is not a rank: expected 0..{ranks}")]
    BadRoot {
        /// The root given.
        root: usize,
        /// The number of ranks.
        ranks: usize,
    },
    /// Not one `before` or output tile per rank.
    #[error("{what}: got {got} tiles for {ranks} ranks, expected one per rank")]
    TileCount {
        /// Which list.
        what: &'static str,
        /// Tiles given.
        got: usize,
        /// Ranks (inputs).
        ranks: usize,
    },
    /// A collective that takes per-pair counts called without them, or one that does not take them
    /// called with them.
    #[error(
        "{}",
        if *takes {
            format!("the call has no per-pair counts: expected counts, which {collective} needs")
        } else {
            format!("the call has per-pair counts, which {collective} does not take: expected none")
        }
    )]
    NoCounts {
        /// The collective.
        collective: Collective,
        /// Whether it takes counts.
        takes: bool,
    },
    /// Counts that do not fit the inputs.
    #[error(transparent)]
    Counts(#[from] CountsError),
}

/// The outputs a collective must produce, per rank, from every rank's input. `before` is each rank's
/// output buffer before the call: what `reduce` leaves on the ranks that are not the root.
///
/// # Errors
/// [`PostconditionError`] when the inputs cannot be combined, the root is not a rank, or `before` does
/// not hold one tile per rank.
pub fn reference(call: &CallFacts, inputs: &[Tile], before: &[Tile]) -> Result<Vec<Tile>, PostconditionError> {
    let references = References::new(call, inputs, before)?;
    (0..inputs.len()).map(|rank| references.of(rank)).collect()
}

/// Every rank's reference, made one rank at a time: the ranks of all-to-all each want a different
/// result, and holding them all at once would double the memory of checking a large call.
struct References<'a> {
    call: &'a CallFacts,
    inputs: &'a [Tile],
    before: &'a [Tile],
    /// The one result every rank's reference views, for every collective but the all-to-alls and
    /// send/recv.
    shared: Option<Tile>,
    /// The per-pair counts of the collectives that take them, checked against the inputs.
    counts: Option<&'a Counts>,
}

impl<'a> References<'a> {
    fn new(call: &'a CallFacts, inputs: &'a [Tile], before: &'a [Tile]) -> Result<References<'a>, PostconditionError> {
        let n = inputs.len();
        let counts = call.counts_for(&inputs.iter().map(Tile::len).collect::<Vec<_>>())?;
        if before.len() != n {
            return Err(PostconditionError::TileCount { what: "outputs before the call", got: before.len(), ranks: n });
        }
        if matches!(call.collective, Collective::Broadcast | Collective::Reduce) && call.root >= n {
            return Err(PostconditionError::BadRoot { root: call.root, ranks: n });
        }
        let reduced = || -> Result<Tile, TileError> {
            let (first, rest) = inputs.split_first().ok_or(TileError::EmptyConcat)?;
            // A fresh copy, so the reference never shares (and so never changes) an input's buffer.
            let mut acc = Tile::concat(std::slice::from_ref(first))?;
            for x in rest {
                acc.reduce_in_place(x, call.op)?;
            }
            acc.finish_reduction(call.op, n)?;
            Ok(acc)
        };
        let shared = match call.collective {
            Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce => Some(reduced()?),
            Collective::AllGather => Some(Tile::concat(inputs)?),
            Collective::Broadcast => Some(inputs[call.root].clone()),
            Collective::AllToAll | Collective::AllToAllV | Collective::SendRecv => None,
        };
        Ok(References { call, inputs, before, shared, counts })
    }

    /// The reference of `rank`, which must be below the number of inputs.
    fn of(&self, rank: usize) -> Result<Tile, PostconditionError> {
        let n = self.inputs.len();
        Ok(match (&self.shared, self.call.collective) {
            (Some(all), Collective::ReduceScatter) => all.chunk(rank, n)?,
            (Some(_), Collective::Reduce) if rank != self.call.root => self.before[rank].clone(),
            (Some(all), _) => all.clone(),
            (None, _) => {
                let block = |(from, x): (usize, &Tile)| match self.counts {
                    Some(counts) => {
                        let start = counts.send_offset(from, rank);
                        x.slice(start..start + counts.count(from, rank))
                    }
                    None => x.chunk(rank, n),
                };
                let blocks = self.inputs.iter().enumerate().map(block).collect::<Result<Vec<_>, _>>()?;
                Tile::concat(&blocks)?
            }
        })
    }
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

/// Whether a check of a run's outputs held: how many elements were wrong, and the first of them.
/// [`Postcondition`] (numeric) and [`Exactness`](super::provenance::Exactness) (by provenance) are this
/// verdict, each with its own kind of first mismatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict<M> {
    /// Whether every output matched.
    pub held: bool,
    /// How many elements (or whole outputs, for a shape mismatch) were wrong: nccl-tests' `#wrong`.
    pub wrong: usize,
    /// The first wrong element, for the error message.
    pub first: Option<M>,
}

impl<M> Verdict<M> {
    /// Nothing wrong (yet).
    pub const fn held() -> Verdict<M> {
        Verdict { held: true, wrong: 0, first: None }
    }

    /// Counts `count` wrong elements; `first` describes them if they are the first found.
    pub(crate) fn note(&mut self, count: usize, first: impl FnOnce() -> M) {
        self.held = false;
        self.wrong += count;
        if self.first.is_none() {
            self.first = Some(first());
        }
    }
}

/// Whether a run's outputs satisfy the collective's postcondition, to the rounding it allows.
pub type Postcondition = Verdict<Mismatch>;

impl fmt::Display for Verdict<Mismatch> {
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

/// Checks `outputs` (per rank, after the call) against the [`reference()`].
///
/// # Errors
/// As [`reference()`].
pub fn check(
    call: &CallFacts,
    inputs: &[Tile],
    before: &[Tile],
    outputs: &[Tile],
) -> Result<Postcondition, PostconditionError> {
    let references = References::new(call, inputs, before)?;
    let ranks = inputs.len();
    let mut result = Postcondition::held();
    let tolerance = Tolerance::new(call, inputs);
    for (rank, got) in outputs.iter().enumerate().take(ranks) {
        let want = &references.of(rank)?;
        if got.dtype() != want.dtype() || got.len() != want.len() {
            let shape = |t: &Tile| format!("{}[{}]", t.dtype(), t.len());
            result.note(1, || Mismatch { rank, index: None, got: shape(got), want: shape(want) });
            continue;
        }
        let rounded = tolerance.applies_to(rank);
        got.for_each_difference(want, |index, gv, wv| {
            if !(rounded && tolerance.accepts(gv, wv, index, rank)) {
                result.note(1, || Mismatch { rank, index: Some(index), got: gv.to_string(), want: wv.to_string() });
            }
        })?;
    }
    if outputs.len() != ranks {
        result.note(outputs.len().abs_diff(ranks), || Mismatch {
            rank: outputs.len().min(ranks),
            index: None,
            got: format!("{} outputs", outputs.len()),
            want: format!("{ranks} outputs"),
        });
    }
    Ok(result)
}

/// How far a floating-point reduction may stray from the reference.
struct Tolerance<'a> {
    /// Relative error allowed per unit of magnitude; zero means exact.
    relative: f64,
    call: &'a CallFacts,
    /// The inputs, read element by element only where an output differs from the reference.
    inputs: &'a [Tile],
}

impl<'a> Tolerance<'a> {
    fn new(call: &'a CallFacts, inputs: &'a [Tile]) -> Tolerance<'a> {
        let reduces = matches!(call.collective, Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce);
        let rounds = matches!(call.op, ReduceOp::Sum | ReduceOp::Avg | ReduceOp::Prod);
        let eps = match inputs.first().map(Tile::dtype) {
            Some(Dtype::F32) => f64::from(f32::EPSILON),
            Some(Dtype::F16) => f64::from(half::f16::EPSILON),
            Some(Dtype::BF16) => f64::from(half::bf16::EPSILON),
            Some(Dtype::I32 | Dtype::I64) | None => 0.0,
        };
        let relative = if reduces && rounds { inputs.len().saturating_sub(1).max(1) as f64 * eps } else { 0.0 };
        Tolerance { relative, call, inputs }
    }

    /// Whether `rank`'s output is a rounded reduction (not, for `reduce`, a rank other than the root,
    /// whose output must be left exactly as it was).
    fn applies_to(&self, rank: usize) -> bool {
        self.relative > 0.0 && (self.call.collective != Collective::Reduce || rank == self.call.root)
    }

    /// Whether `got` is close enough to `want` at element `index` of `rank`'s output.
    fn accepts(&self, got: f64, want: f64, index: usize, rank: usize) -> bool {
        if !got.is_finite() || !want.is_finite() {
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
        let parts = self.inputs.iter().filter_map(|x| x.get_f64(index + offset));
        let magnitude = match self.call.op {
            ReduceOp::Prod => parts.map(f64::abs).product::<f64>(),
            ReduceOp::Avg => parts.map(f64::abs).sum::<f64>() / n as f64,
            _ => parts.map(f64::abs).sum::<f64>(),
        };
        (got - want).abs() <= self.relative * magnitude.max(f64::MIN_POSITIVE)
    }
}

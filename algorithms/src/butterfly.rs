//! Butterfly algorithms on `hypercube`: recursive-doubling all-reduce and all-gather, Rabenseifner's
//! all-reduce, and recursive-halving reduce-scatter.
//!
//! With `p2` the largest power of two not above the rank count `n`, ranks below `p2` form the core
//! and exchange over `dim<k>` with `rank ^ 2^k`. Each extra rank `e >= p2` is folded into its partner
//! `e - p2` over `dim<log2 p2>` before the butterfly and gets its result from it afterwards, so every
//! kernel works for any `n`.
//!
//! Two partners that both keep a combination of their data combine it the same way, the lower rank's
//! data first, so they hold the same bits afterwards and every rank ends with the same result.

use kernbench_core::chunk_start;
use kernbench_core::prelude::*;

use crate::ring::split;

/// This rank's place in a `hypercube` topology.
#[derive(Clone, Copy, Debug)]
struct Cube {
    /// This rank.
    rank: usize,
    /// The number of ranks.
    count: usize,
    /// The number of core ranks: the largest power of two not above `count`.
    core: usize,
    /// `log2(core)`: the dimensions of the core, and the dimension that links the extras.
    dims: usize,
}

impl Cube {
    /// Recursive halving across dimension `k` of the core ranks' range `lo..hi`: the half this rank
    /// keeps and the half it gives its partner, each as `(lo, hi)`.
    fn halve(&self, k: usize, lo: usize, hi: usize) -> ((usize, usize), (usize, usize)) {
        let mid = lo + (hi - lo) / 2;
        if self.is_lower(k) { ((lo, mid), (mid, hi)) } else { ((mid, hi), (lo, mid)) }
    }

    fn new(rank: usize, count: usize) -> Cube {
        let dims = count.ilog2() as usize;
        Cube { rank, count, core: 1 << dims, dims }
    }

    /// Whether this rank is outside the core and folds into its partner.
    fn is_extra(self) -> bool {
        self.rank >= self.core
    }

    /// The extra rank folded into this core rank, if any.
    fn extra(self) -> Option<usize> {
        Some(self.rank + self.core).filter(|&extra| extra < self.count)
    }

    /// The link between an extra rank and its core partner.
    fn fold(self) -> Direction {
        dim(self.dims)
    }

    /// Whether this rank is the lower one of the pair across dimension `k`.
    fn is_lower(self, k: usize) -> bool {
        self.rank & (1 << k) == 0
    }

    /// The ranks whose data core ranks `first..first + len` stand for, in rank order: those ranks and
    /// their extras.
    fn members(self, first: usize, len: usize) -> Vec<usize> {
        let extras = (first + self.core..first + len + self.core).filter(|&r| r < self.count);
        (first..first + len).chain(extras).collect()
    }
}

/// The hypercube link across dimension `k`.
fn dim(k: usize) -> Direction {
    // At most 19 dimensions (HYPERCUBE_MAX_PARTICIPANTS is 2^19), so `k` fits a u8.
    Direction::Dim(k as u8)
}

/// `op` of two partners' tiles with the lower rank's first, so both partners get the same bits.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn combine_ordered(tl: &Tl, mine: Tile, theirs: Tile, mine_first: bool, op: ReduceOp) -> Tile {
    let (mut acc, other) = if mine_first { (mine, theirs) } else { (theirs, mine) };
    tl.reduce(&mut acc, &other, op);
    acc
}

/// An extra rank's whole part: hands `data` to its core partner and stores what comes back, `len`
/// elements, as its output.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn delegate_to_partner(tl: &Tl, cube: Cube, data: &Tile, len: usize) {
    tl.send(cube.fold(), data);
    let result = tl.recv(cube.fold(), len, data.dtype());
    tl.store(Output, &result);
}

/// The data a core rank reduces: its input with its extra's reduced in (its own first), if it has an
/// extra. `None` on an extra rank, which [delegates](delegate_to_partner) its part, a result of
/// `result_len` elements.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn fold_extras(tl: &Tl, cube: Cube, mut data: Tile, result_len: usize, op: ReduceOp) -> Option<Tile> {
    if cube.is_extra() {
        delegate_to_partner(tl, cube, &data, result_len);
        return None;
    }
    if cube.extra().is_some() {
        let theirs = tl.recv(cube.fold(), data.len(), data.dtype());
        tl.reduce(&mut data, &theirs, op);
    }
    Some(data)
}

/// One step of recursive halving across dimension `k`: sends the partner `given` (the pieces of the
/// half this rank gives up) as one message, and combines each of `kept` (the pieces of the half it
/// keeps) with its share of the partner's message, the lower rank's data first.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn exchange_halves(tl: &Tl, cube: Cube, k: usize, given: &[Tile], kept: Vec<Tile>, op: ReduceOp) -> Vec<Tile> {
    let message = tl.concat(given);
    tl.send(dim(k), &message);
    let got = tl.recv(dim(k), kept.iter().map(Tile::len).sum(), message.dtype());
    let mut combined = Vec::with_capacity(kept.len());
    let mut offset = 0;
    for piece in kept {
        let theirs = tl.slice(&got, offset, piece.len());
        offset += theirs.len();
        combined.push(combine_ordered(tl, piece, theirs, cube.is_lower(k), op));
    }
    combined
}

/// Sends a core rank's `result` to its extra, if it has one.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn send_to_extra(tl: &Tl, cube: Cube, result: &Tile) {
    if cube.extra().is_some() {
        tl.send(cube.fold(), result);
    }
}

/// Recursive-doubling all-reduce: `log2 n` steps in which partners swap everything they have reduced
/// so far and combine it.
///
/// Topology `hypercube`, any mapper, any number of ranks (extras fold into partners first).
#[ccl_kernel(crate = "kernbench_core")]
pub fn recursive_doubling_allreduce(tl: &Tl) {
    let cube = Cube::new(tl.rank(), tl.size());
    let op = tl.op();
    let data = tl.load(Input);
    let len = data.len();
    let Some(mut acc) = fold_extras(tl, cube, data, len, op) else {
        return;
    };
    for k in 0..cube.dims {
        tl.send(dim(k), &acc);
        let theirs = tl.recv(dim(k), acc.len(), acc.dtype());
        acc = combine_ordered(tl, acc, theirs, cube.is_lower(k), op);
    }
    tl.finish(&mut acc, op, cube.count);
    send_to_extra(tl, cube, &acc);
    tl.store(Output, &acc);
}

/// Rabenseifner's all-reduce: a recursive-halving reduce-scatter then a recursive-doubling
/// all-gather, so each rank sends about twice the data once instead of all of it `log2 n` times.
///
/// Topology `hypercube`, any mapper, any number of ranks (extras fold into partners first). The core
/// splits the data into `p2` near-equal segments; core rank `i` reduces segment `i`.
#[ccl_kernel(crate = "kernbench_core")]
pub fn rabenseifner_allreduce(tl: &Tl) {
    let cube = Cube::new(tl.rank(), tl.size());
    let op = tl.op();
    let data = tl.load(Input);
    let (len, dtype) = (data.len(), data.dtype());
    let Some(mut acc) = fold_extras(tl, cube, data, len, op) else {
        return;
    };
    let start = |segment: usize| chunk_start(len, segment, cube.core);
    // `acc` holds segments `lo..hi`; each step keeps the half on this rank's side of dimension `k`,
    // reduced as one piece.
    let (mut lo, mut hi) = (0, cube.core);
    for k in (0..cube.dims).rev() {
        let ((keep_lo, keep_hi), (give_lo, give_hi)) = cube.halve(k, lo, hi);
        let kept = tl.slice(&acc, start(keep_lo) - start(lo), start(keep_hi) - start(keep_lo));
        let given = tl.slice(&acc, start(give_lo) - start(lo), start(give_hi) - start(give_lo));
        acc = exchange_halves(tl, cube, k, &[given], vec![kept], op).remove(0);
        (lo, hi) = (keep_lo, keep_hi);
    }
    // Segment `rank` is final: finish it once, here, and share it.
    tl.finish(&mut acc, op, cube.count);
    for k in 0..cube.dims {
        let size = 1 << k;
        let partner_lo = lo ^ size;
        tl.send(dim(k), &acc);
        let theirs = tl.recv(dim(k), start(partner_lo + size) - start(partner_lo), dtype);
        acc = if cube.is_lower(k) { tl.concat(&[acc, theirs]) } else { tl.concat(&[theirs, acc]) };
        lo = lo.min(partner_lo);
    }
    send_to_extra(tl, cube, &acc);
    tl.store(Output, &acc);
}

/// Recursive-doubling all-gather: `log2 n` steps in which partners swap every block they hold, so
/// the blocks held double each step.
///
/// Topology `hypercube`, any mapper, any number of ranks: an extra rank gives its block to its partner
/// first and receives the whole result at the end. A message carries its sender's blocks in rank order.
#[ccl_kernel(crate = "kernbench_core")]
pub fn recursive_doubling_allgather(tl: &Tl) {
    let cube = Cube::new(tl.rank(), tl.size());
    let mine = tl.load(Input);
    let (m, dtype) = (mine.len(), mine.dtype());
    if cube.is_extra() {
        delegate_to_partner(tl, cube, &mine, m * cube.count);
        return;
    }
    // The other ranks' blocks, by shape only: each is replaced by what arrives, never read first.
    let mut blocks = vec![Tile::without_data(dtype, m); cube.count];
    blocks[cube.rank] = mine;
    if let Some(extra) = cube.extra() {
        blocks[extra] = tl.recv(cube.fold(), m, dtype);
    }
    for k in 0..cube.dims {
        // This rank stands for the core ranks of its aligned group of 2^k, and their extras.
        let size = 1 << k;
        let first = cube.rank & !(size - 1);
        let held: Vec<Tile> = cube.members(first, size).into_iter().map(|r| blocks[r].clone()).collect();
        let message = tl.concat(&held);
        tl.send(dim(k), &message);
        let from = cube.members(first ^ size, size);
        let got = tl.recv(dim(k), from.len() * m, dtype);
        for (i, r) in from.into_iter().enumerate() {
            blocks[r] = tl.slice(&got, i * m, m);
        }
    }
    let all = tl.concat(&blocks);
    send_to_extra(tl, cube, &all);
    tl.store(Output, &all);
}

/// Recursive-halving reduce-scatter: `log2 n` steps in which partners swap the half of the data the
/// other keeps reducing, so each rank sends about the data once.
///
/// Topology `hypercube`, any mapper, any number of ranks: an extra rank folds its data into its partner
/// first and receives its part at the end. Core rank `i` is responsible for rank `i`'s part and, if
/// rank `i + p2` exists, that one's too; the halving splits these pairs between the partners.
#[ccl_kernel(crate = "kernbench_core")]
pub fn recursive_halving_reduce_scatter(tl: &Tl) {
    let cube = Cube::new(tl.rank(), tl.size());
    let op = tl.op();
    let data = tl.load(Input);
    let own_part = tl.chunk(&data, cube.rank, cube.count).len();
    let Some(acc) = fold_extras(tl, cube, data, own_part, op) else {
        return;
    };
    let mut parts = split(tl, &acc, cube.count);
    // This rank still reduces the parts of core ranks `lo..hi` and their extras, each on its own.
    let (mut lo, mut hi) = (0, cube.core);
    for k in (0..cube.dims).rev() {
        let ((keep_lo, keep_hi), (give_lo, give_hi)) = cube.halve(k, lo, hi);
        let given: Vec<Tile> = cube.members(give_lo, give_hi - give_lo).into_iter().map(|p| parts[p].clone()).collect();
        let kept = cube.members(keep_lo, keep_hi - keep_lo);
        let combined = exchange_halves(tl, cube, k, &given, kept.iter().map(|&p| parts[p].clone()).collect(), op);
        for (p, part) in kept.into_iter().zip(combined) {
            parts[p] = part;
        }
        (lo, hi) = (keep_lo, keep_hi);
    }
    if let Some(extra) = cube.extra() {
        let mut theirs = parts[extra].clone();
        tl.finish(&mut theirs, op, cube.count);
        tl.send(cube.fold(), &theirs);
    }
    let mut mine = parts[cube.rank].clone();
    tl.finish(&mut mine, op, cube.count);
    tl.store(Output, &mine);
}

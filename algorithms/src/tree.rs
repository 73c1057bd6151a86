//! Tree algorithms: pipelined all-reduce over one binary tree (`tree`) or over two mirrored ones at once
//! (`double_binary_tree`), and a binomial-tree broadcast from any root (`circulant`).
//!
//! An all-reduce reduces each piece of the data up the tree (every member adds its children's partial
//! results to its own) and broadcasts the root's result back down. Pieces are streamed: a member at
//! depth `d` sends piece `p` up at time slot `p + H - d` and receives it back at slot `p + H + d` (`H`
//! the tree's height), so a leaf keeps sending pieces up while earlier ones are still coming down.
//! Every receive waits only for a send of an earlier slot, and a queue carries at most one message per
//! slot, so the schedule cannot deadlock whatever the queue depth. The root reduces each element in
//! one fixed order and everyone else receives its bits, so every rank ends with the same bits.

use kernbench_core::prelude::*;

use crate::ring::split;

/// One binary tree in heap order (children of position `p` at `2p + 1` and `2p + 2`), seen from one
/// member.
#[derive(Clone, Copy, Debug)]
struct HeapTree {
    /// Which tree of the topology: 0, or 1 for the mirrored tree of `double_binary_tree`.
    index: u8,
    /// This member's heap position; 0 is the root.
    position: usize,
    /// The number of members.
    count: usize,
}

impl HeapTree {
    /// The direction to the parent; `None` at the root.
    fn parent(self) -> Option<Direction> {
        (self.position > 0).then_some(Direction::Parent(self.index))
    }

    /// The heap positions of this member's children, as `(k, position)` for `Child(index, k)`.
    fn children(self) -> Vec<(u8, usize)> {
        (0..2u8).map(|k| (k, 2 * self.position + 1 + usize::from(k))).filter(|&(_, child)| child < self.count).collect()
    }

    /// The directions to this member's children, left first.
    fn child_directions(self) -> Vec<Direction> {
        self.children().into_iter().map(|(k, _)| Direction::Child(self.index, k)).collect()
    }

    /// Edges from the root down to this member.
    fn depth(self) -> usize {
        depth_of(self.position)
    }

    /// The depth of the deepest member.
    fn height(self) -> usize {
        depth_of(self.count - 1)
    }
}

/// The depth of heap position `position`.
fn depth_of(position: usize) -> usize {
    (position + 1).ilog2() as usize
}

/// Reduces one piece up `tree`: own data, then child 0's partial result, then child 1's. Returns the
/// partial result sent to the parent, or at the root the finished result over `contributions` inputs.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn reduce_up(tl: &Tl, tree: HeapTree, mut acc: Tile, op: ReduceOp, contributions: usize) -> Tile {
    for child in tree.child_directions() {
        let partial = tl.recv(child, acc.len(), acc.dtype());
        tl.reduce(&mut acc, &partial, op);
    }
    match tree.parent() {
        Some(parent) => tl.send(parent, &acc),
        None => tl.finish(&mut acc, op, contributions),
    }
    acc
}

/// Broadcasts one piece down `tree`: the root's `piece`, or what the parent sends (which replaces the
/// partial result `piece` held).
#[ccl_kernel(helper, crate = "kernbench_core")]
fn broadcast_down(tl: &Tl, tree: HeapTree, piece: Tile) -> Tile {
    let result = match tree.parent() {
        Some(parent) => tl.recv(parent, piece.len(), piece.dtype()),
        None => piece,
    };
    for child in tree.child_directions() {
        tl.send(child, &result);
    }
    result
}

/// All-reduces `pieces[t]` over `trees[t]` for every tree at once, on the streamed schedule of the
/// module docs; every tree has the same shape and the same number of pieces. In each slot the trees
/// reduce in turn, then broadcast in turn.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn tree_allreduce_pieces(tl: &Tl, trees: &[HeapTree], mut pieces: Vec<Vec<Tile>>, op: ReduceOp) -> Vec<Vec<Tile>> {
    let contributions = tl.size();
    let (height, count) = (trees[0].height(), pieces[0].len());
    for slot in 0..count + 2 * height {
        for (t, &tree) in trees.iter().enumerate() {
            if let Some(p) = (slot + tree.depth()).checked_sub(height).filter(|&p| p < count) {
                pieces[t][p] = reduce_up(tl, tree, pieces[t][p].clone(), op, contributions);
            }
        }
        for (t, &tree) in trees.iter().enumerate() {
            if let Some(p) = slot.checked_sub(height + tree.depth()).filter(|&p| p < count) {
                pieces[t][p] = broadcast_down(tl, tree, pieces[t][p].clone());
            }
        }
    }
    pieces
}

/// Tree all-reduce: `chunks` pieces each reduced up a binary tree to rank 0 and broadcast back down,
/// streamed so that pieces overlap.
///
/// Topology `tree`, any mapper, any number of ranks. `chunks` is clamped to `1..=len`.
#[ccl_kernel(crate = "kernbench_core")]
pub fn tree_allreduce(tl: &Tl, chunks: usize) {
    let tree = HeapTree { index: 0, position: tl.rank(), count: tl.size() };
    let op = tl.op();
    let data = tl.load(Input);
    let chunks = chunks.clamp(1, data.len().max(1));
    let pieces = vec![split(tl, &data, chunks)];
    let pieces = tree_allreduce_pieces(tl, &[tree], pieces, op);
    tl.store(Output, &tl.concat(&pieces.concat()));
}

/// Double-binary-tree all-reduce: half the data over each of two mirrored binary trees at once, in
/// `chunks` pieces per half, so that each rank sends and receives on both trees.
///
/// Topology `double_binary_tree` (tree 0 rooted at rank 0, tree 1 at rank `n - 1`), any mapper, any
/// number of ranks. `chunks` is clamped to `1..=len / 2` (at least 1).
#[ccl_kernel(crate = "kernbench_core")]
pub fn double_binary_tree_allreduce(tl: &Tl, chunks: usize) {
    let (rank, n) = (tl.rank(), tl.size());
    let trees =
        [HeapTree { index: 0, position: rank, count: n }, HeapTree { index: 1, position: n - 1 - rank, count: n }];
    let op = tl.op();
    let data = tl.load(Input);
    let halves = [tl.chunk(&data, 0, 2), tl.chunk(&data, 1, 2)];
    let chunks = chunks.clamp(1, halves[0].len().max(1));
    let pieces = vec![split(tl, &halves[0], chunks), split(tl, &halves[1], chunks)];
    let pieces = tree_allreduce_pieces(tl, &trees, pieces, op);
    tl.store(Output, &tl.concat(&pieces.concat()));
}

/// Binomial-tree broadcast from any root. Ranks are numbered from the root, `v = (rank - root) mod n`:
/// rank `v` gets the data from `v - 2^j` (`2^j` the highest power of two in `v`) and passes it on to
/// `v + 2^k` for every `k > j` with `v + 2^k < n`, the nearest first (the largest subtree first). Its
/// edges are the root-0 tree's turned round the ring, so on a ring or a switch the broadcast takes the
/// same time from every root.
///
/// Topology `circulant` (or `full`), any mapper, any number of ranks and any root among them (the
/// runtime rejects a root that is not a rank before any kernel runs).
#[ccl_kernel(crate = "kernbench_core")]
pub fn tree_broadcast(tl: &Tl) {
    let (rank, n, root) = (tl.rank(), tl.size(), tl.root());
    let data = tl.load(Input);
    let v = (rank + n - root) % n;
    let peer = |v: usize| Direction::peer((v + root) % n);
    let (result, first) = if v == 0 {
        (data, 0)
    } else {
        let highest = v.ilog2();
        (tl.recv(peer(v - (1 << highest))?, data.len(), data.dtype()), highest + 1)
    };
    for k in first..usize::BITS {
        match v.checked_add(1 << k).filter(|&child| child < n) {
            Some(child) => tl.send(peer(child)?, &result),
            None => break,
        }
    }
    tl.store(Output, &result);
}

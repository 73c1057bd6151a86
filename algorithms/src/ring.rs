//! Ring algorithms on `ring_1d`: all-reduce (plain, chunked and bidirectional), all-gather,
//! reduce-scatter, pipelined broadcast and reduce.
//!
//! The ring of `p` ranks splits data into `p` parts. Reduce-scatter takes `p - 1` steps in which every
//! rank sends one part forward and reduces the part arriving from behind into its own, and leaves rank
//! `r` owning the fully reduced part `r + 1`; all-gather takes `p - 1` more steps passing finished parts
//! on. Every part is reduced once, in one fixed order, so every rank ends with the same bits.

use kernbench_core::prelude::*;

/// A ring's directions and this rank's place in it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ring {
    /// This member's position.
    pub(crate) position: usize,
    /// The number of members.
    pub(crate) count: usize,
    /// Toward position + 1.
    pub(crate) forward: Direction,
    /// Toward position - 1.
    pub(crate) back: Direction,
}

impl Ring {
    /// The same ring walked the other way.
    pub(crate) fn reversed(self) -> Ring {
        Ring { position: (self.count - self.position) % self.count, forward: self.back, back: self.forward, ..self }
    }

    /// The part this member sends at step `step` of a reduce-scatter: its own position first, then
    /// each part it has just reduced.
    fn send_part(self, step: usize) -> usize {
        (self.position + self.count - step % self.count) % self.count
    }

    /// The part that arrives at step `step` of a reduce-scatter.
    fn recv_part(self, step: usize) -> usize {
        self.send_part(step + 1)
    }
}

/// The ring of all ranks of a `ring_1d` topology, forward = E.
#[ccl_kernel(helper, crate = "kernbench_core")]
pub(crate) fn rank_ring(tl: &Tl) -> Ring {
    Ring { position: tl.rank(), count: tl.size(), forward: E, back: W }
}

/// `tile` as `count` near-equal parts, without copying.
#[ccl_kernel(helper, crate = "kernbench_core")]
pub(crate) fn split(tl: &Tl, tile: &Tile, count: usize) -> Vec<Tile> {
    let mut parts = Vec::with_capacity(count);
    for i in 0..count {
        parts.push(tl.chunk(tile, i, count));
    }
    parts
}

/// Reduce-scatter over `ring`: afterwards this member's part `position + 1` holds every member's
/// contribution reduced (the other parts hold partial results).
#[ccl_kernel(helper, crate = "kernbench_core")]
pub(crate) fn ring_reduce_scatter_parts(tl: &Tl, mut parts: Vec<Tile>, ring: Ring, op: ReduceOp) -> Vec<Tile> {
    for step in 0..ring.count - 1 {
        let (send, recv) = (ring.send_part(step), ring.recv_part(step));
        tl.send(ring.forward, &parts[send]);
        let got = tl.recv(ring.back, parts[recv].len(), parts[recv].dtype());
        tl.reduce(&mut parts[recv], &got, op);
    }
    parts
}

/// All-gather over `ring`, starting from this member owning part `position + 1` (as a reduce-scatter
/// leaves it): afterwards every part is every member's.
#[ccl_kernel(helper, crate = "kernbench_core")]
pub(crate) fn ring_all_gather_parts(tl: &Tl, mut parts: Vec<Tile>, ring: Ring) -> Vec<Tile> {
    for step in 0..ring.count - 1 {
        let (send, recv) = (ring.send_part(step + ring.count - 1), ring.recv_part(step + ring.count - 1));
        tl.send(ring.forward, &parts[send]);
        parts[recv] = tl.recv(ring.back, parts[recv].len(), parts[recv].dtype());
    }
    parts
}

/// Ring all-reduce: reduce-scatter then all-gather, on each of `chunks` slices of the data in turn so
/// that one slice's transfers overlap the next one's reductions along the ring.
#[ccl_kernel(crate = "kernbench_core")]
pub fn ring_allreduce(tl: &Tl, chunks: usize) {
    let ring = rank_ring(tl);
    let op = tl.op();
    let data = tl.load(Input);
    let chunks = chunks.clamp(1, data.len().max(1));
    let mut done = Vec::with_capacity(chunks * ring.count);
    for c in 0..chunks {
        let slice = tl.chunk(&data, c, chunks);
        let parts = split(tl, &slice, ring.count);
        let parts = ring_reduce_scatter_parts(tl, parts, ring, op);
        done.extend(ring_all_gather_parts(tl, parts, ring));
    }
    let mut result = tl.concat(&done);
    tl.finish(&mut result, op, ring.count);
    tl.store(Output, &result);
}

/// Bidirectional ring all-reduce: half the data goes round eastward and half westward at the same
/// time, so both directions of every link carry data (as YALI does on its two links).
#[ccl_kernel(crate = "kernbench_core")]
pub fn bidirectional_ring_allreduce(tl: &Tl) {
    let east = rank_ring(tl);
    let west = east.reversed();
    let op = tl.op();
    let data = tl.load(Input);
    let mut a = split(tl, &tl.chunk(&data, 0, 2), east.count);
    let mut b = split(tl, &tl.chunk(&data, 1, 2), west.count);
    // Both halves step together: send both, then receive both, so neither direction waits on the other.
    for step in 0..east.count - 1 {
        let (sa, ra, sb, rb) = (east.send_part(step), east.recv_part(step), west.send_part(step), west.recv_part(step));
        tl.send(east.forward, &a[sa]);
        tl.send(west.forward, &b[sb]);
        let got_a = tl.recv(east.back, a[ra].len(), a[ra].dtype());
        tl.reduce(&mut a[ra], &got_a, op);
        let got_b = tl.recv(west.back, b[rb].len(), b[rb].dtype());
        tl.reduce(&mut b[rb], &got_b, op);
    }
    for step in east.count - 1..2 * (east.count - 1) {
        let (sa, ra, sb, rb) = (east.send_part(step), east.recv_part(step), west.send_part(step), west.recv_part(step));
        tl.send(east.forward, &a[sa]);
        tl.send(west.forward, &b[sb]);
        a[ra] = tl.recv(east.back, a[ra].len(), a[ra].dtype());
        b[rb] = tl.recv(west.back, b[rb].len(), b[rb].dtype());
    }
    a.extend(b);
    let mut result = tl.concat(&a);
    tl.finish(&mut result, op, east.count);
    tl.store(Output, &result);
}

/// Parts rotated so that a reduce-scatter's or all-gather's "part `position + 1`" is this member's
/// own part `position`.
fn own_part_last(mut parts: Vec<Tile>) -> Vec<Tile> {
    parts.rotate_right(1);
    parts
}

/// The inverse of [`own_part_last`].
fn own_part_first(mut parts: Vec<Tile>) -> Vec<Tile> {
    parts.rotate_left(1);
    parts
}

/// Ring all-gather: every rank's input, in rank order, in every rank's output.
#[ccl_kernel(crate = "kernbench_core")]
pub fn ring_allgather(tl: &Tl) {
    let ring = rank_ring(tl);
    let mine = tl.load(Input);
    let mut parts = vec![Tile::zeros(mine.dtype(), mine.len()); ring.count];
    parts[ring.position] = mine;
    let parts = own_part_first(ring_all_gather_parts(tl, own_part_last(parts), ring));
    tl.store(Output, &tl.concat(&parts));
}

/// Ring reduce-scatter: rank `r` ends with part `r` (of `size` near-equal parts) of the reduction.
#[ccl_kernel(crate = "kernbench_core")]
pub fn ring_reduce_scatter(tl: &Tl) {
    let ring = rank_ring(tl);
    let op = tl.op();
    let data = tl.load(Input);
    let parts = own_part_last(split(tl, &data, ring.count));
    let parts = own_part_first(ring_reduce_scatter_parts(tl, parts, ring, op));
    let mut mine = parts[ring.position].clone();
    tl.finish(&mut mine, op, ring.count);
    tl.store(Output, &mine);
}

/// Pipelined ring broadcast: the root's data travels east along the chain root, root + 1, ..., in
/// `chunks` pieces, each rank forwarding a piece as soon as it has it.
#[ccl_kernel(crate = "kernbench_core")]
pub fn ring_broadcast(tl: &Tl, chunks: usize) {
    let ring = rank_ring(tl);
    let root = tl.root();
    let data = tl.load(Input);
    let chunks = chunks.clamp(1, data.len().max(1));
    // Distance from the root along the chain; the last rank does not forward.
    let hop = (ring.position + ring.count - root) % ring.count;
    let mut pieces = Vec::with_capacity(chunks);
    for c in 0..chunks {
        let piece = if hop == 0 {
            tl.chunk(&data, c, chunks)
        } else {
            let len = tl.chunk(&data, c, chunks).len();
            tl.recv(ring.back, len, data.dtype())
        };
        if hop + 1 < ring.count {
            tl.send(ring.forward, &piece);
        }
        pieces.push(piece);
    }
    tl.store(Output, &tl.concat(&pieces));
}

/// Pipelined ring reduce: partial results travel east from the rank after the root to the root, each
/// rank adding its own, in `chunks` pieces. Only the root's output changes.
#[ccl_kernel(crate = "kernbench_core")]
pub fn ring_reduce(tl: &Tl, chunks: usize) {
    let ring = rank_ring(tl);
    let (root, op) = (tl.root(), tl.op());
    let data = tl.load(Input);
    let chunks = chunks.clamp(1, data.len().max(1));
    // Distance from the chain's start (the rank after the root); the root is last.
    let hop = (ring.position + ring.count - root - 1) % ring.count;
    let mut pieces = Vec::with_capacity(chunks);
    for c in 0..chunks {
        let mut piece = tl.chunk(&data, c, chunks);
        if hop > 0 {
            let partial = tl.recv(ring.back, piece.len(), piece.dtype());
            let own = piece;
            piece = partial;
            tl.reduce(&mut piece, &own, op);
        }
        if hop + 1 < ring.count {
            tl.send(ring.forward, &piece);
        }
        pieces.push(piece);
    }
    if ring.position == root {
        let mut result = tl.concat(&pieces);
        tl.finish(&mut result, op, ring.count);
        tl.store(Output, &result);
    }
}

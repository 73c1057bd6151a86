//! Ring algorithms on `ring_1d`: all-reduce (one ring or one each way), all-gather and reduce-scatter,
//! pipelined in pieces; pipelined broadcast and reduce.
//!
//! The ring of `p` ranks splits data into `p` parts. Reduce-scatter takes `p - 1` steps in which every
//! rank sends one part forward and reduces the part arriving from behind into its own, and leaves rank
//! `r` owning the fully reduced part `r + 1`; all-gather takes `p - 1` more steps passing finished parts
//! on. Every part is reduced once, in one fixed order, so every rank ends with the same bits.
//!
//! Each part travels in `k` pieces, and a rank sends a piece on as soon as it has it (reduced, in a
//! reduce-scatter), before it waits for the next one: every rank keeps `k` pieces in flight, so the link
//! has the next piece ready while the last one is still on the wire, and latency hides behind
//! transmission once `(k - 1)` pieces take at least a link's latency to send.
//!
//! The queues bound `k`. A send waits for a credit, and a credit comes back a route latency after the
//! receive that frees it; with depth `d`, the link stays busy only if `(d - 1)` pieces take at least two
//! latencies to send. At `k = d` every send waits for the credit of the receive just before it, a
//! latency per piece; above `d` a rank has more pieces out than its queue holds and waits for a credit
//! that its neighbour returns only after its own `k` sends, all the way round the ring: a deadlock, so
//! the kernels cut at most `d` pieces ([`Tl::queue_depth`]). Keep `k` at most half the queue depth.
//!
//! Lanes are the other way to keep a link busy: with `lanes` lanes, lane `l` runs the whole ring on
//! chunk `l` of the data, on its own channel with its own queue. The lanes' messages share every link,
//! so while one lane's message pays the latency another's is on the wire: the link stays busy once
//! `(lanes - 1)` messages take a latency to send, and each lane's queue needs no more credits than one
//! piece. The two compose: `lanes` rings of `k` pieces each keep `lanes x k` messages in flight.

use std::ops::Range;

use kernbench_core::kernel::hint;
use kernbench_core::{chunk_range, chunk_start};

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

    /// `x` modulo the member count, for `x` below twice it (as every step and position sum here is):
    /// one subtraction where a division would be, on every message.
    fn wrap(self, x: usize) -> usize {
        debug_assert!(x < 2 * self.count);
        if x >= self.count { x - self.count } else { x }
    }

    /// The part this member sends at step `step` of a reduce-scatter: its own position first, then
    /// each part it has just reduced.
    fn send_part(self, step: usize) -> usize {
        self.wrap(self.position + self.count - self.wrap(step))
    }

    /// The part that arrives at step `step` of a reduce-scatter.
    fn recv_part(self, step: usize) -> usize {
        self.send_part(step + 1)
    }

    /// The steps of a reduce-scatter over this ring; the all-gather's follow them.
    fn reduce_scatter_steps(self) -> Range<usize> {
        0..self.count - 1
    }

    /// The steps of an all-gather over this ring, after a reduce-scatter's.
    fn all_gather_steps(self) -> Range<usize> {
        self.count - 1..2 * (self.count - 1)
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

/// How many pieces to cut each of `parts` parts of `len` elements into: `chunks`, but at least one
/// and no more than a part has elements.
fn pieces_per_part(chunks: usize, len: usize, parts: usize) -> usize {
    chunks.clamp(1, (len / parts.max(1)).max(1))
}

/// A ring's parts by shape alone, as [`ring_steps`] keeps them in a timing-only run: near-equal chunks
/// of their total, as a split tile's are (and a reduce-scatter's lane shares of them, and an
/// all-gather's blocks), the first `longer` of the `count` one element longer than the others. Their
/// pieces are near-equal chunks of them: `cuts` has, for the shorter parts and for the longer, the
/// pieces' shorter length and how many are one longer, so that a piece's length takes no division on
/// each message.
struct EvenParts {
    dtype: Dtype,
    count: usize,
    longer: usize,
    cuts: [(usize, usize); 2],
}

impl EvenParts {
    /// The shapes of `parts`, each cut into `pieces`, if they are near-equal chunks of their total.
    fn of(parts: &[Tile], pieces: usize) -> Option<EvenParts> {
        let (count, total) = (parts.len(), parts.iter().map(Tile::len).sum::<usize>());
        let dtype = parts.first()?.dtype();
        let even = |(i, part): (usize, &Tile)| {
            part.dtype() == dtype && chunk_range(total, i, count).is_ok_and(|range| range.len() == part.len())
        };
        if pieces == 0 || !parts.iter().enumerate().all(even) {
            return None;
        }
        let short = total / count;
        let cut = |len: usize| (len / pieces, len % pieces);
        Some(EvenParts { dtype, count, longer: total % count, cuts: [cut(short), cut(short + 1)] })
    }

    /// Piece `j` of part `part`, without data: what [`Tile::chunk`] of the part gives.
    fn piece(&self, part: usize, j: usize) -> Tile {
        let (short, longer_pieces) = self.cuts[usize::from(part < self.longer)];
        Tile::without_data(self.dtype, short + usize::from(j < longer_pieces))
    }
}

/// Runs `steps` of the ring all-reduce schedule (reduce-scatter steps, then all-gather steps: see
/// [`Ring::reduce_scatter_steps`]) over each of `rings` at once, `parts[i]` being ring `i`'s `count`
/// parts, each cut into `pieces`, and returns each ring's pieces in order (piece `j` of part `p` at
/// `p * pieces + j`, `pieces` as clamped here: see [`join_pieces`]), not joined: a caller that stores
/// them needs no copy of them in one buffer. A piece received in a reduce-scatter step is reduced into
/// this member's (under `op`), one received in an all-gather step replaces it.
///
/// Before sending piece `j` of a step a member receives piece `j` of the step before: the piece that
/// message forwards, so it goes on the moment it is ready while `pieces - 1` others are still in flight.
/// The rings take turns message by message, so each keeps its own pipeline full.
///
/// In a timing-only run ([`Tl::timing_only`]) a piece is its shape alone, and keeps the shape its cut
/// gave it (what replaces it is received or reduced to that shape): the pieces are cut again from the
/// parts' shapes when they are used, not held through the run: held, a ring of a thousand ranks
/// keeps a thousand parts' pieces in every lane, 200 MB over 1,024 ranks of 4 lanes.
#[ccl_kernel(helper, crate = "kernbench_core")]
pub(crate) fn ring_steps(
    tl: &Tl,
    parts: Vec<Vec<Tile>>,
    rings: &[Ring],
    steps: Range<usize>,
    pieces: usize,
    op: ReduceOp,
) -> Vec<Vec<Tile>> {
    // More pieces ahead than a queue holds would wait, all the way round the ring, for credits that
    // come back only after those very sends.
    let pieces = pieces.clamp(1, tl.queue_depth());
    let data_less = tl.timing_only() && parts.iter().flatten().all(|part| !part.has_data());
    // Parts too uneven for a few numbers (no ring here makes them) keep their pieces, as with data.
    let shapes: Vec<EvenParts> = if data_less {
        parts.iter().map(|p| EvenParts::of(p, pieces)).collect::<Option<_>>().unwrap_or_default()
    } else {
        Vec::new()
    };
    let shapes_only = data_less && shapes.len() == rings.len();
    // Each ring's parts cut into pieces, in one list: piece `j` of part `i` is `cut[i * pieces + j]`.
    // Cut in a timing-only run too, so that a cut that fails fails where it does with data.
    let mut cut = Vec::with_capacity(parts.len());
    for ring_parts in &parts {
        let mut ring_cut = Vec::with_capacity(if shapes_only { 0 } else { ring_parts.len() * pieces });
        for part in ring_parts {
            for j in 0..pieces {
                let piece = tl.chunk(part, j, pieces);
                if !shapes_only {
                    ring_cut.push(piece);
                }
            }
        }
        cut.push(ring_cut);
    }
    // The pieces (or the shapes) hold what the kernel needs of the parts from here on.
    drop(parts);
    // Message `(step, j)` is piece `j` of the part sent at `step`; the receive of `(step - 1, j)`, the
    // piece it forwards, comes just before it. One pass more than there are steps takes the last
    // receives.
    for step in steps.start..=steps.end {
        for j in 0..pieces {
            for (r, ring) in rings.iter().enumerate() {
                if step > steps.start {
                    let received = step - 1;
                    let part = ring.recv_part(received);
                    let mut shape;
                    let piece = if shapes_only {
                        shape = shapes[r].piece(part, j);
                        &mut shape
                    } else {
                        let (cut, at) = (&mut cut[r], part * pieces + j);
                        // A large ring's lanes each hold thousands of pieces, and each receive reaches
                        // a new one, cold after the other lanes' turns: the piece the next receive
                        // goes into is asked for while this message is handled, and if this receive
                        // waits, the runtime asks for both pieces (and the few between) just before
                        // the lane's turn comes again, when they are cold once more.
                        let (next, next_j) = if j + 1 < pieces { (received, j + 1) } else { (received + 1, 0) };
                        let next_at = if next < steps.end { ring.recv_part(next) * pieces + next_j } else { at };
                        hint::prefetch(&cut[next_at]);
                        hint::prefetch_when_woken(&cut[at.min(next_at)..=at.max(next_at)]);
                        &mut cut[at]
                    };
                    let mut got = tl.recv(ring.back, piece.len(), piece.dtype());
                    if received + 1 >= ring.count {
                        *piece = got;
                    } else if op.commutes() {
                        // The received piece is usually its sender's no longer (see below), so the
                        // result takes its buffer in place, where this member's own piece (a view of
                        // its input) would need a new one.
                        tl.reduce(&mut got, piece, op);
                        *piece = got;
                    } else {
                        tl.reduce(piece, &got, op);
                    }
                }
                if step < steps.end {
                    let part = ring.send_part(step);
                    let mut shape;
                    let sent = if shapes_only {
                        shape = shapes[r].piece(part, j);
                        &mut shape
                    } else {
                        &mut cut[r][part * pieces + j]
                    };
                    tl.send(ring.forward, sent);
                    // A piece that a later step of this pass replaces is not needed here after its
                    // send: holding it would keep its buffer shared, so that the receiver's reduction
                    // could not write into it. Its shape (all that receive reads of it) stands in.
                    if sent.has_data() && step + ring.count - 1 < steps.end {
                        *sent = Tile::without_data(sent.dtype(), sent.len());
                    }
                }
            }
        }
    }
    // Every piece of a timing-only run still has the shape it was cut to: cut again, for the caller
    // to finish and store within this poll.
    for (ring_cut, shapes) in cut.iter_mut().zip(&shapes) {
        ring_cut.extend((0..shapes.count).flat_map(|part| (0..pieces).map(move |j| shapes.piece(part, j))));
    }
    cut
}

/// `count` parts from what [`ring_steps`] returns for one ring: each part's pieces joined.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn join_pieces(tl: &Tl, cut: &[Tile], count: usize) -> Vec<Tile> {
    let pieces = cut.len() / count.max(1);
    let mut parts = Vec::with_capacity(count);
    for part in cut.chunks(pieces.max(1)) {
        parts.push(tl.concat(part));
    }
    parts
}

/// Reduce-scatter over `ring`, each part in `pieces`: afterwards this member's part `position + 1`
/// holds every member's contribution reduced (the other parts hold partial results).
#[ccl_kernel(helper, crate = "kernbench_core")]
pub(crate) fn ring_reduce_scatter_parts(
    tl: &Tl,
    parts: Vec<Tile>,
    ring: Ring,
    pieces: usize,
    op: ReduceOp,
) -> Vec<Tile> {
    let cut = ring_steps(tl, vec![parts], &[ring], ring.reduce_scatter_steps(), pieces, op).swap_remove(0);
    join_pieces(tl, &cut, ring.count)
}

/// All-gather over `ring`, each part in `pieces`, starting from this member owning part
/// `position + 1` (as a reduce-scatter leaves it): afterwards every part is every member's.
#[ccl_kernel(helper, crate = "kernbench_core")]
pub(crate) fn ring_all_gather_parts(tl: &Tl, parts: Vec<Tile>, ring: Ring, pieces: usize) -> Vec<Tile> {
    // All-gather steps replace what they receive: the operator is never used.
    let op = tl.op();
    let cut = ring_steps(tl, vec![parts], &[ring], ring.all_gather_steps(), pieces, op).swap_remove(0);
    join_pieces(tl, &cut, ring.count)
}

/// Ring all-reduce of `slices[i]` over `rings[i]`, all at once, each part cut into `chunks` pieces
/// (see [`pieces_per_part`]): reduce-scatter and all-gather as one pipelined pass, so the all-gather's
/// first pieces leave while the reduce-scatter's last ones are still arriving. Each ring's result is
/// its pieces in order, reduced but not finished (see [`Tl::finish_parts`]).
#[ccl_kernel(helper, crate = "kernbench_core")]
pub(crate) fn ring_allreduce_slices(
    tl: &Tl,
    slices: &[Tile],
    rings: &[Ring],
    chunks: usize,
    op: ReduceOp,
) -> Vec<Vec<Tile>> {
    let count = rings[0].count;
    let shortest = slices.iter().map(Tile::len).min().unwrap_or(0);
    let pieces = pieces_per_part(chunks, shortest, count);
    let mut parts = Vec::with_capacity(slices.len());
    for slice in slices {
        parts.push(split(tl, slice, count));
    }
    let steps = rings[0].reduce_scatter_steps().start..rings[0].all_gather_steps().end;
    ring_steps(tl, parts, rings, steps, pieces, op)
}

/// This lane's share of `buffer` when each of its PE's lanes takes one near-equal chunk of it: the
/// chunk (loaded alone, so lanes are charged for their own bytes) and where it starts.
#[ccl_kernel(helper, crate = "kernbench_core")]
pub(crate) fn lane_share(tl: &Tl, buffer: Buffer, range: Range<usize>) -> (Tile, usize) {
    let share = chunk_range(range.len(), tl.lane(), tl.lanes())?;
    let start = range.start + share.start;
    (tl.load_slice(buffer, start, share.len()), start)
}

/// Ring all-reduce: reduce-scatter then all-gather, each of the `p` parts in `chunks` pieces that
/// pipeline along the ring (clamped to `1..=len / p` and to the queue depth), on each of `lanes`
/// lanes: lane `l` runs the ring on chunk `l` of the data, on its own channel, so `lanes` rings share
/// every link and each hides the others' latency.
#[ccl_kernel(lanes = lanes, crate = "kernbench_core")]
pub fn ring_allreduce(tl: &Tl, chunks: usize, #[default = 1] lanes: usize) {
    let ring = rank_ring(tl);
    let op = tl.op();
    let (share, start) = lane_share(tl, Input, 0..tl.buffer_len(Input));
    let mut result = ring_allreduce_slices(tl, &[share], &[ring], chunks, op).swap_remove(0);
    tl.finish_parts(&mut result, op, ring.count);
    tl.store_parts_at(Output, start, &result);
}

/// Bidirectional ring all-reduce: half the data goes round eastward and half westward at the same
/// time, so both directions of every link carry data (as YALI does on its two links); each direction
/// pipelines its parts in `chunks` pieces on each of `lanes` lanes, as [`ring_allreduce()`] does.
#[ccl_kernel(lanes = lanes, crate = "kernbench_core")]
pub fn bidirectional_ring_allreduce(tl: &Tl, #[default = 1] chunks: usize, #[default = 1] lanes: usize) {
    let east = rank_ring(tl);
    let op = tl.op();
    let (share, start) = lane_share(tl, Input, 0..tl.buffer_len(Input));
    let halves = [tl.chunk(&share, 0, 2), tl.chunk(&share, 1, 2)];
    let mut result = ring_allreduce_slices(tl, &halves, &[east, east.reversed()], chunks, op).concat();
    tl.finish_parts(&mut result, op, east.count);
    tl.store_parts_at(Output, start, &result);
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

/// Ring all-gather: every rank's input, in rank order, in every rank's output; each block travels in
/// `chunks` pieces (clamped to `1..=len` and to the queue depth), on each of `lanes` lanes (lane `l`
/// gathers chunk `l` of every block).
#[ccl_kernel(lanes = lanes, crate = "kernbench_core")]
pub fn ring_allgather(tl: &Tl, #[default = 1] chunks: usize, #[default = 1] lanes: usize) {
    let ring = rank_ring(tl);
    let block = tl.buffer_len(Input);
    let (mine, start) = lane_share(tl, Input, 0..block);
    let pieces = pieces_per_part(chunks, mine.len(), 1);
    // The other ranks' blocks, by shape only: each is replaced by what arrives, never read first.
    let mut parts = vec![Tile::without_data(mine.dtype(), mine.len()); ring.count];
    parts[ring.position] = mine;
    let parts = own_part_first(ring_all_gather_parts(tl, own_part_last(parts), ring, pieces));
    for (rank, part) in parts.iter().enumerate() {
        tl.store_at(Output, rank * block + start, part);
    }
}

/// Ring reduce-scatter: rank `r` ends with part `r` (of `size` near-equal parts) of the reduction; each
/// part travels in `chunks` pieces (clamped to `1..=len / size` and to the queue depth), on each of
/// `lanes` lanes (lane `l` reduces chunk `l` of every part).
#[ccl_kernel(lanes = lanes, crate = "kernbench_core")]
pub fn ring_reduce_scatter(tl: &Tl, #[default = 1] chunks: usize, #[default = 1] lanes: usize) {
    let ring = rank_ring(tl);
    let op = tl.op();
    let len = tl.buffer_len(Input);
    let mut parts = Vec::with_capacity(ring.count);
    let mut own_start = 0;
    for part in 0..ring.count {
        let (share, start) = lane_share(tl, Input, chunk_range(len, part, ring.count)?);
        if part == ring.position {
            own_start = start - chunk_start(len, part, ring.count);
        }
        parts.push(share);
    }
    let pieces = pieces_per_part(chunks, parts[ring.count - 1].len(), 1);
    let parts = own_part_first(ring_reduce_scatter_parts(tl, own_part_last(parts), ring, pieces, op));
    let mut mine = parts[ring.position].clone();
    tl.finish(&mut mine, op, ring.count);
    tl.store_at(Output, own_start, &mine);
}

/// The most pieces a pipelined chain cuts its data into: a pipeline of `p` pieces over `h` hops keeps
/// its links busy `p / (p + h - 1)` of the time, 95 % over 7 hops at 128.
pub const MAX_CHAIN_PIECES: usize = 128;

/// How many pieces a pipelined chain cuts `len` elements of `element` bytes into: `chunks`, or more so
/// that none is larger than `chunk_bytes` (NCCL moves a pipeline's data in steps: Simple's is 512
/// KiB), at most [`MAX_CHAIN_PIECES`] (unless `chunks` asks for more), and at least 1 and at most
/// `len`.
fn chain_pieces(len: usize, element: usize, chunks: usize, chunk_bytes: usize) -> usize {
    let by_size = (len * element).div_ceil(chunk_bytes.max(1)).min(MAX_CHAIN_PIECES);
    chunks.max(by_size).clamp(1, len.max(1))
}

/// Pipelined ring broadcast: the root's data travels east along the chain root, root + 1, ..., in
/// `chunks` pieces (more for large data: at most `chunk_bytes` each, up to 128), each rank forwarding
/// a piece as soon as it has it.
#[ccl_kernel(crate = "kernbench_core")]
pub fn ring_broadcast(tl: &Tl, chunks: usize, #[default = 524288] chunk_bytes: usize) {
    let ring = rank_ring(tl);
    let root = tl.root();
    let data = tl.load(Input);
    let chunks = chain_pieces(data.len(), data.dtype().size(), chunks, chunk_bytes);
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
/// rank adding its own, in `chunks` pieces (more for large data: at most `chunk_bytes` each, up to
/// 128). Only the root's
/// output changes.
#[ccl_kernel(crate = "kernbench_core")]
pub fn ring_reduce(tl: &Tl, chunks: usize, #[default = 524288] chunk_bytes: usize) {
    let ring = rank_ring(tl);
    let (root, op) = (tl.root(), tl.op());
    let data = tl.load(Input);
    let chunks = chain_pieces(data.len(), data.dtype().size(), chunks, chunk_bytes);
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

#[cfg(test)]
mod tests {
    use kernbench_core::prelude::*;

    use super::EvenParts;

    #[test]
    fn even_parts_give_the_pieces_a_cut_of_their_parts_gives_and_uneven_ones_none() {
        for (total, count, pieces) in [(1003, 5, 3), (10, 4, 4), (7, 7, 1), (1 << 40, 1024, 2), (3, 5, 2)] {
            let whole = Tile::without_data(F32, total);
            let parts: Vec<Tile> = (0..count).map(|i| whole.chunk(i, count).unwrap()).collect();
            let even = EvenParts::of(&parts, pieces).expect("a split tile's parts are even");
            assert_eq!(even.count, count);
            for (i, part) in parts.iter().enumerate() {
                for j in 0..pieces {
                    let cut = part.chunk(j, pieces).unwrap();
                    let piece = even.piece(i, j);
                    assert_eq!((piece.dtype(), piece.len(), piece.has_data()), (F32, cut.len(), false));
                }
            }
        }
        let uneven = [Tile::without_data(F32, 3), Tile::without_data(F32, 5)];
        assert!(EvenParts::of(&uneven, 2).is_none(), "the longer part last");
        let mixed = [Tile::without_data(F32, 4), Tile::without_data(F16, 4)];
        assert!(EvenParts::of(&mixed, 2).is_none(), "two dtypes");
        assert!(EvenParts::of(&[], 2).is_none(), "no parts");
    }
}

//! Hierarchical all-to-all in three phases: gather each group's rows to its representative, exchange
//! padded blocks among the representatives, scatter each column back down the group.
//!
//! Rank `i`'s input is row `i` of an `N x N` matrix of blocks; rank `j` must end with column `j`. The
//! ranks split into top-level groups ([`GroupSplit`]: `min(arity, N)` contiguous groups, bigger first);
//! the first rank of a group is its representative.
//!
//! ```text
//!  N = 11, arity 4: groups [0 1 2] [3 4 5] [6 7 8] [9 10]
//!
//!  phase 1 (generation 3k-2)   members send their rows up:       1 -> 0, 2 -> 0, 4 -> 3, ...
//!  phase 2 (generation 3k-1)   representatives exchange blocks:  0 <-> 3 <-> 6 <-> 9 (pairwise)
//!  phase 3 (generation 3k)     representatives send columns down: 0 -> 1, 0 -> 2, 3 -> 4, ...
//! ```
//!
//! A flat all-to-all sends `N (N - 1)` messages of one block; this sends `2 (N - A) + A (A - 1)` for
//! `A` groups, larger ones: fewer messages where each costs a fixed overhead, more bytes through the
//! representatives.
//!
//! # Padding
//!
//! Groups may differ in size by one, and blocks in length by one element (blocks are the near-equal
//! split of a row, [`chunk_range`](kernbench_core::chunk_range)). So that every phase-2 message has one
//! length, the sub-matrix `rows(g) x columns(h)` that representative `g` sends to representative `h`
//! is padded to `G` rows of `G * Bmax` elements (`G` the largest group's size, `Bmax` the longest
//! block's length): each row holds its real blocks first, packed in destination order, then zeros;
//! missing rows are zeros. The receiver crops with the real sizes: `|g|` rows, and in each the blocks of
//! its own group's ranks.
//!
//! # Flat fallback
//!
//! With a single group (an arity of 1, or one rank) or fewer ranks than `flat_below`, every rank runs
//! the flat pairwise exchange of [`pairwise_alltoall`](fn@crate::pairwise_alltoall) instead. Every rank
//! records which path ran: `tl.note("path", "flat" | "hierarchical")`.
//!
//! # Memory
//!
//! Each representative records `tl.note("peak_bytes", ...)`: the most bytes of tiles it held at once.
//! It counts its own input (the first of its rows) but not its output buffer, which every rank has. In
//! elements (times the dtype's size for bytes), with row length `L`, `b_d` the length of block `d`
//! (`Bmax = b_0`), `g` the size of its own group, `h` its first rank, `G` the largest group's size and
//! `A` the number of groups:
//!
//! ```text
//! peak = g L                  its group's rows (phase 1), held until phase 3 ends
//!      + (A - 1) G² Bmax      the padded messages of phase 2 (at the last send: A - 2 received and the
//!                             outgoing one), held until phase 3 ends
//!      + max(G Bmax, N b_h)   the larger of phase 2's padded row of zeros, which pads every outgoing
//!                             message, and phase 3's column being sent (built one at a time)
//! ```
//!
//! When every block is `B` bytes (`L = N` blocks) this is `((g + 1) N + (A - 1) G²) B`. For `N = 256`
//! and arity 4 that is `(65 * 256 + 3 * 64²) B = 28 928 B`, about `0.44 N² B` (the cruder
//! estimate `(2 / a + 1 / a²) N² B` gives `0.56 N² B`), where a rank of the flat all-to-all holds its
//! `N B` input. Size the arity to keep it within a representative's memory.

use kernbench_core::chunk_start;
use kernbench_core::partition::GroupSplit;
use kernbench_core::prelude::*;

use crate::direct::{pairwise_exchange, peer};

/// Hierarchical all-to-all: members hand their rows to their group's representative, the
/// representatives exchange padded sub-matrices, and each sends every member its column.
///
/// Topology `full`, any mapper, up to 1024 ranks. `arity` is the number of top-level groups; 0 means
/// one group per SIP (`num_programs(2)`), which on `all_pes` makes each SIP's PEs a group (and an
/// arity of SIPs times cubes per SIP makes each cube's PEs one). Fewer ranks than `flat_below`, or a
/// single group, run the flat pairwise exchange.
#[ccl_kernel(crate = "kernbench_core")]
pub fn hierarchical_all_to_all(tl: &Tl, arity: usize, flat_below: usize) {
    let (rank, n) = (tl.rank(), tl.size());
    let arity = if arity == 0 { tl.num_programs(2) } else { arity };
    let groups = GroupSplit::new(n, arity);
    if groups.len() <= 1 || n < flat_below {
        tl.note("path", "flat");
        pairwise_exchange(tl);
        return;
    }
    tl.note("path", "hierarchical");
    let data = tl.load(Input);
    let grid = Grid { groups, row: data.len(), dtype: data.dtype() };
    let me = groups.classify(rank);
    let representative = grid.representative(me.group);
    tl.phase(1);
    if !me.representative {
        tl.send(peer(representative), &data);
        tl.phase(3);
        let column = tl.recv(peer(representative), n * grid.block(rank).len(), grid.dtype);
        tl.store(Output, &column);
        return;
    }
    let mut held = Held::default();
    let rows = gather_rows(tl, &grid, me.group, data, &mut held);
    tl.phase(2);
    let received = exchange_among_representatives(tl, &grid, me.group, &rows, &mut held);
    tl.phase(3);
    scatter_columns(tl, &grid, me.group, &rows, &received, &mut held);
    tl.note("peak_bytes", held.peak);
}

/// The shape of the exchange, the same at every rank.
#[derive(Clone, Copy, Debug)]
struct Grid {
    /// The top-level groups.
    groups: GroupSplit,
    /// Elements of a row (every rank's input): `N` near-equal blocks.
    row: usize,
    /// The dtype of every row.
    dtype: Dtype,
}

impl Grid {
    /// The number of ranks.
    fn ranks(&self) -> usize {
        self.groups.ranks()
    }

    /// Group `group`'s representative.
    fn representative(&self, group: usize) -> usize {
        self.groups.group(group).start
    }

    /// Where rank `rank`'s block lies in a row.
    fn block(&self, rank: usize) -> std::ops::Range<usize> {
        chunk_start(self.row, rank, self.ranks())..chunk_start(self.row, rank + 1, self.ranks())
    }

    /// Where group `group`'s blocks lie in a row: one run, its ranks being contiguous.
    fn columns(&self, group: usize) -> std::ops::Range<usize> {
        let ranks = self.groups.group(group);
        chunk_start(self.row, ranks.start, self.ranks())..chunk_start(self.row, ranks.end, self.ranks())
    }

    /// Elements of one row of a padded phase-2 message: room for the largest group's blocks at the
    /// longest block length.
    fn padded_row(&self) -> usize {
        self.groups.largest() * self.block(0).len()
    }

    /// Elements of a padded phase-2 message: a padded row for each rank of the largest group.
    fn padded(&self) -> usize {
        self.groups.largest() * self.padded_row()
    }
}

/// Bytes of the tiles a representative holds now, and the most it has held at once.
#[derive(Debug, Default)]
struct Held {
    now: usize,
    peak: usize,
}

impl Held {
    fn hold(&mut self, tile: &Tile) {
        self.now += tile.bytes();
        self.peak = self.peak.max(self.now);
    }

    fn release(&mut self, tile: &Tile) {
        self.now -= tile.bytes();
    }
}

/// Phase 1 at a representative: its own row and every member's, in rank order.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn gather_rows(tl: &Tl, grid: &Grid, group: usize, own: Tile, held: &mut Held) -> Vec<Tile> {
    let ranks = grid.groups.group(group);
    let mut rows = Vec::with_capacity(ranks.len());
    held.hold(&own);
    rows.push(own);
    for rank in ranks.skip(1) {
        let row = tl.recv(peer(rank), grid.row, grid.dtype);
        held.hold(&row);
        rows.push(row);
    }
    rows
}

/// Phase 2: a pairwise all-to-all among the representatives, of padded sub-matrices. Returns what
/// came from each group's representative (`None` for this one's own group, whose blocks stay in `rows`).
#[ccl_kernel(helper, crate = "kernbench_core")]
fn exchange_among_representatives(
    tl: &Tl,
    grid: &Grid,
    group: usize,
    rows: &[Tile],
    held: &mut Held,
) -> Vec<Option<Tile>> {
    let count = grid.groups.len();
    let filler = tl.zeros(grid.dtype, grid.padded_row());
    held.hold(&filler);
    let mut received = vec![None; count];
    for step in 1..count {
        let (to, from) = ((group + step) % count, (group + count - step) % count);
        let outgoing = padded_blocks(tl, grid, rows, to, &filler);
        held.hold(&outgoing);
        tl.send(peer(grid.representative(to)), &outgoing);
        // Sent: the queue has it now, so it stops counting before the next message arrives.
        held.release(&outgoing);
        drop(outgoing);
        let got = tl.recv(peer(grid.representative(from)), grid.padded(), grid.dtype);
        held.hold(&got);
        received[from] = Some(got);
    }
    held.release(&filler);
    received
}

/// The sub-matrix `rows x columns(to)`, padded as the module docs say, with zeros sliced from `filler`
/// (a padded row of zeros).
#[ccl_kernel(helper, crate = "kernbench_core")]
fn padded_blocks(tl: &Tl, grid: &Grid, rows: &[Tile], to: usize, filler: &Tile) -> Tile {
    let columns = grid.columns(to);
    let padding = grid.padded_row() - columns.len();
    let mut pieces = Vec::with_capacity(2 * grid.groups.largest());
    for row in rows {
        pieces.push(tl.slice(row, columns.start, columns.len()));
        if padding > 0 {
            pieces.push(tl.slice(filler, 0, padding));
        }
    }
    for _ in rows.len()..grid.groups.largest() {
        pieces.push(filler.clone());
    }
    tl.concat(&pieces)
}

/// Phase 3: each rank of this group gets its column (its own block of every row, in rank order) in one
/// message, built when it is sent; the representative stores its own.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn scatter_columns(tl: &Tl, grid: &Grid, group: usize, rows: &[Tile], received: &[Option<Tile>], held: &mut Held) {
    let ranks = grid.groups.group(group);
    let first = grid.columns(group).start;
    for rank in ranks.clone() {
        let block = grid.block(rank);
        let mut pieces = Vec::with_capacity(grid.ranks());
        for (from, message) in received.iter().enumerate() {
            match message {
                None => {
                    for row in rows {
                        pieces.push(tl.slice(row, block.start, block.len()));
                    }
                }
                Some(message) => {
                    for i in 0..grid.groups.group(from).len() {
                        let start = i * grid.padded_row() + block.start - first;
                        pieces.push(tl.slice(message, start, block.len()));
                    }
                }
            }
        }
        let column = tl.concat(&pieces);
        held.hold(&column);
        if rank == ranks.start {
            tl.store(Output, &column);
        } else {
            tl.send(peer(rank), &column);
        }
        held.release(&column);
    }
}

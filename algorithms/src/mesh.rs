//! Two-dimensional all-reduces: over the `mesh_2d` grid of ranks, and over the cube mesh of each SIP
//! (`intercube`: along the mesh rows and columns to cube 0, then a ring of SIPs).
//!
//! Both end with every rank holding bits computed once, in one order, and handed on unchanged, so
//! every rank holds the same bits.

use kernbench_core::mesh_2d_grid;
use kernbench_core::prelude::*;

use crate::ring::{Ring, ring_all_gather_parts, ring_allreduce_slices, ring_reduce_scatter_parts, split};

/// Ring all-reduce of `tile` over `ring` (reduce-scatter then all-gather, each part in one piece),
/// finished as a reduction of `contributions` inputs: every member gets the same bits.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn ring_all_reduce_tile(tl: &Tl, tile: &Tile, ring: Ring, op: ReduceOp, contributions: usize) -> Tile {
    let pieces = ring_allreduce_slices(tl, std::slice::from_ref(tile), &[ring], 1, op).swap_remove(0);
    let mut result = tl.concat(&pieces);
    tl.finish(&mut result, op, contributions);
    result
}

/// 2-D mesh all-reduce: ring reduce-scatter along each row, ring all-reduce of each rank's reduced
/// part along its column, ring all-gather along the row.
///
/// Topology `mesh_2d` (ranks in a `mesh_2d_grid(n)` grid, row-major), any mapper, any number of ranks
/// (a prime count is one row, and the column step is empty). Each rank sends about `2 (c - 1) / c +
/// 2 (r - 1) / (r c)` times the data, in `2 (c - 1) + 2 (r - 1)` steps.
#[ccl_kernel(crate = "kernbench_core")]
pub fn mesh_2d_allreduce(tl: &Tl) {
    let (rank, n, op) = (tl.rank(), tl.size(), tl.op());
    let (rows, cols) = mesh_2d_grid(n);
    let row = Ring { position: rank % cols, count: cols, forward: E, back: W };
    let column = Ring { position: rank / cols, count: rows, forward: N, back: S };
    let data = tl.load(Input);
    let parts = split(tl, &data, cols);
    let mut parts = ring_reduce_scatter_parts(tl, parts, row, 1, op);
    // The row's reduce-scatter leaves this rank owning part `col + 1` of the row's sum, as it leaves
    // every rank of its column: they all-reduce that part among themselves.
    let owned = (row.position + 1) % cols;
    parts[owned] = ring_all_reduce_tile(tl, &parts[owned], column, op, n);
    let parts = ring_all_gather_parts(tl, parts, row, 1);
    tl.store(Output, &tl.concat(&parts));
}

/// Inter-cube all-reduce: reduce along each mesh row to x = 0, down column x = 0 to cube 0,
/// ring all-reduce among the SIP leaders, and broadcast back up the column and along the rows.
///
/// Topology `intercube` with mapper `cube_leaders` (one PE per cube, every cube of every SIP) or
/// `leader_only` (only the SIP leaders: the mesh steps are empty). Other participant sets are not
/// supported: the kernel finds the mesh edges with `tl.has`, takes a cube with no west and no south
/// neighbour for its SIP's leader, and places SIP leaders on their ring by SIP index.
#[ccl_kernel(crate = "kernbench_core")]
pub fn intercube_allreduce(tl: &Tl) {
    let op = tl.op();
    let (east, west, north, south) = (tl.has(E), tl.has(W), tl.has(N), tl.has(S));
    let mut acc = tl.load(Input);
    let (len, dtype) = (acc.len(), acc.dtype());
    // Partial results flow west along rows (x - 1), then south down column x = 0 (y - 1).
    if east {
        let partial = tl.recv(E, len, dtype);
        tl.reduce(&mut acc, &partial, op);
    }
    if west {
        tl.send(W, &acc);
    } else {
        if north {
            let partial = tl.recv(N, len, dtype);
            tl.reduce(&mut acc, &partial, op);
        }
        if south {
            tl.send(S, &acc);
        } else {
            let sips = Ring {
                position: tl.program_id(2),
                count: tl.num_programs(2),
                forward: Direction::SipNext,
                back: Direction::SipPrev,
            };
            let contributions = tl.size();
            acc = ring_all_reduce_tile(tl, &acc, sips, op, contributions);
        }
    }
    // The result comes back the same way: north up column x = 0, then east along the rows.
    let result = if west {
        tl.recv(W, len, dtype)
    } else if south {
        tl.recv(S, len, dtype)
    } else {
        acc
    };
    if !west && north {
        tl.send(N, &result);
    }
    if east {
        tl.send(E, &result);
    }
    tl.store(Output, &result);
}

//! ADR-0029's hierarchical all-reduce: intra-cube ring, cube leaders, SIP leaders, broadcast back.
//!
//! Runs on `hierarchical_3level` with `all_pes` (every PE holds one tile: `multi_pe_sip_local`). Each
//! level is a ring whose member 0 collects the level's partial result from both sides at once (the
//! bidirectional ring reduce of the ADR, `ceil((n - 1) / 2)` steps), then hands it to the next level up;
//! the result comes back down the same rings. The data streams through the levels in pieces.

use kernbench_core::prelude::*;

use crate::ring::{Ring, split};

/// The last position of the half of `ring` that sends toward member 0 through `back`; positions
/// after it send through `forward`, around the ring's far side.
fn west_end(ring: Ring) -> usize {
    ring.count / 2
}

/// Reduces every member's `acc` into member 0's, along both halves of the ring at once; returns the
/// member's partial result (the whole ring's result at member 0).
#[ccl_kernel(helper, crate = "kernbench_core")]
fn ring_reduce_to_leader(tl: &Tl, mut acc: Tile, ring: Ring, op: ReduceOp) -> Tile {
    let (i, n, h) = (ring.position, ring.count, west_end(ring));
    if n == 1 {
        return acc;
    }
    if i == 0 {
        if h >= 1 {
            let west = tl.recv(ring.forward, acc.len(), acc.dtype());
            tl.reduce(&mut acc, &west, op);
        }
        if n - 1 > h {
            let east = tl.recv(ring.back, acc.len(), acc.dtype());
            tl.reduce(&mut acc, &east, op);
        }
    } else if i <= h {
        if i < h {
            let farther = tl.recv(ring.forward, acc.len(), acc.dtype());
            tl.reduce(&mut acc, &farther, op);
        }
        tl.send(ring.back, &acc);
    } else {
        if i > h + 1 {
            let farther = tl.recv(ring.back, acc.len(), acc.dtype());
            tl.reduce(&mut acc, &farther, op);
        }
        tl.send(ring.forward, &acc);
    }
    acc
}

/// Hands member 0's `acc` to every member, back along the paths of [`ring_reduce_to_leader`].
#[ccl_kernel(helper, crate = "kernbench_core")]
fn ring_broadcast_from_leader(tl: &Tl, acc: Tile, ring: Ring) -> Tile {
    let (i, n, h) = (ring.position, ring.count, west_end(ring));
    if n == 1 {
        return acc;
    }
    if i == 0 {
        if h >= 1 {
            tl.send(ring.forward, &acc);
        }
        if n - 1 > h {
            tl.send(ring.back, &acc);
        }
        return acc;
    }
    let result =
        if i <= h { tl.recv(ring.back, acc.len(), acc.dtype()) } else { tl.recv(ring.forward, acc.len(), acc.dtype()) };
    if i < h {
        tl.send(ring.forward, &result);
    } else if i > h + 1 {
        tl.send(ring.back, &result);
    }
    result
}

/// Hierarchical all-reduce (ADR-0029): intra-cube ring, cube-leader ring, SIP-leader ring, and the
/// result broadcast back down the same rings.
///
/// The data goes in `chunks` pieces (clamped to `1..=len`) that stream through every level: each PE
/// passes piece `j` up through its levels and goes on to piece `j + 1` while piece `j` is still on its
/// way up, then the results come down piece by piece the same way, so every ring's links carry the
/// next piece while the last one crosses the latency of the levels above.
#[ccl_kernel(crate = "kernbench_core")]
pub fn hierarchical_allreduce(tl: &Tl, #[default = 1] chunks: usize) {
    let op = tl.op();
    let (pe, cube, sip) = (tl.program_id(0), tl.program_id(1), tl.program_id(2));
    let pes_ring = Ring { position: pe, count: tl.num_programs(0), forward: E, back: W };
    let cubes_ring = Ring { position: cube, count: tl.num_programs(1), forward: N, back: S };
    let sips_ring =
        Ring { position: sip, count: tl.num_programs(2), forward: Direction::SipNext, back: Direction::SipPrev };

    let levels = Levels { pe, cube, sip, rings: [pes_ring, cubes_ring, sips_ring] };
    let data = tl.load(Input);
    let chunks = chunks.clamp(1, data.len().max(1));
    if chunks == 1 {
        // One piece: no pieces to cut or join (a million PEs run this).
        let acc = reduce_up(tl, data, levels, op);
        tl.store(Output, &broadcast_down(tl, acc, levels));
    } else {
        // Every piece goes all the way up before any comes down, so the top leader streams the
        // pieces it finishes straight back down.
        let mut partials = Vec::with_capacity(chunks);
        for piece in split(tl, &data, chunks) {
            partials.push(reduce_up(tl, piece, levels, op));
        }
        let mut results = Vec::with_capacity(chunks);
        for acc in partials {
            results.push(broadcast_down(tl, acc, levels));
        }
        tl.store(Output, &tl.concat(&results));
    }
}

/// A PE's place in the three rings of the hierarchy: PEs of its cube, cube leaders of its SIP, SIP
/// leaders.
#[derive(Clone, Copy, Debug)]
struct Levels {
    pe: usize,
    cube: usize,
    sip: usize,
    rings: [Ring; 3],
}

/// Reduces `acc` up the levels this PE leads: afterwards the top leader holds the finished result.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn reduce_up(tl: &Tl, acc: Tile, levels: Levels, op: ReduceOp) -> Tile {
    let [pes_ring, cubes_ring, sips_ring] = levels.rings;
    let mut acc = ring_reduce_to_leader(tl, acc, pes_ring, op);
    if levels.pe == 0 {
        acc = ring_reduce_to_leader(tl, acc, cubes_ring, op);
        if levels.cube == 0 {
            acc = ring_reduce_to_leader(tl, acc, sips_ring, op);
            if levels.sip == 0 {
                let contributions = tl.size();
                tl.finish(&mut acc, op, contributions);
            }
        }
    }
    acc
}

/// Brings the result down the levels: afterwards every PE holds it.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn broadcast_down(tl: &Tl, acc: Tile, levels: Levels) -> Tile {
    let [pes_ring, cubes_ring, sips_ring] = levels.rings;
    let mut acc = acc;
    if levels.pe == 0 {
        if levels.cube == 0 {
            acc = ring_broadcast_from_leader(tl, acc, sips_ring);
        }
        acc = ring_broadcast_from_leader(tl, acc, cubes_ring);
    }
    ring_broadcast_from_leader(tl, acc, pes_ring)
}

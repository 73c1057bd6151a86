//! The hierarchical all-reduce: intra-cube ring, cube leaders, SIP leaders, broadcast back.
//!
//! Runs on `hierarchical_3level` with `all_pes` (every PE holds one tile: `multi_pe_sip_local`). Each
//! level is a ring whose member 0 collects the level's partial result from both sides at once (the
//! bidirectional ring reduce, `ceil((n - 1) / 2)` steps), then hands it to the next level up;
//! the result comes back down the same rings. The data streams through the levels in pieces.

use kernbench_core::TlContext;
use kernbench_core::prelude::*;

use crate::ring::{Ring, split};

/// The last position of the half of `ring` that sends toward member 0 through `back`; positions
/// after it send through `forward`, around the ring's far side.
fn west_end(ring: Ring) -> usize {
    ring.count / 2
}

/// Reduces every member's `acc` into member 0's, along both halves of the ring at once: afterwards
/// `acc` holds the member's partial result (the whole ring's result at member 0).
///
/// The tile is reduced where it lies, through a reference: a tile passed by value would be held twice
/// across every wait (the caller's room for it stays while the call has its own), and a million PEs
/// each hold this state.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn ring_reduce_to_leader(tl: &Tl, acc: &mut Tile, ring: Ring, op: ReduceOp) {
    // The ring's facts are read from `ring` where they are used, not kept in locals that every wait
    // after them would hold (as in [`ring_broadcast_from_leader`]).
    if ring.count == 1 {
        return;
    }
    if ring.position == 0 {
        if west_end(ring) >= 1 {
            let west = tl.recv(ring.forward, acc.len(), acc.dtype());
            tl.reduce(acc, &west, op);
        }
        if ring.count - 1 > west_end(ring) {
            let east = tl.recv(ring.back, acc.len(), acc.dtype());
            tl.reduce(acc, &east, op);
        }
    } else if ring.position <= west_end(ring) {
        if ring.position < west_end(ring) {
            let farther = tl.recv(ring.forward, acc.len(), acc.dtype());
            tl.reduce(acc, &farther, op);
        }
        tl.send(ring.back, acc);
    } else {
        if ring.position > west_end(ring) + 1 {
            let farther = tl.recv(ring.back, acc.len(), acc.dtype());
            tl.reduce(acc, &farther, op);
        }
        tl.send(ring.forward, acc);
    }
}

/// Hands member 0's `acc` to every member, back along the paths of [`ring_reduce_to_leader`]: afterwards
/// every member's `acc` holds it.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn ring_broadcast_from_leader(tl: &Tl, acc: &mut Tile, ring: Ring) {
    // Positions are read from `ring` where they are used, not kept in locals: the arguments are held
    // for the whole call anyway, a local across every wait after it (and a million PEs hold this
    // state).
    if ring.count == 1 {
        return;
    }
    if ring.position == 0 {
        if west_end(ring) >= 1 {
            tl.send(ring.forward, acc);
        }
        if ring.count - 1 > west_end(ring) {
            tl.send(ring.back, acc);
        }
        return;
    }
    // The result is received into `acc`'s place, not a local of its own: a local held across the send
    // would be a tile's more.
    let toward_leader = if ring.position <= west_end(ring) { ring.back } else { ring.forward };
    *acc = tl.recv(toward_leader, acc.len(), acc.dtype());
    if ring.position < west_end(ring) {
        tl.send(ring.forward, acc);
    } else if ring.position > west_end(ring) + 1 {
        tl.send(ring.back, acc);
    }
}

/// Hierarchical all-reduce: intra-cube ring, cube-leader ring, SIP-leader ring, and the
/// result broadcast back down the same rings.
///
/// The data goes in `chunks` pieces (clamped to `1..=len`) that stream through every level: each PE
/// passes piece `j` up through its levels and goes on to piece `j + 1` while piece `j` is still on its
/// way up, then the results come down piece by piece the same way, so every ring's links carry the
/// next piece while the last one crosses the latency of the levels above.
#[ccl_kernel(crate = "kernbench_core")]
pub fn hierarchical_allreduce(tl: &Tl, #[default = 1] chunks: usize) {
    let chunks = chunks.clamp(1, tl.buffer_len(Input).max(1));
    // Every piece goes all the way up before any comes down, so the top leader streams the pieces it
    // finishes straight back down. Each piece is reduced and then replaced by its result where it
    // lies, and the data is not kept once cut: a PE's kernel state is as large as its largest wait's
    // (a million PEs hold it), and a loop holds what its head made (a list to fill, a list it
    // consumes) across every wait in it. So the pieces are visited by index, not by an iterator
    // (which, with the piece it lends, is three words held across each wait), the operator is read
    // where it is used, and one piece takes the same path as many: a tile of its own for it would be
    // held beside the list.
    let mut pieces = {
        let data = tl.load(Input);
        split(tl, &data, chunks)
    };
    let mut j = 0;
    while j < pieces.len() {
        reduce_up(tl, &mut pieces[j], tl.op());
        j += 1;
    }
    j = 0;
    while j < pieces.len() {
        broadcast_down(tl, &mut pieces[j]);
        j += 1;
    }
    // One piece is the input's view: joined, it is itself, without a copy.
    tl.store(Output, &tl.concat(&pieces));
}

/// The ring of `level` this PE is on: 0, the PEs of its cube; 1, the cube leaders of its SIP; 2, the
/// SIP leaders. Made where it is used rather than kept: a million PEs each hold their kernel's state.
fn level_ring(ctx: &TlContext, level: usize) -> Ring {
    let position = [ctx.pe.pe, ctx.pe.cube, ctx.pe.sip][level] as usize;
    let (forward, back) = [(E, W), (N, S), (Direction::SipNext, Direction::SipPrev)][level];
    // Extents are outermost first.
    Ring { position, count: ctx.extents[2 - level], forward, back }
}

/// Whether this PE leads the rings above `level`: it is member 0 of every ring up to it.
fn leads(pe: PeId, level: usize) -> bool {
    [pe.pe, pe.cube, pe.sip][..=level].iter().all(|&position| position == 0)
}

/// Reduces `acc` up the levels this PE leads, in place: afterwards the top leader's `acc` holds the
/// finished result.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn reduce_up(tl: &Tl, acc: &mut Tile, op: ReduceOp) {
    // Each ring made in a statement of its own: the context it is made from is not held across the
    // wait.
    let ring = level_ring(&tl.context(), 0);
    ring_reduce_to_leader(tl, acc, ring, op);
    if leads(tl.pe(), 0) {
        let ring = level_ring(&tl.context(), 1);
        ring_reduce_to_leader(tl, acc, ring, op);
        if leads(tl.pe(), 1) {
            let ring = level_ring(&tl.context(), 2);
            ring_reduce_to_leader(tl, acc, ring, op);
            if leads(tl.pe(), 2) {
                let contributions = tl.size();
                tl.finish(acc, op, contributions);
            }
        }
    }
}

/// Brings the result down the levels into `acc`: afterwards every PE's `acc` holds it.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn broadcast_down(tl: &Tl, acc: &mut Tile) {
    if leads(tl.pe(), 0) {
        if leads(tl.pe(), 1) {
            let ring = level_ring(&tl.context(), 2);
            ring_broadcast_from_leader(tl, acc, ring);
        }
        let ring = level_ring(&tl.context(), 1);
        ring_broadcast_from_leader(tl, acc, ring);
    }
    let ring = level_ring(&tl.context(), 0);
    ring_broadcast_from_leader(tl, acc, ring);
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pe_s_hierarchical_all_reduce_state_fits_the_allocator_s_224_byte_class() {
        // A million PEs each hold one: the allocator's classes step from 224 B to 256 B.
        let registry = crate::default_registry();
        let bytes = registry.get("hierarchical_allreduce").unwrap().state_bytes();
        assert!(bytes <= 224, "{bytes} B");
    }
}

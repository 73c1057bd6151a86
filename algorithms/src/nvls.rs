//! NVLS algorithms: the switch computes. On a system whose switch multicasts and reduces (NVLink
//! SHARP), a multicast object spans a buffer on every rank, so a rank sends its data to the switch
//! once and reads the reduction back once (`tl.multimem_ld_reduce`), and one store reaches every rank
//! (`tl.multimem_st`), as NCCL's NVLS kernels do on H100.
//!
//! Every kernel here runs on the `multicast` topology, whose plan refuses a system without such a
//! switch (so `auto` and a sweep of every algorithm pass them by there), one rank per GPU (mapper
//! `leader_only`), on `lanes` lanes: NCCL runs NVLS on 16 channels on Hopper (`NVLS_NCHANNELS_SM90`),
//! and lane `l` takes chunk `l` of each rank's part, so one lane's stores overlap the next lane's
//! loads.

use std::ops::Range;

use kernbench_core::chunk_range;
use kernbench_core::prelude::*;

use crate::ring::lane_share;

/// Lane `lane`'s near-equal share of elements `range`, among `lanes`.
fn lane_range(range: Range<usize>, (lane, lanes): (usize, usize)) -> Result<Range<usize>, kernbench_core::TileError> {
    let share = chunk_range(range.len(), lane, lanes)?;
    Ok(range.start + share.start..range.start + share.end)
}

/// Copies this lane's share of the input into this rank's copy of `data`, then waits until every
/// rank has: the switch may read any of them after.
#[ccl_kernel(helper, crate = "kernbench_core")]
fn publish_input(tl: &Tl, data: &Multicast) {
    let (share, start) = lane_share(tl, Input, 0..tl.buffer_len(Input));
    tl.write(&data.buffer, start, &share);
    tl.barrier();
}

/// The pieces that a lane cuts its `range` of `element`-byte elements into: of at most `chunk_bytes`
/// each, as NCCL moves NVLS data in chunks (`NCCL_NVLS_CHUNKSIZE`, 128 KiB), so that a lane's store of
/// one piece overlaps its reduction of the next; but no more than `chunks` (so a call's messages are
/// bounded whatever its size, and a larger part pipelines in larger pieces), and at least one.
fn pieces(
    range: Range<usize>,
    element: usize,
    (chunk_bytes, chunks): (usize, usize),
) -> Result<Vec<Range<usize>>, kernbench_core::TileError> {
    let count = (range.len() * element).div_ceil(chunk_bytes.max(1)).clamp(1, chunks.max(1));
    (0..count).map(|piece| lane_range(range.clone(), (piece, count))).collect()
}

/// Publishes this rank's input into a multicast object spanning every rank's (see [`publish_input`]);
/// returns the object, this rank's part of its elements (part `rank` of `size`) and the pieces of this
/// lane's share of that part (none when the share is empty), cut as `chunking` says ([`pieces`]).
#[ccl_kernel(helper, crate = "kernbench_core")]
fn own_pieces(tl: &Tl, chunking: (usize, usize)) -> (Multicast, Range<usize>, Vec<Range<usize>>) {
    let len = tl.buffer_len(Input);
    let dtype = tl.load(Input).dtype();
    let data = tl.multicast("nvls_data", dtype, len);
    publish_input(tl, &data);
    let part = chunk_range(len, tl.rank(), tl.size())?;
    let mine = lane_range(part.clone(), (tl.lane(), tl.lanes()))?;
    let pieces = if mine.is_empty() { Vec::new() } else { pieces(mine, dtype.size(), chunking)? };
    (data, part, pieces)
}

/// NVLS all-reduce: each rank copies its input into the multicast object's buffer; then rank `r`
/// reads part `r` of it reduced by the switch (`multimem_ld_reduce`) and stores the result into part
/// `r` of every rank's copy (`multimem_st`), piece by piece (see [`pieces`]); after a barrier
/// (which also lands the stores) every rank copies the whole reduction out.
///
/// Each rank's link up carries its input once (as the switch reads it) and its part once; its link
/// down its part once and every rank's part once: about `(1 + 1/n)` of the input each way, where a
/// ring moves `2 (n-1)/n`.
#[ccl_kernel(lanes = lanes, crate = "kernbench_core")]
pub fn nvls_allreduce(
    tl: &Tl,
    #[default = 16] lanes: usize,
    #[default = 131072] chunk_bytes: usize,
    #[default = 64] chunks: usize,
) {
    let (n, op, len) = (tl.size(), tl.op(), tl.buffer_len(Input));
    let (data, _, pieces) = own_pieces(tl, (chunk_bytes, chunks));
    for piece in pieces {
        let mut reduced = tl.multimem_ld_reduce(&data, piece.start, piece.len(), op);
        tl.finish(&mut reduced, op, n);
        tl.multimem_st(&data, piece.start, &reduced);
    }
    tl.barrier();
    let all = lane_range(0..len, (tl.lane(), tl.lanes()))?;
    tl.store_at(Output, all.start, &tl.read(&data.buffer, all.start, all.len()));
}

/// NVLS all-gather: rank `r` stores its block into block `r` of every rank's copy of the multicast
/// object's buffer with one `multimem_st`; after a barrier every rank copies the gathered blocks out.
/// Each rank's link up carries its block once, where a ring sends it on `n - 1` times.
#[ccl_kernel(lanes = lanes, crate = "kernbench_core")]
pub fn nvls_allgather(tl: &Tl, #[default = 16] lanes: usize) {
    let (rank, n) = (tl.rank(), tl.size());
    let block = tl.buffer_len(Input);
    let gathered = tl.multicast("nvls_gathered", tl.load(Input).dtype(), n * block);
    let (share, start) = lane_share(tl, Input, 0..block);
    if !share.is_empty() {
        tl.multimem_st(&gathered, rank * block + start, &share);
    }
    tl.barrier();
    let all = lane_range(0..n * block, (tl.lane(), tl.lanes()))?;
    tl.store_at(Output, all.start, &tl.read(&gathered.buffer, all.start, all.len()));
}

/// NVLS reduce-scatter: each rank copies its input into the multicast object's buffer; after a
/// barrier rank `r` reads part `r` reduced by the switch (`multimem_ld_reduce`) into its output.
#[ccl_kernel(lanes = lanes, crate = "kernbench_core")]
pub fn nvls_reduce_scatter(
    tl: &Tl,
    #[default = 16] lanes: usize,
    #[default = 131072] chunk_bytes: usize,
    #[default = 64] chunks: usize,
) {
    let (n, op) = (tl.size(), tl.op());
    let (data, part, pieces) = own_pieces(tl, (chunk_bytes, chunks));
    for piece in pieces {
        let mut reduced = tl.multimem_ld_reduce(&data, piece.start, piece.len(), op);
        tl.finish(&mut reduced, op, n);
        tl.store_at(Output, piece.start - part.start, &reduced);
    }
}

/// NVLS across nodes (NCCL's NVLS tree): in each node the switch reduces and multicasts, and between
/// nodes the ranks of the same place in each node (a rail: `tl.team_split_strided(local, g, nodes)`,
/// whose messages cross the NICs of their lanes' rails) exchange what their node reduced.
///
/// Every rank publishes its input into a multicast object of its node (`tl.multicast_team` over
/// `tl.team_node()`); rank `local` of a node of `g` reads part `local` reduced by its node's switch,
/// piece by piece (see [`pieces`]), sends each piece to its rail peers and sums theirs with its own in
/// rail order (so every node ends with the same bits), and stores the sum into part `local` of every
/// copy in its node (`multimem_st`); after a barrier of the node every rank copies the reduction out.
/// On one node it is [`nvls_allreduce`] with a team barrier. Topology `multicast_nodes`.
#[ccl_kernel(lanes = lanes, crate = "kernbench_core")]
pub fn nvls_tree_allreduce(
    tl: &Tl,
    #[default = 16] lanes: usize,
    #[default = 131072] chunk_bytes: usize,
    #[default = 64] chunks: usize,
) {
    let (me, n, op, len) = (tl.rank(), tl.size(), tl.op(), tl.buffer_len(Input));
    let node = tl.team_node();
    let (g, local) = (node.size(), node.rank());
    let rail = tl.team_split_strided(local, g, n / g);
    let rail =
        rail.ok_or_else(|| format!("rank {me} is not on its rail ({local} + k * {g}): nodes of unequal size"))?;
    let dtype = tl.load(Input).dtype();
    let data = tl.multicast_team(&node, "nvls_tree", dtype, len);
    let (share, start) = lane_share(tl, Input, 0..len);
    tl.write(&data.buffer, start, &share);
    tl.barrier_team(&node);
    let mine = lane_range(chunk_range(len, local, g)?, (tl.lane(), tl.lanes()))?;
    let pieces = if mine.is_empty() { Vec::new() } else { pieces(mine, dtype.size(), (chunk_bytes, chunks))? };
    for piece in pieces {
        let reduced = tl.multimem_ld_reduce(&data, piece.start, piece.len(), op);
        for &peer_rank in rail.members().iter().filter(|&&r| r != me) {
            tl.send(crate::direct::peer(peer_rank), &reduced);
        }
        let mut sum: Option<Tile> = None;
        for &member in rail.members().iter() {
            let theirs =
                if member == me { reduced.clone() } else { tl.recv(crate::direct::peer(member), piece.len(), dtype) };
            sum = Some(match sum {
                None => theirs,
                Some(mut acc) => {
                    tl.reduce(&mut acc, &theirs, op);
                    acc
                }
            });
        }
        let mut sum = sum.unwrap_or(reduced);
        tl.finish(&mut sum, op, n);
        tl.multimem_st(&data, piece.start, &sum);
    }
    tl.barrier_team(&node);
    let all = lane_range(0..len, (tl.lane(), tl.lanes()))?;
    tl.store_at(Output, all.start, &tl.read(&data.buffer, all.start, all.len()));
}

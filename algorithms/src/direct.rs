//! Direct-peer algorithms on `full`: one-shot all-reduce, Bruck's all-gather and pairwise all-to-all.
//!
//! Every rank has a link `peer<j>` to every other rank `j`, so data goes to its destination in one
//! hop; the algorithms differ in how many messages they send and in what order.

use kernbench_core::prelude::*;

/// The `full` topology's link to rank `j`.
pub(crate) fn peer(j: usize) -> Direction {
    // `full` links at most 1024 participants, so `j` fits a u32.
    Direction::Peer(j as u32)
}

/// One-shot all-reduce: every rank sends its input to every other rank and reduces all `n` inputs
/// itself, in rank order, so every rank computes the same bits.
///
/// Topology `full`, any mapper, up to 1024 ranks (the topology's limit, reported when the plan is
/// built). One step of latency, but each rank sends and reduces `n - 1` times the data.
#[ccl_kernel(crate = "kernbench_core")]
pub fn one_shot_allreduce(tl: &Tl) {
    let (rank, n, op) = (tl.rank(), tl.size(), tl.op());
    let data = tl.load(Input);
    let (len, dtype) = (data.len(), data.dtype());
    // Each rank starts with a different peer, so the first messages do not all head for one rank.
    for step in 1..n {
        tl.send(peer((rank + step) % n), &data);
    }
    let mut acc = if rank == 0 { data.clone() } else { tl.recv(peer(0), len, dtype) };
    for j in 1..n {
        let theirs = if j == rank { data.clone() } else { tl.recv(peer(j), len, dtype) };
        tl.reduce(&mut acc, &theirs, op);
    }
    tl.finish(&mut acc, op, n);
    tl.store(Output, &acc);
}

/// Bruck's all-gather: `ceil(log2 n)` steps; at step `k` each rank sends the blocks it holds (up to
/// `2^k` of them) to rank `r - 2^k` and receives as many from rank `r + 2^k`, then puts the blocks in
/// rank order.
///
/// Topology `full`, any mapper, up to 1024 ranks, any number of ranks (not only powers of two).
#[ccl_kernel(crate = "kernbench_core")]
pub fn bruck_allgather(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let mine = tl.load(Input);
    let (m, dtype) = (mine.len(), mine.dtype());
    // Block `i` of `held` is rank `(rank + i) % n`'s.
    let mut held = mine;
    let mut distance = 1;
    while distance < n {
        let count = distance.min(n - distance);
        let message = tl.slice(&held, 0, count * m);
        tl.send(peer((rank + n - distance) % n), &message);
        let got = tl.recv(peer((rank + distance) % n), count * m, dtype);
        held = tl.concat(&[held, got]);
        distance *= 2;
    }
    // Rotate so that block `j` is rank `j`'s: ranks `0..rank` sit at the end of `held`.
    let wrap = (n - rank) % n * m;
    let low_ranks = tl.slice(&held, wrap, n * m - wrap);
    let high_ranks = tl.slice(&held, 0, wrap);
    tl.store(Output, &tl.concat(&[low_ranks, high_ranks]));
}

/// Pairwise all-to-all: in step `s` of `n - 1`, each rank sends its block for rank `r + s` straight
/// to it and receives its block from rank `r - s`, so every rank sends and receives once per step.
///
/// Topology `full`, any mapper, up to 1024 ranks. The input splits into `n` near-equal blocks; rank
/// `r`'s output holds every rank's block `r`, in rank order.
#[ccl_kernel(crate = "kernbench_core")]
pub fn pairwise_alltoall(tl: &Tl) {
    pairwise_exchange(tl);
}

/// The exchange of [`pairwise_alltoall()`], for every kernel whose flat path it is.
#[ccl_kernel(helper, crate = "kernbench_core")]
pub(crate) fn pairwise_exchange(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let data = tl.load(Input);
    let own = tl.chunk(&data, rank, n);
    let block = own.len();
    tl.store_at(Output, rank * block, &own);
    for step in 1..n {
        let (to, from) = ((rank + step) % n, (rank + n - step) % n);
        let outgoing = tl.chunk(&data, to, n);
        tl.send(peer(to), &outgoing);
        let got = tl.recv(peer(from), block, data.dtype());
        tl.store_at(Output, from * block, &got);
    }
}

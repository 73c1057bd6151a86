//! Uneven exchanges on `full`: all-to-all-v and groups of sends and receives, both given by the call's
//! per-pair counts (`tl.counts()`), two-sided pairwise and one-sided.
//!
//! Rank `r`'s input holds what it sends, to rank 0 first; its output what it receives, from rank 0
//! first. A pair with no count exchanges no message: both sides read the same counts, so neither waits
//! for it. One kernel of each kind serves both collectives: send/recv is all-to-all-v whose counts are
//! zero but for the pairs in the group.

use kernbench_core::prelude::*;

use crate::direct::peer;

/// The signal the puts of [`symmetric_uneven()`] raise.
const LANDED: usize = 0;

/// Pairwise uneven exchange: in step `s` of `n - 1`, each rank sends what it has for rank `r + s`
/// straight to it and receives what rank `r - s` has for it, skipping pairs with no count; its own
/// part it copies.
///
/// Topology `full`, any mapper, up to 1024 ranks. As [`pairwise_alltoall()`](crate::pairwise_alltoall())
/// with per-pair sizes; for send/recv, only the listed pairs exchange.
#[ccl_kernel(crate = "kernbench_core")]
pub fn pairwise_uneven(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let counts = tl.counts();
    let data = tl.load(Input);
    let own = tl.slice(&data, counts.send_offset(rank, rank), counts.count(rank, rank));
    tl.store_at(Output, counts.recv_offset(rank, rank), &own);
    for step in 1..n {
        let (to, from) = ((rank + step) % n, (rank + n - step) % n);
        if counts.count(rank, to) > 0 {
            let outgoing = tl.slice(&data, counts.send_offset(rank, to), counts.count(rank, to));
            tl.send(peer(to), &outgoing);
        }
        if counts.count(from, rank) > 0 {
            let got = tl.recv(peer(from), counts.count(from, rank), data.dtype());
            tl.store_at(Output, counts.recv_offset(rank, from), &got);
        }
    }
}

/// One-sided uneven exchange: each rank puts what it has for each peer straight into that peer's
/// `inbox`, at the place the peer's output holds it, raising the peer's signal; waits for as many
/// puts as ranks send to it; then copies its inbox into its output.
///
/// One step of latency, no credits to wait for. The inbox is as long as the most any rank receives,
/// so it has one shape everywhere.
#[ccl_kernel(crate = "kernbench_core")]
pub fn symmetric_uneven(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let counts = tl.counts();
    let data = tl.load(Input);
    let inbox = tl.symmetric("inbox", data.dtype(), counts.most_received().max(1));
    for to in (1..n).map(|step| (rank + step) % n) {
        if counts.count(rank, to) > 0 {
            let outgoing = tl.slice(&data, counts.send_offset(rank, to), counts.count(rank, to));
            tl.put_signal(to, &inbox, counts.recv_offset(to, rank), &outgoing, LANDED, 1);
        }
    }
    let own = tl.slice(&data, counts.send_offset(rank, rank), counts.count(rank, rank));
    tl.store_at(Output, counts.recv_offset(rank, rank), &own);
    let senders = (0..n).filter(|&from| from != rank && counts.count(from, rank) > 0).count();
    tl.wait_until(LANDED, senders as u64);
    for from in (0..n).filter(|&from| from != rank && counts.count(from, rank) > 0) {
        let (at, count) = (counts.recv_offset(rank, from), counts.count(from, rank));
        tl.store_at(Output, at, &tl.read(&inbox, at, count));
    }
}

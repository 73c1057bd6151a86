//! One-sided algorithms on the symmetric heap: the P2P all-reduce designs of symmetric-memory
//! libraries, written as NVSHMEM and NCCL's symmetric kernels are. A rank puts straight into its
//! peers' buffers with `tl.put_signal`, which raises a peer's signal once the data has landed, and
//! waits on its own signal before it reads what the peers put.
//!
//! Every kernel here runs on `full` (each rank reaches every other directly), up to 1024 ranks, and
//! puts to its peers starting with the next rank, so the first puts do not all head for one rank.

use kernbench_core::prelude::*;
use kernbench_core::{chunk_range, chunk_start};

/// The signal the first (or only) exchange's puts raise.
const LANDED: usize = 0;
/// The signal the second exchange's puts raise.
const GATHERED: usize = 1;

/// The `n - 1` peers of `rank` among `n`, next rank first.
fn peers(rank: usize, n: usize) -> impl Iterator<Item = usize> {
    (1..n).map(move |step| (rank + step) % n)
}

/// One-shot all-reduce, one-sided: each rank puts its input into slot `rank` of every peer's `inbox`
/// (raising the peer's signal), waits for the `n - 1` puts into its own, and reduces the `n` inputs in
/// rank order, so every rank computes the same bits.
///
/// One step of latency, no credits to wait for; each rank injects and reduces `n - 1` times the data.
#[ccl_kernel(crate = "kernbench_core")]
pub fn symmetric_one_shot_allreduce(tl: &Tl) {
    let (rank, n, op) = (tl.rank(), tl.size(), tl.op());
    let data = tl.load(Input);
    let len = data.len();
    let inbox = tl.symmetric("inbox", data.dtype(), n * len);
    for peer in peers(rank, n) {
        tl.put_signal(peer, &inbox, rank * len, &data, LANDED, 1);
    }
    tl.wait_until(LANDED, (n - 1) as u64);
    let mut acc = if rank == 0 { data.clone() } else { tl.read(&inbox, 0, len) };
    for j in 1..n {
        let theirs = if j == rank { data.clone() } else { tl.read(&inbox, j * len, len) };
        tl.reduce(&mut acc, &theirs, op);
    }
    tl.finish(&mut acc, op, n);
    tl.store(Output, &acc);
}

/// Two-shot all-reduce, one-sided: a reduce-scatter by puts (part `j` of each rank's input goes to
/// rank `j`, which reduces the `n` copies of its part in rank order), then an all-gather by puts of
/// the reduced parts.
///
/// Two steps of latency; each rank injects about twice its input, whatever the rank count.
#[ccl_kernel(crate = "kernbench_core")]
pub fn symmetric_two_shot_allreduce(tl: &Tl) {
    let (rank, n, op) = (tl.rank(), tl.size(), tl.op());
    let data = tl.load(Input);
    let (len, dtype) = (data.len(), data.dtype());
    // Parts are near-equal; slots are the size of the largest (part 0).
    let slot = chunk_range(len, 0, n)?.len();
    let parts = tl.symmetric("parts", dtype, n * slot);
    for peer in peers(rank, n) {
        tl.put_signal(peer, &parts, rank * slot, &tl.chunk(&data, peer, n), LANDED, 1);
    }
    let own = tl.chunk(&data, rank, n);
    tl.wait_until(LANDED, (n - 1) as u64);
    let mut acc = if rank == 0 { own.clone() } else { tl.read(&parts, 0, own.len()) };
    for j in 1..n {
        let theirs = if j == rank { own.clone() } else { tl.read(&parts, j * slot, own.len()) };
        tl.reduce(&mut acc, &theirs, op);
    }
    tl.finish(&mut acc, op, n);
    let gathered = tl.symmetric("gathered", dtype, len);
    let start = chunk_start(len, rank, n);
    for peer in peers(rank, n) {
        tl.put_signal(peer, &gathered, start, &acc, GATHERED, 1);
    }
    tl.store_at(Output, start, &acc);
    tl.wait_until(GATHERED, (n - 1) as u64);
    for j in peers(rank, n) {
        let range = chunk_range(len, j, n)?;
        tl.store_at(Output, range.start, &tl.read(&gathered, range.start, range.len()));
    }
}

/// All-gather, one-sided: each rank puts its input into block `rank` of every peer's `gathered`,
/// then copies the blocks it received into its output.
///
/// One step of latency; each rank injects `n - 1` copies of its input.
#[ccl_kernel(crate = "kernbench_core")]
pub fn symmetric_allgather(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let data = tl.load(Input);
    let m = data.len();
    let gathered = tl.symmetric("gathered", data.dtype(), n * m);
    for peer in peers(rank, n) {
        tl.put_signal(peer, &gathered, rank * m, &data, LANDED, 1);
    }
    tl.store_at(Output, rank * m, &data);
    tl.wait_until(LANDED, (n - 1) as u64);
    for j in peers(rank, n) {
        tl.store_at(Output, j * m, &tl.read(&gathered, j * m, m));
    }
}

/// All-to-all, one-sided: each rank puts its block for rank `j` into slot `rank` of rank `j`'s
/// `inbox`, then copies the blocks it received into its output in rank order.
///
/// One step of latency; the input splits into `n` near-equal blocks, and rank `r`'s output holds every
/// rank's block `r`.
#[ccl_kernel(crate = "kernbench_core")]
pub fn symmetric_alltoall(tl: &Tl) {
    let (rank, n) = (tl.rank(), tl.size());
    let data = tl.load(Input);
    let own = tl.chunk(&data, rank, n);
    let block = own.len();
    // Blocks are near-equal; every rank's slots are the size of the largest (block 0), so the buffer
    // has one shape everywhere.
    let slot = chunk_range(data.len(), 0, n)?.len();
    let inbox = tl.symmetric("inbox", data.dtype(), n * slot);
    for peer in peers(rank, n) {
        tl.put_signal(peer, &inbox, rank * slot, &tl.chunk(&data, peer, n), LANDED, 1);
    }
    tl.store_at(Output, rank * block, &own);
    tl.wait_until(LANDED, (n - 1) as u64);
    for j in peers(rank, n) {
        tl.store_at(Output, j * block, &tl.read(&inbox, j * slot, block));
    }
}

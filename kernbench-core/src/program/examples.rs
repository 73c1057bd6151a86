//! Collective algorithms written with the [`ProgramBuilder`]: MSCCLang's ring all-reduce, an
//! all-to-all through scratch, an in-place ring all-gather and the MSCCLang paper's hierarchical
//! all-reduce. Uses [`builder`](super::builder), [`Buffer`] from `kernel` and [`Collective`].
//!
//! # Examples
//!
//! ```
//! use kernbench_core::program::{check, examples};
//!
//! let program = examples::ring_allreduce(4, 2)?;
//! check(&program)?;
//! assert_eq!((program.chunks, program.channels), (8, 2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::Program;
use super::builder::{BuildError, Chunk, ChunkError, ProgramBuilder};
use crate::collective::Collective;
use crate::kernel::Buffer;

/// A ring over some ranks, on one channel, with the block of chunks (first chunk, count) that ends up
/// reduced at each position of the ring.
struct Ring {
    ranks: Vec<usize>,
    blocks: Vec<(usize, usize)>,
    channel: usize,
}

/// Reduce-scatters along every ring at once, step by step across the rings, into the input buffer:
/// block `j` starts at position `j + 1` and is reduced hop by hop until position `j` holds the sum.
/// The handles to the sums, per ring and position.
fn ring_reduce_scatter(p: &mut ProgramBuilder, rings: &[Ring]) -> Result<Vec<Vec<Chunk>>, ChunkError> {
    let mut partial = Vec::new();
    for ring in rings {
        let m = ring.ranks.len();
        let start = |j: usize| p.chunk(ring.ranks[(j + 1) % m], Buffer::Input, ring.blocks[j].0, ring.blocks[j].1);
        partial.push((0..m).map(start).collect::<Result<Vec<_>, _>>()?);
    }
    let steps = rings.iter().map(|r| r.ranks.len()).max().unwrap_or(0);
    for step in 1..steps {
        for (ring, partial) in rings.iter().zip(&mut partial) {
            let m = ring.ranks.len();
            if step >= m {
                continue;
            }
            p.channel(ring.channel);
            for (j, sum) in partial.iter_mut().enumerate() {
                let (index, count) = ring.blocks[j];
                let into = p.chunk(ring.ranks[(j + 1 + step) % m], Buffer::Input, index, count)?;
                *sum = p.reduce(&into, sum)?;
            }
        }
    }
    Ok(partial)
}

/// All-gathers along every ring at once the blocks `sums[ring][j]` at position `j`, into `buffer`:
/// each block travels once round its ring, and its owner copies it to `buffer` locally if it lies
/// elsewhere.
fn ring_all_gather(
    p: &mut ProgramBuilder,
    rings: &[Ring],
    sums: Vec<Vec<Chunk>>,
    buffer: Buffer,
) -> Result<(), ChunkError> {
    let mut moving = sums.clone();
    let steps = rings.iter().map(|r| r.ranks.len()).max().unwrap_or(0);
    for step in 0..steps.saturating_sub(1) {
        for (ring, moving) in rings.iter().zip(&mut moving) {
            let m = ring.ranks.len();
            if step + 1 >= m {
                continue;
            }
            p.channel(ring.channel);
            for (j, chunk) in moving.iter_mut().enumerate() {
                *chunk = p.copy(chunk, ring.ranks[(j + step + 1) % m], buffer, ring.blocks[j].0)?;
            }
        }
    }
    for (ring, sums) in rings.iter().zip(&sums) {
        p.channel(ring.channel);
        for (j, sum) in sums.iter().enumerate() {
            if sum.buffer() != buffer {
                p.copy(sum, ring.ranks[j], buffer, ring.blocks[j].0)?;
            }
        }
    }
    Ok(())
}

/// MSCCLang's ring all-reduce, out of place, over `ranks` ranks and `channels` channels: the data is
/// cut into `ranks * channels` chunks, channel `c` carrying chunks `c * ranks..(c + 1) * ranks` round
/// its own ring. Each chunk is reduced along the ring (`rrs`) until one rank holds the sum (`rrcs`),
/// which then travels once more round the ring into every output (`rcs`, and `r` at the end); the
/// rank holding the sum copies it to its own output (`cpy`). The sums are formed in the input buffer,
/// which the program therefore overwrites (partial sums that are only forwarded are never stored).
///
/// # Errors
/// None for `ranks >= 2` and `channels >= 1`; the builder's errors otherwise.
pub fn ring_allreduce(ranks: usize, channels: usize) -> Result<Program, BuildError> {
    let name = format!("ring_allreduce_{ranks}x{channels}");
    let mut p = ProgramBuilder::new(name, Collective::AllReduce, ranks, ranks * channels, false)?;
    let rings: Vec<Ring> = (0..channels)
        .map(|channel| Ring {
            ranks: (0..ranks).collect(),
            blocks: (0..ranks).map(|j| (channel * ranks + j, 1)).collect(),
            channel,
        })
        .collect();
    let sums = ring_reduce_scatter(&mut p, &rings)?;
    ring_all_gather(&mut p, &rings, sums, Buffer::Output)?;
    p.build()
}

/// All-to-all over `ranks` ranks through scratch: rank `r` sends chunk `d` of its input to scratch
/// chunk `r` of rank `d`, which then copies it into output chunk `r`; a rank's own chunk is copied
/// locally.
///
/// # Errors
/// None for `ranks >= 1`; the builder's errors otherwise.
pub fn alltoall_with_scratch(ranks: usize) -> Result<Program, BuildError> {
    let name = format!("alltoall_with_scratch_{ranks}");
    let mut p = ProgramBuilder::new(name, Collective::AllToAll, ranks, ranks, false)?;
    let mut staged = Vec::new();
    for src in 0..ranks {
        for dst in (0..ranks).filter(|&d| d != src) {
            let chunk = p.chunk(src, Buffer::Input, dst, 1)?;
            staged.push((p.copy(&chunk, dst, Buffer::Scratch, src)?, src));
        }
    }
    for rank in 0..ranks {
        let own = p.chunk(rank, Buffer::Input, rank, 1)?;
        p.copy(&own, rank, Buffer::Output, rank)?;
    }
    for (chunk, src) in staged {
        let dst = chunk.rank();
        p.copy(&chunk, dst, Buffer::Output, src)?;
    }
    p.build()
}

/// An in-place ring all-gather over `ranks` ranks: each rank's input is its block of the output, and
/// travels once round the ring (`s`, `rcs`, then `r`).
///
/// # Errors
/// None for `ranks >= 2`; the builder's errors otherwise.
pub fn ring_allgather_in_place(ranks: usize) -> Result<Program, BuildError> {
    let name = format!("ring_allgather_in_place_{ranks}");
    let mut p = ProgramBuilder::new(name, Collective::AllGather, ranks, ranks, true)?;
    let mut moving = (0..ranks).map(|r| p.chunk(r, Buffer::Input, 0, 1)).collect::<Result<Vec<_>, _>>()?;
    for step in 0..ranks - 1 {
        for (block, chunk) in moving.iter_mut().enumerate() {
            *chunk = p.copy(chunk, (block + step + 1) % ranks, Buffer::Output, block)?;
        }
    }
    p.build()
}

/// The MSCCLang paper's hierarchical all-reduce, in place, over `nodes` nodes of `gpus_per_node`
/// ranks (rank `node * gpus_per_node + gpu`): a ring reduce-scatter within each node leaves GPU `g`
/// with the node's sum of block `g` (`nodes` chunks); a ring all-reduce across the nodes, one per GPU
/// index on its own channel, sums each block over all nodes; a ring all-gather within each node
/// spreads the blocks. The rings across nodes use channel 1 (0 if
/// there is one GPU per node).
///
/// # Errors
/// None for `nodes >= 1` and `gpus_per_node >= 1` (at least two ranks); the builder's errors
/// otherwise.
pub fn hierarchical_allreduce(nodes: usize, gpus_per_node: usize) -> Result<Program, BuildError> {
    let (g, ranks) = (gpus_per_node, nodes * gpus_per_node);
    let name = format!("hierarchical_allreduce_{nodes}x{g}");
    let mut p = ProgramBuilder::new(name, Collective::AllReduce, ranks, ranks, true)?;
    let local = |node: usize| Ring {
        ranks: (0..g).map(|gpu| node * g + gpu).collect(),
        blocks: (0..g).map(|gpu| (gpu * nodes, nodes)).collect(),
        channel: 0,
    };
    let across = |gpu: usize| Ring {
        ranks: (0..nodes).map(|node| node * g + gpu).collect(),
        blocks: (0..nodes).map(|node| (gpu * nodes + node, 1)).collect(),
        // Its own channel, unless there is no ring within nodes (channels must be dense for the runtime).
        channel: usize::from(g > 1),
    };
    let (locals, acrosses): (Vec<Ring>, Vec<Ring>) = ((0..nodes).map(local).collect(), (0..g).map(across).collect());
    if g > 1 {
        ring_reduce_scatter(&mut p, &locals)?;
    }
    if nodes > 1 {
        let sums = ring_reduce_scatter(&mut p, &acrosses)?;
        ring_all_gather(&mut p, &acrosses, sums, Buffer::Input)?;
    }
    if g > 1 {
        let blocks = locals
            .iter()
            .map(|ring| {
                let chunk = |(j, &rank): (usize, &usize)| p.chunk(rank, Buffer::Input, ring.blocks[j].0, nodes);
                ring.ranks.iter().enumerate().map(chunk).collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        ring_all_gather(&mut p, &locals, blocks, Buffer::Input)?;
    }
    p.build()
}

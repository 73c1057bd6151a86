//! Whether a [`Program`] can run as the MSCCL executor runs it: the rules the executor relies on but
//! mostly does not check, for programs read from XML and built in Rust alike. Uses the rest of
//! [`program`](super) and [`Buffer`] from `kernel`.
//!
//! [`check`] looks at, in this order: each thread block's peers and channel, each step's chunks and
//! dependency, the pairing of sends with receives per connection, and last whether the steps wait on
//! each other in a cycle. It returns the first problem found, so fixing errors one by one converges.

mod error;
mod order;

use std::collections::BTreeMap;

pub use error::{ConnectionKind, ProgramError, Side, StepAt, WaitingStep};

use super::{Program, StepKind};
use crate::kernel::Buffer;
use order::{Steps, find_cycle, pair_messages};

/// Checks that `program` can run: see the [module docs](self) for what is looked at.
///
/// # Errors
/// The first [`ProgramError`] found.
pub fn check(program: &Program) -> Result<(), ProgramError> {
    check_ranks(program)?;
    check_steps(program)?;
    let steps = Steps::new(program);
    let sent_by = pair_messages(program, &steps)?;
    find_cycle(program, &steps, &sent_by)
}

/// Each rank's buffers, and each of its thread blocks' peers and channel.
fn check_ranks(program: &Program) -> Result<(), ProgramError> {
    let ranks = program.ranks.len();
    for (rank, rank_program) in program.ranks.iter().enumerate() {
        for (buffer, buffer_chunks) in
            [(Buffer::Input, rank_program.input_chunks), (Buffer::Output, rank_program.output_chunks)]
        {
            if buffer_chunks > program.chunks {
                return Err(ProgramError::BufferTooLarge { rank, buffer, buffer_chunks, chunks: program.chunks });
            }
        }
        let mut connections = BTreeMap::new();
        for (tb, block) in rank_program.thread_blocks.iter().enumerate() {
            if block.channel >= program.channels {
                return Err(ProgramError::ChannelOutOfRange {
                    rank,
                    tb,
                    channel: block.channel,
                    channels: program.channels,
                });
            }
            for (connection, peer) in [(ConnectionKind::Send, block.send), (ConnectionKind::Recv, block.recv)] {
                let Some(peer) = peer else { continue };
                if peer == rank || peer >= ranks {
                    return Err(ProgramError::BadPeer { rank, tb, connection, peer, ranks });
                }
                if let Some(first) = connections.insert((connection, peer, block.channel), tb) {
                    return Err(ProgramError::SharedConnection {
                        rank,
                        first,
                        second: tb,
                        connection,
                        peer,
                        channel: block.channel,
                    });
                }
            }
        }
    }
    Ok(())
}

fn check_steps(program: &Program) -> Result<(), ProgramError> {
    for (rank, rank_program) in program.ranks.iter().enumerate() {
        let blocks = &rank_program.thread_blocks;
        for (tb, block) in blocks.iter().enumerate() {
            for (step_index, step) in block.steps.iter().enumerate() {
                let at = StepAt { rank, tb, step: step_index };
                let kind = step.kind;
                if kind.sends() && block.send.is_none() {
                    return Err(ProgramError::NoPeer { at, kind, connection: ConnectionKind::Send });
                }
                if kind.receives() && block.recv.is_none() {
                    return Err(ProgramError::NoPeer { at, kind, connection: ConnectionKind::Recv });
                }
                let sides = [(Side::Src, kind.reads_src(), step.src), (Side::Dst, kind.writes_dst(), step.dst)];
                for (side, used, chunks) in sides {
                    if !used {
                        continue;
                    }
                    let Some(chunks) = chunks else {
                        return Err(ProgramError::MissingChunks { at, kind, side });
                    };
                    let available = match chunks.buffer {
                        Buffer::Input => rank_program.input_chunks,
                        Buffer::Output => rank_program.output_chunks,
                        Buffer::Scratch => rank_program.scratch_chunks,
                    };
                    if chunks.index.checked_add(step.count).is_none_or(|end| end > available) {
                        return Err(ProgramError::ChunksOutOfRange {
                            at,
                            side,
                            buffer: chunks.buffer,
                            index: chunks.index,
                            count: step.count,
                            chunks: available,
                        });
                    }
                }
                if let Some((on_tb, on_step)) = step.depends_on {
                    check_dependency(program, at, on_tb, on_step)?;
                }
                if kind == StepKind::Nop {
                    let next_real = block.steps[step_index..].iter().find(|later| later.kind != StepKind::Nop);
                    if next_real.is_none_or(|real| real.depends_on.is_none()) {
                        return Err(ProgramError::DanglingNop { at });
                    }
                }
            }
        }
    }
    Ok(())
}

fn check_dependency(program: &Program, at: StepAt, on_tb: usize, on_step: usize) -> Result<(), ProgramError> {
    let blocks = &program.ranks[at.rank].thread_blocks;
    let bad = |why: String| ProgramError::BadDependency { at, on_tb, on_step, why };
    if on_tb == at.tb {
        return Err(bad("is its own thread block: a dependency must name another thread block of the rank".into()));
    }
    let Some(target) = blocks.get(on_tb) else {
        return Err(bad(format!("does not exist: rank {} has thread blocks 0..{}", at.rank, blocks.len())));
    };
    if on_step >= target.steps.len() {
        return Err(bad(format!("does not exist: tb {on_tb} has steps 0..{}", target.steps.len())));
    }
    if !target.steps[on_step..].iter().any(|step| step.has_dependents) {
        return Err(ProgramError::UnpublishedDependency { at, on_tb, on_step });
    }
    Ok(())
}

#[cfg(test)]
mod tests;

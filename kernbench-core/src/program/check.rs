//! Whether a [`Program`] can run as the MSCCL executor runs it: the rules the executor relies on but
//! mostly does not check, for programs read from XML and built in Rust alike. Uses the rest of
//! [`program`](super) and, from `kernel`, [`Buffer`].
//!
//! [`check`] looks at, in this order: each thread block's peers and channel, each step's chunks and
//! dependency, the pairing of sends with receives per connection, and last whether the steps wait on
//! each other in a cycle. It returns the first problem found, so fixing errors one by one converges.

use std::collections::BTreeMap;
use std::fmt;

use super::{Program, Step, StepKind};
use crate::kernel::Buffer;

/// A step of a program: which rank, which of its thread blocks, which step of that thread block's
/// list (counting `nop`s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StepAt {
    /// The rank.
    pub rank: usize,
    /// The thread block's id on that rank.
    pub tb: usize,
    /// The step's position in the thread block's list.
    pub step: usize,
}

impl fmt::Display for StepAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {} tb {} step {}", self.rank, self.tb, self.step)
    }
}

/// Which of a thread block's two connections an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConnectionKind {
    /// The `send` connection.
    Send,
    /// The `recv` connection.
    Recv,
}

impl ConnectionKind {
    /// What a step does on it: `sends` or `receives`.
    fn verb(self) -> &'static str {
        match self {
            ConnectionKind::Send => "sends",
            ConnectionKind::Recv => "receives",
        }
    }
}

/// Which chunks of a step an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The source chunks, which the step reads.
    Src,
    /// The destination chunks, which the step writes.
    Dst,
}

impl Side {
    /// What a step does with them: `reads` or `writes`.
    fn verb(self) -> &'static str {
        match self {
            Side::Src => "reads",
            Side::Dst => "writes",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Src => "src",
            Side::Dst => "dst",
        })
    }
}

/// A buffer as errors name it, with the `<gpu>` attribute that sizes it.
fn buffer_text(buffer: Buffer) -> &'static str {
    match buffer {
        Buffer::Input => "input buffer (i_chunks)",
        Buffer::Output => "output buffer (o_chunks)",
        Buffer::Scratch => "scratch buffer (s_chunks)",
    }
}

impl fmt::Display for ConnectionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConnectionKind::Send => "send",
            ConnectionKind::Recv => "recv",
        })
    }
}

/// A step of a deadlock cycle with its kind, printed as `rank 0 tb 1 step 2 (r)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WaitingStep {
    /// Where it is.
    pub at: StepAt,
    /// What it does.
    pub kind: StepKind,
}

impl fmt::Display for WaitingStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.at, self.kind)
    }
}

/// Why a program cannot run. Each of these is the program's fault; each names the rank, thread block
/// and step concerned and says what would be valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProgramError {
    /// A thread block's `send` or `recv` peer is its own rank or not a rank of the program.
    #[error(
        "rank {rank} tb {tb}: {connection} peer {peer} is not another rank: expected a rank in 0..{ranks} other than {rank}"
    )]
    BadPeer {
        /// The rank.
        rank: usize,
        /// The thread block.
        tb: usize,
        /// Which connection.
        connection: ConnectionKind,
        /// The peer given.
        peer: usize,
        /// The program's ranks.
        ranks: usize,
    },
    /// A rank's input or output buffer has more chunks than the program cuts the larger of the two into
    /// ([`Program::chunks`]), so its last chunks would lie past the end of the user's buffer.
    #[error(
        "rank {rank}'s {} has {buffer_chunks} chunks, more than the program's {chunks} (nchunksperloop): expected at most {chunks}",
        buffer_text(*buffer)
    )]
    BufferTooLarge {
        /// The rank.
        rank: usize,
        /// [`Buffer::Input`] or [`Buffer::Output`].
        buffer: Buffer,
        /// Its chunks.
        buffer_chunks: usize,
        /// [`Program::chunks`].
        chunks: usize,
    },
    /// A thread block's channel is not below the program's channel count.
    #[error(
        "rank {rank} tb {tb}: channel {channel} is out of range: the program has {channels} channels, 0..{channels}"
    )]
    ChannelOutOfRange {
        /// The rank.
        rank: usize,
        /// The thread block.
        tb: usize,
        /// Its channel.
        channel: usize,
        /// [`Program::channels`].
        channels: usize,
    },
    /// Two thread blocks of one rank use the same connection (peer and channel in one direction), so
    /// their messages would interleave unpredictably.
    #[error(
        "rank {rank}: tb {first} and tb {second} both {connection} with peer {peer} on channel {channel}: each (peer, channel) may have one {connection} thread block per rank"
    )]
    SharedConnection {
        /// The rank.
        rank: usize,
        /// The lower thread block id.
        first: usize,
        /// The other thread block.
        second: usize,
        /// Which connection.
        connection: ConnectionKind,
        /// The peer.
        peer: usize,
        /// The channel.
        channel: usize,
    },
    /// A step that sends or receives on a thread block without that connection.
    #[error("{at}: step type `{kind}` {} but its thread block has no {connection} peer", connection.verb())]
    NoPeer {
        /// The step.
        at: StepAt,
        /// Its kind.
        kind: StepKind,
        /// The connection it needs.
        connection: ConnectionKind,
    },
    /// A step of a kind that reads its source (or writes its destination) is given none.
    #[error("{at}: step type `{kind}` {} its {side} chunks, but the step has no {side}", side.verb())]
    MissingChunks {
        /// The step.
        at: StepAt,
        /// Its kind.
        kind: StepKind,
        /// Which chunks.
        side: Side,
    },
    /// A step's chunks run past the end of the rank's buffer (`index + count > chunks`), a check the
    /// real readers leave out.
    #[error(
        "{at}: {side} chunks {index}..{end} are out of range: rank {rank}'s {} has {chunks} chunks, 0..{chunks}",
        buffer_text(*buffer),
        end = *index as u128 + *count as u128,
        rank = at.rank
    )]
    ChunksOutOfRange {
        /// The step.
        at: StepAt,
        /// Which chunks.
        side: Side,
        /// The buffer.
        buffer: Buffer,
        /// The first chunk.
        index: usize,
        /// The step's count.
        count: usize,
        /// The chunks that buffer of this rank has.
        chunks: usize,
    },
    /// A step depends on a thread block or step that does not exist, or on its own thread block
    /// (whose earlier steps it follows anyway and whose later steps it would wait for forever).
    #[error("{at}: it depends on tb {on_tb} step {on_step}, which {why}")]
    BadDependency {
        /// The step.
        at: StepAt,
        /// The thread block it depends on.
        on_tb: usize,
        /// The step it depends on.
        on_step: usize,
        /// What is wrong, with what would be valid.
        why: String,
    },
    /// A step waits for a step that is not published (`has_dependents == false`) and neither is any
    /// later step of its thread block, so the executor's flag never reaches it.
    #[error(
        "{at}: it waits for rank {rank} tb {on_tb} step {on_step}, which does not publish its completion (hasdep=0) and no later step of tb {on_tb} does: the wait never ends; set has_dependents on that step",
        rank = at.rank
    )]
    UnpublishedDependency {
        /// The waiting step.
        at: StepAt,
        /// The thread block it waits for.
        on_tb: usize,
        /// The step it waits for.
        on_step: usize,
    },
    /// A run of `nop`s is not followed by a real step with its own dependency; the executor folds a
    /// nop's dependency into the next real step and refuses the file otherwise.
    #[error(
        "{at}: this nop is not followed by a step with its own dependency: nops carry extra dependencies of the next non-nop step, which must itself depend on something"
    )]
    DanglingNop {
        /// The nop.
        at: StepAt,
    },
    /// A receive with no send to match it on its connection.
    #[error(
        "{at}: it receives message {message} on the connection rank {from} -> rank {to} channel {channel}, but rank {from} sends only {sent} on it",
        to = at.rank
    )]
    UnmatchedReceive {
        /// The receiving step.
        at: StepAt,
        /// The sender rank.
        from: usize,
        /// The channel.
        channel: usize,
        /// Its position among the connection's messages (0-based).
        message: usize,
        /// How many messages the sender sends on the connection.
        sent: usize,
    },
    /// A send that no step receives.
    #[error(
        "{at}: it sends message {message} on the connection rank {from} -> rank {to} channel {channel}, but rank {to} receives only {received} on it",
        from = at.rank
    )]
    UnmatchedSend {
        /// The sending step.
        at: StepAt,
        /// The receiver rank.
        to: usize,
        /// The channel.
        channel: usize,
        /// Its position among the connection's messages (0-based).
        message: usize,
        /// How many messages the receiver receives on the connection.
        received: usize,
    },
    /// A send and the receive it pairs with move different numbers of chunks.
    #[error(
        "{send} sends {send_count} chunks but {recv}, which receives that message (message {message} of rank {} -> rank {} channel {channel}), expects {recv_count}: paired steps must have the same count",
        send.rank,
        recv.rank
    )]
    CountMismatch {
        /// The sending step.
        send: StepAt,
        /// Its count.
        send_count: usize,
        /// The receiving step.
        recv: StepAt,
        /// Its count.
        recv_count: usize,
        /// The channel.
        channel: usize,
        /// The message's position on the connection (0-based).
        message: usize,
    },
    /// The steps wait on each other in a cycle (through program order, dependencies and messages), so
    /// none of them can ever run. The cycle starts at its lowest step.
    #[error("deadlock: the steps wait on each other in a cycle: {}", cycle_text(cycle))]
    Deadlock {
        /// The steps, each waiting for the next and the last for the first.
        cycle: Vec<WaitingStep>,
    },
}

fn cycle_text(cycle: &[WaitingStep]) -> String {
    let mut text = String::new();
    for (i, step) in cycle.iter().chain(cycle.first()).enumerate() {
        match i {
            0 => text += &step.to_string(),
            1 => text += &format!(" waits for {step}"),
            _ => text += &format!(", which waits for {step}"),
        }
    }
    text
}

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

/// Every step of a program numbered densely, rank by rank, thread block by thread block, so the
/// dependency graph can be held in flat vectors.
struct Steps {
    /// Per rank, per thread block, the number of its first step.
    first: Vec<Vec<usize>>,
    /// Per number, where the step is.
    at: Vec<StepAt>,
}

impl Steps {
    fn new(program: &Program) -> Steps {
        let mut first = Vec::with_capacity(program.ranks.len());
        let mut at = Vec::new();
        for (rank, rank_program) in program.ranks.iter().enumerate() {
            let mut firsts = Vec::with_capacity(rank_program.thread_blocks.len());
            for (tb, block) in rank_program.thread_blocks.iter().enumerate() {
                firsts.push(at.len());
                at.extend((0..block.steps.len()).map(|step| StepAt { rank, tb, step }));
            }
            first.push(firsts);
        }
        Steps { first, at }
    }

    fn number(&self, rank: usize, tb: usize, step: usize) -> usize {
        self.first[rank][tb] + step
    }

    fn step<'p>(&self, program: &'p Program, number: usize) -> &'p Step {
        let at = self.at[number];
        &program.ranks[at.rank].thread_blocks[at.tb].steps[at.step]
    }
}

/// Pairs the k-th send of each connection (sender, receiver, channel) with its k-th receive and
/// returns, per step number, the number of the send a receiving step takes its message from.
fn pair_messages(program: &Program, steps: &Steps) -> Result<Vec<Option<usize>>, ProgramError> {
    // Keyed by (sender, receiver, channel); check_ranks made each side at most one tb.
    let mut sends: BTreeMap<(usize, usize, usize), Vec<usize>> = BTreeMap::new();
    let mut receives: BTreeMap<(usize, usize, usize), Vec<usize>> = BTreeMap::new();
    for (rank, rank_program) in program.ranks.iter().enumerate() {
        for (tb, block) in rank_program.thread_blocks.iter().enumerate() {
            let positions = |wanted: fn(StepKind) -> bool| {
                let kept = block.steps.iter().enumerate().filter(|(_, step)| wanted(step.kind));
                kept.map(|(step, _)| steps.number(rank, tb, step)).collect()
            };
            if let Some(peer) = block.send {
                sends.insert((rank, peer, block.channel), positions(StepKind::sends));
            }
            if let Some(peer) = block.recv {
                receives.insert((peer, rank, block.channel), positions(StepKind::receives));
            }
        }
    }
    let mut sent_by = vec![None; steps.at.len()];
    let none = Vec::new();
    let keys: std::collections::BTreeSet<_> = sends.keys().chain(receives.keys()).copied().collect();
    for key @ (from, to, channel) in keys {
        let (sent, received) = (sends.get(&key).unwrap_or(&none), receives.get(&key).unwrap_or(&none));
        for (message, (&send, &recv)) in sent.iter().zip(received).enumerate() {
            let (send_count, recv_count) = (steps.step(program, send).count, steps.step(program, recv).count);
            if send_count != recv_count {
                return Err(ProgramError::CountMismatch {
                    send: steps.at[send],
                    send_count,
                    recv: steps.at[recv],
                    recv_count,
                    channel,
                    message,
                });
            }
            sent_by[recv] = Some(send);
        }
        let (n_sent, n_received) = (sent.len(), received.len());
        if n_received > n_sent {
            let at = steps.at[received[n_sent]];
            return Err(ProgramError::UnmatchedReceive { at, from, channel, message: n_sent, sent: n_sent });
        }
        if n_sent > n_received {
            let at = steps.at[sent[n_received]];
            return Err(ProgramError::UnmatchedSend { at, to, channel, message: n_received, received: n_received });
        }
    }
    Ok(sent_by)
}

/// Looks for a cycle in the graph whose edges go from each step to what it waits for: the previous
/// step of its thread block, the first published step at or after its dependency (the executor's
/// flag is monotonic, so that is what ends the wait) and the send of the message it receives. Depth
/// first from the lowest step, so the cycle reported is always the same; O(steps).
fn find_cycle(program: &Program, steps: &Steps, sent_by: &[Option<usize>]) -> Result<(), ProgramError> {
    let total = steps.at.len();
    // Per step, the first step at or after it in its thread block that publishes its completion.
    let mut published_from = vec![None; total];
    for (rank, rank_program) in program.ranks.iter().enumerate() {
        for (tb, block) in rank_program.thread_blocks.iter().enumerate() {
            let mut next = None;
            for (step, content) in block.steps.iter().enumerate().rev() {
                let number = steps.number(rank, tb, step);
                if content.has_dependents {
                    next = Some(number);
                }
                published_from[number] = next;
            }
        }
    }
    let waits_for = |number: usize| -> [Option<usize>; 3] {
        let at = steps.at[number];
        let previous = (at.step > 0).then(|| number - 1);
        let dependency = steps
            .step(program, number)
            .depends_on
            .and_then(|(tb, step)| published_from[steps.number(at.rank, tb, step)]);
        [previous, dependency, sent_by[number]]
    };

    #[derive(Clone, Copy, PartialEq)]
    enum Visit {
        New,
        OnPath,
        Done,
    }
    let mut visit = vec![Visit::New; total];
    let mut path: Vec<(usize, usize)> = Vec::new();
    for start in 0..total {
        if visit[start] != Visit::New {
            continue;
        }
        visit[start] = Visit::OnPath;
        path.push((start, 0));
        while let Some(&mut (node, ref mut edge)) = path.last_mut() {
            let targets = waits_for(node);
            let Some(&target) = targets.get(*edge) else {
                visit[node] = Visit::Done;
                path.pop();
                continue;
            };
            *edge += 1;
            let Some(target) = target else { continue };
            match visit[target] {
                Visit::New => {
                    visit[target] = Visit::OnPath;
                    path.push((target, 0));
                }
                Visit::OnPath => {
                    let from = path.iter().position(|&(n, _)| n == target).expect("a node on the path is in it");
                    let mut cycle: Vec<usize> = path[from..].iter().map(|&(n, _)| n).collect();
                    let lowest = (0..cycle.len()).min_by_key(|&i| cycle[i]).expect("a cycle has a node");
                    cycle.rotate_left(lowest);
                    let cycle = cycle
                        .into_iter()
                        .map(|n| WaitingStep { at: steps.at[n], kind: steps.step(program, n).kind })
                        .collect();
                    return Err(ProgramError::Deadlock { cycle });
                }
                Visit::Done => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::program::{ChunkRef, Protocol, RankProgram, ThreadBlock, msccl};

    const RING_ALLREDUCE: &str = include_str!("../../../tests/fixtures/msccl/ring_allreduce.xml");
    const ALLTOALL_SCRATCH: &str = include_str!("../../../tests/fixtures/msccl/alltoall_scratch.xml");
    const TWO_RING_ALLREDUCE: &str = include_str!("../../../tests/fixtures/msccl/two_ring_allreduce.xml");

    fn fixture(text: &str) -> Program {
        msccl::from_xml_str(text).unwrap_or_else(|error| panic!("{error}"))
    }

    fn at(rank: usize, tb: usize, step: usize) -> StepAt {
        StepAt { rank, tb, step }
    }

    /// The error `check` gives for `program` after `edit`, with the parts its message must mention.
    fn error_after(mut program: Program, edit: impl FnOnce(&mut Program), parts: &[&str]) -> ProgramError {
        edit(&mut program);
        let error = check(&program).expect_err("the edited program should be refused");
        let message = error.to_string();
        for part in parts {
            assert!(message.contains(part), "`{message}` does not mention `{part}`");
        }
        error
    }

    fn step(kind: StepKind, src: Option<usize>, dst: Option<usize>) -> Step {
        let chunk = |index: Option<usize>| index.map(|index| ChunkRef { buffer: Buffer::Input, index });
        Step { kind, src: chunk(src), dst: chunk(dst), count: 1, depends_on: None, has_dependents: false }
    }

    /// Two ranks, one thread block each, connected both ways, with the given steps.
    fn pair(rank_0: Vec<Step>, rank_1: Vec<Step>) -> Program {
        let rank = |peer, steps| RankProgram {
            input_chunks: 2,
            output_chunks: 0,
            scratch_chunks: 0,
            thread_blocks: vec![ThreadBlock { send: Some(peer), recv: Some(peer), channel: 0, steps }],
        };
        Program {
            name: "pair".into(),
            collective: Collective::AllReduce,
            in_place: true,
            protocol: Protocol::Simple,
            chunks: 2,
            channels: 1,
            ranks: vec![rank(1, rank_0), rank(0, rank_1)],
        }
    }

    #[test]
    fn buffer_larger_than_the_program_cuts() {
        let error = error_after(
            fixture(RING_ALLREDUCE),
            |p| p.ranks[3].output_chunks = 5,
            &["rank 3's output buffer (o_chunks) has 5 chunks, more than the program's 4 (nchunksperloop)"],
        );
        assert_eq!(
            error,
            ProgramError::BufferTooLarge { rank: 3, buffer: Buffer::Output, buffer_chunks: 5, chunks: 4 }
        );
        let mut program = fixture(ALLTOALL_SCRATCH);
        program.ranks[0].scratch_chunks = 10;
        assert_eq!(check(&program), Ok(()), "scratch is the program's own, of any size");
    }

    #[test]
    fn channel_out_of_range() {
        let error = error_after(
            fixture(TWO_RING_ALLREDUCE),
            |p| p.ranks[2].thread_blocks[1].channel = 2,
            &["rank 2 tb 1", "channel 2", "2 channels, 0..2"],
        );
        assert!(matches!(error, ProgramError::ChannelOutOfRange { .. }));
    }

    #[test]
    fn shared_connection() {
        // Give rank 0's tb 1 (which sends to 2 on channel 1) tb 0's send connection.
        let error = error_after(
            fixture(TWO_RING_ALLREDUCE),
            |p| {
                let tb = &mut p.ranks[0].thread_blocks[1];
                (tb.send, tb.recv, tb.channel) = (Some(1), None, 0);
            },
            &["rank 0: tb 0 and tb 1 both send with peer 1 on channel 0", "one send thread block"],
        );
        assert_eq!(
            error,
            ProgramError::SharedConnection {
                rank: 0,
                first: 0,
                second: 1,
                connection: ConnectionKind::Send,
                peer: 1,
                channel: 0
            }
        );
    }

    #[test]
    fn missing_chunks() {
        let error = error_after(
            fixture(RING_ALLREDUCE),
            |p| p.ranks[1].thread_blocks[0].steps[3].dst = None,
            &["rank 1 tb 0 step 3", "`rrcs` writes its dst chunks", "has no dst"],
        );
        assert!(matches!(error, ProgramError::MissingChunks { side: Side::Dst, .. }));
        // In XML: a reading step with srcoff="-1".
        let xml = RING_ALLREDUCE.replacen(r#"type="s" srcbuf="i" srcoff="3""#, r#"type="s" srcbuf="i" srcoff="-1""#, 1);
        let error = msccl::from_xml_str(&xml).unwrap_err();
        assert!(error.to_string().contains("rank 0 tb 0 step 0: step type `s` reads its src chunks"), "{error}");
    }

    #[test]
    fn chunks_out_of_range_counts_the_end() {
        // Chunk 3 exists, but 3..5 runs past the 4 chunks: the check real readers leave out.
        let xml = RING_ALLREDUCE.replacen(r#"dstbuf="o" dstoff="1" cnt="1""#, r#"dstbuf="o" dstoff="3" cnt="2""#, 1);
        let error = msccl::from_xml_str(&xml).unwrap_err();
        assert_eq!(
            error,
            msccl::MscclError::Program(ProgramError::ChunksOutOfRange {
                at: at(0, 0, 6),
                side: Side::Dst,
                buffer: Buffer::Output,
                index: 3,
                count: 2,
                chunks: 4
            })
        );
        assert!(error.to_string().contains(
            "rank 0 tb 0 step 6: dst chunks 3..5 are out of range: rank 0's output buffer (o_chunks) has 4 chunks, 0..4"
        ));
    }

    #[test]
    fn bad_dependencies() {
        let program = fixture(ALLTOALL_SCRATCH);
        let dep = |tb, step| move |p: &mut Program| p.ranks[1].thread_blocks[2].steps[1].depends_on = Some((tb, step));
        let error =
            error_after(program.clone(), dep(3, 0), &["rank 1 tb 2 step 1", "tb 3 step 0", "thread blocks 0..3"]);
        assert!(matches!(error, ProgramError::BadDependency { on_tb: 3, .. }));
        error_after(program.clone(), dep(0, 2), &["rank 1 tb 2 step 1", "tb 0 step 2", "tb 0 has steps 0..2"]);
        error_after(program, dep(2, 0), &["tb 2 step 0", "its own thread block"]);
    }

    #[test]
    fn a_dependency_nothing_publishes_never_ends() {
        let xml = ALLTOALL_SCRATCH.replacen(
            r#"dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1""#,
            r#"dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0""#,
            1,
        );
        let error = msccl::from_xml_str(&xml).unwrap_err();
        assert_eq!(
            error,
            msccl::MscclError::Program(ProgramError::UnpublishedDependency { at: at(0, 2, 1), on_tb: 0, on_step: 1 })
        );
        assert!(error.to_string().contains("waits for rank 0 tb 0 step 1, which does not publish"), "{error}");
        // A later published step of the same thread block ends the wait: not an error.
        let mut program = fixture(ALLTOALL_SCRATCH);
        program.ranks[0].thread_blocks[0].steps[0].has_dependents = false;
        program.ranks[0].thread_blocks[2].steps[1].depends_on = Some((0, 0));
        assert_eq!(check(&program), Ok(()));
    }

    #[test]
    fn dangling_nop() {
        let program = fixture(TWO_RING_ALLREDUCE);
        let error = error_after(
            program.clone(),
            |p| p.ranks[1].thread_blocks[2].steps[1].depends_on = None,
            &["rank 1 tb 2 step 0", "nop is not followed by a step with its own dependency"],
        );
        assert_eq!(error, ProgramError::DanglingNop { at: at(1, 2, 0) });
        error_after(
            program,
            |p| p.ranks[2].thread_blocks[2].steps.push(step(StepKind::Nop, None, None)),
            &["rank 2 tb 2 step 3", "nop"],
        );
    }

    #[test]
    fn unmatched_receive_and_send() {
        let error = error_after(
            fixture(RING_ALLREDUCE),
            |p| p.ranks[0].thread_blocks[0].steps[5].kind = StepKind::Recv,
            &["rank 1 tb 0 step 6", "receives message 5 on the connection rank 0 -> rank 1 channel 0", "sends only 5"],
        );
        assert_eq!(error, ProgramError::UnmatchedReceive { at: at(1, 0, 6), from: 0, channel: 0, message: 5, sent: 5 });
        let error = error_after(
            fixture(RING_ALLREDUCE),
            |p| p.ranks[0].thread_blocks[0].steps[6].kind = StepKind::RecvCopySend,
            &["rank 0 tb 0 step 6", "sends message 6 on the connection rank 0 -> rank 1 channel 0", "receives only 6"],
        );
        assert!(matches!(error, ProgramError::UnmatchedSend { to: 1, .. }));
    }

    #[test]
    fn paired_counts_differ() {
        let error = error_after(
            fixture(ALLTOALL_SCRATCH),
            |p| p.ranks[2].thread_blocks[0].steps[1].count = 2,
            &[
                "rank 1 tb 0 step 0 sends 1 chunks but rank 2 tb 0 step 1",
                "expects 2",
                "message 0 of rank 1 -> rank 2 channel 0",
            ],
        );
        assert!(matches!(error, ProgramError::CountMismatch { send_count: 1, recv_count: 2, .. }));
    }

    #[test]
    fn receiving_before_sending_both_ways_deadlocks() {
        let program = pair(
            vec![step(StepKind::Recv, None, Some(1)), step(StepKind::Send, Some(0), None)],
            vec![step(StepKind::Recv, None, Some(0)), step(StepKind::Send, Some(1), None)],
        );
        let error = check(&program).unwrap_err();
        let cycle = |rank, step, kind| WaitingStep { at: at(rank, 0, step), kind };
        assert_eq!(
            error,
            ProgramError::Deadlock {
                cycle: vec![
                    cycle(0, 0, StepKind::Recv),
                    cycle(1, 1, StepKind::Send),
                    cycle(1, 0, StepKind::Recv),
                    cycle(0, 1, StepKind::Send),
                ]
            }
        );
        assert_eq!(
            error.to_string(),
            "deadlock: the steps wait on each other in a cycle: rank 0 tb 0 step 0 (r) waits for rank 1 tb 0 step 1 (s), \
             which waits for rank 1 tb 0 step 0 (r), which waits for rank 0 tb 0 step 1 (s), which waits for rank 0 tb 0 step 0 (r)"
        );
        // Sending first on one side breaks the cycle.
        let program = pair(
            vec![step(StepKind::Send, Some(0), None), step(StepKind::Recv, None, Some(1))],
            vec![step(StepKind::Recv, None, Some(0)), step(StepKind::Send, Some(1), None)],
        );
        assert_eq!(check(&program), Ok(()));
    }

    #[test]
    fn a_dependency_cycle_between_thread_blocks_deadlocks() {
        // Rank 0's local tb waits for tb 0's receive, and tb 0's first send waits for the local tb:
        // tb 0 step 0 -> tb 2 step 2 -> tb 2 step 1 -> (dependency) tb 0 step 1 -> tb 0 step 0.
        let mut program = fixture(ALLTOALL_SCRATCH);
        program.ranks[0].thread_blocks[2].steps[2].has_dependents = true;
        program.ranks[0].thread_blocks[0].steps[0].depends_on = Some((2, 2));
        let error = check(&program).unwrap_err();
        assert!(matches!(error, ProgramError::Deadlock { .. }), "{error:?}");
        let message = error.to_string();
        assert!(
            message.starts_with(
                "deadlock: the steps wait on each other in a cycle: rank 0 tb 0 step 0 (s) waits for rank 0 tb 2 step 2 (cpy), which waits for rank 0 tb 2 step 1 (cpy)"
            ),
            "{message}"
        );
        assert!(message.ends_with("which waits for rank 0 tb 0 step 0 (s)"), "{message}");
    }
}

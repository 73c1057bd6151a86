//! What a program that cannot run is found to do wrong, named by rank, thread block and step.

use std::fmt;

use crate::kernel::Buffer;
use crate::program::StepKind;

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
    /// ([`Program::chunks`](crate::program::Program::chunks)), so its last chunks would lie past the end of the user's buffer.
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
        /// [`Program::chunks`](crate::program::Program::chunks).
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
        /// [`Program::channels`](crate::program::Program::channels).
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

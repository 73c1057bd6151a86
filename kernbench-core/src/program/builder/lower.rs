//! Lowering the recorded copies and reduces to MSCCL steps: per rank, the instructions in program
//! order, receives fused with the sends that forward them, and the steps placed in thread blocks with
//! their dependencies (see the [builder's docs](super)).

use std::collections::{BTreeMap, HashMap};

use super::{BuildError, OpKind, ProgramBuilder};
use crate::collective::Collective;
use crate::kernel::Buffer;
use crate::program::check::check;
use crate::program::{ChunkRef, Program, RankProgram, Step, StepKind, ThreadBlock};

impl ProgramBuilder {
    /// Lowers the operations to a [`Program`] (see the [module docs](super)) and checks it.
    ///
    /// # Errors
    /// [`BuildError::Check`] if the program does not pass [`check`] (a deadlock, say).
    pub fn build(&self) -> Result<Program, BuildError> {
        let ranks = (0..self.ranks).map(|rank| self.lower_rank(rank)).collect();
        let channels = self.ops.iter().map(|op| op.channel + 1).max().unwrap_or(1);
        let program = Program {
            name: self.name.clone(),
            collective: self.collective,
            in_place: self.in_place,
            protocol: self.protocol,
            chunks: self.chunks,
            channels,
            ranks,
        };
        check(&program).map_err(|error| BuildError::Check { name: self.name.clone(), error })?;
        Ok(program)
    }

    /// Whether a chunk's value at the end is part of the result.
    fn observable(&self, buffer: Buffer) -> bool {
        buffer == Buffer::Output || (self.in_place && buffer == Buffer::Input)
    }

    fn lower_rank(&self, rank: usize) -> RankProgram {
        let mut insts = self.instructions(rank);
        let mut conns = Connections::default();
        self.fuse(&mut insts, &mut conns);
        let thread_blocks = Emitter::emit(&insts, &mut conns);
        let scratch_chunks = insts
            .iter()
            .filter_map(|inst| inst.dst.filter(|d| d.buffer == Buffer::Scratch).map(|d| d.index + inst.count))
            .max()
            .unwrap_or(0);
        let folded = |buffer: Buffer| {
            let aliased = match self.collective {
                Collective::AllGather => buffer == Buffer::Input,
                _ => buffer == Buffer::Output,
            };
            if self.in_place && aliased { 0 } else { self.size(buffer) }
        };
        RankProgram {
            input_chunks: folded(Buffer::Input),
            output_chunks: folded(Buffer::Output),
            scratch_chunks,
            thread_blocks,
        }
    }

    /// The rank's part of each operation, in program order.
    fn instructions(&self, rank: usize) -> Vec<Inst> {
        let mut insts = Vec::new();
        for op in &self.ops {
            let base = Inst {
                kind: StepKind::Nop,
                src: None,
                dst: None,
                count: op.count,
                send: None,
                recv: None,
                channel: op.channel,
            };
            let local = op.src_rank == op.dst_rank;
            if local && op.src_rank == rank {
                let kind = if op.kind == OpKind::Copy { StepKind::Copy } else { StepKind::Reduce };
                insts.push(Inst { kind, src: Some(op.src), dst: Some(op.dst), ..base });
            } else if op.src_rank == rank && !local {
                insts.push(Inst { kind: StepKind::Send, src: Some(op.src), send: Some(op.dst_rank), ..base });
            } else if op.dst_rank == rank && !local {
                let (kind, src) = match op.kind {
                    OpKind::Copy => (StepKind::Recv, None),
                    OpKind::Reduce => (StepKind::RecvReduceCopy, Some(op.dst)),
                };
                insts.push(Inst { kind, src, dst: Some(op.dst), recv: Some(op.src_rank), ..base });
            }
        }
        insts
    }

    /// Fuses each receive with the send that forwards what it stored, where that keeps the program's
    /// meaning, each connection FIFO and each thread block to one send and one receive peer.
    fn fuse(&self, insts: &mut Vec<Inst>, conns: &mut Connections) {
        let mut i = 0;
        while i < insts.len() {
            let fusable = matches!(insts[i].kind, StepKind::Recv | StepKind::RecvReduceCopy);
            let Some((j, after)) = fusable.then(|| forwarding_send(insts, i)).flatten() else {
                i += 1;
                continue;
            };
            let send = Conn::Send(insts[j].send.expect("a send has a peer"), insts[j].channel);
            let recv = Conn::Recv(insts[i].recv.expect("a receive has a peer"), insts[i].channel);
            if !conns.join(send, recv) {
                i += 1;
                continue;
            }
            let dst = insts[i].dst.expect("a receive writes");
            let dead = !(0..insts[i].count).any(|c| {
                let chunk = ChunkRef { buffer: dst.buffer, index: dst.index + c };
                self.live_after(insts, i, j, chunk)
            });
            let mut fused = insts[i];
            fused.send = insts[j].send;
            fused.kind = match fused.kind {
                StepKind::Recv => StepKind::RecvCopySend,
                _ if dead => StepKind::RecvReduceSend,
                _ => StepKind::RecvReduceCopySend,
            };
            if fused.kind == StepKind::RecvReduceSend {
                fused.dst = None;
            }
            // The fused step takes the place right after `after`: the receive moves later past steps
            // of other connections, the send earlier; `i` then holds the next step to look at, or the
            // fused one, which fuses no further.
            insts.remove(j);
            insts.insert(after + 1, fused);
            insts.remove(i);
        }
    }

    /// Whether the value instruction `i` stores in `chunk` is read after it, other than by the send
    /// `j` fused into it: by an instruction before one that only overwrites it, or as the result.
    fn live_after(&self, insts: &[Inst], i: usize, j: usize, chunk: ChunkRef) -> bool {
        for (k, inst) in insts.iter().enumerate().skip(i + 1) {
            if k == j {
                continue;
            }
            if inst.reads(chunk) {
                return true;
            }
            if inst.writes(chunk) {
                return false;
            }
        }
        self.observable(chunk.buffer)
    }
}

/// The send that forwards what receive `i` stored, and the step after which the fused step can go:
/// the next send of exactly its chunks on its channel, with nothing overwriting them in between, and
/// a place where the receive, moved later, passes no receive of its connection and no read of its
/// chunks, and the send, moved earlier, passes no send of its connection.
fn forwarding_send(insts: &[Inst], i: usize) -> Option<(usize, usize)> {
    let recv = &insts[i];
    let dst = recv.dst?;
    let chunks = || (0..recv.count).map(|c| ChunkRef { buffer: dst.buffer, index: dst.index + c });
    let forwards = |inst: &Inst| inst.kind == StepKind::Send && inst.src == Some(dst) && inst.count == recv.count;
    // Another send of these chunks, or a write to them, ends the search: what follows no longer
    // forwards exactly what was received.
    let stops = |inst: &Inst| chunks().any(|c| inst.writes(c) || (inst.kind == StepKind::Send && inst.reads(c)));
    let j = i + 1 + insts[i + 1..].iter().position(|inst| forwards(inst) || stops(inst))?;
    let send = &insts[j];
    if !forwards(send) || send.channel != recv.channel {
        return None;
    }
    let between = || insts.iter().enumerate().take(j).skip(i + 1);
    let after = between().rev().find(|(_, inst)| (inst.send, inst.channel) == (send.send, send.channel));
    let blocker = between()
        .find(|(_, inst)| (inst.recv, inst.channel) == (recv.recv, recv.channel) || chunks().any(|c| inst.reads(c)));
    let after = after.map_or(i, |(k, _)| k);
    blocker.is_none_or(|(b, _)| after < b).then_some((j, after))
}

/// One step of a rank before it is placed in a thread block.
#[derive(Clone, Copy, Debug)]
struct Inst {
    kind: StepKind,
    src: Option<ChunkRef>,
    dst: Option<ChunkRef>,
    count: usize,
    send: Option<usize>,
    recv: Option<usize>,
    channel: usize,
}

impl Inst {
    /// Whether it reads chunk `c`.
    fn reads(&self, c: ChunkRef) -> bool {
        let covers = |r: Option<ChunkRef>| {
            r.is_some_and(|r| r.buffer == c.buffer && (r.index..r.index + self.count).contains(&c.index))
        };
        (self.kind.reads_src() && covers(self.src)) || (self.kind == StepKind::Reduce && covers(self.dst))
    }

    /// Whether it writes chunk `c`.
    fn writes(&self, c: ChunkRef) -> bool {
        let covers = |r: Option<ChunkRef>| {
            r.is_some_and(|r| r.buffer == c.buffer && (r.index..r.index + self.count).contains(&c.index))
        };
        self.kind.writes_dst() && covers(self.dst)
    }
}

/// One end of a rank's connection, or its local work on a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Conn {
    Send(usize, usize),
    Recv(usize, usize),
    Local(usize),
}

/// Which connections share a thread block: a union-find whose sets hold at most one send and one
/// receive connection each.
#[derive(Debug, Default)]
struct Connections {
    parent: BTreeMap<Conn, Conn>,
}

impl Connections {
    fn root(&mut self, conn: Conn) -> Conn {
        let parent = *self.parent.entry(conn).or_insert(conn);
        if parent == conn {
            return conn;
        }
        let root = self.root(parent);
        self.parent.insert(conn, root);
        root
    }

    /// The connections in `conn`'s set.
    fn members(&mut self, conn: Conn) -> Vec<Conn> {
        let root = self.root(conn);
        let keys: Vec<Conn> = self.parent.keys().copied().collect();
        keys.into_iter().filter(|&k| self.root(k) == root).collect()
    }

    /// Puts `send` and `recv` in one thread block if neither already shares one with another
    /// connection of its own direction; whether they now share one.
    fn join(&mut self, send: Conn, recv: Conn) -> bool {
        let (a, b) = (self.root(send), self.root(recv));
        if a == b {
            return true;
        }
        let has_recv = self.members(send).iter().any(|c| matches!(c, Conn::Recv(..)));
        let has_send = self.members(recv).iter().any(|c| matches!(c, Conn::Send(..)));
        if has_recv || has_send {
            return false;
        }
        self.parent.insert(a, b);
        true
    }
}

/// Places a rank's instructions in thread blocks, with their dependencies.
#[derive(Debug, Default)]
struct Emitter {
    blocks: Vec<ThreadBlock>,
    /// Per chunk: the step that wrote it last, and the steps that read it since.
    last_write: HashMap<ChunkRef, (usize, usize)>,
    reads: HashMap<ChunkRef, Vec<(usize, usize)>>,
}

impl Emitter {
    fn emit(insts: &[Inst], conns: &mut Connections) -> Vec<ThreadBlock> {
        // Thread blocks by (send, recv, channel), sorted as the MSCCL writer sorts them (-1 first).
        let mut keys = BTreeMap::new();
        let key_of = |inst: &Inst, conns: &mut Connections| {
            let conn = match (inst.send, inst.recv) {
                (Some(p), _) => Conn::Send(p, inst.channel),
                (None, Some(p)) => Conn::Recv(p, inst.channel),
                (None, None) => Conn::Local(inst.channel),
            };
            let members = conns.members(conn);
            let send = members.iter().find_map(|c| if let Conn::Send(p, _) = c { Some(*p) } else { None });
            let recv = members.iter().find_map(|c| if let Conn::Recv(p, _) = c { Some(*p) } else { None });
            (send.map_or(-1, |p| p as i64), recv.map_or(-1, |p| p as i64), inst.channel)
        };
        let placed: Vec<_> = insts.iter().map(|i| (*i, key_of(i, conns))).collect();
        for (_, key) in &placed {
            keys.insert(*key, ());
        }
        let ids: HashMap<_, usize> = keys.keys().enumerate().map(|(id, key)| (*key, id)).collect();
        let mut emitter = Emitter {
            blocks: keys
                .keys()
                .map(|&(send, recv, channel)| ThreadBlock {
                    send: usize::try_from(send).ok(),
                    recv: usize::try_from(recv).ok(),
                    channel,
                    steps: Vec::new(),
                })
                .collect(),
            ..Emitter::default()
        };
        for (inst, key) in placed {
            emitter.push(ids[&key], &inst);
        }
        emitter.blocks
    }

    fn push(&mut self, tb: usize, inst: &Inst) {
        let chunks = |r: Option<ChunkRef>| {
            r.into_iter().flat_map(move |r| {
                (r.index..r.index + inst.count).map(move |index| ChunkRef { buffer: r.buffer, index })
            })
        };
        let reads: Vec<ChunkRef> = if inst.kind.reads_src() { chunks(inst.src).collect() } else { Vec::new() };
        let reads: Vec<ChunkRef> =
            if inst.kind == StepKind::Reduce { reads.into_iter().chain(chunks(inst.dst)).collect() } else { reads };
        let writes: Vec<ChunkRef> = if inst.kind.writes_dst() { chunks(inst.dst).collect() } else { Vec::new() };
        // The last step of each other thread block this one must wait for.
        let mut deps: BTreeMap<usize, usize> = BTreeMap::new();
        let mut wait = |on: (usize, usize)| {
            if on.0 != tb {
                let step = deps.entry(on.0).or_insert(on.1);
                *step = (*step).max(on.1);
            }
        };
        for chunk in &reads {
            if let Some(&on) = self.last_write.get(chunk) {
                wait(on);
            }
        }
        for chunk in &writes {
            if let Some(&on) = self.last_write.get(chunk) {
                wait(on);
            }
            for &on in self.reads.get(chunk).into_iter().flatten() {
                wait(on);
            }
        }
        let deps: Vec<(usize, usize)> = deps.into_iter().collect();
        for &(on_tb, on_step) in &deps {
            self.blocks[on_tb].steps[on_step].has_dependents = true;
        }
        let steps = &mut self.blocks[tb].steps;
        if let Some((last, rest)) = deps.split_last() {
            for &dep in rest {
                steps.push(Step {
                    kind: StepKind::Nop,
                    src: None,
                    dst: None,
                    count: 0,
                    depends_on: Some(dep),
                    has_dependents: false,
                });
            }
            steps.push(Step {
                kind: inst.kind,
                src: inst.src,
                dst: inst.dst,
                count: inst.count,
                depends_on: Some(*last),
                has_dependents: false,
            });
        } else {
            steps.push(Step {
                kind: inst.kind,
                src: inst.src,
                dst: inst.dst,
                count: inst.count,
                depends_on: None,
                has_dependents: false,
            });
        }
        let at = (tb, steps.len() - 1);
        for chunk in reads {
            self.reads.entry(chunk).or_default().push(at);
        }
        for chunk in writes {
            self.last_write.insert(chunk, at);
            self.reads.remove(&chunk);
        }
    }
}

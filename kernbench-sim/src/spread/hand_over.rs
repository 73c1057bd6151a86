//! A round's hand-over between the processes of a spread run: what each process tells the others
//! after its polls, and what it does with what they told it.

use std::num::NonZeroU64;
use std::sync::atomic::Ordering;

use smallvec::SmallVec;

use kernbench_core::{KernelError, Tile};

use super::Spread;
use crate::error::RunError;
use crate::lanes::{Lanes, Tasks, Wait};
use crate::network::Network;
use crate::one_sided::{OneSidedRun, Outgoing};
use crate::timing::Transfer;
use crate::two_sided::queue::Side;
use crate::two_sided::slots::Message;
use crate::two_sided::{Arrival, BarrierKey, Crossing, TwoSided, wake_side};
use crate::wire::{Reader, Writer, read_tile, write_tile};

/// What a round's polls in this process came to: lanes woken, lanes finished, and the lowest failure.
pub(crate) type RoundPolls = (u64, u64, Option<(u32, RunError)>);

/// What the round loop learns from a round's hand-over.
pub(crate) struct RoundEnd {
    /// Lanes that finished this round, in every process.
    pub(crate) finished: usize,
    /// Every process's barrier arrivals.
    pub(crate) arrivals: Vec<Arrival>,
    /// Whether any process started one-sided operations this round.
    pub(crate) one_sided: bool,
}

/// What every process learnt from a round's hand-over.
#[derive(Default)]
pub(crate) struct RoundTotals {
    /// Lanes polled this round, in every process.
    pub(crate) polled: u64,
    /// Lanes that finished this round, in every process.
    pub(crate) finished: u64,
    /// The lowest failed task of the round and its process, with its error as it reads.
    pub(crate) failed: Option<(u32, usize, String)>,
    /// Every process's transfers; placing divided, the other processes' that concern this one.
    pub(crate) transfers: Vec<Transfer>,
    /// Every process's barrier arrivals.
    pub(crate) arrivals: Vec<Arrival>,
    /// Messages handed in: queue, position, message.
    pub(crate) messages: Vec<(u32, u64, Message)>,
    /// Credits handed back: queue, position, credit time.
    pub(crate) credits: Vec<(u32, u64, f64)>,
    /// Whether any process started one-sided operations this round.
    pub(crate) one_sided: bool,
    /// One-sided operations to this process's PEs: sender rank, place in its outbox, operation.
    pub(crate) ops: Vec<(u32, u64, Outgoing)>,
}

/// A get's reply for a lane of another process: its rank and lane, its data or error, when it arrives.
pub(crate) type Reply = (u32, u32, Result<Tile, KernelError>, f64);

/// A get's reply from another process: the lane, its data or its error as it read, when it arrives.
pub(crate) type ReplyIn = (u32, Result<Tile, String>, f64);

/// What this process hands over after a round.
pub(crate) struct RoundShare<'a> {
    pub(crate) polled: u64,
    pub(crate) finished: u64,
    pub(crate) failed: Option<(u32, String)>,
    pub(crate) transfers: &'a [Transfer],
    /// Placing divided, the network model that says which processes each transfer concerns: the
    /// transfers go to those alone, not to every process.
    pub(crate) divided: Option<&'a Network>,
    pub(crate) arrivals: &'a [Arrival],
    /// Messages taken out of their sender's replica, with their receiver's rank: queue, position.
    pub(crate) messages: Vec<(u32, u32, u64, Message)>,
    /// Credits returned, with their sender's rank: queue, position, credit time.
    pub(crate) credits: Vec<(u32, u32, u64, f64)>,
    /// Whether this process started one-sided operations this round.
    pub(crate) one_sided: bool,
    /// One-sided operations to PEs of other processes: sender rank, place in its outbox, operation.
    pub(crate) ops: Vec<(u32, u64, &'a Outgoing)>,
}

impl Spread<'_> {
    /// The hand-over after a round: sends this process's part (lanes woken, finished, its lowest
    /// failure, transfers, barrier arrivals, the messages and credits on queues to other processes, and
    /// one-sided operations to their PEs), takes in what the others sent, and fills `sent` with every
    /// process's transfers (placing divided, by `network`: adds those of the others' that concern
    /// this process). `None` when no process polled anything: the run is over (rule B).
    ///
    /// # Errors
    /// The round's lowest failure, in whichever process; an exchange that failed.
    pub(crate) fn hand_over(
        &mut self,
        (woken, finished, failure): RoundPolls,
        (lanes, two_sided, one_sided): (&mut Lanes<'_>, &mut TwoSided, &OneSidedRun),
        polled: &[u32],
        (sent, network): (&mut Vec<Transfer>, Option<&Network>),
        crossing: &[Crossing],
    ) -> Result<Option<RoundEnd>, RunError> {
        let divided = network.filter(|network| network.divided());
        let arrivals = two_sided.barriers.take_arrivals();
        let (mut messages, mut credits) = (Vec::new(), Vec::new());
        for c in crossing {
            let queue = &mut two_sided.queues[c.queue as usize];
            for position in c.positions.clone() {
                match c.side {
                    Side::Sender => {
                        let message = queue.take_message(position).expect("a published message is in its slot");
                        messages.push((c.queue, queue.receiver, position, message));
                    }
                    Side::Receiver => credits.push((c.queue, queue.sender, position, queue.credit_at(position))),
                }
            }
        }
        let told = failure.as_ref().map(|(task, e)| (*task, e.to_string()));
        let used = one_sided.used.load(Ordering::Relaxed);
        // One-sided operations to PEs of other processes go to their targets' processes; the rest,
        // and the effects on their own lanes, are delivered here after placement.
        let mut ops = Vec::new();
        for &rank in polled.iter().filter(|_| used) {
            // SAFETY: rule B: between rounds nothing writes the PEs' symmetric memory.
            let Some(memory) = (unsafe { one_sided.pes.get_ref(rank as usize) }) else { continue };
            let remote = memory.outbox.iter().enumerate().filter(|(_, out)| !lanes.tasks.holds(out.to));
            ops.extend(remote.map(|(i, out)| (rank, i as u64, out)));
        }
        let share = RoundShare {
            one_sided: used,
            ops,
            polled: woken,
            finished,
            failed: told,
            transfers: sent,
            divided,
            arrivals: &arrivals,
            messages,
            credits,
        };
        let mut totals = self.swap(share, &lanes.tasks)?;
        if let Some((task, process, message)) = totals.failed {
            return Err(match failure {
                Some((mine, error)) if mine == task => error,
                _ => RunError::Elsewhere { process, message },
            });
        }
        if totals.polled == 0 {
            return Ok(None);
        }
        for (q, position, message) in totals.messages {
            two_sided.queues[q as usize].hand_in(position, message);
            // SAFETY: rule B.
            unsafe { wake_side((two_sided, lanes), q, Side::Receiver, Wait::Recv(q), |task| lanes.ready.push(task)) };
        }
        for (q, position, credit_at) in totals.credits {
            two_sided.queues[q as usize].credit_back(position, credit_at);
            // SAFETY: rule B.
            unsafe { wake_side((two_sided, lanes), q, Side::Sender, Wait::Send(q), |task| lanes.ready.push(task)) };
        }
        if divided.is_some() {
            sent.append(&mut totals.transfers);
        } else {
            *sent = totals.transfers;
        }
        self.inbox.extend(totals.ops.into_iter().map(|(sender, index, out)| ((sender, index), out)));
        Ok(Some(RoundEnd {
            finished: totals.finished as usize,
            arrivals: totals.arrivals,
            one_sided: totals.one_sided,
        }))
    }

    /// Delivers the round's one-sided operations in a spread run (rule B): applies those whose targets
    /// this process holds, in the order one process applies them ([`OneSidedRun::in_delivery_order`]), does
    /// what the others do to this process's lanes (a put lands, a get's reply comes back), and agrees
    /// with every process on the first that failed.
    ///
    /// # Errors
    /// As [`OneSidedRun::deliver`], from whichever process; an exchange that failed.
    pub(crate) fn deliver(
        &mut self,
        polled: &[u32],
        lanes: &mut Lanes<'_>,
        one_sided: &mut OneSidedRun,
    ) -> Result<(), RunError> {
        let mut ops = std::mem::take(&mut self.inbox);
        let mut landed_elsewhere = Vec::new();
        for &rank in polled {
            let Some(memory) = one_sided.pes.get(rank as usize) else { continue };
            for (i, out) in std::mem::take(&mut memory.outbox).into_iter().enumerate() {
                if lanes.tasks.holds(out.to) {
                    ops.insert((rank, i as u64), out);
                } else if out.is_put() {
                    landed_elsewhere.push((out.task, out.arrive_ns));
                }
            }
        }
        for (task, arrive_ns) in landed_elsewhere {
            lanes.land(task, arrive_ns);
        }
        let mut ops: Vec<((u32, u64), Outgoing)> = ops.into_iter().collect();
        one_sided.in_delivery_order(&mut ops, |(_, out)| out);
        let (mut replies, mut failed) = (Vec::new(), None);
        for ((rank, index), out) in ops {
            let origin_here = lanes.tasks.holds(rank);
            match one_sided.apply(out, origin_here, lanes) {
                Ok(Some((task, reply, back_ns))) => replies.push((rank, task, reply, back_ns)),
                Ok(None) => {}
                Err(error) => {
                    failed = Some((u64::from(rank) << 32 | index, error));
                    break;
                }
            }
        }
        for (task, reply, back_ns) in self.hand_back(&lanes.tasks, replies, failed)? {
            let pe = lanes.tasks.pe(lanes.tasks.rank(task));
            let reply = reply.map_err(|message| KernelError::Relayed { pe, message });
            one_sided.reply(lanes, (task, reply, back_ns));
        }
        Ok(())
    }

    fn swap(&self, share: RoundShare<'_>, tasks: &Tasks<'_>) -> Result<RoundTotals, RunError> {
        let n = self.processes();
        let mut common = Writer::default();
        common.u64(share.polled);
        common.u64(share.finished);
        common.u8(u8::from(share.one_sided));
        match &share.failed {
            Some((task, message)) => {
                common.u8(1);
                common.u32(*task);
                common.bytes(message.as_bytes());
            }
            None => common.u8(0),
        }
        // Placed whole, every process places every transfer; divided, each gets those that concern it.
        let to_all: &[Transfer] = if share.divided.is_some() { &[] } else { share.transfers };
        common.u64(to_all.len() as u64);
        for t in to_all {
            write_transfer(&mut common, t);
        }
        common.u64(share.arrivals.len() as u64);
        for a in share.arrivals {
            common.u32(a.task);
            write_barrier_key(&mut common, &a.group);
            common.f64(a.at_ns);
        }
        // A small common part rides along with each process's own part, in one all-to-all; a large one
        // (a round in which many PEs send) goes once to all in an all-gather after it.
        let inline = common.bytes.len() <= INLINE_COMMON;
        let mut to_each: Vec<Writer> = (0..n)
            .map(|_| {
                let mut w = Writer::default();
                w.u8(u8::from(inline));
                if inline {
                    w.bytes.extend_from_slice(&common.bytes);
                }
                w
            })
            .collect();
        let mut counts = vec![(0u64, 0u64); n];
        for &(_, receiver, ..) in &share.messages {
            counts[tasks.owner(receiver)].0 += 1;
        }
        for &(_, sender, ..) in &share.credits {
            counts[tasks.owner(sender)].1 += 1;
        }
        for (w, &(messages, _)) in to_each.iter_mut().zip(&counts) {
            w.u64(messages);
        }
        for (queue, receiver, position, message) in &share.messages {
            let w = &mut to_each[tasks.owner(*receiver)];
            w.u32(*queue);
            w.u64(*position);
            w.u64(message.generation.get());
            // Handed over before placement: when it left.
            w.f64(message.at_ns);
            write_tile(w, &message.tile);
        }
        for (w, &(_, credits)) in to_each.iter_mut().zip(&counts) {
            w.u64(credits);
        }
        for &(queue, sender, position, credit_at) in &share.credits {
            let w = &mut to_each[tasks.owner(sender)];
            w.u32(queue);
            w.u64(position);
            w.f64(credit_at);
        }
        let mut ops = vec![0u64; n];
        for &(_, _, out) in &share.ops {
            ops[tasks.owner(out.to)] += 1;
        }
        for (w, &count) in to_each.iter_mut().zip(&ops) {
            w.u64(count);
        }
        for &(sender, index, out) in &share.ops {
            let w = &mut to_each[tasks.owner(out.to)];
            w.u32(sender);
            w.u64(index);
            out.write(w);
        }
        // Each transfer to the other processes it concerns, by queue and a get's reply's queue.
        let mut handed: Vec<(u32, &Transfer)> = Vec::new();
        if let Some(network) = share.divided {
            for t in share.transfers {
                let mut to: SmallVec<[u32; 4]> = network.others(t.queue).collect();
                to.extend(t.reply().into_iter().flat_map(|(back, _)| network.others(back)));
                to.sort_unstable();
                to.dedup();
                handed.extend(to.into_iter().map(|p| (p, t)));
            }
            // Stable: each process gets its transfers in this process's order.
            handed.sort_by_key(|&(p, _)| p);
        }
        let mut transfers = vec![0u64; n];
        for &(to, _) in &handed {
            transfers[to as usize] += 1;
        }
        for (w, &count) in to_each.iter_mut().zip(&transfers) {
            w.u64(count);
        }
        for &(p, t) in &handed {
            write_transfer(&mut to_each[p as usize], t);
        }
        let got = self.exchange.all_to_all(to_each.into_iter().map(|w| w.bytes).collect())?;
        // Every process sees the same flags, so all of them make the all-gather or none.
        let gathered = if got.iter().any(|b| b.first() == Some(&0)) {
            Some(self.exchange.all_gather(if inline { Vec::new() } else { common.bytes })?)
        } else {
            None
        };
        let mut totals = RoundTotals::default();
        for (from, bytes) in got.iter().enumerate() {
            let r = &mut Reader::new(bytes, from);
            if r.u8()? == 1 {
                decode_common(r, from, &mut totals)?;
            } else {
                let common =
                    gathered.as_ref().and_then(|g| g.get(from)).ok_or_else(|| r.malformed("its common part"))?;
                let c = &mut Reader::new(common, from);
                decode_common(c, from, &mut totals)?;
                if !c.is_empty() {
                    return Err(c.malformed("bytes after its common part").into());
                }
            }
            decode_own(r, &mut totals)?;
        }
        Ok(totals)
    }

    /// After one-sided operations were applied: sends each get's reply to its lane's process, and
    /// agrees on the first operation that failed (the lowest `key`, as [`Spread::agree`]). Returns the
    /// replies for this process's lanes.
    fn hand_back(
        &self,
        tasks: &Tasks<'_>,
        replies: Vec<Reply>,
        failed: Option<(u64, RunError)>,
    ) -> Result<Vec<ReplyIn>, RunError> {
        let n = self.processes();
        let mut to_each: Vec<Writer> = (0..n).map(|_| Writer::default()).collect();
        for w in &mut to_each {
            match &failed {
                Some((key, error)) => {
                    w.u8(1);
                    w.u64(*key);
                    w.bytes(error.to_string().as_bytes());
                }
                None => w.u8(0),
            }
        }
        let mut counts = vec![0u64; n];
        for &(rank, ..) in &replies {
            counts[tasks.owner(rank)] += 1;
        }
        for (w, &count) in to_each.iter_mut().zip(&counts) {
            w.u64(count);
        }
        for (rank, task, reply, back_ns) in &replies {
            let w = &mut to_each[tasks.owner(*rank)];
            w.u32(*task);
            w.f64(*back_ns);
            match reply {
                Ok(tile) => {
                    w.u8(0);
                    write_tile(w, tile);
                }
                Err(error) => {
                    w.u8(1);
                    w.bytes(error.to_string().as_bytes());
                }
            }
        }
        let got = self.exchange.all_to_all(to_each.into_iter().map(|w| w.bytes).collect())?;
        let (mut lowest, mut mine) = (None::<(u64, usize, String)>, Vec::new());
        for (from, bytes) in got.iter().enumerate() {
            let r = &mut Reader::new(bytes, from);
            if r.u8()? == 1 {
                let (key, message) = (r.u64()?, String::from_utf8_lossy(r.bytes()?).into_owned());
                if lowest.as_ref().is_none_or(|(k, ..)| key < *k) {
                    lowest = Some((key, from, message));
                }
            }
            for _ in 0..r.u64()? {
                let (task, back_ns) = (r.u32()?, r.f64()?);
                let reply = match r.u8()? {
                    0 => Ok(read_tile(r)?),
                    _ => Err(String::from_utf8_lossy(r.bytes()?).into_owned()),
                };
                mine.push((task, reply, back_ns));
            }
            if !r.is_empty() {
                return Err(r.malformed("bytes after its end").into());
            }
        }
        self.winner(lowest, failed.map(|(_, error)| error))?;
        Ok(mine)
    }
}

/// The part of a round's hand-over every process gets: counts, failure, transfers, barrier arrivals.
fn decode_common(r: &mut Reader<'_>, from: usize, totals: &mut RoundTotals) -> Result<(), RunError> {
    totals.polled += r.u64()?;
    totals.finished += r.u64()?;
    totals.one_sided |= r.u8()? == 1;
    if r.u8()? == 1 {
        let task = r.u32()?;
        let message = String::from_utf8_lossy(r.bytes()?).into_owned();
        if totals.failed.as_ref().is_none_or(|(lowest, ..)| task < *lowest) {
            totals.failed = Some((task, from, message));
        }
    }
    for _ in 0..r.u64()? {
        totals.transfers.push(read_transfer(r)?);
    }
    for _ in 0..r.u64()? {
        let (task, group, at_ns) = (r.u32()?, read_barrier_key(r)?, r.f64()?);
        totals.arrivals.push(Arrival { group, task, at_ns, clock: None, label: None });
    }
    Ok(())
}

/// The part of a round's hand-over for this process alone: messages, credits, one-sided operations,
/// and, placing divided, the transfers that concern it.
fn decode_own(r: &mut Reader<'_>, totals: &mut RoundTotals) -> Result<(), RunError> {
    for _ in 0..r.u64()? {
        let (queue, position, generation, depart_ns) = (r.u32()?, r.u64()?, r.u64()?, r.f64()?);
        let generation = NonZeroU64::new(generation).ok_or_else(|| r.malformed("a message of generation 0"))?;
        let tile = read_tile(r)?;
        totals.messages.push((queue, position, Message { tile, generation, at_ns: depart_ns }));
    }
    for _ in 0..r.u64()? {
        totals.credits.push((r.u32()?, r.u64()?, r.f64()?));
    }
    for _ in 0..r.u64()? {
        let (sender, index) = (r.u32()?, r.u64()?);
        totals.ops.push((sender, index, Outgoing::read(r)?));
    }
    for _ in 0..r.u64()? {
        totals.transfers.push(read_transfer(r)?);
    }
    if !r.is_empty() {
        return Err(r.malformed("bytes after its end").into());
    }
    Ok(())
}

/// A transfer on the wire: what placing it reads.
fn write_transfer(w: &mut Writer, t: &Transfer) {
    w.f64(t.depart_ns);
    w.u32(t.sender);
    w.u32(t.queue);
    w.u64(t.position);
    w.u64(t.bytes);
    match t.reply() {
        Some((back, bytes)) => {
            w.u8(1);
            w.u32(back);
            w.u64(bytes);
        }
        None => w.u8(0),
    }
    match t.put_by() {
        Some(task) => {
            w.u8(1);
            w.u32(task);
        }
        None => w.u8(0),
    }
}

/// A transfer as [`write_transfer`] wrote it.
fn read_transfer(r: &mut Reader<'_>) -> Result<Transfer, RunError> {
    let (depart_ns, sender, queue, position, bytes) = (r.f64()?, r.u32()?, r.u32()?, r.u64()?, r.u64()?);
    let reply = if r.u8()? == 1 { Some((r.u32()?, r.u64()?)) } else { None };
    let put_by = if r.u8()? == 1 { Some(r.u32()?) } else { None };
    // A spread run makes no multicast transfers: `tl.multicast` refuses ranks of other processes.
    Ok(Transfer::message(depart_ns, sender, queue, position, bytes).with(reply, put_by))
}

/// The largest common part of a round's hand-over sent inline to each process (see [`Spread::swap`]):
/// about 1,600 transfers.
const INLINE_COMMON: usize = 64 << 10;

/// A barrier's key on the wire: a group's number, or a team's members.
fn write_barrier_key(w: &mut Writer, key: &BarrierKey) {
    match key {
        BarrierKey::Group(group) => {
            w.u8(0);
            w.u64(*group);
        }
        BarrierKey::Team(members) => {
            w.u8(1);
            w.u64(members.len() as u64);
            for &member in members.iter() {
                w.u64(member as u64);
            }
        }
        BarrierKey::Call(call, key) => {
            w.u8(2);
            w.u32(*call);
            write_barrier_key(w, key);
        }
    }
}

/// A barrier's key as [`write_barrier_key`] wrote it.
fn read_barrier_key(r: &mut Reader<'_>) -> Result<BarrierKey, RunError> {
    match r.u8()? {
        0 => return Ok(BarrierKey::Group(r.u64()?)),
        2 => return Ok(BarrierKey::Call(r.u32()?, Box::new(read_barrier_key(r)?))),
        _ => {}
    }
    // Read member by member, so a corrupt length runs out of bytes rather than allocating.
    let members = (0..r.u64()?).map(|_| r.u64().map(|m| m as usize)).collect::<Result<Vec<_>, _>>()?;
    Ok(BarrierKey::Team(members.into()))
}

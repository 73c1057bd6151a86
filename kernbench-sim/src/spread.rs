//! A run spread over processes: who holds which PE, and what each round's hand-over carries
//! ([`crate::exchange`] carries the bytes).
//!
//! Every process builds the whole run's structure (plan, every queue's route, network model) and
//! starts, polls and merges only its own PEs, holding only their states and the queues they use. A queue between two processes has a replica in each: the sender's
//! process hands the round's new messages over to the receiver's, which hands the returned credits
//! back, each written into the other replica as that side's merge would have published it. Every
//! process places every transfer of the round, in the global order of a single-process run, on its
//! own copy of the network model, so arrival times, channel figures and traces are the same bits in
//! every process. Counts are summed and failures chosen by lowest task (never a floating-point
//! reduction), so results, times and errors do not depend on the number of processes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use kernbench_core::symmetric::Symmetric;
use kernbench_core::{Dtype, KernelError, PeId, System, Tile};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::error::RunError;
use crate::exchange::{Exchange, ExchangeError, Partition, Reader, Writer};
use crate::pe::{Arrival, PeFigures};
use crate::queue::{Message, Side};
use crate::report::PeReport;
use crate::symmetric::{OneSidedOp, Outgoing};
use crate::timing::{PeTime, Span, Transfer};

/// The processes of a spread run and which ranks each holds.
pub(crate) struct Spread<'x> {
    exchange: &'x dyn Exchange,
    /// The process holding each rank.
    owner: Vec<u32>,
    me: u32,
}

/// One side of a queue between two processes that a round's merge published: messages at
/// `positions` (the sender's side) or their credits (the receiver's).
pub(crate) struct Crossing {
    pub(crate) queue: u32,
    pub(crate) side: Side,
    pub(crate) positions: std::ops::Range<u64>,
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
    /// Every process's transfers.
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

/// A get's reply: the lane, its data or error, when it arrives.
pub(crate) type GetReply = (u32, Result<Tile, KernelError>, f64);

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

/// One PE's part of the report, sent to every process at the end of a spread run.
#[derive(Serialize, Deserialize)]
pub(crate) struct PeShare {
    pub(crate) dtype: Dtype,
    pub(crate) output: Vec<u8>,
    pub(crate) figures: PeFigures,
    pub(crate) lanes: Vec<PeFigures>,
    pub(crate) notes: BTreeMap<String, String>,
    pub(crate) time: Option<TimeShare>,
}

/// A [`PeTime`] on the wire: bincode needs every field written (`PeTime` skips empty lanes in JSON).
#[derive(Serialize, Deserialize)]
pub(crate) struct TimeShare {
    finish_ns: f64,
    busy_ns: f64,
    blocked_ns: f64,
    idle_ns: f64,
    spans: Vec<Span>,
    lanes: Vec<TimeShare>,
}

impl From<PeTime> for TimeShare {
    fn from(t: PeTime) -> Self {
        let lanes = t.lanes.into_iter().map(TimeShare::from).collect();
        TimeShare {
            finish_ns: t.finish_ns,
            busy_ns: t.busy_ns,
            blocked_ns: t.blocked_ns,
            idle_ns: t.idle_ns,
            spans: t.spans,
            lanes,
        }
    }
}

impl From<TimeShare> for PeTime {
    fn from(t: TimeShare) -> Self {
        let lanes = t.lanes.into_iter().map(PeTime::from).collect();
        PeTime {
            finish_ns: t.finish_ns,
            busy_ns: t.busy_ns,
            blocked_ns: t.blocked_ns,
            idle_ns: t.idle_ns,
            spans: t.spans,
            lanes,
        }
    }
}

impl PeShare {
    /// `report`'s part (its output and notes taken out) and `time`.
    pub(crate) fn of(report: &mut PeReport, time: Option<PeTime>) -> PeShare {
        let mut output = Vec::with_capacity(report.output.bytes());
        report.output.write_bytes(&mut output);
        PeShare {
            dtype: report.output.dtype(),
            output,
            figures: report.figures,
            lanes: std::mem::take(&mut report.lanes),
            notes: std::mem::take(&mut report.notes),
            time: time.map(TimeShare::from),
        }
    }

    /// The report of PE `pe` from its share, which process `from` sent.
    pub(crate) fn into_report(self, pe: PeId, from: usize) -> Result<(PeReport, Option<PeTime>), RunError> {
        let output = Tile::from_bytes(self.dtype, &self.output)
            .ok_or(ExchangeError::Malformed { from, what: "a PE's output" })?;
        let report = PeReport { pe, output, figures: self.figures, lanes: self.lanes, notes: self.notes };
        Ok((report, self.time.map(PeTime::from)))
    }
}

impl<'x> Spread<'x> {
    /// The spread of a run over `exchange`'s processes, or `None` for one process.
    ///
    /// # Errors
    /// [`ExchangeError::TooManyProcesses`] when there are more processes than SIPs.
    pub(crate) fn new(
        exchange: &'x dyn Exchange,
        system: &System,
        pes: &[PeId],
    ) -> Result<Option<Spread<'x>>, ExchangeError> {
        if exchange.processes() <= 1 {
            return Ok(None);
        }
        let partition = Partition::new(system, exchange.processes())?;
        let owner = pes.iter().map(|pe| partition.process_of(pe.sip as usize) as u32).collect();
        Ok(Some(Spread { exchange, owner, me: exchange.process() as u32 }))
    }

    pub(crate) fn processes(&self) -> usize {
        self.exchange.processes()
    }

    pub(crate) fn is_local(&self, rank: u32) -> bool {
        self.owner[rank as usize] == self.me
    }

    pub(crate) fn owner(&self, rank: u32) -> usize {
        self.owner[rank as usize] as usize
    }

    /// Swaps a round's shares between every process.
    pub(crate) fn hand_over(&self, share: RoundShare<'_>) -> Result<RoundTotals, RunError> {
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
        common.u64(share.transfers.len() as u64);
        for t in share.transfers {
            common.f64(t.depart_ns);
            common.u32(t.sender);
            common.u32(t.queue);
            common.u64(t.position);
            common.u64(t.bytes);
            match t.reply {
                Some((back, bytes)) => {
                    common.u8(1);
                    common.u32(back);
                    common.u64(bytes);
                }
                None => common.u8(0),
            }
            match t.put_by {
                Some(task) => {
                    common.u8(1);
                    common.u32(task);
                }
                None => common.u8(0),
            }
        }
        common.u64(share.arrivals.len() as u64);
        for a in share.arrivals {
            common.u32(a.task);
            common.u64(a.group);
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
            counts[self.owner(receiver)].0 += 1;
        }
        for &(_, sender, ..) in &share.credits {
            counts[self.owner(sender)].1 += 1;
        }
        for (w, &(messages, _)) in to_each.iter_mut().zip(&counts) {
            w.u64(messages);
        }
        for (queue, receiver, position, message) in &share.messages {
            let w = &mut to_each[self.owner(*receiver)];
            w.u32(*queue);
            w.u64(*position);
            w.u64(message.generation);
            w.f64(message.depart_ns);
            write_tile(w, &message.tile);
        }
        for (w, &(_, credits)) in to_each.iter_mut().zip(&counts) {
            w.u64(credits);
        }
        for &(queue, sender, position, credit_at) in &share.credits {
            let w = &mut to_each[self.owner(sender)];
            w.u32(queue);
            w.u64(position);
            w.f64(credit_at);
        }
        let mut ops = vec![0u64; n];
        for &(_, _, out) in &share.ops {
            ops[self.owner(out.to)] += 1;
        }
        for (w, &count) in to_each.iter_mut().zip(&ops) {
            w.u64(count);
        }
        for &(sender, index, out) in &share.ops {
            let w = &mut to_each[self.owner(out.to)];
            w.u32(sender);
            w.u64(index);
            write_op(w, out);
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

    /// Every process's `mine`, in process order.
    pub(crate) fn gather<T: Serialize + DeserializeOwned>(&self, mine: &T) -> Result<Vec<T>, RunError> {
        let mut all = Vec::with_capacity(self.processes());
        self.gather_each(mine, |_, theirs| {
            all.push(theirs);
            Ok(())
        })?;
        Ok(all)
    }

    /// Hands every process's `mine` to `each` with its process, in process order, each decoded only when its turn comes
    /// (and its bytes dropped after): a whole run's report is large.
    pub(crate) fn gather_each<T: Serialize + DeserializeOwned>(
        &self,
        mine: &T,
        mut each: impl FnMut(usize, T) -> Result<(), RunError>,
    ) -> Result<(), RunError> {
        let bytes = bincode::serialize(mine).map_err(|e| ExchangeError::Transport(e.to_string()))?;
        let got = self.exchange.all_gather(bytes)?;
        for (from, bytes) in got.into_iter().enumerate() {
            let theirs = bincode::deserialize(&bytes)
                .map_err(|_| RunError::from(ExchangeError::Malformed { from, what: "a run's end report" }))?;
            drop(bytes);
            each(from, theirs)?;
        }
        Ok(())
    }

    /// After one-sided operations were applied: sends each get's reply to its lane's process, and
    /// agrees on the first operation that failed (the lowest `key`, as [`Spread::agree`]). Returns the
    /// replies for this process's lanes.
    pub(crate) fn hand_back(
        &self,
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
            counts[self.owner(rank)] += 1;
        }
        for (w, &count) in to_each.iter_mut().zip(&counts) {
            w.u64(count);
        }
        for (rank, task, reply, back_ns) in &replies {
            let w = &mut to_each[self.owner(*rank)];
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
        match (lowest, failed) {
            (None, _) => {}
            (Some((_, p, _)), Some((_, error))) if p == self.me as usize => return Err(error),
            (Some((_, process, message)), _) => return Err(RunError::Elsewhere { process, message }),
        }
        Ok(mine)
    }

    /// Agrees on one error between every process: of those with one, the lowest `key` wins. Its
    /// process returns the error itself; the others [`RunError::Elsewhere`] with its message.
    pub(crate) fn agree(&self, mine: Option<(u64, RunError)>) -> Result<(), RunError> {
        let told = mine.as_ref().map(|(key, e)| (*key, e.to_string()));
        let all = self.gather(&told)?;
        let lowest = all.into_iter().enumerate().filter_map(|(p, e)| e.map(|(key, m)| (key, p, m))).min();
        match (lowest, mine) {
            (None, _) => Ok(()),
            (Some((_, p, _)), Some((_, error))) if p == self.me as usize => Err(error),
            (Some((_, process, message)), _) => Err(RunError::Elsewhere { process, message }),
        }
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
        let (depart_ns, sender, queue, position, bytes) = (r.f64()?, r.u32()?, r.u32()?, r.u64()?, r.u64()?);
        let reply = if r.u8()? == 1 { Some((r.u32()?, r.u64()?)) } else { None };
        let put_by = if r.u8()? == 1 { Some(r.u32()?) } else { None };
        totals.transfers.push(Transfer { depart_ns, sender, queue, position, bytes, reply, put_by });
    }
    for _ in 0..r.u64()? {
        let (task, group, at_ns) = (r.u32()?, r.u64()?, r.f64()?);
        totals.arrivals.push(Arrival { group, task, at_ns, clock: None });
    }
    Ok(())
}

/// The part of a round's hand-over for this process alone: messages, credits, one-sided operations.
fn decode_own(r: &mut Reader<'_>, totals: &mut RoundTotals) -> Result<(), RunError> {
    for _ in 0..r.u64()? {
        let (queue, position, generation, depart_ns) = (r.u32()?, r.u64()?, r.u64()?, r.f64()?);
        let tile = read_tile(r)?;
        totals.messages.push((queue, position, Message { tile, generation, depart_ns, arrive_ns: depart_ns }));
    }
    for _ in 0..r.u64()? {
        totals.credits.push((r.u32()?, r.u64()?, r.f64()?));
    }
    for _ in 0..r.u64()? {
        let (sender, index) = (r.u32()?, r.u64()?);
        totals.ops.push((sender, index, read_op(r)?));
    }
    if !r.is_empty() {
        return Err(r.malformed("bytes after its end").into());
    }
    Ok(())
}

/// The largest common part of a round's hand-over sent inline to each process (see [`Spread::hand_over`]):
/// about 1,600 transfers.
const INLINE_COMMON: usize = 64 << 10;

fn write_tile(w: &mut Writer, tile: &Tile) {
    w.u8(dtype_code(tile.dtype()));
    w.u64(tile.bytes() as u64);
    tile.write_bytes(&mut w.bytes);
}

fn read_tile(r: &mut Reader<'_>) -> Result<Tile, ExchangeError> {
    let dtype = dtype_of(r.u8()?).ok_or_else(|| r.malformed("a tile's dtype"))?;
    Tile::from_bytes(dtype, r.bytes()?).ok_or_else(|| r.malformed("a tile's data"))
}

fn write_buffer(w: &mut Writer, buffer: &Symmetric) {
    w.bytes(buffer.name.as_bytes());
    w.u8(dtype_code(buffer.dtype));
    w.u64(buffer.len as u64);
}

fn read_buffer(r: &mut Reader<'_>) -> Result<Symmetric, ExchangeError> {
    let name = std::str::from_utf8(r.bytes()?).map_err(|_| r.malformed("a buffer's name"))?;
    let dtype = dtype_of(r.u8()?).ok_or_else(|| r.malformed("a buffer's dtype"))?;
    Ok(Symmetric { name: interned(name), dtype, len: r.u64()? as usize })
}

/// `name` as the `&'static str` a [`Symmetric`] holds: buffer names are a kernel's constants, so each
/// distinct name is kept once for the life of the process.
fn interned(name: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.get(name) {
        return known;
    }
    let known: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(known);
    known
}

/// A one-sided operation for its target's process. The race detector's clocks and stamps stay behind:
/// a spread run does not check races ([`crate::Runtime::exchange`]).
fn write_op(w: &mut Writer, out: &Outgoing) {
    w.u32(out.task);
    w.u64(out.generation);
    w.u32(out.to);
    w.u32(out.route);
    w.f64(out.depart_ns);
    match &out.op {
        OneSidedOp::Put { buffer, offset, tile, signal, seq, .. } => {
            w.u8(0);
            write_buffer(w, buffer);
            w.u64(*offset as u64);
            write_tile(w, tile);
            match signal {
                Some((signal, add)) => {
                    w.u8(1);
                    w.u64(*signal as u64);
                    w.u64(*add);
                }
                None => w.u8(0),
            }
            w.u32(*seq);
        }
        OneSidedOp::Signal { signal, add } => {
            w.u8(1);
            w.u64(*signal as u64);
            w.u64(*add);
        }
        OneSidedOp::Get { buffer, offset, len, back, .. } => {
            w.u8(2);
            write_buffer(w, buffer);
            w.u64(*offset as u64);
            w.u64(*len as u64);
            w.u32(*back);
        }
    }
}

fn read_op(r: &mut Reader<'_>) -> Result<Outgoing, ExchangeError> {
    let (task, generation, to, route, depart_ns) = (r.u32()?, r.u64()?, r.u32()?, r.u32()?, r.f64()?);
    let op = match r.u8()? {
        0 => {
            let (buffer, offset, tile) = (read_buffer(r)?, r.u64()? as usize, read_tile(r)?);
            let signal = if r.u8()? == 1 { Some((r.u64()? as usize, r.u64()?)) } else { None };
            OneSidedOp::Put { buffer, offset, tile, signal, seq: r.u32()?, stamp: None }
        }
        1 => OneSidedOp::Signal { signal: r.u64()? as usize, add: r.u64()? },
        2 => {
            let (buffer, offset, len, back) = (read_buffer(r)?, r.u64()? as usize, r.u64()? as usize, r.u32()?);
            OneSidedOp::Get { buffer, offset, len, stamp: None, back, back_ns: depart_ns }
        }
        _ => return Err(r.malformed("a one-sided operation's kind")),
    };
    // Its arrival is set when this process places the round's transfers (untimed: when it left).
    Ok(Outgoing { task, generation, to, route, depart_ns, arrive_ns: depart_ns, clock: None, op })
}

fn dtype_code(dtype: Dtype) -> u8 {
    Dtype::ALL.iter().position(|&d| d == dtype).expect("every dtype is in Dtype::ALL") as u8
}

fn dtype_of(code: u8) -> Option<Dtype> {
    Dtype::ALL.get(code as usize).copied()
}

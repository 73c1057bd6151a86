//! A run spread over processes: who holds which PE, and what each round's hand-over carries
//! ([`crate::exchange`] carries the bytes).
//!
//! Every process builds the whole run's structure (plan, queues, network model) and starts, polls
//! and merges only its own PEs. A queue between two processes has a replica in each: the sender's
//! process hands the round's new messages over to the receiver's, which hands the returned credits
//! back, each written into the other replica as that side's merge would have published it. Every
//! process places every transfer of the round, in the global order of a single-process run, on its
//! own copy of the network model, so arrival times, channel figures and traces are the same bits in
//! every process. Counts are summed and failures chosen by lowest task (never a floating-point
//! reduction), so results, times and errors do not depend on the number of processes.

use std::collections::BTreeMap;

use kernbench_core::{Dtype, PeId, System, Tile};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::error::RunError;
use crate::exchange::{Exchange, ExchangeError, Partition, Reader, Writer};
use crate::pe::{Arrival, PeFigures};
use crate::queue::{Message, Side};
use crate::report::PeReport;
use crate::timing::{PeTime, Span, Transfer};

/// The processes of a spread run and which ranks each holds.
pub(crate) struct Spread<'x> {
    pub(crate) exchange: &'x dyn Exchange,
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
}

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

    /// The report of PE `pe` from its share.
    pub(crate) fn into_report(self, pe: PeId) -> Result<(PeReport, Option<PeTime>), RunError> {
        let output = Tile::from_bytes(self.dtype, &self.output)
            .ok_or(ExchangeError::Malformed { from: usize::MAX, what: "a PE's output" })?;
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
        }
        common.u64(share.arrivals.len() as u64);
        for a in share.arrivals {
            common.u32(a.task);
            common.u64(a.group);
            common.f64(a.at_ns);
        }
        let mut to_each: Vec<Writer> = (0..n).map(|_| Writer { bytes: common.bytes.clone() }).collect();
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
            w.u8(dtype_code(message.tile.dtype()));
            w.u64(message.tile.bytes() as u64);
            message.tile.write_bytes(&mut w.bytes);
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
        let got = self.exchange.all_to_all(to_each.into_iter().map(|w| w.bytes).collect())?;
        let mut totals = RoundTotals {
            polled: 0,
            finished: 0,
            failed: None,
            transfers: Vec::new(),
            arrivals: Vec::new(),
            messages: Vec::new(),
            credits: Vec::new(),
        };
        for (from, bytes) in got.iter().enumerate() {
            decode_share(&mut Reader::new(bytes, from), from, &mut totals)?;
        }
        Ok(totals)
    }

    /// Every process's `mine`, in process order.
    pub(crate) fn gather<T: Serialize + DeserializeOwned>(&self, mine: &T) -> Result<Vec<T>, RunError> {
        let bytes = bincode::serialize(mine).map_err(|e| ExchangeError::Transport(e.to_string()))?;
        let got = self.exchange.all_gather(bytes)?;
        got.iter()
            .enumerate()
            .map(|(from, b)| {
                bincode::deserialize(b)
                    .map_err(|_| RunError::from(ExchangeError::Malformed { from, what: "a run's end report" }))
            })
            .collect()
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

fn decode_share(r: &mut Reader<'_>, from: usize, totals: &mut RoundTotals) -> Result<(), RunError> {
    totals.polled += r.u64()?;
    totals.finished += r.u64()?;
    if r.u8()? == 1 {
        let task = r.u32()?;
        let message = String::from_utf8_lossy(r.bytes()?).into_owned();
        if totals.failed.as_ref().is_none_or(|(lowest, ..)| task < *lowest) {
            totals.failed = Some((task, from, message));
        }
    }
    for _ in 0..r.u64()? {
        let (depart_ns, sender, queue, position, bytes) = (r.f64()?, r.u32()?, r.u32()?, r.u64()?, r.u64()?);
        totals.transfers.push(Transfer { depart_ns, sender, queue, position, bytes });
    }
    for _ in 0..r.u64()? {
        let (task, group, at_ns) = (r.u32()?, r.u64()?, r.f64()?);
        totals.arrivals.push(Arrival { group, task, at_ns, clock: None });
    }
    for _ in 0..r.u64()? {
        let (queue, position, generation, depart_ns) = (r.u32()?, r.u64()?, r.u64()?, r.f64()?);
        let dtype = dtype_of(r.u8()?).ok_or_else(|| r.malformed("a message's dtype"))?;
        let tile = Tile::from_bytes(dtype, r.bytes()?).ok_or_else(|| r.malformed("a message's data"))?;
        totals.messages.push((queue, position, Message { tile, generation, depart_ns, arrive_ns: depart_ns }));
    }
    for _ in 0..r.u64()? {
        totals.credits.push((r.u32()?, r.u64()?, r.f64()?));
    }
    if !r.is_empty() {
        return Err(r.malformed("bytes after its end").into());
    }
    Ok(())
}

fn dtype_code(dtype: Dtype) -> u8 {
    Dtype::ALL.iter().position(|&d| d == dtype).expect("every dtype is in Dtype::ALL") as u8
}

fn dtype_of(code: u8) -> Option<Dtype> {
    Dtype::ALL.get(code as usize).copied()
}

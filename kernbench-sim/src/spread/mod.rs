//! The spread of a run over processes: which process holds which PEs, what each round's hand-over
//! carries between them, and the transports that carry it ([`Exchange`]: [`InMemory`], and `Mpi` with
//! the `mpi` feature). Uses lanes, both kinds of traffic, the timing model's transfers and the wire
//! format.
//!
//! A run spread over several processes ([`crate::RunOptions::spread_over`]) gives each process a
//! contiguous block of SIPs and every PE in them ([`SipBlocks`]). Every process builds the whole run's
//! structure (plan, every queue's route, the channels; every channel's bookings unless the placement
//! is divided) and starts, polls and merges only its own PEs, holding only their states and the
//! queues they use. A message sent in one round is visible only in
//! the next, whatever its simulated time, so each round is one bulk-synchronous step: every process
//! polls its own PEs, then all of them swap, in one [`Exchange::all_to_all`], the round's messages and
//! returned credits on queues between their blocks (each written into the other side's replica as that
//! side's merge would have published it), the transfers to place on the channels (to every process,
//! in an [`Exchange::all_gather`] after it when they are many; placing divided, each only to the
//! processes whose channels or PEs it reaches), barrier arrivals, one-sided operations to each
//! other's PEs, and how many lanes finished or failed. Every process then places the round's
//! transfers in the global order of a single-process run ([`Placement`]): every transfer on its own
//! copy of the channels' bookings, or, divided, those it was handed on its own channels only,
//! passing each transfer on to the process of its next channel; either way arrival times and traces
//! are the same bits in every process, and each adds up the bytes and busy time of its own channels
//! only (those its PEs' queues cross first). Counts are summed and
//! failures chosen by lowest task (never a floating-point reduction), so results, times and errors do
//! not depend on the number of processes. At the end each process sends its channels' figures and its
//! PEs' outputs, figures and times to every other, and each returns the whole report; or, with
//! [`ReportTo::First`], to process 0 alone, in pieces, which returns the whole report while the others
//! return their own part, so the end of a run holds one whole report, not one in every process.

mod exchange;
mod hand_over;
#[cfg(feature = "mpi")]
mod mpi;
mod placement;

pub use crate::error::ExchangeError;
#[allow(deprecated)]
pub use exchange::Partition;
pub use exchange::{DEFAULT_TIMEOUT, Exchange, InMemory, SipBlocks, timeout_from_env};
#[cfg(feature = "mpi")]
pub use mpi::Mpi;
pub use placement::Placement;

pub(crate) use hand_over::RoundEnd;

use std::collections::BTreeMap;

use kernbench_core::{PeId, System};
use rustc_hash::FxHashMap;
use serde::{Serialize, de::DeserializeOwned};

use crate::error::RunError;
use crate::lanes::Owners;
use crate::one_sided::Outgoing;

/// Which processes of a spread run get its whole report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReportTo {
    /// Every process gathers and returns the whole report (the default): for a caller that goes on
    /// with every PE's output in every process, as the facade's communicator does.
    #[default]
    Every,
    /// Process 0 gathers every PE's output, figures and times and returns the whole report; every
    /// other process returns its own PEs' part ([`crate::RunReport::part`]) and sends it nowhere
    /// else. A part has the run's rounds and completion, but no channels: those are the whole
    /// report's. A spread run's end then holds one report, not one in every process.
    First,
}

/// The processes of a spread run, and what this process keeps of the others' between rounds.
pub(crate) struct Spread<'x> {
    exchange: &'x dyn Exchange,
    me: u32,
    /// Who gets the whole report at the end.
    pub(crate) report_to: ReportTo,
    /// One-sided operations of the round from other processes to this one's PEs, by sender rank and
    /// place in its outbox.
    pub(crate) inbox: BTreeMap<(u32, u64), Outgoing>,
    /// When the puts of lanes of other processes landed, for barriers this process releases.
    pub(crate) remote_landed: FxHashMap<u32, f64>,
    /// Hands freed memory back to the OS ([`crate::RunOptions::release_memory`]).
    release_memory: Option<fn()>,
}

impl<'x> Spread<'x> {
    /// The spread of a run of `pes` over `exchange`'s processes, its whole report to `report_to`, its
    /// freed memory handed back by `release_memory` ([`crate::RunOptions::release_memory`]), with the
    /// process holding each rank; `None` for one process.
    ///
    /// # Errors
    /// [`ExchangeError::TooManyProcesses`] when there are more processes than SIPs.
    pub(crate) fn new(
        exchange: &'x dyn Exchange,
        system: &System,
        pes: &[PeId],
        (report_to, release_memory): (ReportTo, Option<fn()>),
    ) -> Result<Option<(Spread<'x>, Owners)>, ExchangeError> {
        if exchange.processes() <= 1 {
            return Ok(None);
        }
        let blocks = SipBlocks::new(system, exchange.processes())?;
        // Ranks go in `PeId` order, so SIP by SIP: each process's block of SIPs is a block of ranks.
        let process_of = |pe: &PeId| blocks.process_of(pe.sip as usize);
        let starts = (0..exchange.processes()).map(|p| pes.partition_point(|pe| process_of(pe) < p) as u32);
        let owners = Owners::of_blocks(starts, pes.len() as u32);
        let me = exchange.process() as u32;
        let spread = Spread {
            exchange,
            me,
            report_to,
            inbox: BTreeMap::new(),
            remote_landed: FxHashMap::default(),
            release_memory,
        };
        Ok(Some((spread, owners)))
    }

    /// Hands the memory this process has freed back to the OS, if the run was given a way to.
    pub(crate) fn release_memory(&self) {
        if let Some(release) = self.release_memory {
            release();
        }
    }

    /// Whether this process returns only its own PEs' part of the report ([`ReportTo::First`]).
    pub(crate) fn returns_part(&self) -> bool {
        self.report_to == ReportTo::First && self.me != 0
    }

    /// This process's index.
    pub(crate) fn me(&self) -> u32 {
        self.me
    }

    pub(crate) fn processes(&self) -> usize {
        self.exchange.processes()
    }

    /// Every process's `mine`, in process order.
    pub(crate) fn gather<T: Serialize + DeserializeOwned>(&self, mine: T) -> Result<Vec<T>, RunError> {
        let mut all = Vec::with_capacity(self.processes());
        self.gather_each(&mine, |from, bytes| {
            all.push(bincode::deserialize(bytes).map_err(|_| malformed(from))?);
            Ok(())
        })?;
        all.insert(self.me as usize, mine);
        Ok(all)
    }

    /// Sends `mine` to every other process and hands the bytes each of them sent here to `each` with
    /// its process, in process order (never this process's own), each dropped once read.
    pub(crate) fn gather_each<T: Serialize + ?Sized>(
        &self,
        mine: &T,
        mut each: impl FnMut(usize, &[u8]) -> Result<(), RunError>,
    ) -> Result<(), RunError> {
        let got = self.exchange.all_gather(serialize(mine)?)?;
        let me = self.me as usize;
        for (from, bytes) in got.into_iter().enumerate().filter(|&(from, _)| from != me) {
            each(from, &bytes)?;
        }
        Ok(())
    }

    /// Hands process 0 every other process's `pieces`, one piece at a time (one exchange each): in
    /// process 0, `each` gets every piece's bytes with its process, in process order and each
    /// process's pieces in theirs; process 0's own pieces are never sent. Only one piece is held as
    /// bytes at once on either side, so a large run's report never is whole in bytes, nor needs
    /// one buffer larger than a transport takes.
    pub(crate) fn to_first<T: Serialize>(
        &self,
        mut pieces: impl ExactSizeIterator<Item = T>,
        mut each: impl FnMut(usize, &[u8]) -> Result<(), RunError>,
    ) -> Result<(), RunError> {
        let counts = self.gather(pieces.len() as u64)?;
        let me = self.me as usize;
        for (from, &count) in counts.iter().enumerate().skip(1) {
            for _ in 0..count {
                let mut to_each = vec![Vec::new(); self.processes()];
                if from == me {
                    let piece = pieces.next().expect("an exact-size iterator yields its length");
                    to_each[0] = serialize(&piece)?;
                }
                let got = self.exchange.all_to_all(to_each)?;
                if me == 0 {
                    each(from, got.get(from).map_or(&[][..], |bytes| &bytes[..]))?;
                }
            }
        }
        Ok(())
    }

    /// Every process's `mine`, in process order, in each process that returns the whole report;
    /// `None` in one that returns a part ([`Spread::returns_part`]), which sends its own to process 0
    /// in pieces of at most `piece` items.
    pub(crate) fn to_reporters<T: Serialize + DeserializeOwned>(
        &self,
        mine: Vec<T>,
        piece: usize,
    ) -> Result<Option<Vec<T>>, RunError> {
        if self.report_to == ReportTo::Every {
            return Ok(Some(self.gather(mine)?.into_iter().flatten().collect()));
        }
        if self.returns_part() {
            self.to_first(mine.chunks(piece.max(1)), |_, _| Ok(()))?;
            return Ok(None);
        }
        let mut all = mine;
        self.to_first(std::iter::empty::<&[T]>(), |from, bytes| {
            let piece: Vec<T> = bincode::deserialize(bytes).map_err(|_| malformed(from))?;
            all.extend(piece);
            Ok(())
        })?;
        Ok(Some(all))
    }

    /// Agrees on one error between every process: of those with one, the lowest `key` wins. Its
    /// process returns the error itself; the others [`RunError::Elsewhere`] with its message.
    pub(crate) fn agree(&self, mine: Option<(u64, RunError)>) -> Result<(), RunError> {
        let told = mine.as_ref().map(|(key, e)| (*key, e.to_string()));
        let all = self.gather(told)?;
        let lowest = all.into_iter().enumerate().filter_map(|(p, e)| e.map(|(key, m)| (key, p, m))).min();
        self.winner(lowest, mine.map(|(_, error)| error))
    }

    /// The agreed error, if any: `lowest` (its key, process and message) against this process's own.
    fn winner(&self, lowest: Option<(u64, usize, String)>, mine: Option<RunError>) -> Result<(), RunError> {
        match (lowest, mine) {
            (None, _) => Ok(()),
            (Some((_, p, _)), Some(error)) if p == self.me as usize => Err(error),
            (Some((_, process, message)), _) => Err(RunError::Elsewhere { process, message }),
        }
    }
}

/// `value` in the bytes a process hands over.
fn serialize<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, RunError> {
    bincode::serialize(value).map_err(|e| ExchangeError::Transport(e.to_string()).into())
}

/// What process `from` sent at a run's end, not read as it should be.
pub(crate) fn malformed(from: usize) -> RunError {
    ExchangeError::Malformed { from, what: "a run's end report" }.into()
}

/// `items`, each keyed by its place in the whole run (a task, a queue), in that order; in a spread run,
/// every process's.
///
/// # Errors
/// An exchange that failed.
pub(crate) fn in_run_order<T: Serialize + DeserializeOwned>(
    spread: Option<&Spread<'_>>,
    mut items: Vec<(u64, T)>,
) -> Result<Vec<T>, RunError> {
    if let Some(spread) = spread {
        items = spread.gather(items)?.into_iter().flatten().collect();
        items.sort_by_key(|(key, _)| *key);
    }
    Ok(items.into_iter().map(|(_, item)| item).collect())
}

//! The report: what a run returns (every PE's output, figures and simulated time) and how an ended run
//! makes it, in a spread run from every process's part. Uses the rounds' installed run and the spread.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::ops::Range;

use bincode::Options;
use kernbench_core::{PeId, Tile};
use rayon::prelude::*;
use serde::de::{DeserializeSeed, Deserializer, Error as _, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use thin_vec::ThinVec;

use crate::error::{ExchangeError, RunError};
use crate::lanes::{LaneState, PeCore, PeFigures};
use crate::network::Carried;
use crate::protocol::Cells;
use crate::rounds::Execution;
use crate::spread::{ReportTo, malformed};
use crate::timing::{Clock, PeTime, TimeReport};
use crate::trace::Trace;
use crate::two_sided::queue::Queues;
use crate::wire::{Writer, read_tiles, write_tile};

/// One participating PE at the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct PeReport {
    /// The PE.
    pub pe: PeId,
    /// Its output buffer.
    pub output: Tile,
    /// What it did: its lanes' figures added up.
    pub figures: PeFigures,
    /// What each of its lanes did, in lane order, when it runs several (none when it runs one: its
    /// figures are the lane's).
    pub lanes: ThinVec<PeFigures>,
    /// What its kernel recorded with `tl.note`, by key.
    pub notes: BTreeMap<String, String>,
}

/// The result of a completed run. Two runs of the same inputs compare equal, bit for bit, whatever the
/// thread count; a spread run's whole report is the single process's.
///
/// In a process other than 0 of a run spread over processes that report to the first
/// ([`ReportTo::First`]), the report is this process's part: its own PEs (and their
/// times), with the rounds and completion of the whole run, and no channels.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    pes: Vec<PeReport>,
    rounds: u64,
    time: Option<TimeReport>,
    /// For a part, the rank of each of `pes`.
    part: Option<Box<[u32]>>,
}

impl RunReport {
    fn new(pes: Vec<PeReport>, rounds: u64, time: Option<TimeReport>) -> Self {
        RunReport { pes, rounds, time, part: None }
    }

    /// `None` for a whole report; for one process's part of a spread run's ([`ReportTo::First`]), the
    /// rank of each of its PEs ([`RunReport::pes`], and the time report's PEs), ascending.
    pub fn part(&self) -> Option<&[u32]> {
        self.part.as_deref()
    }

    /// The simulated time, when the run was timed.
    pub fn time(&self) -> Option<&TimeReport> {
        self.time.as_ref()
    }

    /// When the last kernel finished in simulated time, ns (when the run was timed).
    pub fn completion_ns(&self) -> Option<f64> {
        self.time.as_ref().map(|t| t.completion_ns)
    }

    /// The run as a Chrome / Perfetto trace, when it was timed with `trace` on (empty tracks otherwise).
    pub fn trace(&self) -> Option<Trace> {
        let pes: Vec<PeId> = self.pes.iter().map(|p| p.pe).collect();
        self.time.as_ref().map(|time| Trace::new(&pes, time))
    }

    /// Every participant, in rank order (in a [part](RunReport::part), this process's).
    pub fn pes(&self) -> &[PeReport] {
        &self.pes
    }

    /// The output of `pe`, if it participated.
    pub fn output(&self, pe: PeId) -> Option<&Tile> {
        self.pes.binary_search_by_key(&pe, |p| p.pe).ok().map(|i| &self.pes[i].output)
    }

    /// The number of rounds the executor ran (the length of the longest chain of dependent steps).
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// The distinct values PEs recorded for `key` with `tl.note`, with how many PEs recorded each.
    pub fn note(&self, key: &str) -> BTreeMap<&str, usize> {
        let mut values = BTreeMap::new();
        for p in &self.pes {
            if let Some(v) = p.notes.get(key) {
                *values.entry(v.as_str()).or_default() += 1;
            }
        }
        values
    }

    /// The figures of all PEs added up.
    pub fn totals(&self) -> PeFigures {
        self.pes.iter().fold(PeFigures::default(), |mut t, p| {
            t += &p.figures;
            t
        })
    }
}

impl Execution<'_> {
    /// The run's report, each PE's made on `pool`'s threads when there is one.
    ///
    /// # Errors
    /// [`RunError::NonFiniteTime`] when a lane's clock is not a finite number: such a time must never be
    /// printed or written as a result.
    pub(crate) fn report(&mut self, rounds: u64, pool: Option<&rayon::ThreadPool>) -> Result<RunReport, RunError> {
        // What the rounds needed and the report does not (the queues and their slots, the ports, the
        // waits, the coroutines of kernels that did not end, how each task ended and where its
        // coroutine was) is freed first: the report's lists would otherwise come on top of it, and
        // make the end of a large run its peak of memory.
        self.two_sided.queues = Queues::none();
        self.two_sided.pes = Cells::new(Vec::new());
        self.lanes.parked = Cells::new(Vec::new());
        self.kernels = Cells::new(Vec::new());
        self.frames = Vec::new();
        let (tasks, spread) = (&self.lanes.tasks, &self.spread);
        let pes = tasks.pes();
        // The PEs this process holds (all of them unless the run is spread), and their lanes' cells.
        let held: Vec<u32> = (0..pes.len() as u32).filter(|&rank| tasks.holds(rank)).collect();
        let cells: Vec<Range<usize>> = held
            .iter()
            .map(|&rank| {
                let own = tasks.lanes_of(rank);
                let first = self.lanes.states.cell(own.start);
                first..first + own.len()
            })
            .collect();
        let mut lanes: Vec<&mut LaneState> = self.lanes.states.iter_mut().collect();
        if self.network.is_some() {
            // A lane waiting on one whose time is not finite inherits it: name the PE where it arose
            // (its own work or start delay) before any that only waited.
            let first = |check: fn(&Clock) -> Option<(&'static str, f64)>| {
                held.iter().zip(&cells).find_map(|(&rank, cells)| {
                    cells.clone().enumerate().find_map(|(lane, cell)| {
                        let task = u64::from(tasks.task(rank, lane as u32));
                        check(&lanes[cell].clock).map(|(what, value)| (task, pes[rank as usize], what, value))
                    })
                })
            };
            let all = tasks.len() as u64;
            let waited = |(task, pe, what, value)| (task + all, pe, what, value);
            let found = first(Clock::own_non_finite).or_else(|| first(Clock::non_finite).map(waited));
            let error = found
                .map(|(key, pe, what, value)| (key, RunError::NonFiniteTime { pe, what, value: value.to_string() }));
            match spread {
                Some(spread) => spread.agree(error)?,
                None => {
                    if let Some((_, error)) = error {
                        return Err(error);
                    }
                }
            }
        }
        let timed = self.network.is_some();
        let mut completion = lanes.iter().map(|l| l.clock.now).fold(0.0, f64::max);
        if let (Some(spread), true) = (spread, timed) {
            completion = spread.gather(completion)?.into_iter().fold(0.0, f64::max);
        }
        // The network model freed, what its channels carried taken out first (every process's own
        // channels' figures, where the whole report is made; a part reports no channels): the
        // channels' report and the PEs' come in its place.
        let protocol = self.network.as_ref().and_then(|network| network.protocol());
        let carried = match self.network.take() {
            None => None,
            Some(mut network) => {
                let mine = network.take_figures();
                let figures = match spread {
                    Some(spread) => spread.to_reporters(mine, FIGURES_PIECE)?,
                    None => Some(mine),
                };
                Some(match figures {
                    Some(figures) => network.carried(figures).ok_or_else(|| malformed(0))?,
                    None => Carried::default(),
                })
            }
        };
        if let Some(spread) = spread {
            spread.release_memory();
        }
        let channels = carried.map(|carried| carried.report(&self.one_sided.system, completion, pool));
        // Each PE's lanes, a slice of their own (a PE's lanes are consecutive cells, and the PEs'
        // follow each other in rank order), so that the PEs' reports are made apart: a million of
        // them take a quarter of a second of one thread.
        let mut of_pes: Vec<&mut [&mut LaneState]> = Vec::with_capacity(cells.len());
        let (mut rest, mut next) = (&mut lanes[..], 0);
        for own in &cells {
            debug_assert_eq!(own.start, next, "a PE's lanes follow the PE before's");
            let (mine, after) = std::mem::take(&mut rest).split_at_mut(own.len());
            (rest, next) = (after, own.end);
            of_pes.push(mine);
        }
        let report_pe = |((lanes, core), &rank): ((&mut [&mut LaneState], &mut PeCore), &u32)| {
            let pe = pes[rank as usize];
            let time = timed.then(|| match &mut *lanes {
                [one] => one.clock.report(completion),
                several => PeTime::of_lanes(several.iter_mut().map(|l| l.clock.report(completion)).collect()),
            });
            let (figures, lanes) = pe_figures(lanes.iter().map(|l| l.figures));
            let pe = PeReport { pe, output: core.output.clone(), figures, lanes, notes: core.take_notes() };
            (pe, time)
        };
        let (mut per_pe, mut times): (Vec<PeReport>, Vec<Option<PeTime>>) = (Vec::new(), Vec::new());
        let cores = &mut self.lanes.pes;
        match pool {
            Some(pool) => pool.install(|| {
                let each = of_pes.into_par_iter().zip(cores.par_iter_mut()).zip(held.par_iter()).map(report_pe);
                each.unzip_into_vecs(&mut per_pe, &mut times);
            }),
            None => (per_pe, times) = of_pes.into_iter().zip(cores.iter_mut()).zip(&held).map(report_pe).unzip(),
        }
        drop((lanes, cells));
        let mut part = None;
        if let Some(spread) = spread {
            // The PEs' and lanes' states are no longer needed: freed, and handed back, so that the
            // other processes' PEs (process 0's whole report) do not come on top of them.
            self.lanes.pes = Cells::new(Vec::new());
            self.lanes.states = Cells::new(Vec::new());
            spread.release_memory();
            let mine = || Shares { ranks: &held, pes: &per_pe, times: &times };
            if spread.returns_part() {
                spread.to_first(Shares::pieces(&held, &per_pe, &times), |_, _| Ok(()))?;
                part = Some(held.into_boxed_slice());
            } else {
                let mut whole = Whole::new(pes.len());
                if spread.report_to == ReportTo::Every {
                    spread.gather_each(&mine(), |from, bytes| whole.read(from, bytes, pes))?;
                    whole.place_all(held, per_pe, times);
                } else {
                    // Process 0's own PEs take their places first; the others' come a piece at a
                    // time.
                    whole.place_all(held, per_pe, times);
                    spread.release_memory();
                    spread.to_first(std::iter::empty::<Shares<'_>>(), |from, bytes| whole.read(from, bytes, pes))?;
                }
                (per_pe, times) = whole.lists().map_err(|rank| ExchangeError::Malformed {
                    from: tasks.owner(rank),
                    what: "a report without its PEs",
                })?;
            }
        }
        let time = channels.map(|channels| TimeReport {
            completion_ns: completion,
            pes: times.into_iter().map(Option::unwrap_or_default).collect(),
            channels,
            protocol,
        });
        Ok(RunReport { pes: per_pe, rounds, time, part })
    }
}

/// The most channels' figures one piece sent to process 0 carries (16 B each).
const FIGURES_PIECE: usize = 1 << 14;

/// A spread run's report as it is gathered: each PE's report and time in its rank's place.
///
/// The lists are made unwritten and a place is written when its PE comes: until then the pages of the
/// ranks still to come take no memory, so this process's own PEs' reports, placed first and then
/// freed, never sit beside the whole lists.
struct Whole {
    pes: Box<[MaybeUninit<PeReport>]>,
    times: Box<[MaybeUninit<Option<PeTime>>]>,
    /// Whether each rank's place is written.
    placed: Vec<bool>,
}

impl Whole {
    fn new(ranks: usize) -> Whole {
        Whole { pes: Box::new_uninit_slice(ranks), times: Box::new_uninit_slice(ranks), placed: vec![false; ranks] }
    }

    /// The reports and times of this process's PEs, ranks `held`.
    fn place_all(&mut self, held: Vec<u32>, pes: Vec<PeReport>, times: Vec<Option<PeTime>>) {
        for ((rank, pe), time) in held.into_iter().zip(pes).zip(times) {
            self.place(rank as usize, (pe, time));
        }
    }

    /// Rank `rank`'s report and time (the rank is in range: its PE was found), in place of any placed
    /// before.
    fn place(&mut self, rank: usize, (pe, time): (PeReport, Option<PeTime>)) {
        if std::mem::replace(&mut self.placed[rank], true) {
            // SAFETY: the rank was placed.
            unsafe { self.drop_placed(rank) };
        }
        self.pes[rank].write(pe);
        self.times[rank].write(time);
    }

    /// Drops rank `rank`'s report and time.
    ///
    /// # Safety
    /// The rank's place is written (placed and not dropped since).
    unsafe fn drop_placed(&mut self, rank: usize) {
        // SAFETY: the caller's.
        unsafe {
            self.pes[rank].assume_init_drop();
            self.times[rank].assume_init_drop();
        }
    }

    /// Places every PE's report and time that process `from` sent in `bytes` (a list of ranks and
    /// [`PeShare`]s), each as it is read: the list is never held whole.
    fn read(&mut self, from: usize, bytes: &[u8], pes: &[PeId]) -> Result<(), RunError> {
        let mut failed = None;
        let placing = Placing { whole: self, pes, from, failed: &mut failed };
        // `bincode::serialize`'s own settings.
        let options = bincode::DefaultOptions::new().with_fixint_encoding().allow_trailing_bytes();
        let read = options.deserialize_seed(placing, bytes);
        match (failed, read) {
            (Some(error), _) => Err(error),
            (None, read) => read.map_err(|_| malformed(from)),
        }
    }

    /// Every PE's report, in rank order, and time; or the first rank whose PE did not come.
    fn lists(mut self) -> Result<(Vec<PeReport>, Vec<Option<PeTime>>), u32> {
        if let Some(rank) = self.placed.iter().position(|&placed| !placed) {
            return Err(rank as u32);
        }
        self.placed.clear();
        let (pes, times) = (std::mem::take(&mut self.pes), std::mem::take(&mut self.times));
        // SAFETY: every rank's place is written.
        unsafe { Ok((pes.assume_init().into_vec(), times.assume_init().into_vec())) }
    }
}

impl Drop for Whole {
    fn drop(&mut self) {
        for rank in 0..self.placed.len() {
            if self.placed[rank] {
                // SAFETY: the rank was placed, and is dropped once, here.
                unsafe { self.drop_placed(rank) };
            }
        }
    }
}

/// Reads a process's list of ranks and [`PeShare`]s into a [`Whole`], one PE at a time; the first
/// PE that cannot be placed ends the read, its error in `failed`.
struct Placing<'a> {
    whole: &'a mut Whole,
    pes: &'a [PeId],
    from: usize,
    failed: &'a mut Option<RunError>,
}

impl<'de> DeserializeSeed<'de> for Placing<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Placing<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of ranks and their PEs' reports")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        // A piece at a time, whose outputs are read together (see [`read_tiles`]).
        let mut piece: Vec<(u64, PeShare)> = Vec::new();
        loop {
            let next = seq.next_element::<(u64, PeShare)>()?;
            let ended = next.is_none();
            piece.extend(next);
            if piece.len() == Shares::PIECE || (ended && !piece.is_empty()) {
                if let Err(error) = self.place_piece(&mut piece) {
                    *self.failed = Some(error);
                    return Err(A::Error::custom("a PE that cannot be placed"));
                }
            }
            if ended {
                return Ok(());
            }
        }
    }
}

impl Placing<'_> {
    /// Places every PE of `piece`, leaving it empty.
    fn place_piece(&mut self, piece: &mut Vec<(u64, PeShare)>) -> Result<(), RunError> {
        let from = self.from;
        let forms: Vec<Vec<u8>> = piece.iter_mut().map(|(_, share)| std::mem::take(&mut share.output)).collect();
        let outputs = read_tiles(&forms, from)?;
        drop(forms);
        for ((rank, share), output) in piece.drain(..).zip(outputs) {
            let pe = usize::try_from(rank).ok().and_then(|rank| self.pes.get(rank).map(|&pe| (rank, pe)));
            let (rank, pe) = pe.ok_or(ExchangeError::Malformed { from, what: "a PE's rank" })?;
            self.whole.place(rank, share.into_report(pe, output));
        }
        Ok(())
    }
}

/// This process's PEs' parts of the report, as the other processes read them (a list of rank and
/// [`PeShare`]), written straight from its reports and times.
struct Shares<'a> {
    ranks: &'a [u32],
    pes: &'a [PeReport],
    times: &'a [Option<PeTime>],
}

impl<'a> Shares<'a> {
    /// The most PEs one piece of a report sent to process 0 carries: about 1.5 MB of bytes for a PE
    /// of one lane and a small output, so a process's part is never held whole as bytes, on either
    /// side.
    const PIECE: usize = 1 << 13;

    /// The PEs `ranks` (reported in `pes`, timed in `times`) in pieces of at most [`Shares::PIECE`].
    fn pieces(
        ranks: &'a [u32],
        pes: &'a [PeReport],
        times: &'a [Option<PeTime>],
    ) -> impl ExactSizeIterator<Item = Shares<'a>> {
        let piece = Shares::PIECE;
        (ranks.chunks(piece).zip(pes.chunks(piece)).zip(times.chunks(piece))).map(|((ranks, pes), times)| Shares {
            ranks,
            pes,
            times,
        })
    }
}

impl Serialize for Shares<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let shares = (self.ranks.iter().zip(self.pes).zip(self.times)).map(|((&rank, pe), time)| {
            let mut output = Writer::default();
            write_tile(&mut output, &pe.output);
            let share = PeShareOf {
                output: output.bytes,
                figures: &pe.figures,
                lanes: &pe.lanes,
                notes: &pe.notes,
                time: time.as_ref(),
            };
            (u64::from(rank), share)
        });
        serializer.collect_seq(shares)
    }
}

/// A [`PeShare`] written from a PE's report and time: the same fields, in the same order.
#[derive(Serialize)]
struct PeShareOf<'a> {
    output: Vec<u8>,
    figures: &'a PeFigures,
    lanes: &'a [PeFigures],
    notes: &'a BTreeMap<String, String>,
    time: Option<&'a PeTime>,
}

/// One PE's part of the report, as a process reads it at the end of a spread run (written as
/// [`PeShareOf`]).
#[derive(Deserialize)]
pub(crate) struct PeShare {
    /// The output, in the wire's form of a tile.
    pub(crate) output: Vec<u8>,
    pub(crate) figures: PeFigures,
    pub(crate) lanes: ThinVec<PeFigures>,
    pub(crate) notes: BTreeMap<String, String>,
    pub(crate) time: Option<PeTime>,
}

impl PeShare {
    /// The report of PE `pe` from its share, its output read from the share's ([`read_tiles`]).
    pub(crate) fn into_report(self, pe: PeId, output: Tile) -> (PeReport, Option<PeTime>) {
        let report = PeReport { pe, output, figures: self.figures, lanes: self.lanes, notes: self.notes };
        (report, self.time)
    }
}

/// A PE's figures from its lanes' (in lane order): one lane's are the PE's, with no list; several
/// add up, and are listed.
fn pe_figures(mut lanes: impl ExactSizeIterator<Item = PeFigures>) -> (PeFigures, ThinVec<PeFigures>) {
    if lanes.len() == 1 {
        // Most PEs run one lane: no list to allocate.
        return (lanes.next().unwrap_or_default(), ThinVec::new());
    }
    let lanes: ThinVec<PeFigures> = lanes.collect();
    let mut sum = PeFigures::default();
    lanes.iter().for_each(|f| sum += f);
    (sum, lanes)
}

impl Execution<'_> {
    /// The report of each of the calls run together, from the run's `whole` report: each call's PEs
    /// with its output and its lanes' figures, and its lanes' times, its completion the last of its
    /// lanes' finish; the channels are the run's, in every call's report.
    pub(crate) fn split_by_call(&mut self, whole: RunReport) -> Vec<RunReport> {
        let RunReport { pes, rounds, time, .. } = whole;
        // Per rank, the outputs of the calls after the first (the first's are the whole report's).
        let later: Vec<Vec<Tile>> = (0..pes.len())
            .map(|rank| {
                let later_calls = self.lanes.pes.get(rank).rare.as_ref().map(|rare| &rare.later_calls[..]);
                later_calls.unwrap_or_default().iter().map(|[_, output, _]| output.clone()).collect()
            })
            .collect();
        let tasks = &self.lanes.tasks;
        (0..tasks.calls())
            .map(|call| {
                let output = |rank: usize, pe: &PeReport| match call {
                    0 => pe.output.clone(),
                    call => later[rank][call - 1].clone(),
                };
                let per_pe = pes.iter().enumerate().map(|(rank, pe)| {
                    let lanes = tasks.lanes_of_call(rank as u32, call);
                    let (figures, lanes) =
                        pe_figures(pe.lanes[lanes.start as usize..lanes.end as usize].iter().copied());
                    PeReport { pe: pe.pe, output: output(rank, pe), figures, lanes, notes: pe.notes.clone() }
                });
                let per_pe: Vec<PeReport> = per_pe.collect();
                let time = time.as_ref().map(|time| {
                    let times: Vec<PeTime> = (time.pes.iter().enumerate())
                        .map(|(rank, pe)| {
                            let lanes = tasks.lanes_of_call(rank as u32, call);
                            match &pe.lanes[lanes.start as usize..lanes.end as usize] {
                                [one] => one.clone(),
                                several => PeTime::of_lanes(several.iter().cloned().collect()),
                            }
                        })
                        .collect();
                    let completion_ns = times.iter().map(|t| t.finish_ns).fold(0.0, f64::max);
                    TimeReport { completion_ns, pes: times, channels: time.channels.clone(), protocol: time.protocol }
                });
                RunReport::new(per_pe, rounds, time)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_core::Dtype;

    fn report(rank: u32) -> (PeReport, Option<PeTime>) {
        let figures = PeFigures { messages_sent: u64::from(rank) + 1, ..PeFigures::default() };
        let notes = BTreeMap::from([("rank".to_string(), rank.to_string())]);
        let pe = PeReport {
            pe: PeId::new(rank, 0, 0),
            output: Tile::filled(Dtype::F32, 3, rank as f64),
            figures,
            lanes: ThinVec::new(),
            notes,
        };
        let time = PeTime { finish_ns: 10.5 * f64::from(rank), ..PeTime::default() };
        (pe, Some(time))
    }

    /// `ranks`' reports as a process writes them at a run's end.
    fn written(ranks: &[u32]) -> Vec<u8> {
        let (pes, times): (Vec<PeReport>, Vec<Option<PeTime>>) = ranks.iter().map(|&r| report(r)).unzip();
        bincode::serialize(&Shares { ranks, pes: &pes, times: &times }).unwrap()
    }

    #[test]
    fn the_lists_a_report_rarely_fills_take_one_word_each() {
        use crate::timing::ChannelTime;
        // A million PEs' report, and about twice as many channels': a PE's report, time and channel
        // take 144, 48 and 72 B, where lists of three words would take 160, 80 and 88.
        assert_eq!(size_of::<ThinVec<PeTime>>(), size_of::<usize>());
        assert_eq!((size_of::<PeReport>(), size_of::<Option<PeTime>>(), size_of::<ChannelTime>()), (144, 48, 72));
    }

    #[test]
    fn a_process_s_written_pes_are_read_into_their_ranks_places_bit_for_bit() {
        let pes: Vec<PeId> = (0..4).map(|r| PeId::new(r, 0, 0)).collect();
        let mut whole = Whole::new(4);
        whole.read(1, &written(&[1, 3]), &pes).unwrap();
        whole.read(2, &written(&[0, 2]), &pes).unwrap();
        let (pes, times) = whole.lists().unwrap();
        assert_eq!((0..4).map(|r| report(r).0).collect::<Vec<_>>(), pes);
        assert_eq!((0..4).map(|r| report(r).1).collect::<Vec<_>>(), times);
    }

    #[test]
    fn a_whole_with_a_rank_not_come_names_the_first_and_a_rank_placed_again_keeps_the_later() {
        let mut whole = Whole::new(3);
        whole.place(1, report(1));
        whole.place(1, report(2));
        assert_eq!(whole.lists().unwrap_err(), 0);
        let mut whole = Whole::new(3);
        whole.place_all(vec![0, 2], vec![report(0).0, report(7).0], vec![report(0).1, None]);
        whole.place(2, report(2));
        assert_eq!(whole.lists().unwrap_err(), 1);
        let mut whole = Whole::new(2);
        whole.place_all(vec![1, 0], vec![report(3).0, report(0).0], vec![None, report(0).1]);
        whole.place(1, report(1));
        let (pes, times) = whole.lists().unwrap();
        assert_eq!(pes, [report(0).0, report(1).0]);
        assert_eq!(times, [report(0).1, report(1).1]);
    }

    #[test]
    fn a_written_report_with_a_rank_out_of_range_or_cut_short_is_malformed_naming_its_sender() {
        let pes: Vec<PeId> = (0..2).map(|r| PeId::new(r, 0, 0)).collect();
        let error = Whole::new(2).read(3, &written(&[1, 5]), &pes).unwrap_err();
        assert_eq!(error, RunError::from(ExchangeError::Malformed { from: 3, what: "a PE's rank" }));
        let bytes = written(&[0, 1]);
        let error = Whole::new(2).read(1, &bytes[..bytes.len() - 4], &pes).unwrap_err();
        assert_eq!(error, malformed(1));
    }
}

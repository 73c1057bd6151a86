//! The transports of a spread run: the processes of one run and the way they swap bytes, and which
//! process holds which SIPs.
//!
//! Two transports: [`InMemory`], processes as threads of one program (for tests, and to try a spread
//! without MPI), and, with the `mpi` cargo feature, `Mpi` over an MPI communicator (`mpirun -np N
//! ...`). A run without one is the one-process run.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kernbench_core::System;

use crate::error::ExchangeError;

/// How long a process waits for the others at one hand-over before giving up, unless told otherwise
/// (`KERNBENCH_EXCHANGE_TIMEOUT`, in seconds): far longer than any one round of the shipped benchmarks
/// (the million-PE run's 385 rounds take seconds in all), short enough that a process whose peer died
/// ends with [`ExchangeError::Timeout`] instead of hanging.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The exchange timeout: `KERNBENCH_EXCHANGE_TIMEOUT` seconds when set, else [`DEFAULT_TIMEOUT`].
///
/// # Errors
/// [`ExchangeError::BadTimeout`] when the variable is not a positive number of seconds (at most a day).
pub fn timeout_from_env() -> Result<Duration, ExchangeError> {
    let Ok(text) = std::env::var("KERNBENCH_EXCHANGE_TIMEOUT") else { return Ok(DEFAULT_TIMEOUT) };
    let seconds = text.trim().parse::<f64>().ok().filter(|s| *s > 0.0 && *s <= 86_400.0);
    seconds.map(Duration::from_secs_f64).ok_or(ExchangeError::BadTimeout { value: text })
}

/// The processes of one run and the way they swap bytes. Every process of a run calls
/// [`Exchange::all_to_all`] the same number of times, in the same order (it is collective).
pub trait Exchange: fmt::Debug + Send + Sync {
    /// How many processes the run spans.
    fn processes(&self) -> usize;
    /// This process's index, `0..processes()`. Process 0 is the one that prints.
    fn process(&self) -> usize;
    /// Sends `to_each[p]` to process `p` (this one's own entry included) and returns what each process
    /// sent to this one, in process order.
    ///
    /// # Errors
    /// [`ExchangeError`]: a timeout, a process that is gone, or the transport's own failure.
    fn all_to_all(&self, to_each: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, ExchangeError>;

    /// Sends `mine` to every process; returns every process's, in process order.
    ///
    /// # Errors
    /// As [`Exchange::all_to_all`].
    fn all_gather(&self, mine: Vec<u8>) -> Result<Vec<Vec<u8>>, ExchangeError> {
        self.all_to_all(vec![mine; self.processes()])
    }
}

/// Which process holds which SIPs: `processes` contiguous blocks, the first `sips % processes` one SIP
/// larger, in SIP order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SipBlocks {
    sips: usize,
    processes: usize,
}

impl SipBlocks {
    /// The blocks of `system`'s SIPs for `processes` processes.
    ///
    /// # Errors
    /// [`ExchangeError::TooManyProcesses`] when `processes` is 0 or more than the SIPs.
    pub fn new(system: &System, processes: usize) -> Result<SipBlocks, ExchangeError> {
        let sips = system.sips();
        if !(1..=sips).contains(&processes) {
            return Err(ExchangeError::TooManyProcesses { processes, sips });
        }
        Ok(SipBlocks { sips, processes })
    }

    /// The SIPs of process `process`.
    pub fn sips_of(&self, process: usize) -> std::ops::Range<usize> {
        let (base, extra) = (self.sips / self.processes, self.sips % self.processes);
        let start = process * base + process.min(extra);
        start..start + base + usize::from(process < extra)
    }

    /// The process that holds SIP `sip`.
    pub fn process_of(&self, sip: usize) -> usize {
        let (base, extra) = (self.sips / self.processes, self.sips % self.processes);
        let big = extra * (base + 1);
        if sip < big { sip / (base + 1) } else { extra + (sip - big) / base }
    }

    /// How many processes.
    pub fn processes(&self) -> usize {
        self.processes
    }
}

/// Processes as threads of one program: [`InMemory::group`] makes one endpoint per process, each
/// handed to the thread that runs that process's share of a run.
///
/// # Examples
/// ```
/// use kernbench_sim::spread::{Exchange, InMemory};
/// let group = InMemory::group(2);
/// let got = std::thread::scope(|s| {
///     let runs: Vec<_> = group
///         .iter()
///         .map(|e| s.spawn(move || e.all_to_all(vec![vec![e.process() as u8, 0], vec![e.process() as u8, 1]])))
///         .collect();
///     runs.into_iter().map(|r| r.join().unwrap().unwrap()).collect::<Vec<_>>()
/// });
/// assert_eq!(got[1], vec![vec![0, 1], vec![1, 1]]);
/// ```
#[derive(Debug)]
pub struct InMemory {
    shared: Arc<Board>,
    process: usize,
    timeout: Duration,
}

#[derive(Debug)]
struct Board {
    processes: usize,
    state: Mutex<BoardState>,
    changed: Condvar,
}

#[derive(Debug)]
struct BoardState {
    /// `boxes[to][from]`: what `from` left for `to` in the hand-over under way.
    boxes: Vec<Vec<Option<Vec<u8>>>>,
    /// Processes that left their bytes in the hand-over under way.
    deposited: usize,
    /// Processes that took theirs; at `processes` the board is empty for the next hand-over.
    taken: usize,
    /// A process whose endpoint was dropped.
    gone: Option<usize>,
}

impl InMemory {
    /// One endpoint per process of a `processes`-process run, each waiting [`DEFAULT_TIMEOUT`] at most
    /// ([`InMemory::with_timeout`]).
    pub fn group(processes: usize) -> Vec<InMemory> {
        let board = Arc::new(Board {
            processes,
            state: Mutex::new(BoardState {
                boxes: vec![vec![None; processes]; processes],
                deposited: 0,
                taken: 0,
                gone: None,
            }),
            changed: Condvar::new(),
        });
        (0..processes)
            .map(|process| InMemory { shared: Arc::clone(&board), process, timeout: DEFAULT_TIMEOUT })
            .collect()
    }

    /// This endpoint with another timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> InMemory {
        self.timeout = timeout;
        self
    }

    /// Waits while `blocked` holds, up to the deadline.
    fn wait_while<'a>(
        &self,
        mut state: MutexGuard<'a, BoardState>,
        start: Instant,
        blocked: impl Fn(&BoardState) -> bool,
    ) -> Result<MutexGuard<'a, BoardState>, ExchangeError> {
        loop {
            if !blocked(&state) {
                return Ok(state);
            }
            if let Some(gone) = state.gone {
                return Err(ExchangeError::Gone { process: self.process, gone });
            }
            let left = self.timeout.checked_sub(start.elapsed()).ok_or(ExchangeError::Timeout {
                process: self.process,
                processes: self.shared.processes,
                waited_ms: start.elapsed().as_millis(),
            })?;
            state = self.shared.changed.wait_timeout(state, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

impl Exchange for InMemory {
    fn processes(&self) -> usize {
        self.shared.processes
    }

    fn process(&self) -> usize {
        self.process
    }

    fn all_to_all(&self, to_each: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, ExchangeError> {
        let swapped = self.swap(to_each);
        if swapped.is_err() {
            // A hand-over left half done cannot be finished: whoever comes to it later is told this
            // process left.
            let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            state.gone.get_or_insert(self.process);
            self.shared.changed.notify_all();
        }
        swapped
    }
}

impl InMemory {
    fn swap(&self, to_each: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, ExchangeError> {
        let (n, me, start) = (self.shared.processes, self.process, Instant::now());
        assert_eq!(to_each.len(), n, "all_to_all takes one buffer per process");
        let state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        // Every process makes the same hand-overs, and one leaves only after its last: one gone before
        // this hand-over began will never join it.
        if let Some(gone) = state.gone {
            return Err(ExchangeError::Gone { process: me, gone });
        }
        // The last hand-over must be emptied by every process before this one fills the board.
        let mut state = self.wait_while(state, start, |s| s.deposited == n)?;
        for (to, bytes) in to_each.into_iter().enumerate() {
            state.boxes[to][me] = Some(bytes);
        }
        state.deposited += 1;
        self.shared.changed.notify_all();
        let mut state = self.wait_while(state, start, |s| s.deposited < n)?;
        let got = state.boxes[me].iter_mut().map(|b| b.take().unwrap_or_default()).collect();
        state.taken += 1;
        if state.taken == n {
            (state.deposited, state.taken) = (0, 0);
            self.shared.changed.notify_all();
        }
        Ok(got)
    }
}

impl Drop for InMemory {
    fn drop(&mut self) {
        // A process that leaves while the others still wait for it must not leave them waiting; one
        // that leaves after the last hand-over blocks nobody (a wait ends as soon as it can).
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        state.gone.get_or_insert(self.process);
        self.shared.changed.notify_all();
    }
}

/// The blocks of SIPs each process holds, under their earlier name.
#[deprecated(note = "renamed to SipBlocks")]
pub type Partition = SipBlocks;

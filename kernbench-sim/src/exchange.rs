//! The hand-over between the processes of one run: what crosses process boundaries at the end of each
//! round, and the transports that carry it.
//!
//! A run spread over several processes ([`crate::Runtime::exchange`]) gives each process a contiguous
//! block of SIPs and every PE in them ([`Partition`]). A message sent in one round is visible only in the
//! next, whatever its simulated time, so each round is one bulk-synchronous step: every process polls
//! its own PEs, then all of them swap, in one [`Exchange::all_to_all`], the round's messages and
//! returned credits on queues between their blocks, the transfers to place on the channels (in an
//! [`Exchange::all_gather`] after it when they are many), barrier arrivals, and how many lanes
//! finished or failed. Every process then places every transfer in the
//! same global order on its own copy of the network model, so times never depend on who placed what.
//!
//! Two transports: [`InMemory`], processes as threads of one program (for tests, and to try a
//! partition without MPI), and, with the `mpi` cargo feature, `Mpi` over an MPI communicator
//! (`mpirun -np N ...`). A run without an exchange is the one-process run.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kernbench_core::System;

/// How long a process waits for the others at one hand-over before giving up, unless told otherwise
/// (`KERNBENCH_EXCHANGE_TIMEOUT`, in seconds): far longer than any one round of the shipped benchmarks
/// (the million-PE run's 385 rounds take 10-20 s in all on the 2-core development machine), short
/// enough that a process whose peer died ends with [`ExchangeError::Timeout`] instead of hanging.
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

/// Why a hand-over between processes failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// The other processes did not reach the hand-over in time: one died, hangs, or runs a round
    /// longer than the timeout ([`DEFAULT_TIMEOUT`], `KERNBENCH_EXCHANGE_TIMEOUT`).
    #[error(
        "exchange timeout: process {process} of {processes} waited {waited_ms} ms for the others at a hand-over between rounds; one of them died or hangs (raise KERNBENCH_EXCHANGE_TIMEOUT if a round is that long)"
    )]
    Timeout {
        /// The process that gave up.
        process: usize,
        /// The run's processes.
        processes: usize,
        /// How long it waited, in milliseconds.
        waited_ms: u128,
    },
    /// A process left the run (it ended or panicked) while the others still exchanged.
    #[error("exchange: process {gone} left the run while process {process} still exchanged")]
    Gone {
        /// The process still exchanging.
        process: usize,
        /// The process that left.
        gone: usize,
    },
    /// The transport failed.
    #[error("exchange: {0}")]
    Transport(String),
    /// Bytes from another process did not decode: processes of one run must run the same program.
    #[error(
        "exchange: process {from} sent a hand-over that does not decode ({what}); every process must run the same program"
    )]
    Malformed {
        /// The sender.
        from: usize,
        /// What did not decode.
        what: &'static str,
    },
    /// `KERNBENCH_EXCHANGE_TIMEOUT` is not a number of seconds.
    #[error("KERNBENCH_EXCHANGE_TIMEOUT is `{value}`: expected a number of seconds above 0 and at most 86400")]
    BadTimeout {
        /// What it holds.
        value: String,
    },
    /// The run's processes are more than its SIPs (each process holds at least one).
    #[error("a run on {sips} SIPs cannot be spread over {processes} processes: expected 1..={sips} processes")]
    TooManyProcesses {
        /// The run's processes.
        processes: usize,
        /// The system's SIPs.
        sips: usize,
    },
}

/// Which process holds which SIPs: `processes` contiguous blocks, the first `sips % processes` one SIP
/// larger, in SIP order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    sips: usize,
    processes: usize,
}

impl Partition {
    /// The partition of `system` over `processes`.
    ///
    /// # Errors
    /// [`ExchangeError::TooManyProcesses`] when `processes` is 0 or more than the SIPs.
    pub fn new(system: &System, processes: usize) -> Result<Partition, ExchangeError> {
        let sips = system.sips();
        if !(1..=sips).contains(&processes) {
            return Err(ExchangeError::TooManyProcesses { processes, sips });
        }
        Ok(Partition { sips, processes })
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
/// use kernbench_sim::exchange::{Exchange, InMemory};
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

/// Appends to a hand-over buffer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub(crate) bytes: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.bytes.extend_from_slice(v);
    }
}

/// Reads a hand-over buffer written by [`Writer`] in another process.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    from: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], from: usize) -> Self {
        Reader { bytes, from }
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    pub(crate) fn malformed(&self, what: &'static str) -> ExchangeError {
        ExchangeError::Malformed { from: self.from, what }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], ExchangeError> {
        if self.bytes.len() < n {
            return Err(self.malformed("it ends early"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, ExchangeError> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32, ExchangeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, ExchangeError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    pub(crate) fn f64(&mut self) -> Result<f64, ExchangeError> {
        self.u64().map(f64::from_bits)
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], ExchangeError> {
        let n = self.u64()?;
        self.take(usize::try_from(n).map_err(|_| self.malformed("a length too large"))?)
    }
}

#[cfg(feature = "mpi")]
pub use mpi_transport::Mpi;

#[cfg(feature = "mpi")]
mod mpi_transport;

//! The MPI transport: the processes of a run are those of an MPI job (`mpirun -np N ...`).

use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpi::Threading;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::request::{Request, Scope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::exchange::{Exchange, timeout_from_env};
use crate::error::ExchangeError;

/// The exit code of every process of a job whose exchange timed out.
const TIMEOUT_EXIT: i32 = 3;

/// The processes of an MPI job, over `MPI_COMM_WORLD`. Made once per program ([`Mpi::init`]); MPI is
/// finalised when it is dropped.
///
/// A hand-over that times out ([`super::timeout_from_env`]) prints [`ExchangeError::Timeout`] and
/// aborts the whole job (`MPI_Abort`): an MPI job with a dead or hung process cannot go on, and
/// aborting is what ends the others, wherever they wait.
pub struct Mpi {
    world: Mutex<SimpleCommunicator>,
    // Dropped after the communicator: finalises MPI.
    _universe: Universe,
    process: usize,
    processes: usize,
    timeout: Duration,
}

// SAFETY: MPI is initialised with `Threading::Serialized` or better (checked in `Mpi::init`), and every
// call on the communicator is made under its mutex, so no two threads are ever in MPI at once.
unsafe impl Send for Mpi {}
// SAFETY: as for `Send`.
unsafe impl Sync for Mpi {}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi").field("process", &self.process).field("processes", &self.processes).finish()
    }
}

impl Mpi {
    /// Initialises MPI for this process.
    ///
    /// # Errors
    /// [`ExchangeError::Transport`] when MPI was initialised before in this process, or cannot give
    /// the thread support the runtime needs; [`ExchangeError::BadTimeout`].
    pub fn init() -> Result<Mpi, ExchangeError> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| ExchangeError::Transport("MPI is already initialised in this process".into()))?;
        if threading < Threading::Serialized {
            return Err(ExchangeError::Transport(format!(
                "this MPI gives {threading:?} thread support; kernbench needs Serialized"
            )));
        }
        let world = universe.world();
        let (process, processes) = (world.rank() as usize, world.size() as usize);
        let timeout = timeout_from_env()?;
        Ok(Mpi { world: Mutex::new(world), _universe: universe, process, processes, timeout })
    }

    /// Whether this program was started by `mpirun` / `mpiexec` (Open MPI, MPICH or a PMIx launcher).
    pub fn launched() -> bool {
        ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"].iter().any(|v| std::env::var_os(v).is_some())
    }

    /// Waits for `request`, polling; past the timeout, prints the timeout and aborts the job.
    fn finish<'a, R: ?Sized, S: Scope<'a>>(
        &self,
        world: &SimpleCommunicator,
        start: Instant,
        request: Request<'a, R, S>,
    ) {
        let mut request = request;
        let mut spins = 0u32;
        loop {
            match request.test() {
                Ok(_) => return,
                Err(pending) => request = pending,
            }
            if start.elapsed() > self.timeout {
                let timeout = ExchangeError::Timeout {
                    process: self.process,
                    processes: self.processes,
                    waited_ms: start.elapsed().as_millis(),
                };
                // One write: `mpirun` forwards a process's output as it comes, and prints its own
                // notice of the abort, which would otherwise land inside a line written in parts.
                let _ = std::io::stderr().write_all(format!("error: {timeout}\n").as_bytes());
                world.abort(TIMEOUT_EXIT);
            }
            // Spin while a hand-over is likely close (a round's is microseconds), then give the core to
            // the other processes: more processes than cores is a common way to try a partition.
            spins += 1;
            if spins < 2_000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

impl Mpi {
    /// The byte counts and their displacements in one buffer.
    fn layout(counts: &[i32]) -> Vec<i32> {
        counts.iter().scan(0i32, |at, &c| Some(std::mem::replace(at, at.saturating_add(c)))).collect()
    }

    /// `recv`, laid out by `counts`, cut into one buffer per process: from the last, each cut off
    /// and, when large, its room given back before the next, so the pieces and what is left of `recv`
    /// are never much more than `recv` (a process's part of a spread run's report is large). A round's
    /// small hand-over keeps its room: giving it back would cost more than it frees.
    fn split(mut recv: Vec<u8>, counts: &[i32]) -> Vec<Vec<u8>> {
        const LARGE: usize = 1 << 20;
        let mut pieces: Vec<Vec<u8>> = Mpi::layout(counts)
            .iter()
            .rev()
            .map(|&at| {
                let piece = recv.split_off(at as usize);
                if piece.len() >= LARGE {
                    recv.shrink_to_fit();
                }
                piece
            })
            .collect();
        pieces.reverse();
        pieces
    }
}

fn too_large() -> ExchangeError {
    ExchangeError::Transport("a hand-over above 2 GiB".into())
}

/// The length of `bytes` as an MPI count.
fn count(bytes: &[u8]) -> Result<i32, ExchangeError> {
    i32::try_from(bytes.len()).map_err(|_| too_large())
}

/// `bytes` at an address of their own even when empty: an empty vector's address is 1, which Open MPI
/// reads as `MPI_IN_PLACE` (a process that sends or receives nothing would be refused, or worse).
fn addressed(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.capacity() == 0 {
        bytes.reserve(1);
    }
    bytes
}

/// The total of `counts`, which must fit one MPI buffer.
fn total(counts: &[i32]) -> Result<usize, ExchangeError> {
    let total: i64 = counts.iter().map(|&c| i64::from(c)).sum();
    if total > i64::from(i32::MAX) {
        return Err(too_large());
    }
    Ok(total as usize)
}

impl Exchange for Mpi {
    fn processes(&self) -> usize {
        self.processes
    }

    fn process(&self) -> usize {
        self.process
    }

    fn all_to_all(&self, to_each: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, ExchangeError> {
        assert_eq!(to_each.len(), self.processes, "all_to_all takes one buffer per process");
        let world = self.world.lock().unwrap_or_else(|e| e.into_inner());
        let start = Instant::now();
        let send_counts: Vec<i32> = to_each.iter().map(|b| count(b)).collect::<Result<_, _>>()?;
        let mut recv_counts = vec![0i32; self.processes];
        mpi::request::scope(|scope| {
            let request = world.immediate_all_to_all_into(scope, &send_counts[..], &mut recv_counts[..]);
            self.finish(&world, start, request);
        });
        let (send_displs, recv_displs) = (Mpi::layout(&send_counts), Mpi::layout(&recv_counts));
        total(&send_counts)?;
        let send = addressed(to_each.concat());
        let mut recv = addressed(vec![0u8; total(&recv_counts)?]);
        let out = Partition::new(&send[..], &send_counts[..], &send_displs[..]);
        let mut inbox = PartitionMut::new(&mut recv[..], &recv_counts[..], &recv_displs[..]);
        mpi::request::scope(|scope| {
            let request = world.immediate_all_to_all_varcount_into(scope, &out, &mut inbox);
            self.finish(&world, start, request);
        });
        Ok(Mpi::split(recv, &recv_counts))
    }

    fn all_gather(&self, mine: Vec<u8>) -> Result<Vec<Vec<u8>>, ExchangeError> {
        let world = self.world.lock().unwrap_or_else(|e| e.into_inner());
        let start = Instant::now();
        let mut counts = vec![0i32; self.processes];
        let my_count = count(&mine)?;
        mpi::request::scope(|scope| {
            let request = world.immediate_all_gather_into(scope, &my_count, &mut counts[..]);
            self.finish(&world, start, request);
        });
        let displs = Mpi::layout(&counts);
        let (mine, mut recv) = (addressed(mine), addressed(vec![0u8; total(&counts)?]));
        let mut inbox = PartitionMut::new(&mut recv[..], &counts[..], &displs[..]);
        mpi::request::scope(|scope| {
            let request = world.immediate_all_gather_varcount_into(scope, &mine[..], &mut inbox);
            self.finish(&world, start, request);
        });
        Ok(Mpi::split(recv, &counts))
    }
}

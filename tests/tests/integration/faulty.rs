//! Kernels that fail on purpose in runs spread over processes: by the in-memory exchange here, under
//! `mpirun` in `cli/tests/mpi.rs`.

use kernbench::prelude::*;

/// Rank `fails` fails once the first message around the ring has arrived.
#[ccl_kernel]
pub fn fails_on_one_rank(tl: &Tl, fails: usize) {
    let x = tl.load(Input);
    tl.send(E, &x);
    let got = tl.recv_like(W, &x);
    if tl.rank() == fails {
        let bad: usize = "not a number".parse()?;
        tl.note("never", bad);
    }
    tl.store(Output, &got);
}

/// Every rank waits for its west neighbour before sending: nobody sends.
#[ccl_kernel]
pub fn waits_before_sending(tl: &Tl) {
    let x = tl.load(Input);
    let got = tl.recv_like(W, &x);
    tl.send(E, &got);
    tl.store(Output, &got);
}

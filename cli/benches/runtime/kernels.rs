//! The kernels that time the message path (`cargo bench --bench runtime`) and show it allocates
//! nothing (`cli/tests/allocations.rs`).

use kernbench::prelude::*;

/// Rank 0 streams `count` one-element messages east; rank 1 receives them.
#[ccl_kernel]
pub fn stream(tl: &Tl, count: u64) {
    let tile = Tile::zeros(F32, 1);
    for _ in 0..count {
        if tl.rank() == 0 {
            tl.send(E, &tile);
        } else {
            let _ = tl.recv(W, 1, F32);
        }
    }
}

/// Rank 0 sends one message and waits for the answer; rank 1 answers; `count` times.
#[ccl_kernel]
pub fn ping_pong(tl: &Tl, count: u64) {
    let tile = Tile::zeros(F32, 1);
    for _ in 0..count {
        if tl.rank() == 0 {
            tl.send(E, &tile);
            let _ = tl.recv(E, 1, F32);
        } else {
            let _ = tl.recv(W, 1, F32);
            tl.send(W, &tile);
        }
    }
}

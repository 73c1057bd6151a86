//! `tl` calls inside `if`, `if let`, `for`, `while`, `loop`, `match` (guards too) and `let`-`else`.
use kernbench::prelude::*;

#[ccl_kernel]
fn kernel(tl: &Tl, rounds: usize) {
    let x = tl.load(Input);
    if tl.rank() == 0 {
        tl.send(E, &x);
    } else if tl.has(W) {
        let _ = tl.recv(W, x.len(), x.dtype());
    }
    if let Some(peer) = tl.has(E).then_some(E) {
        tl.send(peer, &x);
    }
    for round in 0..rounds {
        let piece = tl.chunk(&x, round, rounds);
        tl.send(E, &piece);
    }
    let mut remaining = rounds;
    while remaining > 0 && tl.has(W) {
        let _ = tl.recv(W, x.len(), x.dtype());
        remaining -= 1;
    }
    let received = loop {
        let y = tl.recv(W, x.len(), x.dtype());
        if !y.is_empty() {
            break y;
        }
    };
    match tl.rank() {
        0 => tl.store(Output, &received),
        r if r == tl.size() - 1 => tl.store(Scratch, &received),
        _ => {
            tl.barrier();
        }
    }
    let Some(first) = (0..rounds).next() else {
        tl.store(Output, &x);
        return;
    };
    tl.store_at(Output, first, &x)
}

fn main() {
    assert_eq!(kernel::KERNEL.params[0].name, "rounds");
}

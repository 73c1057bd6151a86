//! Helpers compose: a kernel calls a helper, which calls helpers, by name or by path.
use kernbench::prelude::*;

mod steps {
    use kernbench::prelude::*;

    #[ccl_kernel(helper)]
    pub fn exchange(tl: &Tl, mine: Tile) -> Tile {
        tl.send(E, &mine);
        tl.recv(W, mine.len(), mine.dtype())
    }

    #[ccl_kernel(helper)]
    pub(crate) fn exchange_and_add(tl: &Tl, mut acc: Tile) -> Tile {
        let theirs = exchange(tl, acc.clone());
        tl.reduce(&mut acc, &theirs, tl.op());
        acc
    }
}

/// Generic helpers are fine: they are not registered.
#[ccl_kernel(helper)]
fn rounds<F: Fn(usize) -> bool + Send>(tl: &Tl, mut acc: Tile, keep_going: F) -> Tile {
    let mut round = 0;
    while keep_going(round) {
        acc = steps::exchange_and_add(tl, acc);
        round += 1;
    }
    acc
}

#[ccl_kernel]
fn kernel(tl: &Tl, count: usize) {
    let x = tl.load(Input);
    let acc = crate::rounds(tl, x, |round| round < count);
    tl.store(Output, &acc);
}

fn main() {
    assert_eq!(kernel::KERNEL.params.len(), 1);
}

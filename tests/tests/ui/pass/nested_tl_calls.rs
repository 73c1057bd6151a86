//! `tl` calls nested in the arguments of `tl` calls, helpers and other calls are all awaited.
use kernbench::prelude::*;

#[ccl_kernel(helper)]
fn part(tl: &Tl, tile: &Tile, index: usize) -> Tile {
    tl.chunk(tile, index, tl.size())
}

#[ccl_kernel]
fn kernel(tl: &Tl) {
    let x = tl.recv(W, tl.load(Input).len(), tl.load(Input).dtype());
    tl.send(E, &tl.chunk(&x, tl.rank(), tl.size()));
    tl.send(E, &part(tl, &x, tl.program_id(0) % tl.num_programs(0)));
    let mut acc = tl.zeros(x.dtype(), x.len());
    tl.reduce(&mut acc, &tl.recv(W, x.len(), x.dtype()), tl.op());
    let total = [tl.size(), tl.rank()].iter().sum::<usize>() + std::cmp::max(tl.root(), 1);
    tl.store_at(Output, total % 2, &acc);
}

fn main() {
    let _ = &kernel::KERNEL;
}

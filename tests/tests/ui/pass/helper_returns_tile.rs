//! A helper takes any types and returns a value; a kernel calls it with `tl` first.
use kernbench::prelude::*;

#[ccl_kernel(helper)]
fn exchange(tl: &Tl, mine: &Tile, from: Direction, to: Direction) -> Tile {
    tl.send(to, mine);
    tl.recv(from, mine.len(), mine.dtype())
}

#[ccl_kernel]
fn kernel(tl: &Tl) {
    let x = tl.load(Input);
    let y = exchange(tl, &x, W, E);
    tl.store(Output, &y);
}

fn main() {
    assert_eq!(kernel::KERNEL.name, "kernel");
}

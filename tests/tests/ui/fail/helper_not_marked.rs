use kernbench::prelude::*;

// A function called with `tl` first is awaited as a helper, so it must be one.
fn exchange(tl: &Tl, mine: Tile) -> Tile {
    let _ = tl;
    mine
}

#[ccl_kernel]
fn kernel(tl: &Tl) {
    let x = tl.load(Input);
    let y = exchange(tl, x);
    tl.store(Output, &y);
}

fn main() {}

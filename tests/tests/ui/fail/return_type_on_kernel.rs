use kernbench::prelude::*;

#[ccl_kernel]
fn kernel(tl: &Tl) -> Tile {
    tl.load(Input)
}

fn main() {}

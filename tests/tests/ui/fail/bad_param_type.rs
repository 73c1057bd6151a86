use kernbench::prelude::*;

#[ccl_kernel]
fn kernel(tl: &Tl, chunks: usize, data: Tile) {
    tl.send(E, &data);
    let _ = chunks;
}

fn main() {}

use kernbench::prelude::*;

#[ccl_kernel(helper)]
fn step(tl: &Tl, x: Tile) -> Tile {
    tl.send(E, &x);
    x
}

#[ccl_kernel]
fn kernel(tl: &Tl) {
    let x = tl.load(Input);
    let y = step(tl, x).await?;
    tl.store(Output, &y);
}

fn main() {}

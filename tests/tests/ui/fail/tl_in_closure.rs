use kernbench::prelude::*;

#[ccl_kernel]
fn for_each(tl: &Tl, chunks: usize) {
    let x = tl.load(Input);
    (0..chunks).for_each(|c| tl.send(E, &x));
}

#[ccl_kernel]
fn map(tl: &Tl, chunks: usize) {
    let x = tl.load(Input);
    let parts: Vec<_> = (0..chunks).map(|c| tl.chunk(&x, c, chunks)).collect();
    tl.store(Output, &parts[0]);
}

fn main() {}

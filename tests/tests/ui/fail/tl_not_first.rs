use kernbench::prelude::*;

#[ccl_kernel]
fn kernel(chunks: usize, tl: &Tl) {
    let _ = (chunks, tl);
}

fn main() {}

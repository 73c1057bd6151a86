use kernbench::prelude::*;

#[ccl_kernel]
fn kernel<T: Into<usize>>(tl: &Tl) {
    tl.barrier();
}

fn main() {}

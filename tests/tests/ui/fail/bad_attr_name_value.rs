use kernbench::prelude::*;

#[ccl_kernel(name = 3)]
fn kernel(tl: &Tl) {
    tl.barrier();
}

fn main() {}

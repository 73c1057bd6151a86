use kernbench::prelude::*;

#[ccl_kernel(helpr)]
fn kernel(tl: &Tl) {
    tl.barrier();
}

fn main() {}

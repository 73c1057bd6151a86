use kernbench::prelude::*;

#[ccl_kernel(helper, name = "step")]
fn step(tl: &Tl) {
    tl.barrier();
}

fn main() {}

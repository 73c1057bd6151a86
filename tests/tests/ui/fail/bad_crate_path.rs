use kernbench::prelude::*;

#[ccl_kernel(crate = "kernbench core")]
fn kernel(tl: &Tl) {
    tl.barrier();
}

fn main() {}

use kernbench::prelude::*;

#[ccl_kernel]
fn kernel(tl: &Tl, (a, b): (u32, u32)) {
    let _ = (a, b);
    tl.barrier();
}

fn main() {}

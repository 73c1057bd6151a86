use kernbench::prelude::*;

#[ccl_kernel]
fn kernel(tl: &Tl) {
    let zeros = vec![tl.zeros(F32, 4); 2];
    tl.store(Output, &zeros[0]);
}

fn main() {}

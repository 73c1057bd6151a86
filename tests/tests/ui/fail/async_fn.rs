use kernbench::prelude::*;

#[ccl_kernel]
async fn kernel(tl: &Tl) {
    let x = tl.load(Input);
    tl.store(Output, &x);
}

fn main() {}

use kernbench::prelude::*;

#[ccl_kernel]
fn kernel(tl: &Tl) {
    let x = tl.load(Input);
    tl.send(E, &x).await;
}

fn main() {}

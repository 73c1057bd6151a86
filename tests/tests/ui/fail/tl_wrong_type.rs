use kernbench::prelude::*;

#[ccl_kernel]
fn by_value(tl: Tl) {
    let _ = tl;
}

fn main() {}

use kernbench::prelude::*;

#[ccl_kernel]
fn kernel() {}

fn main() {}

use kernbench::prelude::*;

#[ccl_kernel]
struct Kernel;

fn main() {}

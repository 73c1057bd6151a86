use kernbench::prelude::*;

/// `#[default]` takes a value: `#[default = 1]`.
#[ccl_kernel]
fn lanes_without_a_value(tl: &Tl, #[default] lanes: usize) {
    let _ = (tl.rank(), lanes);
}

fn main() {}

use kernbench::prelude::*;

// The runtime may poll a PE's kernel on any thread, so what it holds across a `tl` call must be `Send`.
#[ccl_kernel]
fn kernel(tl: &Tl) {
    let count = std::rc::Rc::new(1);
    tl.barrier();
    drop(count);
}

fn main() {}

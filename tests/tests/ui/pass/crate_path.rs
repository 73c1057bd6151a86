//! `crate = "..."` names another crate's `__private` module: here a module that re-exports the facade's,
//! as a crate depending on `kernbench-core` under its own name does with `crate = "kernbench_core"`.
use kernbench::prelude::*;

mod facade {
    pub use kernbench::__private;
}

/// Waits for everyone.
#[ccl_kernel(crate = "crate::facade")]
pub fn kernel(tl: &Tl) {
    tl.barrier();
}

#[ccl_kernel(helper, crate = "crate::facade")]
fn twice(tl: &Tl, n: usize) -> usize {
    tl.barrier();
    2 * n
}

fn main() {
    assert_eq!(kernel::KERNEL.name, "kernel");
    let _ = twice;
}

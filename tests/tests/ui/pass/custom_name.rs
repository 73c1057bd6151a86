//! `name = "..."` sets the registry name; the module keeps the function's name.
use kernbench::prelude::*;

/// Broadcast from the root.
#[ccl_kernel(name = "bcast_ring")]
pub fn kernel(tl: &Tl, chunks: usize) {
    let _ = chunks;
    tl.barrier();
}

fn main() {
    assert_eq!(kernel::KERNEL.name, "bcast_ring");
    let mut set = kernbench::KernelSet::new();
    set.register(&kernel::KERNEL);
    assert_eq!(set.get("bcast_ring").unwrap().params[0].name, "chunks");
}

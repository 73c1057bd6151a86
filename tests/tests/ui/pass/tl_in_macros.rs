//! `tl` calls in the arguments of expression macros are awaited, and the kernel stays `Send`.
use kernbench::prelude::*;

#[ccl_kernel]
fn kernel(tl: &Tl) {
    assert_eq!(tl.size(), tl.num_programs(2));
    assert!(tl.rank() < tl.size(), "rank {} of {}", tl.rank(), tl.size());
    println!("{} on {}", tl.rank(), tl.pe());
    let tiles = vec![tl.load(Input), tl.zeros(F32, 4)];
    let _ = format!("{:?}", tl.concat(&tiles));
}

fn main() {
    let _ = &kernel::KERNEL;
}

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

#[ccl_kernel(helper)]
fn pair(tl: &Tl) -> Vec<Tile> {
    vec![tl.zeros(F32, 1), tl.zeros(F32, 2)]
}

#[ccl_kernel]
fn tail(tl: &Tl) {
    let parts = pair(tl);
    println!("{} parts, rank {}", parts.len(), tl.rank())
}

fn main() {
    let _ = &tail::KERNEL;
    let _ = &kernel::KERNEL;
}

use kernbench::prelude::*;

struct Ring;

impl Ring {
    #[ccl_kernel]
    fn kernel(&self, tl: &Tl) {
        tl.barrier();
    }
}

fn main() {}

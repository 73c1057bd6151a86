//! The module beside a kernel has the kernel's visibility and sees the names of the kernel's module.
mod algorithms {
    pub mod ring {
        use kernbench::prelude::*;

        /// A kernel in a nested module, naming a parameter type by path.
        #[ccl_kernel]
        pub(crate) fn kernel(tl: &Tl, op: kernbench::ReduceOp, dtype: Dtype) {
            let y = tl.recv(W, 4, dtype);
            let mut acc = tl.zeros(dtype, 4);
            tl.reduce(&mut acc, &y, op);
        }
    }
}

fn main() {
    let def = &algorithms::ring::kernel::KERNEL;
    assert_eq!(def.params[0].ty, "kernbench::ReduceOp");
    let args = algorithms::ring::kernel::Args {
        op: kernbench::ReduceOp::Sum,
        dtype: kernbench::Dtype::F32,
    };
    assert_eq!(format!("{args:?}"), "Args { op: Sum, dtype: F32 }");
}

use kernbench::prelude::*;

#[ccl_kernel]
fn kernel(tl: &Tl) {
    let x = tl.load(Input);
    let later = async {
        tl.send(E, &x);
    };
    drop(later);
}

fn main() {}

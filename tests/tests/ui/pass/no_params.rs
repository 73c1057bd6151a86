//! A kernel with no parameter besides `tl`.
use kernbench::prelude::*;

#[ccl_kernel]
fn kernel(tl: &Tl) {
    let x = tl.load(Input);
    tl.store(Output, &x);
}

fn main() {
    assert!(kernel::KERNEL.params.is_empty());
    assert_eq!(kernel::KERNEL.summary, "");
    let empty = serde_json::Map::new();
    assert!(kernel::KERNEL.instantiate(&empty).is_ok());
    let unknown = kernel::KERNEL
        .instantiate(serde_json::json!({ "chunks": 4 }).as_object().unwrap())
        .err()
        .unwrap();
    assert!(
        unknown.to_string().contains("unknown field `chunks`"),
        "{unknown}"
    );
    assert!(
        unknown.to_string().contains("its parameters are: none"),
        "{unknown}"
    );
}

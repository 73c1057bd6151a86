//! Raw identifiers: the registry knows the kernel and its parameters without the `r#`.
use kernbench::prelude::*;

#[ccl_kernel]
fn r#move(tl: &Tl, r#type: String) {
    let _ = r#type;
    tl.barrier();
}

fn main() {
    assert_eq!(r#move::KERNEL.name, "move");
    assert_eq!(r#move::KERNEL.params[0].name, "type");
    let json = serde_json::json!({ "type": "ring" });
    assert!(
        r#move::KERNEL
            .instantiate(json.as_object().unwrap())
            .is_ok()
    );
}

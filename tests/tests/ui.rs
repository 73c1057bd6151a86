//! `#[ccl_kernel]`'s compile-time contract: kernels that must compile (and whose `main` checks what was
//! generated), and mistakes that must give one clear error on the offending token.
//!
//! Regenerate the `.stderr` snapshots with `TRYBUILD=overwrite cargo test -p kernbench-tests --test ui`,
//! then read every changed one.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}

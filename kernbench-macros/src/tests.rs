//! Snapshots of `expand()`'s output for representative kernels, pretty-printed.
//!
//! The expected expansions live in `tests/snapshots/<name>.expanded.rs`; run with `UPDATE_SNAPSHOTS=1`
//! to rewrite them after a deliberate change, and review the diff.

use std::path::PathBuf;

use proc_macro2::TokenStream;
use quote::quote;

/// Expands `#[ccl_kernel(args)] item` and compares the result with its snapshot.
fn snapshot(name: &str, args: TokenStream, item: TokenStream) {
    let actual = pretty(crate::expand(args, item));
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(format!("{name}.expanded.rs"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|value| value == "1") {
        std::fs::create_dir_all(path.parent().expect("snapshots have a directory")).expect("create snapshot dir");
        std::fs::write(&path, &actual).expect("write snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}; run with UPDATE_SNAPSHOTS=1 to create it", path.display()));
    if let Err(difference) = compare(&actual, &expected) {
        panic!(
            "the expansion of `{name}` differs from {}:\n{difference}\n--- actual expansion ---\n{actual}\n\
             (run with UPDATE_SNAPSHOTS=1 to accept it)",
            path.display()
        );
    }
}

/// The expansion as a file, formatted by `prettyplease`.
fn pretty(tokens: TokenStream) -> String {
    let file: syn::File = syn::parse2(tokens).expect("the expansion parses as Rust items");
    prettyplease::unparse(&file)
}

/// `Err` naming the first line where `actual` and `expected` differ.
fn compare(actual: &str, expected: &str) -> Result<(), String> {
    if actual == expected {
        return Ok(());
    }
    let (mut actual_lines, mut expected_lines) = (actual.lines(), expected.lines());
    for line in 1.. {
        match (actual_lines.next(), expected_lines.next()) {
            (Some(a), Some(e)) if a == e => {}
            (None, None) => {
                return Err("the files differ only in line endings or a final newline".to_owned());
            }
            (a, e) => {
                return Err(format!(
                    "line {line}:\n  expected: {}\n  actual:   {}",
                    e.unwrap_or("<end of file>"),
                    a.unwrap_or("<end of file>")
                ));
            }
        }
    }
    unreachable!("`1..` does not end")
}

#[test]
fn snapshot_of_a_chunked_ring_kernel() {
    snapshot(
        "ring_kernel",
        quote!(name = "ring"),
        quote! {
            /// Ring all-reduce, pipelined in `chunks` chunks.
            ///
            /// Every rank adds its neighbours' data as it travels once around the ring.
            pub fn ring_allreduce(tl: &Tl, chunks: usize, op: ReduceOp) {
                let n = tl.size();
                if n == 1 {
                    let x = tl.load(Input);
                    tl.store(Output, &x);
                    return;
                }
                let mut acc = tl.load(Input);
                let mut travelling = acc.clone();
                for _ in 1..n {
                    let mut parts = Vec::new();
                    for c in 0..chunks {
                        tl.send(E, &tl.chunk(&travelling, c, chunks));
                        let len = chunk_range(acc.len(), c, chunks).map(|range| range.len()).unwrap_or(0);
                        parts.push(tl.recv(W, len, acc.dtype()));
                    }
                    travelling = tl.concat(&parts);
                    tl.reduce(&mut acc, &travelling, op);
                }
                assert_eq!(acc.len(), tl.load(Input).len(), "the result has the input's length");
                tl.store(Output, &acc)
            }
        },
    );
}

#[test]
fn snapshot_of_a_helper_calling_a_helper() {
    snapshot(
        "helper_calls_helper",
        quote!(helper),
        quote! {
            /// Adds the west neighbour's tile to `acc`, unless it is empty.
            fn add_from_west(tl: &Tl, mut acc: Tile) -> Tile {
                let theirs = exchange(tl, acc.clone());
                let empty = |tile: &Tile| -> bool {
                    return tile.is_empty();
                };
                if empty(&theirs) {
                    return acc;
                }
                let Some(op) = Some(tl.op()) else { return acc };
                tl.reduce(&mut acc, &theirs, op);
                steps::finish_on(tl, acc, tl.size())
            }
        },
    );
}

#[test]
fn snapshot_of_a_kernel_with_its_own_errors_and_loops_in_another_crate() {
    snapshot(
        "own_errors_and_loops",
        quote!(crate = "kernbench_core"),
        quote! {
            /// Forwards `rounds` tiles to the east, each shaped like the input.
            pub fn forward(tl: &Tl, rounds: String) {
                let rounds: usize = rounds.parse()?;
                let mut x = tl.load(Input);
                let mut left = rounds;
                while left > 0 {
                    tl.send(Direction::peer(tl.rank() + 1)?, &x);
                    x = tl.recv_like(W, &x);
                    left -= 1;
                }
                loop {
                    if tl.has(E) {
                        break;
                    }
                }
                tl.store(Output, &x);
            }
        },
    );
}

#[test]
fn a_difference_fails_the_comparison() {
    assert!(compare("a\nb\n", "a\nb\n").is_ok());
    let error = compare("a\nb\n", "a\nc\n").unwrap_err();
    assert!(error.contains("line 2") && error.contains("expected: c") && error.contains("actual:   b"), "{error}");
    assert!(compare("a\n", "a\nb\n").unwrap_err().contains("<end of file>"));
    assert!(compare("a\n", "a").is_err());
}

#[test]
fn a_rejected_kernel_expands_to_its_error_and_a_stub() {
    let expanded = pretty(crate::expand(
        quote!(),
        quote!(
            fn k(tl: &Tl, data: Tile) {
                tl.send(E, &data);
            }
        ),
    ));
    assert_eq!(expanded.matches("compile_error!").count(), 1, "{expanded}");
    assert!(expanded.contains("async fn k(") && expanded.contains("data: Tile"), "{expanded}");
    assert!(expanded.contains("loop {}") && !expanded.contains("send"), "{expanded}");
    assert!(expanded.contains("pub static KERNEL"), "{expanded}");
}

#[test]
fn snapshot_of_a_kernel_on_lanes_with_a_default_parameter() {
    snapshot(
        "lanes_kernel",
        quote!(lanes = lanes),
        quote! {
            /// Each lane sends its index east.
            pub fn lane_marks(tl: &Tl, #[default = 2] lanes: usize) {
                tl.send(E, &Tile::filled(F32, 1, tl.lane() as f64));
            }
        },
    );
}

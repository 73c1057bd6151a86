//! Integration tests across kernbench's crates live in `tests/`; this library only carries the README,
//! whose Rust samples run as its doc tests so that they keep compiling and stay right.
#![doc = include_str!("../../README.md")]

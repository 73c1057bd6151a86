//! What the macro knows of `Tl`'s methods: which can wait (awaited) and which cannot fail (left as
//! written); every other method is fallible and gets `?`.
//!
//! `Tl` lives in kernbench-core, which the macro cannot see; kernbench-core's `tl` tests read these
//! lists (through the hidden `__waiting_tl_methods!` and `__infallible_tl_methods!`) and check them
//! against `Tl`'s source, so the two cannot drift apart.

/// The `async` methods of `Tl`: the steps that can wait for another PE.
pub(crate) const WAITING: &[&str] = &[
    "send",
    "send_on",
    "recv",
    "recv_on",
    "recv_like",
    "barrier",
    "barrier_in",
    "barrier_team",
    "get",
    "wait_until",
    "quiet",
    "multimem_ld_reduce",
    "atomic_fetch_add",
    "atomic_compare_swap",
    "atomic_swap",
    "atomic_fetch_max",
    "atomic_fetch_min",
    "wait_value",
    "signal_wait_until",
    "alloc",
];

/// The methods of `Tl` that return a plain value, not a `Result`.
pub(crate) const INFALLIBLE: &[&str] = &[
    "context",
    "pe",
    "rank",
    "size",
    "op",
    "root",
    "lane",
    "lanes",
    "queue_depth",
    "timing_only",
    "note",
    "has",
    "fence",
];

/// A list as an array expression of string literals: `["send", "recv"]`.
pub(crate) fn array(names: &[&str]) -> proc_macro2::TokenStream {
    quote::quote!([#(#names),*])
}

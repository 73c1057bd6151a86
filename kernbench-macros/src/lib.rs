//! `#[ccl_kernel]`: turns a plain Rust function into a kernel coroutine.
//!
//! Use it through the `kernbench` crate (`use kernbench::prelude::*;`), which re-exports it and holds
//! everything the expansion names.
//!
//! # A first kernel
//!
//! A kernel is a function whose first parameter is the `tl` handle of the PE it runs on. It reads like
//! Triton: no `async` and no `.await`, and `?` only on the kernel's own `Result`s (see below). Every PE
//! of the topology runs the same function.
//!
//! ```ignore
//! use kernbench::prelude::*;
//!
//! /// Ring all-reduce: every rank adds its neighbours' data as it travels once around the ring.
//! #[ccl_kernel]
//! pub fn ring_allreduce(tl: &Tl, chunks: usize) {
//!     let n = tl.size();
//!     let mut acc = tl.load(Input);
//!     let mut travelling = acc.clone();
//!     for _ in 1..n {
//!         let mut parts = Vec::new();
//!         for c in 0..chunks {
//!             let part = tl.chunk(&travelling, c, chunks);
//!             tl.send(E, &part);
//!             parts.push(tl.recv(W, part.len(), part.dtype()));
//!         }
//!         travelling = tl.concat(&parts);
//!         tl.reduce(&mut acc, &travelling, tl.op());
//!     }
//!     tl.finish(&mut acc, tl.op(), n);
//!     tl.store(Output, &acc);
//! }
//! ```
//!
//! The registry finds it as `ring_allreduce::KERNEL` and builds its arguments from JSON:
//!
//! ```ignore
//! let params = serde_json::json!({ "chunks": 4 });
//! let launch = ring_allreduce::KERNEL.instantiate(params.as_object().unwrap())?;
//! assert_eq!(ring_allreduce::KERNEL.params[0].name, "chunks");
//! // A missing or unknown parameter is an `ArgsError` naming the kernel and its parameters:
//! // kernel `ring_allreduce` parameters: missing field `chunks` (its parameters are: chunks: usize)
//! ```
//!
//! The workspace's `examples/first_kernel.rs` holds this kernel end to end
//! (`cargo run --example first_kernel`).
//!
//! # What the macro generates
//!
//! ```text
//! pub fn ring_allreduce<'b>(tl: &'b Tl, chunks: usize)  // every elided borrow named, so the future
//!     -> impl Future<Output = Result<(), KernelError>> + 'b {  // may hold them in any edition
//!   async move {                                // not `async fn`, whose future keeps every argument
//!                                               // twice; a signature with generics, named lifetimes,
//!                                               // `impl Trait` or `dyn` arguments stays `async fn`
//!     let n = tl.size();                        // never waits, never fails: left as written
//!     let mut acc = tl.load(Input)?;            // can fail: its error is propagated
//!     ...
//!     for _ in 1..n {
//!         __private::count_loop()?;             // the watchdog's check, at the top of every loop body
//!         ...
//!             tl.send(E, &part).await?;         // can wait: awaited, its error propagated
//!     ...
//!     tl.reduce(&mut acc, &travelling, tl.op())?;
//!     ...
//!     tl.store(Output, &acc)?;
//!     Ok(())                                    // the body's value, and every `return v`, become Ok(v)
//!   }
//! }
//!
//! pub mod ring_allreduce {                      // a module beside the fn, with the fn's visibility
//!     pub struct Args { pub chunks: usize }     // serde::Deserialize, unknown fields rejected
//!     pub static KERNEL: KernelDef = KernelDef {
//!         name: "ring_allreduce",               // or #[ccl_kernel(name = "ring")]
//!         params: &[ParamDef { name: "chunks", ty: "usize", default: None }],
//!         summary: "Ring all-reduce: ...",      // the doc comment's first paragraph
//!         instantiate,                          // JSON parameters -> Args -> a `Launch`
//!     };
//! }
//! ```
//!
//! # Helpers
//!
//! `#[ccl_kernel(helper)]` marks a step that kernels call with `tl` first. A helper may take any types
//! and return a value; it is not registered, so no module is generated. Any call whose first argument
//! is the bare `tl` is awaited, so helpers compose:
//!
//! ```ignore
//! #[ccl_kernel(helper)]
//! fn exchange(tl: &Tl, mine: Tile) -> Tile {
//!     tl.send(E, &mine);
//!     tl.recv(W, mine.len(), mine.dtype())
//! }
//!
//! #[ccl_kernel(helper)]
//! fn exchange_and_add(tl: &Tl, mut acc: Tile) -> Tile {
//!     let theirs = exchange(tl, acc.clone());       // becomes exchange(tl, acc.clone()).await?
//!     tl.reduce(&mut acc, &theirs, tl.op());
//!     acc
//! }
//! ```
//!
//! If a call with `tl` first reports "`Tile` is not a future", the function called is missing its
//! `#[ccl_kernel(helper)]`.
//!
//! # Failing on purpose
//!
//! A kernel may use `?` on a `Result` of its own whose error implements `Display` (parsing, a lookup,
//! `Direction::peer(j)?`): the macro turns its error into `KernelError::Kernel` naming the PE and
//! the error's message. `return Err(...)` is not available (the author writes no `Result`); use `?`
//! on a `Result` instead, for instance `Err::<(), _>("no route to the root")?`.
//!
//! # The watchdog
//!
//! A coroutine cannot be pre-empted, so the macro puts a cheap budget check at the top of every
//! `loop`, `while` and `for` body of a `#[ccl_kernel]` function; a runtime ends a kernel that uses up
//! its budget (a loop without end, or steps without end) with `KernelError::Watchdog`. Loops inside
//! closures, `async` blocks and plain functions a kernel calls are not checked: keep long loops in the
//! kernel or in a `#[ccl_kernel(helper)]`.
//!
//! # Rules, checked at compile time
//!
//! - The first parameter is the handle, a plain name of type `&Tl`. No `self`, no `async`, `const`,
//!   `unsafe` or `extern`.
//! - A registered kernel's other parameters are plain names of a type the registry's JSON can hold:
//!   `u8` to `u64`, `usize`, `i8` to `i64`, `isize`, `f32`, `f64`, `bool`, `String`, `ReduceOp` or
//!   `Dtype`. It is not generic and returns nothing: it writes its results with `tl.store`.
//! - `tl` calls are written without `.await` or `?` (the macro knows which methods wait and which can
//!   fail), and not inside closures or `async` blocks, which the
//!   macro cannot await into: write a `for` loop rather than `for_each` or `map`. Inside macros whose
//!   arguments are expressions (`assert_eq!(tl.load(Input).len(), 4)`, `println!`), they are
//!   completed as anywhere.
//! - A helper may take any types (generics and patterns included) and return a value.
//! - What a kernel holds across a `tl` call must be `Send`: a runtime may poll each PE on any thread.
//! - A kernel is an item of a module (not of a function body or an `impl` block): its generated module
//!   reaches it as `super::name`.
//!
//! Each mistake is one `compile_error!` on the offending token.

mod args;
mod check;
mod codegen;
mod errors;
mod model;
mod rewrite;
#[cfg(test)]
mod tests;
mod tl_api;

use proc_macro::TokenStream;
use quote::ToTokens;

use crate::args::KernelArgs;
use crate::errors::Errors;
use crate::model::Kernel;

/// Turns a plain function taking `tl: &Tl` first into a kernel coroutine.
///
/// `#[ccl_kernel]` registers it under its name, `#[ccl_kernel(name = "ring")]` under another, and
/// `#[ccl_kernel(helper)]` makes it a step that other kernels call with `tl` first. The expansion names
/// everything through `::kernbench::__private`; a crate that depends on `kernbench-core` directly
/// rather than on the facade says so with `#[ccl_kernel(crate = "kernbench_core")]` (as tokio's
/// `#[tokio::main(crate = "...")]` does), which combines with the other arguments. The function becomes
/// `async`, returning `Result<_, KernelError>`; every `tl` call that can wait, and every helper call,
/// is awaited, and the error of every `tl` call that can fail is propagated. A registered kernel gets a module of the same name holding `KERNEL` (its
/// registry entry) and `Args` (its parameters, decoded from JSON).
///
/// ```ignore
/// use kernbench::prelude::*;
///
/// /// Sends the input one step east and keeps what comes from the west.
/// #[ccl_kernel]
/// pub fn shift(tl: &Tl, rounds: usize) {
///     let mut x = tl.load(Input);
///     for _ in 0..rounds {
///         tl.send(E, &x);
///         x = tl.recv(W, x.len(), x.dtype());
///     }
///     tl.store(Output, &x);
/// }
///
/// assert_eq!(shift::KERNEL.params[0].name, "rounds");
/// ```
///
/// The `kernbench-macros` crate documentation holds the whole contract: what is generated, helpers, and
/// the mistakes rejected at compile time.
#[proc_macro_attribute]
pub fn ccl_kernel(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args.into(), item.into()).into()
}

/// The names of `Tl`'s waiting methods, which the macro awaits, as an array of `&str`: for
/// kernbench-core's test that the list matches `Tl`. Not a public API.
#[doc(hidden)]
#[proc_macro]
pub fn __waiting_tl_methods(_: TokenStream) -> TokenStream {
    tl_api::array(tl_api::WAITING).into()
}

/// The names of `Tl`'s infallible methods, which the macro leaves without `?`, as an array of `&str`:
/// for kernbench-core's test that the list matches `Tl`. Not a public API.
#[doc(hidden)]
#[proc_macro]
pub fn __infallible_tl_methods(_: TokenStream) -> TokenStream {
    tl_api::array(tl_api::INFALLIBLE).into()
}

/// Parses, checks, rewrites and generates; on any error, the errors and a stub of the function.
fn expand(args: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    let item: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(_) => {
            let error = syn::Error::new_spanned(&item, "#[ccl_kernel] applies to a function: `fn k(tl: &Tl, ...)`");
            let mut tokens = error.to_compile_error();
            tokens.extend(item);
            return tokens;
        }
    };
    let mut errors = Errors::default();
    let args = errors.extend(KernelArgs::parse(args)).unwrap_or_default();
    let kernel = errors.extend(Kernel::lower(&args, item.clone()));
    if let Some(kernel) = &kernel {
        errors.extend(check::kernel(kernel));
    }
    match (errors.finish(), kernel) {
        (Ok(()), Some(mut kernel)) => {
            rewrite::body(&mut kernel);
            codegen::kernel(&kernel)
        }
        (result, _) => {
            let mut tokens = result.err().map(|error| error.to_compile_error()).unwrap_or_default();
            codegen::stub(&item, &args).to_tokens(&mut tokens);
            tokens
        }
    }
}

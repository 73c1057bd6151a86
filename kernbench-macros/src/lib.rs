//! `#[ccl_kernel]`: turns a plain Rust function into a kernel coroutine.

use proc_macro::TokenStream;

/// Marks a kernel.
#[proc_macro_attribute]
pub fn ccl_kernel(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}

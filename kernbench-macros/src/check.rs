//! Semantic checks: what a well-formed kernel signature and body must satisfy before the rewrite.
//!
//! Each mistake gives one error, on the offending token, saying what would be valid.

use quote::quote;
use syn::visit::{self, Visit};
use syn::{Expr, Item, Macro, Signature, Type};

use crate::errors::Errors;
use crate::model::{Kernel, Kind, TlHandle, declared_return, last_segment_is, macro_args};

/// Types a registry parameter may have (by the last segment of the type's path): what the registry's
/// JSON can hold and `serde` can decode.
const SCALAR_TYPES: &[&str] = &[
    "u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize", "f32", "f64", "bool", "String", "ReduceOp",
    "Dtype",
];

/// Checks a kernel's signature and body.
///
/// # Errors
/// Every independent mistake, each on its token.
pub(crate) fn kernel(kernel: &Kernel) -> syn::Result<()> {
    let mut errors = Errors::default();
    qualifiers(&kernel.item.sig, &mut errors);
    if let Kind::Kernel { params, .. } = &kernel.kind {
        registered(&kernel.item.sig, &mut errors);
        for param in params {
            if !is_scalar(&param.ty) {
                let ty = &param.ty;
                errors.push(syn::Error::new_spanned(
                    ty,
                    format_args!(
                        "`{}` cannot be a kernel parameter: the registry passes parameters as JSON, which \
                         cannot hold it. Expected one of: {}. To pass tiles or other values between kernels, \
                         write a helper with #[ccl_kernel(helper)] and call it with `tl` first",
                        quote!(#ty),
                        SCALAR_TYPES.join(", ")
                    ),
                ));
            }
        }
    }
    let mut body = BodyCheck { tl: &kernel.tl, errors: &mut errors };
    body.visit_block(&kernel.item.block);
    errors.finish()
}

/// `async`, `const`, `unsafe` and `extern` have no place on a kernel or helper.
fn qualifiers(sig: &Signature, errors: &mut Errors) {
    if let Some(token) = &sig.asyncness {
        errors.push(syn::Error::new_spanned(
            token,
            "remove `async`: #[ccl_kernel] makes the function async itself and awaits its tl calls",
        ));
    }
    if let Some(token) = &sig.constness {
        errors.push(syn::Error::new_spanned(token, "a kernel cannot be `const`: it runs on a PE at run time"));
    }
    if let Some(token) = &sig.unsafety {
        errors.push(syn::Error::new_spanned(
            token,
            "a kernel cannot be an `unsafe fn`: put unsafe code in an `unsafe` block inside it",
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new_spanned(abi, "a kernel cannot have an ABI: remove it"));
    }
}

/// What only a registered kernel must satisfy: the registry instantiates it from JSON and runs it for
/// its effects.
fn registered(sig: &Signature, errors: &mut Errors) {
    let generics = &sig.generics;
    if !generics.params.is_empty() || generics.where_clause.is_some() {
        let message = "a registered kernel cannot be generic: the registry instantiates it from JSON \
                       parameters, which need concrete types; use concrete types, or make it a \
                       #[ccl_kernel(helper)]";
        errors.push(match &generics.where_clause {
            Some(clause) if generics.params.is_empty() => syn::Error::new_spanned(clause, message),
            _ => syn::Error::new_spanned(generics, message),
        });
    }
    if let Some(ty) = declared_return(&sig.output) {
        errors.push(syn::Error::new_spanned(
            ty,
            format_args!(
                "only helpers return values: a kernel writes its result with `tl.store(Output, &tile)`; \
                 remove `-> {}`, or mark the function #[ccl_kernel(helper)]",
                quote!(#ty)
            ),
        ));
    }
}

/// A type the registry's JSON can hold: a path ending in one of [`SCALAR_TYPES`], with no generics.
fn is_scalar(ty: &Type) -> bool {
    match ty {
        Type::Path(path) => SCALAR_TYPES.iter().any(|name| last_segment_is(path, name)),
        Type::Group(group) => is_scalar(&group.elem),
        _ => false,
    }
}

/// Finds what the rewrite cannot handle in a body: tl steps awaited or `?`-ed by hand, and tl steps
/// inside closures, async blocks or macros whose arguments are not expressions.
struct BodyCheck<'a> {
    tl: &'a TlHandle,
    errors: &'a mut Errors,
}

impl BodyCheck<'_> {
    fn error(&mut self, tokens: impl quote::ToTokens, message: impl std::fmt::Display) {
        self.errors.push(syn::Error::new_spanned(tokens, message));
    }
}

impl<'ast> Visit<'ast> for BodyCheck<'_> {
    fn visit_expr(&mut self, expr: &'ast Expr) {
        match expr {
            Expr::Try(question) => {
                if let Expr::Await(awaited) = &*question.expr {
                    if self.tl.is_step(&awaited.base) {
                        let (dot, await_, mark) = (&awaited.dot_token, &awaited.await_token, &question.question_token);
                        self.error(
                            quote!(#dot #await_ #mark),
                            "remove `.await?`: #[ccl_kernel] awaits the tl calls that wait and propagates their errors itself",
                        );
                        return self.visit_expr(&awaited.base);
                    }
                }
                if self.tl.is_step(&question.expr) {
                    self.error(
                        question.question_token,
                        "remove `?`: #[ccl_kernel] propagates the errors of tl calls itself (`?` belongs on the \
                         kernel's own `Result`s, whose errors become the PE's `KernelError::Kernel`)",
                    );
                }
            }
            Expr::Await(awaited) if self.tl.is_step(&awaited.base) => {
                let (dot, await_) = (&awaited.dot_token, &awaited.await_token);
                self.error(quote!(#dot #await_), "remove `.await`: #[ccl_kernel] awaits the tl calls that wait itself");
            }
            Expr::Closure(_) => {
                if let Some(step) = self.tl.first_step(expr) {
                    let message = format!(
                        "{} is called inside a closure, where #[ccl_kernel] cannot await it; use a `for` loop \
                         instead of a closure (`for c in 0..n {{ ... }}` rather than `for_each`/`map`)",
                        self.tl.describe(&step)
                    );
                    self.error(step, message);
                }
                return;
            }
            Expr::Async(_) => {
                if let Some(step) = self.tl.first_step(expr) {
                    let message = format!(
                        "{} is called inside an `async` block, which #[ccl_kernel] does not rewrite; write the \
                         step in the kernel's body, or move it to a #[ccl_kernel(helper)]",
                        self.tl.describe(&step)
                    );
                    self.error(step, message);
                }
                return;
            }
            _ => {}
        }
        visit::visit_expr(self, expr);
    }

    /// Nested items have their own scope: `tl` is not theirs.
    fn visit_item(&mut self, _: &'ast Item) {}

    fn visit_macro(&mut self, mac: &'ast Macro) {
        match macro_args(mac) {
            Some(args) => args.iter().for_each(|arg| self.visit_expr(arg)),
            None if self.tl.hides_step(mac) => {
                let path = &mac.path;
                self.error(
                    quote!(#path),
                    format_args!(
                        "#[ccl_kernel] cannot see the `{}` calls inside this macro's arguments to await them: \
                         bind each result with `let` first and pass the variable",
                        self.tl.0
                    ),
                );
            }
            None => {}
        }
    }
}

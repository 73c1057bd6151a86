//! The grammar of `#[ccl_kernel(...)]`'s arguments.
//!
//! ```text
//! #[ccl_kernel]                  a kernel, registered under the function's name
//! #[ccl_kernel(name = "ring")]   a kernel, registered as "ring"
//! #[ccl_kernel(helper)]          a helper: a step other kernels call, never registered
//! ```

use proc_macro2::TokenStream;
use syn::parse::Parser;
use syn::{Expr, ExprLit, Lit, LitStr, Token};

/// What the attribute's arguments ask for.
#[derive(Debug, Default)]
pub(crate) struct KernelArgs {
    /// `helper`: the function is a step of other kernels, with no registry entry.
    pub(crate) helper: bool,
    /// `name = "..."`: the registry name, when it is not the function's.
    pub(crate) name: Option<LitStr>,
}

const EXPECTED: &str = "expected `helper` or `name = \"...\"`";

impl KernelArgs {
    /// Parses the tokens between the attribute's parentheses.
    ///
    /// # Errors
    /// On the first argument that is not `helper` or `name = "<string>"`, on a repeated argument, and
    /// on `name` given to a helper.
    pub(crate) fn parse(tokens: TokenStream) -> syn::Result<KernelArgs> {
        let mut args = KernelArgs::default();
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident("helper") {
                if meta.input.peek(Token![=]) || !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                    return Err(meta.error("`helper` takes no value: write `#[ccl_kernel(helper)]`"));
                }
                if args.helper {
                    return Err(meta.error("`helper` is given twice"));
                }
                args.helper = true;
                Ok(())
            } else if meta.path.is_ident("name") {
                if args.name.is_some() {
                    return Err(meta.error("`name` is given twice"));
                }
                let value: Expr = meta.value()?.parse()?;
                match value {
                    Expr::Lit(ExprLit { lit: Lit::Str(name), .. }) if !name.value().is_empty() => {
                        args.name = Some(name);
                        Ok(())
                    }
                    other => Err(syn::Error::new_spanned(
                        other,
                        "expected the kernel's registry name as a non-empty string literal: `name = \"ring\"`",
                    )),
                }
            } else {
                Err(meta.error(format_args!("unknown argument to #[ccl_kernel]: {EXPECTED}")))
            }
        });
        parser.parse2(tokens)?;
        if let (true, Some(name)) = (args.helper, &args.name) {
            return Err(syn::Error::new_spanned(
                name,
                "a helper is not registered, so it takes no `name`: remove `name = ...` or `helper`",
            ));
        }
        Ok(args)
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::KernelArgs;

    #[test]
    fn accepts_the_three_forms() {
        let args = KernelArgs::parse(quote!()).unwrap();
        assert!(!args.helper && args.name.is_none());
        let args = KernelArgs::parse(quote!(helper)).unwrap();
        assert!(args.helper);
        let args = KernelArgs::parse(quote!(name = "ring")).unwrap();
        assert_eq!(args.name.unwrap().value(), "ring");
    }

    #[test]
    fn rejects_what_is_not_in_the_grammar() {
        for (tokens, expected) in [
            (quote!(helpr), "unknown argument"),
            (quote!(name = 3), "string literal"),
            (quote!(name = ""), "non-empty"),
            (quote!(helper = true), "takes no value"),
            (quote!(helper, helper), "given twice"),
            (quote!(helper, name = "x"), "takes no `name`"),
        ] {
            let error = KernelArgs::parse(tokens).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }
}

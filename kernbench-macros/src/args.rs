//! The grammar of `#[ccl_kernel(...)]`'s arguments.
//!
//! ```text
//! #[ccl_kernel]                  a kernel, registered under the function's name
//! #[ccl_kernel(name = "ring")]   a kernel, registered as "ring"
//! #[ccl_kernel(helper)]          a helper: a step other kernels call, never registered
//! #[ccl_kernel(lanes = 4)]       a kernel that runs as 4 lanes per PE; any expression of the
//!                                kernel's parameters: `lanes = lanes`, `lanes = 2 * rings`
//! #[ccl_kernel(crate = "kernbench_core")]
//!                                the expansion names `::kernbench_core::__private::...` instead of the
//!                                facade's `::kernbench::__private::...` (combines with the others)
//! ```

use proc_macro2::TokenStream;
use syn::parse::Parser;
use syn::{Expr, ExprLit, Lit, LitStr, Path, Token, parse_quote};

/// What the attribute's arguments ask for.
#[derive(Debug, Default)]
pub(crate) struct KernelArgs {
    /// `helper`: the function is a step of other kernels, with no registry entry.
    pub(crate) helper: bool,
    /// `name = "..."`: the registry name, when it is not the function's.
    pub(crate) name: Option<LitStr>,
    /// `crate = "..."`: the crate whose `__private` module the expansion names, when it is not the
    /// facade (a crate that depends on `kernbench-core` under its own name, as the shipped algorithms do).
    pub(crate) krate: Option<Path>,
    /// `lanes = <expr>`: how many lanes the kernel runs as per PE, from its parameters.
    pub(crate) lanes: Option<Expr>,
}

const EXPECTED: &str = "expected `helper`, `name = \"...\"`, `lanes = ...` or `crate = \"...\"`";

impl KernelArgs {
    /// `<crate>::__private`: the hidden module every generated path goes through.
    pub(crate) fn private(&self) -> TokenStream {
        let krate = self.krate();
        quote::quote!(#krate::__private)
    }

    /// The crate the expansion names, as an absolute path: `::kernbench` unless `crate = "..."` says
    /// otherwise. A path written without leading `::` is made absolute, so a user's module of the same
    /// name cannot capture it; `crate` (a kernel inside the crate that holds `__private`) stays as it is.
    pub(crate) fn krate(&self) -> Path {
        let Some(path) = &self.krate else {
            return parse_quote!(::kernbench);
        };
        let mut path = path.clone();
        if path.leading_colon.is_none() && path.segments.first().is_none_or(|first| first.ident != "crate") {
            path.leading_colon = Some(Token![::](
                path.segments.first().map_or_else(proc_macro2::Span::call_site, |first| first.ident.span()),
            ));
        }
        path
    }
}

impl KernelArgs {
    /// Parses the tokens between the attribute's parentheses.
    ///
    /// # Errors
    /// On the first argument that is not `helper`, `name = "<string>"` or `crate = "<path>"`, on a
    /// repeated argument, and on `name` given to a helper.
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
            } else if meta.path.is_ident("lanes") {
                if args.lanes.is_some() {
                    return Err(meta.error("`lanes` is given twice"));
                }
                args.lanes = Some(meta.value()?.parse()?);
                Ok(())
            } else if meta.path.is_ident("crate") {
                if args.krate.is_some() {
                    return Err(meta.error("`crate` is given twice"));
                }
                let value: Expr = meta.value()?.parse()?;
                let expected = "expected the path of the crate that re-exports kernbench's `__private` module, \
                                as a string literal: `crate = \"kernbench_core\"` (the default is `kernbench`)";
                match value {
                    Expr::Lit(ExprLit { lit: Lit::Str(path), .. }) => match path.parse::<Path>() {
                        Ok(parsed) if parsed.segments.iter().all(|s| s.arguments.is_none()) => {
                            args.krate = Some(parsed);
                            Ok(())
                        }
                        _ => Err(syn::Error::new_spanned(
                            &path,
                            format_args!("`{}` is not a crate path: {expected}", path.value()),
                        )),
                    },
                    other => Err(syn::Error::new_spanned(other, expected)),
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
        if let (true, Some(lanes)) = (args.helper, &args.lanes) {
            return Err(syn::Error::new_spanned(
                lanes,
                "a helper runs on the lanes of the kernel that calls it, so it takes no `lanes`: remove `lanes = ...` or `helper`",
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
        let args = KernelArgs::parse(quote!(lanes = 2 * rings)).unwrap();
        let lanes = args.lanes.unwrap();
        assert_eq!(quote!(#lanes).to_string(), "2 * rings");
    }

    #[test]
    fn the_crate_path_defaults_to_the_facade_and_is_made_absolute() {
        let path = |tokens| {
            let krate = KernelArgs::parse(tokens).unwrap().krate();
            quote!(#krate).to_string().replace(' ', "")
        };
        assert_eq!(path(quote!()), "::kernbench");
        assert_eq!(path(quote!(crate = "kernbench_core")), "::kernbench_core");
        assert_eq!(path(quote!(helper, crate = "::my::facade")), "::my::facade");
        assert_eq!(path(quote!(crate = "crate")), "crate");
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
            (quote!(crate = kernbench_core), "as a string literal"),
            (quote!(crate = "not a path!"), "`not a path!` is not a crate path"),
            (quote!(crate = "a::b<T>"), "is not a crate path"),
            (quote!(crate = "a", crate = "b"), "given twice"),
            (quote!(lanes = 2, lanes = 3), "given twice"),
            (quote!(helper, lanes = 2), "takes no `lanes`"),
        ] {
            let error = KernelArgs::parse(tokens).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }
}

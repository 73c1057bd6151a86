//! The kernel as the macro understands it: the original function, plus what its signature says (the
//! tl handle, the registry parameters). Syntax nodes are kept as written, so errors and generated code
//! carry the user's spans.

use proc_macro2::Span;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{
    Expr, ExprLit, FnArg, Ident, ItemFn, Lit, LitStr, Macro, Meta, Pat, PatIdent, PatType, ReturnType, Token, Type,
    TypePath,
};

use quote::ToTokens;

use crate::args::KernelArgs;
use crate::errors::Errors;

/// A `#[ccl_kernel]` function whose signature has the shape of a kernel.
#[derive(Debug)]
pub(crate) struct Kernel {
    /// The function as written (its body is rewritten in place by [`crate::rewrite`]).
    pub(crate) item: ItemFn,
    /// The name of its first parameter, the tl handle.
    pub(crate) tl: TlHandle,
    /// A registered kernel or a helper.
    pub(crate) kind: Kind,
    /// `<crate>::__private`, the module every generated path goes through (`::kernbench` by default).
    private: proc_macro2::TokenStream,
}

/// What the function is to the registry.
#[derive(Debug)]
pub(crate) enum Kind {
    /// Registered under `name`, with its parameters after `tl` decoded from the registry's JSON.
    Kernel {
        /// The registry name.
        name: String,
        /// The parameters after `tl`, in order.
        params: Vec<Param>,
        /// `lanes = <expr>`: the lanes per PE, from the parameters; `None` runs one.
        lanes: Option<Box<syn::Expr>>,
    },
    /// A step that other kernels call with `tl` first; not registered, so any parameter types.
    Helper,
}

/// A registry parameter of a kernel: `chunks: usize`, or `#[default = 1] lanes: usize`.
#[derive(Debug)]
pub(crate) struct Param {
    /// Its name as written (`r#type` stays raw; see [`Param::key`]).
    pub(crate) ident: Ident,
    /// Its type as written.
    pub(crate) ty: Box<Type>,
    /// `#[default = <expr>]`: its value when the registry's JSON leaves it out.
    pub(crate) default: Option<Expr>,
}

impl Param {
    /// The parameter's key in the registry's JSON.
    pub(crate) fn key(&self) -> String {
        syn::ext::IdentExt::unraw(&self.ident).to_string()
    }
}

impl Kernel {
    /// Reads a function's signature as a kernel's.
    ///
    /// # Errors
    /// When the function takes `self`, has no `tl: &Tl` first parameter, or (a registered kernel) a
    /// parameter that is a pattern rather than a name.
    pub(crate) fn lower(args: &KernelArgs, item: ItemFn) -> syn::Result<Kernel> {
        let tl = tl_handle(&item)?;
        let mut item = item;
        if let Some(lanes) = &args.lanes {
            mark_used_by_lanes(&mut item, lanes);
        }
        let kind = if args.helper {
            Kind::Helper
        } else {
            Kind::Kernel {
                name: registry_name(args, &item.sig.ident),
                params: registry_params(&mut item)?,
                lanes: args.lanes.clone().map(Box::new),
            }
        };
        Ok(Kernel { item, tl, kind, private: args.private() })
    }

    /// `<crate>::__private`, the module every generated path goes through.
    pub(crate) fn private(&self) -> proc_macro2::TokenStream {
        self.private.clone()
    }

    /// Whether the function declares a return type other than `()`.
    pub(crate) fn returns_value(&self) -> bool {
        declared_return(&self.item.sig.output).is_some()
    }

    /// The first paragraph of the function's doc comment on one line (a summary wrapped over several
    /// source lines stays whole), or `""`.
    pub(crate) fn summary(&self) -> String {
        let docs = self.item.attrs.iter().filter_map(|attr| match &attr.meta {
            Meta::NameValue(doc) if doc.path.is_ident("doc") => match &doc.value {
                Expr::Lit(ExprLit { lit: Lit::Str(text), .. }) => Some(text.value()),
                _ => None,
            },
            _ => None,
        });
        let lines: Vec<String> = docs
            .flat_map(|text| {
                // `split`, not `lines`: an empty `///` line is an empty string and must still end a paragraph.
                text.split('\n').map(|line| line.trim().to_owned()).collect::<Vec<_>>()
            })
            .collect();
        lines
            .iter()
            .skip_while(|line| line.is_empty())
            .take_while(|line| !line.is_empty())
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Marks the parameters that `lanes = <expr>` reads as used in the kernel's body: a parameter that only
/// sets the lane count (`lanes = lanes`) is the kernel's, read by its `Launch`, not unused.
fn mark_used_by_lanes(item: &mut ItemFn, lanes: &Expr) {
    let named: Vec<String> = lanes
        .to_token_stream()
        .into_iter()
        .filter_map(|token| match token {
            proc_macro2::TokenTree::Ident(ident) => Some(ident.to_string()),
            _ => None,
        })
        .collect();
    let used: Vec<Ident> = item
        .sig
        .inputs
        .iter()
        .filter_map(|input| match input {
            syn::FnArg::Typed(typed) => match &*typed.pat {
                syn::Pat::Ident(pat) if named.contains(&pat.ident.to_string()) => Some(pat.ident.clone()),
                _ => None,
            },
            syn::FnArg::Receiver(_) => None,
        })
        .collect();
    for ident in used.into_iter().rev() {
        item.block.stmts.insert(0, syn::parse_quote!(let _ = &#ident;));
    }
}

/// The name a kernel is registered under: `name = "..."`, or the function's name.
pub(crate) fn registry_name(args: &KernelArgs, ident: &Ident) -> String {
    args.name.as_ref().map_or_else(|| syn::ext::IdentExt::unraw(ident).to_string(), LitStr::value)
}

/// The declared return type, unless it is absent or `()`.
pub(crate) fn declared_return(output: &ReturnType) -> Option<&Type> {
    match output {
        ReturnType::Type(_, ty) if !matches!(&**ty, Type::Tuple(unit) if unit.elems.is_empty()) => Some(ty),
        _ => None,
    }
}

/// Finds the tl handle: the first parameter, a name of type `&Tl`.
fn tl_handle(item: &ItemFn) -> syn::Result<TlHandle> {
    let sig = &item.sig;
    let Some(first) = sig.inputs.first() else {
        return Err(syn::Error::new(
            sig.paren_token.span.join(),
            format_args!("a kernel takes the tl handle as its first parameter: `fn {}(tl: &Tl, ...)`", sig.ident),
        ));
    };
    let first = match first {
        FnArg::Receiver(receiver) => {
            return Err(syn::Error::new_spanned(
                receiver,
                format_args!(
                    "#[ccl_kernel] applies to free functions, not methods: a kernel cannot take `self`; move \
                     it out of the `impl` block and take the tl handle first: `fn {}(tl: &Tl, ...)`",
                    sig.ident
                ),
            ));
        }
        FnArg::Typed(first) => first,
    };
    if !is_tl_ref(&first.ty) {
        let later = sig.inputs.iter().skip(1).find_map(|arg| match arg {
            FnArg::Typed(param) if is_tl_ref(&param.ty) => Some(param),
            _ => None,
        });
        return Err(match later {
            Some(tl) => syn::Error::new_spanned(
                tl,
                format_args!(
                    "the tl handle must be the first parameter: move it before the others, `fn {}({}: &Tl, ...)`",
                    sig.ident,
                    plain_ident(tl).map_or_else(|| "tl".to_owned(), Ident::to_string),
                ),
            ),
            None => syn::Error::new_spanned(
                &first.ty,
                "expected `&Tl`: a kernel's first parameter is the tl handle, `tl: &Tl`",
            ),
        });
    }
    match plain_ident(first) {
        Some(ident) => Ok(TlHandle(ident.clone())),
        None => Err(syn::Error::new_spanned(
            &first.pat,
            "the tl handle needs a plain name, `tl: &Tl`: #[ccl_kernel] awaits the calls made through it",
        )),
    }
}

/// The registry parameters: every parameter after `tl`, each a plain name.
fn registry_params(item: &mut ItemFn) -> syn::Result<Vec<Param>> {
    let mut errors = Errors::default();
    let mut params = Vec::new();
    for arg in item.sig.inputs.iter_mut().skip(1) {
        let FnArg::Typed(param) = arg else { continue };
        let default = match take_default(param) {
            Ok(default) => default,
            Err(error) => {
                errors.push(error);
                None
            }
        };
        match plain_ident(param) {
            Some(ident) => params.push(Param { ident: ident.clone(), ty: param.ty.clone(), default }),
            None => errors.push(syn::Error::new_spanned(
                &param.pat,
                "a kernel parameter must be a plain name, like `chunks: usize`: the registry passes \
                 parameters by name; destructure inside the body instead",
            )),
        }
    }
    errors.finish().map(|()| params)
}

/// Removes a parameter's `#[default = <expr>]` (the function cannot keep an attribute Rust does not
/// know) and returns its value.
fn take_default(param: &mut PatType) -> syn::Result<Option<Expr>> {
    let mut default = None;
    let mut result = Ok(());
    param.attrs.retain(|attr| {
        if !attr.path().is_ident("default") {
            return true;
        }
        match &attr.meta {
            Meta::NameValue(value) if default.is_none() => default = Some(value.value.clone()),
            Meta::NameValue(_) => result = Err(syn::Error::new_spanned(attr, "`default` is given twice")),
            _ => {
                result = Err(syn::Error::new_spanned(
                    attr,
                    "expected `#[default = <value>]`: the parameter's value when the registry leaves it out",
                ))
            }
        }
        false
    });
    result.map(|()| default)
}

/// `name` or `mut name`, not `ref name`, `name @ ..` or a destructuring pattern.
fn plain_ident(param: &PatType) -> Option<&Ident> {
    match &*param.pat {
        Pat::Ident(PatIdent { by_ref: None, subpat: None, ident, .. }) => Some(ident),
        _ => None,
    }
}

/// `&Tl` (any path ending in `Tl`), not `&mut Tl` or `Tl`.
fn is_tl_ref(ty: &Type) -> bool {
    match ty {
        Type::Reference(reference) if reference.mutability.is_none() => {
            matches!(&*reference.elem, Type::Path(path) if last_segment_is(path, "Tl"))
        }
        Type::Group(group) => is_tl_ref(&group.elem),
        _ => false,
    }
}

/// A path type with no qualified self and no generic arguments whose last segment is `name`.
pub(crate) fn last_segment_is(path: &TypePath, name: &str) -> bool {
    path.qself.is_none()
        && path.path.segments.iter().all(|segment| segment.arguments.is_none())
        && path.path.segments.last().is_some_and(|segment| segment.ident == name)
}

/// The kernel's tl parameter, by name: what tells a tl step from any other expression.
#[derive(Clone, Debug)]
pub(crate) struct TlHandle(pub(crate) Ident);

impl TlHandle {
    /// Whether `expr` is the handle itself: `tl`.
    pub(crate) fn is_handle(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Path(path) => path.attrs.is_empty() && path.qself.is_none() && path.path.is_ident(&self.0),
            Expr::Group(group) => self.is_handle(&group.expr),
            _ => false,
        }
    }

    /// Whether `expr` is a step the macro awaits: a method call on the handle (`tl.recv(W, n, F32)`) or
    /// a helper call with the handle first (`intra_cube_ring(tl, acc)`).
    pub(crate) fn is_step(&self, expr: &Expr) -> bool {
        match expr {
            Expr::MethodCall(call) => self.is_handle(&call.receiver),
            Expr::Call(call) => {
                matches!(&*call.func, Expr::Path(_)) && call.args.first().is_some_and(|arg| self.is_handle(arg))
            }
            _ => false,
        }
    }

    /// What the rewrite adds to `expr`, when it is a step: `.await?` to a step that can wait (a waiting
    /// `tl` method or a helper call), `?` to a `tl` method that can fail, nothing to the others.
    pub(crate) fn step_kind(&self, expr: &Expr) -> Option<StepKind> {
        match expr {
            Expr::MethodCall(call) if self.is_handle(&call.receiver) => {
                let name = call.method.to_string();
                Some(if crate::tl_api::WAITING.contains(&name.as_str()) {
                    StepKind::Waits
                } else if crate::tl_api::INFALLIBLE.contains(&name.as_str()) {
                    StepKind::Infallible
                } else {
                    StepKind::Fallible
                })
            }
            _ if self.is_step(expr) => Some(StepKind::Waits),
            _ => None,
        }
    }

    /// Where to point at a step (its method or function name), for generated `.await?` and errors.
    pub(crate) fn step_span(&self, step: &Expr) -> Span {
        match step {
            Expr::MethodCall(call) => call.method.span(),
            Expr::Call(call) => call.func.span(),
            other => other.span(),
        }
    }

    /// A step as the user wrote it, shortened: `` `tl.send(..)` `` or `` `intra_cube_ring(tl, ..)` ``.
    pub(crate) fn describe(&self, step: &Expr) -> String {
        match step {
            Expr::MethodCall(call) => format!("`{}.{}(..)`", self.0, call.method),
            Expr::Call(call) => match &*call.func {
                Expr::Path(path) => {
                    let name = path.path.segments.last().map_or_else(String::new, |s| s.ident.to_string());
                    format!("`{name}({}, ..)`", self.0)
                }
                _ => format!("a call with `{}`", self.0),
            },
            _ => format!("a use of `{}`", self.0),
        }
    }

    /// The first step in `expr`, outside nested items (closures and async blocks included: this is
    /// what finds the step a closure should not hold).
    pub(crate) fn first_step(&self, expr: &Expr) -> Option<Expr> {
        struct Finder<'a> {
            tl: &'a TlHandle,
            found: Option<Expr>,
        }
        impl<'ast> Visit<'ast> for Finder<'_> {
            fn visit_expr(&mut self, expr: &'ast Expr) {
                if self.found.is_some() {
                    return;
                }
                if self.tl.is_step(expr) {
                    self.found = Some(expr.clone());
                    return;
                }
                syn::visit::visit_expr(self, expr);
            }
            fn visit_item(&mut self, _: &'ast syn::Item) {}
            fn visit_macro(&mut self, mac: &'ast Macro) {
                if let Some(args) = macro_args(mac) {
                    args.iter().for_each(|arg| self.visit_expr(arg));
                }
            }
        }
        let mut finder = Finder { tl: self, found: None };
        finder.visit_expr(expr);
        finder.found
    }

    /// Whether the tokens of a macro whose arguments are not expressions hold `tl.` (a call through the
    /// handle that the macro cannot see to await).
    pub(crate) fn hides_step(&self, mac: &Macro) -> bool {
        fn scan(tokens: proc_macro2::TokenStream, tl: &Ident) -> bool {
            let mut previous_is_tl = false;
            for token in tokens {
                match token {
                    proc_macro2::TokenTree::Punct(punct) if punct.as_char() == '.' && previous_is_tl => {
                        return true;
                    }
                    proc_macro2::TokenTree::Group(group) if scan(group.stream(), tl) => {
                        return true;
                    }
                    proc_macro2::TokenTree::Ident(ident) => {
                        previous_is_tl = ident == *tl;
                        continue;
                    }
                    _ => {}
                }
                previous_is_tl = false;
            }
            false
        }
        scan(mac.tokens.clone(), &self.0)
    }
}

/// How a step is completed in the rewritten body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StepKind {
    /// It can wait (`send`, `recv`, a helper): `.await?`.
    Waits,
    /// It returns at once but can fail (`load`, `chunk`): `?`.
    Fallible,
    /// It returns a plain value (`size`, `op`): left as written.
    Infallible,
}

/// A macro's arguments, when they are comma-separated expressions (`println!`, `assert_eq!`,
/// `format!`, `vec![a, b]`): the macro can see and rewrite the tl steps in them.
pub(crate) fn macro_args(mac: &Macro) -> Option<Punctuated<Expr, Token![,]>> {
    mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated).ok()
}

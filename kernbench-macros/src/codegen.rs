//! Code generation: the async function, and beside a registered kernel the module that the registry
//! and users name it by (`ring_allreduce::KERNEL`, `ring_allreduce::Args`).

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Block, ItemFn, ReturnType, Signature, Token, parse_quote, parse_quote_spanned};

use crate::args::KernelArgs;
use crate::model::{Kernel, Kind, Param, registry_name};

/// The expansion of a checked and rewritten kernel.
pub(crate) fn kernel(kernel: &Kernel) -> TokenStream {
    let function = future_function(&kernel.item, &kernel.item.block, &kernel.private());
    match &kernel.kind {
        Kind::Helper => function,
        Kind::Kernel { name, params, lanes } => {
            let module = module(kernel, name, params, lanes.as_deref());
            quote!(#function #module)
        }
    }
}

/// What stands in for a function the checks rejected, beside the errors: its signature, made async,
/// with a body that type-checks for any return type, and for a kernel a module holding `KERNEL`. So
/// the errors are all that is reported, and code naming the kernel still resolves.
///
/// Input:  fn ring(tl: &Tl, (a, b): (u32, u32)) { ... }
/// Output: async fn ring(tl: &Tl, (a, b): (u32, u32)) -> Result<(), KernelError> { loop {} }
///         mod ring { pub static KERNEL: KernelDef = KernelDef { .., instantiate: |_| loop {} }; }
pub(crate) fn stub(item: &ItemFn, args: &KernelArgs) -> TokenStream {
    let body: Block = parse_quote!({ loop {} });
    let private = args.private();
    // Rust does not know a parameter's `#[default = ...]`: only the expansion reads it.
    let mut item = item.clone();
    for input in &mut item.sig.inputs {
        if let syn::FnArg::Typed(param) = input {
            param.attrs.retain(|attr| !attr.path().is_ident("default"));
        }
    }
    let item = &item;
    let function = function(item, &body, &private);
    // The stub never uses its parameters; saying so would bury the errors under warnings.
    let function = quote!(#[allow(unused_variables)] #function);
    // A method's stub module would sit in an `impl` block, where modules cannot.
    if args.helper || item.sig.receiver().is_some() {
        return function;
    }
    let (vis, ident) = (&item.vis, &item.sig.ident);
    let name = registry_name(args, ident);
    let cfgs = cfgs(item);
    let module = quote_spanned! {Span::mixed_site()=>
        #(#cfgs)*
        #vis mod #ident {
            pub static KERNEL: #private::KernelDef = #private::KernelDef {
                name: #name,
                params: &[],
                summary: "",
                instantiate: |_| loop {},
            };
        }
    };
    quote!(#function #module)
}

/// The function with `body`, made async and returning `Result`. A tail that is a `tl` step becomes
/// `Ok(step.await?)`, which clippy would flag in the user's crate although the user never wrote it.
fn function(item: &ItemFn, body: &Block, private: &TokenStream) -> TokenStream {
    let ItemFn { attrs, vis, sig, .. } = item;
    let sig = async_signature(sig, private);
    quote!(#(#attrs)* #[allow(clippy::needless_question_mark)] #vis #sig #body)
}

/// The kernel or helper with `body` as a function returning its future: an `async move` block, which
/// holds each argument once, where an `async fn`'s future holds each twice (as passed, and bound to
/// its name) at every level of helpers a kernel nests, and every PE of a run holds one. A signature
/// whose borrows this cannot name in every edition stays an `async fn`
/// ([`borrowed_future_signature`]).
///
/// Input:  fn step(tl: &Tl, acc: Tile) -> Tile { body }
/// Output: fn step<'__ccl_borrows>(tl: &'__ccl_borrows Tl, acc: Tile)
///             -> impl Future<Output = Result<Tile, KernelError>> + '__ccl_borrows { async move { body } }
fn future_function(item: &ItemFn, body: &Block, private: &TokenStream) -> TokenStream {
    let Some(sig) = borrowed_future_signature(&item.sig, private) else {
        return function(item, body, private);
    };
    let ItemFn { attrs, vis, .. } = item;
    quote!(#(#attrs)* #[allow(clippy::needless_question_mark)] #vis #sig { async move #body })
}

/// The lifetime [`borrowed_future_signature`] gives every elided borrow.
const BORROWS: &str = "'__ccl_borrows";

/// `sig` returning `impl Future<Output = Result<..>> + 'b`, its elided borrows all named `'b`; `None`
/// for a signature that has anything else a future could borrow through (a receiver, generics, a named
/// lifetime, an `impl Trait` argument, `dyn`, function pointers or `Fn(..)` sugar), or no borrow.
fn borrowed_future_signature(sig: &Signature, private: &TokenStream) -> Option<Signature> {
    use syn::visit_mut::VisitMut;

    /// Names elided borrows; notes what it cannot name.
    struct Borrows {
        lifetime: syn::Lifetime,
        named: usize,
        unnameable: bool,
    }
    impl VisitMut for Borrows {
        fn visit_type_reference_mut(&mut self, reference: &mut syn::TypeReference) {
            match &reference.lifetime {
                None => reference.lifetime = Some(self.lifetime.clone()),
                Some(lifetime) if lifetime.ident == "_" => reference.lifetime = Some(self.lifetime.clone()),
                Some(_) => self.unnameable = true,
            }
            self.named += 1;
            syn::visit_mut::visit_type_reference_mut(self, reference);
        }
        fn visit_lifetime_mut(&mut self, lifetime: &mut syn::Lifetime) {
            if lifetime.ident == "_" {
                *lifetime = self.lifetime.clone();
                self.named += 1;
            } else if *lifetime != self.lifetime {
                self.unnameable = true;
            }
        }
        fn visit_type_impl_trait_mut(&mut self, _: &mut syn::TypeImplTrait) {
            self.unnameable = true;
        }
        fn visit_type_trait_object_mut(&mut self, _: &mut syn::TypeTraitObject) {
            self.unnameable = true;
        }
        fn visit_type_bare_fn_mut(&mut self, _: &mut syn::TypeBareFn) {
            self.unnameable = true;
        }
        fn visit_parenthesized_generic_arguments_mut(&mut self, _: &mut syn::ParenthesizedGenericArguments) {
            self.unnameable = true;
        }
    }

    if sig.receiver().is_some() || !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return None;
    }
    let mut sig = sig.clone();
    let lifetime = syn::Lifetime::new(BORROWS, Span::call_site());
    let mut borrows = Borrows { lifetime: lifetime.clone(), named: 0, unnameable: false };
    for input in &mut sig.inputs {
        if let syn::FnArg::Typed(param) = input {
            borrows.visit_type_mut(&mut param.ty);
        }
    }
    if let ReturnType::Type(_, ty) = &mut sig.output {
        borrows.visit_type_mut(ty);
    }
    if borrows.unnameable || borrows.named == 0 {
        return None;
    }
    sig.generics.params.push(syn::GenericParam::Lifetime(syn::LifetimeParam::new(lifetime.clone())));
    sig.constness = None;
    sig.abi = None;
    let (value, span) = returned(&sig);
    sig.output = parse_quote_spanned!(span=>
        -> impl ::core::future::Future<
            Output = #private::Result<#value, #private::KernelError>,
        > + #lifetime
    );
    Some(sig)
}

/// Input:  fn ring(tl: &Tl, chunks: usize)
/// Output: async fn ring(tl: &Tl, chunks: usize) -> Result<(), KernelError>
///
/// Input:  fn step(tl: &Tl, acc: Tile) -> Tile
/// Output: async fn step(tl: &Tl, acc: Tile) -> Result<Tile, KernelError>
fn async_signature(sig: &Signature, private: &TokenStream) -> Signature {
    let mut sig = sig.clone();
    sig.asyncness = Some(Token![async](sig.fn_token.span));
    sig.constness = None;
    sig.abi = None;
    let (value, span) = returned(&sig);
    sig.output = parse_quote_spanned!(span=> -> #private::Result<#value, #private::KernelError>);
    sig
}

/// What `sig` returns (`()` when it says nothing), and where to point at it.
fn returned(sig: &Signature) -> (TokenStream, Span) {
    match &sig.output {
        ReturnType::Default => {
            let span = sig.paren_token.span.close();
            (quote_spanned!(span=> ()), span)
        }
        ReturnType::Type(_, ty) => (ty.to_token_stream(), ty.span()),
    }
}

/// The `#[cfg]`s of the function, which its module must share.
fn cfgs(item: &ItemFn) -> impl Iterator<Item = &syn::Attribute> {
    item.attrs.iter().filter(|attr| attr.path().is_ident("cfg"))
}

/// Input:  /// Ring all-reduce.
///         #[ccl_kernel]
///         pub fn ring_allreduce(tl: &Tl, chunks: usize) { ... }
/// Output: pub mod ring_allreduce {
///             pub struct Args { pub chunks: usize }        (serde::Deserialize, unknown fields denied)
///             pub static KERNEL: KernelDef = KernelDef {
///                 name: "ring_allreduce",
///                 params: &[ParamDef { name: "chunks", ty: "usize", default: None }],
///                 summary: "Ring all-reduce.",
///                 instantiate,                           (JSON -> Args -> Instance)
///             };
///             struct Instance(Args);                     (Launch: calls super::ring_allreduce)
///         }
fn module(kernel: &Kernel, name: &str, params: &[Param], lanes: Option<&syn::Expr>) -> TokenStream {
    let item = &kernel.item;
    let private = kernel.private();
    // serde's `crate = "..."` takes the path as a string.
    let serde_crate = format!("{}::serde", private.to_string().replace(' ', ""));
    let (vis, ident) = (&item.vis, &item.sig.ident);
    let cfgs = cfgs(item);
    let summary = kernel.summary();
    let module_doc = format!(" The registry entry (`KERNEL`) and arguments (`Args`) of the kernel `{ident}`.");
    let args_doc = format!(" The parameters of the kernel `{ident}`, decoded from the registry's JSON parameters.");
    let kernel_doc = format!(" The kernel `{ident}`, registered as `{name}`.");
    let fields: Vec<_> = params.iter().map(|param| &param.ident).collect();
    let types = params.iter().map(|param| &param.ty);
    let field_docs = params.iter().map(|param| format!(" The `{}` parameter.", param.key()));
    let param_defs = params.iter().map(|param| {
        let (key, ty) = (param.key(), &param.ty);
        let ty = quote!(#ty).to_string().replace(' ', "");
        let default = match &param.default {
            Some(value) => {
                let text = quote!(#value).to_string();
                quote!(#private::Option::Some(#text))
            }
            None => quote!(#private::Option::None),
        };
        quote!(#private::ParamDef { name: #key, ty: #ty, default: #default })
    });
    // A parameter with `#[default = ...]` gets a function serde calls when the JSON leaves it out.
    let default_fns: Vec<_> = params
        .iter()
        .filter_map(|param| {
            let value = param.default.as_ref()?;
            let (name, ty) = (format_ident!("default_{}", param.key()), &param.ty);
            Some((format!("{name}"), quote!(fn #name() -> #ty { #value })))
        })
        .collect();
    let serde_defaults = params.iter().map(|param| match &param.default {
        Some(_) => {
            let name = format!("default_{}", param.key());
            quote!(#[serde(default = #name)])
        }
        None => quote!(),
    });
    let default_fns = default_fns.iter().map(|(_, f)| f);
    let mixed = Span::mixed_site();
    let tl = format_ident!("tl", span = mixed);
    // Where a kernel future that is not `Send` is reported: on the kernel's name.
    let at_name = mixed.located_at(ident.span());
    let private_at_name: TokenStream = private
        .clone()
        .into_iter()
        .map(|mut token| {
            token.set_span(at_name);
            token
        })
        .collect();
    let launch = quote_spanned! {at_name=>
        #private_at_name::Box::pin(async move { super::#ident(&#tl, #(#fields),*).await })
    };
    // `lanes = <expr>` is evaluated with the parameters bound by name, as the kernel sees them.
    let lanes = lanes.map(|lanes| {
        quote_spanned! {lanes.span()=>
            #[allow(unused_variables)]
            fn lanes(&self, _rank: usize, _size: usize) -> usize {
                let Args { #(#fields),* } = #private::Clone::clone(&self.0);
                let lanes: usize = #lanes;
                lanes
            }
        }
    });
    quote_spanned! {mixed=>
        #(#cfgs)*
        #[doc = #module_doc]
        #vis mod #ident {
            // The parameters' types are named as in the kernel's module.
            #[allow(unused_imports)]
            use super::*;

            #[doc = #args_doc]
            #[derive(
                #private::Debug,
                #private::Clone,
                #private::serde::Deserialize,
            )]
            #[serde(deny_unknown_fields, crate = #serde_crate)]
            pub struct Args {
                #(
                    #[doc = #field_docs]
                    #serde_defaults
                    pub #fields: #types,
                )*
            }

            #(#default_fns)*

            #[doc = #kernel_doc]
            pub static KERNEL: #private::KernelDef = #private::KernelDef {
                name: #name,
                params: &[#(#param_defs),*],
                summary: #summary,
                instantiate,
            };

            fn instantiate(
                params: &#private::serde_json::Map<
                    #private::String,
                    #private::serde_json::Value,
                >,
            ) -> #private::Result<
                #private::Arc<dyn #private::Launch>,
                #private::ArgsError,
            > {
                let value = #private::serde_json::Value::Object(#private::Clone::clone(params));
                match #private::serde_json::from_value::<Args>(value) {
                    #private::Result::Ok(args) => {
                        #private::Result::Ok(#private::Arc::new(Instance(args)))
                    }
                    #private::Result::Err(error) => #private::Result::Err(
                        #private::ArgsError::new(KERNEL.name, KERNEL.params, error),
                    ),
                }
            }

            struct Instance(Args);

            impl #private::Launch for Instance {
                fn launch(&self, #tl: #private::Tl) -> #private::KernelFuture {
                    let Args { #(#fields),* } = #private::Clone::clone(&self.0);
                    #launch
                }

                #lanes
            }
        }
    }
}

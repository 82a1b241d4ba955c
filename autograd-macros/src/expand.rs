//! Code generation for a validated `#[differentiable]` function, from its [`Plan`].
//!
//! The public function keeps the user's name, attributes, visibility and generics. Inside its
//! body, hidden from the rest of the module, sit the forward body as `__forward`, the VJP as
//! `__vjp`, the node type `__Node` implementing `Operation`, and the recording prologue. Every
//! path to the library goes through one alias of `<crate>::__private`; generated locals use
//! mixed-site hygiene and `__` names, so they neither clash with nor warn about the user's
//! names. One generator per emitted item: `forward.rs`, `node.rs` (with `backward.rs`),
//! `prologue.rs`; `generics.rs` gives the nested items the generics they need, and
//! `captured.rs` the compile-time checks that no plain value holds a tensor.

mod backward;
mod captured;
mod forward;
mod generics;
mod node;
mod prologue;

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};

use crate::ast::Function;
use crate::attr::Attrs;
use crate::plan::{id, Plan, Source};

pub(crate) fn expand(f: &Function, attrs: &Attrs) -> TokenStream {
    // `__private` takes the span of the user's path, so a path to the wrong crate is reported
    // there, not at the whole attribute.
    let krate = attrs.krate.as_ref().map_or_else(
        || quote!(::autograd_core::__private),
        |path| {
            let private = syn::Ident::new(
                "__private",
                path.segments
                    .last()
                    .map_or_else(proc_macro2::Span::call_site, |s| s.ident.span()),
            );
            quote!(#path::#private)
        },
    );
    // Generated code names the library through the alias the public function's body declares.
    let alias = id("__autograd");
    let plan = Plan::new(f, quote!(#alias));
    let vjp_item = f.vjp().original.to_token_stream();
    let stored: Vec<TokenStream> = plan.stored.iter().map(|s| s.ty.clone()).collect();
    let inner = generics::Inner::new(&f.original.sig.generics, &vjp_item, &stored);
    let items = [
        forward::generate(&plan),
        vjp(&plan, &inner),
        node::structure(&plan, &inner),
        node::operation(&plan, &inner, attrs.batched.is_some()),
    ];
    prologue::generate(&plan, &inner, &krate, &items)
}

/// `__vjp`: the user's VJP under a generated name, with the generics it mentions and the
/// mask's type spelled through the library's path (the user need not import `NeedsGrad`).
fn vjp(plan: &Plan, inner: &generics::Inner) -> TokenStream {
    let p = &plan.p;
    let mut v = plan.f.vjp().original.clone();
    v.sig.ident = id("__vjp");
    v.sig.generics = inner.vjp.clone();
    for (arg, input) in plan.args.iter().zip(v.sig.inputs.iter_mut().skip(1)) {
        if let (Source::Needs, syn::FnArg::Typed(t)) = (&arg.source, input) {
            *t.ty = syn::parse_quote!(&#p::NeedsGrad);
        }
    }
    quote! {
        // The macro asks for the gradients' `Option`s, and for the tuple to be spelled out
        // (it counts it), and the VJP's parameters mirror the forward's plus the cotangent
        // and the residuals, so none of these lints has a fix the user could apply.
        #[allow(clippy::unnecessary_wraps, clippy::type_complexity, clippy::too_many_arguments)]
        #v
    }
}

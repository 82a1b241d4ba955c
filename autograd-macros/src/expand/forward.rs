//! `__forward`: the user's forward body as a nested function, minus the VJP and the hoisted
//! items, keeping the residuals the VJP reads into slots the prologue passes in.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;

use crate::ast::{is_residual, BodyStmt, Input};
use crate::plan::{id, ContextSource, Plan};

/// The residuals the forward keeps, as `(index among residuals, slot)`.
pub(crate) fn kept_residuals(plan: &Plan) -> Vec<usize> {
    (0..plan.f.residuals.len())
        .filter(|&i| plan.f.vjp_reads_residual(i))
        .collect()
}

/// The type of residual `i` as the node keeps it.
pub(crate) fn residual_type(plan: &Plan, i: usize) -> TokenStream {
    let p = &plan.p;
    plan.f.residuals[i]
        .ty
        .map_or_else(|| quote!(#p::Tensor), ToTokens::to_token_stream)
}

/// Whether residual `i` is a tensor the node keeps in its version-checked context (else a
/// plain value stored in a field).
pub(crate) fn is_tensor_residual(plan: &Plan, i: usize) -> bool {
    plan.context
        .iter()
        .any(|c| matches!(c.source, ContextSource::Residual(x) if x == i))
}

/// The type of residual `i`'s slot while the forward body runs: a tensor residual travels
/// with the versions it had when bound, so a later in-place write in the body is caught.
pub(crate) fn residual_slot_type(plan: &Plan, i: usize) -> TokenStream {
    let p = &plan.p;
    let ty = residual_type(plan, i);
    if is_tensor_residual(plan, i) {
        quote!((#ty, #p::VersionSnapshot))
    } else {
        ty
    }
}

pub(crate) fn generate(plan: &Plan) -> TokenStream {
    let f = plan.f;
    let sig = &f.original.sig;
    let kept = kept_residuals(plan);
    let keep = id("__keep");
    let slots = id("__residuals");
    let slot_types = kept.iter().map(|&i| residual_slot_type(plan, i));
    let extra = if kept.is_empty() {
        quote!()
    } else {
        quote!(#keep: bool, #slots: &mut (#(::core::option::Option<#slot_types>,)*),)
    };
    let stmts = f.body.iter().map(|s| match s {
        BodyStmt::Keep(stmt) => stmt.to_token_stream(),
        BodyStmt::Hoist(_) | BodyStmt::Vjp => quote!(),
        BodyStmt::Residual(i) => {
            let r = &f.residuals[*i];
            let mut local = r.original.clone();
            local.attrs.retain(|a| !is_residual(a));
            let Some(slot) = kept.iter().position(|k| k == i) else {
                return local.into_token_stream();
            };
            let ident = r.ident.expect("validated residual name");
            let index = syn::Index::from(slot);
            let span = r.original.span();
            let p = &plan.p;
            let kept_value = if is_tensor_residual(plan, *i) {
                quote!((::core::clone::Clone::clone(&#ident), #p::VersionSnapshot::of(&#ident)))
            } else {
                quote!(::core::clone::Clone::clone(&#ident))
            };
            let keep_value = quote_spanned! {span=>
                if #keep {
                    #slots.#index = ::core::option::Option::Some(#kept_value);
                }
            };
            quote!(#local #keep_value)
        }
    });
    // A parameter the forward body need not read is used all the same: a tensor input is
    // saved for the VJP, a captured parameter the VJP reads is stored in the node.
    let used_elsewhere = f
        .params
        .iter()
        .filter(|param| match param.input {
            Input::Tensor { .. } | Input::OptionalTensor { .. } | Input::TensorSlice { .. } => true,
            Input::Captured | Input::Options => f.vjp_reads_param(param),
            Input::Unsupported => false,
        })
        .filter_map(|param| param.ident);
    let params = f.params.iter().map(|param| param.original);
    let ident = id("__forward");
    let output = &sig.output;
    let generics = &sig.generics;
    let where_clause = &sig.generics.where_clause;
    quote! {
        // The public function returns `Result` whatever the body needs; the residual plumbing
        // adds two arguments the user did not write.
        #[allow(clippy::unnecessary_wraps, clippy::too_many_arguments)]
        fn #ident #generics (#(#params,)* #extra) #output
        #where_clause
        {
            #(let _ = &#used_elsewhere;)*
            #(#stmts)*
        }
    }
}

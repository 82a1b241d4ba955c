//! The public function: the user's signature returning `Result<Tensor>` (or `Result<(Tensor,
//! ...)>` for several outputs), the nested items, then the prologue that snapshots the inputs,
//! runs the forward body and records the node (one node for all outputs).

use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::ReturnType;

use crate::ast::BodyStmt;
use crate::expand::captured;
use crate::expand::forward::{is_tensor_residual, kept_residuals, residual_slot_type};
use crate::expand::generics::Inner;
use crate::plan::{id, numbered, ContextSource, InputKind, Plan, StoredInit};

/// `krate` is `<crate>::__private`, used where the alias the body declares is not in scope
/// (the signature).
pub(crate) fn generate(
    plan: &Plan,
    g: &Inner,
    krate: &TokenStream,
    items: &[TokenStream],
) -> TokenStream {
    let p = &plan.p;
    let f = plan.f;
    let item = f.original;
    let sig = &item.sig;
    let name = plan.name();

    let (result, rec, record_inputs, captures) = (
        id("__result"),
        id("__rec"),
        id("__record_inputs"),
        id("__captures"),
    );
    let (context, versions, layout, saved, counts, names) = (
        id("__context"),
        id("__versions"),
        id("__layout"),
        id("__saved"),
        id("__counts"),
        id("__names"),
    );

    // Owned tensor inputs move into the forward body: the recording keeps clones.
    let owned: Vec<_> = plan
        .inputs
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            matches!(
                t.kind,
                InputKind::One { by_ref: false } | InputKind::Optional { by_ref: false }
            )
        })
        .map(|(k, t)| (k, numbered("__input", k), t))
        .collect();
    let clone_inputs = owned.iter().map(|(_, v, t)| {
        let ident = t.ident;
        let ty = t.param.ty;
        quote!(let #v: #ty = ::core::clone::Clone::clone(&#ident);)
    });
    let reference = |k: usize| -> TokenStream {
        let t = &plan.inputs[k];
        match owned.iter().find(|(i, _, _)| *i == k) {
            Some((_, v, _)) if matches!(t.kind, InputKind::Optional { .. }) => quote!(#v.as_ref()),
            Some((_, v, _)) => quote!(&#v),
            None => {
                let ident = t.ident;
                quote!(#ident)
            }
        }
    };
    let collect_inputs = if plan.dynamic() {
        let fixed = plan
            .inputs
            .iter()
            .filter(|t| !matches!(t.kind, InputKind::Slice { .. }))
            .count();
        let slices = plan
            .inputs
            .iter()
            .filter(|t| matches!(t.kind, InputKind::Slice { .. }))
            .map(|t| t.ident);
        let pushes = plan.inputs.iter().enumerate().map(|(k, t)| {
            let r = reference(k);
            match t.kind {
                InputKind::One { .. } => quote!(#record_inputs.push(#r);),
                InputKind::Optional { .. } => quote! {
                    if let ::core::option::Option::Some(__t) = #r {
                        #record_inputs.push(__t);
                    }
                },
                InputKind::Slice { elem_ref: false } => quote!(#record_inputs.extend(#r.iter());),
                InputKind::Slice { elem_ref: true } => {
                    quote!(#record_inputs.extend(#r.iter().copied());)
                }
            }
        });
        let count_exprs = plan.inputs.iter().enumerate().filter_map(|(k, t)| {
            let r = reference(k);
            match t.kind {
                InputKind::One { .. } => None,
                InputKind::Optional { .. } => Some(quote!(usize::from(#r.is_some()))),
                InputKind::Slice { .. } => Some(quote!(#r.len())),
            }
        });
        let n = plan.n_counts;
        quote! {
            let mut #record_inputs: ::std::vec::Vec<&#p::Tensor> =
                ::std::vec::Vec::with_capacity(#fixed #(+ #slices.len())*);
            #(#pushes)*
            let #counts: [usize; #n] = [#(#count_exprs),*];
        }
    } else {
        let n = plan.inputs.len();
        let refs = (0..n).map(reference);
        quote!(let #record_inputs: [&#p::Tensor; #n] = [#(#refs),*];)
    };

    // Parameters taken by value are cloned for the node before forward consumes them.
    let owned_caps: Vec<_> = plan
        .stored
        .iter()
        .filter_map(|s| match s.init {
            StoredInit::OwnedParam(ident) => Some(ident),
            _ => None,
        })
        .enumerate()
        .map(|(i, ident)| (ident, numbered("__capture", i)))
        .collect();
    let cap_sources = owned_caps.iter().map(|(ident, _)| ident);
    let cap_vars: Vec<_> = owned_caps.iter().map(|(_, v)| v).collect();

    let kept = kept_residuals(plan);
    let slots = id("__residuals");
    let residual_init = (!kept.is_empty()).then(|| {
        let types: Vec<_> = kept.iter().map(|&i| residual_slot_type(plan, i)).collect();
        quote! {
            let mut #slots: (#(::core::option::Option<#types>,)*) =
                (#(::core::option::Option::<#types>::None,)*);
        }
    });
    let residual_var = |i: usize| numbered("__residual", i);
    let residual_versions = |i: usize| numbered("__residual_versions", i);
    let take_residuals = kept.iter().enumerate().map(|(slot, &i)| {
        let v = residual_var(i);
        let bound = if is_tensor_residual(plan, i) {
            let versions = residual_versions(i);
            quote!((#v, #versions))
        } else {
            quote!(#v)
        };
        let index = syn::Index::from(slot);
        let rname = f.residuals[i]
            .ident
            .map(ToString::to_string)
            .unwrap_or_default();
        quote! {
            let ::core::option::Option::Some(#bound) = #slots.#index else {
                return ::core::result::Result::Err(#p::missing_residual(#name, #rname));
            };
        }
    });

    let forward_args = f.params.iter().map(|param| param.ident);
    let forward_extra = (!kept.is_empty()).then(|| quote!(#rec.is_some(), &mut #slots,));
    // Spanned by the return type: a `Result` whose error is not autograd_core's is reported there.
    let try_forward = f.output.fallible.then(|| {
        let span = match &sig.output {
            ReturnType::Type(_, ty) => ty.span(),
            ReturnType::Default => sig.ident.span(),
        };
        quote_spanned!(span=> ?)
    });
    let forward = id("__forward");
    let forward_turbofish = &g.forward_turbofish;
    // One output is `__result`; several are `__result0, __result1, ...`, returned as a tuple.
    let results: Vec<_> = (0..plan.outputs)
        .map(|k| {
            if plan.several() {
                numbered("__result", k)
            } else {
                result.clone()
            }
        })
        .collect();
    let n_outputs = plan.outputs;
    // The results' type through `path` (the alias in the body, `krate` in the signature).
    let result_type = |path: &TokenStream| {
        if plan.several() {
            let tensors = results.iter().map(|_| quote!(#path::Tensor));
            quote!((#(#tensors,)*))
        } else {
            quote!(#path::Tensor)
        }
    };
    let result_ty = result_type(p);
    let sig_result = result_type(krate);
    let returned = if plan.several() {
        quote!((#(#results,)*))
    } else {
        quote!(#result)
    };
    let unpack = plan
        .several()
        .then(|| quote!(let (#(#results,)*) = #result;));
    let guard = id("__guard");
    let forward_call = quote! {
        let #result: #result_ty = {
            let #guard = #p::no_grad();
            #forward #forward_turbofish (#(#forward_args,)* #forward_extra)
        }#try_forward;
    };

    let n_context = plan.context.len();
    let context_init = if n_context == 0 {
        quote!(let #context: ::std::vec::Vec<#p::Tensor> = ::std::vec::Vec::new();)
    } else {
        let exprs = plan.context.iter().map(|c| match c.source {
            ContextSource::Output(k) => {
                let r = &results[k];
                quote!(#r.detach())
            }
            ContextSource::Residual(i) => {
                let v = residual_var(i);
                quote!(#v)
            }
        });
        // A residual's versions are the ones it had when bound; a result's are taken now.
        let snapshots = plan
            .context
            .iter()
            .enumerate()
            .map(|(c, entry)| match entry.source {
                ContextSource::Residual(i) => {
                    let versions = residual_versions(i);
                    quote!(#versions)
                }
                ContextSource::Output(_) => {
                    let c = Literal::usize_unsuffixed(c);
                    quote!(#p::VersionSnapshot::of(&#context[#c]))
                }
            });
        quote! {
            let #context: ::std::vec::Vec<#p::Tensor> = ::std::vec![#(#exprs),*];
            let #versions = [#(#snapshots),*];
        }
    };
    let node_context = (n_context > 0).then(|| quote!(#versions,));
    let node_dynamic = plan.dynamic().then(|| {
        quote! {
            #counts,
            #names: ::std::sync::OnceLock::new(),
        }
    });
    let node_values = plan.stored.iter().map(|s| {
        let field = &s.field;
        let value = match s.init {
            StoredInit::OwnedParam(ident) => {
                let (_, v) = owned_caps
                    .iter()
                    .find(|(i, _)| *i == ident)
                    .expect("owned capture");
                quote!(#v)
            }
            StoredInit::BorrowedParam(ident, elem) => {
                quote!(<#elem as ::std::borrow::ToOwned>::to_owned(#ident))
            }
            StoredInit::Residual(i) => {
                let v = residual_var(i);
                quote!(#v)
            }
        };
        quote!(#field: #value,)
    });
    let marker = (!g.phantom.is_empty()).then(|| {
        let m = id("__marker");
        quote!(#m: ::core::marker::PhantomData,)
    });
    let node = id("__Node");
    let node_turbofish = &g.node_turbofish;

    let any_differentiable = results.iter().map(|r| quote!(#r.is_differentiable()));
    let finish = if plan.several() {
        let outputs = id("__outputs");
        quote! {
            let #outputs = [#(#p::OutputInfo::of(&#results)),*];
            let [#(#results),*] = #p::finish_several::<#n_outputs, _>(#rec, [#(#results),*], #context, move |#saved| #node #node_turbofish {
                #saved,
                #marker
                #outputs,
                #node_context
                #node_dynamic
                #(#node_values)*
            })?;
            ::core::result::Result::Ok(#returned)
        }
    } else {
        quote! {
            let #layout = #p::kept_layout(&#result);
            ::core::result::Result::Ok(#rec.finish(#result, #context, move |#saved| #node #node_turbofish {
                #saved,
                #marker
                #layout,
                #node_context
                #node_dynamic
                #(#node_values)*
            }))
        }
    };
    let checks = captured::value_checks(plan);
    let hoisted = f.body.iter().filter_map(|s| match s {
        BodyStmt::Hoist(item) => Some(*item),
        _ => None,
    });

    // The signature: the user's, returning `Result` of its output(s), with `Captured` bounds on
    // the generic parameters and `impl Trait`s of plain parameters (one could be `Tensor`).
    let mut generics = sig.generics.clone();
    captured::bound_generics(plan, &mut generics, krate);
    let where_clause = &generics.where_clause;
    let attrs = item.attrs.iter();
    let track_caller = (!item.attrs.iter().any(|a| a.path().is_ident("track_caller")))
        .then(|| quote!(#[track_caller]));
    let vis = &item.vis;
    let fn_token = &sig.fn_token;
    let ident = &sig.ident;
    let params = f.params.iter().map(|param| {
        let (ident, ty) = (param.ident, captured::signature_type(param, krate));
        quote!(#ident: #ty)
    });
    let alias = id("__autograd");
    let path_span = krate
        .clone()
        .into_iter()
        .next()
        .map_or_else(proc_macro2::Span::call_site, |t| t.span());
    let import = quote_spanned!(path_span=> use #krate as #alias;);
    quote! {
        #(#attrs)*
        #track_caller
        #vis #fn_token #ident #generics (#(#params),*) -> #krate::Result<#sig_result>
        #where_clause
        {
            // One path to the library: a wrong `crate = path` is one error, here.
            #[allow(unused_imports)]
            #import

            #(#hoisted)*

            #(#items)*

            #checks
            #(#clone_inputs)*
            #collect_inputs
            // The inputs' versions are taken before the forward body reads them, so that an
            // in-place write racing with the forward pass is caught by the version check.
            let #rec = #p::Recording::begin(&#record_inputs);
            let #captures = if #rec.is_some() {
                ::core::option::Option::Some((#(::core::clone::Clone::clone(&#cap_sources),)*))
            } else {
                ::core::option::Option::None
            };
            #residual_init
            #forward_call
            // On every path, recorded or not, the caller gets a handle of its own without a
            // node: never an input (or its node) that the forward body handed back.
            #unpack
            #(let #results = #p::own_result(#results);)*
            let (::core::option::Option::Some((#(#cap_vars,)*)), ::core::option::Option::Some(#rec)) = (#captures, #rec) else {
                return ::core::result::Result::Ok(#returned);
            };
            if !(#(#any_differentiable)||*) {
                return ::core::result::Result::Ok(#returned);
            }
            #(#take_residuals)*
            #context_init
            #finish
        }
    }
}

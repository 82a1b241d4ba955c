//! The body of the node's backward: check the cotangent (one per output for several outputs),
//! read the saved state, hand the VJP its arguments in its own order, and hand back its
//! gradients, one per saved input, dropping the ones the engine said it does not want: each
//! laid out for its input, or, for the engine's `vjp` of one cotangent, as the VJP returned them (the
//! engine lays those out, and the body reads the saved state only for what the VJP takes).

use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::Type;

use crate::ast::{is_tensor_ref, option_inner, Grads};
use crate::expand::generics::{respan, Inner};
use crate::plan::{id, numbered, InputKind, Plan, Source};

/// Where tensor input `k` starts among the saved inputs: a literal when every position is
/// known at compile time, else a local computed from the node's counts.
fn position(plan: &Plan, k: usize) -> TokenStream {
    if plan.dynamic() {
        let at = numbered("__at", k);
        quote!(#at)
    } else {
        let lit = Literal::usize_unsuffixed(k);
        quote!(#lit)
    }
}

/// The number of saved inputs tensor input `k` occupies.
fn count(plan: &Plan, k: usize) -> TokenStream {
    match plan.inputs[k].count {
        None => quote!(1usize),
        Some(j) => {
            let counts = id("__counts");
            let j = Literal::usize_unsuffixed(j);
            quote!(self.#counts[#j])
        }
    }
}

/// How the generated body hands its gradients back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gradients {
    /// Each laid out for its input (`gradient_for`): every entry point but the engine's.
    LaidOut,
    /// As the VJP returned them, unwanted ones dropped: the engine's `vjp`, whose caller (the
    /// engine) lays them out under the lock it takes anyway, so the body reads the saved state
    /// only for what the VJP itself takes, and not at all when it takes no tensor.
    AsReturned,
}

pub(crate) fn generate(plan: &Plan, g: &Inner, gradients: Gradients) -> TokenStream {
    let p = &plan.p;
    let name = plan.name();
    let gradient = id("__g");
    let needed = id("__needed");
    let batch = id("__batched");
    let (saved, layout, versions) = (id("__saved"), id("__layout"), id("__versions"));
    let (inputs, context, s) = (id("__inputs"), id("__context"), id("__s"));

    let inputs_expr = if plan.dynamic() {
        quote!(#s.inputs().cloned().collect::<::std::vec::Vec<#p::Tensor>>())
    } else {
        let idx = (0..plan.inputs.len()).map(Literal::usize_unsuffixed);
        quote!([#(::core::clone::Clone::clone(#s.input(#idx))),*])
    };
    let n_context = plan.context.len();
    let context_expr = if n_context == 0 {
        quote!(())
    } else {
        let idx = (0..n_context).map(Literal::usize_unsuffixed);
        quote!([#(::core::clone::Clone::clone(&#s.context()[#idx])),*])
    };
    let context_names = plan.context.iter().map(|c| &c.name);
    let residual_check = (n_context > 0).then(
        || quote!(#p::check_residuals(self, &[#(#context_names),*], &#context, &self.#versions)?;),
    );
    let positions = plan.dynamic().then(|| {
        let steps = (0..plan.inputs.len()).map(|k| {
            let at = numbered("__at", k);
            if k == 0 {
                return quote!(let #at: usize = 0;);
            }
            let prev = numbered("__at", k - 1);
            let n = count(plan, k - 1);
            quote!(let #at: usize = #prev + #n;)
        });
        quote!(#(#steps)*)
    });
    let needs = id("__needs");
    let mask = plan.wants_mask.then(|| {
        let spans = (0..plan.inputs.len()).map(|k| {
            let (at, n) = (position(plan, k), count(plan, k));
            quote!(#at..#at + #n)
        });
        quote!(let #needs = #p::NeedsGrad::new(#needed, &[#(#spans),*]);)
    });

    // The VJP's arguments, in the VJP's order.
    let mut prep = Vec::new();
    let args: Vec<TokenStream> = plan
        .args
        .iter()
        .enumerate()
        .map(|(a, arg)| {
            let ty = arg.ty;
            let by_ref = matches!(ty, Type::Reference(_));
            // Spanned by the VJP parameter's type, so a type rustc rejects (`c: f64` for a
            // forward `c: f32`) is reported there rather than at the attribute.
            let span = match ty {
                Type::Reference(r) => r.elem.span(),
                ty => ty.span(),
            };
            let pass = |place: TokenStream| {
                if by_ref {
                    quote_spanned!(span=> &#place)
                } else {
                    quote_spanned!(span=> ::core::clone::Clone::clone(&#place))
                }
            };
            match arg.source {
                Source::Input(k) => {
                    let at = position(plan, k);
                    match plan.inputs[k].kind {
                        InputKind::One { .. } => pass(quote!(#inputs[#at])),
                        InputKind::Optional { .. } => {
                            let present = count(plan, k);
                            let by_ref = option_inner(ty).is_some_and(is_tensor_ref);
                            let value = if by_ref {
                                quote!(&#inputs[#at])
                            } else {
                                quote!(::core::clone::Clone::clone(&#inputs[#at]))
                            };
                            quote_spanned! {span=>
                                if #present == 1 {
                                    ::core::option::Option::Some(#value)
                                } else {
                                    ::core::option::Option::None
                                }
                            }
                        }
                        InputKind::Slice { elem_ref } => {
                            let n = count(plan, k);
                            if elem_ref {
                                let refs = numbered("__refs", a);
                                prep.push(quote! {
                                    let #refs: ::std::vec::Vec<&#p::Tensor> =
                                        #inputs[#at..#at + #n].iter().collect();
                                });
                                quote!(&#refs)
                            } else {
                                quote!(&#inputs[#at..#at + #n])
                            }
                        }
                    }
                }
                Source::Context(c) => {
                    let c = Literal::usize_unsuffixed(c);
                    pass(quote!(#context[#c]))
                }
                Source::Output if !plan.several() => pass(quote!(#context[0])),
                Source::Output => {
                    // A tuple with one entry per output, each by reference or by value as
                    // the VJP declares it (validated: a tuple of `plan.outputs` tensors).
                    let Type::Tuple(t) = ty else {
                        unreachable!("validated output tuple")
                    };
                    let entries = t.elems.iter().enumerate().map(|(k, elem)| {
                        let k = Literal::usize_unsuffixed(k);
                        if matches!(elem, Type::Reference(_)) {
                            quote_spanned!(elem.span()=> &#context[#k])
                        } else {
                            quote_spanned!(elem.span()=> ::core::clone::Clone::clone(&#context[#k]))
                        }
                    });
                    quote!((#(#entries,)*))
                }
                Source::Field(i) => {
                    let stored = &plan.stored[i];
                    let (field, stored_ty) = (&stored.field, &stored.ty);
                    // Every token, the field and the forward's type included, takes the span,
                    // or rustc would fall back to the attribute's. (Field names are not
                    // hygienic, so the field still resolves.)
                    respan(
                        if let Type::Reference(r) = ty {
                            let target = &r.elem;
                            quote!(<#stored_ty as ::core::borrow::Borrow<#target>>::borrow(&self.#field))
                        } else {
                            quote!(::core::clone::Clone::clone(&self.#field))
                        },
                        span,
                    )
                }
                Source::Needs => {
                    if by_ref {
                        quote!(&#needs)
                    } else {
                        quote!(#needs)
                    }
                }
            }
        })
        .collect();

    // The gradients back into one Vec, laid out like their inputs.
    let vjp = plan.f.vjp();
    let grads = id("__grads");
    let vjp_ident = id("__vjp");
    let turbofish = &g.vjp_turbofish;
    // Spanned by the error type (or the return type), where a foreign error is reported.
    let try_vjp = vjp.fallible.then(|| {
        let span = match (vjp.error_type, &vjp.original.sig.output) {
            (Some(e), _) => e.span(),
            (None, syn::ReturnType::Type(_, ty)) => ty.span(),
            (None, syn::ReturnType::Default) => vjp.original.sig.ident.span(),
        };
        quote_spanned!(span=> ?)
    });
    let vars: Vec<_> = (0..plan.inputs.len())
        .map(|k| numbered("__grad", k))
        .collect();
    let destructure = match &vjp.grads {
        Grads::Tuple(_) => quote!(let (#(#vars,)*) = #grads;),
        Grads::Array(..) => quote!(let [#(#vars),*] = #grads;),
        Grads::Single(_) | Grads::Missing => {
            let v = &vars[0];
            quote!(let #v = #grads;)
        }
    };
    let out = id("__out");
    let laid_out = gradients == Gradients::LaidOut;
    // Each gradient as the entry point returns it: laid out for its input, or as returned.
    let give = |input: TokenStream, at: TokenStream, v: TokenStream| {
        if laid_out {
            quote!(#p::gradient_for(#input, #needed, #at, #v)?)
        } else {
            quote!(#p::wanted(#needed, #at, #v))
        }
    };
    let pushes = plan.inputs.iter().enumerate().map(|(k, input)| {
        let v = &vars[k];
        let at = position(plan, k);
        // The written element type carries the span: a gradient of the wrong type is
        // reported at the user's return type.
        let span = vjp.grads.element(k).map_or_else(
            || vjp.original.sig.ident.span(),
            |t| match vjp.grads {
                Grads::Array(a, _) => a.elem.span(),
                _ => t.span(),
            },
        );
        match input.kind {
            InputKind::One { .. } => {
                let typed = quote_spanned!(span=> let #v: ::core::option::Option<#p::Tensor> = #v;);
                let given = give(quote!(&#inputs[#at]), at.clone(), quote!(#v));
                quote! {
                    #typed
                    #out.push(#given);
                }
            }
            InputKind::Optional { .. } => {
                let present = count(plan, k);
                let given = give(quote!(&#inputs[#at]), at.clone(), quote!(#v));
                let typed = quote_spanned!(span=> let #v: ::core::option::Option<#p::Tensor> = #v;);
                quote! {
                    #typed
                    // An absent input has no saved position: whatever the VJP returned for it
                    // is dropped.
                    if #present == 1 {
                        #out.push(#given);
                    }
                }
            }
            InputKind::Slice { .. } => {
                let n = count(plan, k);
                let given = give(quote!(&#inputs[#at + __i]), quote!(#at + __i), quote!(__gi));
                let pname = input.ident.to_string();
                let typed = quote_spanned!(span=> let #v: ::std::vec::Vec<::core::option::Option<#p::Tensor>> = #v;);
                quote! {
                    #typed
                    #p::check_slice_grads(self, #pname, #v.len(), #n)?;
                    for (__i, __gi) in #v.into_iter().enumerate() {
                        #out.push(#given);
                    }
                }
            }
        }
    });

    // One output: the cotangent as the engine gives it. Several: checked per result, and handed
    // to the VJP as a tuple of `Option<&Tensor>`; with none present there is nothing to
    // propagate (the engine never asks, a direct call gets no gradients).
    let (check, cotangent, unreached) = if plan.several() {
        let outputs = id("__outputs");
        let k = (0..plan.outputs).map(Literal::usize_unsuffixed);
        let span = match vjp.cotangent {
            Some(syn::FnArg::Typed(t)) => t.ty.span(),
            _ => vjp.original.sig.ident.span(),
        };
        (
            quote!(let _ = #batch; #p::check_cotangents(self, #gradient, &self.#outputs)?;),
            quote_spanned!(span=> (#(#gradient[#k].as_ref(),)*)),
            Some(quote! {
                if #gradient.iter().all(::core::option::Option::is_none) {
                    #out.clear();
                    #out.resize(#inputs.len(), ::core::option::Option::None);
                    return ::core::result::Result::Ok(());
                }
            }),
        )
    } else {
        let borrowed = if plan.owns_cotangent {
            quote!(&#gradient)
        } else {
            quote!(#gradient)
        };
        (
            quote!(#p::check_cotangent(self, #borrowed, &self.#layout, #batch)?;),
            quote!(#gradient),
            None,
        )
    };
    // The saved state is read (and its tensors cloned, so the VJP runs without the lock) for
    // laying gradients out and for what the VJP takes; as returned, a VJP of the cotangent and
    // captured values alone needs none of it.
    let reads_state = laid_out
        || n_context > 0
        || plan
            .args
            .iter()
            .any(|a| matches!(a.source, Source::Input(_)));
    let read = reads_state.then(|| {
        quote! {
            let (#inputs, #context) =
                #p::SavedState::with(&self.#saved, #name, |#s| (#inputs_expr, #context_expr))?;
        }
    });
    let reserve = laid_out.then(|| quote!(#out.reserve(#inputs.len());));
    quote! {
        #check
        #read
        #residual_check
        #unreached
        #positions
        #mask
        #(#prep)*
        let #grads = {
            let __guard = #p::no_grad();
            #vjp_ident #turbofish (#cotangent, #(#args),*)#try_vjp
        };
        #destructure
        #out.clear();
        #reserve
        #(#pushes)*
        ::core::result::Result::Ok(())
    }
}

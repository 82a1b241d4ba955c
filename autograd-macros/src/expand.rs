//! Code generation for a validated `#[differentiable]` function.
//!
//! The public function keeps the user's name, attributes, visibility and generics. Inside its
//! body, hidden from the rest of the module, sit the forward body as `__forward`, the VJP as
//! `__vjp`, the node type `__Node` implementing `Operation`, and the recording prologue. Every
//! path to the library goes through `<crate>::__private`; generated locals use mixed-site
//! hygiene and `__` names, so they neither clash with nor warn about the user's names.

use std::collections::HashSet;

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{GenericParam, Generics, Ident, ItemFn, ReturnType, Type, WherePredicate};

use crate::ast::{is_residual, is_tensor, BodyStmt, Function, Grads, Input, Param, OUTPUT};
use crate::attr::{self, Attrs};
use crate::ctxt::Ctxt;
use crate::{fallback, valid};

/// Parse, validate, expand; on any error, the errors plus the item unchanged.
pub(crate) fn differentiable(args: TokenStream, input: TokenStream) -> TokenStream {
    let item: ItemFn = match syn::parse2(input.clone()) {
        Ok(item) => item,
        Err(e) => {
            let e = syn::Error::new(
                e.span(),
                "#[differentiable] applies to a function with a nested `fn vjp`",
            );
            return fallback::expand(input, &e);
        }
    };
    let cx = Ctxt::new();
    let attrs = attr::parse(&cx, args);
    let function = Function::from_syn(&item);
    valid::check(&cx, &function);
    match cx.check() {
        Ok(()) => expand(&function, &attrs),
        Err(e) => fallback::expand(fallback::item(&item), &e),
    }
}

/// A generated name: `__`-prefixed, resolved with mixed-site hygiene.
fn id(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

fn numbered(prefix: &str, i: usize) -> Ident {
    format_ident!("{}{}", prefix, i, span = Span::mixed_site())
}

/// Where the VJP finds one of its parameters.
enum Source {
    /// Saved tensor input number `k` (a single tensor).
    Input(usize),
    /// Saved slice input number `k`, slice number `j`.
    Slice { k: usize, j: usize, elem_ref: bool },
    /// Context tensor `c` (the output or a tensor residual).
    Context(usize),
    /// A node field holding an owned value of type `stored`.
    Field { field: Ident, stored: TokenStream },
    /// Unreachable after validation; kept so expansion never panics.
    Unknown(Span),
}

/// A value the node owns for the VJP.
struct Stored<'a> {
    field: Ident,
    ty: TokenStream,
    /// How the prologue produces it.
    init: StoredInit<'a>,
}

enum StoredInit<'a> {
    /// A parameter taken by value: cloned before forward consumes it.
    OwnedParam(&'a Ident),
    /// A parameter taken as `&T`: `ToOwned::to_owned` after forward.
    BorrowedParam(&'a Ident, &'a Type),
    /// A non-tensor residual (its index among residuals).
    Residual(usize),
}

#[allow(clippy::too_many_lines)]
fn expand(f: &Function, attrs: &Attrs) -> TokenStream {
    let krate = attrs
        .krate
        .as_ref()
        .map_or_else(|| quote!(::autograd_core), ToTokens::to_token_stream);
    let p = quote!(#krate::__private);
    let item = f.original;
    let sig = &item.sig;
    let name = f.name();
    let vjp = f.vjp();

    // ---- classification of inputs, context and stored values ----------------------------
    let inputs: Vec<&Param> = f.tensor_inputs().collect();
    let slice_of: Vec<Option<usize>> = {
        let mut j = 0;
        inputs
            .iter()
            .map(|p| {
                if matches!(p.input, Input::TensorSlice { .. }) {
                    j += 1;
                    Some(j - 1)
                } else {
                    None
                }
            })
            .collect()
    };
    let slices: Vec<&Ident> = inputs
        .iter()
        .zip(&slice_of)
        .filter(|(_, s)| s.is_some())
        .filter_map(|(p, _)| p.ident)
        .collect();
    let has_slices = !slices.is_empty();
    let wants = |n: &str| vjp.params.iter().any(|v| v.ident.is_some_and(|i| i == n));

    // Context: the output when the VJP reads it, then every tensor residual.
    let mut context_names: Vec<String> = Vec::new();
    let mut context_exprs: Vec<TokenStream> = Vec::new();
    if wants(OUTPUT) {
        context_names.push(OUTPUT.to_owned());
        let result = id("__result");
        context_exprs.push(quote!(#result.detach()));
    }
    let residual_vars: Vec<Ident> = (0..f.residuals.len())
        .map(|i| numbered("__residual", i))
        .collect();
    let mut stored: Vec<Stored> = Vec::new();
    for (i, r) in f.residuals.iter().enumerate() {
        let ident = r.ident.expect("validated residual name");
        if r.is_tensor() {
            context_names.push(ident.to_string());
            let v = &residual_vars[i];
            context_exprs.push(quote!(#v));
        } else {
            let ty = r.ty.expect("typed non-tensor residual");
            stored.push(Stored {
                field: numbered("__value", stored.len()),
                ty: ty.to_token_stream(),
                init: StoredInit::Residual(i),
            });
        }
    }
    // Captured parameters the VJP reads.
    for param in &f.params {
        let Some(ident) = param.ident else { continue };
        if !matches!(param.input, Input::Captured | Input::Options) || !wants(&ident.to_string()) {
            continue;
        }
        let (ty, init) = match param.ty {
            Type::Reference(r) => {
                let elem = &*r.elem;
                (
                    quote!(<#elem as ::std::borrow::ToOwned>::Owned),
                    StoredInit::BorrowedParam(ident, elem),
                )
            }
            ty => (ty.to_token_stream(), StoredInit::OwnedParam(ident)),
        };
        stored.push(Stored {
            field: numbered("__value", stored.len()),
            ty,
            init,
        });
    }

    let source_of = |name: &Ident| -> Source {
        if name == OUTPUT {
            return Source::Context(0);
        }
        if let Some(k) = inputs.iter().position(|p| p.ident == Some(name)) {
            return match (inputs[k].input, slice_of[k]) {
                (Input::TensorSlice { elem_ref }, Some(j)) => Source::Slice { k, j, elem_ref },
                _ => Source::Input(k),
            };
        }
        if let Some(c) = context_names.iter().position(|n| name == n) {
            return Source::Context(c);
        }
        let field_for = |matches: &dyn Fn(&StoredInit) -> bool| {
            stored
                .iter()
                .find(|s| matches(&s.init))
                .map(|s| Source::Field {
                    field: s.field.clone(),
                    stored: s.ty.clone(),
                })
        };
        if let Some(ri) = f.residuals.iter().position(|r| r.ident == Some(name)) {
            if let Some(s) = field_for(&|i| matches!(i, StoredInit::Residual(x) if *x == ri)) {
                return s;
            }
        }
        field_for(&|i| match i {
            StoredInit::OwnedParam(p) | StoredInit::BorrowedParam(p, _) => *p == name,
            StoredInit::Residual(_) => false,
        })
        .unwrap_or(Source::Unknown(name.span()))
    };

    // ---- generics of the inner items ----------------------------------------------------
    // The VJP's generics: the forward's type and const parameters its item mentions. The
    // node's: those, plus the ones its stored values mention. Both are passed explicitly
    // (turbofish), since a parameter used only in a body cannot be inferred.
    let vjp_tokens = vjp.original.to_token_stream();
    let vjp_generics = subset_generics(&sig.generics, &vjp_tokens);
    let node_generics = {
        let mut used: TokenStream = stored.iter().map(|s| s.ty.clone()).collect();
        used.extend(vjp_tokens);
        subset_generics(&sig.generics, &used)
    };
    let vjp_turbofish = turbofish(&vjp_generics);
    let node_turbofish = turbofish(&node_generics);
    let forward_turbofish = turbofish(&sig.generics);
    let marker = id("__marker");
    let phantom_types: Vec<&Ident> = node_generics
        .params
        .iter()
        .filter_map(|gp| match gp {
            GenericParam::Type(t) => Some(&t.ident),
            _ => None,
        })
        .collect();
    let marker_field = (!phantom_types.is_empty())
        .then(|| quote!(#marker: ::core::marker::PhantomData<fn() -> (#(#phantom_types,)*)>,));
    let marker_init =
        (!phantom_types.is_empty()).then(|| quote!(#marker: ::core::marker::PhantomData,));
    let mut impl_generics_full = node_generics.clone();
    {
        let wc = impl_generics_full.make_where_clause();
        for gp in &node_generics.params {
            if let GenericParam::Type(t) = gp {
                let t = &t.ident;
                wc.predicates.push(syn::parse_quote!(
                    #t: ::core::marker::Send + ::core::marker::Sync + 'static
                ));
            }
        }
    }
    let (node_impl_generics, node_ty_generics, node_where) = impl_generics_full.split_for_impl();
    let (node_def_params, node_def_where) = (&node_generics, &node_generics.where_clause);

    // ---- __forward ----------------------------------------------------------------------
    let forward_ident = id("__forward");
    let keep = id("__keep");
    let residuals_ident = id("__residuals");
    let residual_types: Vec<TokenStream> = f
        .residuals
        .iter()
        .map(|r| {
            r.ty.map_or_else(|| quote!(#p::Tensor), ToTokens::to_token_stream)
        })
        .collect();
    let forward_params = f.params.iter().map(|param| param.original);
    let forward_extra = if f.residuals.is_empty() {
        quote!()
    } else {
        quote!(#keep: bool, #residuals_ident: &mut (#(::core::option::Option<#residual_types>,)*),)
    };
    let forward_stmts = f.body.iter().map(|s| match s {
        BodyStmt::Keep(stmt) => stmt.to_token_stream(),
        BodyStmt::Hoist(_) | BodyStmt::Vjp => quote!(),
        BodyStmt::Residual(i) => {
            let r = &f.residuals[*i];
            let mut local = r.original.clone();
            local.attrs.retain(|a| !is_residual(a));
            let ident = r.ident.expect("validated residual name");
            let index = syn::Index::from(*i);
            let span = r.original.span();
            let keep_value = quote_spanned! {span=>
                if #keep {
                    #residuals_ident.#index = ::core::option::Option::Some(::core::clone::Clone::clone(&#ident));
                }
            };
            quote!(#local #keep_value)
        }
    });
    let forward_output = &sig.output;
    let forward_generics = &sig.generics;
    let forward_where = &sig.generics.where_clause;
    let hoisted = f.body.iter().filter_map(|s| match s {
        BodyStmt::Hoist(item) => Some(*item),
        _ => None,
    });
    // A parameter the forward body need not read is used all the same: a tensor input is
    // saved for the VJP, a captured parameter the VJP reads is stored in the node.
    let used_elsewhere = f
        .params
        .iter()
        .filter(|param| match param.input {
            Input::Tensor { .. } | Input::TensorSlice { .. } => true,
            Input::Captured | Input::Options => param.ident.is_some_and(|i| wants(&i.to_string())),
            Input::Unsupported => false,
        })
        .filter_map(|param| param.ident);
    let forward_fn = quote! {
        // The public function returns `Result` whatever the body needs; the residual plumbing
        // adds two arguments the user did not write.
        #[allow(clippy::unnecessary_wraps, clippy::too_many_arguments)]
        fn #forward_ident #forward_generics (#(#forward_params,)* #forward_extra) #forward_output
        #forward_where
        {
            #(let _ = &#used_elsewhere;)*
            #(#forward_stmts)*
        }
    };

    // ---- __vjp --------------------------------------------------------------------------
    let vjp_ident = id("__vjp");
    let vjp_fn = {
        let mut v = vjp.original.clone();
        v.sig.ident = vjp_ident.clone();
        v.sig.generics = vjp_generics;
        v
    };

    // ---- the node -----------------------------------------------------------------------
    let node = id("__Node");
    let saved = id("__saved");
    let layout = id("__layout");
    let versions = id("__versions");
    let lens = id("__lens");
    let names = id("__names");
    let n_context = context_names.len();
    let n_slices = slices.len();
    let stored_fields = stored.iter().map(|s| {
        let (field, ty) = (&s.field, &s.ty);
        quote!(#field: #ty,)
    });
    let context_fields =
        (n_context > 0).then(|| quote!(#versions: [#p::VersionSnapshot; #n_context],));
    let slice_fields = has_slices.then(|| {
        quote! {
            #lens: [usize; #n_slices],
            #names: ::std::sync::OnceLock<::std::vec::Vec<::std::string::String>>,
        }
    });
    let node_struct = quote! {
        struct #node #node_def_params #node_def_where {
            #saved: #p::SavedState,
            #layout: ::std::sync::Arc<#p::Layout>,
            #context_fields
            #slice_fields
            #(#stored_fields)*
            #marker_field
        }
    };

    // backward: positions of the saved inputs
    let g = id("__g");
    let s = id("__s");
    let saved_inputs = id("__inputs");
    let context = id("__context");
    let at: Vec<Ident> = (0..inputs.len()).map(|k| numbered("__at", k)).collect();
    let index_of = |k: usize| -> TokenStream {
        if has_slices {
            let a = &at[k];
            quote!(#a)
        } else {
            let lit = proc_macro2::Literal::usize_unsuffixed(k);
            quote!(#lit)
        }
    };
    let range_of = |k: usize, j: usize| -> TokenStream {
        let a = &at[k];
        let lit = proc_macro2::Literal::usize_unsuffixed(j);
        quote!(#a..#a + self.#lens[#lit])
    };
    let positions = has_slices.then(|| {
        let steps = (0..inputs.len()).map(|k| {
            let a = &at[k];
            if k == 0 {
                return quote!(let #a: usize = 0;);
            }
            let prev = &at[k - 1];
            if let Some(j) = slice_of[k - 1] {
                let lit = proc_macro2::Literal::usize_unsuffixed(j);
                quote!(let #a: usize = #prev + self.#lens[#lit];)
            } else {
                quote!(let #a: usize = #prev + 1;)
            }
        });
        quote!(#(#steps)*)
    });
    let inputs_expr = if has_slices {
        quote! {
            #s.inputs().cloned().collect::<::std::vec::Vec<#p::Tensor>>()
        }
    } else {
        let idx = (0..inputs.len()).map(proc_macro2::Literal::usize_unsuffixed);
        quote!([#(::core::clone::Clone::clone(#s.input(#idx))),*])
    };
    let context_expr = if n_context == 0 {
        quote!(())
    } else {
        let idx = (0..n_context).map(proc_macro2::Literal::usize_unsuffixed);
        quote!([#(::core::clone::Clone::clone(&#s.context()[#idx])),*])
    };
    let residual_check = (n_context > 0).then(
        || quote!(#p::check_residuals(self, &[#(#context_names),*], &#context, &self.#versions)?;),
    );

    // backward: the VJP's arguments, in the VJP's order
    let mut arg_prep = Vec::new();
    let vjp_args: Vec<TokenStream> = vjp
        .params
        .iter()
        .map(|vp| {
            let ident = vp.ident.expect("validated vjp parameter");
            let ty = vp.ty.expect("validated typed vjp parameter");
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
            match source_of(ident) {
                Source::Input(k) => {
                    let i = index_of(k);
                    pass(quote!(#saved_inputs[#i]))
                }
                Source::Slice { k, j, elem_ref } => {
                    let range = range_of(k, j);
                    if elem_ref {
                        let refs = numbered("__refs", k);
                        arg_prep.push(quote! {
                            let #refs: ::std::vec::Vec<&#p::Tensor> = #saved_inputs[#range].iter().collect();
                        });
                        quote!(&#refs)
                    } else {
                        quote!(&#saved_inputs[#range])
                    }
                }
                Source::Context(c) => {
                    let c = proc_macro2::Literal::usize_unsuffixed(c);
                    pass(quote!(#context[#c]))
                }
                Source::Field { field, stored } => {
                    // Every token, the field and the forward's type included, takes the span,
                    // or rustc would fall back to the attribute's. (Field names are not
                    // hygienic, so the field still resolves.)
                    respan(if let Type::Reference(r) = ty {
                        let target = &r.elem;
                        quote!(<#stored as ::core::borrow::Borrow<#target>>::borrow(&self.#field))
                    } else {
                        quote!(::core::clone::Clone::clone(&self.#field))
                    }, span)
                }
                Source::Unknown(span) => {
                    quote_spanned!(span=> ::core::compile_error!("unknown vjp parameter"))
                }
            }
        })
        .collect();

    // backward: gradients back into one Vec, laid out like their inputs
    let grads = id("__grads");
    let try_vjp = vjp.fallible.then(|| quote!(?));
    let out = id("__out");
    let grad_vars: Vec<Ident> = (0..inputs.len()).map(|k| numbered("__grad", k)).collect();
    let destructure = match &vjp.grads {
        Grads::Tuple(_) => quote!(let (#(#grad_vars,)*) = #grads;),
        Grads::Array(..) => quote!(let [#(#grad_vars),*] = #grads;),
        Grads::Single(_) | Grads::Missing => {
            let v = &grad_vars[0];
            quote!(let #v = #grads;)
        }
    };
    let pushes = inputs.iter().enumerate().map(|(k, param)| {
        let v = &grad_vars[k];
        match slice_of[k] {
            None => {
                let i = index_of(k);
                quote!(#out.push(#p::relayout(&#saved_inputs[#i], #v)?);)
            }
            Some(j) => {
                let range = range_of(k, j);
                let pname = param.ident.map(ToString::to_string).unwrap_or_default();
                let lit = proc_macro2::Literal::usize_unsuffixed(j);
                quote! {
                    let #v: ::std::vec::Vec<::core::option::Option<#p::Tensor>> = #v;
                    #p::check_slice_grads(self, #pname, #v.len(), self.#lens[#lit])?;
                    for (__t, __gi) in #saved_inputs[#range].iter().zip(#v) {
                        #out.push(#p::relayout(__t, __gi)?);
                    }
                }
            }
        }
    });

    // input_name: the parameter name, `xs[i]` for slice elements
    let input_name_body = if has_slices {
        let fill = inputs.iter().enumerate().map(|(k, param)| {
            let pname = param.ident.map(ToString::to_string).unwrap_or_default();
            match slice_of[k] {
                None => quote!(__n.push(::std::string::String::from(#pname));),
                Some(j) => {
                    let lit = proc_macro2::Literal::usize_unsuffixed(j);
                    quote! {
                        for __i in 0..self.#lens[#lit] {
                            __n.push(::std::format!("{}[{}]", #pname, __i));
                        }
                    }
                }
            }
        });
        quote! {
            self.#names
                .get_or_init(|| {
                    let mut __n = ::std::vec::Vec::new();
                    #(#fill)*
                    __n
                })
                .get(index)
                .map(::std::string::String::as_str)
        }
    } else {
        let arms = inputs.iter().enumerate().map(|(k, param)| {
            let pname = param.ident.map(ToString::to_string).unwrap_or_default();
            let k = proc_macro2::Literal::usize_unsuffixed(k);
            quote!(#k => ::core::option::Option::Some(#pname),)
        });
        quote! {
            match index {
                #(#arms)*
                _ => ::core::option::Option::None,
            }
        }
    };

    let node_impl = quote! {
        #[automatically_derived]
        impl #node_impl_generics #p::Operation for #node #node_ty_generics #node_where {
            fn name(&self) -> &str {
                #name
            }

            fn saved(&self) -> &#p::SavedState {
                &self.#saved
            }

            fn input_name(&self, index: usize) -> ::core::option::Option<&str> {
                #input_name_body
            }

            fn backward(
                &self,
                #g: &#p::Tensor,
            ) -> #p::Result<::std::vec::Vec<::core::option::Option<#p::Tensor>>> {
                #p::check_cotangent(self, #g, &self.#layout)?;
                let (#saved_inputs, #context) =
                    #p::SavedState::with(&self.#saved, #name, |#s| (#inputs_expr, #context_expr))?;
                #residual_check
                #positions
                #(#arg_prep)*
                let #grads = {
                    let __guard = #p::no_grad();
                    #vjp_ident #vjp_turbofish (#g, #(#vjp_args),*)#try_vjp
                };
                #destructure
                let mut #out = ::std::vec::Vec::with_capacity(#saved_inputs.len());
                #(#pushes)*
                ::core::result::Result::Ok(#out)
            }
        }
    };

    // ---- the public function's prologue: run forward, then record -------------------------
    let result = id("__result");
    let rec = id("__rec");
    let record_inputs = id("__record_inputs");
    let captures = id("__captures");
    let owned_clones: Vec<(Ident, &Ident)> = inputs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.input == (Input::Tensor { by_ref: false }))
        .map(|(k, p)| (numbered("__input", k), p.ident.expect("validated name")))
        .collect();
    let clone_inputs = owned_clones
        .iter()
        .map(|(v, ident)| quote!(let #v: #p::Tensor = ::core::clone::Clone::clone(&#ident);));
    let input_refs: Vec<TokenStream> = inputs
        .iter()
        .map(|param| {
            let ident = param.ident.expect("validated name");
            if let Some((v, _)) = owned_clones.iter().find(|(_, i)| *i == ident) {
                quote!(&#v)
            } else {
                quote!(#ident)
            }
        })
        .collect();
    let collect_inputs = if has_slices {
        let fixed = inputs.len() - slices.len();
        let pushes = inputs
            .iter()
            .zip(&input_refs)
            .map(|(param, r)| match param.input {
                Input::TensorSlice { elem_ref: false } => quote!(#record_inputs.extend(#r.iter());),
                Input::TensorSlice { elem_ref: true } => {
                    quote!(#record_inputs.extend(#r.iter().copied());)
                }
                _ => quote!(#record_inputs.push(#r);),
            });
        quote! {
            let mut #record_inputs: ::std::vec::Vec<&#p::Tensor> =
                ::std::vec::Vec::with_capacity(#fixed #(+ #slices.len())*);
            #(#pushes)*
        }
    } else {
        let n = inputs.len();
        quote!(let #record_inputs: [&#p::Tensor; #n] = [#(#input_refs),*];)
    };
    let owned_caps: Vec<(&Ident, Ident)> = stored
        .iter()
        .filter_map(|s| match s.init {
            StoredInit::OwnedParam(ident) => Some(ident),
            _ => None,
        })
        .enumerate()
        .map(|(i, ident)| (ident, numbered("__capture", i)))
        .collect();
    let cap_sources = owned_caps.iter().map(|(ident, _)| ident);
    let cap_vars: Vec<&Ident> = owned_caps.iter().map(|(_, v)| v).collect();
    let residual_init = (!f.residuals.is_empty()).then(|| {
        quote! {
            let mut #residuals_ident: (#(::core::option::Option<#residual_types>,)*) =
                (#(::core::option::Option::<#residual_types>::None,)*);
        }
    });
    let forward_args = f.params.iter().map(|param| param.ident);
    let forward_extra_args =
        (!f.residuals.is_empty()).then(|| quote!(#rec.is_some(), &mut #residuals_ident,));
    let forward_returns_result = match &sig.output {
        ReturnType::Type(_, ty) => !is_tensor(ty),
        ReturnType::Default => true,
    };
    // Spanned by the return type: a `Result` whose error is not autograd_core's is reported there.
    let try_forward = forward_returns_result.then(|| {
        let span = match &sig.output {
            ReturnType::Type(_, ty) => ty.span(),
            ReturnType::Default => sig.ident.span(),
        };
        quote_spanned!(span=> ?)
    });
    let take_residuals = f.residuals.iter().enumerate().map(|(i, r)| {
        let v = &residual_vars[i];
        let index = syn::Index::from(i);
        let rname = r.ident.map(ToString::to_string).unwrap_or_default();
        quote! {
            let ::core::option::Option::Some(#v) = #residuals_ident.#index else {
                return ::core::result::Result::Err(#p::missing_residual(#name, #rname));
            };
        }
    });
    let context_versions = (0..n_context).map(|c| {
        let c = proc_macro2::Literal::usize_unsuffixed(c);
        quote!(#p::VersionSnapshot::of(&#context[#c]))
    });
    let context_init = if n_context == 0 {
        quote!(let #context: ::std::vec::Vec<#p::Tensor> = ::std::vec::Vec::new();)
    } else {
        quote! {
            let #context: ::std::vec::Vec<#p::Tensor> = ::std::vec![#(#context_exprs),*];
            let #versions = [#(#context_versions),*];
        }
    };
    let node_context = (n_context > 0).then(|| quote!(#versions,));
    let node_slices = has_slices.then(|| {
        quote! {
            #lens: [#(#slices.len()),*],
            #names: ::std::sync::OnceLock::new(),
        }
    });
    let node_values = stored.iter().map(|s| {
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
                let v = &residual_vars[i];
                quote!(#v)
            }
        };
        quote!(#field: #value,)
    });

    let attrs_out = item.attrs.iter();
    let track_caller = (!item.attrs.iter().any(|a| a.path().is_ident("track_caller")))
        .then(|| quote!(#[track_caller]));
    let vis = &item.vis;
    let fn_token = &sig.fn_token;
    let ident = &sig.ident;
    let generics = &sig.generics;
    let where_clause = &sig.generics.where_clause;
    let public_params = f.params.iter().map(|param| {
        let ident = param.ident;
        let ty = param.ty;
        quote!(#ident: #ty)
    });
    // Types the macro treats as plain values, checked at compile time not to be `Tensor` under
    // another name (which the macro, reading names, cannot recognise).
    let plain_types = f
        .params
        .iter()
        .filter(|param| param.input == Input::Captured)
        .map(|param| param.ty)
        .chain(
            f.residuals
                .iter()
                .filter(|r| !r.is_tensor())
                .filter_map(|r| r.ty),
        )
        .map(|ty| match ty {
            Type::Reference(r) => &*r.elem,
            ty => ty,
        })
        .filter(|ty| nameable(ty))
        .map(|ty| quote_spanned!(ty.span()=> #p::NotTensor::<#ty>::NEW.check::<#ty>();))
        .collect::<Vec<_>>();
    let not_tensor_checks = (!plain_types.is_empty()).then(|| {
        quote! {
            {
                use #p::NotTensorFallback as _;
                #(#plain_types)*
            }
        }
    });
    let forward_call = quote! {
        let #result: #p::Tensor = {
            let __guard = #p::no_grad();
            #forward_ident #forward_turbofish (#(#forward_args,)* #forward_extra_args)
        }#try_forward;
    };

    quote! {
        #(#attrs_out)*
        #track_caller
        #vis #fn_token #ident #generics (#(#public_params),*) -> #p::Result<#p::Tensor>
        #where_clause
        {
            #(#hoisted)*

            #forward_fn

            // The macro asks for the gradients' `Option`s, and for the tuple to be spelled out
            // (it counts it), and the VJP's parameters mirror the forward's plus the cotangent
            // and the residuals, so none of these lints has a fix the user could apply.
            #[allow(clippy::unnecessary_wraps, clippy::type_complexity, clippy::too_many_arguments)]
            #vjp_fn

            #node_struct

            #node_impl

            #not_tensor_checks
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
            let #result = #p::own_result(#result);
            let (::core::option::Option::Some((#(#cap_vars,)*)), ::core::option::Option::Some(#rec)) = (#captures, #rec) else {
                return ::core::result::Result::Ok(#result);
            };
            if !#result.is_differentiable() {
                return ::core::result::Result::Ok(#result);
            }
            #(#take_residuals)*
            #context_init
            let #layout = ::core::clone::Clone::clone(#result.layout_arc());
            ::core::result::Result::Ok(#rec.finish(#result, #context, move |#saved| #node #node_turbofish {
                #saved,
                #marker_init
                #layout,
                #node_context
                #node_slices
                #(#node_values)*
            }))
        }
    }
}

/// The type and const parameters of `all` that `used` mentions, with their bounds and the
/// where-predicates that involve only them (defaults and lifetimes dropped): the generics an
/// inner item needs, since items nested in a function cannot use the function's generics.
fn subset_generics(all: &Generics, used: &TokenStream) -> Generics {
    let mentioned = idents_in(used);
    let mut kept = HashSet::new();
    let mut out = Generics::default();
    for gp in &all.params {
        match gp {
            GenericParam::Type(t) if mentioned.contains(&t.ident.to_string()) => {
                kept.insert(t.ident.to_string());
                let mut t = t.clone();
                t.default = None;
                out.params.push(GenericParam::Type(t));
            }
            GenericParam::Const(c) if mentioned.contains(&c.ident.to_string()) => {
                kept.insert(c.ident.to_string());
                let mut c = c.clone();
                c.default = None;
                out.params.push(GenericParam::Const(c));
            }
            _ => {}
        }
    }
    if out.params.is_empty() {
        return out;
    }
    out.lt_token = Some(syn::Token![<](Span::call_site()));
    out.gt_token = Some(syn::Token![>](Span::call_site()));
    let all_names: HashSet<String> = all
        .params
        .iter()
        .filter_map(|gp| match gp {
            GenericParam::Type(t) => Some(t.ident.to_string()),
            GenericParam::Const(c) => Some(c.ident.to_string()),
            GenericParam::Lifetime(_) => None,
        })
        .collect();
    if let Some(wc) = &all.where_clause {
        for pred in &wc.predicates {
            let WherePredicate::Type(_) = pred else {
                continue;
            };
            let names = idents_in(&pred.to_token_stream());
            let involved: Vec<&String> = names.iter().filter(|n| all_names.contains(*n)).collect();
            if !involved.is_empty() && involved.iter().all(|n| kept.contains(*n)) {
                out.make_where_clause().predicates.push(pred.clone());
            }
        }
    }
    out
}

/// `::<A, B, N>` naming the type and const parameters of `generics`, or nothing.
fn turbofish(generics: &Generics) -> TokenStream {
    let names: Vec<&Ident> = generics
        .params
        .iter()
        .filter_map(|gp| match gp {
            GenericParam::Type(t) => Some(&t.ident),
            GenericParam::Const(c) => Some(&c.ident),
            GenericParam::Lifetime(_) => None,
        })
        .collect();
    if names.is_empty() {
        quote!()
    } else {
        quote!(::<#(#names),*>)
    }
}

/// `tokens` with every span, at any depth, set to `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tt| {
            if let TokenTree::Group(g) = &tt {
                let mut inner = Group::new(g.delimiter(), respan(g.stream(), span));
                inner.set_span(span);
                tt = TokenTree::Group(inner);
            } else {
                tt.set_span(span);
            }
            tt
        })
        .collect()
}

/// Whether `ty` can be written in an expression (no `impl Trait`, `_` or macro in it).
fn nameable(ty: &Type) -> bool {
    struct Finder(bool);
    impl Visit<'_> for Finder {
        fn visit_type(&mut self, ty: &Type) {
            match ty {
                Type::ImplTrait(_) | Type::Infer(_) | Type::Macro(_) | Type::Verbatim(_) => {
                    self.0 = false;
                }
                _ => syn::visit::visit_type(self, ty),
            }
        }
    }
    let mut f = Finder(true);
    f.visit_type(ty);
    f.0
}

fn idents_in(tokens: &TokenStream) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut stack = vec![tokens.clone()];
    while let Some(ts) = stack.pop() {
        for tt in ts {
            match tt {
                TokenTree::Ident(i) => {
                    out.insert(i.to_string());
                }
                TokenTree::Group(g) => stack.push(g.stream()),
                _ => {}
            }
        }
    }
    out
}

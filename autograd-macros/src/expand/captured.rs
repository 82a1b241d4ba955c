//! The compile-time promise that no tensor reaches the op unrecorded: every value the macro
//! treats as plain (each non-tensor parameter, whoever reads it, and each non-tensor residual
//! the node stores) must be `Captured`. Checks in the body for named types, `Captured` bounds
//! in the signature for generic parameters and `impl Trait`; nothing of it runs.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, Type};

use crate::ast::{Input, Param};
use crate::expand::generics::{nameable, type_params_in};
use crate::plan::{Plan, StoredInit};

/// Whether `param` is a plain value to the macro: not recorded, so it must hold no tensor.
fn is_plain(param: &Param) -> bool {
    matches!(param.input, Input::Captured | Input::Options)
}

/// The types that must be `Captured`: each plain parameter's element type (`Opts` of `&Opts`,
/// `f32` of `Option<&[f32]>`, which is `Captured` when its element is), then each stored
/// non-tensor residual's type.
fn checked_types<'a>(plan: &Plan<'a, '_>) -> Vec<&'a Type> {
    let params = plan
        .f
        .params
        .iter()
        .filter(|param| is_plain(param))
        .map(|param| element(param.ty));
    let residuals = plan
        .stored
        .iter()
        .filter(|s| matches!(s.init, StoredInit::Residual(_)))
        .map(|s| s.checked);
    params.chain(residuals).collect()
}

/// The checks, in a closure the function never calls, so they are proven at compile time and
/// cost nothing at run time. A named type is checked by name, spanned at the type, so a
/// renamed `Tensor` gets its own message; a parameter whose type cannot be named (`impl Trait`
/// inside it) is checked by value.
pub(crate) fn value_checks(plan: &Plan) -> Option<TokenStream> {
    let p = &plan.p;
    let by_type = checked_types(plan)
        .into_iter()
        .filter(|ty| nameable(ty))
        .map(|ty| quote_spanned!(ty.span()=> #p::NotTensor::<#ty>::NEW.captured::<#ty>();));
    let by_value = plan
        .f
        .params
        .iter()
        .filter(|param| is_plain(param) && !nameable(element(param.ty)))
        .filter_map(|param| {
            let span = element(param.ty).span();
            let ident = Ident::new(&param.ident?.to_string(), span);
            Some(quote_spanned!(span=> #p::captured_value(&#ident);))
        });
    let all: Vec<TokenStream> = by_type.chain(by_value).collect();
    (!all.is_empty()).then(|| {
        quote! {
            let _ = || {
                use #p::NotTensorFallback as _;
                #(#all)*
            };
        }
    })
}

/// `generics` with a `Captured` bound on every type parameter a checked type mentions (one of
/// them could be `Tensor`), so a caller cannot pass a tensor through it.
pub(crate) fn bound_generics(plan: &Plan, generics: &mut syn::Generics, krate: &TokenStream) {
    let all = generics.clone();
    let mut bounded = Vec::new();
    for ty in checked_types(plan) {
        for t in type_params_in(&all, ty) {
            if !bounded.contains(&t) {
                bounded.push(t);
                add_bound(generics, t, captured_bound(krate, ty.span()));
            }
        }
    }
}

/// `param`'s type as the public function declares it: an `impl Trait` element of a plain
/// parameter gets a `Captured` bound, like a generic parameter.
pub(crate) fn signature_type(param: &Param, krate: &TokenStream) -> Type {
    let mut ty = param.ty.clone();
    if is_plain(param) {
        if let Some(t) = impl_trait_element(&mut ty) {
            let span = t.span();
            t.bounds.push(captured_bound(krate, span));
        }
    }
    ty
}

fn captured_bound(krate: &TokenStream, span: Span) -> syn::TypeParamBound {
    syn::parse_quote_spanned!(span=> #krate::Captured)
}

/// The element type under references, slices, arrays, parentheses and `Option`, `Vec` or
/// `Box`: `Captured` when its element is, and a `Tensor` renamed inside `Option<&T>` or `&[T]`
/// is as unrecognisable as a bare one.
pub(crate) fn element(ty: &Type) -> &Type {
    match ty {
        Type::Reference(r) => element(&r.elem),
        Type::Slice(s) => element(&s.elem),
        Type::Array(a) => element(&a.elem),
        Type::Paren(p) => element(&p.elem),
        Type::Group(g) => element(&g.elem),
        Type::Path(_) => wrapped(ty).map_or(ty, element),
        ty => ty,
    }
}

/// The [`element`] of `ty` when it is an `impl Trait`, to bound it.
fn impl_trait_element(ty: &mut Type) -> Option<&mut syn::TypeImplTrait> {
    match ty {
        Type::ImplTrait(t) => Some(t),
        Type::Reference(r) => impl_trait_element(&mut r.elem),
        Type::Slice(s) => impl_trait_element(&mut s.elem),
        Type::Array(a) => impl_trait_element(&mut a.elem),
        Type::Paren(p) => impl_trait_element(&mut p.elem),
        Type::Group(g) => impl_trait_element(&mut g.elem),
        Type::Path(p) => {
            let seg = p.path.segments.last_mut().filter(|_| p.qself.is_none())?;
            if !is_wrapper(&seg.ident) {
                return None;
            }
            match &mut seg.arguments {
                syn::PathArguments::AngleBracketed(args) if args.args.len() == 1 => {
                    match args.args.first_mut() {
                        Some(syn::GenericArgument::Type(inner)) => impl_trait_element(inner),
                        _ => None,
                    }
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether a path ending in `ident` is a wrapper [`element`] looks through.
fn is_wrapper(ident: &Ident) -> bool {
    ident == "Option" || ident == "Vec" || ident == "Box"
}

/// `T` of `Option<T>`, `Vec<T>` or `Box<T>`.
fn wrapped(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last().filter(|_| p.qself.is_none())?;
    if !is_wrapper(&seg.ident) {
        return None;
    }
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(args) if args.args.len() == 1 => {
            match args.args.first() {
                Some(syn::GenericArgument::Type(inner)) => Some(inner),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Adds `bound` to type parameter `t` where its bounds are written: in the where-clause when
/// only a where-predicate bounds it, else inline (clippy asks for one place per parameter).
fn add_bound(generics: &mut syn::Generics, t: &Ident, bound: syn::TypeParamBound) {
    let inline = generics.params.iter().any(
        |gp| matches!(gp, syn::GenericParam::Type(tp) if tp.ident == *t && !tp.bounds.is_empty()),
    );
    if !inline {
        if let Some(wc) = &mut generics.where_clause {
            for pred in &mut wc.predicates {
                if let syn::WherePredicate::Type(pt) = pred {
                    if matches!(&pt.bounded_ty, Type::Path(p) if p.path.is_ident(t)) {
                        pt.bounds.push(bound);
                        return;
                    }
                }
            }
        }
    }
    for gp in &mut generics.params {
        if let syn::GenericParam::Type(tp) = gp {
            if tp.ident == *t {
                tp.colon_token.get_or_insert_with(Default::default);
                tp.bounds.push(bound);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::{quote, ToTokens};
    use syn::{Expr, Pat, Stmt};

    use super::element;

    fn ty(s: &str) -> syn::Type {
        syn::parse_str(s).unwrap()
    }

    #[test]
    fn the_element_is_under_references_slices_and_wrappers() {
        let e = |s: &str| element(&ty(s)).to_token_stream().to_string();
        assert_eq!(e("&Opts"), "Opts");
        assert_eq!(e("Option<&[f32]>"), "f32");
        assert_eq!(e("Box<[Vec<u8>; 3]>"), "u8");
        assert_eq!(e("HashMap<K, V>"), "HashMap < K , V >");
        assert_eq!(e("(impl Debug, u8)"), "(impl Debug , u8)");
    }

    /// The expansion of `item` as a function.
    fn expand(item: &proc_macro2::TokenStream) -> syn::ItemFn {
        let out = crate::differentiable_impl(proc_macro2::TokenStream::new(), item.clone());
        syn::parse2(out).unwrap()
    }

    #[test]
    fn every_plain_parameter_is_checked_in_a_closure_never_called() {
        let f = expand(&quote! {
            fn f(x: &Tensor, opts: &Opts, n: Option<usize>, options: Options) -> Result<Tensor> {
                fn vjp(g: &Tensor, n: Option<usize>) -> Option<Tensor> { Some(g.clone()) }
                x.f32_like(x.values::<f32>()?)
            }
        });
        let checks: Vec<&Stmt> = f
            .block
            .stmts
            .iter()
            .filter(|s| s.to_token_stream().to_string().contains("NotTensor"))
            .collect();
        // one statement: `let _ = || { ... };`, which binds nothing, so nothing calls it
        let [Stmt::Local(local)] = checks.as_slice() else {
            panic!("the checks are not one statement: {checks:?}");
        };
        assert!(matches!(local.pat, Pat::Wild(_)));
        let init = local.init.as_ref().map(|i| &*i.expr);
        let Some(Expr::Closure(closure)) = init else {
            panic!("the checks are not a closure: {init:?}");
        };
        let body = closure.body.to_token_stream().to_string();
        for checked in ["Opts", "usize", "Options"] {
            assert!(
                body.contains(&format!(
                    "NotTensor :: < {checked} > :: NEW . captured :: < {checked} >"
                )),
                "`{checked}` is not checked: {body}"
            );
        }
    }

    #[test]
    fn generic_and_impl_trait_parameters_get_a_captured_bound() {
        let f = expand(&quote! {
            fn f<K: Copy>(x: &Tensor, k: K, label: Option<impl AsRef<str>>) -> Result<Tensor> {
                fn vjp(g: &Tensor) -> Option<Tensor> { Some(g.clone()) }
                x.f32_like(x.values::<f32>()?)
            }
        });
        let sig = f.sig.to_token_stream().to_string();
        assert!(
            sig.contains("K : Copy + :: autograd_core :: __private :: Captured"),
            "{sig}"
        );
        assert!(
            sig.contains(
                "Option < impl AsRef < str > + :: autograd_core :: __private :: Captured >"
            ),
            "{sig}"
        );
    }
}

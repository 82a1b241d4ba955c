//! Generics of the items nested in the public function: an item inside a function cannot use
//! the function's generic parameters, so each gets the subset it mentions, passed by turbofish.

use std::collections::HashSet;

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{quote, ToTokens};
use syn::visit::Visit;
use syn::{GenericParam, Generics, Ident, Type, WherePredicate};

/// The type and const parameters of `all` that `used` mentions, with their bounds and the
/// where-predicates that involve only them (defaults and lifetimes dropped): the generics an
/// inner item needs, since items nested in a function cannot use the function's generics.
pub(crate) fn subset_generics(all: &Generics, used: &TokenStream) -> Generics {
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
pub(crate) fn turbofish(generics: &Generics) -> TokenStream {
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
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
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
pub(crate) fn nameable(ty: &Type) -> bool {
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

pub(crate) fn idents_in(tokens: &TokenStream) -> HashSet<String> {
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

/// The generics of the nested VJP and node, and how to name them.
pub(crate) struct Inner {
    /// The VJP's: the forward's type and const parameters its item mentions.
    pub(crate) vjp: Generics,
    /// The node's: those, plus the ones its stored values mention.
    pub(crate) node: Generics,
    pub(crate) vjp_turbofish: TokenStream,
    pub(crate) node_turbofish: TokenStream,
    pub(crate) forward_turbofish: TokenStream,
    /// The node's type parameters, held by a `PhantomData` field.
    pub(crate) phantom: Vec<Ident>,
}

impl Inner {
    pub(crate) fn new(forward: &Generics, vjp_item: &TokenStream, stored: &[TokenStream]) -> Inner {
        // Both are passed explicitly (turbofish), since a parameter used only in a body cannot
        // be inferred.
        let vjp = subset_generics(forward, vjp_item);
        let node = {
            let mut used: TokenStream = stored.iter().cloned().collect();
            used.extend(vjp_item.clone());
            subset_generics(forward, &used)
        };
        let phantom = node
            .params
            .iter()
            .filter_map(|gp| match gp {
                GenericParam::Type(t) => Some(t.ident.clone()),
                _ => None,
            })
            .collect();
        Inner {
            vjp_turbofish: turbofish(&vjp),
            node_turbofish: turbofish(&node),
            forward_turbofish: turbofish(forward),
            vjp,
            node,
            phantom,
        }
    }

    /// The node's generics for its impls: every type parameter is `Send + Sync + 'static`,
    /// as `Operation` requires.
    pub(crate) fn node_impl(&self) -> Generics {
        let mut g = self.node.clone();
        let wc = g.make_where_clause();
        for gp in &self.node.params {
            if let GenericParam::Type(t) = gp {
                let t = &t.ident;
                wc.predicates.push(syn::parse_quote!(
                    #t: ::core::marker::Send + ::core::marker::Sync + 'static
                ));
            }
        }
        g
    }
}

/// The type parameters of `generics` that `ty` mentions.
pub(crate) fn type_params_in<'g>(generics: &'g Generics, ty: &Type) -> Vec<&'g Ident> {
    let names = idents_in(&ty.to_token_stream());
    generics
        .params
        .iter()
        .filter_map(|gp| match gp {
            GenericParam::Type(t) if names.contains(&t.ident.to_string()) => Some(&t.ident),
            _ => None,
        })
        .collect()
}

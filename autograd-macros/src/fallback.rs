//! What a failed expansion emits: the errors, then the user's function unchanged (only the
//! `#[residual]` markers, which mean nothing to rustc, and any `fn vjp` after the first, which
//! rustc would report again as a duplicate definition, are dropped), so one mistake does not
//! cascade into "cannot find function" errors at every call site.

use proc_macro2::{Group, TokenStream, TokenTree};
use quote::ToTokens;
use syn::{Item, ItemFn, Stmt};

use crate::ast::{RESIDUAL, VJP};

pub(crate) fn expand(input: TokenStream, error: &syn::Error) -> TokenStream {
    let mut out = error.to_compile_error();
    out.extend(strip_residual_markers(input));
    out
}

/// The parsed item with only its first nested `fn vjp` (the others are already reported),
/// or none when `keep_vjp` is false (a VJP reading forward locals, already reported with a
/// hint rustc's "can't capture" would only repeat), and without unused-variable warnings: a
/// residual or parameter only the VJP reads looks unused once the macro's plumbing is gone,
/// which is not the mistake to fix.
pub(crate) fn item(item: &ItemFn, keep_vjp: bool) -> TokenStream {
    let mut item = item.clone();
    item.attrs
        .push(syn::parse_quote!(#[allow(unused_variables, dead_code)]));
    let mut seen = !keep_vjp;
    item.block.stmts.retain(|stmt| match stmt {
        Stmt::Item(Item::Fn(f)) if f.sig.ident == VJP => !std::mem::replace(&mut seen, true),
        _ => true,
    });
    item.into_token_stream()
}

/// `input` without any `#[residual]` / `#[residual(...)]` attribute, at any depth.
fn strip_residual_markers(input: TokenStream) -> TokenStream {
    let tokens: Vec<TokenTree> = input.into_iter().collect();
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if let (TokenTree::Punct(p), Some(TokenTree::Group(g))) = (&tokens[i], tokens.get(i + 1)) {
            if p.as_char() == '#' && is_residual_marker(g) {
                i += 2;
                continue;
            }
        }
        out.push(match &tokens[i] {
            TokenTree::Group(g) => {
                let mut inner = Group::new(g.delimiter(), strip_residual_markers(g.stream()));
                inner.set_span(g.span());
                TokenTree::Group(inner)
            }
            other => other.clone(),
        });
        i += 1;
    }
    out.into_iter().collect()
}

fn is_residual_marker(g: &Group) -> bool {
    if g.delimiter() != proc_macro2::Delimiter::Bracket {
        return false;
    }
    let mut inner = g.stream().into_iter();
    matches!(inner.next(), Some(TokenTree::Ident(i)) if i == RESIDUAL)
        && inner.all(|t| matches!(t, TokenTree::Group(_)))
}

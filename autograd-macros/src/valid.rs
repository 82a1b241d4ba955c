//! Every rule a `#[differentiable]` function must follow, including the ones that relate its
//! parts to each other (the VJP's parameters to the forward's, the gradient count to the tensor
//! inputs). This module is the one place such cross-cutting checks live (the VJP's own rules in
//! `valid/vjp.rs`); each mistake is reported with the span of the syntax that has to change.

use std::collections::HashSet;

use quote::ToTokens;
use syn::{Meta, Safety, Type};

use crate::ast::{is_tensor, mentions_tensor, outer_name, Function, Input, OUTPUT};
use crate::ctxt::Ctxt;

// The rules of the nested `fn vjp` and of what it returns.
mod vjp;

pub(crate) use vjp::vjp_reads_declared;
use vjp::{check_vjp, names_cotangent};

const FORWARD_RETURN: &str = "a #[differentiable] function returns its output tensor: declare `-> Result<Tensor>` (autograd_core's `Result`) or `-> Tensor`; several outputs are a tuple, `-> Result<(Tensor, Tensor)>`";

/// How the VJP declares its cotangent for a function with `n` outputs: `&Tensor` for one, a
/// tuple of one `Option<&Tensor>` per output for several.
pub(crate) fn cotangent_spelling(n: usize) -> String {
    if n == 1 {
        "&Tensor".to_owned()
    } else {
        format!("({})", vec!["Option<&Tensor>"; n].join(", "))
    }
}

/// Rules between the attribute's arguments and the function: `batched` serves one-result ops
/// (a batched cotangent is of one result).
pub(crate) fn check_attrs(cx: &Ctxt, f: &Function, attrs: &crate::attr::Attrs) {
    if let Some(path) = &attrs.batched {
        if f.output.assumed() > 1 {
            cx.error_spanned_by(
                path,
                "`batched` applies to an op with one result; this one returns several",
            );
        }
    }
}

pub(crate) fn check(cx: &Ctxt, f: &Function) {
    check_signature(cx, f);
    // Rules that count tensor inputs are skipped when a parameter is already wrong, so one
    // mistake is one message.
    let params_ok = check_params(cx, f);
    check_forward_output(cx, f);
    check_residuals(cx, f);
    match f.vjps.as_slice() {
        [] => cx.error_spanned_by(
            &f.original.sig.ident,
            format_args!(
                "`{}` has no vjp: add a nested `fn vjp(g: {}, ...) -> Result<...>` to its body that returns one gradient per tensor input",
                f.name(),
                cotangent_spelling(f.output.assumed()),
            ),
        ),
        [vjp] => check_vjp(cx, f, vjp, params_ok),
        [first, rest @ ..] => {
            check_vjp(cx, f, first, params_ok);
            for extra in rest {
                cx.error_spanned_by(
                    &extra.original.sig.ident,
                    format_args!(
                        "`{}` has more than one vjp; keep exactly one nested `fn vjp`",
                        f.name()
                    ),
                );
            }
        }
    }
}

fn check_signature(cx: &Ctxt, f: &Function) {
    let sig = &f.original.sig;
    if let Some(t) = &sig.constness {
        cx.error_spanned_by(t, "a #[differentiable] function cannot be `const`: it records an autograd node at run time");
    }
    if let Some(t) = &sig.asyncness {
        cx.error_spanned_by(
            t,
            "a #[differentiable] function cannot be `async`: compute the tensor synchronously",
        );
    }
    match &sig.safety {
        Safety::Unsafe(t) => cx.error_spanned_by(t, "a #[differentiable] function cannot be `unsafe`; use an `unsafe` block inside the body"),
        Safety::Safe(t) => cx.error_spanned_by(t, "`safe` qualifies items of `extern` blocks, not a #[differentiable] function"),
        Safety::Default => {}
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned_by(abi, "a #[differentiable] function cannot declare an ABI");
    }
    if let Some(v) = &sig.variadic {
        cx.error_spanned_by(v, "a #[differentiable] function cannot be variadic");
    }
    for r in &f.receivers {
        cx.error_spanned_by(
            r,
            "a #[differentiable] function cannot take `self`: make it a free function and pass tensors as parameters",
        );
    }
}

/// Returns whether every parameter is usable.
fn check_params(cx: &Ctxt, f: &Function) -> bool {
    let mut ok = f.receivers.is_empty();
    for p in &f.params {
        match p.ident {
            None => cx.error_spanned_by(
                &p.original.pat,
                "a parameter of a #[differentiable] function must be a plain name, so it can be saved and passed to the vjp; destructure it inside the body",
            ),
            Some(name) if name == OUTPUT => cx.error_spanned_by(
                name,
                "a parameter of a #[differentiable] function cannot be named `output`: the vjp reads the forward output under that name",
            ),
            Some(_) if p.input == Input::Unsupported => cx.error_spanned_by(
                p.ty,
                "this parameter holds tensors the macro cannot save: take each tensor as `&Tensor` or `Tensor`, an optional one as `Option<&Tensor>`, or a variable number as `&[Tensor]` or `&[&Tensor]`",
            ),
            // `options` is never saved, whatever its type: a tensor in it would reach the
            // forward unrecorded, with no gradient and no version check.
            Some(name) if p.input == Input::Options && mentions_tensor(p.ty) => cx.error_spanned_by(
                p.ty,
                format_args!(
                    "a parameter named `{name}` is never saved, so a tensor in it would reach the op unrecorded and get no gradient: take each tensor as a parameter of another name (`&Tensor`, `Option<&Tensor>`, `&[Tensor]`), and keep `{name}` for values that hold no tensor"
                ),
            ),
            Some(name) => {
                // The vjp gets what the caller passed (a saved input, or a value captured
                // before the body runs): a `mut` parameter the body reassigns would silently
                // differ from it.
                if let Some(m) = p.mutability.filter(|_| f.vjp_reads_param(p)) {
                    cx.error_spanned_by(
                        m,
                        format_args!(
                            "the vjp reads `{name}` as the caller passed it, not as the forward body changes it, so `{name}` cannot be `mut`: drop `mut` and bind a changed value to a #[residual] (`#[residual] let {name}_used = ...;`) for the vjp to take"
                        ),
                    );
                }
                continue;
            }
        }
        ok = false;
    }
    if ok && f.tensor_inputs().next().is_none() {
        cx.error_spanned_by(
            &f.original.sig.ident,
            format_args!(
                "`{}` has no tensor parameter to differentiate: take at least one `&Tensor`, `Tensor`, `Option<&Tensor>` or `&[Tensor]`",
                f.name()
            ),
        );
        ok = false;
    }
    ok
}

fn check_forward_output(cx: &Ctxt, f: &Function) {
    let out = &f.output;
    let Some(ty) = out.ty else {
        cx.error_spanned_by(&f.original.sig.ident, FORWARD_RETURN);
        return;
    };
    if out.count().is_some() {
        // `Result<Tensor, Error>` spelled out: the generated `?` converts it, and rustc
        // points at this type if it is some other `Error`.
        if let Some(err) = out
            .error_type
            .filter(|e| outer_name(e).as_deref() != Some("Error"))
        {
            cx.error_spanned_by(
                err,
                "the forward body's errors become autograd_core errors: declare `-> Result<Tensor>` with autograd_core's `Result` (or `-> Tensor`)",
            );
        }
        return;
    }
    match out.tuple() {
        Some(t) if t.elems.len() == 1 => cx.error_spanned_by(
            t,
            "one output is returned as `Tensor`, not as a one-element tuple; a tuple is for two or more outputs",
        ),
        Some(t) if t.elems.len() > 1 => {
            for (k, elem) in t.elems.iter().enumerate() {
                if !is_tensor(elem) {
                    cx.error_spanned_by(
                        elem,
                        format_args!(
                            "output {k} is not a tensor: every output of a #[differentiable] function is a `Tensor` (indices are an Int32 tensor); compute other values outside the op"
                        ),
                    );
                }
            }
        }
        _ => cx.error_spanned_by(ty, FORWARD_RETURN),
    }
}

fn check_residuals(cx: &Ctxt, f: &Function) {
    for attr in &f.stray_residuals {
        cx.error_spanned_by(
            attr,
            "#[residual] marks a `let` at the top level of the forward body; move it there",
        );
    }
    let mut seen = HashSet::new();
    for (i, r) in f.residuals.iter().enumerate() {
        if !matches!(r.attr.meta, Meta::Path(_)) {
            cx.error_spanned_by(&r.attr.meta, "#[residual] takes no arguments");
        }
        if r.original.init.is_none() {
            cx.error_spanned_by(
                r.original,
                "a #[residual] `let` needs a value: `let name = ...;`",
            );
        }
        if r.original
            .init
            .as_ref()
            .is_some_and(|i| i.diverge.is_some())
        {
            cx.error_spanned_by(r.original, "a #[residual] cannot be a `let ... else`");
        }
        let Some(name) = r.ident else {
            cx.error_spanned_by(
                &r.original.pat,
                "a #[residual] binds one plain name (optionally with a type: `let mean: Tensor = ...`)",
            );
            continue;
        };
        if let Some(m) = r.mutability {
            cx.error_spanned_by(
                m,
                format_args!(
                    "a #[residual] is kept as it is bound, so later changes to a `mut` residual would not reach the vjp: compute `{name}` completely first, `#[residual] let {name} = {{ let mut {name} = ...; ...; {name} }};`"
                ),
            );
        }
        if let Some(ty) = r.ty {
            check_residual_type(cx, ty);
        }
        if name == OUTPUT || f.param_named(name).is_some() {
            cx.error_spanned_by(
                name,
                format_args!("residual `{name}` has the name of a parameter or of `output`; rename it so the vjp can tell them apart"),
            );
        } else if !seen.insert(name.to_string()) {
            cx.error_spanned_by(name, format_args!("residual `{name}` is declared twice"));
        } else if f.vjps.len() == 1 && !f.vjp_reads_residual(i) && !names_cotangent(f, name) {
            let ty = match r.ty {
                Some(ty) if !is_tensor(ty) => format!("&{}", tokens(ty)),
                _ => "&Tensor".to_owned(),
            };
            cx.error_spanned_by(
                name,
                format_args!(
                    "residual `{name}` is kept for the vjp, but the vjp does not take it: add `{name}: {ty}` to the vjp's parameters, or drop #[residual]"
                ),
            );
        }
    }
}

/// A residual is one tensor (version-checked) or a value holding no tensor (owned by the
/// node). A type that holds tensors some other way would be an unchecked alias, so a stale
/// residual would silently give a wrong gradient; a borrow cannot outlive the forward body.
fn check_residual_type(cx: &Ctxt, ty: &Type) {
    match ty {
        Type::Reference(r) if is_tensor(&r.elem) => cx.error_spanned_by(
            ty,
            "a #[residual] outlives the forward body, so it cannot borrow a tensor: declare it `: Tensor` (clone the handle, which stays version-checked) or omit the type",
        ),
        Type::Reference(r) if r.lifetime.as_ref().is_none_or(|l| l.ident != "static") => {
            cx.error_spanned_by(
                ty,
                "a #[residual] outlives the forward body, so it must be an owned value: drop the `&` (`Vec<_>` for a slice, `String` for a `str`)",
            );
        }
        _ if !is_tensor(ty) && mentions_tensor(ty) => cx.error_spanned_by(
            ty,
            "a #[residual] holding tensors inside another type would not be version-checked: keep one tensor per #[residual] (`let name: Tensor = ...` or no type)",
        ),
        _ => {}
    }
}

/// `ty` as written, without the spaces token printing puts around punctuation: `&[Tensor]`,
/// `&'a mut Vec<f32>`.
pub(super) fn tokens(ty: &Type) -> String {
    let printed = ty.to_token_stream().to_string();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let chars: Vec<char> = printed.chars().collect();
    let mut out = String::with_capacity(chars.len());
    for (i, &c) in chars.iter().enumerate() {
        let joins_words = i > 0 && word(Some(chars[i - 1])) && word(chars.get(i + 1).copied());
        if c != ' ' || joins_words {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::tokens;

    #[test]
    fn tokens_prints_types_as_written() {
        let ty = |s: &str| syn::parse_str::<syn::Type>(s).unwrap();
        assert_eq!(tokens(&ty("& [Tensor]")), "&[Tensor]");
        assert_eq!(tokens(&ty("&'a mut Vec<f32>")), "&'a mut Vec<f32>");
        assert_eq!(tokens(&ty("Vec<Option<Tensor>>")), "Vec<Option<Tensor>>");
        assert_eq!(tokens(&ty("&dyn Fn(f32) -> f32")), "&dyn Fn(f32)->f32");
    }
}

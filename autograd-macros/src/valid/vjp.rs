//! The rules of a `#[differentiable]` function's nested `fn vjp`: its signature, its cotangent
//! and `output` parameters, the forward parameters and locals it reads, and the gradients it
//! returns (one per tensor input, each of the input's gradient type).

use std::collections::HashSet;

use quote::ToTokens;
use syn::{FnArg, ReturnType, Safety, Type};

use super::{cotangent_spelling, tokens};
use crate::ast::{
    is_tensor, is_tensor_ref, option_inner, outer_name, pattern_names, Function, Grads, Input,
    Target, Vjp, OUTPUT,
};
use crate::ctxt::Ctxt;

/// How the VJP takes `output` for a function with `n` outputs.
fn output_spelling(n: usize) -> String {
    if n == 1 {
        "&Tensor".to_owned()
    } else {
        format!("({})", vec!["&Tensor"; n].join(", "))
    }
}

pub(super) fn check_vjp(cx: &Ctxt, f: &Function, vjp: &Vjp, params_ok: bool) {
    let sig = &vjp.original.sig;
    if let Some(t) = &sig.constness {
        cx.error_spanned_by(t, "the vjp cannot be `const`");
    }
    if let Some(t) = &sig.asyncness {
        cx.error_spanned_by(t, "the vjp cannot be `async`");
    }
    match &sig.safety {
        Safety::Unsafe(t) => cx.error_spanned_by(
            t,
            "the vjp cannot be `unsafe`; use an `unsafe` block inside its body",
        ),
        Safety::Safe(t) => {
            cx.error_spanned_by(t, "the vjp cannot be `safe`: write a plain `fn vjp`");
        }
        Safety::Default => {}
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned_by(abi, "the vjp cannot declare an ABI: write a plain `fn vjp`");
    }
    if let Some(v) = &sig.variadic {
        cx.error_spanned_by(v, "the vjp cannot be variadic");
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        cx.error_spanned_by(
            &sig.generics,
            "the vjp cannot declare generics; it can use the forward function's",
        );
    }
    if let Some(err) = vjp.error_type {
        if outer_name(err).as_deref() != Some("Error") {
            cx.error_spanned_by(
                err,
                "the vjp's errors become autograd_core errors: return `Result<...>` with autograd_core's `Result` (convert other errors with `map_err`, e.g. into `Error::Value`)",
            );
        }
    }
    check_cotangent(cx, f, vjp);
    check_vjp_params(cx, f, vjp);
    check_vjp_reads(cx, f, vjp);
    if params_ok {
        check_grads(cx, f, vjp);
    }
}

fn check_cotangent(cx: &Ctxt, f: &Function, vjp: &Vjp) {
    let n = f.output.assumed();
    let spelled = cotangent_spelling(n);
    match vjp.cotangent {
        None => cx.error_spanned_by(
            &vjp.original.sig.ident,
            if n == 1 {
                "the vjp takes the cotangent of the output as its first parameter: `fn vjp(g: &Tensor, ...)`".to_owned()
            } else {
                format!(
                    "the vjp takes the cotangents of the {n} outputs as its first parameter, `None` for an output the traversal did not reach: `fn vjp(g: {spelled}, ...)`"
                )
            },
        ),
        Some(FnArg::Receiver(r)) => cx.error_spanned_by(
            r,
            format_args!("the vjp's first parameter is the cotangent and must be `{spelled}`"),
        ),
        Some(FnArg::Typed(p)) => {
            // A first parameter named like a forward value was meant as that value: passing
            // the cotangent under its name would compile and give wrong gradients.
            let mut names = Vec::new();
            pattern_names(&p.pat, &mut names);
            let named = names.into_iter().find_map(|n| {
                let what = if n == OUTPUT {
                    "the forward output"
                } else if f.param_named(n).is_some() {
                    "a forward parameter"
                } else if f.residual_named(n).is_some() {
                    "a residual"
                } else {
                    return None;
                };
                Some((n, what))
            });
            if let Some((name, what)) = named {
                cx.error_spanned_by(
                    name,
                    format_args!(
                        "the first vjp parameter is the cotangent; `{name}` names {what}: add a cotangent parameter first, e.g. `g: {spelled}`"
                    ),
                );
            } else if f.output.count().is_some() {
                // (a wrong forward output is reported on its own)
                check_cotangent_type(cx, f, n, &p.ty);
            }
        }
    }
}

/// The cotangent's type: `&Tensor` for one output, or `Tensor` to take it over; for `n` outputs
/// a tuple of `n` `Option<&Tensor>` (`None` for an output the traversal did not reach).
fn check_cotangent_type(cx: &Ctxt, f: &Function, n: usize, ty: &Type) {
    let spelled = cotangent_spelling(n);
    let name = f.name();
    let tuple = match ty {
        Type::Tuple(t) => Some(t),
        Type::Paren(p) => match &*p.elem {
            Type::Tuple(t) => Some(t),
            _ => None,
        },
        _ => None,
    };
    if n == 1 {
        if tuple.is_some() {
            cx.error_spanned_by(
                ty,
                format_args!(
                    "`{name}` has one output, so the vjp's first parameter is its cotangent, `&Tensor`; a tuple of cotangents is for a function returning several tensors"
                ),
            );
        } else if !is_tensor_ref(ty) && !is_tensor(ty) {
            cx.error_spanned_by(
                ty,
                "the vjp's first parameter is the cotangent of the output and must be `&Tensor` (or `Tensor`, to take the engine's own and reuse its storage)",
            );
        }
        return;
    }
    match tuple {
        Some(t) if t.elems.len() == n => {
            for (k, elem) in t.elems.iter().enumerate() {
                if !option_inner(elem).is_some_and(is_tensor_ref) {
                    cx.error_spanned_by(
                        elem,
                        format_args!(
                            "cotangent {k} is for output {k} of `{name}`, so its type is `Option<&Tensor>` (`None` when the traversal did not reach that output)"
                        ),
                    );
                }
            }
        }
        Some(t) => cx.error_spanned_by(
            t,
            format_args!(
                "the vjp takes {} {} but `{name}` has {n} outputs: declare `{spelled}`, one per output in order",
                t.elems.len(),
                if t.elems.len() == 1 { "cotangent" } else { "cotangents" },
            ),
        ),
        None if is_tensor_ref(ty) || is_tensor(ty) => cx.error_spanned_by(
            ty,
            format_args!(
                "`{name}` has {n} outputs, so one tensor cannot be its cotangent: take one per output, `g: {spelled}` (or destructured, `({}): ...`), `None` for an output the traversal did not reach",
                (0..n).map(|k| format!("g{k}")).collect::<Vec<_>>().join(", ")
            ),
        ),
        None => cx.error_spanned_by(
            ty,
            format_args!(
                "`{name}` has {n} outputs, so the vjp's first parameter is one cotangent per output: `g: {spelled}`, `None` for an output the traversal did not reach"
            ),
        ),
    }
}

fn check_vjp_params(cx: &Ctxt, f: &Function, vjp: &Vjp) {
    let mut seen = HashSet::new();
    let mut masks = 0;
    for p in &vjp.params {
        let Some(name) = p.ident else {
            let what = match p.original {
                FnArg::Receiver(_) => "the vjp cannot take `self`",
                FnArg::Typed(_) => "a vjp parameter must be a plain name: the name of a forward parameter, `output`, or a residual",
            };
            cx.error_spanned_by(p.original, what);
            continue;
        };
        if !seen.insert(name.to_string()) {
            continue; // rustc reports the duplicate binding itself
        }
        let Some(target) = f.target(p) else {
            cx.error_spanned_by(
                name,
                format_args!(
                    "`{name}` is not a parameter of `{}`; the vjp can take the forward parameters ({}), `output`, #[residual] values ({}), and the wanted-gradient mask as `needs: &NeedsGrad`",
                    f.name(),
                    list(f.params.iter().filter_map(|p| p.ident)),
                    list(f.residuals.iter().filter_map(|r| r.ident)),
                ),
            );
            continue;
        };
        let Some(ty) = p.ty else { continue };
        if let Type::Reference(r) = ty {
            if let Some(m) = &r.mutability {
                cx.error_spanned_by(
                    m,
                    format_args!("the vjp cannot take `{name}` as `&mut`: the node's values are shared by every backward pass; take it as `&T` or by value"),
                );
                continue;
            }
        }
        let tensor_like = is_tensor(ty) || is_tensor_ref(ty);
        match target {
            Target::Needs => {
                masks += 1;
                if masks > 1 {
                    cx.error_spanned_by(ty, "the vjp takes the wanted-gradient mask once");
                } else if !matches!(ty, Type::Reference(_)) {
                    cx.error_spanned_by(
                        ty,
                        "the vjp takes the wanted-gradient mask as `&NeedsGrad`",
                    );
                } else if f.target_named(&name.to_string()).is_some() {
                    cx.error_spanned_by(
                        name,
                        format_args!(
                            "`{name}` names a value of `{}`; call the wanted-gradient mask `needs`",
                            f.name()
                        ),
                    );
                }
            }
            Target::Param(param) => match param.input {
                Input::Captured | Input::Options => check_captured(cx, param.ty),
                Input::Tensor { .. } if !tensor_like => cx.error_spanned_by(
                    ty,
                    format_args!(
                        "`{name}` is a tensor input, so the vjp takes it as `&Tensor` or `Tensor`"
                    ),
                ),
                Input::OptionalTensor { .. } => {
                    if !option_inner(ty).is_some_and(|t| is_tensor(t) || is_tensor_ref(t)) {
                        cx.error_spanned_by(
                            ty,
                            format_args!(
                                "`{name}` is an optional tensor input, so the vjp takes it as `Option<&Tensor>` or `Option<Tensor>`"
                            ),
                        );
                    }
                }
                Input::TensorSlice { elem_ref } => {
                    let same = matches!(
                        ty,
                        Type::Reference(r) if matches!(&*r.elem, Type::Slice(s)
                            if if elem_ref { is_tensor_ref(&s.elem) } else { is_tensor(&s.elem) })
                    );
                    if !same {
                        cx.error_spanned_by(
                            ty,
                            format_args!(
                                "`{name}` is a slice of tensor inputs, so the vjp takes it as `{}`",
                                tokens(param.ty)
                            ),
                        );
                    }
                }
                Input::Tensor { .. } | Input::Unsupported => {}
            },
            Target::Output => check_output_param(cx, f, ty),
            Target::Residual(i) if !tensor_like => {
                let r = &f.residuals[i];
                let rname = r.ident.map(ToString::to_string).unwrap_or_default();
                match r.ty {
                    // An untyped residual is kept as a tensor: the fix is its annotation.
                    None => {
                        let owned = match ty {
                            Type::Reference(r) => &*r.elem,
                            other => other,
                        };
                        cx.error_spanned_by(
                            &r.original.pat,
                            format_args!(
                                "residual `{rname}` has no type, so it is kept as a tensor, but the vjp takes it as `{}`: annotate it, `let {rname}: {} = ...;`",
                                tokens(ty),
                                tokens(owned),
                            ),
                        );
                    }
                    Some(rt) if is_tensor(rt) => cx.error_spanned_by(
                        ty,
                        format_args!("residual `{rname}` is a tensor, so the vjp takes it as `&Tensor` or `Tensor`"),
                    ),
                    Some(_) => {}
                }
            }
            Target::Residual(_) => {}
        }
    }
}

/// Whether the VJP's first parameter bears `name` (a VJP that forgot its cotangent, reported
/// as that).
pub(super) fn names_cotangent(f: &Function, name: &syn::Ident) -> bool {
    let Some(FnArg::Typed(p)) = f.vjps.first().and_then(|v| v.cotangent) else {
        return false;
    };
    let mut names = Vec::new();
    pattern_names(&p.pat, &mut names);
    names.contains(&name)
}

/// `output` is one tensor for one output and a tuple of them for several; each taken by
/// reference or by value.
fn check_output_param(cx: &Ctxt, f: &Function, ty: &Type) {
    let tensor_like = |t: &Type| is_tensor(t) || is_tensor_ref(t);
    let Some(n) = f.output.count() else {
        return; // a wrong forward output is reported on its own
    };
    if n == 1 {
        if !tensor_like(ty) {
            cx.error_spanned_by(
                ty,
                "`output` is the forward output, so the vjp takes it as `&Tensor` or `Tensor`",
            );
        }
        return;
    }
    let ok = matches!(ty, Type::Tuple(t) if t.elems.len() == n && t.elems.iter().all(tensor_like));
    if !ok {
        cx.error_spanned_by(
            ty,
            format_args!(
                "`output` is the {n} outputs of `{}`, so the vjp takes it as a tuple, `{}` (each entry `&Tensor` or `Tensor`)",
                f.name(),
                output_spelling(n)
            ),
        );
    }
}

/// A VJP is a nested `fn`, so it cannot read the forward body's locals (or parameters and
/// residuals it did not declare); rustc would say only "cannot find value". Names the VJP
/// binds itself anywhere are left alone, so a hint is never wrong.
fn check_vjp_reads(cx: &Ctxt, f: &Function, vjp: &Vjp) {
    for (name, message) in forward_reads(f, vjp) {
        cx.error_spanned_by(name, message);
    }
}

/// Whether the VJP reads no value of the forward it did not declare. When it does, the
/// fallback leaves the VJP out, or rustc would add its own "can't capture" to the hint.
pub(crate) fn vjp_reads_declared(f: &Function) -> bool {
    f.vjps
        .first()
        .is_none_or(|v| forward_reads(f, v).is_empty())
}

/// The forward values the VJP reads without declaring them, each with its message.
fn forward_reads<'a>(f: &Function<'a>, vjp: &Vjp<'a>) -> Vec<(&'a syn::Ident, String)> {
    let mut found = Vec::new();
    let g = cotangent_spelling(f.output.assumed());
    let declared: HashSet<String> = vjp
        .params
        .iter()
        .filter_map(|p| p.ident)
        .map(ToString::to_string)
        .collect();
    let mut reported = HashSet::new();
    for &name in &vjp.reads {
        let n = name.to_string();
        if declared.contains(&n) || vjp.binds.contains(&n) || !reported.insert(n.clone()) {
            continue;
        }
        let message = if f.locals.contains(&name) && f.target_named(&n).is_none() {
            format!(
                "the vjp cannot read `{n}`, a local of the forward body: mark its `let` #[residual] (`#[residual] let {n} = ...;`) and take it as a vjp parameter"
            )
        } else {
            match f.target_named(&n) {
                Some(Target::Param(_)) => format!(
                    "the vjp reads `{n}`, a parameter of `{}`: take it as a vjp parameter too (`fn vjp(g: {g}, {n}: ...)`)",
                    f.name()
                ),
                Some(Target::Residual(_)) => format!(
                    "the vjp reads residual `{n}`: take it as a vjp parameter (`fn vjp(g: {g}, {n}: ...)`)"
                ),
                Some(Target::Output) => format!(
                    "the vjp reads `output`: take it as a vjp parameter (`output: {}`)",
                    output_spelling(f.output.assumed())
                ),
                Some(Target::Needs) | None => continue,
            }
        };
        found.push((name, message));
    }
    found
}

/// A captured parameter is stored in the node, so its type must describe an owned value.
fn check_captured(cx: &Ctxt, ty: &Type) {
    match ty {
        Type::ImplTrait(_) => cx.error_spanned_by(
            ty,
            "the vjp reads this parameter, so the node stores it, which needs a named type: replace `impl Trait` by a generic parameter",
        ),
        Type::Reference(r) if r.mutability.is_some() => cx.error_spanned_by(
            ty,
            "the vjp reads this parameter, so the node stores a copy of it, which a `&mut` parameter cannot give; take it by value or as `&T`",
        ),
        _ => {}
    }
}

fn check_grads(cx: &Ctxt, f: &Function, vjp: &Vjp) {
    let inputs: Vec<_> = f.tensor_inputs().collect();
    let names = list(inputs.iter().filter_map(|p| p.ident));
    let expected = inputs.len();
    let return_span: &dyn ToTokens = match &vjp.original.sig.output {
        ReturnType::Type(_, ty) => ty,
        ReturnType::Default => &vjp.original.sig.ident,
    };
    let suggestion = example(&inputs.iter().map(|p| p.input).collect::<Vec<_>>());
    let elements = match &vjp.grads {
        Grads::Missing => {
            cx.error_spanned_by(
                return_span,
                format_args!(
                    "the vjp returns one gradient per tensor input of `{}` ({names}): declare `-> Result<{suggestion}>`",
                    f.name(),
                ),
            );
            return;
        }
        Grads::Array(a, None) => {
            cx.error_spanned_by(
                &a.len,
                format_args!("write the number of gradients as an integer literal: {expected}"),
            );
            return;
        }
        grads => grads.count().unwrap_or_default(),
    };
    let grads_span: &dyn ToTokens = match &vjp.grads {
        Grads::Tuple(t) => *t,
        Grads::Array(a, _) => *a,
        Grads::Single(t) => *t,
        Grads::Missing => return_span,
    };
    // A `Vec` is the gradients of one slice: for several fixed inputs, the count is not the
    // mistake.
    if let Grads::Single(ty) = vjp.grads {
        let one_slice =
            matches!(inputs.as_slice(), [p] if matches!(p.input, Input::TensorSlice { .. }));
        if outer_name(ty).as_deref() == Some("Vec") && !one_slice {
            cx.error_spanned_by(
                ty,
                format_args!(
                    "a `Vec` of gradients is for one slice input, but `{}` has {expected} tensor {} ({names}): return `{suggestion}`, one gradient per tensor input in order",
                    f.name(),
                    if expected == 1 { "input" } else { "inputs" },
                ),
            );
            return;
        }
    }
    if elements != expected {
        let plural = |n: usize| if n == 1 { "gradient" } else { "gradients" };
        cx.error_spanned_by(
            grads_span,
            format_args!(
                "the vjp returns {} {} but `{}` has {expected} tensor {} ({names}): return exactly {expected} {}, one per tensor input in order",
                elements,
                plural(elements),
                f.name(),
                if expected == 1 { "input" } else { "inputs" },
                plural(expected),
            ),
        );
        return;
    }
    for (i, input) in inputs.iter().enumerate() {
        let Some(ty) = vjp.grads.element(i) else {
            break;
        };
        let name = input.ident.map(ToString::to_string).unwrap_or_default();
        let (ok, written) = match input.input {
            Input::TensorSlice { .. } => (
                outer_name(ty).as_deref() == Some("Vec")
                    && vec_inner(ty).and_then(option_inner).is_some_and(is_tensor),
                "Vec<Option<Tensor>>",
            ),
            _ => (option_inner(ty).is_some_and(is_tensor), "Option<Tensor>"),
        };
        if !ok {
            let span: &dyn ToTokens = if matches!(vjp.grads, Grads::Array(..)) {
                grads_span
            } else {
                ty
            };
            let absent = if matches!(input.input, Input::OptionalTensor { .. }) {
                " (`None` when it is absent)"
            } else {
                ""
            };
            cx.error_spanned_by(
                span,
                format_args!("gradient {i} is for `{name}`, so its type is `{written}`{absent}"),
            );
            if matches!(vjp.grads, Grads::Array(..)) {
                break; // one message for the one written element type
            }
        }
    }
}

/// `T` of a type written `Vec<T>`.
fn vec_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first() {
        Some(syn::GenericArgument::Type(t)) if last.ident == "Vec" => Some(t),
        _ => None,
    }
}

fn list<'a>(names: impl Iterator<Item = &'a syn::Ident>) -> String {
    let v: Vec<String> = names.map(|n| format!("`{n}`")).collect();
    if v.is_empty() {
        "none".to_owned()
    } else {
        v.join(", ")
    }
}

fn example(inputs: &[Input]) -> String {
    let one = |i: &Input| match i {
        Input::TensorSlice { .. } => "Vec<Option<Tensor>>",
        _ => "Option<Tensor>",
    };
    match inputs {
        [single] => one(single).to_owned(),
        _ => format!(
            "({})",
            inputs.iter().map(one).collect::<Vec<_>>().join(", ")
        ),
    }
}

//! What a validated `#[differentiable]` function turns into, decided once: where each tensor
//! input sits among the saved inputs, what the node's context and fields hold, and where each
//! VJP parameter comes from. The generators in `expand/` only read this plan (thiserror's
//! split: analysis here, one generator per emitted item there).

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, ToTokens};
use syn::{Ident, Type};

use crate::ast::{Function, Input, Param, Target};

/// A generated name: `__`-prefixed, resolved with mixed-site hygiene.
pub(crate) fn id(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

/// A numbered generated name, `__grad0`.
pub(crate) fn numbered(prefix: &str, i: usize) -> Ident {
    format_ident!("{}{}", prefix, i, span = Span::mixed_site())
}

pub(crate) struct Plan<'a, 'f> {
    pub(crate) f: &'f Function<'a>,
    /// `<crate>::__private`: every path to the library.
    pub(crate) p: TokenStream,
    /// How many tensors the forward returns (`Tensor`: 1; a tuple: its arity).
    pub(crate) outputs: usize,
    /// The tensor inputs in parameter order (gradient order).
    pub(crate) inputs: Vec<TensorInput<'a, 'f>>,
    /// How many inputs have a count known only at run time (optional inputs and slices).
    pub(crate) n_counts: usize,
    /// The node's context tensors, version-checked: the outputs (when read, all of them, in
    /// order), then the tensor residuals the VJP reads.
    pub(crate) context: Vec<ContextItem>,
    /// Values the node owns for the VJP.
    pub(crate) stored: Vec<Stored<'a>>,
    /// One entry per VJP parameter after the cotangent, in the VJP's order.
    pub(crate) args: Vec<Arg<'a>>,
    /// Whether the VJP takes the wanted-gradient mask.
    pub(crate) wants_mask: bool,
    /// Whether the VJP takes its cotangent by value (`g: Tensor`) rather than `&Tensor`.
    pub(crate) owns_cotangent: bool,
}

/// One tensor parameter of the forward function.
pub(crate) struct TensorInput<'a, 'f> {
    pub(crate) param: &'f Param<'a>,
    pub(crate) ident: &'a Ident,
    pub(crate) kind: InputKind,
    /// For an optional or slice input: its entry in the node's run-time counts.
    pub(crate) count: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputKind {
    /// `&Tensor` or `Tensor`: exactly one saved input.
    One { by_ref: bool },
    /// `Option<&Tensor>` or `Option<Tensor>`: one saved input when present.
    Optional { by_ref: bool },
    /// `&[Tensor]` or `&[&Tensor]`: one saved input per element.
    Slice { elem_ref: bool },
}

/// A context tensor: its name for messages and how the prologue produces it.
pub(crate) struct ContextItem {
    pub(crate) name: String,
    pub(crate) source: ContextSource,
}

pub(crate) enum ContextSource {
    /// Forward result `k` (kept detached, so the node never owns its own result).
    Output(usize),
    /// Residual number `i` (index among all residuals).
    Residual(usize),
}

/// A value the node owns for the VJP.
pub(crate) struct Stored<'a> {
    pub(crate) field: Ident,
    /// The field's type.
    pub(crate) ty: TokenStream,
    /// The type checked to hold no tensor (a `&T` parameter's `T`).
    pub(crate) checked: &'a Type,
    pub(crate) init: StoredInit<'a>,
}

pub(crate) enum StoredInit<'a> {
    /// A parameter taken by value: cloned before forward consumes it.
    OwnedParam(&'a Ident),
    /// A parameter taken as `&T`: `ToOwned::to_owned` after forward.
    BorrowedParam(&'a Ident, &'a Type),
    /// A non-tensor residual (its index among residuals).
    Residual(usize),
}

/// A VJP parameter and where its value comes from.
pub(crate) struct Arg<'a> {
    pub(crate) ty: &'a Type,
    pub(crate) source: Source,
}

pub(crate) enum Source {
    /// Tensor input `k` (index into `Plan::inputs`).
    Input(usize),
    /// Context tensor `c`.
    Context(usize),
    /// The forward output: context tensors `0..outputs`, one tensor or a tuple of them.
    Output,
    /// Node field `s` (index into `Plan::stored`).
    Field(usize),
    /// The wanted-gradient mask.
    Needs,
}

impl<'a, 'f> Plan<'a, 'f> {
    /// The plan of `f`, whose generated code reaches the library through `p`.
    pub(crate) fn new(f: &'f Function<'a>, p: TokenStream) -> Plan<'a, 'f> {
        let vjp = f.vjp();
        let outputs = f.output.count().expect("validated forward output");

        let mut n_counts = 0;
        let inputs: Vec<TensorInput> = f
            .tensor_inputs()
            .map(|param| {
                let kind = match param.input {
                    Input::Tensor { by_ref } => InputKind::One { by_ref },
                    Input::OptionalTensor { by_ref } => InputKind::Optional { by_ref },
                    Input::TensorSlice { elem_ref } => InputKind::Slice { elem_ref },
                    _ => unreachable!("tensor_inputs yields tensor inputs"),
                };
                let count = (!matches!(kind, InputKind::One { .. })).then(|| {
                    n_counts += 1;
                    n_counts - 1
                });
                TensorInput {
                    param,
                    ident: param.ident.expect("validated parameter name"),
                    kind,
                    count,
                }
            })
            .collect();

        let targets: Vec<Option<Target>> = vjp.params.iter().map(|vp| f.target(vp)).collect();
        let mut context = Vec::new();
        if targets.iter().any(|t| matches!(t, Some(Target::Output))) {
            for k in 0..outputs {
                let name = if outputs == 1 {
                    crate::ast::OUTPUT.to_owned()
                } else {
                    format!("{}.{k}", crate::ast::OUTPUT)
                };
                context.push(ContextItem {
                    name,
                    source: ContextSource::Output(k),
                });
            }
        }
        let mut stored = Vec::new();
        for (i, r) in f.residuals.iter().enumerate() {
            if !f.vjp_reads_residual(i) {
                continue; // never kept, stored or version-checked (and reported by valid.rs)
            }
            let ident = r.ident.expect("validated residual name");
            if r.is_tensor() {
                context.push(ContextItem {
                    name: ident.to_string(),
                    source: ContextSource::Residual(i),
                });
            } else {
                let ty = r.ty.expect("typed non-tensor residual");
                stored.push(Stored {
                    field: numbered("__value", stored.len()),
                    ty: ty.to_token_stream(),
                    checked: ty,
                    init: StoredInit::Residual(i),
                });
            }
        }
        for param in &f.params {
            let Some(ident) = param.ident else { continue };
            if !matches!(param.input, Input::Captured | Input::Options) || !f.vjp_reads_param(param)
            {
                continue;
            }
            let (ty, checked, init) = match param.ty {
                Type::Reference(r) => {
                    let elem = &*r.elem;
                    (
                        quote!(<#elem as ::std::borrow::ToOwned>::Owned),
                        elem,
                        StoredInit::BorrowedParam(ident, elem),
                    )
                }
                ty => (ty.to_token_stream(), ty, StoredInit::OwnedParam(ident)),
            };
            stored.push(Stored {
                field: numbered("__value", stored.len()),
                ty,
                checked,
                init,
            });
        }

        let args = vjp
            .params
            .iter()
            .zip(&targets)
            .map(|(vp, target)| {
                let source = match target.expect("validated vjp parameter") {
                    Target::Needs => Source::Needs,
                    Target::Output => Source::Output,
                    Target::Param(param) => {
                        if let Some(k) = inputs.iter().position(|t| std::ptr::eq(t.param, param)) {
                            Source::Input(k)
                        } else {
                            let s = stored.iter().position(|s| match s.init {
                                StoredInit::OwnedParam(i) | StoredInit::BorrowedParam(i, _) => {
                                    Some(i) == param.ident
                                }
                                StoredInit::Residual(_) => false,
                            });
                            Source::Field(s.expect("stored parameter"))
                        }
                    }
                    Target::Residual(i) => {
                        if let Some(c) = context
                            .iter()
                            .position(|c| matches!(c.source, ContextSource::Residual(x) if x == i))
                        {
                            Source::Context(c)
                        } else {
                            let s = stored
                                .iter()
                                .position(|s| matches!(s.init, StoredInit::Residual(x) if x == i));
                            Source::Field(s.expect("stored residual"))
                        }
                    }
                };
                Arg {
                    ty: vp.ty.expect("validated typed vjp parameter"),
                    source,
                }
            })
            .collect::<Vec<_>>();
        let wants_mask = args.iter().any(|a| matches!(a.source, Source::Needs));
        let owns_cotangent = matches!(
            f.vjp().cotangent,
            Some(syn::FnArg::Typed(t)) if crate::ast::is_tensor(&t.ty)
        );

        Plan {
            f,
            p,
            outputs,
            inputs,
            n_counts,
            context,
            stored,
            args,
            wants_mask,
            owns_cotangent,
        }
    }

    /// Whether the forward returns several tensors (a node with several results).
    pub(crate) fn several(&self) -> bool {
        self.outputs > 1
    }

    /// Whether saved positions are known only at run time.
    pub(crate) fn dynamic(&self) -> bool {
        self.n_counts > 0
    }

    /// The name of the operation.
    pub(crate) fn name(&self) -> String {
        self.f.name()
    }
}

//! The typed model of one `#[differentiable]` function. It borrows from the parsed item and
//! keeps the `original` syntax of every part, so later steps can point at the exact span.
//!
//! Parsing classifies, it does not judge: every rule lives in `valid` (`valid.rs`, `valid/vjp.rs`).

use std::collections::HashSet;

use syn::visit::Visit;
use syn::{
    Attribute, Expr, FnArg, GenericArgument, Ident, Item, ItemFn, Local, Pat, PatType,
    PathArguments, Receiver, ReturnType, Stmt, Token, Type, TypeArray, TypeTuple,
};

/// The name of the nested function that holds the VJP.
pub(crate) const VJP: &str = "vjp";
/// The attribute marking a `let` of the forward body as a residual kept for the VJP.
pub(crate) const RESIDUAL: &str = "residual";
/// The name under which the VJP reads the forward output.
pub(crate) const OUTPUT: &str = "output";
/// The parameter name that is never saved (execution options).
pub(crate) const OPTIONS: &str = "options";
/// The type name of the VJP parameter that receives the wanted-gradient mask.
pub(crate) const NEEDS_GRAD: &str = "NeedsGrad";

/// One annotated forward function with its nested VJP.
pub(crate) struct Function<'a> {
    pub(crate) original: &'a ItemFn,
    /// `self` receivers (always a mistake).
    pub(crate) receivers: Vec<&'a Receiver>,
    /// The typed parameters, classified.
    pub(crate) params: Vec<Param<'a>>,
    /// The forward body, statement by statement.
    pub(crate) body: Vec<BodyStmt<'a>>,
    /// Every nested `fn vjp` at the top level of the body (valid: exactly one).
    pub(crate) vjps: Vec<Vjp<'a>>,
    /// `#[residual] let` statements at the top level of the body, in order.
    pub(crate) residuals: Vec<Residual<'a>>,
    /// `#[residual]` attributes anywhere else (always a mistake).
    pub(crate) stray_residuals: Vec<&'a Attribute>,
    /// Names bound by the other `let`s at the top level of the body (the VJP cannot read them).
    pub(crate) locals: Vec<&'a Ident>,
    /// The declared return type, classified.
    pub(crate) output: Output<'a>,
}

/// The forward's return type: `Result<T>`, `Result<T, E>` or plain `T`, where `T` is one
/// tensor or a tuple of several.
pub(crate) struct Output<'a> {
    /// The declared type (`None` when omitted).
    pub(crate) ty: Option<&'a Type>,
    /// `T`: the whole type when it is not a `Result`.
    pub(crate) ok: Option<&'a Type>,
    /// Whether the type is a `Result`.
    pub(crate) fallible: bool,
    /// `E` of `Result<T, E>`.
    pub(crate) error_type: Option<&'a Type>,
}

impl<'a> Output<'a> {
    fn from_syn(ret: &'a ReturnType) -> Output<'a> {
        let ReturnType::Type(_, ty) = ret else {
            return Output {
                ty: None,
                ok: None,
                fallible: false,
                error_type: None,
            };
        };
        let (ok, fallible, error_type) = match result_types(ty) {
            Some((ok, e)) if !is_tensor(ty) => (ok, true, e),
            _ => (&**ty, false, None),
        };
        Output {
            ty: Some(ty),
            ok: Some(ok),
            fallible,
            error_type,
        }
    }

    /// The tuple of several outputs, `(Tensor, Tensor, ...)` as written (not yet validated).
    pub(crate) fn tuple(&self) -> Option<&'a TypeTuple> {
        let mut ty = self.ok?;
        loop {
            match ty {
                Type::Tuple(t) => return Some(t),
                Type::Group(g) => ty = &g.elem,
                Type::Paren(p) => ty = &p.elem,
                _ => return None,
            }
        }
    }

    /// How many tensors the forward returns: 1 for `Tensor`, `N` for a tuple of `N >= 2`
    /// tensors; `None` for anything else (a mistake `valid.rs` reports).
    pub(crate) fn count(&self) -> Option<usize> {
        if self.ok.is_some_and(is_tensor) {
            return Some(1);
        }
        let t = self.tuple()?;
        (t.elems.len() >= 2 && t.elems.iter().all(is_tensor)).then_some(t.elems.len())
    }

    /// The number of outputs messages assume: the declared count, else the arity of a
    /// written tuple of several entries, else 1 (a wrong return type is reported on its own).
    pub(crate) fn assumed(&self) -> usize {
        self.count()
            .or_else(|| self.tuple().map(|t| t.elems.len()).filter(|&n| n > 1))
            .unwrap_or(1)
    }
}

/// A statement of the forward body and what expansion does with it.
pub(crate) enum BodyStmt<'a> {
    /// Stays in the forward body.
    Keep(&'a Stmt),
    /// An item (`use`, helper `fn`, `const`, ...): moved next to the forward body and the VJP
    /// so both can use it.
    Hoist(&'a Item),
    /// The nested VJP: removed from the forward body.
    Vjp,
    /// A residual (index into `Function::residuals`): stays, and its value is kept.
    Residual(usize),
}

/// A typed parameter of the forward function.
pub(crate) struct Param<'a> {
    pub(crate) original: &'a PatType,
    /// The bound name, when the pattern is a plain (possibly `mut`) identifier.
    pub(crate) ident: Option<&'a Ident>,
    /// `mut` of `mut name: T`.
    pub(crate) mutability: Option<&'a Token![mut]>,
    pub(crate) ty: &'a Type,
    pub(crate) input: Input,
}

/// How a forward parameter takes part in differentiation (PyO3's `FnArg`, for tensors).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// `&Tensor` (`by_ref`) or `Tensor`: one saved input.
    Tensor { by_ref: bool },
    /// `Option<&Tensor>` (`by_ref`) or `Option<Tensor>`: one saved input when present, none
    /// when absent.
    OptionalTensor { by_ref: bool },
    /// `&[Tensor]` or `&[&Tensor]` (`elem_ref`): a variable number of saved inputs.
    TensorSlice { elem_ref: bool },
    /// Any other type: captured by value for the VJP when the VJP names it.
    Captured,
    /// A parameter named `options`: never saved.
    Options,
    /// A type that holds tensors in a way the macro cannot save (`Vec<Tensor>`, `&mut Tensor`, ...).
    Unsupported,
}

/// The nested `fn vjp`.
pub(crate) struct Vjp<'a> {
    pub(crate) original: &'a ItemFn,
    /// The first parameter: the cotangent of the output.
    pub(crate) cotangent: Option<&'a FnArg>,
    /// The other parameters, each naming a forward parameter, `output` or a residual.
    pub(crate) params: Vec<VjpParam<'a>>,
    /// The gradients as written in the return type.
    pub(crate) grads: Grads<'a>,
    /// Whether the return type is `Result<G>` rather than plain `G`.
    pub(crate) fallible: bool,
    /// `E` of a return type written `Result<G, E>`.
    pub(crate) error_type: Option<&'a Type>,
    /// Single-segment paths the body reads (`mask` in `mask.len()`), in order.
    pub(crate) reads: Vec<&'a Ident>,
    /// Every name the VJP binds itself: parameters and patterns anywhere in its body.
    pub(crate) binds: HashSet<String>,
}

/// A parameter of the VJP after the cotangent.
pub(crate) struct VjpParam<'a> {
    pub(crate) original: &'a FnArg,
    /// The name, when the parameter is typed and its pattern is a plain identifier.
    pub(crate) ident: Option<&'a Ident>,
    /// The declared type (`None` for a receiver).
    pub(crate) ty: Option<&'a Type>,
}

/// What a VJP parameter names.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a, 'f> {
    /// A forward parameter.
    Param(&'f Param<'a>),
    /// A residual (its index among residuals).
    Residual(usize),
    /// The forward output.
    Output,
    /// The wanted-gradient mask (recognised by its type, `NeedsGrad`).
    Needs,
}

/// The gradient part `G` of the VJP's return type `Result<G>` or `G`.
pub(crate) enum Grads<'a> {
    /// `(Option<Tensor>, Vec<Option<Tensor>>, ...)`.
    Tuple(&'a TypeTuple),
    /// `[Option<Tensor>; N]`; `len` is `N` when it is an integer literal.
    Array(&'a TypeArray, Option<usize>),
    /// A single gradient (`Option<Tensor>`, or `Vec<Option<Tensor>>` for one slice).
    Single(&'a Type),
    /// The return type is omitted.
    Missing,
}

impl<'a> Grads<'a> {
    /// The number of gradients written, when it can be counted. An array's length is read,
    /// never materialised: `[Option<Tensor>; 1000000000000]` is just a wrong count.
    pub(crate) fn count(&self) -> Option<usize> {
        match *self {
            Grads::Tuple(t) => Some(t.elems.len()),
            Grads::Array(_, Some(n)) => Some(n),
            Grads::Single(_) => Some(1),
            Grads::Array(_, None) | Grads::Missing => None,
        }
    }

    /// The written type of gradient `i` (every entry of an array has the same).
    pub(crate) fn element(&self, i: usize) -> Option<&'a Type> {
        match *self {
            Grads::Tuple(t) => t.elems.iter().nth(i),
            Grads::Array(a, Some(n)) if i < n => Some(&a.elem),
            Grads::Single(t) if i == 0 => Some(t),
            _ => None,
        }
    }
}

/// A `#[residual] let` of the forward body.
pub(crate) struct Residual<'a> {
    pub(crate) original: &'a Local,
    pub(crate) attr: &'a Attribute,
    /// The bound name, when the pattern is a plain identifier.
    pub(crate) ident: Option<&'a Ident>,
    /// `mut` of `let mut name`.
    pub(crate) mutability: Option<&'a Token![mut]>,
    /// The annotated type; `None` means `Tensor`.
    pub(crate) ty: Option<&'a Type>,
}

impl Residual<'_> {
    /// Tensor residuals are kept in the node's context and version-checked; others are owned
    /// values of the node.
    pub(crate) fn is_tensor(&self) -> bool {
        self.ty.is_none_or(is_tensor)
    }
}

impl<'a> Function<'a> {
    pub(crate) fn from_syn(original: &'a ItemFn) -> Function<'a> {
        let mut receivers = Vec::new();
        let mut params = Vec::new();
        for arg in &original.sig.inputs {
            match arg {
                FnArg::Receiver(r) => receivers.push(r),
                FnArg::Typed(p) => params.push(Param::from_syn(p)),
            }
        }
        let mut body = Vec::new();
        let mut vjps = Vec::new();
        let mut residuals = Vec::new();
        let mut strays = StrayResiduals::default();
        let mut locals = Vec::new();
        for stmt in &original.block.stmts {
            match stmt {
                Stmt::Item(Item::Fn(f)) if f.sig.ident == VJP => {
                    strays.visit_item_fn(f);
                    body.push(BodyStmt::Vjp);
                    vjps.push(Vjp::from_syn(f));
                }
                Stmt::Item(item) => {
                    strays.visit_item(item);
                    body.push(BodyStmt::Hoist(item));
                }
                Stmt::Local(local) => {
                    if let Some(attr) = local.attrs.iter().find(|a| is_residual(a)) {
                        strays.visit_local_inner(local, attr);
                        body.push(BodyStmt::Residual(residuals.len()));
                        residuals.push(Residual::from_syn(local, attr));
                    } else {
                        strays.visit_stmt(stmt);
                        pattern_names(&local.pat, &mut locals);
                        body.push(BodyStmt::Keep(stmt));
                    }
                }
                _ => {
                    strays.visit_stmt(stmt);
                    body.push(BodyStmt::Keep(stmt));
                }
            }
        }
        Function {
            original,
            receivers,
            params,
            body,
            vjps,
            residuals,
            stray_residuals: strays.found,
            locals,
            output: Output::from_syn(&original.sig.output),
        }
    }

    /// The name of the operation (the function's name).
    pub(crate) fn name(&self) -> String {
        self.original.sig.ident.to_string()
    }

    /// The parameters that are saved inputs, in order, with their gradient index.
    pub(crate) fn tensor_inputs(&self) -> impl Iterator<Item = &Param<'a>> {
        self.params.iter().filter(|p| p.is_tensor_input())
    }

    /// The parameter bound to `name`.
    pub(crate) fn param_named(&self, name: &Ident) -> Option<&Param<'a>> {
        self.params.iter().find(|p| p.ident == Some(name))
    }

    /// The residual bound to `name`.
    pub(crate) fn residual_named(&self, name: &Ident) -> Option<&Residual<'a>> {
        self.residuals.iter().find(|r| r.ident == Some(name))
    }

    /// The single VJP, once validation made sure there is exactly one.
    pub(crate) fn vjp(&self) -> &Vjp<'a> {
        &self.vjps[0]
    }

    /// What VJP parameter `p` names. `_x` names `x` when nothing is called `_x` (rustc
    /// suggests the underscore for a parameter the body does not read); a parameter whose type
    /// is `NeedsGrad` is the mask whatever its name.
    pub(crate) fn target(&self, p: &VjpParam<'a>) -> Option<Target<'a, '_>> {
        if p.ty.is_some_and(is_needs_grad) {
            return Some(Target::Needs);
        }
        let name = p.ident?.to_string();
        self.target_named(&name).or_else(|| {
            name.strip_prefix('_')
                .filter(|n| !n.is_empty())
                .and_then(|n| self.target_named(n))
        })
    }

    pub(crate) fn target_named(&self, name: &str) -> Option<Target<'a, '_>> {
        if name == OUTPUT {
            return Some(Target::Output);
        }
        if let Some(p) = self
            .params
            .iter()
            .find(|p| p.ident.is_some_and(|i| i == name))
        {
            return Some(Target::Param(p));
        }
        self.residuals
            .iter()
            .position(|r| r.ident.is_some_and(|i| i == name))
            .map(Target::Residual)
    }

    /// Whether the VJP takes residual `index` as a parameter.
    pub(crate) fn vjp_reads_residual(&self, index: usize) -> bool {
        self.vjps.first().is_some_and(|v| {
            v.params
                .iter()
                .any(|p| matches!(self.target(p), Some(Target::Residual(i)) if i == index))
        })
    }

    /// Whether the VJP takes forward parameter `param` as a parameter.
    pub(crate) fn vjp_reads_param(&self, param: &Param<'a>) -> bool {
        self.vjps.first().is_some_and(|v| {
            v.params
                .iter()
                .any(|p| matches!(self.target(p), Some(Target::Param(q)) if std::ptr::eq(q, param)))
        })
    }
}

impl<'a> Param<'a> {
    fn from_syn(original: &'a PatType) -> Param<'a> {
        let ident = plain_ident(&original.pat);
        let mutability = match &*original.pat {
            Pat::Ident(p) => p.mutability.as_ref(),
            _ => None,
        };
        let ty = &*original.ty;
        let input = if ident.is_some_and(|i| i == OPTIONS) {
            Input::Options
        } else {
            classify(ty)
        };
        Param {
            original,
            ident,
            mutability,
            ty,
            input,
        }
    }

    pub(crate) fn is_tensor_input(&self) -> bool {
        matches!(
            self.input,
            Input::Tensor { .. } | Input::OptionalTensor { .. } | Input::TensorSlice { .. }
        )
    }
}

impl<'a> Vjp<'a> {
    fn from_syn(original: &'a ItemFn) -> Vjp<'a> {
        let mut args = original.sig.inputs.iter();
        let cotangent = args.next();
        let params = args
            .map(|arg| match arg {
                FnArg::Typed(p) => VjpParam {
                    original: arg,
                    ident: plain_ident(&p.pat),
                    ty: Some(&*p.ty),
                },
                FnArg::Receiver(_) => VjpParam {
                    original: arg,
                    ident: None,
                    ty: None,
                },
            })
            .collect();
        let (grads, fallible, error_type) = match &original.sig.output {
            ReturnType::Default => (Grads::Missing, false, None),
            ReturnType::Type(_, ty) => {
                let (g, fallible, error_type) = match result_types(ty) {
                    Some((g, e)) => (g, true, e),
                    None => (&**ty, false, None),
                };
                let grads = match g {
                    Type::Tuple(t) => Grads::Tuple(t),
                    Type::Array(a) => Grads::Array(a, array_len(a)),
                    other => Grads::Single(other),
                };
                (grads, fallible, error_type)
            }
        };
        let mut names = Names::default();
        for arg in &original.sig.inputs {
            if let FnArg::Typed(p) = arg {
                names.visit_pat(&p.pat);
            }
        }
        names.visit_block(&original.block);
        Vjp {
            original,
            cotangent,
            params,
            grads,
            fallible,
            error_type,
            reads: names.reads,
            binds: names.binds,
        }
    }
}

impl<'a> Residual<'a> {
    fn from_syn(original: &'a Local, attr: &'a Attribute) -> Residual<'a> {
        let (pat, ty) = match &original.pat {
            Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            other => (other, None),
        };
        let mutability = match pat {
            Pat::Ident(p) => p.mutability.as_ref(),
            _ => None,
        };
        Residual {
            original,
            attr,
            ident: plain_ident(pat),
            mutability,
            ty,
        }
    }
}

/// `x` or `mut x`, without `ref` or a subpattern.
fn plain_ident(pat: &Pat) -> Option<&Ident> {
    match pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => Some(&p.ident),
        _ => None,
    }
}

/// Every name `pat` binds.
pub(crate) fn pattern_names<'a>(pat: &'a Pat, out: &mut Vec<&'a Ident>) {
    struct Binder<'a, 'o>(&'o mut Vec<&'a Ident>);
    impl<'a> Visit<'a> for Binder<'a, '_> {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0.push(&p.ident);
            syn::visit::visit_pat_ident(self, p);
        }
    }
    Binder(out).visit_pat(pat);
}

/// The names a VJP reads as single-segment paths, and the names it binds anywhere.
#[derive(Default)]
struct Names<'a> {
    reads: Vec<&'a Ident>,
    binds: HashSet<String>,
}

impl<'a> Visit<'a> for Names<'a> {
    fn visit_expr(&mut self, e: &'a Expr) {
        if let Expr::Path(p) = e {
            if p.qself.is_none() && p.path.leading_colon.is_none() {
                if let Some(ident) = p.path.get_ident() {
                    self.reads.push(ident);
                }
            }
        }
        syn::visit::visit_expr(self, e);
    }

    fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
        self.binds.insert(p.ident.to_string());
        syn::visit::visit_pat_ident(self, p);
    }

    // Nested items are their own scopes: a helper `fn` naming `x` is not the VJP reading `x`.
    fn visit_item(&mut self, item: &'a Item) {
        if let Item::Fn(f) = item {
            self.binds.insert(f.sig.ident.to_string());
        }
    }
}

pub(crate) fn is_residual(attr: &Attribute) -> bool {
    attr.path().is_ident(RESIDUAL)
}

/// Finds `#[residual]` where it has no meaning: anywhere but on a top-level `let`.
#[derive(Default)]
struct StrayResiduals<'a> {
    found: Vec<&'a Attribute>,
}

impl<'a> StrayResiduals<'a> {
    /// Visits a top-level residual `let`, whose own marker is expected.
    fn visit_local_inner(&mut self, local: &'a Local, marker: &'a Attribute) {
        for attr in &local.attrs {
            if !std::ptr::eq(attr, marker) {
                self.visit_attribute(attr);
            }
        }
        self.visit_pat(&local.pat);
        if let Some(init) = &local.init {
            self.visit_local_init(init);
        }
    }
}

impl<'a> Visit<'a> for StrayResiduals<'a> {
    fn visit_attribute(&mut self, attr: &'a Attribute) {
        if is_residual(attr) {
            self.found.push(attr);
        }
    }
}

/// Whether `ty` is written as a tensor: a path whose last segment is `Tensor`.
pub(crate) fn is_tensor(ty: &Type) -> bool {
    match ty {
        Type::Path(p) if p.qself.is_none() => p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Tensor" && s.arguments.is_none()),
        Type::Group(g) => is_tensor(&g.elem),
        Type::Paren(p) => is_tensor(&p.elem),
        _ => false,
    }
}

/// `&Tensor` (not `&mut`).
pub(crate) fn is_tensor_ref(ty: &Type) -> bool {
    matches!(ty, Type::Reference(r) if r.mutability.is_none() && is_tensor(&r.elem))
}

/// `NeedsGrad` or `&NeedsGrad` (any path ending in `NeedsGrad`).
pub(crate) fn is_needs_grad(ty: &Type) -> bool {
    let ty = match ty {
        Type::Reference(r) => &*r.elem,
        ty => ty,
    };
    outer_name(ty).as_deref() == Some(NEEDS_GRAD)
}

/// `T` of a type written `Option<T>` (any path ending in `Option`).
pub(crate) fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if p.qself.is_some() || last.ident != "Option" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match (args.args.first(), args.args.len()) {
        (Some(GenericArgument::Type(t)), 1) => Some(t),
        _ => None,
    }
}

fn classify(ty: &Type) -> Input {
    if let Some(inner) = option_inner(ty) {
        if is_tensor(inner) {
            return Input::OptionalTensor { by_ref: false };
        }
        if is_tensor_ref(inner) {
            return Input::OptionalTensor { by_ref: true };
        }
    }
    match ty {
        Type::Reference(r) if r.mutability.is_none() => match &*r.elem {
            elem if is_tensor(elem) => Input::Tensor { by_ref: true },
            Type::Slice(s) if is_tensor(&s.elem) => Input::TensorSlice { elem_ref: false },
            Type::Slice(s) if is_tensor_ref(&s.elem) => Input::TensorSlice { elem_ref: true },
            _ if mentions_tensor(ty) => Input::Unsupported,
            _ => Input::Captured,
        },
        _ if is_tensor(ty) => Input::Tensor { by_ref: false },
        _ if mentions_tensor(ty) => Input::Unsupported,
        _ => Input::Captured,
    }
}

/// Whether any path in `ty` has a segment named `Tensor` (a type that holds tensors).
pub(crate) fn mentions_tensor(ty: &Type) -> bool {
    struct Finder(bool);
    impl Visit<'_> for Finder {
        fn visit_path_segment(&mut self, s: &syn::PathSegment) {
            if s.ident == "Tensor" {
                self.0 = true;
            }
            syn::visit::visit_path_segment(self, s);
        }
    }
    let mut f = Finder(false);
    f.visit_type(ty);
    f.0
}

/// `(T, Some(E))` of a type written `Result<T, E>`, `(T, None)` of `Result<T>`.
pub(crate) fn result_types(ty: &Type) -> Option<(&Type, Option<&Type>)> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let mut types = args.args.iter().map(|a| match a {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    });
    let ok = types.next()??;
    match (types.next(), types.next()) {
        (None, _) => Some((ok, None)),
        (Some(Some(err)), None) => Some((ok, Some(err))),
        _ => None,
    }
}

/// The last path segment's name of `ty` (`Option` of `Option<Tensor>`).
pub(crate) fn outer_name(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.to_string()),
        Type::Group(g) => outer_name(&g.elem),
        Type::Paren(p) => outer_name(&p.elem),
        _ => None,
    }
}

/// The array's length when it is an integer literal (saturated at `usize::MAX`).
fn array_len(a: &TypeArray) -> Option<usize> {
    match &a.len {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(n),
            ..
        }) => n.base10_parse().ok().or_else(|| {
            let digits = n.base10_digits();
            digits
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then_some(usize::MAX)
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Grads, TypeArray};

    #[test]
    fn an_array_length_is_counted_not_materialised() {
        let a: TypeArray = syn::parse_str("[Option<Tensor>; 1000000000000000]").unwrap();
        let grads = Grads::Array(&a, super::array_len(&a));
        assert_eq!(grads.count(), Some(1_000_000_000_000_000));
        assert!(grads.element(999_999_999_999_999).is_some());
        assert!(grads.element(1_000_000_000_000_000).is_none());

        let huge: TypeArray = syn::parse_str("[Option<Tensor>; 99999999999999999999999]").unwrap();
        assert_eq!(super::array_len(&huge), Some(usize::MAX));
    }
}

//! The rules of `#[derive(Module)]` that need the whole input: the item must be a struct with
//! named fields, keys must agree with each other and with the field's type, and no two walked
//! fields may be found under one name.

use std::collections::HashMap;

use super::parse::{FieldModel, Model, Shape};
use crate::ctxt::Ctxt;

/// Records every broken rule in `cx`.
pub(crate) fn check(cx: &Ctxt, model: &Model<'_>) {
    let fields = match &model.shape {
        Shape::Named(fields) => fields,
        Shape::Tuple(fields) => {
            cx.error_spanned_by(
                fields,
                "#[derive(Module)] needs named fields: a tuple struct's tensors would have no names (`weight`, `bias`); give the fields names",
            );
            return;
        }
        Shape::Unit => {
            cx.error_spanned_by(
                &model.input.ident,
                "#[derive(Module)] needs a struct with named fields: a unit struct holds no tensors",
            );
            return;
        }
        Shape::Enum(token) => {
            cx.error_spanned_by(
                token,
                "#[derive(Module)] applies to a struct with named fields, not an enum: wrap the variants' layers in `Option` fields of a struct, or implement `Module` by hand",
            );
            return;
        }
        Shape::Union(token) => {
            cx.error_spanned_by(
                token,
                "#[derive(Module)] applies to a struct with named fields, not a union",
            );
            return;
        }
    };
    for field in fields {
        keys(cx, field);
    }
    one_training_flag(cx, fields);
    unique_names(cx, fields);
}

/// The keys of one field against each other and against its type.
fn keys(cx: &Ctxt, field: &FieldModel<'_>) {
    let err = |span, message: String| cx.syn_error(syn::Error::new(span, message));
    let name = field.ident;
    if let (Some(_), Some(buffer)) = (field.skip, field.buffer) {
        err(
            buffer,
            format!("field `{name}` is both `skip` and `buffer`: a skipped field is not walked, so it holds no buffers; keep one of them"),
        );
    }
    if let Some(training) = field.training {
        if field.skip.is_some() || field.buffer.is_some() || field.rename.is_some() {
            err(
                training,
                format!("field `{name}` is the module's `training` flag, which holds no tensors: it takes no `skip`, `buffer` or `rename`"),
            );
        }
        if !is_bool(field.ty) {
            cx.error_spanned_by(
                field.ty,
                format!("the `training` field `{name}` must be a `bool`: `set_training` writes the mode into it"),
            );
        }
    }
    if let Some(rename) = &field.rename {
        let value = rename.value();
        if field.skip.is_some() {
            cx.error_spanned_by(
                rename,
                format!("field `{name}` is skipped, so it has no name to rename"),
            );
        } else if value.is_empty() || value.contains('.') {
            cx.error_spanned_by(
                rename,
                format!("`rename = {value:?}`: a name must be non-empty and hold no `.` (dots separate the parts of a dotted path)"),
            );
        }
    }
}

/// At most one field is the module's `training` flag.
fn one_training_flag(cx: &Ctxt, fields: &[FieldModel<'_>]) {
    let mut flagged = fields.iter().filter_map(|f| f.training.map(|s| (f, s)));
    if let Some((first, _)) = flagged.next() {
        for (field, span) in flagged {
            cx.syn_error(syn::Error::new(
                span,
                format!(
                    "`{}` and `{}` are both marked `training`: a module has one training flag",
                    first.ident, field.ident
                ),
            ));
        }
    }
}

/// No two walked fields share a name, or their tensors would collide in a state dict.
fn unique_names(cx: &Ctxt, fields: &[FieldModel<'_>]) {
    let mut seen: HashMap<String, &FieldModel<'_>> = HashMap::new();
    for field in fields.iter().filter(|f| f.walked()) {
        let name = field.name();
        if let Some(first) = seen.get(&name) {
            let message = format!(
                "fields `{}` and `{}` are both named `{name}`: their tensors would collide (`{name}.…`); rename one",
                first.ident, field.ident
            );
            match &field.rename {
                Some(rename) => cx.error_spanned_by(rename, message),
                None => cx.error_spanned_by(field.ident, message),
            }
        } else {
            seen.insert(name, field);
        }
    }
}

/// Whether `ty` is spelled `bool` (a macro sees tokens: an alias of `bool` is refused).
fn is_bool(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => p.qself.is_none() && p.path.is_ident("bool"),
        syn::Type::Paren(p) => is_bool(&p.elem),
        syn::Type::Group(g) => is_bool(&g.elem),
        _ => false,
    }
}

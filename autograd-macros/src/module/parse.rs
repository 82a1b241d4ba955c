//! Reads a `#[derive(Module)]` input into a [`Model`]: the struct's shape, its container
//! attribute and each field's `#[module(...)]` keys. Misspelt or repeated keys are recorded in
//! the context here; rules between keys and fields are [`validate`](super::validate)'s.

use proc_macro2::Span;
use syn::{Attribute, DeriveInput, Ident, LitStr, Path, Type};

use crate::ctxt::Ctxt;

/// The derive input as the rules and the generator see it.
pub(crate) struct Model<'a> {
    pub(crate) input: &'a DeriveInput,
    /// `#[module(crate = path)]`: where the generated code finds `autograd_ops`.
    pub(crate) krate: Option<Path>,
    pub(crate) shape: Shape<'a>,
}

/// What kind of item the derive is on; only `Named` can be a module.
pub(crate) enum Shape<'a> {
    Named(Vec<FieldModel<'a>>),
    /// A tuple struct, spanned at its fields.
    Tuple(&'a syn::FieldsUnnamed),
    Unit,
    Enum(&'a syn::token::Enum),
    Union(&'a syn::token::Union),
}

/// One named field and its keys; each key keeps its span for errors.
pub(crate) struct FieldModel<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) ty: &'a Type,
    pub(crate) skip: Option<Span>,
    pub(crate) buffer: Option<Span>,
    pub(crate) training: Option<Span>,
    pub(crate) rename: Option<LitStr>,
}

impl FieldModel<'_> {
    /// The name the field's tensors are found under: its `rename`, else its identifier
    /// (without a raw identifier's `r#`).
    pub(crate) fn name(&self) -> String {
        match &self.rename {
            Some(name) => name.value(),
            None => syn::ext::IdentExt::unraw(self.ident).to_string(),
        }
    }

    /// Whether `visit` and `set_training` walk the field through `Field`.
    pub(crate) fn walked(&self) -> bool {
        self.skip.is_none() && self.training.is_none()
    }
}

/// Reads the input, recording malformed attributes in `cx`.
pub(crate) fn parse<'a>(cx: &Ctxt, input: &'a DeriveInput) -> Model<'a> {
    let krate = container(cx, &input.attrs);
    let shape = match &input.data {
        syn::Data::Struct(data) => match &data.fields {
            syn::Fields::Named(named) => {
                Shape::Named(named.named.iter().filter_map(|f| field(cx, f)).collect())
            }
            syn::Fields::Unnamed(unnamed) => Shape::Tuple(unnamed),
            syn::Fields::Unit => Shape::Unit,
        },
        syn::Data::Enum(data) => Shape::Enum(&data.enum_token),
        syn::Data::Union(data) => Shape::Union(&data.union_token),
    };
    Model {
        input,
        krate,
        shape,
    }
}

/// The container keys: at most one `crate = path`.
fn container(cx: &Ctxt, attrs: &[Attribute]) -> Option<Path> {
    let mut krate = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("module")) {
        let result = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let value = meta.value()?;
                // `crate = path`, or `crate = "path"` as serde spells it
                let path = if value.peek(LitStr) {
                    value.parse::<LitStr>()?.parse::<Path>()
                } else {
                    value.parse::<Path>()
                }
                .map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "`crate = ...` takes the path of autograd_ops, as `crate = autograd_ops` or `crate = \"my::reexport\"`",
                    )
                })?;
                if krate.is_some() {
                    cx.error_spanned_by(&meta.path, "duplicate `crate` in #[module(...)]");
                } else {
                    krate = Some(path);
                }
                Ok(())
            } else {
                Err(meta.error(format_args!(
                    "unknown #[module(...)] key `{}` on the struct; the struct takes `crate = path` (field keys are `skip`, `buffer`, `training` and `rename = \"name\"`)",
                    path_string(&meta.path)
                )))
            }
        });
        if let Err(e) = result {
            cx.syn_error(e);
        }
    }
    krate
}

/// One named field's keys; `None` for an unnamed field (never reached: tuple structs are
/// another shape).
fn field<'a>(cx: &Ctxt, f: &'a syn::Field) -> Option<FieldModel<'a>> {
    let mut model = FieldModel {
        ident: f.ident.as_ref()?,
        ty: &f.ty,
        skip: None,
        buffer: None,
        training: None,
        rename: None,
    };
    for attr in f.attrs.iter().filter(|a| a.path().is_ident("module")) {
        let result = attr.parse_nested_meta(|meta| {
            let flag = if meta.path.is_ident("skip") {
                &mut model.skip
            } else if meta.path.is_ident("buffer") {
                &mut model.buffer
            } else if meta.path.is_ident("training") {
                &mut model.training
            } else if meta.path.is_ident("rename") {
                let name: LitStr = meta.value()?.parse()?;
                if model.rename.is_some() {
                    cx.error_spanned_by(&meta.path, "duplicate `rename` in #[module(...)]");
                } else {
                    model.rename = Some(name);
                }
                return Ok(());
            } else {
                return Err(meta.error(format_args!(
                    "unknown #[module(...)] key `{}`; a field takes `skip`, `buffer`, `training` or `rename = \"name\"`",
                    path_string(&meta.path)
                )));
            };
            if flag.is_some() {
                cx.error_spanned_by(
                    &meta.path,
                    format_args!("duplicate `{}` in #[module(...)]", path_string(&meta.path)),
                );
            } else {
                *flag = Some(syn::spanned::Spanned::span(&meta.path));
            }
            Ok(())
        });
        if let Err(e) = result {
            cx.syn_error(e);
        }
    }
    Some(model)
}

/// A path as the user wrote it, without the spaces `quote` puts between tokens.
fn path_string(path: &Path) -> String {
    quote::ToTokens::to_token_stream(path)
        .to_string()
        .replace(' ', "")
}

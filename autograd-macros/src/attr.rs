//! The arguments of `#[differentiable(...)]`: at most one `crate = path` and one `batched`.

use proc_macro2::TokenStream;
use syn::parse::Parser;
use syn::{LitStr, Path};

use crate::ctxt::Ctxt;

/// Parsed attribute arguments; each is `None` when not given.
#[derive(Default)]
pub(crate) struct Attrs {
    /// `crate = path`: where generated code finds `autograd_core` (default `::autograd_core`).
    pub(crate) krate: Option<Path>,
    /// `batched`: the VJP also accepts cotangents with a leading batch mode (the node
    /// implements `Operation::backward_batched` with it).
    pub(crate) batched: Option<Path>,
}

/// Parses the attribute's arguments, recording unknown and duplicate arguments in `cx`.
pub(crate) fn parse(cx: &Ctxt, args: TokenStream) -> Attrs {
    let mut attrs = Attrs::default();
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("crate") {
            // `crate = some::path` as in the design; `crate = "some::path"` as serde spells it.
            let value = meta.value()?;
            let path = if value.peek(LitStr) {
                value.parse::<LitStr>()?.parse::<Path>()?
            } else {
                value.parse::<Path>()?
            };
            if attrs.krate.is_some() {
                cx.error_spanned_by(&meta.path, "duplicate `crate` argument");
            } else {
                attrs.krate = Some(path);
            }
            Ok(())
        } else if meta.path.is_ident("batched") {
            if attrs.batched.is_some() {
                cx.error_spanned_by(&meta.path, "duplicate `batched` argument");
            } else {
                attrs.batched = Some(meta.path.clone());
            }
            Ok(())
        } else {
            let name = meta.path.to_token_stream_string();
            Err(meta.error(format_args!(
                "unknown #[differentiable] argument `{name}`; the arguments are `crate = path` and `batched`"
            )))
        }
    });
    if let Err(e) = parser.parse2(args) {
        cx.syn_error(e);
    }
    attrs
}

trait PathString {
    fn to_token_stream_string(&self) -> String;
}

impl PathString for Path {
    fn to_token_stream_string(&self) -> String {
        quote::ToTokens::to_token_stream(self)
            .to_string()
            .replace(' ', "")
    }
}

//! `#[derive(Module)]`: parse the struct ([`parse`]), check its rules ([`validate`]), generate
//! `impl Module` and `impl Field` ([`expand`]). On any error only the errors are emitted.

mod expand;
mod parse;
mod validate;

use proc_macro2::TokenStream;

use crate::ctxt::Ctxt;

/// The derive's output for `input`: both impls, or every error found.
pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let input: syn::DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(e) => return e.to_compile_error(),
    };
    let cx = Ctxt::new();
    let model = parse::parse(&cx, &input);
    validate::check(&cx, &model);
    match cx.check() {
        Ok(()) => expand::expand(&model),
        Err(e) => e.to_compile_error(),
    }
}

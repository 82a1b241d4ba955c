//! The `#[differentiable]` attribute: turns a forward function and its VJP into an
//! `autograd_core::Operation` (placeholder until the macro issue lands).

use proc_macro::TokenStream;

/// Placeholder: reports that the attribute is not implemented yet.
#[proc_macro_attribute]
pub fn differentiable(_args: TokenStream, _item: TokenStream) -> TokenStream {
    "compile_error!(\"#[differentiable] is not implemented yet\");".parse().unwrap_or_default()
}

//! Generates `impl Module` and `impl Field` for a validated struct.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;

use super::parse::{FieldModel, Model, Shape};

/// The two impls. `model` has passed validation, so its shape is `Named`.
pub(crate) fn expand(model: &Model<'_>) -> TokenStream {
    let Shape::Named(fields) = &model.shape else {
        return TokenStream::new();
    };
    let krate = model
        .krate
        .as_ref()
        .map_or_else(|| quote!(::autograd_ops), ToTokens::to_token_stream);
    let p = quote!(#krate::__private);
    let ident = &model.input.ident;
    let generics = bounded(model, fields, &p);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();

    let walked: Vec<&FieldModel<'_>> = fields.iter().filter(|f| f.walked()).collect();
    let visits = walked.iter().map(|field| {
        let (member, ty, name) = (field.ident, field.ty, field.name());
        let role = if field.buffer.is_some() {
            quote!(Buffer)
        } else {
            quote!(Parameter)
        };
        // spanned at the type: a type that is no `Field` is reported there
        quote_spanned! {ty.span()=>
            <#ty as #p::Field>::visit_field(
                &self.#member, &#p::join(prefix, #name), #p::Role::#role, f,
            );
        }
    });
    let modes = walked.iter().map(|field| {
        let (member, ty) = (field.ident, field.ty);
        quote_spanned! {ty.span()=>
            <#ty as #p::Field>::set_training_field(&mut self.#member, training);
        }
    });
    let flag = fields.iter().find(|f| f.training.is_some()).map(|field| {
        let member = field.ident;
        quote!(self.#member = training;)
    });

    quote! {
        #[automatically_derived]
        impl #impl_generics #p::Module for #ident #ty_generics #where_clause {
            fn visit(
                &self,
                prefix: &str,
                f: &mut dyn ::core::ops::FnMut(&str, &#p::Tensor, #p::Role),
            ) {
                #(#visits)*
            }

            fn set_training(&mut self, training: bool) {
                #(#modes)*
                #flag
            }
        }

        #[automatically_derived]
        impl #impl_generics #p::Field for #ident #ty_generics #where_clause {
            fn visit_field(
                &self,
                path: &str,
                role: #p::Role,
                f: &mut dyn ::core::ops::FnMut(&str, &#p::Tensor, #p::Role),
            ) {
                // a module marked `buffer` in its parent: every tensor of it is a buffer
                #p::Module::visit(self, path, &mut |name, tensor, own| {
                    f(name, tensor, if role == #p::Role::Buffer { role } else { own });
                });
            }

            fn set_training_field(&mut self, training: bool) {
                #p::Module::set_training(self, training);
            }
        }
    }
}

/// The struct's generics with `T: Field` for each type parameter a walked field's type
/// mentions (a parameter only skipped fields use stays unbounded).
fn bounded(model: &Model<'_>, fields: &[FieldModel<'_>], p: &TokenStream) -> syn::Generics {
    let mut generics = model.input.generics.clone();
    let walked: Vec<&FieldModel<'_>> = fields.iter().filter(|f| f.walked()).collect();
    let used: Vec<syn::Ident> = generics
        .type_params()
        .filter(|param| {
            walked
                .iter()
                .any(|f| mentions(f.ty.to_token_stream(), &param.ident))
        })
        .map(|param| param.ident.clone())
        .collect();
    if !used.is_empty() {
        let clause = generics.make_where_clause();
        for ident in used {
            clause.predicates.push(syn::parse_quote!(#ident: #p::Field));
        }
    }
    generics
}

/// Whether `tokens` hold the identifier `ident` anywhere.
fn mentions(tokens: TokenStream, ident: &syn::Ident) -> bool {
    tokens.into_iter().any(|tt| match tt {
        proc_macro2::TokenTree::Ident(i) => i == *ident,
        proc_macro2::TokenTree::Group(g) => mentions(g.stream(), ident),
        _ => false,
    })
}

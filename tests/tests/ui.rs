//! Compile-fail cases, one file per mistake, with their checked-in `.stderr`. Regenerate with
//! `TRYBUILD=overwrite cargo test -p autograd-tests --test ui` and review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    // Misuses of #[differentiable]: each a precise syn::Error, never a cascade.
    t.compile_fail("ui/macro/*.rs");
    // What Rust's types rule out where the spec's Python raises at run time.
    t.compile_fail("ui/engine/*.rs");
    // Misuses of #[derive(Module)]: spanned at the field or key, in the user's terms.
    t.compile_fail("ui/module/*.rs");
}

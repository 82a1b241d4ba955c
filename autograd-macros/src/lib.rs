//! The `#[differentiable]` attribute of StrideWeave autograd, re-exported as
//! `autograd_core::differentiable`.
//!
//! One annotated function holds an operation's forward body **and** its vector-Jacobian
//! product: the VJP is a nested function named `vjp` inside the forward body. The macro sees
//! both signatures, checks them against each other at compile time, and generates the
//! autograd node and the recording code.
//!
//! ```
//! use autograd_core::{differentiable, Result, Tensor};
//!
//! /// `a * b` elementwise (equal shapes).
//! #[differentiable]
//! pub fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
//!     // d(a * b) = g * b da + g * a db
//!     fn vjp(g: &Tensor, a: &Tensor, b: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
//!         Ok((Some(zip(g, b, |g, y| g * y)?), Some(zip(g, a, |g, x| g * x)?)))
//!     }
//!     zip(a, b, |x, y| x * y)
//! }
//!
//! /// `log(1 + exp(beta x)) / beta`; `beta` is captured by value for the VJP, `output` is
//! /// the forward result and `e` a residual the forward pass kept.
//! #[differentiable]
//! pub fn softplus(x: &Tensor, beta: f32) -> Result<Tensor> {
//!     #[residual]
//!     let e = map(x, |v| (beta * v).exp())?;
//!     // d softplus = sigmoid(beta x) = e / (1 + e)
//!     fn vjp(g: &Tensor, e: &Tensor, output: &Tensor) -> Result<Option<Tensor>> {
//!         let _ = output; // the VJP may also read the forward output
//!         Ok(Some(zip(g, e, |g, e| g * e / (1.0 + e))?))
//!     }
//!     map(&e, |e| e.ln_1p() / beta)
//! }
//!
//! // Plain kernels the ops above use (no autograd of their own).
//! fn map(x: &Tensor, f: impl Fn(f32) -> f32) -> Result<Tensor> {
//!     Tensor::from_vec(x.values::<f32>()?.into_iter().map(f).collect(), x.shape().clone())
//! }
//! fn zip(a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Result<Tensor> {
//!     let v = a.values::<f32>()?.into_iter().zip(b.values::<f32>()?).map(|(x, y)| f(x, y));
//!     Tensor::from_vec(v.collect(), a.shape().clone())
//! }
//!
//! # fn main() -> Result<()> {
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], autograd_core::shape![3])?;
//! let b = Tensor::from_vec(vec![4.0f32, 5.0, 6.0], autograd_core::shape![3])?;
//! let y = softplus(&mul(&a, &b)?, 2.0)?;
//! assert_eq!(y.autograd_ctx().unwrap().name(), "softplus");
//! y.backward_with(Some(&y.f32_like(vec![1.0; 3])?), false)?;
//! assert!(a.grad()?.is_some() && b.grad()?.is_some());
//! # Ok(())
//! # }
//! ```
//!
//! # The rules
//!
//! - **Parameters.** `&Tensor` and `Tensor` parameters are the saved inputs, in order, once per
//!   occurrence; `&[Tensor]` and `&[&Tensor]` save a variable number of inputs. Every other
//!   parameter is captured by value for the VJP when the VJP takes it (a `&T` parameter is
//!   stored as `T::to_owned()`, a `T` parameter as a clone), so such parameters need
//!   `Clone + Send + Sync + 'static` owned forms. A parameter named `options` is never saved,
//!   whatever its type (the VJP may still take it, as a captured value). Parameters are
//!   plain names (no patterns).
//! - **Tensors are recognised by name.** A macro sees tokens, not types: a tensor is a type
//!   whose path ends in `Tensor` (`Tensor`, `autograd_core::Tensor`). Write tensor parameters
//!   and residuals that way. A parameter or typed residual whose type *is* `Tensor` under
//!   another name (`use autograd_core::Tensor as T`, `type T = Tensor`) would be a plain
//!   value, neither saved nor version-checked, so the generated code asserts at compile time
//!   that such types are not `Tensor`; a generic or aliased type that merely *holds* tensors
//!   (`Vec<T>`, `type Ts = Vec<Tensor>`) cannot be recognised and is not checked.
//! - **Forward.** The body runs with graph construction disabled and returns `Result<Tensor>`
//!   of `autograd_core` (or `Tensor`; `Result<Tensor, Error>` spelled out is the same). A node
//!   is recorded only when graph construction is enabled, some tensor input is differentiable
//!   and the result is differentiable; whether or not it is, the caller gets a handle of its
//!   own (never an input handed back, nor an input's node). `#[residual] let name = ...;` at
//!   the top level of the body keeps a value for the VJP: a tensor residual (no type, or
//!   `: Tensor`) is kept in the node's context and version-checked like a saved input, so
//!   mutating it in place before backward is an error, never a wrong gradient; a residual of
//!   another type (`let idx: Vec<usize> = ...`) is an owned value of the node, so it must
//!   not borrow. One tensor per `#[residual]`: a type that mentions `Tensor` anywhere but as
//!   the whole type (`Vec<Tensor>`, `Option<Tensor>`, `&Tensor`) is an error, since its tensors
//!   would escape the version check.
//! - **VJP.** `fn vjp(g: &Tensor, ...)`: the first parameter is the cotangent of the output
//!   (it cannot bear the name of a forward parameter, `output` or a residual: that is a VJP
//!   that forgot its cotangent); the others, in any order and any subset, name forward
//!   parameters, `output` (the forward result, version-checked) or residuals, and are passed by
//!   reference or by value as the VJP declares them (not `&mut`; a captured value's type must
//!   match the forward's). The VJP is a plain `fn`: not `async`, `const`, `unsafe`,
//!   `extern` or generic. It returns `Result<G>` (or `G` when it cannot fail) where `G` has one
//!   entry per tensor input, in order: a tuple `(Option<Tensor>, ...)` or an array
//!   `[Option<Tensor>; N]`, a single `Option<Tensor>` for one input, and
//!   `Vec<Option<Tensor>>` (one per element) for a slice.
//!   A wrong count is a compile error on the return type. The VJP runs with graph construction
//!   disabled; a gradient whose shape matches its input but whose layout does not is re-laid
//!   out to the input's layout, so VJPs need not care about strides.
//! - **Items** (`use`, helper `fn`s) in the forward body are visible to the VJP too.
//! - **Generated code.** The function keeps its name, visibility, attributes, docs and
//!   generics, gains `#[track_caller]` (errors about the node name the caller's location) and
//!   returns `autograd_core::Result<Tensor>`. The node's `Operation::name` is the function's
//!   name, and its errors name parameters: ``input 1 (`b`) of mul``. Generated code reaches
//!   the library only through `autograd_core::__private`; in a crate that renames or wraps
//!   `autograd_core`, write `#[differentiable(crate = path::to::autograd_core)]`.
//!
//! Layout: `ast.rs` builds a typed model of the item, `attr.rs` parses the attribute's
//! arguments, `valid.rs` holds every rule, `expand.rs` generates code and `fallback.rs` emits
//! the errors plus the untouched item.

mod ast;
mod attr;
mod ctxt;
mod expand;
mod fallback;
mod valid;

use proc_macro::TokenStream;

/// Turns a forward function with a nested `fn vjp` into a recorded differentiable operation.
/// See the [crate documentation](crate) for the syntax and the rules.
#[proc_macro_attribute]
pub fn differentiable(args: TokenStream, input: TokenStream) -> TokenStream {
    expand::differentiable(args.into(), input.into()).into()
}

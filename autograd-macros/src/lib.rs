//! The `#[differentiable]` attribute of StrideWeave autograd, re-exported as
//! `autograd_core::differentiable`, and [`#[derive(Module)]`](#derivemodule), re-exported as
//! `autograd_ops::Module`.
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
//!   occurrence; `&[Tensor]` and `&[&Tensor]` save a variable number of inputs; an optional
//!   input `Option<&Tensor>` (or `Option<Tensor>`) is saved when present and *not saved at all*
//!   when absent, so the node's `inputs()`, `input_versions()` and gradients have no entry for
//!   an absent one (the engine asks for exactly one gradient per saved input). Every other
//!   parameter is a plain value (below: its type holds no tensor), captured by value for the
//!   VJP when the VJP takes it (a `&T` parameter is stored as `T::to_owned()`, a `T` parameter
//!   as a clone), so such parameters need `Clone + Send + Sync + 'static` owned forms. A
//!   parameter named `options` is never saved (the VJP may still take it, as a captured
//!   value), so it cannot be a tensor. Parameters are plain names (no patterns). A parameter
//!   the VJP reads cannot be `mut`: the VJP gets the value the caller passed, not what the
//!   forward body reassigns to it; bind a changed value to a `#[residual]` instead.
//! - **Plain values hold no tensor.** The node records only the tensor parameters (and tensor
//!   residuals), so a tensor may reach the op only as one of them. Every other parameter's type
//!   must implement the marker trait `Captured` (`autograd_core::Captured`), whether the
//!   forward, the VJP or neither reads it, `options` included; for `&T`, `&[T]`, `[T; N]`,
//!   `Option<T>`, `Vec<T>` and `Box<T>` it is `T` that must. So must each non-tensor residual
//!   the node stores. A tensor inside such a value would be neither saved nor version-checked:
//!   it would get no gradient, and an in-place change before backward would silently reach
//!   the VJP. The primitives, strings, references, function pointers, std containers and
//!   tuples of `Captured` types and the layout types implement it and `Tensor` does not, so
//!   `struct Opts { w: Tensor }` passed to an op is a compile error (E0277, at the parameter's
//!   type) until `w` is split into a tensor parameter; a struct of yours that holds no tensor
//!   says so with `impl Captured for Opts {}`. A closure does not implement it: take a `fn`
//!   pointer instead. A generic parameter a non-tensor parameter's type mentions, and an
//!   `impl Trait` parameter, get a `Captured` bound on the generated function, so a caller
//!   cannot pass a tensor through them. A parameter named `options` whose type mentions
//!   `Tensor` is an error. The checks are compile-time only: nothing of them runs.
//! - **Tensors are recognised by name.** A macro sees tokens, not types: a tensor is a type
//!   whose path ends in `Tensor` (`Tensor`, `autograd_core::Tensor`). Write tensor parameters
//!   and residuals that way. A parameter or typed residual whose type *is* `Tensor` under
//!   another name (`use autograd_core::Tensor as T`, `type T = Tensor`) would be a plain
//!   value, neither saved nor version-checked, so the generated code asserts at compile time
//!   that such types are not `Tensor`.
//! - **Forward.** The body runs with graph construction disabled and returns `Result<Tensor>`
//!   of `autograd_core` (or `Tensor`; `Result<Tensor, Error>` spelled out is the same), or a
//!   tuple of two or more tensors for several outputs (below). A node is recorded only when
//!   graph construction is enabled, some tensor input is differentiable and the result (some
//!   result) is differentiable; whether or not it is, the caller gets a handle of its own for
//!   every result (never an input handed back, nor an input's node). `#[residual] let name = ...;` at
//!   the top level of the body keeps a value for the VJP, as it is when bound (so a residual
//!   cannot be `let mut`: compute it completely in a block first); the VJP must take every
//!   residual. A tensor residual (no type, or `: Tensor`) is kept in the node's context and
//!   version-checked like a saved input, so mutating it in place before backward is an error,
//!   never a wrong gradient; a residual of another type (`let idx: Vec<usize> = ...`) is an
//!   owned, `Captured` value of the node, so it must not borrow. One tensor per `#[residual]`:
//!   a type that mentions `Tensor` anywhere but as the whole type (`Vec<Tensor>`,
//!   `Option<Tensor>`, `&Tensor`) is an error, since its tensors would escape the version
//!   check. The VJP is a nested `fn`, so it cannot read the forward body's locals: reading one
//!   is an error that says to make it a residual.
//! - **VJP.** `fn vjp(g: &Tensor, ...)`: the first parameter is the cotangent of the output
//!   (a tuple of them for several outputs; it cannot bear the name of a forward parameter,
//!   `output` or a residual: that is a VJP that forgot its cotangent); the others, in any order
//!   and any subset, name forward parameters, `output` (the forward result, kept detached and
//!   version-checked; a tuple for several outputs) or residuals, and are passed by
//!   reference or by value as the VJP declares them (not `&mut`; a captured value's type must
//!   match the forward's); `_x` names `x`, for a parameter the body does not read. An optional
//!   input is taken as `Option<&Tensor>` or `Option<Tensor>`. The VJP is a plain `fn`: not
//!   `async`, `const`, `unsafe`, `extern` or generic. It returns `Result<G>` (autograd_core's
//!   `Result`; convert other errors with `map_err`) or `G` when it cannot fail, where `G` has
//!   one entry per tensor input, in order: a tuple `(Option<Tensor>, ...)` or an array
//!   `[Option<Tensor>; N]`, a single `Option<Tensor>` for one input, and
//!   `Vec<Option<Tensor>>` (one per element) for a slice. An optional input's entry is an
//!   `Option<Tensor>` like any other, `None` when the input is absent (anything else returned
//!   for an absent input is dropped). A wrong count or element type is a compile error on the
//!   return type. The VJP runs with graph construction disabled.
//! - **Taking the cotangent over.** A one-output VJP may take its cotangent by value,
//!   `fn vjp(g: Tensor, ...)`: a traversal then hands over its own, and the VJP may compute a
//!   gradient in that storage with `kernel::map_owned` or `kernel::zip_owned` (or return `g`
//!   itself), as `mul_scalar`, `tanh` and the other elementwise ops do, so that along a chain of
//!   them one gradient buffer is passed down instead of one allocated per node. Those kernels
//!   write in place only when nothing else can observe the tensor (a cotangent the user passed,
//!   a retained `.grad`, a leaf's gradient, a clone, a view or a tensor in a graph keep their
//!   values); direct calls through `Operation::backward` lend the VJP a clone.
//! - **Which gradients are wanted.** A VJP may take `needs: &NeedsGrad` (no import needed:
//!   the macro recognises the type name) to learn which gradients the traversal will use,
//!   like PyTorch's `needs_input_grad`: `needs.input(k)` for tensor parameter `k` (gradient
//!   order; `false` for an absent optional input), `needs.slice(k)` per element of a slice. A
//!   gradient is unwanted when its input is not differentiable or nothing the caller asked for
//!   depends on it (functional `grad` asking only for a matmul's weights does not want the
//!   data batch's gradient), so the VJP may skip it and return `None`; an unwanted gradient it
//!   returns anyway is dropped. The node implements `Operation::vjp`, the engine's one entry
//!   point (the VJP with the engine's mask, written into its reused gradient vector as the VJP
//!   returned them, for the engine to lay out), `Operation::backward_needed` (the same for a
//!   direct caller, laid out) and `backward` as `backward_needed` with every gradient wanted
//!   (for several outputs, `backward_outputs` gets the same mask).
//! - **Layouts and broadcasting.** VJPs need not care about strides: a gradient whose shape
//!   matches its input but whose layout does not is re-laid out to the input's layout. A VJP
//!   receives the cotangent of its result per logical position, in an injective layout,
//!   exactly as if the result did not alias storage, also when the forward returned a stride-0
//!   (broadcast) view: then each position carries only its own contribution, and a VJP that
//!   produced one storage slot for many positions must sum over those positions itself. For
//!   each input it returns the cotangent per logical position of that input (any layout of the
//!   input's shape; the generated code, or the engine, re-lays it out), never pre-summed over
//!   aliased positions: the engine folds broadcast aliases (sums per storage slot) only where a
//!   gradient leaves the graph, into `.grad` and into `grad`'s results. For example,
//!   `broadcast_to(x, [2, 3])` with `x` of shape `[3]` gets `g` of shape `[2, 3]` and returns
//!   `g` summed over the first axis:
//!
//!   ```
//!   use autograd_core::{differentiable, Result, Tensor};
//!
//!   /// `x` (shape `[n]`) viewed as `[rows, n]` without copying: a stride-0 result.
//!   #[differentiable]
//!   fn broadcast_rows(x: &Tensor, rows: usize) -> Result<Tensor> {
//!       // g has one entry per position of the [rows, n] result; each x[j] fed `rows` of them
//!       fn vjp(g: &Tensor, x: &Tensor, rows: usize) -> Result<Option<Tensor>> {
//!           let (n, g) = (x.size(), g.values::<f32>()?);
//!           let summed = (0..n).map(|j| (0..rows).map(|i| g[i * n + j]).sum()).collect();
//!           Ok(Some(x.f32_like(summed)?))
//!       }
//!       x.broadcast_to(&[rows, x.size()])
//!   }
//!
//!   # fn main() -> Result<()> {
//!   let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], autograd_core::shape![3])?;
//!   let y = broadcast_rows(&x, 2)?;
//!   // the cotangent the VJP receives: one entry per position of y, in an injective layout
//!   let g = Tensor::from_vec(vec![1.0f32; 6], autograd_core::shape![2, 3])?;
//!   y.backward_with(Some(&g), false)?;
//!   assert_eq!(x.grad()?.unwrap().values::<f32>()?, [2.0, 2.0, 2.0]);
//!   # Ok(())
//!   # }
//!   ```
//! - **Several outputs.** A forward returning `Result<(Tensor, Tensor)>` (any arity from two;
//!   `(Tensor, Tensor)` when it cannot fail) records *one* node per call, and the public
//!   function returns `Result<(Tensor, Tensor)>`. Every differentiable result's
//!   `autograd_ctx` is that node (`Arc::ptr_eq`); a result that is not differentiable (the
//!   Int32 indices of a max) gets none. The VJP's first parameter is one cotangent per output,
//!   in order, as a tuple `g: (Option<&Tensor>, Option<&Tensor>)` (destructure it if you like:
//!   `(ga, gb): (Option<&Tensor>, Option<&Tensor>)`): `None` for an output the traversal did not
//!   reach, and always `None` for a non-differentiable one; the engine runs the VJP once per
//!   traversal, with every reached cotangent, and never when no output was reached. It still
//!   returns one gradient per tensor input, and the mask, layouts and broadcast rules are those
//!   of one output, per output. `output` is a tuple too, `output: (&Tensor, &Tensor)` (each
//!   entry `&Tensor` or `Tensor`): detached copies of the results, so the node never owns its
//!   own results, each version-checked like a residual (`output.1` in messages). The node
//!   reports `Operation::outputs() == N` and implements `Operation::vjp` for one cotangent per
//!   result, and `Operation::backward_outputs`, its public form (called with no cotangent at
//!   all, it returns no gradients without running the VJP); `Operation::backward` with one cotangent is a `Runtime` error,
//!   since one tensor cannot say which output it belongs to.
//!
//!   ```
//!   use autograd_core::{differentiable, DType, Result, Tensor};
//!
//!   /// The largest value of `x` and its index (an Int32 tensor, not differentiable).
//!   #[differentiable]
//!   fn max_with_index(x: &Tensor) -> Result<(Tensor, Tensor)> {
//!       // d max = g at the argmax; the index has no cotangent (its entry is always `None`)
//!       fn vjp(
//!           (g, _): (Option<&Tensor>, Option<&Tensor>),
//!           x: &Tensor,
//!           output: (&Tensor, &Tensor),
//!       ) -> Result<Option<Tensor>> {
//!           let mut dx = vec![0.0; x.size()];
//!           if let Some(g) = g {
//!               dx[output.1.values::<i32>()?[0] as usize] = g.values::<f32>()?[0];
//!           }
//!           Ok(Some(x.f32_like(dx)?))
//!       }
//!       let v = x.values::<f32>()?;
//!       let i = (0..v.len()).fold(0, |m, i| if v[i] > v[m] { i } else { m });
//!       Ok((
//!           Tensor::from_vec(vec![v[i]], autograd_core::shape![1])?,
//!           Tensor::from_vec(vec![i as i32], autograd_core::shape![1])?,
//!       ))
//!   }
//!
//!   # fn main() -> Result<()> {
//!   let x = Tensor::from_vec(vec![1.0f32, 4.0, 2.0], autograd_core::shape![3])?;
//!   let (max, index) = max_with_index(&x)?;
//!   assert_eq!(index.dtype(), &DType::Int32);
//!   assert!(index.autograd_ctx().is_none());
//!   assert_eq!(max.autograd_ctx().unwrap().outputs(), 2);
//!   max.backward()?;
//!   assert_eq!(x.grad()?.unwrap().values::<f32>()?, [0.0, 1.0, 0.0]);
//!   # Ok(())
//!   # }
//!   ```
//! - **Batched cotangents** (`#[differentiable(batched)]`, one-result ops): the node serves
//!   batched calls of `Operation::vjp` (and `Operation::backward_batched`) with the same VJP, so batched functional `grad` runs K
//!   cotangents through it at once instead of one by one. The VJP is then also handed `g` with
//!   a leading batch mode of extent K before the result's shape (the generated shape check
//!   accepts exactly that), and returns each gradient with the same leading mode before its
//!   input's shape. `autograd_core::batch` has the helpers: `batch::extent(g, rank)` tells
//!   which call it is, `batch::beside(t, k)` reads a saved tensor beside the batch (a stride-0
//!   view) and `batch::shape_for(shape, k)` gives a gradient's shape. A VJP that maps `g`
//!   position by position needs no change.
//!
//!   ```
//!   use autograd_core::{batch, differentiable, grad, kernel, shape, GradOptions, Result, Tensor};
//!
//!   #[differentiable(batched)]
//!   fn square(x: &Tensor) -> Result<Tensor> {
//!       // d x² = 2 x g; with K cotangents, x is read beside them
//!       fn vjp(g: &Tensor, x: &Tensor) -> Result<Option<Tensor>> {
//!           let x = batch::beside(x, batch::extent(g, x.layout().rank()))?;
//!           Ok(Some(kernel::zip(g, &x, |g: f32, x: f32| 2.0 * x * g)?))
//!       }
//!       kernel::map(x, |v: f32| v * v)
//!   }
//!
//!   # fn main() -> Result<()> {
//!   let x = Tensor::from_vec(vec![1.0f32, 3.0], shape![2])?;
//!   let basis = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], shape![2, 2])?;
//!   let batched = GradOptions { batched: true, ..GradOptions::default() };
//!   let jacobian = grad(&square(&x)?, &[&x], &basis, batched)?;
//!   assert_eq!(jacobian[0].as_ref().unwrap().values::<f32>()?, [2.0, 0.0, 0.0, 6.0]);
//!   # Ok(())
//!   # }
//!   ```
//! - **Items** (`use`, helper `fn`s) in the forward body are visible to the VJP too.
//! - **Generated code.** The function keeps its name, visibility, attributes, docs and
//!   generics, gains `#[track_caller]` (errors about the node name the caller's location) and
//!   returns `autograd_core::Result<Tensor>` (`Result<(Tensor, Tensor)>` for two outputs). The node's `Operation::name` is the function's
//!   name, and its errors name parameters: ``input 1 (`b`) of mul``. Generated code reaches
//!   the library only through `autograd_core::__private`; in a crate that renames or wraps
//!   `autograd_core`, write `#[differentiable(crate = path::to::autograd_core)]` (a path
//!   without `__private` is reported at the path).
//!
//! # `derive(Module)`
//!
//! `#[derive(Module)]`, re-exported as `autograd_ops::Module` (the trait and the derive share
//! the name), implements `Module` and `Field` for a struct with named fields, so that its
//! tensors are found by PyTorch's dotted names and `train()`/`eval()` reach every submodule.
//! Each field is walked through `Field` in declaration order: a `Tensor` is named after its
//! field, a module's tensors after the field and their own names, `Vec` and array elements are
//! numbered, an absent `Option` has no tensors and a `Box` is transparent.
//!
//! ```
//! use autograd_core::{Rng, Tensor};
//! use autograd_ops::{Dropout, LayerNorm, Linear, Module};
//!
//! #[derive(Module)]
//! struct Block {
//!     norm: LayerNorm,
//!     mlp: [Linear; 2],
//!     drop: Dropout,
//! }
//!
//! #[derive(Module)]
//! struct Model {
//!     blocks: Vec<Block>,
//!     #[module(buffer)] // saved, not trained
//!     mask: Tensor,
//!     #[module(skip)] // plain data
//!     name: String,
//!     #[module(training)] // set by train() and eval()
//!     training: bool,
//! }
//!
//! # fn main() -> autograd_core::Result<()> {
//! let mut rng = Rng::new(0);
//! let block = Block {
//!     norm: LayerNorm::new(&[4], 1e-5)?,
//!     mlp: [Linear::new(4, 8, true, &mut rng)?, Linear::new(8, 4, true, &mut rng)?],
//!     drop: Dropout::new(0.1)?,
//! };
//! let mask = Tensor::ones(autograd_core::shape![2, 2], &autograd_core::DType::Float32)?;
//! let mut model = Model { blocks: vec![block], mask, name: "tiny".into(), training: true };
//! let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names[..3], ["blocks.0.norm.weight", "blocks.0.norm.bias", "blocks.0.mlp.0.weight"]);
//! assert_eq!(model.named_buffers()[0].0, "mask");
//! model.eval();
//! assert!(!model.training && !model.blocks[0].drop.is_training());
//! # Ok(())
//! # }
//! ```
//!
//! Field keys, in `#[module(...)]`: `skip` (not walked: plain data, any type), `buffer` (the
//! field's tensors are buffers, `Role::Buffer`, also every tensor of a module in it),
//! `training` (a `bool` field `set_training` writes the mode into; one per struct) and
//! `rename = "name"` (the field's name in dotted paths; non-empty, no `.`). On the struct,
//! `#[module(crate = path)]` says where the generated code finds `autograd_ops` (default
//! `::autograd_ops`; the ops crate derives its own layers with `crate = crate`). A type
//! parameter that a walked field's type mentions gets a `Field` bound. Compile errors, each at
//! the user's field or key: a tuple struct, unit struct, enum or union; a walked field whose
//! type is not a `Field` (reported at the type: mark plain data `skip`); an unknown or repeated
//! key; `skip` with `buffer`; `training` on a type not spelled `bool`, with another key, or on
//! two fields; a `rename` on a skipped field, or one that is empty or holds a dot; two walked
//! fields under one name.
//!
//! Layout: `lib.rs` parses, validates and expands; `ast.rs` builds a typed model of the item,
//! `attr.rs` parses the attribute's arguments, `valid.rs` holds every rule (those of the nested
//! VJP in `valid/vjp.rs`), `plan.rs` resolves every input and VJP parameter once, `expand/`
//! holds one generator per emitted item and `fallback.rs` emits the errors plus the untouched
//! item. `module/` is the derive, in the same three steps: `parse.rs`, `validate.rs` and
//! `expand.rs`.

mod ast;
mod attr;
mod ctxt;
mod expand;
mod fallback;
mod module;
mod plan;
mod valid;

use proc_macro::TokenStream;

/// Turns a forward function with a nested `fn vjp` into a recorded differentiable operation.
/// See the [crate documentation](crate) for the syntax and the rules.
#[proc_macro_attribute]
pub fn differentiable(args: TokenStream, input: TokenStream) -> TokenStream {
    differentiable_impl(args.into(), input.into()).into()
}

/// Implements `Module` and `Field` (of `autograd_ops`) for a struct with named fields, so that
/// its tensors are found by dotted name and `train`/`eval` reach every submodule. See the
/// [crate documentation](crate#derivemodule) for the attributes.
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    module::derive(input.into()).into()
}

/// Parse, validate, expand; on any error, the errors plus the item unchanged.
fn differentiable_impl(
    args: proc_macro2::TokenStream,
    input: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let item: syn::ItemFn = match syn::parse2(input.clone()) {
        Ok(item) => item,
        Err(e) => {
            let e = syn::Error::new(
                e.span(),
                "#[differentiable] applies to a function with a nested `fn vjp`",
            );
            return fallback::expand(input, &e);
        }
    };
    let cx = ctxt::Ctxt::new();
    let attrs = attr::parse(&cx, args);
    let function = ast::Function::from_syn(&item);
    valid::check(&cx, &function);
    valid::check_attrs(&cx, &function, &attrs);
    match cx.check() {
        Ok(()) => expand::expand(&function, &attrs),
        Err(e) => {
            let keep_vjp = valid::vjp_reads_declared(&function);
            fallback::expand(fallback::item(&item, keep_vjp), &e)
        }
    }
}

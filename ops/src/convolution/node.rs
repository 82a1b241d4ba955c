//! The recorded ops: each convolution kernel with its vector-Jacobian product, over a checked
//! [`Geom`]. The public functions in `conv` and `unfold` check their arguments and call these.

use std::borrow::Cow;
use std::sync::Arc;

use autograd_core::kernel::{self, Elements};
use autograd_core::{differentiable, Layout, Result, Tensor};

use super::geometry::Geom;
use super::im2col::View;
use super::kernels::{channel_sums, fold_all, forward, input_grad, unfold_all, weight_grad};

/// The elements in logical order: the storage itself when it is in that order, else a copy.
fn dense<'a>(e: &Elements<'a, f32>) -> Result<Cow<'a, [f32]>> {
    if let Some(s) = e.as_slice() {
        return Ok(Cow::Borrowed(s));
    }
    let mut v = kernel::alloc::filled(e.len(), 0.0f32)?;
    e.copy_range(0, &mut v);
    Ok(Cow::Owned(v))
}

/// A dense row-major result of `dims` beside `like`'s storage.
fn result(like: &Tensor, values: Vec<f32>, dims: &[usize]) -> Result<Tensor> {
    like.f32_with_layout(values, Arc::new(Layout::row_major(dims)?))
}

/// A dense row-major result of `dims` beside `like`'s storage that `f` writes completely, in
/// a reused buffer when one is free (no page faults for a fresh one).
fn written(
    like: &Tensor,
    dims: &[usize],
    f: impl FnOnce(&mut [f32]) -> Result<()>,
) -> Result<Tensor> {
    kernel::fresh_overwritten::<f32>(like, Arc::new(Layout::row_major(dims)?), f)
}

/// The gradients of x, w and the bias, the latter two from their values in `w`'s and the
/// bias's carriers.
#[allow(clippy::type_complexity)]
fn gradients(
    w: &Tensor,
    bias: Option<&Tensor>,
    (gx, gw, gb): (Option<Tensor>, Option<Vec<f32>>, Option<Vec<f32>>),
) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
    Ok((
        gx,
        gw.map(|v| w.f32_like(v)).transpose()?,
        match (bias, gb) {
            (Some(b), Some(v)) => Some(b.f32_like(v)?),
            _ => None,
        },
    ))
}

/// The convolution of `x` with `w` plus `bias` over the checked geometry `geom`.
#[differentiable]
pub(crate) fn conv2d(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, geom: Geom) -> Result<Tensor> {
    // dX = fold(Wᵀ · dY),  dW = Σ dY · cols(X)ᵀ,  db = Σ dY per channel
    fn vjp(
        g: &Tensor,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        geom: Geom,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let wv = w.values::<f32>()?;
        let want_b = bias.is_some() && needs.input(2);
        let (gx, gw, gb) = kernel::read_pair::<f32, f32, _>(x, g, |ex, eg| -> Result<_> {
            let gy = dense(&eg)?;
            let gx = needs
                .input(0)
                .then(|| written(x, &geom.input_dims(), |gx| input_grad(&gy, &wv, &geom, gx)))
                .transpose()?;
            let gw = if needs.input(1) {
                Some(weight_grad(&View::of(&ex)?, &gy, &geom)?)
            } else {
                None
            };
            let gb = want_b.then(|| channel_sums(&gy, geom.n, geom.cout, geom.l()));
            Ok((gx, gw, gb))
        })??;
        gradients(w, bias, (gx, gw, gb))
    }
    let wv = w.values::<f32>()?;
    let bv = bias.map(Tensor::values::<f32>).transpose()?;
    kernel::read::<f32, _>(x, |e| {
        let view = View::of(&e)?;
        written(x, &geom.output_dims(), |y| {
            forward(&view, &wv, bv.as_deref(), &geom, y)
        })
    })?
}

/// The transposed convolution of `x` (the output side of `geom`) with `w` plus `bias`: the
/// input side of `geom`, as the gradient of `geom`'s convolution.
#[differentiable]
pub(crate) fn conv_transpose2d(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    geom: Geom,
) -> Result<Tensor> {
    // y = convᵀ(x, w): dx = conv(dy, w),  dw = Σ x · cols(dy)ᵀ,  db = Σ dy per channel
    fn vjp(
        g: &Tensor,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        geom: Geom,
        needs: &NeedsGrad,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let wv = w.values::<f32>()?;
        let want_b = bias.is_some() && needs.input(2);
        let (gx, gw, gb) = kernel::read_pair::<f32, f32, _>(x, g, |ex, eg| -> Result<_> {
            let gy = View::of(&eg)?;
            let gx = needs
                .input(0)
                .then(|| {
                    written(x, &geom.output_dims(), |gx| {
                        forward(&gy, &wv, None, &geom, gx)
                    })
                })
                .transpose()?;
            let gw = if needs.input(1) {
                Some(weight_grad(&gy, &dense(&ex)?, &geom)?)
            } else {
                None
            };
            let gb = if want_b {
                Some(channel_sums(&dense(&eg)?, geom.n, geom.c, geom.h * geom.w))
            } else {
                None
            };
            Ok((gx, gw, gb))
        })??;
        gradients(w, bias, (gx, gw, gb))
    }
    let wv = w.values::<f32>()?;
    let bv = bias.map(Tensor::values::<f32>).transpose()?;
    kernel::read::<f32, _>(x, |e| {
        let xs = dense(&e)?;
        written(x, &geom.input_dims(), |y| {
            input_grad(&xs, &wv, &geom, y)?;
            let plane = geom.h * geom.w;
            if let (Some(bv), true) = (&bv, plane > 0) {
                for (k, row) in y.chunks_exact_mut(plane).enumerate() {
                    let bk = bv[k % geom.c];
                    for v in row.iter_mut() {
                        *v += bk;
                    }
                }
            }
            Ok(())
        })
    })?
}

/// The windows of `x` as columns `[n, c kh kw, l]` (im2col).
#[differentiable]
pub(crate) fn unfold(x: &Tensor, geom: Geom) -> Result<Tensor> {
    // the adjoint of im2col is col2im
    fn vjp(g: &Tensor, geom: Geom) -> Result<Option<Tensor>> {
        let gx = kernel::read::<f32, _>(g, |e| fold_all(&dense(&e)?, &geom))??;
        Ok(Some(result(g, gx, &geom.input_dims())?))
    }
    let cols = kernel::read::<f32, _>(x, |e| unfold_all(&View::of(&e)?, &geom))??;
    result(x, cols, &[geom.n, geom.c * geom.k(), geom.l()])
}

/// Columns `[n, c kh kw, l]` summed back into images `[n, c, h, w]` (col2im).
#[differentiable]
pub(crate) fn fold(cols: &Tensor, geom: Geom) -> Result<Tensor> {
    // the adjoint of col2im is im2col
    fn vjp(g: &Tensor, geom: Geom) -> Result<Option<Tensor>> {
        let gc = kernel::read::<f32, _>(g, |e| unfold_all(&View::of(&e)?, &geom))??;
        Ok(Some(result(g, gc, &[geom.n, geom.c * geom.k(), geom.l()])?))
    }
    let x = kernel::read::<f32, _>(cols, |e| fold_all(&dense(&e)?, &geom))??;
    result(cols, x, &geom.input_dims())
}

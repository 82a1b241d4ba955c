//! Comparisons to Bool (`eq`, `ne`, `lt`, `le`, `gt`, `ge`), the selection `where_cond`, and
//! logical `and`/`or`/`not` on Bool tensors, all with numpy broadcasting.
//!
//! Comparisons and logic produce Bool, which is not differentiable, so they record no node and
//! broadcast their operands with graph construction off. `where_cond` is differentiable in its
//! two value operands.

use super::broadcast::{broadcast_shapes, expand, operands};
use super::elementwise::same_dtype;
use crate::error::{ensure, Result};
use crate::graph::grad_mode::no_grad;
use crate::kernel::element::numeric;
use crate::kernel::{fresh_like, map, read, read_pair, zip};
use crate::{differentiable, DType, Tensor};

macro_rules! comparison {
    ($(#[$doc:meta])* $name:ident, $op:tt, $bool:expr) => {
        $(#[$doc])*
        pub fn $name(a: &Tensor, b: &Tensor) -> Result<Tensor> {
            same_dtype(stringify!($name), a, b)?;
            let _off = no_grad();
            let (a, b) = operands(stringify!($name), a, b)?;
            if $bool && *a.dtype() == DType::Bool {
                return zip(&a, &b, |x: bool, y: bool| x $op y);
            }
            numeric!(stringify!($name), a, T => zip(&a, &b, |x: T, y: T| x $op y))
        }
    };
}

comparison!(
    /// `a == b` per position as Bool, numpy broadcasting (Float32, Float64, Int32, Bool).
    /// NaN equals nothing, as IEEE says.
    eq, ==, true
);
comparison!(
    /// `a != b` per position as Bool, numpy broadcasting (Float32, Float64, Int32, Bool).
    ne, !=, true
);
comparison!(
    /// `a < b` per position as Bool, numpy broadcasting (Float32, Float64, Int32).
    lt, <, false
);
comparison!(
    /// `a <= b` per position as Bool, numpy broadcasting (Float32, Float64, Int32).
    le, <=, false
);
comparison!(
    /// `a > b` per position as Bool, numpy broadcasting (Float32, Float64, Int32).
    gt, >, false
);
comparison!(
    /// `a >= b` per position as Bool, numpy broadcasting (Float32, Float64, Int32).
    ge, >=, false
);

fn bool_operand(op: &str, t: &Tensor) -> Result<()> {
    ensure!(
        *t.dtype() == DType::Bool,
        Type,
        "{op}: takes Bool tensors, not {}",
        t.dtype()
    );
    Ok(())
}

/// `a && b` per position for Bool tensors, numpy broadcasting.
pub fn logical_and(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    bool_operand("logical_and", a)?;
    bool_operand("logical_and", b)?;
    let _off = no_grad();
    let (a, b) = operands("logical_and", a, b)?;
    zip(&a, &b, |x: bool, y: bool| x && y)
}

/// `a || b` per position for Bool tensors, numpy broadcasting.
pub fn logical_or(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    bool_operand("logical_or", a)?;
    bool_operand("logical_or", b)?;
    let _off = no_grad();
    let (a, b) = operands("logical_or", a, b)?;
    zip(&a, &b, |x: bool, y: bool| x || y)
}

/// `!a` per position for a Bool tensor.
pub fn logical_not(a: &Tensor) -> Result<Tensor> {
    bool_operand("logical_not", a)?;
    map(a, |x: bool| !x)
}

/// `a` where `mask` is true and `b` elsewhere, all three broadcast to one shape (numpy).
/// `mask` is Bool; `a` and `b` share a dtype. Differentiable in `a` and `b`: each receives the
/// cotangent at the positions it was chosen, 0 elsewhere.
#[track_caller]
pub fn where_cond(mask: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    bool_operand("where_cond", mask)?;
    same_dtype("where_cond", a, b)?;
    let dims = broadcast_shapes(&a.dims(), &b.dims())
        .and_then(|d| broadcast_shapes(&mask.dims(), &d))
        .map_err(|e| e.context("where_cond"))?;
    let (a, b) = super::broadcast::broadcast_pair(&expand(a, &dims)?, &expand(b, &dims)?)?;
    let m = mask_like("where_cond", mask, &a)?;
    node::where_cond(&m, &a, &b)
}

/// The Bool `mask` broadcast to `like`'s extents and under its shape tree (no graph: Bool is
/// not differentiable), for the selecting ops' kernels, which walk both in one order.
pub(crate) fn mask_like(op: &str, mask: &Tensor, like: &Tensor) -> Result<Tensor> {
    let _off = no_grad();
    let m = expand(mask, &like.dims())?;
    if m.shape() == like.shape() {
        Ok(m)
    } else {
        m.raw_reshape_to(op, like.shape())
    }
}

mod node {
    use super::{differentiable, numeric, select, zip, DType, Result, Tensor};

    #[differentiable(crate = crate)]
    pub(super) fn where_cond(mask: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        // d where(m, a, b) = [m] g da + [!m] g db; the mask has no gradient
        fn vjp(
            g: &Tensor,
            mask: &Tensor,
            needs: &NeedsGrad,
        ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
            let ga = if needs.input(1) {
                Some(zip(mask, g, |m: bool, g: f32| if m { g } else { 0.0 })?)
            } else {
                None
            };
            let gb = if needs.input(2) {
                Some(zip(mask, g, |m: bool, g: f32| if m { 0.0 } else { g })?)
            } else {
                None
            };
            Ok((None, ga, gb))
        }
        if *a.dtype() == DType::Bool {
            return select::<bool>(mask, a, b);
        }
        numeric!("where_cond", a, T => select::<T>(mask, a, b))
    }
}

/// The selection kernel: the mask is read out once, then both operands in logical order.
fn select<T: crate::Element>(mask: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let m = read::<bool, _>(mask, |m| -> Result<Vec<bool>> {
        let mut v = crate::storage::allocation::filled(m.len(), false)?;
        m.copy_range(0, &mut v);
        Ok(v)
    })??;
    read_pair::<T, T, _>(a, b, |x, y| {
        fresh_like::<T>(a, |out| {
            x.copy_range(0, out);
            let mut i = 0;
            y.for_each(|q| {
                if !m[i] {
                    out[i] = q;
                }
                i += 1;
            });
            Ok(())
        })
    })?
}

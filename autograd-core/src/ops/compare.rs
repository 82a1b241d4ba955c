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
use crate::storage::scalar::Scalar;
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

/// One value operand of [`where_cond`]: a tensor, or a scalar that stands for a tensor of
/// the other operand's dtype full of it. Built with `From` from `&Tensor` and the scalar types,
/// so `where_cond(&m, &x, 0.0)` and `where_cond(&m, 1.0, &x)` read as PyTorch's
/// `torch.where(m, x, 0.0)`.
#[derive(Debug, Clone, Copy)]
pub enum Operand<'a> {
    /// A tensor operand.
    Tensor(&'a Tensor),
    /// A scalar operand, cast to the tensor operand's dtype.
    Scalar(Scalar),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Tensor(t)
    }
}

macro_rules! operand_from {
    ($($t:ty)*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(v: $t) -> Self {
                Operand::Scalar(Scalar::from(v))
            }
        }
    )*};
}
operand_from!(f32 f64 i32 i64 bool Scalar);

impl Operand<'_> {
    /// The operand as a tensor: a scalar becomes a 0-dim tensor of `like`'s dtype (or its own
    /// when `like` is a scalar too), which broadcasts.
    fn tensor(self, like: Operand<'_>) -> Result<Tensor> {
        match (self, like) {
            (Operand::Tensor(t), _) => Ok(t.clone()),
            (Operand::Scalar(s), Operand::Tensor(t)) => {
                Tensor::full(crate::Shape::from(&[0usize; 0][..]), s.cast(t.dtype())?)
            }
            (Operand::Scalar(s), Operand::Scalar(_)) => {
                Tensor::full(crate::Shape::from(&[0usize; 0][..]), s)
            }
        }
    }
}

/// `a` where `mask` is true and `b` elsewhere, all three broadcast to one shape (numpy), as
/// PyTorch's `torch.where`. `mask` is Bool; `a` and `b` are tensors of one dtype or scalars: a
/// scalar is cast to the other operand's dtype (`Error::Type` when it does not fit, e.g. `0.5`
/// for an Int32 tensor), and two scalars give a 0-dim-broadcast tensor of `a`'s scalar type
/// with `b` cast to it. Differentiable in the tensor operands: each receives the cotangent at
/// the positions it was chosen, 0 elsewhere.
///
/// ```
/// use autograd_core::ops::where_cond;
/// use autograd_core::{shape, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], shape![3])?;
/// let m = Tensor::from_vec(vec![true, false, true], shape![3])?;
/// assert_eq!(where_cond(&m, &x, 0.0)?.values::<f32>()?, [1.0, 0.0, 3.0]);
/// assert_eq!(where_cond(&m, 1.0, &x)?.values::<f32>()?, [1.0, -2.0, 1.0]);
/// # Ok::<(), autograd_core::Error>(())
/// ```
#[track_caller]
pub fn where_cond<'a>(
    mask: &Tensor,
    a: impl Into<Operand<'a>>,
    b: impl Into<Operand<'a>>,
) -> Result<Tensor> {
    let (a, b) = (a.into(), b.into());
    let (a, b) = (a.tensor(b)?, b.tensor(a)?);
    let (a, b) = (&a, &b);
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

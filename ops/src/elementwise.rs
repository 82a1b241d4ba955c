//! Elementwise arithmetic: `a + b`, `a * b`, `a * c`, `a + c`.

use autograd_core::{record, Operation, Result, SavedState, Tensor};

use crate::kernel::{map, zip};

struct Add {
    saved: SavedState,
}

impl Operation for Add {
    fn name(&self) -> &'static str {
        "add"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    // d(a + b) = g da + g db
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (a, b) = self
            .saved
            .with("add", |s| (s.inputs[0].0.clone(), s.inputs[1].0.clone()))?;
        Ok(vec![
            Some(a.gradient_like(g.clone())?),
            Some(b.gradient_like(g.clone())?),
        ])
    }
}

/// `a + b` elementwise; shapes must be equal.
#[track_caller]
pub fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let out = zip("add", a, b, |x, y| x + y)?;
    Ok(record(out, &[a, b], Vec::new(), |saved| Add { saved }))
}

struct Mul {
    saved: SavedState,
}

impl Operation for Mul {
    fn name(&self) -> &'static str {
        "mul"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    // d(a * b) = g * b da + g * a db
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (a, b) = self
            .saved
            .with("mul", |s| (s.inputs[0].0.clone(), s.inputs[1].0.clone()))?;
        let ga = zip("mul backward", g, &b.detach(), |g, y| g * y)?;
        let gb = zip("mul backward", g, &a.detach(), |g, x| g * x)?;
        Ok(vec![Some(a.gradient_like(ga)?), Some(b.gradient_like(gb)?)])
    }
}

/// `a * b` elementwise; shapes must be equal.
#[track_caller]
pub fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let out = zip("mul", a, b, |x, y| x * y)?;
    Ok(record(out, &[a, b], Vec::new(), |saved| Mul { saved }))
}

struct MulScalar {
    saved: SavedState,
    c: f32,
}

impl Operation for MulScalar {
    fn name(&self) -> &'static str {
        "mul_scalar"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    // d(c a) = c g da
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let a = self.saved.with("mul_scalar", |s| s.inputs[0].0.clone())?;
        let c = self.c;
        let ga = map("mul_scalar backward", g, |x| x * c)?;
        Ok(vec![Some(a.gradient_like(ga)?)])
    }
}

/// `a * c` for a constant `c`.
#[track_caller]
pub fn mul_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    let out = map("mul_scalar", a, |x| x * c)?;
    Ok(record(out, &[a], Vec::new(), |saved| MulScalar {
        saved,
        c,
    }))
}

struct AddScalar {
    saved: SavedState,
}

impl Operation for AddScalar {
    fn name(&self) -> &'static str {
        "add_scalar"
    }
    fn saved(&self) -> &SavedState {
        &self.saved
    }
    fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let a = self.saved.with("add_scalar", |s| s.inputs[0].0.clone())?;
        Ok(vec![Some(a.gradient_like(g.clone())?)])
    }
}

/// `a + c` for a constant `c`.
#[track_caller]
pub fn add_scalar(a: &Tensor, c: f32) -> Result<Tensor> {
    let out = map("add_scalar", a, |x| x + c)?;
    Ok(record(out, &[a], Vec::new(), |saved| AddScalar { saved }))
}

use autograd_core::{differentiable, Result, Tensor};

/// An `impl Trait` the macro cannot name inside a plain parameter's type: its value is
/// checked, so the definition asks for a `Captured` bound (a tensor could hide behind it).
#[differentiable]
fn shift(x: &Tensor, tagged: (impl std::fmt::Debug, u8)) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Option<Tensor> {
        Some(g.clone())
    }
    let _ = format!("{tagged:?}");
    x.f32_like(x.values::<f32>()?)
}

fn main() {}

// `grad(output=2.0, ...)` and `grad(output, inputs=[x, 2.0], ...)`: the output and every
// input must be Tensors.
use autograd_core::{grad, GradOptions, Tensor};

fn main() {
    let x = Tensor::scalar(1.0);
    let _ = grad(&2.0f32, &[&x], &x, GradOptions::default());
    let _ = grad(&x, &[&x, &2.0f32], &x, GradOptions::default());
}

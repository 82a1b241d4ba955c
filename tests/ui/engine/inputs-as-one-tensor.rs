// `grad(output, inputs=x, ...)` with one Tensor instead of a sequence of tensors.
use autograd_core::{grad, GradOptions, Tensor};

fn main() {
    let x = Tensor::scalar(1.0);
    let _ = grad(&x, &x, &x, GradOptions::default());
}

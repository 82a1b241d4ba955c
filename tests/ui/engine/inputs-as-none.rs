// `grad(output, inputs=None, ...)`.
use autograd_core::{grad, GradOptions, Tensor};

fn main() {
    let x = Tensor::scalar(1.0);
    let _ = grad(&x, None, &x, GradOptions::default());
}

// `grad(output, inputs=3, ...)`: inputs must be a sequence of Tensors.
use autograd_core::{grad, GradOptions, Tensor};

fn main() {
    let x = Tensor::scalar(1.0);
    let _ = grad(&x, 3, &x, GradOptions::default());
}

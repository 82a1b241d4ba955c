// `grad(output, inputs, cotangents, create_graph=True)`: GradOptions has no such field.
use autograd_core::{grad, GradOptions, Tensor};

fn main() {
    let x = Tensor::scalar(1.0);
    let options = GradOptions {
        create_graph: true,
        ..GradOptions::default()
    };
    let _ = grad(&x, &[&x], &x, options);
}

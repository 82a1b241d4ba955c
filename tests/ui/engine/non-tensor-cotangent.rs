// A cotangent that is not a Tensor: a float for backward, a list of floats for grad.
use autograd_core::{grad, GradOptions, Tensor};

fn main() {
    let x = Tensor::scalar(1.0);
    let _ = x.backward_with(Some(&1.0f32), false);
    let _ = grad(&x, &[&x], &[1.0f32], GradOptions::default());
}

// `backwards_traversal(gradient=1.0, operation=node)`: the gradient must be a Tensor.
use autograd_core::{backwards_traversal, Tensor};

fn main() {
    let x = Tensor::scalar(1.0);
    let _ = backwards_traversal(&1.0f32, x.autograd_ctx().as_ref(), false);
}

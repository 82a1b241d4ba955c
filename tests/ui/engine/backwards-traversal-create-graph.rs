// `Tensor.backwards_traversal(gradient, operation, retain_graph=False, create_graph=True)`.
use autograd_core::{backwards_traversal, Tensor};

fn main() {
    let g = Tensor::scalar(1.0);
    let _ = backwards_traversal(&g, None, false, true);
}

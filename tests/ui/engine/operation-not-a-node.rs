// `Tensor.backwards_traversal(gradient, operation=<not a node>)`: the spec's AttributeError.
use autograd_core::{backwards_traversal, Tensor};

fn main() {
    let x = Tensor::scalar(1.0);
    let _ = backwards_traversal(&x, Some(&x), false);
    let _ = backwards_traversal(&x, Some(&"add"), false);
}

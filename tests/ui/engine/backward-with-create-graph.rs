// The spec's `tensor.backward(gradient, retain_graph=False, create_graph=True)`: there is no
// create_graph parameter.
use autograd_core::Tensor;

fn main() {
    let y = Tensor::scalar(1.0);
    let _ = y.backward_with(None, false, true);
}

use autograd_core::Tensor;
use autograd_ops::Module;

#[derive(Module)]
struct Pair(Tensor, Tensor);

fn main() {}

use autograd_core::Tensor;
use autograd_ops::Module;

#[derive(Module)]
#[module(skip)]
struct Norm {
    weight: Tensor,
}

fn main() {}

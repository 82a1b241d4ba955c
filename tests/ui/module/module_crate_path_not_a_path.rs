use autograd_core::Tensor;
use autograd_ops::Module;

#[derive(Module)]
#[module(crate = 3)]
struct Norm {
    weight: Tensor,
}

fn main() {}

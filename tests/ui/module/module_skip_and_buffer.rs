use autograd_core::Tensor;
use autograd_ops::Module;

#[derive(Module)]
struct Norm {
    weight: Tensor,
    #[module(skip, buffer)]
    running_mean: Tensor,
}

fn main() {}

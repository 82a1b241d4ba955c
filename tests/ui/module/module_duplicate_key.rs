use autograd_core::Tensor;
use autograd_ops::Module;

#[derive(Module)]
struct Norm {
    #[module(buffer, buffer)]
    running_mean: Tensor,
}

fn main() {}

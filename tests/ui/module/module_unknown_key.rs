use autograd_core::Tensor;
use autograd_ops::Module;

#[derive(Module)]
struct Norm {
    weight: Tensor,
    #[module(bufer)]
    running_mean: Tensor,
}

fn main() {}

use autograd_core::differentiable;

#[differentiable]
struct Double;

fn main() {}

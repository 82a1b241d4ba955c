use autograd_ops::{Linear, Module};

#[derive(Module)]
struct Net {
    layer: Linear,
    #[module(training)]
    training: bool,
    #[module(training)]
    also_training: bool,
}

fn main() {}

use autograd_ops::{Linear, Module};

#[derive(Module)]
struct Net {
    layer: Linear,
    #[module(training, buffer)]
    training: bool,
}

fn main() {}

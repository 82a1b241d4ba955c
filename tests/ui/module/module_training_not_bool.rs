use autograd_ops::{Linear, Module};

#[derive(Module)]
struct Net {
    layer: Linear,
    #[module(training)]
    mode: u8,
}

fn main() {}

use autograd_ops::{Linear, Module};

#[derive(Module)]
struct Net {
    layer: Linear,
    #[module(skip, rename = "steps")]
    step_count: usize,
}

fn main() {}

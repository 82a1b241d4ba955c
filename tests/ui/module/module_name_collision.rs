use autograd_ops::{Linear, Module};

#[derive(Module)]
struct Net {
    encoder: Linear,
    #[module(rename = "encoder")]
    decoder: Linear,
}

fn main() {}

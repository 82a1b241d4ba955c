use autograd_ops::{Linear, Module};

#[derive(Module)]
struct Net {
    #[module(rename = "enc.layer")]
    encoder: Linear,
}

fn main() {}

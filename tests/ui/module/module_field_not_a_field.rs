use autograd_ops::{Linear, Module};

#[derive(Module)]
struct Classifier {
    layer: Linear,
    labels: Vec<String>,
}

fn main() {}

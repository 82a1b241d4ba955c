use autograd_ops::{Linear, Module};

#[derive(Module)]
enum Head {
    Small(Linear),
    Large(Linear),
}

fn main() {}

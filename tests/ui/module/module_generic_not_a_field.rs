use autograd_ops::{Linear, Module};

#[derive(Module)]
struct Wrapper<M> {
    inner: M,
    head: Linear,
}

fn count(m: &Wrapper<String>) -> usize {
    m.num_parameters()
}

fn main() {}

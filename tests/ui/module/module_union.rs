use autograd_ops::Module;

#[derive(Module)]
union Bits {
    a: u32,
    b: f32,
}

fn main() {}

use autograd_ops::Module;

#[derive(Module)]
struct Nothing;

fn main() {}

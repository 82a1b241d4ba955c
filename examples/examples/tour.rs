//! A first look: build tensors, look at their layouts, differentiate a small expression.

use autograd_core::{shape, stride, Layout, Result, Tensor};
use autograd_ops::{add, mul, sum};

fn main() -> std::process::ExitCode {
    autograd_examples::cli::run(tour)
}

fn tour() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], shape![2, 3])?;
    println!("x = {x}  layout {}", x.layout());
    let xt = x.transpose(0, 1)?;
    println!("x^T = {xt}  layout {}", xt.layout());
    let nested = Layout::new(shape![2, [4, 3]], stride![1, [0, 2]])?;
    println!(
        "nested layout {nested}: size {}, cosize {}, aliasing {:?}",
        nested.size(),
        nested.cosize(),
        nested.aliasing()
    );
    println!(
        "its canonical injective layout: {}",
        Layout::canonical(nested.shape().clone())?
    );

    // loss = sum(x * x + x): d loss / dx = 2x + 1
    let loss = sum(&add(&mul(&x, &x)?, &x)?)?;
    loss.backward()?;
    println!(
        "loss = {loss}, dloss/dx = {}",
        x.grad()?.map(|g| g.to_string()).unwrap_or_default()
    );
    Ok(())
}

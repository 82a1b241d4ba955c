//! What happens when a tensor a graph saved is modified before backward: the traversal is
//! refused with an error naming the op, where it was recorded and the versions involved, and
//! nothing is changed (no `.grad` is written, the graph is kept for a retry).

use autograd_core::{shape, Result, Tensor};
use autograd_ops::{mul, sum};

fn main() -> std::process::ExitCode {
    autograd_examples::cli::run(mutation_error)
}

fn mutation_error() -> Result<()> {
    let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], shape![3])?;
    let x = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], shape![3])?;
    let loss = sum(&mul(&w, &x)?)?; // mul saves w and x for its backward

    // an "optimizer step" before the traversal: bumps w's version
    w.add_(&Tensor::from_vec(vec![0.1f32; 3], shape![3])?)?;

    match loss.backward() {
        Ok(()) => println!("unexpected: backward succeeded"),
        Err(e) => {
            println!("backward refused ({:?}):\n  {e}", e.kind());
            println!(
                "w.grad after the refusal: {:?}",
                w.grad()?.map(|g| g.to_string())
            );
        }
    }

    // the fix: finish the traversal first, then mutate
    let loss = sum(&mul(&w, &x)?)?;
    loss.backward()?;
    w.add_(&Tensor::from_vec(vec![0.1f32; 3], shape![3])?)?;
    println!(
        "traversal before the update: w.grad = {}",
        w.grad()?.map(|g| g.to_string()).unwrap_or_default()
    );
    Ok(())
}

//! Writes the graph of a small MLP's loss as Graphviz DOT, before backward and again after a
//! profiled backward (nodes labelled with their time), so it can be drawn:
//!
//!     cargo run --release -p autograd-examples --example graph_dot -- mlp.dot
//!     dot -Tsvg mlp.dot -o mlp.svg

use std::path::PathBuf;

use autograd_core::{shape, to_dot, to_dot_with_profile, Error, Result, Rng, Tensor};
use autograd_ops::{cross_entropy, relu, CrossEntropyOptions, Linear};

fn main() -> std::process::ExitCode {
    autograd_examples::cli::run(graph_dot)
}

fn graph_dot() -> Result<()> {
    let path = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "mlp.dot".into()));
    let profiled = path.with_extension("profiled.dot");

    // Linear(4, 8) -> ReLU -> Linear(8, 3) -> cross-entropy on a batch of 5
    let mut rng = Rng::new(0);
    let (l1, l2) = (
        Linear::new(4, 8, true, &mut rng)?,
        Linear::new(8, 3, true, &mut rng)?,
    );
    let x = Tensor::randn(shape![5, 4], &mut rng)?;
    let y = Tensor::from_vec(vec![0i32, 2, 1, 1, 0], shape![5])?;
    let loss = cross_entropy(
        &l2.forward(&relu(&l1.forward(&x)?)?)?,
        &y,
        CrossEntropyOptions::default(),
    )?;

    let dot = to_dot(&loss)?;
    write(&path, &dot)?;
    println!(
        "{}: {} nodes and leaves, {} edges",
        path.display(),
        dot.lines()
            .filter(|l| l.contains("[label=") && !l.contains(" -> "))
            .count(),
        dot.matches(" -> ").count()
    );

    // a profiled traversal that keeps the graph, drawn with each node's backward time
    let profile = loss.backward_profiled(None, true)?;
    write(&profiled, &to_dot_with_profile(&loss, &profile)?)?;
    println!(
        "{}: the same graph after backward ({:.1} µs in {} nodes)",
        profiled.display(),
        profile.total().as_secs_f64() * 1e6,
        profile.nodes().len()
    );
    println!("draw them with: dot -Tsvg {} -o mlp.svg", path.display());
    Ok(())
}

fn write(path: &PathBuf, text: &str) -> Result<()> {
    std::fs::write(path, text)
        .map_err(|e| Error::Runtime(format!("writing {}: {e}", path.display())))
}

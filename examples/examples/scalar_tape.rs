//! Minimises the Rosenbrock function f(x, y) = (1 - x)² + 100 (y - x²)² from (-1.5, 2) by
//! gradient descent with momentum, taking each gradient from one reverse sweep of a scalar tape
//! that is cleared and reused every step.
//!
//! ```text
//! cargo run --release -p autograd-examples --example scalar_tape
//! ```
//!
//! The minimum is f(1, 1) = 0, at the end of a long, curved, nearly flat valley: the slope
//! across the valley is steep (curvature about 1,000 near the minimum) and along it gentle, so
//! plain gradient descent needs a tiny step and crawls; momentum carries the iterate along the
//! valley floor.

use std::time::Instant;

use autograd_core::tape::{ScalarTape, Var};

/// f(x, y) = (1 - x)² + 100 (y - x²)², recorded on the tape of `x` and `y`.
fn rosenbrock<'t>(x: Var<'t>, y: Var<'t>) -> Var<'t> {
    (1.0 - x).powi(2) + 100.0 * (y - x.powi(2)).powi(2)
}

fn main() {
    const STEPS: usize = 4_000;
    // Heavy-ball momentum: v <- beta v - lr grad, p <- p + v. A step of lr = 1e-3 stays stable
    // for curvatures up to 2 (1 + beta) / lr = 3,800, above the 2,100 met at the start.
    let (lr, beta) = (1e-3, 0.9);
    let start = Instant::now();
    let mut tape = ScalarTape::with_capacity(16);
    let mut point = [-1.5, 2.0];
    let mut velocity = [0.0; 2];
    println!("{:>6}  {:>10}  {:>10}  {:>12}", "step", "x", "y", "f(x, y)");
    for step in 0..=STEPS {
        tape.clear();
        let vars = [tape.var(point[0]), tape.var(point[1])];
        let f = rosenbrock(vars[0], vars[1]);
        let [x, y] = point;
        if step.is_multiple_of(500) {
            println!("{step:>6}  {x:>10.6}  {y:>10.6}  {:>12.6e}", f.value());
        }
        if step == STEPS {
            println!(
                "minimum near ({x:.6}, {y:.6}), f = {:.3e}, after {STEPS} steps in {:.1} ms",
                f.value(),
                start.elapsed().as_secs_f64() * 1e3
            );
            break;
        }
        let grads = tape.gradients(f);
        for ((p, v), var) in point.iter_mut().zip(&mut velocity).zip(vars) {
            *v = beta * *v - lr * grads[var];
            *p += *v;
        }
    }
}

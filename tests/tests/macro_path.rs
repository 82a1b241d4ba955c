//! `#[differentiable(crate = path)]`: generated code reaches the library only through
//! `<path>::__private`, proven against a fake module that counts the recordings it forwards.

use std::sync::atomic::{AtomicUsize, Ordering};

use autograd_core::{differentiable, Result, Tensor};
use autograd_tests::{grad_vals, t};

/// Stands in for `autograd_core` in a crate that wraps or renames it.
mod fake {
    pub mod __private {
        use std::sync::atomic::Ordering;

        pub use autograd_core::__private::*;

        /// Shadows the glob-imported `Recording` and counts the nodes it attaches.
        #[derive(Debug)]
        pub struct Recording(autograd_core::Recording);

        impl Recording {
            #[track_caller]
            pub fn begin(inputs: &[&Tensor]) -> Option<Recording> {
                autograd_core::Recording::begin(inputs).map(Recording)
            }

            pub fn finish<O: Operation>(
                self,
                result: Tensor,
                context: Vec<Tensor>,
                make: impl FnOnce(SavedState) -> O,
            ) -> Tensor {
                super::super::RECORDED.fetch_add(1, Ordering::SeqCst);
                self.0.finish(result, context, make)
            }
        }
    }
}

static RECORDED: AtomicUsize = AtomicUsize::new(0);

/// `2 x`, through the fake path.
#[differentiable(crate = fake)]
fn double(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.f32_like(
            g.values::<f32>()?.iter().map(|v| 2.0 * v).collect(),
        )?))
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| 2.0 * v).collect())
}

/// `x + 1`, through the fake path spelled as a string, as serde spells it.
#[differentiable(crate = "crate::fake")]
fn inc(x: &Tensor) -> Result<Tensor> {
    fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(g.clone()))
    }
    x.f32_like(x.values::<f32>()?.iter().map(|v| v + 1.0).collect())
}

mod nested {
    use autograd_core::{differentiable, Result, Tensor};

    /// `-x`, from a nested module, through an absolute path to the real library.
    #[differentiable(crate = ::autograd_core)]
    pub fn neg(x: &Tensor) -> Result<Tensor> {
        fn vjp(g: &Tensor) -> Result<Option<Tensor>> {
            Ok(Some(g.f32_like(
                g.values::<f32>()?.iter().map(|v| -v).collect(),
            )?))
        }
        x.f32_like(x.values::<f32>()?.iter().map(|v| -v).collect())
    }
}

#[test]
fn the_crate_override_routes_generated_code_through_the_given_path() {
    let x = t(&[1.0, 2.0], &[2]);
    let before = RECORDED.load(Ordering::SeqCst);
    let y = inc(&double(&x).unwrap()).unwrap();
    assert_eq!(RECORDED.load(Ordering::SeqCst) - before, 2);
    y.backward_with(Some(&t(&[1.0, 1.0], &[2])), false).unwrap();
    assert_eq!(grad_vals(&x), Some(vec![2.0, 2.0]));

    let z = nested::neg(&x).unwrap();
    assert_eq!(z.autograd_ctx().unwrap().name(), "neg");
    assert_eq!(RECORDED.load(Ordering::SeqCst) - before, 2);
}

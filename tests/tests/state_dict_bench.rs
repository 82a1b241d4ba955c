//! Benchmark, not a timed test (issue 37 performance): saving and loading a 100 MB state dict.
//! Run with `cargo test --release -p autograd-tests --test state_dict_bench -- --ignored
//! --nocapture`; it prints GB/s (the second load reads the file from the page cache).

use std::time::Instant;

use autograd_core::{DType, Tensor};
use autograd_ops::{Module, Role};

struct Big(Vec<Tensor>);

impl Module for Big {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        for (i, t) in self.0.iter().enumerate() {
            f(
                &autograd_ops::module::join(prefix, &format!("layers.{i}.weight")),
                t,
                Role::Parameter,
            );
        }
    }
    fn set_training(&mut self, _: bool) {}
}

#[test]
#[ignore = "benchmark: run with --release --ignored --nocapture"]
fn save_and_load_a_100_mb_state_dict() {
    // 25 tensors of 1024 x 1024 Float32: 100 MiB
    let big = |v: f32| {
        Big((0..25)
            .map(|i| Tensor::full(vec![1024usize, 1024], v + i as f32).unwrap())
            .collect())
    };
    let a = big(0.5);
    let mut b = big(0.0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.safetensors");
    let bytes = 25.0 * 4.0 * 1024.0 * 1024.0_f64;
    let t = Instant::now();
    a.save(&path).unwrap();
    let save = t.elapsed().as_secs_f64();
    b.load(&path).unwrap();
    let t = Instant::now();
    b.load(&path).unwrap();
    let load = t.elapsed().as_secs_f64();
    assert_eq!(b.0[3].values::<f32>().unwrap()[7], 3.5);
    assert_eq!(b.0[0].dtype(), &DType::Float32);
    println!(
        "100 MiB state dict: save {:.3} s ({:.2} GB/s, with fsync), load {:.3} s ({:.2} GB/s)",
        save,
        bytes / save / 1e9,
        load,
        bytes / load / 1e9
    );
}

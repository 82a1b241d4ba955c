//! Property (issue 37 tests): any module of named tensors — random names, shapes and dtypes,
//! strided or compact — saved and loaded into a module of the same structure gives identical
//! tensors; and a save that fails leaves an existing file as it was.

use autograd_core::{DType, ErrorKind, Tensor};
use autograd_ops::{Module, Role};
use proptest::prelude::*;

/// Tensors under given names.
struct Bag(Vec<(String, Tensor)>);

impl Module for Bag {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        for (name, t) in &self.0 {
            f(
                &autograd_ops::module::join(prefix, name),
                t,
                Role::Parameter,
            );
        }
    }
    fn set_training(&mut self, _: bool) {}
}

/// A tensor of `dims` and dtype number `k` from `seed`, transposed when `strided`.
fn tensor(dims: &[usize], k: u8, seed: u64, strided: bool) -> Tensor {
    let n: usize = dims.iter().product();
    let v = |i: usize| {
        seed.wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add((i as u64).wrapping_mul(1_442_695_040_888_963_407))
            >> 20
    };
    let t = match k % 5 {
        0 => Tensor::from_vec(
            (0..n)
                .map(|i| f32::from_bits(v(i) as u32 & 0x7f7f_ffff))
                .collect(),
            dims.to_vec(),
        ),
        1 => Tensor::from_vec(
            (0..n).map(|i| v(i) as f64 * 1e-3 - 7.0).collect(),
            dims.to_vec(),
        ),
        2 => Tensor::from_vec((0..n).map(|i| v(i) as i32).collect(), dims.to_vec()),
        3 => Tensor::from_vec((0..n).map(|i| v(i) as i64 - 99).collect(), dims.to_vec()),
        _ => Tensor::from_vec((0..n).map(|i| v(i) % 2 == 1).collect(), dims.to_vec()),
    }
    .unwrap();
    if strided && dims.len() >= 2 {
        t.transpose(0, 1).unwrap()
    } else {
        t
    }
}

/// The bits of every element, by dtype.
fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        DType::Float32 => t
            .values::<f32>()
            .unwrap()
            .iter()
            .map(|x| u64::from(x.to_bits()))
            .collect(),
        DType::Float64 => t
            .values::<f64>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect(),
        DType::Int32 => t
            .values::<i32>()
            .unwrap()
            .iter()
            .map(|&x| x as u64)
            .collect(),
        DType::Int64 => t
            .values::<i64>()
            .unwrap()
            .iter()
            .map(|&x| x as u64)
            .collect(),
        _ => t
            .values::<bool>()
            .unwrap()
            .iter()
            .map(|&x| u64::from(x))
            .collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_random_module_saved_and_loaded_gives_identical_tensors(
        specs in prop::collection::vec(
            (prop::collection::vec(0usize..4, 0..4), any::<u8>(), any::<u64>(), any::<bool>()),
            0..7,
        )
    ) {
        let named = |seed_shift: u64| {
            Bag(specs
                .iter()
                .enumerate()
                .map(|(i, (dims, k, seed, strided))| {
                    (format!("blocks.{i}.t{k}"), tensor(dims, *k, seed ^ seed_shift, *strided))
                })
                .collect())
        };
        let a = named(0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bag.safetensors");
        a.save(&path).unwrap();
        // the fresh module holds compact tensors of the saved (logical) shapes
        let mut b = Bag(a.0.iter().map(|(n, t)| (n.clone(), Tensor::zeros(t.dims(), t.dtype()).unwrap())).collect());
        b.load(&path).unwrap();
        for ((n, x), (_, y)) in a.0.iter().zip(&b.0) {
            prop_assert_eq!(bits(x), bits(y), "{}", n);
        }
    }
}

#[test]
fn a_failed_save_leaves_the_existing_file_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bag.safetensors");
    let one = Tensor::ones(vec![2usize], &DType::Float32).unwrap();
    Bag(vec![("a".into(), one.clone())]).save(&path).unwrap();
    let before = std::fs::read(&path).unwrap();
    let twice = Bag(vec![("a".into(), one.clone()), ("a".into(), one)]);
    let e = twice.save(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Value);
    assert!(e.to_string().contains("two tensors named `a`"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file left"
    );
}

//! PyTorch interop (issue 37 item 3): state dicts written by `safetensors.torch.save_file`
//! (tests/fixtures/torch/gen_state_dicts.py) load into the equivalent `Linear` model and give
//! PyTorch's outputs; a BF16 copy loads into the Float32 parameters. The other way, the
//! committed `rust_mlp*.safetensors` are what this library saves for a seeded MLP (checked
//! here byte for byte, so they cannot go stale), and the script's `--check` loads them into
//! PyTorch; this test needs no Python. `REGENERATE_FIXTURES=1` rewrites them.

use std::path::PathBuf;

use autograd_core::{DType, Rng, Tensor};
use autograd_ops::module::join;
use autograd_ops::persist::LoadOptions;
use autograd_ops::{relu, Linear, Module, Role};
use autograd_tests::committed::{Committed, Io as RustIo};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/torch")
        .join(name)
}

/// PyTorch's `Mlp`: fc1 (8 → 16), relu, fc2 (16 → 4).
struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Mlp {
    fn new() -> Mlp {
        Mlp::from_rng(&mut Rng::new(0))
    }
    fn from_rng(rng: &mut Rng) -> Mlp {
        Mlp {
            fc1: Linear::new(8, 16, true, rng).unwrap(),
            fc2: Linear::new(16, 4, true, rng).unwrap(),
        }
    }
    fn forward(&self, x: &Tensor) -> Tensor {
        self.fc2
            .forward(&relu(&self.fc1.forward(x).unwrap()).unwrap())
            .unwrap()
    }
}

impl Module for Mlp {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        for (name, l) in [("fc1", &self.fc1), ("fc2", &self.fc2)] {
            let p = join(prefix, name);
            f(&join(&p, "weight"), l.weight(), Role::Parameter);
            if let Some(b) = l.bias() {
                f(&join(&p, "bias"), b, Role::Parameter);
            }
        }
    }
    fn set_training(&mut self, _: bool) {}
}

/// The input and PyTorch's outputs, read through a module of three buffers.
struct Io {
    input: Tensor,
    output: Tensor,
    output_bf16: Tensor,
}

impl Module for Io {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, Role)) {
        f(&join(prefix, "input"), &self.input, Role::Buffer);
        f(&join(prefix, "output"), &self.output, Role::Buffer);
        f(
            &join(prefix, "output_bf16"),
            &self.output_bf16,
            Role::Buffer,
        );
    }
    fn set_training(&mut self, _: bool) {}
}

fn io() -> Io {
    let z = |d: &[usize]| Tensor::zeros(d.to_vec(), &DType::Float32).unwrap();
    let mut io = Io {
        input: z(&[5, 8]),
        output: z(&[5, 4]),
        output_bf16: z(&[5, 4]),
    };
    io.load(fixture("mlp_io.safetensors")).unwrap();
    io
}

#[track_caller]
fn close(got: &Tensor, want: &Tensor, tol: f32) {
    let (g, w) = (got.values::<f32>().unwrap(), want.values::<f32>().unwrap());
    assert_eq!(g.len(), w.len());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= tol, "element {i}: {a} vs PyTorch's {b}");
    }
}

#[test]
fn a_pytorch_mlp_state_dict_loads_and_gives_pytorchs_outputs() {
    let io = io();
    let mut mlp = Mlp::new();
    mlp.load(fixture("mlp.safetensors")).unwrap();
    close(&mlp.forward(&io.input), &io.output, 1e-5);
}

#[test]
fn a_bf16_pytorch_state_dict_loads_into_float32_parameters() {
    let io = io();
    let mut mlp = Mlp::new();
    mlp.load(fixture("mlp_bf16.safetensors")).unwrap();
    close(&mlp.forward(&io.input), &io.output_bf16, 1e-5);
}

#[test]
fn a_pytorch_state_dict_saved_again_here_round_trips_bit_for_bit() {
    let mut mlp = Mlp::new();
    mlp.load(fixture("mlp.safetensors")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resaved.safetensors");
    mlp.save(&path).unwrap();
    let mut again = Mlp::new();
    let report = again.load_with(&path, LoadOptions::default()).unwrap();
    assert!(report.missing.is_empty() && report.unexpected.is_empty());
    for ((n, a), (_, b)) in mlp.named_parameters().iter().zip(again.named_parameters()) {
        let bits = |t: &Tensor| -> Vec<u32> {
            t.values::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect()
        };
        assert_eq!(bits(a), bits(&b), "{n}");
    }
    // `python gen_state_dicts.py --check <file>` loads such a file into PyTorch
    if let Some(out) = std::env::var_os("STRIDEWEAVE_TORCH_CHECK_OUT") {
        mlp.save(out).unwrap();
    }
}

/// The committed `rust_mlp*` files and the command that rewrites them.
const COMMITTED: Committed =
    Committed::new("REGENERATE_FIXTURES=1 cargo test -p autograd-tests --test torch_interop");

/// Issue 37 item 3, "a file saved by this library loads in PyTorch": the files PyTorch is
/// checked against (`gen_state_dicts.py --check`) are the ones a seeded MLP saves today.
#[test]
fn the_committed_rust_mlp_files_are_what_this_library_saves() {
    let mut rng = Rng::new(37);
    let mlp = Mlp::from_rng(&mut rng);
    let input = Tensor::randn(vec![5, 8], &mut rng).unwrap();
    let io = RustIo {
        output: mlp.forward(&input),
        input,
    };
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("rust_mlp.safetensors");
    mlp.save(&fresh).unwrap();
    COMMITTED.file_is(&fixture("rust_mlp.safetensors"), &fresh);
    COMMITTED.io_is(&fixture("rust_mlp_io.safetensors"), &io);
}

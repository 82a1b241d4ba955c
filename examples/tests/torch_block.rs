//! PyTorch interop of the transformer block (issue 37 item 3): the state dict PyTorch's
//! `safetensors.torch.save_file` wrote for the same block (tests/fixtures/torch/
//! gen_state_dicts.py) loads into `transformer::Block` by the names its derive gives and
//! reproduces PyTorch's output. The other way, the committed `rust_block*.safetensors` are
//! what this library saves for a seeded block (checked here byte for byte, so they cannot go
//! stale; `REGENERATE_FIXTURES=1` rewrites them), and the script's `--check` loads them into
//! PyTorch. It lives here, not in tests/tests/torch_interop.rs, because the block is this
//! crate's and the tests crate does not depend on this one.

use std::path::PathBuf;

use autograd_core::{DType, Rng, Tensor};
use autograd_examples::transformer::{Block, Config};
use autograd_ops::Module;
use autograd_tests::committed::{Committed, Io};

/// `tests/fixtures/torch/name` of the workspace.
fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/torch")
        .join(name)
}

/// The script's block: d_model 16, 2 heads, MLP 32 (vocab, context and layers unused).
fn config() -> Config {
    Config {
        vocab: 1,
        context: 5,
        d_model: 16,
        heads: 2,
        layers: 1,
        ff: 32,
        checkpoint: false,
    }
}

/// The committed `rust_block*` files and the command that rewrites them.
const COMMITTED: Committed =
    Committed::new("REGENERATE_FIXTURES=1 cargo test -p autograd-examples --test torch_block");

/// The `input` and `output` `[2, 5, 16]` of the io file `name`.
fn io(name: &str) -> Io {
    let z = || Tensor::zeros(vec![2, 5, 16], &DType::Float32).unwrap();
    let mut io = Io {
        input: z(),
        output: z(),
    };
    io.load(fixture(name)).unwrap();
    io
}

#[track_caller]
fn close(got: &Tensor, want: &Tensor, tol: f32) {
    assert_eq!(got.dims(), want.dims());
    let (g, w) = (got.values::<f32>().unwrap(), want.values::<f32>().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= tol, "element {i}: {a} vs {b}");
    }
}

#[test]
fn the_block_names_its_tensors_as_the_pytorch_module_does() {
    let block = Block::new(&config(), &mut Rng::new(0)).unwrap();
    let names: Vec<String> = block
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut file: Vec<String> = autograd_ops::persist::contents(fixture("block.safetensors"))
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    file.sort();
    assert_eq!(sorted, file);
    assert_eq!(
        names[..4],
        ["ln1.weight", "ln1.bias", "qkv.weight", "qkv.bias"]
    );
    assert_eq!(
        block.num_parameters(),
        2 * 16 + 48 * 17 + 16 * 17 + 2 * 16 + 32 * 17 + 16 * 33
    );
}

#[test]
fn a_pytorch_block_state_dict_loads_and_gives_pytorchs_outputs() {
    let mut block = Block::new(&config(), &mut Rng::new(0)).unwrap();
    block.load(fixture("block.safetensors")).unwrap();
    let io = io("block_io.safetensors");
    close(&block.forward(&io.input).unwrap(), &io.output, 1e-5);
}

#[test]
fn a_block_refuses_an_input_that_is_not_batch_time_width() {
    let block = Block::new(&config(), &mut Rng::new(0)).unwrap();
    for dims in [vec![5, 16], vec![2, 5, 8]] {
        let x = Tensor::zeros(dims, &DType::Float32).unwrap();
        let err = block.forward(&x).unwrap_err();
        assert!(matches!(err, autograd_core::Error::Value(_)), "{err}");
    }
}

/// Issue 37 item 3, "a file saved by this library loads in PyTorch": the files PyTorch is
/// checked against (`gen_state_dicts.py --check`) are the ones a seeded block saves today.
#[test]
fn the_committed_rust_block_files_are_what_this_library_saves() {
    let mut rng = Rng::new(37);
    let block = Block::new(&config(), &mut rng).unwrap();
    let input = Tensor::randn(vec![2, 5, 16], &mut rng).unwrap();
    let io = Io {
        output: block.forward(&input).unwrap(),
        input,
    };
    let dir = std::env::temp_dir().join(format!("torch-block-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fresh = dir.join("rust_block.safetensors");
    block.save(&fresh).unwrap();
    COMMITTED.file_is(&fixture("rust_block.safetensors"), &fresh);
    COMMITTED.io_is(&fixture("rust_block_io.safetensors"), &io);
    std::fs::remove_dir_all(&dir).ok();
}

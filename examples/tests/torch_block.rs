//! PyTorch interop of the transformer block (issue 37 item 3): the state dict PyTorch's
//! `safetensors.torch.save_file` wrote for the same block (tests/fixtures/torch/
//! gen_state_dicts.py) loads into `transformer::Block` by the names its derive gives and
//! reproduces PyTorch's output. The other way, the committed `rust_block*.safetensors` are
//! what this library saves for a seeded block (checked here byte for byte, so they cannot go
//! stale; `REGENERATE_FIXTURES=1` rewrites them), and the script's `--check` loads them into
//! PyTorch. It lives here, not in tests/tests/torch_interop.rs, because the block is this
//! crate's and the tests crate does not depend on this one.

use std::path::{Path, PathBuf};

use autograd_core::{DType, Rng, Tensor};
use autograd_examples::transformer::{Block, Config};
use autograd_ops::Module;

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

/// An input and the model's output on it, as buffers so that they load by name.
#[derive(Debug, Module)]
struct Io {
    #[module(buffer)]
    input: Tensor,
    #[module(buffer)]
    output: Tensor,
}

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

/// How to rewrite the committed `rust_block*` fixtures.
const REGENERATE: &str = "REGENERATE_FIXTURES=1 cargo test -p autograd-examples --test torch_block";

/// Whether this run rewrites the committed `rust_*` fixtures instead of checking them.
fn regenerating() -> bool {
    std::env::var("REGENERATE_FIXTURES").is_ok_and(|v| v == "1")
}

/// What to do about a stale committed fixture.
fn stale_help() -> String {
    format!(
        "regenerate it with `{REGENERATE}`, then check that PyTorch loads it with \
         `~/torch-venv/bin/python tests/fixtures/torch/gen_state_dicts.py --check`"
    )
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.values::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

/// Checks that the committed fixture `name` equals the file `fresh` byte for byte, or under
/// `REGENERATE_FIXTURES=1` replaces it with `fresh`.
#[track_caller]
fn committed_file_is(name: &str, fresh: &Path) {
    let path = fixture(name);
    let fresh = std::fs::read(fresh).unwrap();
    if regenerating() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let committed = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; {}", path.display(), stale_help()));
    assert!(
        committed == fresh,
        "{} ({} bytes) is not what this library saves now ({} bytes): {}",
        path.display(),
        committed.len(),
        fresh.len(),
        stale_help()
    );
}

/// Checks the committed io fixture `name` against `now`: the input bit for bit, the output
/// to 1e-6 (the kernels choose their SIMD paths by CPU, so a product's last bits may differ
/// between machines; PyTorch is held to 1e-5). Under `REGENERATE_FIXTURES=1` saves `now`.
#[track_caller]
fn committed_io_is(name: &str, now: &Io) {
    let path = fixture(name);
    if regenerating() {
        now.save(&path).unwrap();
        return;
    }
    let mut committed = Io {
        input: Tensor::zeros(now.input.dims(), &DType::Float32).unwrap(),
        output: Tensor::zeros(now.output.dims(), &DType::Float32).unwrap(),
    };
    committed
        .load(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; {}", path.display(), stale_help()));
    assert!(
        bits(&committed.input) == bits(&now.input),
        "{}: the input differs from this library's: {}",
        path.display(),
        stale_help()
    );
    let (c, n) = (
        committed.output.values::<f32>().unwrap(),
        now.output.values::<f32>().unwrap(),
    );
    for (i, (a, b)) in c.iter().zip(&n).enumerate() {
        assert!(
            (a - b).abs() <= 1e-6,
            "{}: output element {i} is {a}, this library computes {b}: {}",
            path.display(),
            stale_help()
        );
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
    committed_file_is("rust_block.safetensors", &fresh);
    committed_io_is("rust_block_io.safetensors", &io);
    std::fs::remove_dir_all(&dir).ok();
}

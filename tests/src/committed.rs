//! Files this library saves, committed beside the tests so that PyTorch's side can check them
//! (`tests/fixtures/torch/gen_state_dicts.py --check`): a test recreates each from a seed and
//! compares it with the committed one, or rewrites it under `REGENERATE_FIXTURES=1`, so the
//! committed files cannot go stale.

use std::path::Path;

use autograd_core::{DType, Tensor};
use autograd_ops::Module;

/// An input and a model's output on it, as buffers so that they save and load by name.
#[derive(Debug, Module)]
pub struct Io {
    /// The model's input.
    #[module(buffer)]
    pub input: Tensor,
    /// The model's output on it.
    #[module(buffer)]
    pub output: Tensor,
}

/// The committed files of one test, with the command that rewrites them.
#[derive(Debug, Clone, Copy)]
pub struct Committed {
    regenerate: &'static str,
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.values::<f32>()
        .expect("Float32")
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

impl Committed {
    /// The files of a test that `regenerate` (a command line) rewrites.
    pub const fn new(regenerate: &'static str) -> Committed {
        Committed { regenerate }
    }

    /// Whether this run rewrites the committed files instead of checking them.
    pub fn regenerating() -> bool {
        std::env::var("REGENERATE_FIXTURES").is_ok_and(|v| v == "1")
    }

    /// What to do about a stale committed file.
    fn stale_help(self) -> String {
        format!(
            "regenerate it with `{}`, then check that PyTorch loads it with \
             `~/torch-venv/bin/python tests/fixtures/torch/gen_state_dicts.py --check`",
            self.regenerate
        )
    }

    /// Checks that the committed file `path` equals the file `fresh` byte for byte, or under
    /// `REGENERATE_FIXTURES=1` replaces it with `fresh`.
    #[track_caller]
    pub fn file_is(self, path: &Path, fresh: &Path) {
        let fresh = std::fs::read(fresh).expect("the fresh file");
        if Committed::regenerating() {
            std::fs::write(path, &fresh).expect("the fixture is writable");
            return;
        }
        let committed = std::fs::read(path)
            .unwrap_or_else(|e| panic!("{}: {e}; {}", path.display(), self.stale_help()));
        assert!(
            committed == fresh,
            "{} ({} bytes) is not what this library saves now ({} bytes): {}",
            path.display(),
            committed.len(),
            fresh.len(),
            self.stale_help()
        );
    }

    /// Checks the committed io file `path` against `now`: the input bit for bit, the output
    /// to 1e-6 (the kernels choose their SIMD paths by CPU, so a product's last bits may
    /// differ between machines; PyTorch is held to 1e-5). Under `REGENERATE_FIXTURES=1`
    /// saves `now` there.
    #[track_caller]
    pub fn io_is(self, path: &Path, now: &Io) {
        if Committed::regenerating() {
            now.save(path).expect("the fixture is writable");
            return;
        }
        let zeros = |t: &Tensor| Tensor::zeros(t.dims(), &DType::Float32).expect("zeros");
        let mut committed = Io {
            input: zeros(&now.input),
            output: zeros(&now.output),
        };
        committed
            .load(path)
            .unwrap_or_else(|e| panic!("{}: {e}; {}", path.display(), self.stale_help()));
        assert!(
            bits(&committed.input) == bits(&now.input),
            "{}: the input differs from this library's: {}",
            path.display(),
            self.stale_help()
        );
        let (c, n) = (
            committed.output.values::<f32>().expect("Float32"),
            now.output.values::<f32>().expect("Float32"),
        );
        for (i, (a, b)) in c.iter().zip(&n).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6,
                "{}: output element {i} is {a}, this library computes {b}: {}",
                path.display(),
                self.stale_help()
            );
        }
    }
}

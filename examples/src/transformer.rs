//! A decoder-only transformer (GPT-2 shaped): token and position embeddings, pre-LayerNorm
//! blocks of causal self-attention and a GELU MLP, a final LayerNorm and a linear head. The
//! `tiny_transformer` example trains it and the bench's W6 times one training step of it.

use std::sync::Arc;

use autograd_core::{checkpoint, ensure, shape, Result, Rng, Tensor};
use autograd_ops::{
    add, cross_entropy, flash_causal_attention, gelu_tanh, linear, permute, reshape,
    CrossEntropyOptions, Embedding, LayerNorm, Linear,
};

/// The model's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Number of distinct tokens.
    pub vocab: usize,
    /// Longest sequence (positions with an embedding).
    pub context: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Attention heads per block; must divide `d_model`.
    pub heads: usize,
    /// Number of blocks.
    pub layers: usize,
    /// Width of the MLP's hidden layer.
    pub ff: usize,
    /// Checkpoint every block: keep only its input for backward and recompute its interior.
    pub checkpoint: bool,
}

/// `x + attn(ln1(x))`, then `+ mlp(ln2(.))`.
#[derive(Debug)]
struct Block {
    heads: usize,
    ln1: LayerNorm,
    qkv: Linear,
    proj: Linear,
    ln2: LayerNorm,
    up: Linear,
    down: Linear,
}

impl Block {
    fn new(c: &Config, rng: &mut Rng) -> Result<Block> {
        let d = c.d_model;
        Ok(Block {
            heads: c.heads,
            ln1: LayerNorm::new(&[d], 1e-5)?,
            qkv: Linear::new(d, 3 * d, true, rng)?,
            proj: Linear::new(d, d, true, rng)?,
            ln2: LayerNorm::new(&[d], 1e-5)?,
            up: Linear::new(d, c.ff, true, rng)?,
            down: Linear::new(c.ff, d, true, rng)?,
        })
    }

    fn parameters(&self) -> Vec<Tensor> {
        let mut p = self.ln1.parameters();
        p.extend(self.qkv.parameters());
        p.extend(self.proj.parameters());
        p.extend(self.ln2.parameters());
        p.extend(self.up.parameters());
        p.extend(self.down.parameters());
        p
    }

    /// `x` is `[B, T, C]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let &[b, t, c] = x.dims().as_slice() else {
            unreachable!("the model passes [B, T, C]")
        };
        let h = self.heads;
        let normed = self.ln1.forward(x)?;
        // q, k and v from the three row blocks of the one projection (the same parameters and
        // function as one product split afterwards), each [B, T, C] viewed as [B, H, T, C/H]:
        // every head a view without holes, so their gradients need no zero-filled buffers
        let project = |part: usize| -> Result<Tensor> {
            let w = self.qkv.weight().narrow(0, part * c, c)?;
            let bias = self
                .qkv
                .bias()
                .map(|b| b.narrow(0, part * c, c))
                .transpose()?;
            let y = linear(&normed, &w, bias.as_ref())?;
            permute(&reshape(&y, &[b, t, h, c / h])?, &[0, 2, 1, 3])
        };
        let context = flash_causal_attention(&project(0)?, &project(1)?, &project(2)?, None)?;
        let context = reshape(&permute(&context, &[0, 2, 1, 3])?, &[b, t, c])?;
        let x = add(x, &self.proj.forward(&context)?)?;
        let hidden = gelu_tanh(&self.up.forward(&self.ln2.forward(&x)?)?)?;
        add(&x, &self.down.forward(&hidden)?)
    }
}

/// The model. Parameters are initialised as PyTorch initialises `Embedding`, `Linear` and
/// `LayerNorm`.
#[derive(Debug)]
pub struct Transformer {
    config: Config,
    token: Embedding,
    position: Embedding,
    blocks: Vec<Arc<Block>>,
    ln: LayerNorm,
    head: Linear,
}

impl Transformer {
    /// A fresh model; `Error::Value` when a size is zero or `heads` does not divide `d_model`.
    pub fn new(config: Config, rng: &mut Rng) -> Result<Transformer> {
        let c = &config;
        ensure!(
            c.vocab > 0 && c.context > 0 && c.layers > 0 && c.ff > 0,
            Value,
            "transformer: every size must be positive, got {c:?}"
        );
        ensure!(
            c.heads > 0 && c.d_model.is_multiple_of(c.heads),
            Value,
            "transformer: {} heads do not divide d_model {}",
            c.heads,
            c.d_model
        );
        Ok(Transformer {
            token: Embedding::new(c.vocab, c.d_model, rng)?,
            position: Embedding::new(c.context, c.d_model, rng)?,
            blocks: (0..c.layers)
                .map(|_| Block::new(c, rng).map(Arc::new))
                .collect::<Result<_>>()?,
            ln: LayerNorm::new(&[c.d_model], 1e-5)?,
            head: Linear::new(c.d_model, c.vocab, true, rng)?,
            config,
        })
    }

    /// The sizes it was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Every parameter tensor.
    pub fn parameters(&self) -> Vec<Tensor> {
        let mut p = self.token.parameters();
        p.extend(self.position.parameters());
        for b in &self.blocks {
            p.extend(b.parameters());
        }
        p.extend(self.ln.parameters());
        p.extend(self.head.parameters());
        p
    }

    /// Logits `[B, T, vocab]` for Int32 token ids `[B, T]` with `T <= context`.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let dims = ids.dims();
        ensure!(
            dims.len() == 2 && dims[1] <= self.config.context,
            Value,
            "transformer: ids must be [B, T] with T <= {}, got {dims:?}",
            self.config.context
        );
        let t = dims[1];
        let positions = Tensor::from_vec((0..t as i32).collect::<Vec<_>>(), shape![t])?;
        // [B, T, C] + [T, C]: the position embedding broadcasts over the batch
        let mut x = add(
            &self.token.forward(ids)?,
            &self.position.forward(&positions)?,
        )?;
        for block in &self.blocks {
            x = if self.config.checkpoint {
                let params = block.parameters();
                let deps: Vec<&Tensor> = params.iter().collect();
                let block = Arc::clone(block);
                checkpoint(&[&x], &deps, move |a| block.forward(&a[0]))?
            } else {
                block.forward(&x)?
            };
        }
        self.head.forward(&self.ln.forward(&x)?)
    }

    /// The mean next-token cross-entropy of `forward(ids)` against Int32 `targets` `[B, T]`;
    /// positions whose target is `ignore` do not count.
    pub fn loss(&self, ids: &Tensor, targets: &Tensor, ignore: Option<i32>) -> Result<Tensor> {
        let logits = self.forward(ids)?;
        let rows = targets.size();
        cross_entropy(
            &reshape(&logits, &[rows, self.config.vocab])?,
            &reshape(targets, &[rows])?,
            CrossEntropyOptions {
                ignore_index: ignore,
                label_smoothing: 0.0,
            },
        )
    }
}
